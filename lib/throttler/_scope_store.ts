/**
 * The throttler's scopes in memory: the table of entries by name
 * (`./_scope_table.ts`), their least-recently-used list, the configuration a
 * new scope gets, the pool of evicted entries reused for new scopes, and the
 * sweep that evicts idle scopes. The gate (`_gate.ts`) builds on it.
 *
 * @module
 */
import { ScopeTable } from "./_scope_table.ts";
import type { ScopeState } from "../managers/scope_manager_protocol.ts";
import {
  type ResolvedRampup,
  type ResolvedScopeConfig,
  resolveScopeConfig,
  type ScopeKind,
  scopeKind,
  type ScopeManagerFactory,
  type ThrottlerSettings,
} from "../settings/settings.ts";
import type { SchedulerLike } from "rxjs";
import { ThrottlerEvents } from "./_events.ts";
import { clearTimer, clearWake, DefaultScopeEntry, type ScopeEntry } from "./_scope_entry.ts";

/** Evicted entries kept for reuse (see `ScopeStore.#pool`). */
const POOL_MAX = 1024;

/** Rampup turned on by `enableRampup` for the scopes it matches. */
export interface RampupRule {
  readonly match: (scope: string) => boolean;
  readonly rampup: ResolvedRampup;
}

/**
 * The scopes of a throttler, created when first used and evicted when idle.
 * Abstract: only `Throttler` is made.
 */
export abstract class ScopeStore extends ThrottlerEvents {
  readonly #random: () => number;
  readonly #factory: ScopeManagerFactory | undefined;
  readonly #entries = new ScopeTable<ScopeEntry>();
  /**
   * Evicted default entries, reset and reused for new scopes: a broad crawl
   * then makes no long-lived object per scope, which the garbage collector
   * would copy out of the young generation (a quarter of the time before).
   */
  readonly #pool: DefaultScopeEntry[] = [];
  #sinceSweep = 0;
  /**
   * Scopes created or requests done before an over-the-limit sweep runs
   * again: 0, or more after a sweep that could not get under the limit
   * (the oldest scopes busy), so that sweeps do not walk busy scopes for
   * every request.
   */
  #sweepGap = 0;
  /** Ends of the least-recently-used list of scopes. */
  #oldest: ScopeEntry | undefined;
  #newest: ScopeEntry | undefined;
  /** The configuration of scopes without their own entry, per kind (it depends on nothing else). */
  readonly #kindConfigs = new Map<ScopeKind, ResolvedScopeConfig>();
  /** The names of the scopes configured in `settings.scopes`. */
  readonly #configured: ReadonlySet<string>;
  /** Rampup turned on by `enableRampup` for scopes that do not configure it. */
  readonly #rampupRules: RampupRule[] = [];
  /** Listeners of one scope's state (`scope$`); a watched scope is never evicted. */
  protected readonly watchers: Map<string, Set<(s: ScopeState) => void>> = new Map();
  /** Listeners of every scope's state (`states$`). */
  protected readonly allWatchers: Set<(s: ScopeState) => void> = new Set();

  constructor(
    settings: ThrottlerSettings,
    scheduler: SchedulerLike,
    log: (line: string) => void,
    random: () => number,
    factory: ScopeManagerFactory | undefined,
  ) {
    super(settings, scheduler, log);
    this.#configured = new Set(Object.keys(settings.scopes));
    this.#random = random;
    this.#factory = factory;
  }

  /** How many scopes are in memory. */
  get scopeCount(): number {
    return this.#entries.size;
  }

  /** The configuration a scope gets (its own entry, its host's, or the defaults for its kind). */
  scopeConfig(scope: string): ResolvedScopeConfig {
    return this.#resolveConfig(scope, scopeKind(scope));
  }

  /** A gone scope's bookkeeping outside its entry is dropped (called as it is evicted). */
  protected abstract evicted(scope: string): void;

  /** The entry of a scope in memory, or `undefined`. */
  protected lookup(scope: string): ScopeEntry | undefined {
    return this.#entries.get(scope);
  }

  /** Every entry, in no particular order; create or evict none while iterating. */
  protected allEntries(): IterableIterator<ScopeEntry> {
    return this.#entries.values();
  }

  /** The least recently used entry (follow `newer` for the others). */
  protected get oldestEntry(): ScopeEntry | undefined {
    return this.#oldest;
  }

  /** Apply a rampup rule to the scopes created from now on; returns what stops it. */
  protected addRampupRule(rule: RampupRule): () => void {
    this.#rampupRules.push(rule);
    return () => {
      const i = this.#rampupRules.indexOf(rule);
      if (i >= 0) this.#rampupRules.splice(i, 1);
    };
  }

  /** A request was done: it counts towards the next sweep. */
  protected countUse(): void {
    this.#sinceSweep++;
  }

  /** The entry of a scope, created from its configuration when not in memory. */
  protected entry(scope: string): ScopeEntry {
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
    if (this.observed) this.emit({ type: "scope-created", at: this.scheduler.now(), scope });
    this.#sinceSweep++;
    return entry;
  }

  /** A scope's state now, from its manager (zeros for a manager without `state`). */
  protected stateOf(scope: string, entry: ScopeEntry): ScopeState {
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
  protected sweepDue(): boolean {
    const limit = this.settings.scopeLimit;
    return this.#sinceSweep >= 1024 ||
      (limit > 0 && this.#entries.size > limit && this.#sinceSweep >= this.#sweepGap);
  }

  protected sweep(): void {
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
        (this.watchers.size === 0 || !this.watchers.has(scope)) && entry.manager.isIdle(now, 0);
      if (free && (over > 0 || (maxIdle > 0 && entry.manager.isIdle(now, maxIdle)))) {
        this.#evict(scope, entry, over > 0 ? "limit" : "idle", now);
        over--;
      } else if (free) {
        break; // every scope after this one was used more recently still
      } else {
        this.touch(entry);
      }
      entry = next;
    }
    // Still over the limit (the old scopes are busy): wait for more events
    // before walking again, one per 32 scopes walked, so a store full of busy
    // scopes costs O(1) amortised per request too.
    this.#sweepGap = limit > 0 && this.#entries.size > limit ? (maxWalk - budget) >>> 5 : 0;
  }

  /** Move a scope to the newest end of the least-recently-used list. */
  protected touch(entry: ScopeEntry): void {
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
    clearTimer(entry);
    clearWake(entry);
    this.#entries.delete(entry);
    this.#unlink(entry);
    if (
      entry instanceof DefaultScopeEntry && !entry.exposed && this.depth <= 1 &&
      this.#pool.length < POOL_MAX
    ) {
      entry.waiting = undefined;
      entry.timers = undefined;
      entry.traffic = undefined;
      this.#pool.push(entry);
    }
    this.evicted(scope);
    if (this.noticed) this.emit({ type: "scope-evicted", at: now, scope, reason });
  }
}
