/**
 * The bottom layer of the throttler: its settings and clock, and the events
 * it emits (`events$`, the per-request-free `notices$`, the `debug` log,
 * warnings said once). The scope store (`_scope_store.ts`), the gate
 * (`_gate.ts`) and the façade (`./throttler.ts`) build on it.
 *
 * @module
 */
import { type Observable, type SchedulerLike, Subject } from "rxjs";
import { match } from "ts-pattern";
import type { ThrottleEvent } from "../events.ts";
import type { ScopeStep } from "../managers/scope_manager_protocol.ts";
import type { ThrottlerSettings } from "../settings/settings.ts";
import { formatEvent } from "./format_event.ts";

/** Events made once or more per request: not on `notices$`. */
const PER_REQUEST_EVENTS: ReadonlySet<ThrottleEvent["type"]> = new Set([
  "request-delayed",
  "request-sent",
  "request-done",
  "scope-created",
]);

/**
 * The settings, the clock and the events of a throttler. Abstract: only
 * `Throttler` is made.
 */
export abstract class ThrottlerEvents {
  /** The validated settings, with defaults. */
  readonly settings: ThrottlerSettings;
  /** The clock of every decision. */
  readonly scheduler: SchedulerLike;
  readonly #log: (line: string) => void;
  readonly #events = new Subject<ThrottleEvent>();
  readonly #notices = new Subject<ThrottleEvent>();
  readonly #warnedOnce = new Set<string>();
  /**
   * How deep in the throttler's own calls (submit, the dispatch loop) and in
   * listeners it called we are. An entry evicted deeper than the outermost
   * call may still be held by a caller up the stack: it is not reused.
   */
  protected depth = 0;
  /**
   * The clock's reading in the current stretch of the throttler's own work,
   * NaN when there is none: cleared when the gate is entered and whenever
   * code outside the throttler may have run since (an event emitted, a
   * download started, a listener called), where time passes. Within a
   * stretch the gate's decisions and the send they lead to share one
   * reading, as if read again: only the throttler's own arithmetic runs
   * between them. A clock read costs about as much as the gate's decision
   * (bench/core.bench.ts).
   */
  #reading = Number.NaN;

  /** Every throttling event, as it happens. */
  readonly events$: Observable<ThrottleEvent> = this.#events.asObservable();

  /**
   * Every event except those made once or more per request
   * (`request-delayed`, `request-sent`, `request-done`, `scope-created`):
   * backoff, holds, recovery, rampup steps, announcements, retries,
   * robots.txt, evictions, warnings. Listening here costs nothing per
   * request (the per-request events are not built for it); with
   * `Throttler.meterTraffic` it is what a live view needs.
   */
  readonly notices$: Observable<ThrottleEvent> = this.#notices.asObservable();

  constructor(settings: ThrottlerSettings, scheduler: SchedulerLike, log: (line: string) => void) {
    this.settings = settings;
    this.scheduler = scheduler;
    this.#log = log;
  }

  /** @internal Whether anyone listens to every event (to skip building the per-request ones). */
  get observed(): boolean {
    return this.#events.observed || this.settings.debug;
  }

  /** @internal Whether anyone listens to the events of `notices$` (to skip building them). */
  get noticed(): boolean {
    return this.#events.observed || this.#notices.observed || this.settings.debug;
  }

  /** @internal Emit an event (for the operators of this package). */
  emit(event: ThrottleEvent): void {
    if (this.settings.debug) this.#log(`[politely] ${formatEvent(event)}`);
    this.depth++;
    try {
      this.#events.next(event);
      if (this.#notices.observed && !PER_REQUEST_EVENTS.has(event.type)) this.#notices.next(event);
    } finally {
      this.depth--;
      this.#reading = Number.NaN; // listeners ran
    }
  }

  /** The clock's reading of the current stretch (see `#reading`), read now if there is none. */
  protected clock(): number {
    let t = this.#reading;
    if (t !== t) t = this.#reading = this.scheduler.now(); // NaN: none
    return t;
  }

  /** Time may have passed (the gate was entered, or called out): the next `clock()` reads anew. */
  protected clockStale(): void {
    this.#reading = Number.NaN;
  }

  /** Emit a warning event once per `key` (and log it in debug mode). */
  warnOnce(key: string, code: string, message: string, scope?: string): void {
    if (this.#warnedOnce.has(key)) return;
    this.#warnedOnce.add(key);
    const at = this.scheduler.now();
    this.emit(
      scope === undefined
        ? { type: "warning", at, code, message }
        : { type: "warning", at, code, message, scope },
    );
  }

  /** Emit the event of a step a scope's manager took by itself. */
  protected emitStep(scope: string, step: ScopeStep, at: number): void {
    if (!this.noticed) return;
    this.emit(
      match(step)
        .with({ kind: "recovery" }, (s): ThrottleEvent => ({
          type: "recovery",
          at,
          scope,
          delayMs: s.delayMs,
          level: s.level,
        }))
        .with({ kind: "rampup" }, (s): ThrottleEvent => ({
          type: "rampup",
          at,
          scope,
          delayMs: s.delayMs,
          concurrency: s.concurrency,
          why: s.why,
        }))
        .with({ kind: "backoff" }, (s): ThrottleEvent => ({
          type: "backoff",
          at,
          scope,
          delayMs: s.delayMs,
          level: s.level,
          concurrency: s.concurrency,
          holdUntil: s.holdUntil,
          cause: s.cause,
        }))
        .with({ kind: "hold" }, (s): ThrottleEvent => ({
          type: "hold",
          at,
          scope,
          until: s.until,
          source: "retry-after",
        }))
        .exhaustive(),
    );
  }
}
