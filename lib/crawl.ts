/**
 * `crawl`: the feedback loop of a crawler in one call. Requests leave the
 * request queue when the throttler can take them, go through the gate
 * (`throttleByScope`) and `backoffOn`, and each final outcome may lead to new
 * requests (`discover`), which go back into the queue.
 *
 * @module
 */
import { isPromiseLike } from "./util/_is_promise_like.ts";
import { filter, identity, Observable, type OperatorFunction } from "rxjs";
import type { Outcome } from "./outcome.ts";
import type { DownloadContext } from "./download.ts";
import { InvalidRequestError, isLocalFailure } from "./http/download_errors.ts";
import type { CrawlQueue } from "./queue/crawl_queue.ts";
import type { Throttler } from "./throttler/throttler.ts";
import { type DownloadFn, throttleByScope } from "../operators/throttle_by_scope.ts";
import { backoffOn, type BackoffOnOptions } from "../operators/backoff_on.ts";
import { attemptsAllowed, resolveRetry } from "../operators/_retry.ts";

/** What `discover` may return: requests, now or later. */
export type Discovered<R> = Iterable<R> | PromiseLike<Iterable<R> | undefined> | undefined;

/** Options of {@link crawl}. */
export interface CrawlOptions<R, T> {
  /** The throttler of the gate. Create the queue with `view: throttler` so both agree. */
  readonly throttler: Throttler<R>;
  /**
   * The request queue: a `RequestQueue` (start requests, priorities, dedupe,
   * job directory) or a `RedisRequestQueue` (one job shared by many workers).
   */
  readonly queue: CrawlQueue<R>;
  /** Downloads one request (gets an AbortSignal, the attempt and the scopes). */
  readonly download: DownloadFn<R, T>;
  /**
   * The requests a final outcome leads to (the links of a page). They are
   * enqueued before the outcome's request is marked done, so a job directory
   * never records a page as done without its links. Requests the queue
   * refuses (a malformed URL) are counted in its `rejected` stat and skipped.
   * @default none: only the start requests are fetched
   */
  readonly discover?: (outcome: Outcome<R, T>) => Discovered<R>;
  /** Options of `backoffOn`, or `false` for no backoff and no retries. @default {} */
  readonly backoff?: BackoffOnOptions<R, T> | false;
}

/**
 * Runs a crawl: queue → `throttleByScope` → `backoffOn` → `discover` → queue.
 *
 * Emits every final outcome (after retries) and completes when the queue is
 * empty and nothing is in flight. An error outcome that was never sent (a
 * `LOCAL_FAILURE`: robots.txt or a shared store unreachable) is given back
 * with `queue.markUnsent`, not marked done, so a job directory keeps it. Unsubscribing stops everything: downloads
 * in flight are aborted and stay pending in the queue, so with a job
 * directory the crawl resumes from there (call `queue.close()` for a clean,
 * compacted stop). An error thrown by `discover`, or from the queue's start
 * requests, ends the crawl with that error.
 *
 * @param options The throttler, the queue, the download function, `discover`, backoff options.
 * @returns The outcomes, one per request.
 * @example Follow links on one site
 * ```ts
 * import { createThrottler } from "./throttler/throttler.ts";
 * import { RequestQueue } from "./queue/request_queue.ts";
 * import { extractLinks } from "./http/html_links.ts";
 * import { crawl } from "./crawl.ts";
 * // A site of two pages; a real crawl downloads them (createFetchDownload).
 * const site: Record<string, string> = {
 *   "https://example.com/": '<a href="/about">About</a>',
 *   "https://example.com/about": "<p>About us</p>",
 * };
 * const throttler = createThrottler({ downloadDelayMs: 100 });
 * const queue = new RequestQueue<string>({ view: throttler, start: ["https://example.com/"] });
 * crawl({
 *   throttler,
 *   queue,
 *   download: async (url) => site[url] ?? "",
 *   discover: (o) => o.kind === "response" ? extractLinks(o.response, o.request).links : [],
 * }).subscribe((o) => console.log(o.kind, o.request));
 * ```
 */
export function crawl<R, T>(options: CrawlOptions<R, T>): Observable<Outcome<R, T>> {
  const { throttler, queue, download, discover } = options;
  const backoff: OperatorFunction<Outcome<R, T>, Outcome<R, T>> = options.backoff === false
    ? identity
    : backoffOn(throttler, options.backoff ?? {});
  return new Observable<Outcome<R, T>>((subscriber) => {
    let closed = false;
    const enqueueAll = (requests: Iterable<R> | undefined): void => {
      if (requests === undefined) return;
      for (const r of requests) {
        try {
          queue.enqueue(r);
        } catch (error) {
          if (!(error instanceof InvalidRequestError)) throw error;
        }
      }
    };
    const fail = (error: unknown): void => {
      if (closed) return;
      closed = true;
      subscriber.error(error);
    };
    const finish = (outcome: Outcome<R, T>, found: Iterable<R> | undefined): void => {
      if (closed) return;
      try {
        enqueueAll(found);
        // Never sent (robots.txt or a shared store unreachable): not done,
        // so a job directory keeps it for a resume.
        if (outcome.kind === "error" && isLocalFailure(outcome.error)) {
          queue.markUnsent(outcome.request);
          return;
        }
        // After the children: the queue may complete, or record the
        // completion in its job directory, only once they are in.
        queue.markDone(outcome.request, {
          failed: outcome.kind === "error" || outcome.exhausted === true,
        });
      } catch (error) {
        fail(error);
      }
    };
    const before = queue.attemptsBefore?.bind(queue);
    const tried = queue.recordAttempt?.bind(queue);
    const gate = throttleByScope(
      throttler,
      tried === undefined ? download : (request: R, context: DownloadContext) => {
        tried(request, context.attempt);
        return download(request, context);
      },
      before === undefined ? {} : { firstAttempt: (r: R) => 1 + before(r) },
    );
    // A request others tried as often as retries allow (each take of a
    // shared queue whose worker died counts) is given up without another
    // attempt: one that kills every worker that downloads it would otherwise
    // be handed out forever.
    const allowed = attemptsAllowed(
      resolveRetry(throttler.settings, options.backoff === false ? false : options.backoff?.retry),
    );
    const source = before === undefined ? queue.requests$ : queue.requests$.pipe(
      filter((r) => {
        const attempt = 1 + before(r);
        if (!(attempt > allowed) || closed) return true;
        const outcome: Outcome<R, T> = {
          kind: "error",
          request: r,
          scopes: [],
          attempt,
          sentAt: Number.NaN,
          latencyMs: 0,
          exhausted: true,
          error: new AttemptsExhaustedError(attempt - 1),
        };
        subscriber.next(outcome);
        finish(outcome, undefined);
        return false;
      }),
    );
    const subscription = source.pipe(gate, backoff)
      .subscribe({
        next: (outcome) => {
          subscriber.next(outcome);
          if (closed || subscriber.closed) return;
          let found: Discovered<R>;
          try {
            found = discover?.(outcome);
          } catch (error) {
            fail(error);
            return;
          }
          if (isPromiseLike(found)) {
            found.then((f) => finish(outcome, f), fail);
          } else {
            finish(outcome, found);
          }
        },
        error: fail,
        complete: () => {
          if (closed) return;
          closed = true;
          subscriber.complete();
        },
      });
    return () => {
      closed = true;
      subscription.unsubscribe();
    };
  });
}

/**
 * A request that earlier attempts (by workers of a shared queue that died
 * holding it) used up its retries on: `crawl()` gives it up without another
 * attempt, as an `exhausted` error outcome.
 */
export class AttemptsExhaustedError extends Error {
  override readonly name = "AttemptsExhaustedError";
  /** Attempts made before this one would have been. */
  readonly attempts: number;

  constructor(attempts: number) {
    super(`Given up: ${attempts} attempts were made before (retries used up)`);
    this.attempts = attempts;
  }
}
