/**
 * An async cache whose entries expire: the one behind the DNS cache and the
 * robots.txt cache (private: not exported from `mod.ts`). Concurrent callers
 * of one key share one load; a settled value lives as long as its load said,
 * a failed load is remembered for `failureTtlMs` (so a burst of callers does
 * not each start one); time is read only from the scheduler's `now()`; at
 * most `maxEntries` keys are kept, the least recently used going first
 * (lib/util/_lru.ts).
 *
 * @module
 */
import type { SchedulerLike } from "rxjs";
import { Lru } from "./_lru.ts";

/** What a load found: the value to cache and how long it is good for. */
export interface Loaded<V> {
  /** The value callers get. */
  readonly value: V;
  /** How long the value is served from the cache, in ms of scheduler time (`0`: not at all). */
  readonly ttlMs: number;
}

/** Options of {@link TtlCache}. */
export interface TtlCacheOptions {
  /** At most this many keys; past it the least recently used goes. `0` means no limit. */
  readonly maxEntries: number;
  /** Source of time (only `now()` is used). */
  readonly scheduler: SchedulerLike;
  /** How long a failed load is remembered (its rejection served), in ms. `0`: not at all. @default 0 */
  readonly failureTtlMs?: number;
}

interface Entry<V> {
  readonly promise: Promise<V>;
  /** Set once loaded. */
  value: V | undefined;
  /** Scheduler time from which the entry is stale; Infinity while loading. */
  expiresAt: number;
}

/** An async cache with expiring entries. @internal */
export class TtlCache<V> {
  readonly #entries: Lru<Entry<V>>;
  readonly #scheduler: SchedulerLike;
  readonly #failureTtlMs: number;

  /** @param options Size bound, scheduler and failure TTL (checked by the caller). */
  constructor(options: TtlCacheOptions) {
    this.#entries = new Lru(options.maxEntries);
    this.#scheduler = options.scheduler;
    this.#failureTtlMs = options.failureTtlMs ?? 0;
  }

  /**
   * The value of a key: the cached one while fresh, else the load in flight,
   * else a new load (which replaces an expired entry).
   *
   * @param key The key.
   * @param load Loads the value of a key; given the last value loaded for it,
   * even expired (`undefined` when there is none), so it can fall back on it.
   * @returns The value, or the load's rejection.
   */
  get(key: string, load: (key: string, stale: V | undefined) => Promise<Loaded<V>>): Promise<V> {
    const entry = this.#entries.get(key);
    if (entry !== undefined && this.#scheduler.now() < entry.expiresAt) return entry.promise;
    return this.#start(key, entry?.value, load).promise;
  }

  /** The fresh value of a key, or `undefined` (not loaded, loading, failed or expired); never loads. */
  peek(key: string): V | undefined {
    return this.#entries.getFresh(key, this.#scheduler.now())?.value;
  }

  /** Keys cached, loads in flight and remembered failures included. */
  get size(): number {
    return this.#entries.size;
  }

  /** Forget everything (loads in flight still settle for their callers). */
  clear(): void {
    this.#entries.clear();
  }

  #start(
    key: string,
    stale: V | undefined,
    load: (key: string, stale: V | undefined) => Promise<Loaded<V>>,
  ): Entry<V> {
    let loading: Promise<Loaded<V>>;
    try {
      loading = load(key, stale);
    } catch (error) {
      loading = Promise.reject(error);
    }
    const entry: Entry<V> = {
      value: undefined,
      expiresAt: Infinity,
      promise: loading.then(
        (loaded) => {
          entry.value = loaded.value;
          entry.expiresAt = this.#scheduler.now() + loaded.ttlMs;
          return loaded.value;
        },
        (error: unknown) => {
          entry.expiresAt = this.#scheduler.now() + this.#failureTtlMs;
          throw error;
        },
      ),
    };
    this.#entries.set(key, entry);
    return entry;
  }
}

/**
 * A cache's numeric option, checked at construction (the DNS and robots.txt
 * caches): `value` back, or a RangeError naming the cache and the option.
 */
export function checkCacheOption(
  cache: string,
  name: string,
  value: unknown,
  min: number,
  integer: boolean,
): number {
  if (
    typeof value !== "number" || !Number.isFinite(value) || value < min ||
    (integer && !Number.isInteger(value))
  ) {
    throw new RangeError(
      `Cannot create ${cache} as '${name}' must be ${
        integer ? "an integer" : "a finite number"
      } >= ${min}: current value is ${value}`,
    );
  }
  return value;
}
