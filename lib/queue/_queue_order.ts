/**
 * The order of the request queue (`request_queue.ts`): pending requests
 * grouped by scope set (the sorted scopes of a request, so no head-of-line
 * blocking across sets), each set's requests in the reference's order
 * (`_priority_buckets.ts`), the heap of ready sets in the queue's order
 * (throttling-aware, downloader-aware or priority), the sets the view
 * blocks and the wakes that look at them again, and the requests held aside
 * for their `meta.throttlingDelayMs`.
 *
 * The hot path of every request is here: `place` at enqueue, `take` when
 * the queue emits, `touched` when it is done. The items it keeps are the
 * queue's own (in flight and in the job directory's compaction too); add no
 * closure or allocation per request (bench/request_queue.bench.ts).
 *
 * @module
 */
import type { SchedulerLike } from "rxjs";
import { BinaryHeap } from "../util/_binary_heap.ts";
import { PriorityBuckets } from "./_priority_buckets.ts";
import { markRequestDelayed } from "../_request_delay.ts";
import type { QueueThrottleView, RequestQueueOrder } from "./request_queue.ts";

const READY = 1, BLOCKED = 2, GONE = 0;

/** The pending requests of one scope set, and its cached key in the ready heap. */
export interface ScopeSet<R> {
  readonly key: string;
  readonly scopes: readonly string[];
  readonly buckets: PriorityBuckets<QueueItem<R>>;
  heapIndex: number;
  state: number;
  version: number;
  // Cached heap key, refreshed when the head or the load changes.
  headPriority: number;
  headStart: boolean;
  headSeq: number;
  load: number;
  share: number;
  served: number;
}

/** A request in the queue, from enqueue until it is done. */
export interface QueueItem<R> {
  readonly r: R;
  readonly seq: number;
  readonly priority: number;
  readonly start: boolean;
  readonly fp: string | undefined;
  readonly amounts: readonly (number | undefined)[] | undefined;
  readonly set: ScopeSet<R>;
  readonly persisted: boolean;
  readonly releaseAt: number;
  /** The next in-flight item of an equal request (dontFilter duplicates), without an array per request. */
  sameNext: QueueItem<R> | undefined;
}

interface Wake<R> {
  readonly at: number;
  readonly set: ScopeSet<R>;
  readonly version: number;
}

/** What `QueueOrder` is built with (read once by its constructor). */
export interface QueueOrderOptions {
  readonly view: QueueThrottleView;
  readonly order: RequestQueueOrder;
  readonly fifo: boolean;
  /** The view never changes (no view, or scopes ignored): no load or share to refresh. */
  readonly staticView: boolean;
  /** Every request goes into one scope set. */
  readonly oneSet: boolean;
  readonly scheduler: SchedulerLike;
  /** Warn once when more requests than this are held back. */
  readonly threshold: number;
  readonly warn: (code: string, message: string) => void;
}

/**
 * The pending requests of a request queue, in the order they may go. The
 * queue keeps its counters, its requests in flight and its subscriber; this
 * keeps where each pending request waits.
 */
export class QueueOrder<R> {
  readonly #view: QueueThrottleView;
  readonly #order: RequestQueueOrder;
  readonly #fifo: boolean;
  readonly #staticView: boolean;
  readonly #oneSet: boolean;
  readonly #scheduler: SchedulerLike;
  readonly #threshold: number;
  readonly #warn: (code: string, message: string) => void;

  readonly #sets = new Map<string, ScopeSet<R>>();
  readonly #byScope = new Map<string, Set<ScopeSet<R>>>();
  readonly #ready: BinaryHeap<ScopeSet<R>>;
  readonly #blocked = new Set<ScopeSet<R>>();
  readonly #wakes = new BinaryHeap<Wake<R>>((a, b) => a.at < b.at);
  readonly #aside = new BinaryHeap<QueueItem<R>>((a, b) =>
    a.releaseAt < b.releaseAt || (a.releaseAt === b.releaseAt && a.seq < b.seq)
  );
  #served = 0;
  #blockedCount = 0;
  #warnedHeldBack = false;

  constructor(options: QueueOrderOptions) {
    this.#view = options.view;
    this.#order = options.order;
    this.#fifo = options.fifo;
    this.#staticView = options.staticView;
    this.#oneSet = options.oneSet;
    this.#scheduler = options.scheduler;
    this.#threshold = options.threshold;
    this.#warn = options.warn;
    this.#ready = new BinaryHeap<ScopeSet<R>>(this.#lessFor(options.order), (s, i) => {
      s.heapIndex = i;
    });
  }

  /** Requests waiting aside for their `throttlingDelayMs`. */
  get delayed(): number {
    return this.#aside.size;
  }

  /** Requests in scope sets the view currently blocks. */
  get blocked(): number {
    return this.#blockedCount;
  }

  /**
   * Places a new or resumed request: into its scope set, or aside until its
   * `meta.throttlingDelayMs` has passed. `key` is the scope set's key when
   * the request has one scope (its host); otherwise `scopes` (and `amounts`)
   * are sorted here into the key.
   */
  place(
    r: R,
    seq: number,
    priority: number,
    start: boolean,
    fp: string | undefined,
    key: string | undefined,
    scopes: readonly string[] | undefined,
    amounts: readonly (number | undefined)[] | undefined,
    persisted: boolean,
    meta: { readonly throttlingDelayMs?: number } | undefined,
  ): void {
    if (this.#oneSet) key = "";
    else if (key === undefined) {
      const s = scopes as readonly string[];
      if (s.length > 1) {
        const order = s.map((_, i) => i).sort((a, b) =>
          (s[a] as string) < (s[b] as string) ? -1 : 1
        );
        scopes = order.map((i) => s[i] as string);
        if (amounts !== undefined) amounts = order.map((i) => amounts?.[i]);
        key = scopes.join("\u0000");
      } else {
        key = s[0] as string;
      }
    }
    const set = this.#sets.get(key) ?? this.#newSet(key, scopes ?? [key]);
    const delay = meta?.throttlingDelayMs;
    const releaseAt = typeof delay === "number" && delay > 0 ? this.#scheduler.now() + delay : 0;
    const item: QueueItem<R> = {
      r,
      seq,
      priority,
      start,
      fp,
      amounts,
      set,
      persisted,
      releaseAt,
      sameNext: undefined,
    };
    if (releaseAt > 0) {
      this.#aside.push(item);
      this.#checkHeldBack();
      return;
    }
    this.#insert(item);
  }

  /**
   * The next request to emit, taken out of its scope set: `undefined` when
   * none can go now (nothing ready, or no free slot), `null` when the head
   * set turned out blocked (the caller looks again, after checking that its
   * subscriber is still there: blocking may warn, and a listener of the
   * warning may unsubscribe).
   */
  take(): QueueItem<R> | null | undefined {
    const ready = this.#ready;
    const set = ready.peek();
    if (set === undefined || !(this.#view.freeSlots() > 0)) return undefined;
    if (this.#order === "throttling-aware") {
      const head = set.buckets.peek() as QueueItem<R>;
      const w = this.#view.waitMs(set.scopes, head.amounts);
      if (w > 0 || Number.isNaN(w)) {
        this.#block(set, w);
        return null;
      }
    }
    const item = set.buckets.pop() as QueueItem<R>;
    set.served = ++this.#served;
    if (set.buckets.size === 0) {
      ready.remove(set.heapIndex);
      this.#dropSet(set);
    } else {
      this.#refresh(set);
    }
    return item;
  }

  /** A request of this set was emitted, done or given back: its load may have changed. */
  touched(set: ScopeSet<R>): void {
    if (!this.#staticView && set.state === READY && set.heapIndex >= 0) this.#refresh(set);
  }

  /** The view changed: the scopes it names (an array of strings), or anything (any other value). */
  changed(value: unknown): void {
    if (Array.isArray(value) && value.every((s) => typeof s === "string")) {
      for (const scope of value as string[]) {
        const sets = this.#byScope.get(scope);
        if (sets === undefined) continue;
        for (const set of sets) {
          if (set.state === BLOCKED) this.#unblock(set);
          else if (set.state === READY) this.#refresh(set);
        }
      }
    } else {
      for (const set of [...this.#blocked]) this.#unblock(set);
    }
  }

  /** Unblocks the sets whose wake is due and puts back the requests whose delay has passed. */
  releaseDue(): void {
    const now = this.#scheduler.now();
    for (let w = this.#wakes.peek(); w !== undefined && w.at <= now; w = this.#wakes.peek()) {
      this.#wakes.pop();
      if (w.set.state === BLOCKED && w.set.version === w.version) this.#unblock(w.set);
    }
    for (
      let i = this.#aside.peek();
      i !== undefined && i.releaseAt <= now;
      i = this.#aside.peek()
    ) {
      this.#aside.pop();
      // The gate must not wait the same delay again.
      markRequestDelayed(i.r);
      this.#insert(i);
    }
  }

  /** When `releaseDue` has something to do next (`Infinity`: nothing); drops stale wakes. */
  nextAt(): number {
    let at = Infinity;
    for (let w = this.#wakes.peek(); w !== undefined; w = this.#wakes.peek()) {
      if (w.set.state === BLOCKED && w.set.version === w.version) {
        at = w.at;
        break;
      }
      this.#wakes.pop(); // stale
    }
    const aside = this.#aside.peek();
    if (aside !== undefined && aside.releaseAt < at) at = aside.releaseAt;
    return at;
  }

  /** Appends every pending request (in scope sets, then aside) to `into`. */
  collect(into: QueueItem<R>[]): void {
    for (const set of this.#sets.values()) for (const item of set.buckets) into.push(item);
    for (const item of this.#aside.values()) into.push(item);
  }

  #insert(item: QueueItem<R>): void {
    let set = item.set;
    if (set.state === GONE) {
      // The set emptied and was dropped while this item waited aside.
      set = this.#sets.get(set.key) ?? this.#newSet(set.key, set.scopes);
      (item as { set: ScopeSet<R> }).set = set;
    }
    const buckets = set.buckets;
    buckets.push(item);
    if (set.state === BLOCKED) {
      this.#blockedCount++;
      if (buckets.peek() === item) this.#unblock(set); // a new head may not be blocked
      else this.#checkHeldBack();
    } else if (set.heapIndex < 0) {
      this.#refresh(set);
      this.#ready.push(set);
    } else if (buckets.peek() === item) {
      this.#refresh(set);
    }
  }

  #newSet(key: string, scopes: readonly string[]): ScopeSet<R> {
    const set: ScopeSet<R> = {
      key,
      scopes,
      buckets: new PriorityBuckets<QueueItem<R>>(this.#fifo),
      heapIndex: -1,
      state: READY,
      version: 0,
      headPriority: 0,
      headStart: false,
      headSeq: 0,
      load: 0,
      share: 0,
      served: 0,
    };
    this.#sets.set(key, set);
    if (!this.#oneSet) {
      for (const s of scopes) {
        const sets = this.#byScope.get(s);
        if (sets === undefined) this.#byScope.set(s, new Set([set]));
        else sets.add(set);
      }
    }
    return set;
  }

  #dropSet(set: ScopeSet<R>): void {
    set.state = GONE;
    this.#sets.delete(set.key);
    for (const s of set.scopes) {
      const sets = this.#byScope.get(s);
      if (sets === undefined) continue;
      sets.delete(set);
      if (sets.size === 0) this.#byScope.delete(s);
    }
  }

  #refresh(set: ScopeSet<R>): void {
    const head = set.buckets.peek();
    if (head === undefined) return;
    set.headPriority = head.priority;
    set.headStart = head.start;
    set.headSeq = head.seq;
    if (!this.#staticView) {
      set.load = this.#view.load(set.scopes);
      if (this.#order === "throttling-aware") {
        set.share = this.#view.quotaShare(set.scopes, head.amounts);
      }
    }
    if (set.heapIndex >= 0) this.#ready.update(set.heapIndex);
  }

  #block(set: ScopeSet<R>, waitMs: number): void {
    this.#ready.remove(set.heapIndex);
    set.state = BLOCKED;
    set.version++;
    this.#blocked.add(set);
    this.#blockedCount += set.buckets.size;
    if (Number.isFinite(waitMs)) {
      this.#wakes.push({ at: this.#scheduler.now() + waitMs, set, version: set.version });
    }
    this.#checkHeldBack();
  }

  #unblock(set: ScopeSet<R>): void {
    this.#blocked.delete(set);
    this.#blockedCount -= set.buckets.size;
    set.state = READY;
    set.version++;
    this.#refresh(set);
    this.#ready.push(set);
  }

  #checkHeldBack(): void {
    const held = this.#aside.size + this.#blockedCount;
    if (!this.#warnedHeldBack && held > this.#threshold) {
      this.#warnedHeldBack = true;
      this.#warn(
        "delayed-requests-threshold",
        `${held} requests are held back by throttling (more than delayedRequestsWarnThreshold = ${this.#threshold})`,
      );
    }
  }

  #lessFor(order: RequestQueueOrder): (a: ScopeSet<R>, b: ScopeSet<R>) => boolean {
    const fifo = this.#fifo;
    const bySeq = (a: ScopeSet<R>, b: ScopeSet<R>): boolean =>
      a.headStart !== b.headStart
        ? !a.headStart
        : a.headStart || fifo
        ? a.headSeq < b.headSeq
        : a.headSeq > b.headSeq;
    if (order === "downloader-aware") {
      return (a, b) =>
        a.load !== b.load
          ? a.load < b.load
          : a.served !== b.served
          ? a.served < b.served
          : bySeq(a, b);
    }
    return (a, b) => {
      if (a.headPriority !== b.headPriority) return a.headPriority > b.headPriority;
      if (a.headStart !== b.headStart) return !a.headStart;
      if (a.load !== b.load) return a.load < b.load;
      if (a.share !== b.share) return a.share > b.share;
      return bySeq(a, b);
    };
  }
}
