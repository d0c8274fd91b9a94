/**
 * The throttler: the store of every scope's state and the authority that
 * decides when a waiting request may go. Operators (`throttleByScope`,
 * `backoffOn`, `rampup`) and the request queue all talk to one throttler, so
 * several pipelines that share it share its limits.
 *
 * @module
 */
import { Observable, type SchedulerLike, Subject } from "rxjs";
import { preciseScheduler } from "./precise_scheduler.ts";
import { match } from "ts-pattern";
import { Deque } from "./_deque.ts";
import type { ThrottleEvent, WaitReason } from "./events.ts";
import type { ScopesInput } from "./request.ts";
import { ThrottlingScopeManager } from "./scope_manager.ts";
import { autoThrottleManager } from "./autothrottle_manager.ts";
import { resolveRampupOption } from "./_rampup.ts";
import type {
  AnnouncedBudget,
  BackoffSignal,
  BaseDelayOptions,
  ConcurrencyOptions,
  DoneInfo,
  QuotaReconciliation,
  ScopeState,
  ScopeStep,
  ThrottlingScopeManagerProtocol,
} from "./scope_manager_protocol.ts";
import type { DnsCache } from "./dns_cache.ts";
import type { RequestScopes } from "./scopes.ts";
import { ScopeTable } from "./_scope_table.ts";
import { scheduleAfter } from "./_timer.ts";
import {
  parseSettings,
  type RampupConfig,
  type ResolvedRampup,
  type ResolvedScopeConfig,
  resolveScopeConfig,
  type ScopeKind,
  scopeKind,
  type ScopeManagerFactory,
  type ThrottlerSettings,
  type ThrottlerSettingsInput,
} from "./settings.ts";
import type { ConvertedSettings } from "./scrapy_settings.ts";
import { formatEvent } from "./throttler/format_event.ts";
import {
  clearTimer,
  clearWake,
  DefaultScopeEntry,
  type GateTicket,
  newTimers,
  type ScopeEntry,
} from "./throttler/_scope_entry.ts";
import { ScopeResolver } from "./throttler/_scope_resolver.ts";
import { TrafficCounter } from "./throttler/_traffic.ts";
import type { TrafficMeter } from "./throttler/traffic_meter.ts";

export { formatEvent } from "./throttler/format_event.ts";
export type { TrafficMeter, TrafficTake, TrafficTotals } from "./throttler/traffic_meter.ts";
export type { GateTicket } from "./throttler/_scope_entry.ts";

/** Options of a throttler besides its settings. */
export interface ThrottlerOptions<R = unknown> {
  /** Clock and timers. @default preciseScheduler (asyncScheduler with a sub-millisecond clock) */
  readonly scheduler?: SchedulerLike;
  /** Uniform random numbers in [0, 1), for jitter. @default Math.random */
  readonly random?: () => number;
  /**
   * The scopes of a request that has no `meta.throttlingScopes` (the
   * reference's `get_scopes`); may be async. @default the URL's host
   */
  readonly getScopes?: (request: R) => ScopesInput | PromiseLike<ScopesInput>;
  /**
   * The scope manager of every scope without its own `manager`.
   * @default autoThrottleManager when `autothrottle.enabled`, else ThrottlingScopeManager
   */
  readonly scopeManager?: ScopeManagerFactory;
  /** Where `debug` lines go. @default console.error */
  readonly log?: (line: string) => void;
  /**
   * Resolves hosts for per-IP scopes (`concurrentRequestsPerIp` > 0).
   * @default a `createDnsCache` on the throttler's scheduler, made when first needed
   */
  readonly dns?: DnsCache;
}

const NO_AMOUNTS: readonly (number | undefined)[] = [];

/** Events made once or more per request: not on `notices$`. */
const PER_REQUEST_EVENTS: ReadonlySet<ThrottleEvent["type"]> = new Set([
  "request-delayed",
  "request-sent",
  "request-done",
  "scope-created",
]);

/** Evicted entries kept for reuse (see `Throttler.#pool`). */
const POOL_MAX = 1024;
/**
 * Holds every scope's manager, queues requests that cannot go yet, and emits
 * what happens. Create it with {@link createThrottler}.
 */
export class Throttler<R = unknown> {
  /** The validated settings, with defaults. */
  readonly settings: ThrottlerSettings;
  /** The clock of every decision. */
  readonly scheduler: SchedulerLike;
  readonly #random: () => number;
  readonly #factory: ScopeManagerFactory | undefined;
  readonly #log: (line: string) => void;
  readonly #resolver: ScopeResolver<R>;
  readonly #entries = new ScopeTable<ScopeEntry>();
  /**
   * Evicted default entries, reset and reused for new scopes: a broad crawl
   * then makes no long-lived object per scope, which the garbage collector
   * would copy out of the young generation (a quarter of the time before).
   */
  readonly #pool: DefaultScopeEntry[] = [];
  readonly #events = new Subject<ThrottleEvent>();
  readonly #notices = new Subject<ThrottleEvent>();
  /** Requests sent and done while a traffic meter is open (see `meterTraffic`). */
  readonly #traffic = new TrafficCounter();
  readonly #watchers = new Map<string, Set<(s: ScopeState) => void>>();
  readonly #allWatchers = new Set<(s: ScopeState) => void>();
  readonly #global = new Deque<GateTicket>();
  #active = 0;
  #held = 0;
  /** Scopes whose waiting requests must be looked at again. */
  readonly #dirty: string[] = [];
  /** Scopes whose head could go but for the global cap. */
  readonly #stalled = new Set<string>();
  #draining = false;
  #warnedHeld = false;
  #attached = 0;
  #sinceSweep = 0;
  /**
   * Scopes created or requests done before an over-the-limit sweep runs
   * again: 0, or more after a sweep that could not get under the limit
   * (the oldest scopes busy), so that sweeps do not walk busy scopes for
   * every request.
   */
  #sweepGap = 0;
  /**
   * How deep in the throttler's own calls (submit, the dispatch loop) and in
   * listeners it called we are. An entry evicted deeper than the outermost
   * call may still be held by a caller up the stack: it is not reused.
   */
  #depth = 0;
  /** Ends of the least-recently-used list of scopes. */
  #oldest: ScopeEntry | undefined;
  #newest: ScopeEntry | undefined;
  /** The configuration of scopes without their own entry, per kind (it depends on nothing else). */
  readonly #kindConfigs = new Map<ScopeKind, ResolvedScopeConfig>();
  /** The names of the scopes configured in `settings.scopes`. */
  readonly #configured: ReadonlySet<string>;
  readonly #warnedOnce = new Set<string>();
  /** Rampup turned on by `enableRampup` for scopes that do not configure it. */
  readonly #rampupRules: {
    readonly match: (scope: string) => boolean;
    readonly rampup: ResolvedRampup;
  }[] = [];

  /** Every throttling event, as it happens. */
  readonly events$: Observable<ThrottleEvent> = this.#events.asObservable();

  /**
   * Every event except those made once or more per request
   * (`request-delayed`, `request-sent`, `request-done`, `scope-created`):
   * backoff, holds, recovery, rampup steps, announcements, retries,
   * robots.txt, evictions, warnings. Listening here costs nothing per
   * request (the per-request events are not built for it); with
   * {@link Throttler.meterTraffic} it is what a live view needs.
   */
  readonly notices$: Observable<ThrottleEvent> = this.#notices.asObservable();

  readonly #changes = new Subject<readonly string[]>();
  /** Scopes changed since the last `changes$` emission; only kept while observed. */
  #changedScopes: Set<string> | undefined;

  /**
   * The names of the scopes whose state changed (a send, a completion,
   * backoff, recovery, a setting), batched: one array per pass of the
   * throttler's dispatch loop, emitted when the loop is done, so a listener
   * may submit requests from there. Costs nothing while nobody listens. The
   * request queue wakes on it (a `Throttler` is a `QueueThrottleView`).
   */
  readonly changes$: Observable<readonly string[]> = this.#changes.asObservable();

  constructor(settings: ThrottlerSettings, options: ThrottlerOptions<R> = {}) {
    this.settings = settings;
    this.#configured = new Set(Object.keys(settings.scopes));
    this.scheduler = options.scheduler ?? preciseScheduler;
    this.#random = options.random ?? Math.random; // injectable default
    const at = settings.autothrottle;
    this.#factory = options.scopeManager ?? (at.enabled
      ? autoThrottleManager({
        startDelayMs: at.startDelayMs,
        maxDelayMs: at.maxDelayMs,
        targetConcurrency: at.targetConcurrency,
      })
      : undefined);
    this.#log = options.log ?? ((line) => console.error(line));
    this.#resolver = new ScopeResolver(options.getScopes, settings, this.scheduler, options.dns);
  }

  /** Requests in flight across all scopes. */
  get active(): number {
    return this.#active;
  }

  /** Requests waiting at the gate. */
  get held(): number {
    return this.#held;
  }

  /** How many scopes are in memory. */
  get scopeCount(): number {
    return this.#entries.size;
  }

  /** How many more requests could start now before the global cap (`concurrentRequests`) is hit. */
  freeSlots(): number {
    return Math.max(0, this.settings.concurrentRequests - this.#active - this.#held);
  }

  /**
   * The scopes of a request: `meta.throttlingScopes`, else `getScopes`, else
   * the URL's host; with `concurrentRequestsPerIp` > 0, plus the IP its URL's
   * host resolves to (synchronous when the DNS cache has it; a failed lookup
   * rejects with `DnsLookupError`).
   *
   * @throws {TypeError} for a request with no usable URL and no scopes.
   */
  resolveScopes(request: R): RequestScopes | Promise<RequestScopes> {
    return this.#resolver.resolve(request);
  }

  /** The configuration a scope gets (its own entry, its host's, or the defaults for its kind). */
  scopeConfig(scope: string): ResolvedScopeConfig {
    return this.#resolveConfig(scope, scopeKind(scope));
  }

  /** The manager of a scope, created from its configuration when first needed. */
  manager(scope: string): ThrottlingScopeManagerProtocol {
    const entry = this.#entry(scope);
    if (entry instanceof DefaultScopeEntry) entry.exposed = true;
    return entry.manager;
  }

  /**
   * @internal The manager of a scope in memory, or `undefined`; unlike
   * `manager`, it creates nothing and hands nothing out: read it, do not keep
   * it (the object of an evicted scope may be reused for another).
   */
  peekManager(scope: string): ThrottlingScopeManagerProtocol | undefined {
    return this.#entries.get(scope)?.manager;
  }

  /** The current state of a scope, or `undefined` when it is not in memory. */
  state(scope: string): ScopeState | undefined {
    const entry = this.#entries.get(scope);
    if (entry === undefined) return undefined;
    return this.#stateOf(scope, entry);
  }

  /** The state of every scope in memory, least recently used first. */
  states(): ScopeState[] {
    const out: ScopeState[] = [];
    for (let e = this.#oldest; e !== undefined; e = e.newer) out.push(this.#stateOf(e.scope, e));
    return out;
  }

  /**
   * A scope's state now and after every change (sends, completions, backoff,
   * recovery, rampup). Subscribing keeps the scope in memory.
   */
  scope$(scope: string): Observable<ScopeState> {
    return new Observable<ScopeState>((subscriber) => {
      const fn = (s: ScopeState) => subscriber.next(s);
      let set = this.#watchers.get(scope);
      if (set === undefined) this.#watchers.set(scope, set = new Set());
      set.add(fn);
      this.#attach();
      subscriber.next(this.#stateOf(scope, this.#entry(scope)));
      return () => {
        set.delete(fn);
        if (set.size === 0) this.#watchers.delete(scope);
        this.#detach();
      };
    });
  }

  /** Every scope's state after every change. */
  readonly states$: Observable<ScopeState> = new Observable<ScopeState>((subscriber) => {
    const fn = (s: ScopeState) => subscriber.next(s);
    this.#allWatchers.add(fn);
    this.#attach();
    return () => {
      this.#allWatchers.delete(fn);
      this.#detach();
    };
  });

  /**
   * Hold every request of a scope for at least `ms` (the reference's
   * `delay_scope`), counted as a backoff trigger and not capped.
   */
  delayScope(scope: string, ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new RangeError(
        `Cannot delay scope '${scope}' as 'ms' must be a finite number >= 0: current value is ${ms}`,
      );
    }
    this.recordBackoff(scope, { holdMs: ms, uncapped: true, cause: "delayScope" }, "delay-scope");
  }

  /** Record a backoff trigger on a scope (used by `backoffOn`). */
  recordBackoff(
    scope: string,
    signal: BackoffSignal = {},
    holdSource: "retry-after" | "ratelimit" | "delay-scope" | "robots" = "retry-after",
  ): void {
    const entry = this.#entry(scope);
    const now = this.scheduler.now();
    this.#advance(scope, entry, now);
    entry.manager.recordBackoff(now, signal);
    if (this.noticed) {
      const s = this.#stateOf(scope, entry);
      // An explained refusal is its hold only: no backoff to report.
      if (signal.explained !== true) {
        this.#emit({
          type: "backoff",
          at: now,
          scope,
          delayMs: s.delayMs,
          level: s.backoffLevel,
          concurrency: s.concurrency,
          holdUntil: s.holdUntil > 0 ? s.holdUntil : undefined,
          cause: signal.cause ?? "trigger",
        });
      }
      if (signal.holdMs !== undefined && s.holdUntil > now) {
        this.#emit({ type: "hold", at: now, scope, until: s.holdUntil, source: holdSource });
      }
    }
    this.#changed(scope, entry, now);
    this.#flushChanges();
  }

  /**
   * Tell a scope what a response announced about the server's budget (used
   * by `backoffOn` for every response with rate-limit headers): a spent
   * budget holds the scope until its reset, a limit and window become its
   * learned quota, a remaining budget is paced until the reset. Emits an
   * `announced` event, and a `hold` event when the scope is held longer.
   * Managers without `recordAnnounced` ignore it.
   *
   * @param scope The scope.
   * @param budget What the headers said; `ignored` lists values not believed.
   */
  recordAnnounced(
    scope: string,
    budget: AnnouncedBudget & { readonly ignored?: readonly string[] },
  ): void {
    const entry = this.#entry(scope);
    const manager = entry.manager;
    const now = this.scheduler.now();
    const noticed = this.noticed;
    if (noticed) {
      this.#emit({
        type: "announced",
        at: now,
        scope,
        limit: budget.limit,
        windowMs: budget.windowMs,
        remaining: budget.remaining,
        resetAt: budget.resetInMs === undefined ? undefined : now + budget.resetInMs,
        ignored: budget.ignored,
      });
    }
    if (manager.recordAnnounced === undefined) return;
    this.#advance(scope, entry, now);
    const before = noticed ? this.#stateOf(scope, entry).holdUntil : 0;
    manager.recordAnnounced(now, budget);
    if (noticed) {
      const until = this.#stateOf(scope, entry).holdUntil;
      if (until > before && until > now) {
        this.#emit({ type: "hold", at: now, scope, until, source: "ratelimit" });
      }
    }
    this.#changed(scope, entry, now);
    this.#flushChanges();
  }

  /**
   * An adaptive scope goes no faster than `delayMs` apart (a pace another
   * process learned, through `shareBackoff`); slower scopes and scopes that
   * do not adapt are left as they are. The step is a `rampup` event.
   */
  adoptDelay(scope: string, delayMs: number, cause = "adopted"): void {
    const entry = this.#entry(scope);
    const now = this.scheduler.now();
    const manager = entry.manager;
    if (manager.adoptDelay === undefined) return;
    this.#advance(scope, entry, now);
    manager.adoptDelay(now, delayMs, cause);
    this.#advance(scope, entry, now);
    this.#changed(scope, entry, now);
    this.#flushChanges();
  }

  /** Correct a scope's quota use (the reference's `reconcile_quota`). */
  reconcileQuota(scope: string, reconciliation: QuotaReconciliation): void {
    const entry = this.#entry(scope);
    const now = this.scheduler.now();
    entry.manager.reconcileQuota(now, reconciliation);
    this.#changed(scope, entry, now);
    this.#flushChanges();
  }

  /** Replace a scope's configured delay (robots.txt Crawl-delay, a user's decision). */
  setBaseDelay(scope: string, delayMs: number, options?: BaseDelayOptions): void {
    const entry = this.#entry(scope);
    entry.manager.setBaseDelay(delayMs, options);
    this.#changed(scope, entry, this.scheduler.now());
    this.#flushChanges();
  }

  /** Replace a scope's concurrency limit (`temporary`: see `ConcurrencyOptions`). */
  setConcurrency(scope: string, concurrency: number, options?: ConcurrencyOptions): void {
    const entry = this.#entry(scope);
    entry.manager.setConcurrency(concurrency, options);
    this.#changed(scope, entry, this.scheduler.now());
    this.#flushChanges();
  }

  /**
   * Turn rampup on for a scope, or for every scope `scopes` matches: those in
   * memory now (they start over from `minConcurrency`) and those created
   * later. A scope that configures `rampup` itself keeps its own. Used by the
   * `rampup` operator.
   *
   * @param scopes A scope name or a predicate on scope names.
   * @param rampup Rampup options over the settings' `rampup`. @default true
   * @returns A function that stops applying it to scopes created later.
   * @throws {TypeError | RangeError} for bad rampup options, naming the field.
   */
  enableRampup(
    scopes: string | ((scope: string) => boolean),
    rampup: RampupConfig | true = true,
  ): () => void {
    const rule = {
      match: typeof scopes === "string" ? (s: string) => s === scopes : scopes,
      rampup: resolveRampupOption(this.settings.rampup, rampup),
    };
    this.#rampupRules.push(rule);
    const now = this.scheduler.now();
    for (const entry of this.#entries.values()) {
      const scope = entry.scope;
      const m = entry.manager;
      if (m instanceof ThrottlingScopeManager && !m.rampup && rule.match(scope)) {
        m.enableRampup(rule.rampup);
        this.#changed(scope, entry, now);
      }
    }
    this.#flushChanges();
    return () => {
      const i = this.#rampupRules.indexOf(rule);
      if (i >= 0) this.#rampupRules.splice(i, 1);
    };
  }

  /** A quota scope whose requests carry no amounts never uses its quota: say so once. */
  #checkQuotaAmounts(scope: string, manager: ThrottlingScopeManagerProtocol): void {
    if (!(manager instanceof ThrottlingScopeManager)) return;
    const quota = manager.config.quota;
    if (quota === undefined || manager.quotaAmountSeen) return;
    this.warnOnce(
      `quota-without-amounts:${scope}`,
      "quota-without-amounts",
      `Scope '${scope}' has a quota of ${quota} but its requests carry no amount for it, so the quota ` +
        `never fills: give amounts as meta.throttlingScopes {'${scope}': amount} or from getScopes`,
      scope,
    );
  }

  /** Emit a warning event once per `key` (and log it in debug mode). */
  warnOnce(key: string, code: string, message: string, scope?: string): void {
    if (this.#warnedOnce.has(key)) return;
    this.#warnedOnce.add(key);
    const at = this.scheduler.now();
    this.#emit(
      scope === undefined
        ? { type: "warning", at, code, message }
        : { type: "warning", at, code, message, scope },
    );
  }

  /**
   * How long before a request with these scopes could go: 0 now, a positive
   * number of ms, or `Infinity` until something completes. Counts nothing.
   */
  waitMs(scopes: readonly string[], amounts?: readonly (number | undefined)[]): number {
    if (this.#active >= this.settings.concurrentRequests) return Infinity;
    const now = this.scheduler.now();
    let wait = 0;
    for (let i = 0; i < scopes.length; i++) {
      const scope = scopes[i]!;
      const entry = this.#entries.get(scope);
      if (entry === undefined) continue;
      if (entry.waiting !== undefined && entry.waiting.size > 0) return Infinity;
      this.#advance(scope, entry, now);
      const w = entry.manager.canSend(now, amounts?.[i]);
      if (w > wait) wait = w;
    }
    return wait;
  }

  /**
   * The share (0..1) of its scopes' remaining quota a request with these
   * amounts would use, the largest over its scopes; 0 when no scope has a
   * quota (the request queue prefers larger shares on ties).
   */
  quotaShare(scopes: readonly string[], amounts?: readonly (number | undefined)[]): number {
    let share = 0;
    const now = this.scheduler.now();
    for (let i = 0; i < scopes.length; i++) {
      const entry = this.#entries.get(scopes[i]!);
      const quota = entry?.manager.state?.(now).quota;
      if (quota === undefined) continue;
      const left = quota.limit - quota.used;
      const s = left > 0 ? Math.min(1, (amounts?.[i] ?? 1) / left) : 1;
      if (s > share) share = s;
    }
    return share;
  }

  /**
   * Whether `resolveScopes` gives what the request queue works out by itself
   * (`meta.throttlingScopes`, else the URL's host): no `getScopes`, no per-IP
   * scopes. The queue then keeps its faster default.
   */
  get usesDefaultScopes(): boolean {
    return this.#resolver.isDefault;
  }

  /** Requests in flight across these scopes (for least-loaded ordering). */
  load(scopes: readonly string[]): number {
    let n = 0;
    const now = this.scheduler.now();
    for (const scope of scopes) {
      const entry = this.#entries.get(scope);
      if (entry !== undefined) n += entry.manager.state?.(now).active ?? 0;
    }
    return n;
  }

  /** @internal Queue a ticket; its `start` runs when every scope and the global cap allow it. */
  submit(ticket: GateTicket): void {
    this.#depth++;
    try {
      // Sweep here, between decisions, never while a ticket's scopes are being looked up.
      if (this.#sweepDue()) this.#sweep();
      if (!this.#tryStart(ticket)) {
        this.#held++;
        if (!this.#warnedHeld && this.#held > this.settings.delayedRequestsWarnThreshold) {
          this.#warnedHeld = true;
          this.warnOnce(
            "held",
            "many-delayed",
            `More than ${this.settings.delayedRequestsWarnThreshold} requests are held back by throttling ` +
              `(DELAYED_REQUESTS_WARN_THRESHOLD); check the throttling configuration`,
          );
        }
      }
    } finally {
      this.#depth--;
    }
    this.#flushChanges();
  }

  /**
   * @internal A started request settled: free its slot in every scope.
   * `slot` is what `GateTicket.start` was given, if kept.
   */
  release(scopes: RequestScopes, result?: DoneInfo, slot?: object): void {
    const now = this.scheduler.now();
    this.#active--;
    const names = scopes.names;
    const traffic = this.#traffic;
    const metered = traffic.meters > 0;
    const failed = metered && result !== undefined &&
      (result.failed === true || (result.status !== undefined && result.status >= 400));
    if (metered) {
      traffic.totals.done++;
      if (failed) traffic.totals.failed++;
    }
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      const held = slot as ScopeEntry | undefined;
      const entry = held !== undefined && names.length === 1 && held.scope === scope &&
          held.slot >= 0
        ? held
        : this.#entry(scope);
      entry.manager.recordDone(now, result);
      if (metered) {
        const t = traffic.count(scope, entry);
        t.done++;
        if (failed) t.failed++;
      }
      this.#changed(scope, entry, now);
      // A scope that never queued a request has nothing to pump (#pumpScope returns at once).
      if (entry.waiting !== undefined) this.#dirty.push(scope);
    }
    this.#sinceSweep++;
    this.#drain();
  }

  /** @internal Drop every waiting ticket of an owner (its subscription ended). */
  cancelOwner(owner: object): void {
    let dropped = 0;
    const keep = (t: GateTicket) => {
      if (t.owner !== owner) return true;
      dropped++;
      return false;
    };
    this.#global.filterInPlace(keep);
    for (const entry of this.#entries.values()) {
      if (entry.waiting === undefined || entry.waiting.size === 0) continue;
      entry.waiting.filterInPlace(keep);
      if (entry.waiting.size === 0) clearTimer(entry);
    }
    this.#held -= dropped;
  }

  /** @internal A gate subscription or an observer started; timers may run. */
  attach(): void {
    this.#attach();
  }

  /** @internal A gate subscription or an observer ended; with none left, no timer stays. */
  detach(): void {
    this.#detach();
  }

  /** @internal Emit an event (for the operators of this package). */
  emit(event: ThrottleEvent): void {
    this.#emit(event);
  }

  /** @internal Whether anyone listens to every event (to skip building the per-request ones). */
  get observed(): boolean {
    return this.#events.observed || this.settings.debug;
  }

  /** @internal Whether anyone listens to the events of `notices$` (to skip building them). */
  get noticed(): boolean {
    return this.#events.observed || this.#notices.observed || this.settings.debug;
  }

  /**
   * Count the requests sent and done in each scope, for a live view that
   * needs rates but not an event per request (the cost is a few increments
   * per request while the meter is open). One meter at a time: each `take`
   * empties the counts, whichever meter takes them.
   *
   * @example
   * ```ts
   * import { createThrottler } from "./throttler.ts";
   * const meter = createThrottler().meterTraffic();
   * console.assert(meter.take().length === 0);
   * meter.close();
   * ```
   */
  meterTraffic(): TrafficMeter {
    return this.#traffic.open();
  }

  // ---------------------------------------------------------------------------

  #tryStart(ticket: GateTicket, fromGlobal = false): boolean {
    if (
      this.#active >= this.settings.concurrentRequests || (!fromGlobal && this.#global.size > 0)
    ) {
      this.#global.push(ticket);
      if (this.observed) this.#delayed(undefined, "global", Infinity);
      return false;
    }
    const now = this.scheduler.now();
    const names = ticket.claims.names;
    const amounts = ticket.claims.amounts ?? NO_AMOUNTS;
    let entry: ScopeEntry | undefined;
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      entry = this.#entry(scope);
      if (entry.waiting !== undefined && entry.waiting.size > 0) {
        // Keep the order of the scope: behind those already waiting.
        entry.waiting.push(ticket);
        return false;
      }
      this.#advance(scope, entry, now);
      const wait = entry.manager.canSend(now, amounts[i]);
      if (wait > 0) {
        (entry.waiting ??= new Deque()).push(ticket);
        if (wait !== Infinity) this.#armTimer(scope, entry, now + wait);
        if (this.observed) this.#delayed(scope, this.#reason(entry, now, wait), wait);
        return false;
      }
    }
    this.#start(ticket, now, entry);
    return true;
  }

  /** `only`: the entry of a single-scope ticket when the caller has it (saves a lookup). */
  #start(ticket: GateTicket, decidedAt: number, only?: ScopeEntry): void {
    // Read the clock again: the send is recorded as close as possible to the
    // download's start, so "not before" times are measured from the real send.
    const now = Math.max(decidedAt, this.scheduler.now());
    const names = ticket.claims.names;
    const amounts = ticket.claims.amounts ?? NO_AMOUNTS;
    const traffic = this.#traffic;
    this.#active++;
    if (traffic.meters > 0) traffic.totals.sent++;
    let entry: ScopeEntry | undefined;
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      entry = only !== undefined && names.length === 1 ? only : this.#entries.get(scope)!;
      this.#touch(entry);
      entry.manager.recordSent(now, amounts[i]);
      if (traffic.meters > 0) traffic.count(scope, entry).sent++;
      if (amounts[i] === undefined) this.#checkQuotaAmounts(scope, entry.manager);
      this.#changed(scope, entry, now);
    }
    ticket.start(now, names.length === 1 ? entry : undefined);
  }

  /** Start waiting tickets of a scope while its head can go. */
  #pumpScope(scope: string, entry: ScopeEntry): void {
    const waiting = entry.waiting;
    if (waiting === undefined) return;
    while (waiting.size > 0) {
      if (this.#active >= this.settings.concurrentRequests) {
        this.#stalled.add(scope);
        return;
      }
      const ticket = waiting.peek()!;
      const now = this.scheduler.now();
      const names = ticket.claims.names;
      const amounts = ticket.claims.amounts ?? NO_AMOUNTS;
      let blockedBy: string | undefined;
      let blockedEntry: ScopeEntry | undefined;
      let blockedWait = 0;
      for (let i = 0; i < names.length; i++) {
        const other = names[i]!;
        const e = other === scope ? entry : this.#entry(other);
        if (e !== entry && e.waiting !== undefined && e.waiting.size > 0) {
          blockedBy = other;
          blockedEntry = e;
          blockedWait = Infinity;
          break;
        }
        this.#advance(other, e, now);
        const wait = e.manager.canSend(now, amounts[i]);
        if (wait > 0) {
          blockedBy = other;
          blockedEntry = e;
          blockedWait = wait;
          break;
        }
      }
      if (blockedEntry === undefined) {
        waiting.shift();
        this.#held--;
        this.#start(ticket, now, entry);
        continue;
      }
      if (blockedEntry === entry) {
        if (blockedWait !== Infinity) this.#armTimer(scope, entry, now + blockedWait);
        return;
      }
      // Blocked by another scope: wait there instead, so this scope's other
      // requests are not held up behind it (no partial holds either).
      waiting.shift();
      (blockedEntry.waiting ??= new Deque()).push(ticket);
      if (blockedWait !== Infinity) this.#armTimer(blockedBy!, blockedEntry, now + blockedWait);
    }
    // A request started above can settle synchronously and lead to a submit
    // whose sweep evicts this scope (now idle) and gives its entry to a new
    // scope, which may have armed a timer on it: only clear the timer while
    // the entry still has the queue this pump emptied.
    if (entry.waiting === waiting) clearTimer(entry);
  }

  #pumpGlobal(): void {
    while (this.#global.size > 0 && this.#active < this.settings.concurrentRequests) {
      const ticket = this.#global.shift()!;
      this.#held--;
      if (!this.#tryStart(ticket, true)) this.#held++;
    }
  }

  /**
   * Look again at every scope that may have a request ready. Starting a
   * request can settle it synchronously (a download that answers at once) and
   * call `release` from inside this loop: the flag turns that nested call into
   * more work for this loop instead of a deeper stack.
   */
  #drain(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#depth++;
    try {
      const cap = this.settings.concurrentRequests;
      for (;;) {
        // Requests queued behind the global cap create their scopes here, not
        // in submit: sweep here too, or a batch given all at once would never
        // evict. Between tickets, so no ticket's scopes go while looked at.
        if (this.#sweepDue()) this.#sweep();
        this.#pumpGlobal();
        if (this.#dirty.length > 0) {
          const scope = this.#dirty.pop()!;
          const entry = this.#entries.get(scope);
          if (entry !== undefined) this.#pumpScope(scope, entry);
          continue;
        }
        if (this.#stalled.size > 0 && this.#active < cap) {
          for (const scope of this.#stalled) {
            this.#stalled.delete(scope);
            this.#dirty.push(scope);
            if (this.#dirty.length >= cap - this.#active) break;
          }
          continue;
        }
        break;
      }
    } finally {
      this.#draining = false;
      this.#depth--;
    }
    this.#flushChanges();
  }

  #armTimer(scope: string, entry: ScopeEntry, at: number): void {
    const t = entry.timers ??= newTimers();
    if (t.timer !== undefined) {
      if (t.timerAt <= at) return;
      t.timer.unsubscribe();
    }
    t.timerAt = at;
    t.timer = scheduleAfter(this.scheduler, at - this.scheduler.now(), () => {
      t.timer = undefined;
      t.timerAt = 0;
      if (this.#entries.get(scope) !== entry) return;
      this.#dirty.push(scope);
      this.#drain();
    });
  }

  #entry(scope: string): ScopeEntry {
    let entry = this.#entries.get(scope);
    if (entry !== undefined) return entry;
    const kind = scopeKind(scope);
    let config = this.#resolveConfig(scope, kind);
    if (config.rampup === undefined && this.#rampupRules.length > 0) {
      const rule = this.#rampupRules.find((r) => r.match(scope));
      if (rule !== undefined) config = { ...config, rampup: rule.rampup };
    }
    const factory = config.manager ?? this.#factory;
    if (factory !== undefined) {
      entry = {
        scope,
        slot: -1,
        manager: factory({ scope, config, random: this.#random }),
        waiting: undefined,
        timers: undefined,
        traffic: undefined,
        older: this.#newest,
        newer: undefined,
      };
    } else {
      const pooled = this.#pool.pop();
      if (pooled !== undefined) {
        pooled.reuse(scope, config);
        entry = pooled;
      } else entry = new DefaultScopeEntry({ scope, config, random: this.#random });
      entry.older = this.#newest;
    }
    this.#entries.add(entry);
    if (this.#newest !== undefined) this.#newest.newer = entry;
    else this.#oldest = entry;
    this.#newest = entry;
    if (this.observed) this.#emit({ type: "scope-created", at: this.scheduler.now(), scope });
    this.#sinceSweep++;
    return entry;
  }

  /**
   * `resolveScopeConfig`, shared by every scope of a kind that has no entry of
   * its own: a new scope then allocates no configuration (about 80 bytes and a
   * third of the cost of creating a scope in bench/broad.bench.ts).
   */
  #resolveConfig(scope: string, kind: ScopeKind): ResolvedScopeConfig {
    // A Map, not the settings object: looking a fresh string up as a property
    // name interns it first, which cost more than the rest of creating a scope.
    const own = this.#configured;
    if (own.size > 0) {
      const colon = kind === "domain" ? scope.lastIndexOf(":") : -1;
      if (own.has(scope) || (colon > 0 && own.has(scope.slice(0, colon)))) {
        return resolveScopeConfig(this.settings, scope, kind);
      }
    }
    let config = this.#kindConfigs.get(kind);
    if (config === undefined) {
      this.#kindConfigs.set(kind, config = resolveScopeConfig(this.settings, scope, kind));
    }
    return config;
  }

  /**
   * Evict idle scopes, least recently used first: over the count limit, and
   * those idle longer than `scopeMaxIdleMs`. Scopes are kept in a doubly
   * linked list in order of last use (a send moves a scope to the newest
   * end), so eviction reads from the oldest end and never scans the store;
   * busy scopes met on the way move to the newest end, and a sweep looks at a
   * bounded number of entries: O(1) amortised per request.
   */
  #sweepDue(): boolean {
    const limit = this.settings.scopeLimit;
    return this.#sinceSweep >= 1024 ||
      (limit > 0 && this.#entries.size > limit && this.#sinceSweep >= this.#sweepGap);
  }

  #sweep(): void {
    this.#sinceSweep = 0;
    const limit = this.settings.scopeLimit;
    const maxIdle = this.settings.scopeMaxIdleMs;
    if (limit === 0 && maxIdle === 0) return;
    const now = this.scheduler.now();
    let over = limit > 0 ? this.#entries.size - limit : 0;
    // Over the limit: make room for a few more scopes at once (one in 256
    // of the limit), so a broad crawl sweeps once per that many new scopes,
    // not once per request.
    if (over > 0) over += limit >>> 8;
    const maxWalk = 64 + Math.min(Math.max(0, over), 1024) * 2;
    let budget = maxWalk;
    let entry = this.#oldest;
    while (entry !== undefined && budget-- > 0) {
      const next = entry.newer;
      const scope = entry.scope;
      const free = (entry.waiting === undefined || entry.waiting.size === 0) &&
        (this.#watchers.size === 0 || !this.#watchers.has(scope)) && entry.manager.isIdle(now, 0);
      if (free && (over > 0 || (maxIdle > 0 && entry.manager.isIdle(now, maxIdle)))) {
        this.#evict(scope, entry, over > 0 ? "limit" : "idle", now);
        over--;
      } else if (free) {
        break; // every scope after this one was used more recently still
      } else {
        this.#touch(entry);
      }
      entry = next;
    }
    // Still over the limit (the old scopes are busy): wait for more events
    // before walking again, one per 32 scopes walked, so a store full of busy
    // scopes costs O(1) amortised per request too.
    this.#sweepGap = limit > 0 && this.#entries.size > limit ? (maxWalk - budget) >>> 5 : 0;
  }

  /** Move a scope to the newest end of the least-recently-used list. */
  #touch(entry: ScopeEntry): void {
    if (this.#newest === entry) return;
    this.#unlink(entry);
    entry.older = this.#newest;
    entry.newer = undefined;
    if (this.#newest !== undefined) this.#newest.newer = entry;
    else this.#oldest = entry;
    this.#newest = entry;
  }

  #unlink(entry: ScopeEntry): void {
    if (entry.older !== undefined) entry.older.newer = entry.newer;
    else if (this.#oldest === entry) this.#oldest = entry.newer;
    if (entry.newer !== undefined) entry.newer.older = entry.older;
    else if (this.#newest === entry) this.#newest = entry.older;
    entry.older = entry.newer = undefined;
  }

  #evict(scope: string, entry: ScopeEntry, reason: "idle" | "limit", now: number): void {
    const t = entry.timers;
    if (t !== undefined) {
      clearTimer(entry);
      t.wake?.unsubscribe();
    }
    this.#entries.delete(entry);
    this.#unlink(entry);
    if (
      entry instanceof DefaultScopeEntry && !entry.exposed && this.#depth <= 1 &&
      this.#pool.length < POOL_MAX
    ) {
      entry.waiting = undefined;
      entry.timers = undefined;
      entry.traffic = undefined;
      this.#pool.push(entry);
    }
    if (this.#stalled.size > 0) this.#stalled.delete(scope);
    if (this.noticed) this.#emit({ type: "scope-evicted", at: now, scope, reason });
  }

  #advance(scope: string, entry: ScopeEntry, now: number): void {
    const advance = entry.manager.advance;
    if (advance === undefined) return;
    const steps = advance.call(entry.manager, now);
    if (steps.length === 0) return;
    for (const step of steps) this.#emitStep(scope, step, now);
  }

  #emitStep(scope: string, step: ScopeStep, at: number): void {
    if (!this.noticed) return;
    this.#emit(
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

  /** Tell watchers; keep a wake-up timer for changes the manager makes by itself. */
  #changed(scope: string, entry: ScopeEntry, now: number): void {
    if (this.#changes.observed) (this.#changedScopes ??= new Set()).add(scope);
    if (this.#allWatchers.size > 0 || this.#watchers.size > 0) {
      const set = this.#watchers.get(scope);
      if (set !== undefined || this.#allWatchers.size > 0) {
        const s = this.#stateOf(scope, entry);
        if (set !== undefined) { for (const fn of set) fn(s); }
        for (const fn of this.#allWatchers) fn(s);
      }
    }
    if (this.#attached > 0 && entry.manager.nextWakeAt !== undefined) {
      this.#armWake(scope, entry, now);
    }
  }

  #armWake(scope: string, entry: ScopeEntry, now: number): void {
    const at = entry.manager.nextWakeAt!(now);
    if (at === undefined) {
      clearWake(entry);
      return;
    }
    const w = entry.timers ??= newTimers();
    if (w.wake !== undefined && w.wakeAt === at) return;
    w.wake?.unsubscribe();
    w.wakeAt = at;
    w.wake = scheduleAfter(this.scheduler, at - now, () => {
      w.wake = undefined;
      w.wakeAt = 0;
      if (this.#entries.get(scope) !== entry) return;
      const t = this.scheduler.now();
      this.#advance(scope, entry, t);
      this.#changed(scope, entry, t);
      this.#dirty.push(scope);
      this.#drain();
    });
  }

  /** Emit the scopes changed since the last time, unless the dispatch loop is still running. */
  #flushChanges(): void {
    const changed = this.#changedScopes;
    if (changed === undefined || this.#draining) return;
    this.#changedScopes = undefined;
    this.#changes.next([...changed]);
  }

  #attach(): void {
    this.#attached++;
  }

  #detach(): void {
    this.#attached--;
    if (this.#attached > 0) return;
    for (const entry of this.#entries.values()) {
      if (entry.timers === undefined) continue;
      clearWake(entry);
      if (entry.waiting === undefined || entry.waiting.size === 0) clearTimer(entry);
    }
  }

  #stateOf(scope: string, entry: ScopeEntry): ScopeState {
    const now = this.scheduler.now();
    return entry.manager.state?.(now) ?? {
      scope,
      delayMs: 0,
      baseDelayMs: 0,
      concurrency: 0,
      active: 0,
      backoffLevel: 0,
      holdUntil: 0,
      nextSendAt: 0,
      quota: undefined,
      rampup: false,
    };
  }

  #reason(entry: ScopeEntry, now: number, wait: number): WaitReason {
    if (wait === Infinity) return "concurrency";
    const s = entry.manager.state?.(now);
    if (s === undefined) return "delay";
    if (s.holdUntil > now && s.holdUntil - now >= wait) return "hold";
    if (s.nextSendAt > now && s.nextSendAt - now >= wait) return "delay";
    return "quota";
  }

  #delayed(scope: string | undefined, reason: WaitReason, waitMs: number): void {
    this.#emit({ type: "request-delayed", at: this.scheduler.now(), scope, reason, waitMs });
  }

  #emit(event: ThrottleEvent): void {
    if (this.settings.debug) this.#log(`[politely] ${formatEvent(event)}`);
    this.#depth++;
    try {
      this.#events.next(event);
      if (this.#notices.observed && !PER_REQUEST_EVENTS.has(event.type)) this.#notices.next(event);
    } finally {
      this.#depth--;
    }
  }
}

/**
 * Create a throttler from settings (camelCase, ms), validated now.
 *
 * @param settings Settings; anything left out takes its default. What
 *   `fromScrapySettings` returns is taken as it is (its `settings` are used;
 *   its `warnings` are the caller's to show, or pass `onWarning` to it).
 * @param options Scheduler, random source, scope function, scope manager.
 * @returns The throttler.
 * @throws {TypeError | RangeError} naming the setting that is wrong.
 * @example
 * ```ts
 * import { createThrottler } from "./throttler.ts";
 * const throttler = createThrottler({ concurrentRequestsPerDomain: 2, downloadDelayMs: 250 });
 * console.assert(throttler.settings.concurrentRequests === 16);
 * ```
 * @example From a Scrapy settings dict
 * ```ts
 * import { createThrottler } from "./throttler.ts";
 * import { fromScrapySettings } from "./scrapy_settings.ts";
 * const throttler = createThrottler(
 *   fromScrapySettings({ DOWNLOAD_DELAY: 0.25, ZYTE_API_KEY: "..." }, {
 *     onWarning: (w) => console.warn(w.message),
 *   }),
 * );
 * console.assert(throttler.settings.downloadDelayMs === 250);
 * ```
 */
export function createThrottler<R = unknown>(
  settings: ThrottlerSettingsInput | ConvertedSettings = {},
  options: ThrottlerOptions<R> = {},
): Throttler<R> {
  return new Throttler<R>(
    parseSettings(isConvertedSettings(settings) ? settings.settings : settings),
    options,
  );
}

/**
 * Whether `settings` is what `fromScrapySettings` returns. Told apart by its
 * shape: exactly `settings` and `warnings`, neither of them a setting's name,
 * so no valid settings object is read differently.
 */
function isConvertedSettings(settings: unknown): settings is ConvertedSettings {
  if (typeof settings !== "object" || settings === null) return false;
  const keys = Object.keys(settings);
  const { settings: inner, warnings } = settings as Partial<ConvertedSettings>;
  return keys.length === 2 && typeof inner === "object" && inner !== null &&
    Array.isArray(warnings);
}
