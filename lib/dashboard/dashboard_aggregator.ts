/**
 * The dashboard's memory: a throttler's events and scope states folded into
 * bounded per-scope time series (one point per tick), a bounded event log and
 * totals. The server sends what this keeps, never the raw event stream.
 *
 * Size: the snapshot types the web page reads are declared here beside the
 * code that fills them (about half the file).
 *
 * @module
 */
import { interval, type Observable, type SchedulerLike, Subject, type Subscription } from "rxjs";
import { match } from "ts-pattern";
import type { ThrottleEvent, ThrottleEventType } from "../events.ts";
import type { ScopeState } from "../managers/scope_manager_protocol.ts";
import type { TrafficMeter } from "../throttler/throttler.ts";
import { type SeriesColumn, SeriesRing } from "./_series_ring.ts";

/** What the aggregator reads of a throttler (a `Throttler` is one). */
export interface DashboardSource {
  /** Every throttling event. */
  readonly events$: Observable<ThrottleEvent>;
  /**
   * The events that are not made per request (a `Throttler`'s). With
   * `meterTraffic`, the aggregator listens here and counts requests with the
   * meter, so the throttler builds no event per request for it.
   */
  readonly notices$?: Observable<ThrottleEvent>;
  /** Counts of requests per scope (a `Throttler`'s `meterTraffic`). */
  meterTraffic?(): TrafficMeter;
  /** A scope's state, `undefined` when not in memory; must not create the scope. */
  state(scope: string): ScopeState | undefined;
  /** The clock of the events' `at` and of the ticks. */
  readonly scheduler: SchedulerLike;
  /** Requests in flight. */
  readonly active: number;
  /** Requests waiting at the gate. */
  readonly held: number;
  /** Scopes in memory. */
  readonly scopeCount: number;
}

/** Bounds and cadence of a {@link DashboardAggregator}. */
export interface DashboardAggregatorOptions {
  /** How often a point is taken and a snapshot made, ms. @default 1000 */
  readonly tickMs?: number;
  /** Points kept per scope (the history window is this times `tickMs`). @default 300 */
  readonly historyPoints?: number;
  /** Scopes with a time series; the least active are dropped beyond it. @default 200 */
  readonly maxScopes?: number;
  /** Scopes whose whole series a newly connected page gets (the most active). @default 12 */
  readonly topScopes?: number;
  /** Entries of the event log kept. @default 500 */
  readonly maxEvents?: number;
  /** Marks (backoff, hold, rampup...) kept per scope. @default 50 */
  readonly maxMarks?: number;
  /** The name shown for a scope. @default String */
  readonly label?: (scope: string) => string;
}

/** A moment worth marking on a scope's plots. */
export interface DashboardMark {
  /** Scheduler time, ms. */
  readonly at: number;
  readonly kind: "backoff" | "recovery" | "hold" | "rampup" | "retry" | "announced" | "robots";
  readonly text: string;
}

/** One line of the event log. */
export interface DashboardLogEntry {
  /** Increases by one per entry; a gap means entries were dropped. */
  readonly seq: number;
  readonly at: number;
  readonly type: ThrottleEventType;
  readonly scope: string | undefined;
  readonly text: string;
}

/** One scope in the table: its state at the last tick and its counts. */
export interface DashboardRow {
  readonly scope: string;
  readonly label: string;
  readonly active: number;
  readonly concurrency: number | null;
  readonly delayMs: number | null;
  readonly backoffLevel: number;
  readonly holdLeftMs: number;
  readonly rampup: boolean;
  readonly quota: { readonly used: number; readonly limit: number } | undefined;
  readonly robots: string | undefined;
  readonly sent: number;
  readonly done: number;
  readonly errors: number;
  /** Sends in the last tick, per second. */
  readonly sentPerSec: number;
  readonly donePerSec: number;
  /** Decaying activity; the table's default order and the top-N ranking. */
  readonly score: number;
}

/** Counts over the whole crawl (not bounded by the tracked scopes). */
export interface DashboardTotals {
  readonly startedAt: number;
  readonly elapsedMs: number;
  readonly sent: number;
  readonly done: number;
  readonly errors: number;
  readonly retries: number;
  readonly backoffs: number;
  readonly holds: number;
  readonly inFlight: number;
  readonly held: number;
  /** Scopes in the throttler's memory. */
  readonly scopes: number;
  /** Scopes with a time series here. */
  readonly tracked: number;
  /** Scopes dropped from tracking so far (least active first). */
  readonly untracked: number;
}

/** One tick: sent to every page once per tick. */
export interface DashboardSnapshot {
  /** The tick's number (the SSE event id). */
  readonly seq: number;
  readonly at: number;
  readonly totals: DashboardTotals;
  /** Every tracked scope, most active first. */
  readonly rows: readonly DashboardRow[];
  /** Log entries since the previous snapshot (at most `maxEvents`). */
  readonly log: readonly DashboardLogEntry[];
  /** Marks since the previous snapshot, per scope. */
  readonly marks: Readonly<Record<string, readonly DashboardMark[]>>;
}

/** A scope's whole history window, ready for uPlot (`null` for gaps). */
export interface DashboardSeries {
  readonly scope: string;
  readonly label: string;
  /** Seconds (scheduler time / 1000) of each point. */
  readonly t: readonly number[];
  readonly columns: Readonly<Record<SeriesColumn, readonly (number | null)[]>>;
  readonly marks: readonly DashboardMark[];
}

/** What a page gets first: the window it missed or never saw. */
export interface DashboardHistory {
  readonly seq: number;
  readonly at: number;
  readonly tickMs: number;
  readonly historyPoints: number;
  readonly totals: DashboardTotals;
  readonly rows: readonly DashboardRow[];
  /** The series of the `topScopes` most active scopes. */
  readonly series: readonly DashboardSeries[];
  /** The whole log window. */
  readonly log: readonly DashboardLogEntry[];
}

interface Tracked {
  readonly scope: string;
  readonly label: string;
  /** Made at the first tick the scope is kept through: most scopes of a broad crawl never get one. */
  ring: SeriesRing | undefined;
  readonly marks: DashboardMark[];
  newMarks: DashboardMark[] | undefined;
  sent: number;
  done: number;
  errors: number;
  tickSent: number;
  tickDone: number;
  tickErrors: number;
  score: number;
  robots: string | undefined;
  row: DashboardRow | undefined;
}

const SCORE_DECAY = 0.8;
/** How often a full table may shed its least active half between two ticks. */
const TRIMS_PER_TICK = 4;

/**
 * Folds a throttler's events into bounded time series. Memory is fixed by
 * the options whatever the crawl's length or breadth: `maxScopes` rings of
 * `historyPoints` points, `maxMarks` marks each, `maxEvents` log entries.
 * Between two ticks at most twice `maxScopes` scopes are tracked; the tick
 * drops the least active back to `maxScopes`.
 *
 * @example Fold a scripted stream in virtual time
 * ```ts
 * import { Subject } from "rxjs";
 * import { VirtualTimeScheduler } from "rxjs";
 * import { DashboardAggregator } from "./dashboard_aggregator.ts";
 * import type { ThrottleEvent } from "../events.ts";
 * const scheduler = new VirtualTimeScheduler();
 * const events$ = new Subject<ThrottleEvent>();
 * const agg = new DashboardAggregator(
 *   { events$, scheduler, state: () => undefined, active: 0, held: 0, scopeCount: 1 },
 * );
 * agg.start();
 * events$.next({ type: "request-sent", at: 0, scopes: ["a.test"], attempt: 1 });
 * scheduler.maxFrames = 1000;
 * scheduler.flush();
 * console.assert(agg.history().rows[0]?.sent === 1);
 * agg.close();
 * ```
 */
export class DashboardAggregator {
  readonly tickMs: number;
  readonly historyPoints: number;
  readonly maxScopes: number;
  readonly topScopes: number;
  readonly maxEvents: number;
  readonly maxMarks: number;
  readonly #source: DashboardSource;
  readonly #label: (scope: string) => string;
  readonly #tracked = new Map<string, Tracked>();
  /** Rings of dropped scopes, for the next ones (a broad crawl churns through scopes). */
  readonly #pool: SeriesRing[] = [];
  /** The time of each slot of the rings, seconds. */
  readonly #clock: Float64Array;
  /** Slots written so far (the next slot is `#ticks % historyPoints`). */
  #ticks = 0;
  readonly #log: (DashboardLogEntry | undefined)[];
  #logSeq = 0;
  /** The log's seq at the previous snapshot. */
  #logSent = 0;
  readonly #startedAt: number;
  #sent = 0;
  #done = 0;
  #errors = 0;
  #retries = 0;
  #backoffs = 0;
  #holds = 0;
  #untracked = 0;
  #trimsThisTick = 0;
  #rows: DashboardRow[] = [];
  #subscription: Subscription | undefined;
  /** The source's traffic meter while started, when it has one. */
  #meter: TrafficMeter | undefined;
  readonly #snapshots = new Subject<DashboardSnapshot>();
  #last: DashboardSnapshot | undefined;

  /** One snapshot per tick, from `start()` until `close()`. */
  readonly snapshots$: Observable<DashboardSnapshot> = this.#snapshots.asObservable();

  /**
   * @param source The throttler (or anything shaped like one) to watch.
   * @param options Bounds and cadence.
   * @throws {RangeError} When a bound is not a whole number >= 1 (`tickMs` > 0).
   */
  constructor(source: DashboardSource, options: DashboardAggregatorOptions = {}) {
    this.#source = source;
    this.tickMs = positive("tickMs", options.tickMs ?? 1000, false);
    this.historyPoints = positive("historyPoints", options.historyPoints ?? 300, true);
    this.maxScopes = positive("maxScopes", options.maxScopes ?? 200, true);
    this.topScopes = positive("topScopes", options.topScopes ?? 12, true);
    this.maxEvents = positive("maxEvents", options.maxEvents ?? 500, true);
    this.maxMarks = positive("maxMarks", options.maxMarks ?? 50, true);
    this.#label = options.label ?? String;
    this.#clock = new Float64Array(this.historyPoints).fill(NaN);
    this.#log = new Array(this.maxEvents);
    this.#startedAt = source.scheduler.now();
  }

  /** Start listening to events and ticking (on the source's scheduler). Idempotent. */
  start(): void {
    if (this.#subscription !== undefined) return;
    const source = this.#source;
    // Requests counted by a meter when the source has one (no event per
    // request is built then), else from the request events.
    const metered = source.notices$ !== undefined && source.meterTraffic !== undefined;
    const sub = (metered ? source.notices$! : source.events$).subscribe((event) =>
      this.record(event)
    );
    if (metered) {
      const meter = source.meterTraffic!();
      this.#meter = meter;
      sub.add(() => {
        meter.close();
        this.#meter = undefined;
      });
    }
    sub.add(interval(this.tickMs, this.#source.scheduler).subscribe(() => this.tick()));
    this.#subscription = sub;
  }

  /** Stop listening and ticking; completes `snapshots$`. */
  close(): void {
    this.#subscription?.unsubscribe();
    this.#subscription = undefined;
    this.#snapshots.complete();
  }

  /** The latest snapshot, `undefined` before the first tick. */
  get last(): DashboardSnapshot | undefined {
    return this.#last;
  }

  /** Fold one event in (`start()` calls it for every event of the source). */
  record(event: ThrottleEvent): void {
    // Nearly every event is one of these four, once or more per request:
    // plain branches, before ts-pattern's match (about a microsecond each).
    // Waits and new scopes show in the scopes' state; too many to log.
    if (event.type === "request-delayed" || event.type === "scope-created") return;
    if (event.type === "request-sent") {
      this.#sent++;
      for (const s of event.scopes) this.#countScope(s, 1, 0, 0);
      return;
    }
    if (event.type === "request-done") {
      this.#done++;
      const failed = event.error !== undefined ||
        (event.status !== undefined && event.status >= 400);
      if (failed) this.#errors++;
      for (const s of event.scopes) this.#countScope(s, 0, 1, failed ? 1 : 0);
      return;
    }
    match(event)
      .with({ type: "scope-evicted" }, (e) => {
        if (e.reason === "limit") this.#logEvent(e, e.scope, `evicted (${e.reason})`);
      })
      .with({ type: "backoff" }, (e) => {
        this.#backoffs++;
        const text =
          `backoff level ${e.level}: delay ${ms(e.delayMs)}, concurrency ${e.concurrency}` +
          ` (${e.cause})`;
        this.#mark(e.scope, e.at, "backoff", text);
        this.#logEvent(e, e.scope, text);
      })
      .with({ type: "recovery" }, (e) => {
        const text = `recovery to level ${e.level}: delay ${ms(e.delayMs)}`;
        this.#mark(e.scope, e.at, "recovery", text);
        this.#logEvent(e, e.scope, text);
      })
      .with({ type: "hold" }, (e) => {
        this.#holds++;
        const text = `hold ${ms(e.until - e.at)} (${e.source})`;
        this.#mark(e.scope, e.at, "hold", text);
        this.#logEvent(e, e.scope, text);
      })
      .with({ type: "announced" }, (e) => {
        const parts = [
          e.limit !== undefined ? `limit ${e.limit}` : undefined,
          e.windowMs !== undefined ? `per ${ms(e.windowMs)}` : undefined,
          e.remaining !== undefined ? `remaining ${e.remaining}` : undefined,
          e.resetAt !== undefined ? `reset in ${ms(e.resetAt - e.at)}` : undefined,
        ].filter((p) => p !== undefined);
        const text = `announced ${parts.join(", ") || "nothing usable"}`;
        this.#mark(e.scope, e.at, "announced", text);
        this.#logEvent(e, e.scope, text);
      })
      .with({ type: "rampup" }, (e) => {
        const text = `rampup: delay ${ms(e.delayMs)}, concurrency ${e.concurrency} (${e.why})`;
        this.#mark(e.scope, e.at, "rampup", text);
        this.#logEvent(e, e.scope, text);
      })
      .with({ type: "retry" }, (e) => {
        this.#retries++;
        const text = `retry attempt ${e.attempt} (${e.cause})`;
        for (const s of e.scopes) this.#mark(s, e.at, "retry", text);
        this.#logEvent(e, e.scopes[0], text);
      })
      .with({ type: "robots" }, (e) => {
        const text = `robots.txt: ${e.decision}` +
          (e.crawlDelayMs !== undefined ? `, crawl-delay ${ms(e.crawlDelayMs)}` : "");
        const t = this.#track(e.scope);
        if (t !== undefined) t.robots = text;
        this.#mark(e.scope, e.at, "robots", text);
        this.#logEvent(e, e.scope, text);
      })
      .with({ type: "warning" }, (e) => this.#logEvent(e, e.scope, `${e.code}: ${e.message}`))
      .exhaustive();
  }

  /** Take one point per tracked scope, drop the least active beyond `maxScopes`, emit a snapshot. */
  tick(): DashboardSnapshot {
    if (this.#meter !== undefined) this.#countTraffic(this.#meter);
    const now = this.#source.scheduler.now();
    const slot = this.#ticks % this.historyPoints;
    this.#ticks++;
    this.#clock[slot] = now / 1000;
    const perSec = 1000 / this.tickMs;
    // Trimmed first: a scope dropped now costs no state lookup, row or ring.
    const ranked = this.#trim();
    this.#trimsThisTick = 0;
    const marks: Record<string, DashboardMark[]> = {};
    for (const t of ranked) {
      const state = this.#source.state(t.scope);
      t.sent += t.tickSent;
      t.done += t.tickDone;
      t.errors += t.tickErrors;
      t.score = activity(t);
      t.ring ??= this.#pool.pop()?.reset() ?? new SeriesRing(this.historyPoints);
      // An evicted scope keeps its history; its limits are unknown from now on.
      t.ring.write(slot, {
        sent: t.tickSent * perSec,
        done: t.tickDone * perSec,
        errors: t.tickErrors * perSec,
        delayMs: state?.delayMs ?? NaN,
        concurrency: state?.concurrency ?? NaN,
        active: state?.active ?? 0,
      });
      t.row = {
        scope: t.scope,
        label: t.label,
        active: state?.active ?? 0,
        concurrency: state?.concurrency ?? null,
        delayMs: state?.delayMs ?? null,
        backoffLevel: state?.backoffLevel ?? 0,
        holdLeftMs: state === undefined ? 0 : Math.max(0, state.holdUntil - now),
        rampup: state?.rampup ?? false,
        quota: state?.quota === undefined
          ? undefined
          : { used: state.quota.used, limit: state.quota.limit },
        robots: t.robots,
        sent: t.sent,
        done: t.done,
        errors: t.errors,
        sentPerSec: t.tickSent * perSec,
        donePerSec: t.tickDone * perSec,
        score: t.score,
      };
      t.tickSent = t.tickDone = t.tickErrors = 0;
      if (t.newMarks !== undefined) {
        marks[t.scope] = t.newMarks;
        t.newMarks = undefined;
      }
    }
    this.#rows = ranked.map((t) => t.row!);
    const snapshot: DashboardSnapshot = {
      seq: this.#ticks,
      at: now,
      totals: this.#totals(now),
      rows: this.#rows,
      log: this.#logSince(this.#logSent),
      marks,
    };
    this.#logSent = this.#logSeq;
    this.#last = snapshot;
    this.#snapshots.next(snapshot);
    return snapshot;
  }

  /** The whole window: the top scopes' series and the log, for a page that connects. */
  history(): DashboardHistory {
    const now = this.#source.scheduler.now();
    const top = this.#rows.slice(0, this.topScopes);
    return {
      seq: this.#ticks,
      at: now,
      tickMs: this.tickMs,
      historyPoints: this.historyPoints,
      totals: this.#totals(now),
      rows: this.#rows,
      series: top.flatMap((r) => {
        const s = this.series(r.scope);
        return s === undefined ? [] : [s];
      }),
      log: this.#logSince(0),
    };
  }

  /** One tracked scope's window, `undefined` when it is not tracked. */
  series(scope: string): DashboardSeries | undefined {
    const t = this.#tracked.get(scope);
    if (t === undefined) return undefined;
    const slots = this.#slots();
    const times = slots.map((s) => this.#clock[s]!);
    // A point stands for the tick that ends at its time.
    const from = (times[0] ?? Infinity) * 1000 - this.tickMs;
    return {
      scope,
      label: t.label,
      t: times,
      columns: (t.ring ?? new SeriesRing(this.historyPoints)).read(slots),
      marks: t.marks.filter((m) => m.at >= from),
    };
  }

  /** Drop the least active beyond `maxScopes`; the rest, most active first. */
  #trim(): Tracked[] {
    const ranked = [...this.#tracked.values()].sort(byActivity);
    for (const t of ranked.splice(this.maxScopes)) {
      this.#tracked.delete(t.scope);
      this.#untracked++;
      if (t.ring !== undefined && this.#pool.length < this.maxScopes) this.#pool.push(t.ring);
    }
    return ranked;
  }

  /** The ring slots written, oldest first. */
  #slots(): number[] {
    const n = Math.min(this.#ticks, this.historyPoints);
    const first = this.#ticks - n;
    return Array.from({ length: n }, (_, i) => (first + i) % this.historyPoints);
  }

  #totals(now: number): DashboardTotals {
    return {
      startedAt: this.#startedAt,
      elapsedMs: now - this.#startedAt,
      sent: this.#sent,
      done: this.#done,
      errors: this.#errors,
      retries: this.#retries,
      backoffs: this.#backoffs,
      holds: this.#holds,
      inFlight: this.#source.active,
      held: this.#source.held,
      scopes: this.#source.scopeCount,
      tracked: this.#tracked.size,
      untracked: this.#untracked,
    };
  }

  /** Requests a meter counted since the last tick, as the request events would have counted them. */
  #countTraffic(meter: TrafficMeter): void {
    const totals = meter.takeTotals();
    this.#sent += totals.sent;
    this.#done += totals.done;
    this.#errors += totals.failed;
    for (const c of meter.take()) this.#countScope(c.scope, c.sent, c.done, c.failed);
  }

  /** Requests of one scope in this tick (untracked when there is no room: the totals have them). */
  #countScope(scope: string, sent: number, done: number, failed: number): void {
    const t = this.#track(scope);
    if (t === undefined) return;
    t.tickSent += sent;
    t.tickDone += done;
    t.tickErrors += failed;
  }

  /** The tracked entry of a scope, made when there is room; `undefined` when there is none. */
  #track(scope: string): Tracked | undefined {
    let t = this.#tracked.get(scope);
    if (t !== undefined) return t;
    // Room for the scopes that appear between two ticks. When that is full
    // too, the least active half goes at once (counting this tick so far),
    // so that a busy scope that appears late still gets in; but only a few
    // times a tick: with more busy scopes than room, admitting each would
    // churn an entry per request (half the crawl's throughput on a benchmark
    // of 1,000 scopes). Scopes not let in still count in the totals.
    if (this.#tracked.size >= 2 * this.maxScopes) {
      if (this.#trimsThisTick >= TRIMS_PER_TICK) return undefined;
      this.#trimsThisTick++;
      this.#trim();
    }
    t = {
      scope,
      label: this.#label(scope),
      ring: undefined,
      marks: [],
      newMarks: undefined,
      sent: 0,
      done: 0,
      errors: 0,
      tickSent: 0,
      tickDone: 0,
      tickErrors: 0,
      score: 0,
      robots: undefined,
      row: undefined,
    };
    this.#tracked.set(scope, t);
    return t;
  }

  #mark(scope: string, at: number, kind: DashboardMark["kind"], text: string): void {
    const t = this.#track(scope);
    if (t === undefined) return;
    const mark: DashboardMark = { at, kind, text };
    if (t.marks.length >= this.maxMarks) t.marks.shift(); // maxMarks is small
    t.marks.push(mark);
    (t.newMarks ??= []).push(mark);
    if (t.newMarks.length > this.maxMarks) t.newMarks.shift();
  }

  #logEvent(event: ThrottleEvent, scope: string | undefined, text: string): void {
    this.#logSeq++;
    this.#log[this.#logSeq % this.maxEvents] = {
      seq: this.#logSeq,
      at: event.at,
      type: event.type,
      scope,
      text,
    };
  }

  /** Log entries after `seq` still in the ring, oldest first. */
  #logSince(seq: number): DashboardLogEntry[] {
    const from = Math.max(seq, this.#logSeq - this.maxEvents) + 1;
    const out: DashboardLogEntry[] = [];
    for (let s = from; s <= this.#logSeq; s++) out.push(this.#log[s % this.maxEvents]!);
    return out;
  }
}

/** Most active first. */
function byActivity(a: Tracked, b: Tracked): number {
  return activity(b) - activity(a) || b.sent - a.sent || (a.scope < b.scope ? -1 : 1);
}

/** The score this tick will give (the decayed score plus this tick's counts so far). */
function activity(t: Tracked): number {
  return t.score * SCORE_DECAY + t.tickSent + t.tickDone;
}

function ms(value: number): string {
  return value >= 1000 ? `${(value / 1000).toFixed(1)}s` : `${Math.round(value)}ms`;
}

function positive(name: string, value: number, whole: boolean): number {
  if (
    typeof value !== "number" || !(value > 0) || !Number.isFinite(value) ||
    (whole && !Number.isInteger(value))
  ) {
    throw new RangeError(
      `Cannot create dashboard as '${name}' must be ${
        whole ? "a whole number >= 1" : "> 0"
      }: current value is ${String(value)}`,
    );
  }
  return value;
}
