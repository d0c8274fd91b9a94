/**
 * A request queue shared through Redis: one crawl job, many workers. The
 * frontier (queued requests, seen fingerprints, requests in flight) lives in
 * Redis under the job's prefix; each worker takes requests with a lease,
 * renews it while it downloads and acknowledges it when done, so a worker
 * killed with SIGKILL loses nothing (its leases expire and the requests go
 * back to the queue) and a finished request is never handed out again.
 *
 * Taking is one Lua script call on the Redis server's clock: it gives back
 * expired leases, then pops the best request of the best scope set that this
 * worker's throttler does not block (held, in backoff, at its limit), so a
 * blocked site's requests stay queued while the others flow (no
 * head-of-line blocking across workers). See docs/REDIS.md, "The shared
 * request queue", and docs/DECISIONS.md.
 *
 * Size: the queue's client side (takes with leases, renewal, batched
 * acknowledgements, outages); its Lua scripts are `_redis_queue_scripts.ts`.
 *
 * @module
 */
import { viewScopesOf } from "../queue/_view_scopes.ts";
import { markRequestDelayed } from "../_request_delay.ts";
import {
  deserializeRequest,
  metaDepth,
  serializeRequest,
} from "../queue/_request_serialization.ts";
import { errorReason } from "../http/_error_text.ts";
import { createHash } from "node:crypto";
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
import { outagePauseMs, scheduleAfter, sleepOn } from "../util/_timer.ts";
import type { RedisCommandSender } from "./_redis_script.ts";
import { describeValue } from "../settings/_describe_value.ts";
import {
  parseScopeSetKey,
  queueKeyBase,
  queueKeys,
  type QueueScriptName,
  runQueueScript,
  scopeSetKey,
} from "./_redis_queue_scripts.ts";
import type { CrawlQueue, CrawlQueueDone } from "../queue/crawl_queue.ts";
import { readRedisQueueStatus, type RedisQueueStatus } from "./redis_queue_status.ts";
import { InvalidRequestError } from "../http/download_errors.ts";
import { requestMeta, requestPriority } from "../request.ts";
import { requestFingerprint } from "../queue/request_fingerprint.ts";
import {
  defaultScopesOf,
  type QueueScopes,
  type QueueThrottleView,
  type QueueWarning,
} from "../queue/request_queue.ts";

/** The part of a Redis client the queue uses; a connected node-redis client fits. */
export type RedisQueueClient = RedisCommandSender;

/** Options of {@link RedisRequestQueue}. */
export interface RedisRequestQueueOptions<R> {
  /**
   * The job: workers with the same prefix share one queue. The queue's keys
   * are `{PREFIX}q:...` (a hash tag, so a Redis Cluster keeps the job on one
   * slot); a prefix that already holds a `{tag}` is used as it is.
   * @default "politely:"
   */
  readonly prefix?: string;
  /**
   * This worker's throttler: scope sets it blocks are skipped when taking, and
   * no more is taken than it has free slots.
   * @default a view with no limits
   */
  readonly view?: QueueThrottleView;
  /** A request's scopes. @default the view's `resolveScopes`, else `defaultScopesOf` */
  readonly scopesOf?: (request: R) => QueueScopes;
  /** Regular requests FIFO (breadth-first) instead of LIFO; every worker of a job should agree. @default false */
  readonly fifo?: boolean;
  /** Scrapy's DEPTH_PRIORITY: effective priority = priority - depth * depthPriority. @default 0 */
  readonly depthPriority?: number;
  /** A request's depth. @default `meta.depth` when a number, else 0 */
  readonly depthOf?: (request: R) => number;
  /** Drop requests whose fingerprint the job has seen, unless `meta.dontFilter`. @default true */
  readonly dedupe?: boolean;
  /**
   * A request's fingerprint; Redis keeps a 96-bit digest of it (16 base64
   * characters).
   * @default `requestFingerprint` (method + canonical URL + body)
   */
  readonly fingerprint?: (request: R) => string;
  /**
   * Start requests, enqueued when `requests$` is subscribed (a second worker
   * seeding the same ones adds nothing: dedupe). `requests$` does not
   * complete before they are all in.
   * @default none
   */
  readonly start?: Iterable<R> | Observable<R>;
  /** A request as JSON for Redis. @default strings, JSON-safe plain objects, body-less WHATWG Requests */
  readonly serialize?: (request: R) => unknown;
  /** The inverse of `serialize`. @default the inverse of the default */
  readonly deserialize?: (data: unknown) => R;
  /**
   * How long a taken request stays leased without a renewal, in ms: a worker
   * that died gives its requests back after this long.
   * @default 60000
   */
  readonly leaseMs?: number;
  /** How often leases of requests in flight are renewed (one call for all), in ms. @default leaseMs / 3 */
  readonly renewEveryMs?: number;
  /** Longest pause between two asks when nothing can be taken, in ms. @default 250 */
  readonly pollMs?: number;
  /**
   * How long Redis may fail before `requests$` errors, in ms (the command
   * line's `--redis-wait`): a Redis restart is a wait, no request is lost.
   * @default 120000
   */
  readonly outageWaitMs?: number;
  /**
   * Wait for the job to be seeded instead of completing on an empty one (a
   * worker that joins without start requests).
   * @default false
   */
  readonly awaitJob?: boolean;
  /**
   * The job's most requests in all (start requests and every request
   * enqueued since, duplicates not counted), counted in Redis across workers:
   * a request enqueued past it is dropped (`stats().limited`); start
   * requests count but are never dropped. The command
   * line's `--max-pages` with `--shared-queue`. Every worker of a job should
   * give the same value (each enqueue checks the one its worker gives).
   * @default no limit
   */
  readonly maxRequests?: number;
  /** Most requests one take asks for. @default 16 */
  readonly maxTake?: number;
  /**
   * Where this worker starts its turn among scope sets of equal priority (so
   * workers spread over sites rather than all start at the first).
   * @default Math.random
   */
  readonly random?: () => number;
  /** The clock of waits and renewals (leases use the Redis server's). @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
}

/** The queue's counters: this worker's, then the job's as Redis last answered. */
export interface RedisRequestQueueStats {
  /** Requests this worker enqueued (sent to Redis or about to be). */
  readonly enqueued: number;
  /** Of those, duplicates Redis dropped. */
  readonly filtered: number;
  /** Of those, requests Redis dropped past `maxRequests`. */
  readonly limited: number;
  /** Always 0: a job's earlier runs' requests are duplicates (`filtered`). */
  readonly known: number;
  /** Requests refused at enqueue (no URL, bad scopes, not serializable). */
  readonly rejected: number;
  /** Requests this worker took. */
  readonly dequeued: number;
  /** `markDone` calls of this worker. */
  readonly completed: number;
  /** Requests this worker holds (taken, not ended). */
  readonly inFlight: number;
  /** Always 0: unsent requests go back to the shared queue at once. */
  readonly unsent: number;
  /** Leases this worker found taken away at a renewal (it was too slow: the request went to another). */
  readonly lost: number;
  /** The job's queued requests, as Redis last said. */
  readonly pending: number;
  /** The job's leased requests (every worker's), as Redis last said. */
  readonly leased: number;
}

/** Redis failed for longer than `outageWaitMs`: the queue gave up (nothing in Redis is lost). */
export class RedisRequestQueueError extends Error {
  override readonly name = "RedisRequestQueueError";
  /** What the queue was doing. */
  readonly operation: "write" | "take" | "lost";
  /**
   * @param message What failed.
   * @param operation What the queue was doing (`"lost"`: the job vanished from Redis).
   * @param options The last Redis error as `cause`.
   */
  constructor(
    message: string,
    operation: "write" | "take" | "lost",
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.operation = operation;
  }
}

const UNLIMITED_VIEW: QueueThrottleView = {
  waitMs: () => 0,
  load: () => 0,
  quotaShare: () => 0,
  freeSlots: () => Infinity,
  changes$: NEVER,
};

/** Most requests per write call, and most heads known beyond the excluded ones. */
const MAX_BATCH = 256;
const HEADS = 16;
/** Most scope sets one take skips: past this many blocked, the gate holds the rest. */
const MAX_EXCLUDED = 256;

interface Held {
  readonly id: string;
  readonly set: string;
  readonly takes: number;
}

/**
 * A request queue shared by workers through Redis, with the contract
 * `crawl()` needs ({@link CrawlQueue}). At-least-once: a request is handed to
 * one worker at a time under a lease; it goes to another only when the lease
 * expires (the worker died or stalled past `leaseMs`).
 *
 * `requests$` completes when the job is finished: nothing queued and nothing
 * leased, by any worker. A worker ends its own requests with `markDone`
 * (after enqueueing what they led to) or `markUnsent` (back to the queue);
 * `close()` gives back what it still holds.
 *
 * @example Two workers on one job
 * ```ts
 * import { createClient } from "redis";
 * import { RedisRequestQueue } from "./redis_request_queue.ts";
 * const client = await createClient({ url: "redis://127.0.0.1:6390" }).connect();
 * const queue = new RedisRequestQueue<string>(client, {
 *   prefix: "job1:",
 *   start: ["https://a.example/", "https://b.example/"],
 * });
 * queue.requests$.subscribe((url) => queue.markDone(url));
 * // ...another process: new RedisRequestQueue(client, { prefix: "job1:" }) ...
 * await queue.close();
 * ```
 */
export class RedisRequestQueue<R> implements CrawlQueue<R> {
  /** The requests this worker takes, as its view lets it. One subscriber at a time. */
  readonly requests$: Observable<R>;
  /** The stats now and at every change. */
  readonly stats$: Observable<RedisRequestQueueStats>;
  /** Warnings (a Redis outage, lost leases); replayed to late subscribers. */
  readonly warnings$: Observable<QueueWarning>;
  /** The job's key base (`{prefix}q:`). */
  readonly keyBase: string;

  readonly #client: RedisQueueClient;
  readonly #prefix: string;
  readonly #keys: readonly string[];
  readonly #view: QueueThrottleView;
  readonly #scopesOf: (request: R) => QueueScopes;
  readonly #fifo: boolean;
  readonly #depthPriority: number;
  readonly #depthOf: ((request: R) => number) | undefined;
  readonly #dedupe: boolean;
  readonly #fingerprint: (request: R) => string;
  readonly #serialize: (request: R) => unknown;
  readonly #deserialize: (data: unknown) => R;
  readonly #leaseMs: number;
  readonly #renewEveryMs: number;
  readonly #pollMs: number;
  readonly #outageWaitMs: number;
  readonly #awaitJob: boolean;
  readonly #maxTake: number;
  /** `maxRequests` as the enqueue script's argument ('' for none). */
  readonly #maxRequests: string;
  readonly #scheduler: SchedulerLike;
  readonly #start: Iterable<R> | Observable<R> | undefined;

  readonly #held = new Map<R, Held[]>();
  #heldCount = 0;
  /** Per request: fingerprint, set key, score, kind, record, delay ms. */
  #toEnqueue: string[][] = [];
  #toAck: string[] = [];
  #toUnsend: string[] = [];
  /** Ids of held requests being attempted again (retries within their take). */
  #toTry: string[] = [];
  /** READY's first scope sets, as the last take saw them. */
  #heads: readonly string[] = [];
  /** `#heads` split into their scopes and amounts (split once per take, read at every change). */
  #headScopes: readonly QueueScopes[] = [];
  #headsKnown = false;
  /** This worker's turn among scope sets of equal priority: where its next take's window starts. */
  #offset: number;
  /** Ms until the job's next request held for its delay is due, as the last take said (-1: none). */
  #dueInMs = -1;

  #subscriber: Subscriber<R> | undefined;
  #startDone = true;
  /**
   * The start requests are all written: mark the job as seeded even when they
   * were none (an empty input), so workers waiting for it (`awaitJob`) end.
   */
  #markSeeded = false;
  #closed = false;
  #running = false;
  /** The I/O loop now running, for close() to wait on. */
  #loopDone: Promise<void> = Promise.resolve();
  #again = false;
  #changed = false;
  #lastExcluded = "";
  #lastWant = 0;
  #poll: Subscription | undefined;
  /** The writes in flight: one batch at a time, in order. */
  #writing: Promise<void> = Promise.resolve();
  #renew: Subscription | undefined;
  #outageSince: number | undefined;
  /** The job was seen in Redis: its disappearance is data lost, not a finished job. */
  #sawJob = false;
  #saidWaiting = false;
  #outageTries = 0;

  #enqueued = 0;
  #filtered = 0;
  #limited = 0;
  #rejected = 0;
  #dequeued = 0;
  #completed = 0;
  #lost = 0;
  #pending = 0;
  #leased = 0;
  readonly #stats$ = new Subject<RedisRequestQueueStats>();
  readonly #warnings$ = new ReplaySubject<QueueWarning>(100);

  /**
   * @param client A connected Redis client (node-redis fits as it is); the caller's to close.
   * @param options Job prefix, view, order, dedupe, leases, waits.
   * @throws {RangeError} For a bad option, naming it.
   */
  constructor(client: RedisQueueClient, options: RedisRequestQueueOptions<R> = {}) {
    const ms = (name: string, value: number, least: number): number => {
      if (!(typeof value === "number" && Number.isFinite(value) && value >= least)) {
        throw new RangeError(
          `Cannot create Redis request queue as '${name}' must be a finite number >= ${least}: current value is ${value}`,
        );
      }
      return value;
    };
    this.#client = client;
    const prefix = options.prefix ?? "politely:";
    this.#prefix = prefix;
    if (prefix === "") {
      throw new RangeError(
        "Cannot create Redis request queue as 'prefix' must not be empty: current value is ''",
      );
    }
    this.keyBase = queueKeyBase(prefix);
    this.#keys = queueKeys(this.keyBase);
    const view = options.view ?? UNLIMITED_VIEW;
    this.#view = view;
    this.#scopesOf = options.scopesOf ?? viewScopesOf<R>(view, defaultScopesOf) ?? defaultScopesOf;
    this.#fifo = options.fifo ?? false;
    this.#depthPriority = ms("depthPriority", options.depthPriority ?? 0, -Infinity);
    this.#depthOf = options.depthOf;
    this.#dedupe = options.dedupe ?? true;
    this.#fingerprint = options.fingerprint ?? requestFingerprint;
    this.#serialize = options.serialize ?? serializeRequest;
    this.#deserialize = options.deserialize ??
      ((data: unknown) => deserializeRequest(data, "Redis") as R);
    this.#leaseMs = ms("leaseMs", options.leaseMs ?? 60_000, 1);
    this.#renewEveryMs = ms("renewEveryMs", options.renewEveryMs ?? this.#leaseMs / 3, 1);
    this.#pollMs = ms("pollMs", options.pollMs ?? 250, 1);
    this.#outageWaitMs = ms("outageWaitMs", options.outageWaitMs ?? 120_000, 0);
    this.#awaitJob = options.awaitJob ?? false;
    this.#maxTake = Math.floor(ms("maxTake", options.maxTake ?? 16, 1));
    this.#maxRequests = options.maxRequests === undefined
      ? ""
      : String(Math.floor(ms("maxRequests", options.maxRequests, 0)));
    this.#scheduler = options.scheduler ?? asyncScheduler;
    this.#start = options.start;
    this.#offset = Math.floor((options.random ?? Math.random)() * 1_000_000);
    this.requests$ = new RxObservable<R>((subscriber) => this.#subscribe(subscriber));
    this.stats$ = defer(() => concat(of(this.stats()), this.#stats$));
    this.warnings$ = this.#warnings$.asObservable();
  }

  /**
   * Adds a request to the job, unless Redis has seen its fingerprint (known
   * when the write is answered: see `stats().filtered`). Writes go in one
   * script call per turn of the event loop, before the next take or
   * acknowledgement.
   *
   * @param request The request.
   * @param options `start: true` for a start request (FIFO, after regular requests of equal priority).
   * @returns `true` (accepted for writing).
   * @throws {InvalidRequestError} When the request has no usable URL or scopes, or cannot be serialized.
   */
  enqueue(request: R, options?: { readonly start?: boolean }): boolean {
    let scopes: QueueScopes;
    let fp = "";
    let data: unknown;
    const meta = requestMeta(request);
    try {
      scopes = this.#scopesOf(request);
      if (scopes.scopes.length === 0) {
        throw new InvalidRequestError(
          "Cannot enqueue request as it has no scopes: current value is []",
          { input: request, field: "scopes" },
        );
      }
      if (this.#dedupe && meta?.dontFilter !== true) {
        fp = compactFingerprint(this.#fingerprint(request));
      }
      data = this.#serialize(request);
    } catch (error) {
      this.#rejected++;
      if (error instanceof InvalidRequestError) throw error;
      throw new InvalidRequestError(`Cannot enqueue request: ${String(error)}`, {
        input: request,
        cause: error,
      });
    }
    if (data === undefined) {
      this.#rejected++;
      throw new InvalidRequestError(
        `Cannot enqueue request as it cannot be serialized for Redis: current value is ${
          describeValue(request, 200)
        }`,
        { input: request, field: "serialize" },
      );
    }
    const set = scopeSetKey(scopes);
    const depth = this.#depthOf ? this.#depthOf(request) : metaDepth(meta);
    const priority = requestPriority(request) - depth * this.#depthPriority;
    const score = String(priority === 0 ? 0 : -priority);
    const kind = options?.start === true ? "s" : this.#fifo ? "f" : "r";
    // Held in Redis until its delay has passed, as RequestQueue holds it
    // aside; the record says so, and the worker that takes it tells the gate
    // not to wait the same delay again. (An infinite delay is left to the
    // gate, which refuses it.)
    const delay = meta?.throttlingDelayMs;
    const held = typeof delay === "number" && delay > 0 && delay < Infinity;
    this.#toEnqueue.push([
      fp,
      set,
      score,
      kind,
      JSON.stringify(held ? [set, score, data, 1] : [set, score, data]),
      held ? String(delay) : "",
    ]);
    this.#enqueued++;
    this.#pump();
    return true;
  }

  /**
   * Ends a request this worker took: finished (or failed for good). The
   * acknowledgement goes with the turn's others in one call, after the
   * requests it led to.
   *
   * @param request The request as emitted.
   * @param done Whether it failed (counted as failed, per scope too).
   * @throws {RangeError} When this worker does not hold the request.
   */
  markDone(request: R, done?: CrawlQueueDone): void {
    const held = this.#release(request, "done");
    this.#toAck.push(held.id, done?.failed === true ? "f" : "d", held.set);
    this.#completed++;
    this.#pump();
  }

  /**
   * Gives back a request this worker took without sending it (a local
   * failure): it goes back to the shared queue at its old place.
   *
   * @param request The request as emitted.
   * @throws {RangeError} When this worker does not hold the request.
   */
  markUnsent(request: R): void {
    const held = this.#release(request, "unsent");
    this.#toUnsend.push(held.id);
    this.#pump();
  }

  /**
   * How many times the job has handed this held request out (1 the first
   * time; more after leases expired): attempts survive workers.
   *
   * @param request A request this worker holds.
   * @returns The count, or `undefined` when not held.
   */
  takesOf(request: R): number | undefined {
    return this.#held.get(request)?.[0]?.takes;
  }

  /**
   * Attempts other workers made at a held request: one per earlier take (a
   * take whose lease expired; a worker that died before sending counts too).
   * `crawl()` counts the retries from there.
   *
   * @param request A request this worker holds.
   * @returns The count (0 when it is its first take, or not held).
   */
  attemptsBefore(request: R): number {
    const takes = this.takesOf(request);
    return takes === undefined ? 0 : Math.max(0, takes - 1);
  }

  /**
   * The crawl is about to make attempt `attempt` at a held request. A retry
   * within this take (an attempt past the take's first) is counted in Redis
   * with the request's takes, in the next write call: a worker that takes it
   * after this one died starts from the attempts made. (An attempt that then
   * fails locally, never sent, still counts.)
   *
   * @param request A request this worker holds.
   * @param attempt The attempt's number (1 for a first attempt).
   */
  recordAttempt(request: R, attempt: number): void {
    const held = this.#held.get(request)?.[0];
    if (held === undefined || !(attempt > held.takes)) return;
    this.#toTry.push(held.id);
    this.#pump();
  }

  /** A snapshot of the stats. */
  stats(): RedisRequestQueueStats {
    return {
      enqueued: this.#enqueued,
      filtered: this.#filtered,
      limited: this.#limited,
      known: 0,
      rejected: this.#rejected,
      dequeued: this.#dequeued,
      completed: this.#completed,
      inFlight: this.#heldCount,
      unsent: 0,
      lost: this.#lost,
      pending: this.#pending,
      leased: this.#leased,
    };
  }

  /**
   * The job's counts as Redis has them now: queued, leased, done and failed,
   * in all and per scope set (what `politely status` prints).
   *
   * @returns The counts.
   * @throws {Error} (as a rejection) When Redis fails.
   */
  jobStatus(): Promise<RedisQueueStatus> {
    return readRedisQueueStatus(this.#client, this.#prefix);
  }

  /**
   * Stop cleanly: requests this worker still holds go back to the queue, and
   * every write (enqueues, acknowledgements) is sent, waiting through a Redis
   * outage up to `outageWaitMs`. The client stays open. Idempotent.
   *
   * @throws {RedisRequestQueueError} (as a rejection) when the writes could
   *   not be sent in time (the requests held then come back when their leases expire).
   */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#poll?.unsubscribe();
      this.#renew?.unsubscribe();
      this.#renew = undefined;
      for (const list of this.#held.values()) for (const h of list) this.#toUnsend.push(h.id);
      this.#held.clear();
      this.#heldCount = 0;
    }
    // A take in flight gives back what it brings (the queue is closed), before the last writes.
    await this.#loopDone;
    const started = this.#scheduler.now();
    for (;;) {
      try {
        await this.#flushWrites();
        return;
      } catch (error) {
        if (this.#scheduler.now() - started >= this.#outageWaitMs) {
          throw new RedisRequestQueueError(
            `Cannot write to the shared queue ${this.keyBase} as Redis failed for longer than 'outageWaitMs' (${this.#outageWaitMs} ms): ${
              errorReason(error)
            }`,
            "write",
            { cause: error },
          );
        }
        await this.#sleep(outagePauseMs(++this.#outageTries));
      }
    }
  }

  // ---- subscription -------------------------------------------------------

  #subscribe(subscriber: Subscriber<R>): () => void {
    if (this.#subscriber !== undefined || this.#closed) {
      subscriber.error(
        new Error(
          this.#closed
            ? "Cannot subscribe to requests$ as the queue is closed"
            : "Cannot subscribe to requests$ twice at once: unsubscribe the first subscriber",
        ),
      );
      return () => {};
    }
    this.#subscriber = subscriber;
    const changes = this.#view.changes$.subscribe(() => this.#onChange());
    let startSub: Subscription | undefined;
    const start = this.#start;
    if (start !== undefined && this.#startDone) {
      this.#startDone = false;
      if (isObservable(start)) {
        startSub = start.subscribe({
          next: (r) => this.#enqueueStart(r),
          error: (e: unknown) => subscriber.error(e),
          complete: () => {
            this.#startDone = true;
            this.#markSeeded = true;
            this.#pump();
          },
        });
      } else {
        for (const r of start) this.#enqueueStart(r);
        this.#startDone = true;
        this.#markSeeded = true;
      }
    }
    this.#pump();
    return () => {
      this.#subscriber = undefined;
      changes.unsubscribe();
      startSub?.unsubscribe();
      this.#poll?.unsubscribe();
      this.#poll = undefined;
    };
  }

  #enqueueStart(r: R): void {
    try {
      this.enqueue(r, { start: true });
    } catch (e) {
      if (!(e instanceof InvalidRequestError)) return this.#subscriber?.error(e);
      this.#warn("request-rejected", e.message);
    }
  }

  #release(request: R, what: string): Held {
    const list = this.#held.get(request);
    const held = list?.shift();
    if (held === undefined) {
      throw new RangeError(
        `Cannot mark request ${what} as this worker does not hold it: current value is ${
          describeValue(request, 200)
        }`,
      );
    }
    if (list!.length === 0) this.#held.delete(request);
    this.#heldCount--;
    if (this.#heldCount === 0) {
      this.#renew?.unsubscribe();
      this.#renew = undefined;
    }
    return held;
  }

  #onChange(): void {
    if (this.#running) {
      this.#changed = true;
      return;
    }
    if (this.#worthAsking()) this.#pump();
  }

  /** Whether a take now could give more than the last one: free slots came, or a blocked set opened. */
  #worthAsking(): boolean {
    const want = this.#want();
    if (want < 1) return false;
    return this.#lastWant < 1 || this.#excluded().join("\u0001") !== this.#lastExcluded;
  }

  #want(): number {
    const free = this.#view.freeSlots();
    return Math.floor(Math.min(free, this.#maxTake));
  }

  /** The known scope sets the view blocks now. */
  #excluded(): string[] {
    const out: string[] = [];
    const heads = this.#heads;
    for (let i = 0; i < heads.length; i++) {
      const head = this.#headScopes[i]!;
      const w = this.#view.waitMs(head.scopes, head.amounts);
      if (w > 0 || Number.isNaN(w)) {
        out.push(heads[i]!);
        if (out.length >= MAX_EXCLUDED) break;
      }
    }
    return out;
  }

  // ---- the I/O loop -------------------------------------------------------

  /** Runs the I/O loop, or makes the running one go round again. */
  #pump(): void {
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    this.#poll?.unsubscribe();
    this.#poll = undefined;
    this.#loopDone = this.#loop();
  }

  async #loop(): Promise<void> {
    for (;;) {
      this.#again = false;
      this.#changed = false;
      let more = false;
      try {
        await this.#flushWrites();
        more = await this.#takeOnce();
        this.#outageSince = undefined;
        this.#outageTries = 0;
      } catch (error) {
        // Closing: close() sends what is left, with its own wait.
        if (this.#closed || !this.#onOutage(error)) break;
        await this.#sleep(outagePauseMs(this.#outageTries));
        if (this.#closed && this.#subscriber === undefined) break;
        continue;
      }
      if (more || this.#again) continue;
      if (this.#changed && this.#worthAsking()) continue;
      break;
    }
    this.#running = false;
    this.#emitStats();
    this.#idle();
  }

  /** Nothing to do now: wait for a poll, a change of the view or a local write. */
  #idle(): void {
    if (this.#subscriber === undefined || this.#closed || this.#subscriber.closed) return;
    this.#poll?.unsubscribe();
    // A request held for its delay is looked for when it is due, not a poll later.
    const due = this.#dueInMs;
    const ms = due >= 0 && due < this.#pollMs ? Math.ceil(due) : this.#pollMs;
    this.#poll = scheduleAfter(this.#scheduler, ms, () => {
      this.#poll = undefined;
      this.#pump();
    });
  }

  /** A Redis failure: wait (true) unless it has lasted past `outageWaitMs` (false, `requests$` errors). */
  #onOutage(error: unknown): boolean {
    const now = this.#scheduler.now();
    this.#outageTries++;
    if (this.#outageSince === undefined) {
      this.#outageSince = now;
      this.#warn(
        "redis-queue",
        `The shared queue ${this.keyBase} cannot reach Redis (waiting up to ${this.#outageWaitMs} ms): ${
          errorReason(error)
        }`,
      );
    }
    if (now - this.#outageSince < this.#outageWaitMs) return true;
    const subscriber = this.#subscriber;
    if (subscriber === undefined) return this.#outageTries < 8;
    subscriber.error(
      new RedisRequestQueueError(
        `Cannot take from the shared queue ${this.keyBase} as Redis failed for longer than 'outageWaitMs' (${this.#outageWaitMs} ms): ${
          errorReason(error)
        }`,
        "take",
        { cause: error },
      ),
    );
    return false;
  }

  #sleep(ms: number): Promise<void> {
    return sleepOn(this.#scheduler, ms);
  }

  #run(name: QueueScriptName, args: readonly string[]): Promise<unknown> {
    return runQueueScript(this.#client, name, this.#keys, [this.keyBase, ...args]);
  }

  /**
   * Sends the writes in order: enqueues (the links a page led to), then
   * requests given back, then acknowledgements, so a page is never done in
   * Redis without its links. A failed batch stays for the next try.
   */
  #flushWrites(): Promise<void> {
    // One writer at a time (the I/O loop and close() may both flush): a batch
    // is taken off its buffer only once Redis answered it.
    const run = this.#writing.then(() => this.#sendWrites());
    this.#writing = run.catch(() => {});
    return run;
  }

  async #sendWrites(): Promise<void> {
    while (this.#toEnqueue.length > 0) {
      const batch = this.#toEnqueue.slice(0, MAX_BATCH);
      const added = await this.#run("enqueue", [
        this.#maxRequests,
        ...batch.flat(),
      ]) as readonly number[];
      this.#toEnqueue = this.#toEnqueue.slice(batch.length);
      for (const a of added) {
        if (Number(a) === 0) this.#filtered++;
        else if (Number(a) === 2) this.#limited++;
      }
    }
    if (this.#markSeeded) {
      await this.#client.sendCommand(["SET", this.#keys[0]!, "0", "NX"]);
      this.#markSeeded = false;
    }
    while (this.#toTry.length > 0) {
      const batch = this.#toTry.slice(0, MAX_BATCH);
      await this.#run("tried", batch);
      this.#toTry = this.#toTry.slice(batch.length);
    }
    while (this.#toUnsend.length > 0) {
      const batch = this.#toUnsend.slice(0, MAX_BATCH);
      await this.#run("unsent", batch);
      this.#toUnsend = this.#toUnsend.slice(batch.length);
    }
    while (this.#toAck.length > 0) {
      const batch = this.#toAck.slice(0, MAX_BATCH * 3);
      await this.#run("ack", batch);
      this.#toAck = this.#toAck.slice(batch.length);
    }
  }

  /** One take; true when it took something (take again at once). */
  async #takeOnce(): Promise<boolean> {
    const subscriber = this.#subscriber;
    if (subscriber === undefined || this.#closed || subscriber.closed) return false;
    // The first take only looks: which scope sets lead, so a blocked one is
    // skipped from the start.
    const want = this.#headsKnown ? Math.max(0, this.#want()) : 0;
    // Slots all busy with this worker's own requests: a completion wakes it.
    if (want < 1 && this.#heldCount > 0) {
      this.#lastWant = 0;
      return false;
    }
    const excluded = this.#excluded();
    this.#lastWant = want;
    this.#lastExcluded = excluded.join("\u0001");
    const offset = this.#offset;
    // The next take starts past what this one may take: equal sets in turn.
    this.#offset = (offset + Math.max(1, want)) % 1_000_000_000;
    const reply = await this.#run("take", [
      String(this.#leaseMs),
      String(want),
      String(HEADS),
      String(offset),
      String(this.#offset),
      ...excluded,
    ]) as [number, number, number, number, string[], [string, string, number][], string];
    const [taken, queued, leased, exists, heads, out, dueIn] = reply;
    this.#dueInMs = Number(dueIn);
    this.#pending = Number(queued);
    this.#leased = Number(leased);
    this.#heads = heads;
    this.#headScopes = heads.map(parseScopeSetKey);
    if (!this.#headsKnown) {
      this.#headsKnown = true;
      return true;
    }
    const live = this.#subscriber;
    if (live === undefined || this.#closed || live.closed) {
      // Paused or closed while the take ran: give them back.
      for (const [id] of out) this.#toUnsend.push(id);
      if (out.length > 0) this.#again = true;
      return false;
    }
    for (const [id, record, takes] of out) {
      let request: R;
      let set: string;
      try {
        const [s, , data, delayed] = JSON.parse(record) as [string, string, unknown, 1?];
        set = s;
        request = this.#deserialize(data);
        if (delayed === 1) markRequestDelayed(request);
      } catch (error) {
        this.#warn(
          "redis-queue-unreadable",
          `Dropped request ${id} of the shared queue (counted as failed): ${String(error)}`,
        );
        this.#toAck.push(id, "f", "");
        continue;
      }
      const held: Held = { id, set, takes: Number(takes) };
      const list = this.#held.get(request);
      if (list === undefined) this.#held.set(request, [held]);
      else list.push(held);
      this.#heldCount++;
      this.#dequeued++;
      this.#startRenewing();
      // Consistent before next(): the subscriber may end it at once (re-entry
      // only queues writes and sets #again).
      live.next(request);
    }
    if (Number(exists) === 1) this.#sawJob = true;
    else if (this.#awaitJob && !this.#sawJob && !this.#saidWaiting && this.#startDone) {
      // Said once: a mistyped prefix would otherwise be a silent wait.
      this.#saidWaiting = true;
      this.#warn(
        "redis-queue-waiting",
        `Waiting for the shared queue ${this.keyBase} to be seeded (nothing was ever queued under it)`,
      );
    } else if (this.#sawJob) {
      // A Redis restarted without its data: finishing now would call the job
      // done with its requests gone.
      live.error(
        new RedisRequestQueueError(
          `Cannot go on with the shared queue ${this.keyBase} as its job is gone from Redis (restarted without its data? run Redis with appendonly yes)`,
          "lost",
        ),
      );
      return false;
    }
    if (Number(taken) > 0) return true;
    if (
      this.#startDone && this.#heldCount === 0 && this.#pending === 0 && this.#leased === 0 &&
      this.#toEnqueue.length === 0 && this.#toAck.length === 0 && this.#toUnsend.length === 0 &&
      this.#toTry.length === 0 &&
      (!this.#awaitJob || Number(exists) === 1)
    ) {
      live.complete();
    }
    return false;
  }

  #startRenewing(): void {
    if (this.#renew !== undefined || this.#closed) return;
    const tick = (): void => {
      this.#renew = scheduleAfter(this.#scheduler, this.#renewEveryMs, tick);
      const ids: string[] = [];
      for (const list of this.#held.values()) for (const h of list) ids.push(h.id);
      if (ids.length === 0) return;
      this.#run("renew", [String(this.#leaseMs), ...ids]).then((lost) => {
        const n = (lost as readonly string[]).length;
        if (n === 0) return;
        this.#lost += n;
        this.#warn(
          "redis-queue-lease-lost",
          `${n} leases of the shared queue ${this.keyBase} expired before they were renewed (the requests may be fetched twice): raise 'leaseMs' (${this.#leaseMs} ms)`,
        );
      }, () => {
        // An outage: the I/O loop reports it; the leases are renewed next time.
      });
    };
    this.#renew = scheduleAfter(this.#scheduler, this.#renewEveryMs, tick);
  }

  #warn(code: string, message: string): void {
    this.#warnings$.next({ type: "warning", at: this.#scheduler.now(), code, message });
  }

  #emitStats(): void {
    if (this.#stats$.observed) this.#stats$.next(this.stats());
  }
}

// ---- helpers ----------------------------------------------------------------

/** 96 bits of the SHA-1 of a fingerprint, as 16 base64 characters: what Redis keeps per seen request. */
function compactFingerprint(fingerprint: string): string {
  return createHash("sha1").update(fingerprint).digest("base64").slice(0, 16);
}
