/**
 * The throttler's store of scopes: an open-addressing hash table of entries
 * keyed by their scope name, with linear probing and backward-shift deletion.
 *
 * Why not a `Map`: a broad crawl creates a scope for nearly every request and
 * evicts another, in a store of a hundred thousand. `Map` pays for that churn
 * (deleted entries stay as holes until the table is rebuilt, and a lookup of a
 * fresh string walks a chain of cold entries): about 0.8 µs per scope created
 * and evicted at that size, against about 0.45 µs here (bench/broad.bench.ts,
 * docs/BROAD_CRAWLS.md). Here an entry knows its slot, so eviction neither
 * hashes nor compares a string, and a lookup that misses leaves the slot an
 * insert of the same name takes.
 *
 * @module
 */

/** What the table stores: an object that names its scope and keeps its slot. */
export interface Slotted {
  readonly scope: string;
  /** Index in the table while stored, -1 when not. Only the table writes it. */
  slot: number;
}

const MIN_CAPACITY = 16;

/** FNV-1a over UTF-16 code units, with a final mix of the high bits into the low ones. */
export function hashScope(scope: string): number {
  let h = 0x811c9dc5 | 0;
  for (let i = 0; i < scope.length; i++) h = Math.imul(h ^ scope.charCodeAt(i), 0x01000193);
  return (h ^ (h >>> 16)) | 0;
}

/**
 * A hash table of `Slotted` entries by `scope`. The load factor stays at or
 * under one half; it shrinks when a quarter of that is used, so a store that
 * once held a million scopes gives the memory back when they are evicted.
 */
export class ScopeTable<E extends Slotted> {
  #slots: (E | undefined)[];
  #hashes: Int32Array;
  #mask: number;
  #size = 0;
  /** Where the last missed lookup ended, and for which name and hash. */
  #missAt = -1;
  #missScope: string | undefined;
  #missHash = 0;

  constructor() {
    this.#slots = new Array<E | undefined>(MIN_CAPACITY).fill(undefined);
    this.#hashes = new Int32Array(MIN_CAPACITY);
    this.#mask = MIN_CAPACITY - 1;
  }

  /** Entries stored. */
  get size(): number {
    return this.#size;
  }

  /** The entry of a scope, if stored. */
  get(scope: string): E | undefined {
    // Asked again right after a miss (the gate looks before it creates): no
    // change since, so still a miss, and `add` keeps the slot found.
    if (scope === this.#missScope && this.#missAt >= 0) return undefined;
    const h = hashScope(scope);
    const slots = this.#slots;
    const hashes = this.#hashes;
    const mask = this.#mask;
    let i = h & mask;
    for (;;) {
      const e = slots[i];
      if (e === undefined) {
        this.#missAt = i;
        this.#missScope = scope;
        this.#missHash = h;
        return undefined;
      }
      if (hashes[i] === h && e.scope === scope) return e;
      i = (i + 1) & mask;
    }
  }

  /**
   * Store an entry whose scope is not stored yet (the caller looked it up:
   * storing a name twice is a bug this does not check for).
   */
  add(entry: E): void {
    const scope = entry.scope;
    let i: number;
    let h: number;
    if (this.#missScope === scope && this.#missAt >= 0) {
      i = this.#missAt;
      h = this.#missHash;
    } else {
      h = hashScope(scope);
      i = this.#freeSlot(h);
    }
    this.#missAt = -1;
    this.#missScope = undefined;
    this.#slots[i] = entry;
    this.#hashes[i] = h;
    entry.slot = i;
    if (++this.#size * 2 > this.#slots.length) this.#resize(this.#slots.length * 2);
  }

  /** Remove a stored entry (by its slot: no hashing, no string compared). */
  delete(entry: E): void {
    const slots = this.#slots;
    const hashes = this.#hashes;
    const mask = this.#mask;
    let hole = entry.slot;
    if (hole < 0 || slots[hole] !== entry) return;
    entry.slot = -1;
    // Backward shift: move later entries of the probe run into the hole when
    // their home slot is at or before it, so no lookup ever needs a tombstone.
    let j = hole;
    for (;;) {
      j = (j + 1) & mask;
      const e = slots[j];
      if (e === undefined) break;
      const home = hashes[j]! & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        slots[hole] = e;
        hashes[hole] = hashes[j]!;
        e.slot = hole;
        hole = j;
      }
    }
    slots[hole] = undefined;
    this.#missAt = -1;
    this.#missScope = undefined;
    this.#size--;
    const capacity = slots.length;
    if (capacity > MIN_CAPACITY && this.#size * 8 < capacity) this.#resize(capacity / 2);
  }

  /** Every stored entry, in no particular order; do not add or delete while iterating. */
  *values(): IterableIterator<E> {
    for (const e of this.#slots) if (e !== undefined) yield e;
  }

  #freeSlot(h: number): number {
    const slots = this.#slots;
    const mask = this.#mask;
    let i = h & mask;
    while (slots[i] !== undefined) i = (i + 1) & mask;
    return i;
  }

  #resize(capacity: number): void {
    const old = this.#slots;
    const oldHashes = this.#hashes;
    this.#slots = new Array<E | undefined>(capacity).fill(undefined);
    this.#hashes = new Int32Array(capacity);
    this.#mask = capacity - 1;
    this.#missAt = -1;
    this.#missScope = undefined;
    for (let k = 0; k < old.length; k++) {
      const e = old[k];
      if (e === undefined) continue;
      const h = oldHashes[k]!;
      const i = this.#freeSlot(h);
      this.#slots[i] = e;
      this.#hashes[i] = h;
      e.slot = i;
    }
  }
}
