/**
 * The options of a request queue (`request_queue.ts`) as it runs with them:
 * a throttler's queue settings as the defaults when the view is a throttler,
 * every option checked (a bad one throws at construction) and defaulted.
 *
 * @module
 */
import { asyncScheduler, NEVER, type SchedulerLike } from "rxjs";
import type { ThrottlerSettings } from "../settings/settings.ts";
import type { QueueThrottleView, RequestQueueOptions, RequestQueueOrder } from "./request_queue.ts";

/** The view of a queue without one: every request can be sent at once. */
export const UNLIMITED_VIEW: QueueThrottleView = {
  waitMs: () => 0,
  load: () => 0,
  quotaShare: () => 0,
  freeSlots: () => Infinity,
  changes$: NEVER,
};

const ORDERS: readonly string[] = ["throttling-aware", "downloader-aware", "priority"];

/** The options a queue runs with: checked, with their defaults. */
export interface ResolvedQueueOptions<R> {
  /** The options as given, over the throttler's queue settings. */
  readonly given: RequestQueueOptions<R>;
  readonly view: QueueThrottleView;
  readonly order: RequestQueueOrder;
  readonly fifo: boolean;
  readonly depthPriority: number;
  readonly dedupe: boolean;
  readonly threshold: number;
  readonly flushIntervalMs: number;
  readonly scheduler: SchedulerLike;
}

/**
 * A queue's options, checked and defaulted.
 *
 * @throws {RangeError} When an option is out of range (the message names it).
 */
export function resolveQueueOptions<R>(options: RequestQueueOptions<R>): ResolvedQueueOptions<R> {
  // A throttler as the view brings its settings' queue options as the
  // defaults (`createThrottler({ queue: { fifo: true } })` then
  // `new RequestQueue({ view: throttler })` pops FIFO); options given here win.
  const fromView = viewQueueSettings(options.view);
  if (fromView !== undefined) {
    options = { ...fromView, ...definedOnly(options) } as RequestQueueOptions<R>;
  }
  const order = options.order ?? "throttling-aware";
  if (!ORDERS.includes(order)) {
    throw new RangeError(
      `Cannot create request queue as 'order' must be one of ${
        ORDERS.join(", ")
      }: current value is ${JSON.stringify(order)}`,
    );
  }
  const depthPriority = options.depthPriority ?? 0;
  if (!Number.isFinite(depthPriority)) {
    throw new RangeError(
      `Cannot create request queue as 'depthPriority' must be a finite number: current value is ${depthPriority}`,
    );
  }
  const threshold = options.delayedRequestsWarnThreshold ?? 500;
  if (!(threshold >= 0)) {
    throw new RangeError(
      `Cannot create request queue as 'delayedRequestsWarnThreshold' must be >= 0: current value is ${threshold}`,
    );
  }
  const flushIntervalMs = options.flushIntervalMs ?? 1000;
  if (!(flushIntervalMs >= 0)) {
    throw new RangeError(
      `Cannot create request queue as 'flushIntervalMs' must be >= 0: current value is ${flushIntervalMs}`,
    );
  }
  return {
    given: options,
    view: options.view ?? UNLIMITED_VIEW,
    order,
    fifo: options.fifo ?? false,
    depthPriority,
    dedupe: options.dedupe ?? true,
    threshold,
    flushIntervalMs,
    scheduler: options.scheduler ?? asyncScheduler,
  };
}

/** The queue options a throttler's settings hold, when the view is a throttler. */
function viewQueueSettings(view: unknown): Partial<RequestQueueOptions<unknown>> | undefined {
  const settings = (view as { settings?: unknown } | undefined)?.settings as
    | Partial<Pick<ThrottlerSettings, "queue" | "delayedRequestsWarnThreshold">>
    | undefined;
  const q = settings?.queue;
  if (typeof q !== "object" || q === null) return undefined;
  const scheduler = (view as { scheduler?: SchedulerLike }).scheduler;
  return {
    order: q.order,
    fifo: q.fifo,
    depthPriority: q.depthPriority,
    dedupe: q.dedupe,
    ...(q.jobDir !== undefined ? { jobDir: q.jobDir } : {}),
    ...(settings?.delayedRequestsWarnThreshold !== undefined
      ? { delayedRequestsWarnThreshold: settings.delayedRequestsWarnThreshold }
      : {}),
    ...(scheduler !== undefined ? { scheduler } : {}),
  };
}

/** The options given, those set to `undefined` left out (so they do not hide a default). */
function definedOnly<T extends object>(options: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(options)) {
    if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  }
  return out;
}
