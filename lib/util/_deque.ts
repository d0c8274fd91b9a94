/**
 * A double-ended queue on a growable ring buffer: O(1) push, shift, pop and peek, where
 * `Array.prototype.shift` would be O(n) on the long waiting lists of a busy
 * gate.
 */
export class Deque<T> {
  #items: (T | undefined)[] = new Array(4);
  #head = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  push(item: T): void {
    if (this.#size === this.#items.length) this.#grow();
    this.#items[(this.#head + this.#size) & (this.#items.length - 1)] = item;
    this.#size++;
  }

  peek(): T | undefined {
    return this.#size === 0 ? undefined : this.#items[this.#head];
  }

  /** The last item, or `undefined` when empty. */
  last(): T | undefined {
    return this.#size === 0
      ? undefined
      : this.#items[(this.#head + this.#size - 1) & (this.#items.length - 1)];
  }

  /** Remove and return the last item (LIFO use). */
  pop(): T | undefined {
    if (this.#size === 0) return undefined;
    const i = (this.#head + this.#size - 1) & (this.#items.length - 1);
    const item = this.#items[i];
    this.#items[i] = undefined;
    this.#size--;
    return item;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = 0; i < this.#size; i++) {
      yield this.#items[(this.#head + i) & (this.#items.length - 1)] as T;
    }
  }

  shift(): T | undefined {
    if (this.#size === 0) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) & (this.#items.length - 1);
    this.#size--;
    return item;
  }

  #grow(): void {
    const old = this.#items;
    const next: (T | undefined)[] = new Array(old.length * 2);
    for (let i = 0; i < this.#size; i++) next[i] = old[(this.#head + i) & (old.length - 1)];
    this.#items = next;
    this.#head = 0;
  }
}
