/**
 * The pending requests of one scope set, in the reference's order: higher
 * priority first; within a priority regular requests (LIFO or FIFO) before
 * start requests (always FIFO). One bucket per distinct priority, so push and
 * pop cost O(1) plus a binary search over the (few) distinct priorities.
 *
 * @module
 */
import { Deque } from "../util/_deque.ts";

/** What a bucket holds: anything with a priority and a start flag. */
export interface BucketItem {
  /** Effective priority (after DEPTH_PRIORITY): higher first. */
  readonly priority: number;
  /** A start request: FIFO, after regular requests of equal priority. */
  readonly start: boolean;
}

interface Level<T> {
  readonly priority: number;
  readonly regular: Deque<T>;
  start: Deque<T> | undefined;
}

/** Priority buckets of one scope set. */
export class PriorityBuckets<T extends BucketItem> {
  /** Levels, highest priority first; empty levels are removed at once. */
  #levels: Level<T>[] = [];
  #size = 0;
  readonly #fifo: boolean;

  /** @param fifo Regular requests first-in-first-out instead of LIFO. */
  constructor(fifo: boolean) {
    this.#fifo = fifo;
  }

  get size(): number {
    return this.#size;
  }

  push(item: T): void {
    const level = this.#level(item.priority);
    if (item.start) (level.start ??= new Deque<T>()).push(item);
    else level.regular.push(item);
    this.#size++;
  }

  /** The item {@link pop} would return. */
  peek(): T | undefined {
    const level = this.#levels[0];
    if (level === undefined) return undefined;
    if (level.regular.size > 0) return this.#fifo ? level.regular.peek() : level.regular.last();
    return level.start?.peek();
  }

  pop(): T | undefined {
    const level = this.#levels[0];
    if (level === undefined) return undefined;
    let item: T | undefined;
    if (level.regular.size > 0) item = this.#fifo ? level.regular.shift() : level.regular.pop();
    else item = level.start?.shift();
    this.#size--;
    if (level.regular.size === 0 && (level.start === undefined || level.start.size === 0)) {
      this.#levels.shift();
    }
    return item;
  }

  /** Every item, in no particular order. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (const level of this.#levels) {
      yield* level.regular;
      if (level.start) yield* level.start;
    }
  }

  #level(priority: number): Level<T> {
    const levels = this.#levels;
    // Most scope sets hold one priority: check the head before searching.
    const head = levels[0];
    if (head !== undefined && head.priority === priority) return head;
    let lo = 0, hi = levels.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((levels[mid] as Level<T>).priority > priority) lo = mid + 1;
      else hi = mid;
    }
    const found = levels[lo];
    if (found !== undefined && found.priority === priority) return found;
    const level: Level<T> = { priority, regular: new Deque<T>(), start: undefined };
    levels.splice(lo, 0, level);
    return level;
  }
}
