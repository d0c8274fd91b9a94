/**
 * A whole command-line crawl: requests from the input go through the request
 * queue (priorities, dedupe, job directory), the throttling gate and backoff;
 * every request ends as one outcome line; the live view or the plain log
 * shows it happening; a summary closes it. Used by `politely crawl` and
 * `politely demo`.
 *
 * @module
 */
import {
  asapScheduler,
  asyncScheduler,
  concatMap,
  EMPTY,
  from,
  interval,
  map,
  mergeMap,
  type Observable,
  observeOn,
  of,
  type SchedulerLike,
  Subscription,
} from "rxjs";
import type { ThrottleEvent } from "../events.ts";
import { createFetchDownload, type FetchedResponse } from "../fetch_download.ts";
import { hostScope } from "../domain_scopes.ts";
import { type Outcome, outcomeStatus } from "../outcome.ts";
import { requestMeta, type RequestObject, requestUrl } from "../request.ts";
import { type QueueThrottleView, RequestQueue } from "../request_queue.ts";
import { crawlDelayDecision, createRobotsTxtCache, type RobotsTxtCache } from "../robots_txt.ts";
import type { ThrottlerSettingsInput } from "../settings.ts";
import { createThrottler, type Throttler } from "../throttler.ts";
import { backoffOn } from "../../operators/backoff_on.ts";
import { type DownloadFn, throttleByScope } from "../../operators/throttle_by_scope.ts";
import { CrawlStats } from "./crawl_stats.ts";
import type { InputLine, InputLineError } from "./input.ts";
import type { JsonLinesFile } from "./json_lines_file.ts";
import {
  type LiveScopeRow,
  type LiveViewState,
  renderLiveView,
  type TerminalLike,
  TerminalScreen,
} from "./live_view.ts";
import { formatPlainEvent, formatProgressLine } from "./plain_log.ts";

/** How the crawl shows itself while it runs. */
export type ViewMode = "live" | "plain" | "quiet";

/** Options of {@link runCrawl}. */
export interface CrawlOptions {
  /** Settings (already validated by `resolveCliSettings`). */
  readonly settings: ThrottlerSettingsInput;
  /** The input, line by line. */
  readonly input: AsyncIterable<InputLine> | Iterable<InputLine>;
  /** Job directory (pending requests and seen fingerprints survive a stop). @default settings' queue.jobDir */
  readonly jobDir?: string | undefined;
  /** One JSON line per request. */
  readonly output?: JsonLinesFile | undefined;
  /** One JSON line per throttling event. */
  readonly events?: JsonLinesFile | undefined;
  /** Live view (a TTY), plain log lines, or nothing. */
  readonly view: ViewMode;
  /** Where the view, the log and the summary go. */
  readonly stdout: TerminalLike & { readonly rows?: number | undefined };
  /** Where warnings go. */
  readonly stderr: { write(text: string): unknown };
  /** First word of the view's header. @default "politely crawl" */
  readonly title?: string;
  /** A line under the live view. */
  readonly note?: string;
  /** Clock and timers. @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
  /** The download. @default fetch with the settings' timeout and User-Agent */
  readonly download?: DownloadFn<RequestObject, FetchedResponse>;
  /** Requests a response leads to (link following), enqueued before the response is marked done. */
  readonly follow?: (outcome: Outcome<RequestObject, FetchedResponse>) => Iterable<RequestObject>;
  /** Stops the crawl (Ctrl-C): in-flight downloads are aborted, pending requests stay in the job directory. */
  readonly stop?: AbortSignal;
  /** Stop after this long (the demo). */
  readonly durationMs?: number;
  /** Live view refresh period. @default 250 */
  readonly refreshMs?: number;
  /** Plain mode progress line period. @default 5000 */
  readonly progressEveryMs?: number;
}

/** How a crawl went. */
export interface CrawlResult {
  readonly stats: CrawlStats;
  /** Why it ended before every request did: `"signal"` (Ctrl-C), `"duration"`, or `undefined` (it finished). */
  readonly stoppedBy: "signal" | "duration" | undefined;
  /** Scheduler time at the end. */
  readonly endedAt: number;
  /** Requests not ended (kept in the job directory when there is one). */
  readonly pending: number;
  /** Duplicates dropped. */
  readonly filtered: number;
  /** The throttler, for a last look at its scopes. */
  readonly throttler: Throttler<RequestObject>;
}

/** A request that robots.txt disallows; it ends as a failed outcome and is not sent. */
export class RobotsDisallowedError extends Error {
  override readonly name = "RobotsDisallowedError";
  readonly url: string;
  constructor(url: string) {
    super(`robots.txt disallows ${url}`);
    this.url = url;
  }
}

/**
 * The JSON line of an outcome (`--output`).
 *
 * @param outcome The final outcome of a request.
 * @returns `{url, status | error, attempts, scopes, sentAt (ISO), latencyMs, exhausted?}`.
 */
export function outcomeRecord(outcome: Outcome<unknown, unknown>): Record<string, unknown> {
  const status = outcomeStatus(outcome);
  const record: Record<string, unknown> = { url: requestUrl(outcome.request) ?? null };
  if (outcome.kind === "response") record.status = status ?? null;
  else record.error = describeError(outcome.error);
  record.attempts = outcome.attempt;
  record.scopes = outcome.scopes;
  record.sentAt = Number.isFinite(outcome.sentAt) ? new Date(outcome.sentAt).toISOString() : null;
  record.latencyMs = Math.round(outcome.latencyMs * 10) / 10;
  if (outcome.exhausted === true) record.exhausted = true;
  return record;
}

/** The JSON line of an input line that is not a request. */
export function inputErrorRecord(error: InputLineError): Record<string, unknown> {
  return {
    url: null,
    error: describeError(error),
    line: error.line,
    input: error.text,
    attempts: 0,
    scopes: [],
    sentAt: null,
    latencyMs: 0,
  };
}

function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message.split("\n")[0]}`;
  return String(error);
}

/**
 * Run a crawl to its end (or until stopped).
 *
 * @param options Input, settings, files, view, stop signal.
 * @returns The stats and how it ended.
 * @throws {Error} When the job directory cannot be opened (one line).
 */
export function runCrawl(options: CrawlOptions): Promise<CrawlResult> {
  const scheduler = options.scheduler ?? asyncScheduler;
  const stderr = options.stderr;
  const stdout = options.stdout;
  const throttler = createThrottler<RequestObject>(options.settings, {
    scheduler,
    log: (line) => stderr.write(`${line}\n`),
  });
  const settings = throttler.settings;
  const stats = new CrawlStats(scheduler.now());
  const output = options.output;
  let robotsPending = 0;
  const robotsApplied = new Set<string>();

  const onEvent = (event: ThrottleEvent) => {
    stats.recordEvent(event);
    options.events?.write(event);
    if (options.view === "plain") {
      const line = formatPlainEvent(event, stats.startedAt);
      if (line !== undefined) stdout.write(`${line}\n`);
    }
  };
  const eventsSub = throttler.events$.subscribe(onEvent);

  const view: QueueThrottleView = {
    waitMs: (scopes, amounts) => throttler.waitMs(scopes, amounts),
    load: (scopes) => throttler.load(scopes),
    quotaShare: () => 0,
    freeSlots: () => Math.max(0, throttler.freeSlots() - robotsPending),
    // Every scope change (a send, a release, backoff, recovery) names its scope.
    // Deferred to a microtask: the throttler announces a release while it is
    // still freeing the request's slots, and must not be re-entered from there.
    changes$: throttler.states$.pipe(map((s) => [s.scope]), observeOn(asapScheduler)),
  };
  const start$ = from(options.input).pipe(
    concatMap((line): Observable<RequestObject> => {
      if (line.kind === "request") return of(line.request);
      if (line.kind === "error") {
        output?.write(inputErrorRecord(line.error));
        stats.recordFinal(undefined, true);
        stderr.write(`politely: input ${line.error.message}\n`);
      }
      return EMPTY;
    }),
  );
  const jobDir = options.jobDir ?? settings.queue.jobDir;
  let queue: RequestQueue<RequestObject>;
  try {
    queue = new RequestQueue<RequestObject>({
      view,
      scheduler,
      start: start$,
      order: settings.queue.order,
      fifo: settings.queue.fifo,
      depthPriority: settings.queue.depthPriority,
      dedupe: settings.queue.dedupe,
      delayedRequestsWarnThreshold: settings.delayedRequestsWarnThreshold,
      ...(jobDir !== undefined ? { jobDir } : {}),
    });
  } catch (error) {
    eventsSub.unsubscribe();
    const message = error instanceof Error ? error.message.split("\n")[0] : String(error);
    return Promise.reject(new Error(`Cannot open job directory '${jobDir}': ${message}`));
  }
  const warningsSub = queue.warnings$.subscribe(onEvent);

  const fetchDownload = options.download ??
    createFetchDownload({ timeoutMs: settings.downloadTimeoutMs, userAgent: settings.userAgent });
  const robots = settings.robotsTxtObey
    ? createRobotsTxtCache({
      fetch: (url, init) => fetch(url, { ...init, headers: { "user-agent": settings.userAgent } }),
      userAgent: settings.userAgent,
      scheduler,
      timeoutMs: settings.downloadTimeoutMs,
    })
    : undefined;
  const download: DownloadFn<RequestObject, FetchedResponse> = robots === undefined
    ? fetchDownload
    : (request, context) => {
      const rules = robots.peek(request.url);
      if (rules !== undefined && !rules.isAllowed(request.url)) {
        return Promise.reject(new RobotsDisallowedError(request.url));
      }
      return fetchDownload(request, context);
    };
  const robotsStep = robots === undefined
    ? (source: Observable<RequestObject>) => source
    : (source: Observable<RequestObject>) =>
      source.pipe(mergeMap((request) => {
        if (robots.peek(request.url) !== undefined) return of(request);
        robotsPending++;
        return from(
          applyRobots(throttler, robots, request, robotsApplied).then(() => request, () => request)
            .finally(() => {
              robotsPending--;
            }),
        );
      }));

  return new Promise<CrawlResult>((resolve) => {
    let stoppedBy: CrawlResult["stoppedBy"];
    let finished = false;
    const pipeline = new Subscription();
    const screen = options.view === "live" ? new TerminalScreen(stdout) : undefined;
    let lastProgress = scheduler.now();
    const deadline = options.durationMs === undefined
      ? undefined
      : stats.startedAt + options.durationMs;

    const state = (): LiveViewState => {
      const now = scheduler.now();
      const q = queue.stats();
      const done = stats.finished;
      const total = done + q.pending + q.inFlight;
      const elapsedMs = now - stats.startedAt;
      let etaMs = done > 0 && total > done ? ((total - done) * elapsedMs) / done : undefined;
      if (deadline !== undefined) etaMs = Math.max(0, Math.min(etaMs ?? Infinity, deadline - now));
      const order = [...stats.scopes.keys()];
      const all = throttler.states()
        .filter((s) =>
          s.active > 0 || s.holdUntil > now || s.backoffLevel > 0 || stats.rate(s.scope, now) > 0
        )
        .sort((a, b) => rank(order, a.scope) - rank(order, b.scope));
      const room = Math.max(
        3,
        (stdout.rows !== undefined && stdout.rows > 0 ? stdout.rows : 24) - 6,
      );
      const rows: LiveScopeRow[] = all.slice(0, room).map((s) => ({
        scope: s.scope,
        active: s.active,
        concurrency: s.concurrency,
        delayMs: s.delayMs,
        backoffLevel: s.backoffLevel,
        holdLeftMs: Math.max(0, s.holdUntil - now),
        counts: stats.scope(s.scope).counts,
        ratePerSec: stats.rate(s.scope, now),
      }));
      return {
        title: options.title ?? "politely crawl",
        elapsedMs,
        done,
        total,
        inFlight: throttler.active,
        queued: q.pending + throttler.held,
        retries: stats.retries,
        failures: stats.failures,
        etaMs,
        rows,
        hiddenScopes: all.length - rows.length,
        ...(options.note !== undefined ? { note: options.note } : {}),
      };
    };

    const tick = () => {
      output?.flush();
      options.events?.flush();
      if (screen !== undefined) screen.draw(renderLiveView(state(), screen.width));
      else if (options.view === "plain") {
        const now = scheduler.now();
        if (now - lastProgress >= (options.progressEveryMs ?? 5000)) {
          lastProgress = now;
          stdout.write(`${formatProgressLine(state())}\n`);
        }
      }
      if (deadline !== undefined && scheduler.now() >= deadline) end("duration");
    };
    const ticker = interval(options.refreshMs ?? 250, scheduler).subscribe(tick);

    const onStop = () => end("signal");
    options.stop?.addEventListener("abort", onStop, { once: true });

    const end = (why: CrawlResult["stoppedBy"]) => {
      if (finished) return;
      finished = true;
      stoppedBy = why;
      // Unsubscribing aborts the downloads in flight; they are not marked done, so
      // the job directory keeps them as pending.
      pipeline.unsubscribe();
      ticker.unsubscribe();
      options.stop?.removeEventListener("abort", onStop);
      if (screen !== undefined) {
        screen.draw(renderLiveView(state(), screen.width));
        screen.close();
      } else if (options.view === "plain") stdout.write(`${formatProgressLine(state())}\n`);
      const q = queue.stats();
      queue.close();
      warningsSub.unsubscribe();
      eventsSub.unsubscribe();
      output?.close();
      options.events?.close();
      resolve({
        stats,
        stoppedBy,
        endedAt: scheduler.now(),
        pending: q.pending + q.inFlight,
        filtered: q.filtered,
        throttler,
      });
    };

    pipeline.add(
      queue.requests$.pipe(
        robotsStep,
        throttleByScope(throttler, download),
        backoffOn(throttler),
      ).subscribe({
        next: (outcome) => {
          const status = outcomeStatus(outcome);
          output?.write(outcomeRecord(outcome));
          stats.recordFinal(status, outcome.kind === "error" || outcome.exhausted === true);
          if (options.follow !== undefined && outcome.kind === "response") {
            for (const next of options.follow(outcome)) {
              try {
                queue.enqueue(next);
              } catch {
                // A link that is not a request (no host, bad scheme) is not followed.
              }
            }
          }
          queue.markDone(outcome.request);
        },
        error: (error: unknown) => {
          stderr.write(`politely: ${describeError(error)}\n`);
          end(undefined);
        },
        complete: () => end(undefined),
      }),
    );
    if (options.stop?.aborted === true) end("signal");
  });
}

function rank(order: readonly string[], scope: string): number {
  const i = order.indexOf(scope);
  return i < 0 ? order.length : i;
}

/** Fetch a request's robots.txt (once per origin) and apply its Crawl-delay to the request's host scope. */
async function applyRobots(
  throttler: Throttler<RequestObject>,
  robots: RobotsTxtCache,
  request: RequestObject,
  applied: Set<string>,
): Promise<void> {
  const rules = await robots.get(request.url);
  if (requestMeta(request)?.throttlingScopes !== undefined) return;
  const scope = hostScope(request.url);
  if (applied.has(scope)) return;
  applied.add(scope);
  const config = throttler.scopeConfig(scope);
  const decision = crawlDelayDecision(
    {
      concurrency: config.concurrency,
      delayMs: config.delayMs,
      explicit: throttler.settings.scopes[scope] !== undefined,
      ignoreRobotsTxt: config.ignoreRobotsTxt,
    },
    rules.crawlDelayMs,
    throttler.settings.robotsTxtMaxDelayMs,
  );
  const at = throttler.scheduler.now();
  if (decision.kind === "apply") {
    throttler.setConcurrency(scope, decision.apply.concurrency);
    throttler.setBaseDelay(scope, decision.apply.delayMs);
    throttler.emit({
      type: "robots",
      at,
      scope,
      crawlDelayMs: rules.crawlDelayMs,
      decision: "applied",
    });
  } else if (decision.warning !== undefined) {
    throttler.warnOnce(`robots:${scope}`, "robots-crawl-delay", decision.warning, scope);
  }
}
