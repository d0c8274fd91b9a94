/**
 * The request queue (the reference's scheduler, named so because in RxJS a
 * "scheduler" is a clock): requests go in with `enqueue` (start requests, and
 * requests discovered from responses), and come out of `requests$` only when
 * the throttler can take them, in the reference's order, without duplicates,
 * optionally persisted in a job directory so a crawl can be paused, resumed
 * and survive a crash.
 *
 * This file is the façade: the public types, `defaultScopesOf`, and
 * `RequestQueue` with its counters, requests in flight, subscription and
 * dispatch loop. The pieces it stands on, one concept per file, each held
 * by the queue (composition: their fields stay private, and a request
 * passes through each with one call):
 *
 * - `_queue_options.ts`: the options checked and defaulted (a throttler's
 *   queue settings as the defaults).
 * - `_request_keys.ts`: the keys of a request (`RequestKeys`: its scope set
 *   or scopes, its fingerprint; the `InvalidRequestError` it is refused
 *   with), and the default scopes `defaultScopesOf` and a resume read.
 * - `_queue_order.ts`: the pending requests in order (`QueueOrder`): scope
 *   sets, the ready heap, blocked sets and their wakes, requests held aside
 *   for their `throttlingDelayMs`.
 * - `_queue_persistence.ts`: the job directory's side: opening it, reading
 *   pending requests back, the records of requests and completions with the
 *   timed flush (`QueueJournal`), compaction.
 * - Shared with `redis_request_queue.ts`: `_request_serialization.ts`
 *   (stored requests) and `_view_scopes.ts` (scopes from a throttler).
 *
 * Size: the public types and their documentation (about 200 lines: the
 * throttler's view, the options, the stats) stay beside the class they
 * describe, and the class keeps what every request touches on one object
 * (its counters, the requests in flight, the dispatch loop); the rest is in
 * the files above.
 *
 * @module
 */
import {
  concat,
  defer,
  isObservable,
  type Observable,
  Observable as RxObservable,
  of,
  ReplaySubject,
  type SchedulerLike,
  Subject,
  type Subscriber,
  type Subscription,
} from "rxjs";
import { viewScopesOf } from "./_view_scopes.ts";
import { deserializeRequest, metaDepth, serializeRequest } from "./_request_serialization.ts";
import { scheduleAfter } from "../util/_timer.ts";
import { InvalidRequestError } from "../http/download_errors.ts";
import type { ThrottleEvent } from "../events.ts";
import type { JobDirLock } from "./job_dir_lock.ts";
import { requestMeta, requestPriority } from "../request.ts";
import { resolveQueueOptions, UNLIMITED_VIEW } from "./_queue_options.ts";
import {
  customScopes,
  describe,
  hostOf,
  parseRequestUrl,
  RequestKeys,
  scopesFromMeta,
} from "./_request_keys.ts";
import { type QueueItem, QueueOrder } from "./_queue_order.ts";
import { openQueueJobDir, QueueJournal, resumeEntries } from "./_queue_persistence.ts";

/**
 * What the request queue needs to know of the throttler. The throttler
 * implements it; the queue only reads it, and is told of changes by
 * `changes$`.
 */
export interface QueueThrottleView {
  /**
   * Ms until a request with these scopes (and quota amounts) could be sent:
   * 0 now, `Infinity` until something changes (a completion).
   */
  waitMs(scopes: readonly string[], amounts: readonly (number | undefined)[] | undefined): number;
  /** Requests in flight across these scopes (least-loaded first on ties). */
  load(scopes: readonly string[]): number;
  /** Share (0..1) of the scopes' remaining quota this request would use; 0 without quota. */
  quotaShare(
    scopes: readonly string[],
    amounts: readonly (number | undefined)[] | undefined,
  ): number;
  /** How many more requests the gate can take right now (global cap minus in flight and held). */
  freeSlots(): number;
  /**
   * Emits whenever any of the above may have changed (a send, a completion, a
   * timer). An emitted array of strings names the scopes that changed (cheap:
   * only scope sets with those scopes are looked at again); any other value
   * means "anything may have changed".
   */
  readonly changes$: Observable<unknown>;
  /**
   * The gate's own scopes of a request (a `Throttler`'s `resolveScopes`): when
   * given, and `usesDefaultScopes` is not `true`, the queue's default
   * `scopesOf` asks it, so the queue and the gate agree. A promise (a per-IP
   * scope waiting for DNS) falls back to the URL's host for ordering.
   */
  readonly resolveScopes?: (
    request: never,
  ) => ViewScopes | PromiseLike<ViewScopes>;
  /** `resolveScopes` gives what the queue's default would (host or `meta.throttlingScopes`). */
  readonly usesDefaultScopes?: boolean;
}

/** Scopes as a throttler gives them. */
export interface ViewScopes {
  readonly names: readonly string[];
  readonly amounts: readonly (number | undefined)[] | undefined;
}

/** A request's scopes and, per scope, the quota amount it consumes. */
export interface QueueScopes {
  readonly scopes: readonly string[];
  readonly amounts?: readonly (number | undefined)[];
}

/** How ready requests are chosen among scope sets. */
export type RequestQueueOrder = "throttling-aware" | "downloader-aware" | "priority";

/** A warning from the queue, shaped as a throttle event. */
export type QueueWarning = Extract<ThrottleEvent, { type: "warning" }>;

/** Options of {@link RequestQueue}. */
export interface RequestQueueOptions<R> {
  /**
   * The throttler's view of scopes. Without one, every request can be sent at
   * once (useful for ordering, or in front of a gate that holds requests itself).
   * @default a view with no limits
   */
  readonly view?: QueueThrottleView;
  /** A request's scopes. @default {@link defaultScopesOf} */
  readonly scopesOf?: (request: R) => QueueScopes;
  /**
   * `"throttling-aware"`: among scope sets the view lets through, higher priority
   * first, then least loaded, then larger quota share. `"downloader-aware"`:
   * fewest active downloads first, round-robin on ties, ignoring delays (the
   * gate holds). `"priority"`: one queue in priority order, scopes ignored.
   * @default "throttling-aware"
   */
  readonly order?: RequestQueueOrder;
  /** Regular requests FIFO (breadth-first) instead of LIFO (depth-first). @default false */
  readonly fifo?: boolean;
  /** Scrapy's DEPTH_PRIORITY: effective priority = priority - depth * depthPriority. @default 0 */
  readonly depthPriority?: number;
  /** A request's depth. @default `meta.depth` when a number, else 0 */
  readonly depthOf?: (request: R) => number;
  /** Drop requests whose fingerprint was seen, unless `meta.dontFilter`. @default true */
  readonly dedupe?: boolean;
  /** A request's fingerprint. @default method + canonical URL + body (see `requestFingerprint`) */
  readonly fingerprint?: (request: R) => string;
  /**
   * Start requests, enqueued (in this order) when `requests$` is subscribed.
   * `requests$` cannot complete before they are all in (an Observable completes).
   * @default none
   */
  readonly start?: Iterable<R> | Observable<R>;
  /**
   * A job directory that makes the crawl resumable (Scrapy's JOBDIR), or a
   * lock already taken on one ({@link JobDirLock.acquire}), which the queue
   * then owns. The directory is locked until {@link RequestQueue.close}: a
   * second process on it is refused, naming the holder's PID.
   * @default none
   */
  readonly jobDir?: string | JobDirLock;
  /** When the job directory fsyncs (see docs/JOBDIR.md). @default "compaction" */
  readonly jobDirFsync?: "compaction" | "always";
  /** Longest time an enqueue record waits in memory before it is written. @default 1000 */
  readonly flushIntervalMs?: number;
  /**
   * Turns a request into JSON for the job directory; `undefined` means it
   * cannot be, and it stays in memory (counted as unserializable).
   * @default strings, JSON-safe plain objects, body-less WHATWG Requests
   */
  readonly serialize?: (request: R) => unknown;
  /** The inverse of `serialize`. @default the inverse of the default serializer */
  readonly deserialize?: (data: unknown) => R;
  /** Warn once when more requests than this are held back. @default 500 */
  readonly delayedRequestsWarnThreshold?: number;
  /** The clock. @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
}

/**
 * The queue's counters, named after the reference's stats:
 * `scheduler/enqueued{,/memory,/disk}`, `scheduler/dequeued{,/memory,/disk}`,
 * `dupefilter/filtered`, `scheduler/unserializable`.
 */
export interface RequestQueueStats {
  readonly enqueued: number;
  readonly enqueuedMemory: number;
  readonly enqueuedDisk: number;
  readonly dequeued: number;
  readonly dequeuedMemory: number;
  readonly dequeuedDisk: number;
  /** Duplicates dropped (not counting `known`). */
  readonly filtered: number;
  /**
   * Requests dropped because a run before this one (the job directory's)
   * already had them: a resume's re-read input. Not duplicates of this run.
   */
  readonly known: number;
  /** Requests refused at enqueue (no URL, malformed URL, bad scopes). */
  readonly rejected: number;
  /** Requests that could not be written to the job directory (kept in memory). */
  readonly unserializable: number;
  /** Requests read back from the job directory. */
  readonly resumed: number;
  /** `markDone` calls. */
  readonly completed: number;
  /** Requests waiting in the queue (held back included). */
  readonly pending: number;
  /** Requests emitted and not yet marked done. */
  readonly inFlight: number;
  /** Requests given back by `markUnsent`: never sent, kept in the job directory for a resume. */
  readonly unsent: number;
  /** Requests waiting aside for their `throttlingDelayMs`. */
  readonly delayed: number;
  /** Requests in scope sets the view currently blocks. */
  readonly blocked: number;
}

/**
 * A request's default scopes: `meta.throttlingScopes` (string, iterable or
 * `{scope: amount}`) when set, else the URL's host (lower-cased, port kept
 * when not the default).
 *
 * @param request A request-like value.
 * @returns Its scopes and quota amounts.
 * @throws {InvalidRequestError} When it has no scopes and no usable URL.
 */
export function defaultScopesOf(request: unknown): QueueScopes {
  return scopesFromMeta(request) ?? { scopes: [hostOf(request, parseRequestUrl(request))] };
}

/**
 * A request queue: priorities, dedupe, no head-of-line blocking, and an
 * optional crash-safe job directory.
 *
 * Feedback loop: enqueue the requests a response leads to **before** calling
 * `markDone` for that response, so the crawl does not end (and the job
 * directory does not record the response as done) before they are in.
 *
 * @example Crawl through the queue
 * ```ts
 * import { mergeMap } from "rxjs";
 * import { RequestQueue } from "./request_queue.ts";
 * // A site of two pages; a real crawl downloads and parses here.
 * const linksOf: Record<string, string[]> = { "https://a.example/": ["https://a.example/b"] };
 * const queue = new RequestQueue<string>({ start: ["https://a.example/"] });
 * const crawled: string[] = [];
 * queue.requests$.pipe(mergeMap(async (url) => {
 *   crawled.push(url);
 *   for (const link of linksOf[url] ?? []) queue.enqueue(link);
 *   queue.markDone(url);
 * })).subscribe({ complete: () => console.assert(crawled.length === 2) });
 * ```
 */
export class RequestQueue<R> {
  /**
   * The requests, in order, as the view can take them. Completes when the
   * queue is empty, nothing is in flight and the start requests are all in
   * (so subscribing to an empty queue without `start` completes at once).
   * One subscriber at a time; unsubscribing pauses (call `close()` to stop cleanly).
   */
  readonly requests$: Observable<R>;
  /** The stats now and at every change (first value at subscription). */
  readonly stats$: Observable<RequestQueueStats>;
  /** Warnings (job directory recovery, too many requests held back); replayed to late subscribers. */
  readonly warnings$: Observable<QueueWarning>;

  readonly #view: QueueThrottleView;
  readonly #scopesOf: ((request: R) => QueueScopes) | undefined;
  readonly #depthPriority: number;
  readonly #depthOf: ((request: R) => number) | undefined;
  readonly #dedupe: boolean;
  /** The keys of the request being enqueued (`_request_keys.ts`). */
  readonly #keys: RequestKeys<R>;
  readonly #scheduler: SchedulerLike;
  readonly #start: Iterable<R> | Observable<R> | undefined;
  /** Every request goes into one scope set (see the constructor). */
  readonly #oneSet: boolean;
  /** Where pending requests wait, in order (`_queue_order.ts`). */
  readonly #pendingOrder: QueueOrder<R>;

  readonly #inFlight = new Map<R, QueueItem<R>>();
  #seen = new Set<string>();
  /** Fingerprints read back from the job directory (a resume); this run's go to `#seen`. */
  #seenBefore: ReadonlySet<string> = new Set<string>();
  #known = 0;
  #nextSeq = 1;
  /** The job directory's records (`_queue_persistence.ts`), until `close`. */
  #journal: QueueJournal<R> | undefined;

  #subscriber: Subscriber<R> | undefined;
  #startDone = true;
  #draining = false;
  #again = false;
  #timer: Subscription | undefined;
  #timerAt = Infinity;
  readonly #stats$ = new Subject<RequestQueueStats>();
  readonly #warnings$ = new ReplaySubject<QueueWarning>(100);

  #enqueued = 0;
  #enqueuedMemory = 0;
  #enqueuedDisk = 0;
  #dequeued = 0;
  #dequeuedMemory = 0;
  #dequeuedDisk = 0;
  #filtered = 0;
  #rejected = 0;
  #unserializable = 0;
  #resumed = 0;
  #completed = 0;
  /** Requests ended unsent (`markUnsent`): kept for the job directory's compaction. */
  #unsent: QueueItem<R>[] = [];
  #pending = 0;
  #inFlightCount = 0;

  /**
   * @param options Order, dedupe, job directory, view of the throttler.
   * @throws {RangeError} When an option is out of range (the message names it).
   * @throws {JobDirLockedError} When another process holds the job directory (the message names its PID).
   * @throws {Error} When the job directory cannot be opened (from `node:fs`).
   */
  constructor(options: RequestQueueOptions<R> = {}) {
    const resolved = resolveQueueOptions(options);
    const warn = (code: string, message: string): void => this.#warn(code, message);
    options = resolved.given;
    const { view, order } = resolved;
    this.#view = view;
    const staticView = view === UNLIMITED_VIEW || order === "priority";
    // Without a view every scope set is always open, load 0, share 0: the
    // throttling-aware order is then the plain priority order of one set
    // (same sequence, no per-scope bookkeeping). Scopes are still worked out
    // at enqueue, so bad requests are refused the same way.
    this.#oneSet = order === "priority" ||
      (view === UNLIMITED_VIEW && order === "throttling-aware");
    this.#scopesOf = options.scopesOf ?? viewScopesOf<R>(view, defaultScopesOf);
    this.#depthPriority = resolved.depthPriority;
    this.#depthOf = options.depthOf;
    this.#dedupe = resolved.dedupe;
    this.#keys = new RequestKeys<R>(this.#scopesOf, options.fingerprint, order);
    this.#scheduler = resolved.scheduler;
    this.#start = options.start;
    this.#pendingOrder = new QueueOrder<R>({
      view,
      order,
      fifo: resolved.fifo,
      staticView,
      oneSet: this.#oneSet,
      scheduler: resolved.scheduler,
      threshold: resolved.threshold,
      warn,
    });

    this.requests$ = new RxObservable<R>((subscriber) => this.#subscribe(subscriber));
    this.stats$ = defer(() => concat(of(this.stats()), this.#stats$));
    this.warnings$ = this.#warnings$.asObservable();

    if (options.jobDir !== undefined) {
      const { jobDir, recovered } = openQueueJobDir(
        options.jobDir,
        options.jobDirFsync,
        warn,
      );
      this.#journal = new QueueJournal<R>(
        jobDir,
        options.serialize ?? serializeRequest,
        resolved.scheduler,
        resolved.flushIntervalMs,
        (error) => this.#subscriber?.error(error),
      );
      this.#seenBefore = recovered.seen;
      this.#nextSeq = recovered.nextSeq;
      const scopesOf = this.#scopesOf;
      resumeEntries<R>(
        recovered.pending,
        options.deserialize ?? ((data: unknown) => deserializeRequest(data, "job directory") as R),
        scopesOf === undefined ? undefined : (r) => customScopes(scopesOf, r),
        !this.#oneSet,
        warn,
        (r, e, key, scopes, amounts) => {
          this.#resumed++;
          const meta = requestMeta(r);
          this.#pending++;
          this.#pendingOrder.place(
            r,
            e.seq,
            e.priority,
            e.start,
            e.fingerprint,
            key,
            scopes,
            amounts,
            true,
            meta,
          );
        },
      );
    }
  }

  /** Requests waiting (not yet emitted). */
  get size(): number {
    return this.#pending;
  }

  /** Requests emitted and not yet marked done. */
  get inFlight(): number {
    return this.#inFlightCount;
  }

  /**
   * Adds a request, unless it is a duplicate.
   *
   * @param request The request.
   * @param options `start: true` for a start request (FIFO, after regular requests of equal priority).
   * @returns `true` when stored, `false` when filtered as a duplicate.
   * @throws {InvalidRequestError} When the request has no URL, a malformed one, or bad scopes (counted as rejected).
   */
  enqueue(request: R, options?: { readonly start?: boolean }): boolean {
    const start = options?.start === true;
    const meta = requestMeta(request);
    const filter = this.#dedupe && meta?.dontFilter !== true;
    const keys = this.#keys;
    try {
      keys.read(request, filter);
    } catch (e) {
      this.#rejected++;
      this.#emitStats();
      throw e;
    }
    const { key, scopes, amounts, fp } = keys;
    if (fp !== undefined) {
      if (this.#seenBefore.has(fp)) {
        this.#known++;
        this.#emitStats();
        return false;
      }
      // One hash lookup: add, and see whether the set grew.
      const seen = this.#seen;
      const before = seen.size;
      seen.add(fp);
      if (seen.size === before) {
        this.#filtered++;
        this.#emitStats();
        return false;
      }
    }
    const depth = this.#depthOf ? this.#depthOf(request) : metaDepth(meta);
    const priority = requestPriority(request) - depth * this.#depthPriority;
    const seq = this.#nextSeq++;
    let persisted = false;
    const journal = this.#journal;
    if (journal !== undefined) {
      // Default scopes without quota amounts go on file, so a resume need
      // not parse URLs again (custom scopes are asked again on resume).
      const stored = this.#scopesOf !== undefined || amounts !== undefined
        ? undefined
        : key ?? scopes;
      if (journal.enqueue(request, seq, start, priority, fp, stored)) {
        persisted = true;
        this.#enqueuedDisk++;
      } else {
        this.#unserializable++;
        this.#enqueuedMemory++;
      }
    } else {
      this.#enqueuedMemory++;
    }
    this.#enqueued++;
    this.#pending++;
    this.#pendingOrder.place(
      request,
      seq,
      priority,
      start,
      fp,
      key,
      scopes,
      amounts,
      persisted,
      meta,
    );
    this.#drain();
    return true;
  }

  /**
   * Says that a request emitted by `requests$` is finished (its response was
   * handled, or it failed for good). With a job directory the completion is
   * written before this returns, with every request enqueued before it.
   *
   * @param request The request as emitted (same value; for strings, equal).
   * @throws {RangeError} When the request is not in flight.
   */
  markDone(request: R): void {
    const item = this.#inFlight.get(request);
    if (item === undefined) {
      throw new RangeError(
        `Cannot mark request done as it is not in flight: current value is ${describe(request)}`,
      );
    }
    if (item.sameNext === undefined) this.#inFlight.delete(request);
    else this.#inFlight.set(request, item.sameNext);
    this.#inFlightCount--;
    this.#completed++;
    if (this.#journal?.done(item, this.#pending + this.#inFlightCount) === true) this.#compact();
    this.#pendingOrder.touched(item.set);
    this.#drain();
  }

  /**
   * Says that a request emitted by `requests$` ends in this run without
   * having been sent (an error of this side, `LOCAL_FAILURE`: robots.txt or a
   * shared store unreachable). It stops counting as in flight, like
   * `markDone`, but no completion is recorded: the job directory keeps it
   * pending, so a resume sends it.
   *
   * @param request The request as emitted.
   * @throws {RangeError} When the request is not in flight.
   */
  markUnsent(request: R): void {
    const item = this.#inFlight.get(request);
    if (item === undefined) {
      throw new RangeError(
        `Cannot mark request unsent as it is not in flight: current value is ${describe(request)}`,
      );
    }
    if (item.sameNext === undefined) this.#inFlight.delete(request);
    else this.#inFlight.set(request, item.sameNext);
    item.sameNext = undefined;
    this.#inFlightCount--;
    this.#unsent.push(item);
    this.#pendingOrder.touched(item.set);
    this.#drain();
  }

  /** A snapshot of the stats. */
  stats(): RequestQueueStats {
    return {
      enqueued: this.#enqueued,
      enqueuedMemory: this.#enqueuedMemory,
      enqueuedDisk: this.#enqueuedDisk,
      dequeued: this.#dequeued,
      dequeuedMemory: this.#dequeuedMemory,
      dequeuedDisk: this.#dequeuedDisk,
      filtered: this.#filtered,
      known: this.#known,
      rejected: this.#rejected,
      unserializable: this.#unserializable,
      resumed: this.#resumed,
      completed: this.#completed,
      pending: this.#pending,
      inFlight: this.#inFlightCount,
      unsent: this.#unsent.length,
      delayed: this.#pendingOrder.delayed,
      blocked: this.#pendingOrder.blocked,
    };
  }

  /** Writes buffered job directory records now. */
  flush(): void {
    this.#journal?.flush();
  }

  /**
   * Clean stop: writes a compacted job directory (pending and in-flight
   * requests, seen fingerprints) and closes it. The queue must not be used
   * afterwards; a new queue on the same directory resumes.
   *
   * @throws {JobDirWriteError} When the compacted log cannot be written (the
   * directory is closed all the same, its old log whole and resumable).
   */
  close(): void {
    const journal = this.#journal;
    if (journal === undefined) return;
    let failure: unknown;
    try {
      this.#compact();
    } catch (error) {
      failure = error;
    }
    this.#journal = undefined;
    // Closed even when the compaction failed: the old log is still whole.
    try {
      journal.close();
    } catch (error) {
      failure ??= error;
    }
    if (failure !== undefined) throw failure;
  }

  // ---- subscription -------------------------------------------------------

  #subscribe(subscriber: Subscriber<R>): () => void {
    if (this.#subscriber !== undefined) {
      subscriber.error(
        new Error("Cannot subscribe to requests$ twice at once: unsubscribe the first subscriber"),
      );
      return () => {};
    }
    this.#subscriber = subscriber;
    const changes = this.#view.changes$.subscribe((v) => {
      this.#pendingOrder.changed(v);
      this.#drain();
    });
    let startSub: Subscription | undefined;
    const start = this.#start;
    if (start !== undefined && this.#startDone) {
      if (isObservable(start)) {
        this.#startDone = false;
        startSub = start.subscribe({
          next: (r) => this.#enqueueStart(r),
          error: (e: unknown) => subscriber.error(e),
          complete: () => {
            this.#startDone = true;
            this.#drain();
          },
        });
      } else {
        // Not done until the last one is in: an early one may complete at once.
        this.#startDone = false;
        for (const r of start) this.#enqueueStart(r);
        this.#startDone = true;
      }
    }
    this.#drain();
    return () => {
      this.#subscriber = undefined;
      changes.unsubscribe();
      startSub?.unsubscribe();
      this.#timer?.unsubscribe();
      this.#timer = undefined;
      this.#timerAt = Infinity;
      try {
        this.#journal?.flush();
      } catch {
        // Reported to the subscriber that failed, or again by close().
      }
    };
  }

  #enqueueStart(r: R): void {
    try {
      this.enqueue(r, { start: true });
    } catch (e) {
      // Anything else (a job directory that cannot be written) ends requests$:
      // thrown from here it would be an unhandled error of the start stream.
      if (!(e instanceof InvalidRequestError)) return this.#subscriber?.error(e);
      this.#warn("request-rejected", e.message);
    }
  }

  // ---- the dispatch loop --------------------------------------------------

  #drain(): void {
    if (this.#subscriber === undefined) {
      this.#emitStats();
      return;
    }
    if (this.#draining) {
      // Emitting can synchronously enqueue, complete or change the view: the
      // running loop goes round again instead of nesting.
      this.#again = true;
      return;
    }
    this.#draining = true;
    try {
      do {
        this.#again = false;
        this.#pendingOrder.releaseDue();
        this.#emitReady();
      } while (this.#again && this.#subscriber !== undefined);
    } finally {
      this.#draining = false;
    }
    this.#scheduleTimer();
    this.#emitStats();
    this.#maybeComplete();
  }

  #emitReady(): void {
    const order = this.#pendingOrder;
    for (;;) {
      const subscriber = this.#subscriber;
      if (subscriber === undefined || subscriber.closed) return;
      const item = order.take();
      if (item === undefined) return;
      if (item === null) continue; // its set was blocked: look at the next one
      this.#pending--;
      this.#inFlightCount++;
      this.#dequeued++;
      if (item.persisted) this.#dequeuedDisk++;
      else this.#dequeuedMemory++;
      const first = this.#inFlight.get(item.r);
      if (first === undefined) this.#inFlight.set(item.r, item);
      else {
        let last = first;
        while (last.sameNext !== undefined) last = last.sameNext;
        last.sameNext = item;
      }
      // State is consistent before next(): the subscriber may re-enter.
      subscriber.next(item.r);
      order.touched(item.set);
    }
  }

  #maybeComplete(): void {
    const subscriber = this.#subscriber;
    if (
      subscriber !== undefined && this.#startDone && this.#pending === 0 &&
      this.#inFlightCount === 0 &&
      !this.#draining
    ) {
      this.#journal?.flush();
      subscriber.complete();
    }
  }

  #scheduleTimer(): void {
    if (this.#subscriber === undefined) return;
    const at = this.#pendingOrder.nextAt();
    if (at === this.#timerAt) return;
    this.#timer?.unsubscribe();
    this.#timer = undefined;
    this.#timerAt = at;
    if (at === Infinity) return;
    this.#timer = scheduleAfter(this.#scheduler, at - this.#scheduler.now(), () => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#drain();
    });
  }

  // ---- job directory ------------------------------------------------------

  #compact(): void {
    const journal = this.#journal;
    if (journal === undefined) return;
    const live: QueueItem<R>[] = [];
    this.#pendingOrder.collect(live);
    for (const item of this.#unsent) live.push(item);
    for (const first of this.#inFlight.values()) {
      for (let item: QueueItem<R> | undefined = first; item !== undefined; item = item.sameNext) {
        live.push(item);
      }
    }
    const keepScopes = this.#scopesOf === undefined && !this.#oneSet;
    journal.compact(live, this.#seen, this.#seenBefore, keepScopes);
  }

  #warn(code: string, message: string): void {
    this.#warnings$.next({ type: "warning", at: this.#scheduler.now(), code, message });
  }

  #emitStats(): void {
    if (this.#stats$.observed) this.#stats$.next(this.stats());
  }
}
