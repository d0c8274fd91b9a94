/**
 * The throttler: the store of every scope's state and the authority that
 * decides when a waiting request may go. Operators (`throttleByScope`,
 * `backoffOn`, `rampup`) and the request queue all talk to one throttler, so
 * several pipelines that share it share its limits.
 *
 * This file is the façade: `createThrottler`, the options, and the public
 * API of `Throttler` (the store API and the mutation API). The engine is in
 * the other files of this folder, one layer per file, each class building on
 * the one before (one object per throttler, so the hot path calls its own
 * methods and fields, with no hop between objects):
 *
 * - `_events.ts`: settings, clock, `events$`, `notices$`, `emit`,
 *   the `debug` log, `warnOnce`.
 * - `_scope_store.ts`: the scopes in memory (the hash table of
 *   `_scope_table.ts`), their least-recently-used list, configuration of new
 *   scopes, the pool of evicted entries, the sweep that evicts idle scopes.
 * - `_gate.ts`: the dispatcher: tickets, waiting lists, the
 *   dispatch loop, timers and wakes, `changes$`, and what the request queue
 *   asks (`waitMs`, `load`, `quotaShare`, `freeSlots`).
 * - `_scope_entry.ts`: what is kept per scope (`ScopeEntry`, the
 *   timers); `_ticket_queue.ts`: the waiting requests
 *   (`TicketQueue`, `GateOwner`).
 * - `_scope_resolver.ts`: the scopes of a request
 *   (`resolveScopes`).
 * - `_traffic.ts` and `traffic_meter.ts`: the counts of
 *   `meterTraffic`; `format_event.ts`: `formatEvent`.
 *
 * @module
 */
import { Observable, type SchedulerLike } from "rxjs";
import { preciseScheduler } from "../util/precise_scheduler.ts";
import type { ScopesInput } from "../request.ts";
import { ThrottlingScopeManager } from "../managers/scope_manager.ts";
import { autoThrottleManager } from "../managers/autothrottle_manager.ts";
import { resolveRampupOption } from "../managers/_rampup.ts";
import type {
  AnnouncedBudget,
  BackoffSignal,
  BaseDelayOptions,
  ConcurrencyOptions,
  QuotaReconciliation,
  ScopeState,
  ThrottlingScopeManagerProtocol,
} from "../managers/scope_manager_protocol.ts";
import type { DnsCache } from "../scopes/dns_cache.ts";
import type { RequestScopes } from "../scopes/scopes.ts";
import {
  parseSettings,
  type RampupConfig,
  type ScopeManagerFactory,
  type ThrottlerSettings,
  type ThrottlerSettingsInput,
} from "../settings/settings.ts";
import type { ConvertedSettings } from "../settings/scrapy_settings.ts";
import { Gate } from "./_gate.ts";
import { DefaultScopeEntry } from "./_scope_entry.ts";
import { ScopeResolver } from "./_scope_resolver.ts";
import type { TrafficMeter } from "./traffic_meter.ts";

export { formatEvent } from "./format_event.ts";
export type { TrafficMeter, TrafficTake, TrafficTotals } from "./traffic_meter.ts";
export type { GateOwner } from "./_ticket_queue.ts";

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

/**
 * Holds every scope's manager, queues requests that cannot go yet, and emits
 * what happens. Create it with {@link createThrottler}.
 */
export class Throttler<R = unknown> extends Gate {
  readonly #resolver: ScopeResolver<R>;

  constructor(settings: ThrottlerSettings, options: ThrottlerOptions<R> = {}) {
    const scheduler = options.scheduler ?? preciseScheduler;
    const at = settings.autothrottle;
    super(
      settings,
      scheduler,
      options.log ?? ((line) => console.error(line)),
      options.random ?? Math.random, // injectable default
      options.scopeManager ?? (at.enabled
        ? autoThrottleManager({
          startDelayMs: at.startDelayMs,
          maxDelayMs: at.maxDelayMs,
          targetConcurrency: at.targetConcurrency,
        })
        : undefined),
    );
    this.#resolver = new ScopeResolver(options.getScopes, settings, scheduler, options.dns);
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

  /**
   * Whether `resolveScopes` gives what the request queue works out by itself
   * (`meta.throttlingScopes`, else the URL's host): no `getScopes`, no per-IP
   * scopes. The queue then keeps its faster default.
   */
  get usesDefaultScopes(): boolean {
    return this.#resolver.isDefault;
  }

  /** The manager of a scope, created from its configuration when first needed. */
  manager(scope: string): ThrottlingScopeManagerProtocol {
    const entry = this.entry(scope);
    if (entry instanceof DefaultScopeEntry) entry.exposed = true;
    return entry.manager;
  }

  /**
   * @internal The manager of a scope in memory, or `undefined`; unlike
   * `manager`, it creates nothing and hands nothing out: read it, do not keep
   * it (the object of an evicted scope may be reused for another).
   */
  peekManager(scope: string): ThrottlingScopeManagerProtocol | undefined {
    return this.lookup(scope)?.manager;
  }

  /** The current state of a scope, or `undefined` when it is not in memory. */
  state(scope: string): ScopeState | undefined {
    const entry = this.lookup(scope);
    if (entry === undefined) return undefined;
    return this.stateOf(scope, entry);
  }

  /** The state of every scope in memory, least recently used first. */
  states(): ScopeState[] {
    const out: ScopeState[] = [];
    for (let e = this.oldestEntry; e !== undefined; e = e.newer) out.push(this.stateOf(e.scope, e));
    return out;
  }

  /**
   * A scope's state now and after every change (sends, completions, backoff,
   * recovery, rampup). Subscribing keeps the scope in memory.
   */
  scope$(scope: string): Observable<ScopeState> {
    return new Observable<ScopeState>((subscriber) => {
      const fn = (s: ScopeState) => subscriber.next(s);
      let set = this.watchers.get(scope);
      if (set === undefined) this.watchers.set(scope, set = new Set());
      set.add(fn);
      this.attach();
      subscriber.next(this.stateOf(scope, this.entry(scope)));
      return () => {
        set.delete(fn);
        if (set.size === 0) this.watchers.delete(scope);
        this.detach();
      };
    });
  }

  /** Every scope's state after every change. */
  readonly states$: Observable<ScopeState> = new Observable<ScopeState>((subscriber) => {
    const fn = (s: ScopeState) => subscriber.next(s);
    this.allWatchers.add(fn);
    this.attach();
    return () => {
      this.allWatchers.delete(fn);
      this.detach();
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

  /**
   * Record a backoff trigger on a scope (used by `backoffOn`). A soft trigger
   * the scope takes for noise (`BackoffSignal.soft`) changes nothing; its
   * `backoff` event says so (`noise: true`, the cause ends in ", taken for
   * noise"), so a log still names the failure.
   */
  recordBackoff(
    scope: string,
    signal: BackoffSignal = {},
    holdSource: "retry-after" | "ratelimit" | "delay-scope" | "robots" = "retry-after",
  ): void {
    const entry = this.entry(scope);
    const now = this.scheduler.now();
    this.advance(scope, entry, now);
    // false: taken for noise, nothing changed (the event says so).
    const noise = entry.manager.recordBackoff(now, signal) === false;
    if (this.noticed) {
      const s = this.stateOf(scope, entry);
      // An explained refusal is its hold only: no backoff to report.
      if (signal.explained !== true) {
        this.emit({
          type: "backoff",
          at: now,
          scope,
          delayMs: s.delayMs,
          level: s.backoffLevel,
          concurrency: s.concurrency,
          holdUntil: s.holdUntil > 0 ? s.holdUntil : undefined,
          ...(noise
            ? { cause: `${signal.cause ?? "trigger"}, taken for noise`, noise: true as const }
            : { cause: signal.cause ?? "trigger" }),
        });
      }
      if (signal.holdMs !== undefined && s.holdUntil > now) {
        this.emit({ type: "hold", at: now, scope, until: s.holdUntil, source: holdSource });
      }
    }
    this.changed(scope, entry, now);
    this.flushChanges();
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
    const entry = this.entry(scope);
    const manager = entry.manager;
    const now = this.scheduler.now();
    const noticed = this.noticed;
    if (noticed) {
      this.emit({
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
    this.advance(scope, entry, now);
    const before = noticed ? this.stateOf(scope, entry).holdUntil : 0;
    manager.recordAnnounced(now, budget);
    if (noticed) {
      const until = this.stateOf(scope, entry).holdUntil;
      if (until > before && until > now) {
        this.emit({ type: "hold", at: now, scope, until, source: "ratelimit" });
      }
    }
    this.changed(scope, entry, now);
    this.flushChanges();
  }

  /**
   * An adaptive scope goes no faster than `delayMs` apart (a pace another
   * process learned, through `shareBackoff`); slower scopes and scopes that
   * do not adapt are left as they are. The step is a `rampup` event.
   */
  adoptDelay(scope: string, delayMs: number, cause = "adopted"): void {
    const entry = this.entry(scope);
    const now = this.scheduler.now();
    const manager = entry.manager;
    if (manager.adoptDelay === undefined) return;
    this.advance(scope, entry, now);
    manager.adoptDelay(now, delayMs, cause);
    this.advance(scope, entry, now);
    this.changed(scope, entry, now);
    this.flushChanges();
  }

  /** Correct a scope's quota use (the reference's `reconcile_quota`). */
  reconcileQuota(scope: string, reconciliation: QuotaReconciliation): void {
    const entry = this.entry(scope);
    const now = this.scheduler.now();
    entry.manager.reconcileQuota(now, reconciliation);
    this.changed(scope, entry, now);
    this.flushChanges();
  }

  /** Replace a scope's configured delay (robots.txt Crawl-delay, a user's decision). */
  setBaseDelay(scope: string, delayMs: number, options?: BaseDelayOptions): void {
    const entry = this.entry(scope);
    entry.manager.setBaseDelay(delayMs, options);
    this.changed(scope, entry, this.scheduler.now());
    this.flushChanges();
  }

  /** Replace a scope's concurrency limit (`temporary`: see `ConcurrencyOptions`). */
  setConcurrency(scope: string, concurrency: number, options?: ConcurrencyOptions): void {
    const entry = this.entry(scope);
    entry.manager.setConcurrency(concurrency, options);
    this.changed(scope, entry, this.scheduler.now());
    this.flushChanges();
  }

  /**
   * Turn rampup on for a scope, or for every scope `scopes` matches: those in
   * memory now (they start over from two in flight, see docs/RAMPUP.md) and those created
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
    const stop = this.addRampupRule(rule);
    const now = this.scheduler.now();
    for (const entry of this.allEntries()) {
      const scope = entry.scope;
      const m = entry.manager;
      if (m instanceof ThrottlingScopeManager && !m.rampup && rule.match(scope)) {
        m.enableRampup(rule.rampup);
        this.changed(scope, entry, now);
      }
    }
    this.flushChanges();
    return stop;
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
    return this.traffic.open();
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
 * import { fromScrapySettings } from "../settings/scrapy_settings.ts";
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
