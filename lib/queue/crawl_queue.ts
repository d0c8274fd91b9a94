/**
 * `CrawlQueue`: what {@link crawl} needs of a request queue. The in-process
 * `RequestQueue` and the Redis-backed `RedisRequestQueue` both fit it, so a
 * crawl runs the same on one process or on many sharing one job.
 *
 * @module
 */
import type { Observable } from "rxjs";

/** How a request ended, as told to {@link CrawlQueue.markDone}. */
export interface CrawlQueueDone {
  /** The request ended in an error or an exhausted retry (counted as failed, not done). */
  readonly failed: boolean;
}

/**
 * The request queue of a crawl: requests come out of `requests$` when they
 * may be sent, requests found go in with `enqueue`, and every request that
 * came out is ended once, with `markDone` or `markUnsent`.
 *
 * @example A queue that is a plain array
 * ```ts
 * import { from } from "rxjs";
 * import type { CrawlQueue } from "./crawl_queue.ts";
 * const urls = ["https://a.example/"];
 * const queue: CrawlQueue<string> = {
 *   requests$: from(urls),
 *   enqueue: (url) => urls.push(url),
 *   markDone: () => {},
 *   markUnsent: () => {},
 * };
 * ```
 */
export interface CrawlQueue<R> {
  /**
   * The requests, in the order they may be sent; completes when nothing is
   * left to send and nothing is in flight.
   */
  readonly requests$: Observable<R>;
  /**
   * Adds a request found by the crawl (a link), unless it is a duplicate.
   *
   * @throws {InvalidRequestError} When the request cannot be queued (no URL,
   *   bad scopes); the crawl skips it.
   */
  enqueue(request: R): unknown;
  /**
   * The request that came out of `requests$` is finished. Called after the
   * requests it led to were enqueued.
   */
  markDone(request: R, done?: CrawlQueueDone): void;
  /** The request that came out of `requests$` was never sent (a local failure): it stays to be sent later. */
  markUnsent(request: R): void;
  /**
   * How many attempts others made at a request that came out of `requests$`
   * (a shared queue hands a request out again when a worker's lease expired):
   * the crawl counts its retries from there, so a request that keeps killing
   * workers still runs out of them. Without it, every request starts at
   * attempt 1.
   */
  attemptsBefore?(request: R): number;
  /**
   * The crawl is about to make attempt `attempt` at a request that came out
   * of `requests$` (every attempt, retries included): a shared queue counts
   * the retries it makes within one take, so the next worker that takes the
   * request after this one died counts them too.
   */
  recordAttempt?(request: R, attempt: number): void;
}
