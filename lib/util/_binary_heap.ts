/**
 * A binary min-heap with an optional position callback, so an item whose key
 * changed can be moved (`update`) or taken out (`remove`) in O(log n).
 *
 * @module
 */

/** A binary heap ordered by `less`. */
export class BinaryHeap<T> {
  readonly #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;
  readonly #setIndex: ((item: T, index: number) => void) | undefined;

  /**
   * @param less Whether `a` comes out before `b`.
   * @param setIndex Told each item's position (-1 once it leaves), for `update`/`remove`.
   */
  constructor(less: (a: T, b: T) => boolean, setIndex?: (item: T, index: number) => void) {
    this.#less = less;
    this.#setIndex = setIndex;
  }

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    this.#items.push(item);
    this.#up(this.#items.length - 1);
  }

  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    if (top === undefined) return undefined;
    const last = items.pop() as T;
    if (items.length > 0) {
      items[0] = last;
      this.#down(0);
    }
    this.#setIndex?.(top, -1);
    return top;
  }

  /** Restores order after the key of the item at `index` changed. */
  update(index: number): void {
    if (index < 0 || index >= this.#items.length) return;
    this.#down(this.#up(index));
  }

  /** Takes out the item at `index`. */
  remove(index: number): void {
    const items = this.#items;
    const item = items[index];
    if (item === undefined) return;
    const last = items.pop() as T;
    if (index < items.length) {
      items[index] = last;
      this.update(index);
    }
    this.#setIndex?.(item, -1);
  }

  /** Every item, in heap order (not sorted). */
  values(): readonly T[] {
    return this.#items;
  }

  #up(i: number): number {
    const items = this.#items;
    const item = items[i] as T;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = items[parent] as T;
      if (!this.#less(item, p)) break;
      items[i] = p;
      this.#setIndex?.(p, i);
      i = parent;
    }
    items[i] = item;
    this.#setIndex?.(item, i);
    return i;
  }

  #down(i: number): void {
    const items = this.#items;
    const n = items.length;
    const item = items[i] as T;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      if (r < n && this.#less(items[r] as T, items[l] as T)) c = r;
      const child = items[c] as T;
      if (!this.#less(child, item)) break;
      items[i] = child;
      this.#setIndex?.(child, i);
      i = c;
    }
    items[i] = item;
    this.#setIndex?.(item, i);
  }
}
