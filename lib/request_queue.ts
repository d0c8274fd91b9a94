/**
 * The request queue (the reference's scheduler, named so because in RxJS a
 * "scheduler" is a clock): requests go in with `enqueue` (start requests, and
 * requests discovered from responses), and come out of `requests$` only when
 * the throttler can take them, in the reference's order, without duplicates,
 * optionally persisted in a job directory so a crawl can be paused, resumed
 * and survive a crash.
 *
 * Size: a known debt (issue 14): ordering by scope sets, the job directory's
 * use and request keys are here together; a split along those seams is still
 * to do.
 *
 * @module
 */
import { viewScopesOf } from "./_view_scopes.ts";
import { deserializeRequest, metaDepth, serializeRequest } from "./_request_serialization.ts";
import { describeValue } from "./_describe_value.ts";
import { scheduleAfter } from "./_timer.ts";
import { InvalidRequestError } from "./download_errors.ts";
import {
  asyncScheduler,
  concat,
  defer,
  isObservable,
  NEVER,
  type Observable,
  Observable as RxObservable,
  of,
  ReplaySubject,
  type SchedulerLike,
  Subject,
  type Subscriber,
  type Subscription,
} from "rxjs";
import type { ThrottleEvent } from "./events.ts";
import { BinaryHeap } from "./_binary_heap.ts";
import { PriorityBuckets } from "./_priority_buckets.ts";
import { JobDir, type JobDirEntry } from "./job_dir.ts";
import { JobDirLock } from "./job_dir_lock.ts";
import type { ThrottlerSettings } from "./settings.ts";
import { markRequestDelayed } from "./_request_delay.ts";
import { requestMeta, requestPriority, requestUrl, type ScopesInput } from "./request.ts";
import { canonicalHostFast, fingerprintParsed, parseUrl, requestMethod } from "./_fingerprint.ts";

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

/** A request refused at enqueue, as the `InvalidRequestError` of `download_errors.ts` with its `field`. */
function invalidRequest(
  field: string,
  request: unknown,
  message: string,
  options?: { cause?: unknown },
): InvalidRequestError {
  return new InvalidRequestError(
    message,
    options?.cause === undefined
      ? { input: request, field }
      : { input: request, field, cause: options.cause },
  );
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

const READY = 1, BLOCKED = 2, GONE = 0;

interface ScopeSet<R> {
  readonly key: string;
  readonly scopes: readonly string[];
  readonly buckets: PriorityBuckets<Item<R>>;
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

interface Item<R> {
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
  sameNext: Item<R> | undefined;
}

interface Wake<R> {
  readonly at: number;
  readonly set: ScopeSet<R>;
  readonly version: number;
}

const UNLIMITED_VIEW: QueueThrottleView = {
  waitMs: () => 0,
  load: () => 0,
  quotaShare: () => 0,
  freeSlots: () => Infinity,
  changes$: NEVER,
};

const ORDERS: readonly string[] = ["throttling-aware", "downloader-aware", "priority"];

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
  readonly #order: RequestQueueOrder;
  readonly #fifo: boolean;
  readonly #depthPriority: number;
  readonly #depthOf: ((request: R) => number) | undefined;
  readonly #dedupe: boolean;
  readonly #fingerprint: ((request: R) => string) | undefined;
  readonly #serialize: (request: R) => unknown;
  readonly #deserialize: (data: unknown) => R;
  readonly #threshold: number;
  readonly #scheduler: SchedulerLike;
  readonly #flushIntervalMs: number;
  readonly #start: Iterable<R> | Observable<R> | undefined;
  readonly #needsUrl: boolean;
  /** Strings take the parse-free path (default fingerprint and scopes). */
  readonly #fastStrings: boolean;
  /** The view never changes (no view, or scopes ignored): no load or share to refresh. */
  readonly #staticView: boolean;
  /** Every request goes into one scope set (see the constructor). */
  readonly #oneSet: boolean;

  readonly #sets = new Map<string, ScopeSet<R>>();
  readonly #byScope = new Map<string, Set<ScopeSet<R>>>();
  readonly #ready: BinaryHeap<ScopeSet<R>>;
  readonly #blocked = new Set<ScopeSet<R>>();
  readonly #wakes = new BinaryHeap<Wake<R>>((a, b) => a.at < b.at);
  readonly #aside = new BinaryHeap<Item<R>>((a, b) =>
    a.releaseAt < b.releaseAt || (a.releaseAt === b.releaseAt && a.seq < b.seq)
  );
  readonly #inFlight = new Map<R, Item<R>>();
  #seen = new Set<string>();
  /** Fingerprints read back from the job directory (a resume); this run's go to `#seen`. */
  #seenBefore: ReadonlySet<string> = new Set<string>();
  #known = 0;
  #nextSeq = 1;
  #served = 0;
  #blockedCount = 0;
  #jobDir: JobDir | undefined;

  #subscriber: Subscriber<R> | undefined;
  #startDone = true;
  #draining = false;
  #again = false;
  #timer: Subscription | undefined;
  #timerAt = Infinity;
  #flushTimer: Subscription | undefined;
  #warnedHeldBack = false;
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
  #unsent: Item<R>[] = [];
  #pending = 0;
  #inFlightCount = 0;

  /**
   * @param options Order, dedupe, job directory, view of the throttler.
   * @throws {RangeError} When an option is out of range (the message names it).
   * @throws {JobDirLockedError} When another process holds the job directory (the message names its PID).
   * @throws {Error} When the job directory cannot be opened (from `node:fs`).
   */
  constructor(options: RequestQueueOptions<R> = {}) {
    // A throttler as the view brings its settings' queue options as the
    // defaults (`createThrottler({ queue: { fifo: true } })` then
    // `new RequestQueue({ view: throttler })` pops FIFO); options given here win.
    const fromView = viewQueueSettings(options.view);
    if (fromView !== undefined) {
      options = { ...fromView, ...definedOnly(options) } as RequestQueueOptions<R>;
    }
    const order = options.order ?? "throttling-aware";
    if (!ORDERS.includes(order)) {
      throw new RangeError(
        `Cannot create request queue as 'order' must be one of ${
          ORDERS.join(", ")
        }: current value is ${JSON.stringify(order)}`,
      );
    }
    const depthPriority = options.depthPriority ?? 0;
    if (!Number.isFinite(depthPriority)) {
      throw new RangeError(
        `Cannot create request queue as 'depthPriority' must be a finite number: current value is ${depthPriority}`,
      );
    }
    const threshold = options.delayedRequestsWarnThreshold ?? 500;
    if (!(threshold >= 0)) {
      throw new RangeError(
        `Cannot create request queue as 'delayedRequestsWarnThreshold' must be >= 0: current value is ${threshold}`,
      );
    }
    const flushIntervalMs = options.flushIntervalMs ?? 1000;
    if (!(flushIntervalMs >= 0)) {
      throw new RangeError(
        `Cannot create request queue as 'flushIntervalMs' must be >= 0: current value is ${flushIntervalMs}`,
      );
    }
    const view = options.view ?? UNLIMITED_VIEW;
    this.#view = view;
    this.#staticView = view === UNLIMITED_VIEW || order === "priority";
    // Without a view every scope set is always open, load 0, share 0: the
    // throttling-aware order is then the plain priority order of one set
    // (same sequence, no per-scope bookkeeping). Scopes are still worked out
    // at enqueue, so bad requests are refused the same way.
    this.#oneSet = order === "priority" ||
      (view === UNLIMITED_VIEW && order === "throttling-aware");
    this.#scopesOf = options.scopesOf ?? viewScopesOf<R>(view, defaultScopesOf);
    this.#order = order;
    this.#fifo = options.fifo ?? false;
    this.#depthPriority = depthPriority;
    this.#depthOf = options.depthOf;
    this.#dedupe = options.dedupe ?? true;
    this.#fingerprint = options.fingerprint;
    this.#serialize = options.serialize ?? serializeRequest;
    this.#deserialize = options.deserialize ??
      ((data: unknown) => deserializeRequest(data, "job directory") as R);
    this.#threshold = threshold;
    this.#scheduler = options.scheduler ?? asyncScheduler;
    this.#flushIntervalMs = flushIntervalMs;
    this.#start = options.start;
    this.#needsUrl = !this.#fingerprint || (order !== "priority" && !this.#scopesOf);
    this.#fastStrings = !this.#fingerprint && (order === "priority" || !this.#scopesOf);
    this.#ready = new BinaryHeap<ScopeSet<R>>(this.#lessFor(order), (s, i) => {
      s.heapIndex = i;
    });

    this.requests$ = new RxObservable<R>((subscriber) => this.#subscribe(subscriber));
    this.stats$ = defer(() => concat(of(this.stats()), this.#stats$));
    this.warnings$ = this.#warnings$.asObservable();

    if (options.jobDir !== undefined) {
      const lock = options.jobDir instanceof JobDirLock ? options.jobDir : undefined;
      const { jobDir, recovered } = JobDir.open(lock?.dir ?? (options.jobDir as string), {
        ...(lock !== undefined ? { lock } : {}),
        ...(options.jobDirFsync !== undefined ? { fsync: options.jobDirFsync } : {}),
      });
      this.#jobDir = jobDir;
      const takeover = jobDir.lock.tookOver;
      if (takeover !== undefined) this.#warn("jobdir-stale-lock", takeover.message);
      for (const w of recovered.warnings.slice(0, 20)) {
        this.#warn("jobdir-corrupt-record", w.message);
      }
      if (recovered.warnings.length > 20) {
        this.#warn(
          "jobdir-corrupt-record",
          `Skipped ${
            recovered.warnings.length - 20
          } more corrupt records in job directory log ${jobDir.path}`,
        );
      }
      this.#seenBefore = recovered.seen;
      this.#nextSeq = recovered.nextSeq;
      this.#resume(recovered.pending);
    }
  }

  #customScopes(request: R): QueueScopes {
    try {
      return (this.#scopesOf as (request: R) => QueueScopes)(request);
    } catch (e) {
      if (e instanceof InvalidRequestError) throw e;
      throw invalidRequest(
        "scopes",
        request,
        `Cannot enqueue request as its scopes failed: ${String(e)}`,
        {
          cause: e,
        },
      );
    }
  }

  #customFingerprint(request: R): string {
    try {
      return (this.#fingerprint as (request: R) => string)(request);
    } catch (e) {
      throw invalidRequest(
        "fingerprint",
        request,
        `Cannot enqueue request as its fingerprint failed: ${String(e)}`,
        {
          cause: e,
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
    let key: string | undefined;
    let scopes: readonly string[] | undefined;
    let amounts: readonly (number | undefined)[] | undefined;
    let fp: string | undefined;
    // A URL string already in canonical form is its own fingerprint and names
    // its scope (its host) without being parsed: most crawl URLs.
    const host = this.#fastStrings && typeof request === "string"
      ? canonicalHostFast(request)
      : undefined;
    if (host !== undefined) {
      key = host;
      if (filter) fp = request as string;
    } else {
      try {
        // The default functions need a valid URL; custom ones may do without.
        const url = this.#needsUrl ? parseRequestUrl(request) : undefined;
        if (this.#order !== "priority") {
          const rs = this.#scopesOf ? this.#customScopes(request) : scopesFromMeta(request);
          if (rs === undefined) key = hostOf(request, url as URL);
          else {
            scopes = rs.scopes;
            amounts = rs.amounts;
            if (scopes.length === 0) {
              throw invalidRequest(
                "scopes",
                request,
                "Cannot enqueue request as it has no scopes: current value is []",
              );
            }
          }
        }
        if (filter) {
          fp = this.#fingerprint ? this.#customFingerprint(request) : fingerprintParsed(
            url as URL,
            requestMethod(request),
            requestBodyOf(request),
            requestUrl(request),
          );
        }
      } catch (e) {
        this.#rejected++;
        this.#emitStats();
        throw e;
      }
    }
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
    const jd = this.#jobDir;
    if (jd !== undefined) {
      const data = this.#serializeSafe(request);
      if (data === undefined) {
        this.#unserializable++;
        this.#enqueuedMemory++;
      } else {
        // Default scopes without quota amounts go on file, so a resume need
        // not parse URLs again (custom scopes are asked again on resume).
        const stored = this.#scopesOf !== undefined || amounts !== undefined
          ? undefined
          : key ?? scopes;
        jd.enqueue({ seq, start, priority, fingerprint: fp, data, scopes: stored });
        persisted = true;
        this.#enqueuedDisk++;
        this.#scheduleFlush();
      }
    } else {
      this.#enqueuedMemory++;
    }
    this.#enqueued++;
    this.#place(request, seq, priority, start, fp, key, scopes, amounts, persisted, meta);
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
    const jd = this.#jobDir;
    if (jd !== undefined) {
      if (item.persisted) jd.done(item.seq);
      else jd.done(undefined, item.fp);
      if (jd.completionsSinceCompaction > Math.max(100_000, this.#pending + this.#inFlightCount)) {
        this.#compact();
      }
    }
    const set = item.set;
    if (!this.#staticView && set.state === READY && set.heapIndex >= 0) this.#refresh(set);
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
    const set = item.set;
    if (!this.#staticView && set.state === READY && set.heapIndex >= 0) this.#refresh(set);
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
      delayed: this.#aside.size,
      blocked: this.#blockedCount,
    };
  }

  /** Writes buffered job directory records now. */
  flush(): void {
    this.#jobDir?.flush();
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
    this.#flushTimer?.unsubscribe();
    this.#flushTimer = undefined;
    const jd = this.#jobDir;
    if (jd === undefined) return;
    let failure: unknown;
    try {
      this.#compact();
    } catch (error) {
      failure = error;
    }
    this.#jobDir = undefined;
    // Closed even when the compaction failed: the old log is still whole.
    try {
      jd.close();
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
    const changes = this.#view.changes$.subscribe((v) => this.#onChange(v));
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
        this.#jobDir?.flush();
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

  #onChange(value: unknown): void {
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
    this.#drain();
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
        this.#releaseDue();
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
    const view = this.#view;
    const ready = this.#ready;
    const checkWait = this.#order === "throttling-aware";
    for (;;) {
      const subscriber = this.#subscriber;
      if (subscriber === undefined || subscriber.closed) return;
      const set = ready.peek();
      if (set === undefined || !(view.freeSlots() > 0)) return;
      if (checkWait) {
        const head = set.buckets.peek() as Item<R>;
        const w = view.waitMs(set.scopes, head.amounts);
        if (w > 0 || Number.isNaN(w)) {
          this.#block(set, w);
          continue;
        }
      }
      const item = set.buckets.pop() as Item<R>;
      set.served = ++this.#served;
      if (set.buckets.size === 0) {
        ready.remove(set.heapIndex);
        this.#dropSet(set);
      } else {
        this.#refresh(set);
      }
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
      if (!this.#staticView && set.state === READY && set.heapIndex >= 0) this.#refresh(set);
    }
  }

  #maybeComplete(): void {
    const subscriber = this.#subscriber;
    if (
      subscriber !== undefined && this.#startDone && this.#pending === 0 &&
      this.#inFlightCount === 0 &&
      !this.#draining
    ) {
      this.#jobDir?.flush();
      subscriber.complete();
    }
  }

  // ---- placing, blocking, waking --------------------------------------------

  #place(
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
    const item: Item<R> = {
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
    this.#pending++;
    if (releaseAt > 0) {
      this.#aside.push(item);
      this.#checkHeldBack();
      return;
    }
    this.#insert(item);
  }

  #insert(item: Item<R>): void {
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
      buckets: new PriorityBuckets<Item<R>>(this.#fifo),
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

  #releaseDue(): void {
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

  #scheduleTimer(): void {
    if (this.#subscriber === undefined) return;
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

  #scheduleFlush(): void {
    if (this.#flushTimer !== undefined || this.#jobDir === undefined) return;
    this.#flushTimer = this.#scheduler.schedule(() => {
      this.#flushTimer = undefined;
      try {
        this.#jobDir?.flush();
      } catch (error) {
        this.#subscriber?.error(error);
      }
    }, this.#flushIntervalMs);
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

  // ---- job directory ------------------------------------------------------

  #resume(pending: readonly JobDirEntry[]): void {
    const custom = this.#scopesOf !== undefined;
    const scoped = !this.#oneSet;
    for (const e of pending) {
      let r: R;
      let key: string | undefined;
      let scopes: readonly string[] | undefined;
      let amounts: readonly (number | undefined)[] | undefined;
      try {
        r = this.#deserialize(e.data);
        const stored = e.scopes;
        if (!scoped) {
          // no scopes
        } else if (stored !== undefined && !custom) {
          // Written at enqueue: no URL to parse again.
          if (typeof stored === "string") key = stored;
          else scopes = stored;
        } else {
          const rs = custom ? this.#customScopes(r) : scopesFromMeta(r);
          if (rs === undefined) key = hostOf(r, parseRequestUrl(r));
          else {
            scopes = rs.scopes;
            amounts = rs.amounts;
          }
        }
      } catch (err) {
        this.#warn(
          "jobdir-unreadable-request",
          `Dropped request ${e.seq} from the job directory: ${String(err)}`,
        );
        continue;
      }
      this.#resumed++;
      this.#place(
        r,
        e.seq,
        e.priority,
        e.start,
        e.fingerprint,
        key,
        scopes,
        amounts,
        true,
        requestMeta(r),
      );
    }
  }

  #compact(): void {
    const jd = this.#jobDir;
    if (jd === undefined) return;
    const live: Item<R>[] = [];
    for (const set of this.#sets.values()) for (const item of set.buckets) live.push(item);
    for (const item of this.#aside.values()) live.push(item);
    for (const item of this.#unsent) live.push(item);
    for (const first of this.#inFlight.values()) {
      for (let item: Item<R> | undefined = first; item !== undefined; item = item.sameNext) {
        live.push(item);
      }
    }
    live.sort((a, b) => a.seq - b.seq);
    const liveFps = new Set<string>();
    for (const item of live) if (item.fp !== undefined) liveFps.add(item.fp);
    const seen = this.#seen;
    const before = this.#seenBefore;
    const keepScopes = this.#scopesOf === undefined && !this.#oneSet;
    const serialize = (item: Item<R>): JobDirEntry => ({
      seq: item.seq,
      start: item.start,
      priority: item.priority,
      fingerprint: item.fp,
      data: this.#serializeSafe(item.r),
      scopes: keepScopes && item.amounts === undefined
        ? (item.set.scopes.length === 1 ? item.set.key : item.set.scopes)
        : undefined,
    });
    jd.compact(
      (function* () {
        for (const item of live) if (item.persisted) yield serialize(item);
      })(),
      (function* () {
        // Fingerprints of requests kept only in memory are not written: a
        // crash loses those requests, and they must be fetchable again.
        for (const fp of before) if (!liveFps.has(fp)) yield fp;
        for (const fp of seen) if (!liveFps.has(fp)) yield fp;
      })(),
    );
  }

  #serializeSafe(request: R): unknown {
    try {
      return this.#serialize(request);
    } catch {
      return undefined;
    }
  }

  #warn(code: string, message: string): void {
    this.#warnings$.next({ type: "warning", at: this.#scheduler.now(), code, message });
  }

  #emitStats(): void {
    if (this.#stats$.observed) this.#stats$.next(this.stats());
  }
}

// ---- helpers ----------------------------------------------------------------

/** The queue options a throttler's settings hold, when the view is a throttler. */
function viewQueueSettings(view: unknown): Partial<RequestQueueOptions<unknown>> | undefined {
  const settings = (view as { settings?: unknown } | undefined)?.settings as
    | Partial<Pick<ThrottlerSettings, "queue" | "delayedRequestsWarnThreshold">>
    | undefined;
  const q = settings?.queue;
  if (typeof q !== "object" || q === null) return undefined;
  const scheduler = (view as { scheduler?: SchedulerLike }).scheduler;
  return {
    order: q.order,
    fifo: q.fifo,
    depthPriority: q.depthPriority,
    dedupe: q.dedupe,
    ...(q.jobDir !== undefined ? { jobDir: q.jobDir } : {}),
    ...(settings?.delayedRequestsWarnThreshold !== undefined
      ? { delayedRequestsWarnThreshold: settings.delayedRequestsWarnThreshold }
      : {}),
    ...(scheduler !== undefined ? { scheduler } : {}),
  };
}

/** The options given, those set to `undefined` left out (so they do not hide a default). */
function definedOnly<T extends object>(options: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(options)) {
    if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  }
  return out;
}

function parseRequestUrl(request: unknown): URL {
  const url = requestUrl(request);
  if (url === undefined || url === "") {
    throw invalidRequest(
      "url",
      request,
      `Cannot enqueue request as it has no 'url': current value is ${describe(request)}`,
    );
  }
  try {
    return parseUrl(url);
  } catch (cause) {
    throw invalidRequest(
      "url",
      request,
      `Cannot enqueue request as its 'url' is not an absolute URL: current value is ${
        JSON.stringify(url)
      }`,
      { cause },
    );
  }
}

function hostOf(request: unknown, url: URL): string {
  if (url.host === "") {
    throw invalidRequest(
      "url",
      request,
      `Cannot enqueue request as its 'url' has no host to use as a scope: current value is ${
        JSON.stringify(url.href)
      }`,
    );
  }
  return url.host;
}

function scopesFromMeta(request: unknown): QueueScopes | undefined {
  const input: ScopesInput | undefined = requestMeta(request)?.throttlingScopes;
  if (input === undefined) return undefined;
  if (typeof input === "string") return { scopes: [input] };
  if (typeof (input as Iterable<string>)[Symbol.iterator] === "function") {
    const scopes = [...(input as Iterable<string>)];
    if (scopes.some((s) => typeof s !== "string")) {
      throw invalidRequest(
        "scopes",
        request,
        `Cannot enqueue request as 'meta.throttlingScopes' must hold strings: current value is ${
          describe(scopes)
        }`,
      );
    }
    return { scopes };
  }
  const record = input as Readonly<Record<string, number>>;
  const scopes = Object.keys(record);
  return { scopes, amounts: scopes.map((s) => record[s]) };
}

function requestBodyOf(request: unknown): string {
  if (typeof request === "object" && request !== null && !(request instanceof Request)) {
    const b = (request as { body?: unknown }).body;
    if (typeof b === "string") return b;
  }
  return "";
}

/** A value in an error message, cut at 200 characters. */
function describe(value: unknown): string {
  return describeValue(value, 200);
}
