/**
 * A bounded map with approximate least-recently-used eviction, under the
 * async TTL cache of DNS and robots.txt (lib/util/_ttl_cache.ts; private: not
 * exported from `mod.ts`).
 *
 * A `Map` iterates in insertion order, so re-inserting an entry on use keeps
 * the least recently used first and eviction is O(1). Re-inserting on every
 * hit costs about 1 µs (a Map delete and set), ten times the lookup, so an
 * entry moves only once it is in the older half (more than `maxEntries / 2`
 * moves ago): an approximation that never evicts an entry used within the
 * last `maxEntries / 2` moves.
 *
 * @module
 */

interface Slot<V> {
  value: V;
  /** Value of the move counter when the slot was last (re)inserted. */
  movedAt: number;
}

/** A bounded map with approximate LRU eviction. @internal */
export class Lru<V> {
  readonly #slots = new Map<string, Slot<V>>();
  readonly #maxEntries: number;
  readonly #moveAfter: number;
  #moves = 0;

  /** @param maxEntries At most this many entries; `0` means no limit. */
  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
    this.#moveAfter = Math.max(1, Math.floor(maxEntries / 2));
  }

  /** The value of a key, counting as a use (may move it to the recent end). */
  get(key: string): V | undefined {
    const slot = this.#slots.get(key);
    if (slot === undefined) return undefined;
    if (this.#maxEntries > 0 && this.#moves - slot.movedAt >= this.#moveAfter) {
      this.#slots.delete(key);
      this.#slots.set(key, slot);
      slot.movedAt = ++this.#moves;
    }
    return slot.value;
  }

  /**
   * The value of a key that has not expired by `now` (its `expiresAt`),
   * counting as a use; an expired entry is removed.
   */
  getFresh(key: string, now: number): V | undefined {
    const value = this.get(key);
    if (value === undefined) return undefined;
    if (now >= (value as { readonly expiresAt: number }).expiresAt) {
      this.#slots.delete(key);
      return undefined;
    }
    return value;
  }

  /** The value of a key without counting a use. */
  peek(key: string): V | undefined {
    return this.#slots.get(key)?.value;
  }

  /** Insert (or replace) a key as the most recently used; evicts the least recently used past the bound. */
  set(key: string, value: V): void {
    this.#slots.delete(key);
    this.#slots.set(key, { value, movedAt: ++this.#moves });
    if (this.#maxEntries > 0 && this.#slots.size > this.#maxEntries) {
      this.#slots.delete(this.#slots.keys().next().value!);
    }
  }

  /** Remove a key; whether it was there. */
  delete(key: string): boolean {
    return this.#slots.delete(key);
  }

  /** Remove everything. */
  clear(): void {
    this.#slots.clear();
  }

  /** How many entries there are. */
  get size(): number {
    return this.#slots.size;
  }
}
