/**
 * `sharedDownload`: a download function that first takes a cluster-wide lease
 * for the request's scopes from a {@link RedisScopes} store, so that several
 * processes with their own throttlers keep one set of limits per scope.
 *
 * @module
 */
import { Observable, type ObservableInput, type SchedulerLike } from "rxjs";
import type { DownloadContext, DownloadFn } from "../download.ts";
import type { Throttler } from "../throttler/throttler.ts";
import {
  type RedisScopes,
  type RedisScopesError,
  type ScopeLease,
  warnOnThrottler,
} from "./redis_scopes.ts";
import { SharedDownloads, SharedRequest } from "./_shared_request.ts";
/** What the wrapped download is given: the gate's context and the cluster lease it holds. */
export interface SharedDownloadContext extends DownloadContext {
  /**
   * The lease: its own grant, or one kept from a request of the same scopes
   * that answered in the same turn (`reuseLeases`: the same id and
   * `grantedAt`).
   */
  readonly lease: ScopeLease;
}

/** Options of {@link sharedDownload}. */
export interface SharedDownloadOptions {
  /**
   * Longest wait for Redis to answer, in ms: for a lease, counted from the
   * request's first ask and across the asks a client's own command time-out
   * made it repeat (a slow Redis is a wait); past it the download fails with
   * a `RedisScopesError` (a client that queues commands while Redis is down
   * would otherwise hold the request for ever).
   * @default 10000
   */
  readonly timeoutMs?: number;
  /**
   * Longest wait before asking again while a scope is full, in ms (a release
   * anywhere in the cluster wakes the waiting requests sooner).
   * @default 250
   */
  readonly pollMs?: number;
  /**
   * Told of Redis failures that cannot fail a download any more (a release or
   * a renewal after the download settled).
   * @default a `warning` event on the throttler (code `redis-scopes`), once per message
   */
  readonly onError?: (error: RedisScopesError) => void;
  /** Clock and timers of the waits. @default the throttler's scheduler */
  readonly scheduler?: SchedulerLike;
  /**
   * How many requests in a row a lease may serve after the one it was
   * granted to: a lease given back in the event-loop turn in which a request
   * of the same scopes asks for one is kept for that request (no release, no
   * acquire, no hand-over to another process), where no scope of it has a
   * delay, a hold or a quota and the request no quota amount (a lease a
   * renewal found expired is never kept). Other processes waiting for the
   * scope get its slot at the end of such a run: turns between processes are
   * up to this many requests long. 0 gives every lease back.
   * @default 8
   */
  readonly reuseLeases?: number;
}

/**
 * Wrap a download so that each request also waits for a cluster-wide lease
 * in all its scopes (concurrency and delay across processes), taken with the
 * limits the local throttler has for each scope at that moment (so backoff
 * and rampup, reckoned locally, are enforced cluster-wide). The lease is
 * renewed while the download runs and given back when it settles, fails, or
 * the pipeline is unsubscribed. A Redis failure becomes an error outcome with
 * a {@link RedisScopesError}; the pipeline goes on.
 *
 * Requests with the same scopes wait in line in this process and only the
 * first asks Redis (a release wakes one asker, not every waiting request);
 * processes competing for a scope take turns (docs/REDIS.md, "Turns"). An
 * outcome is emitted before its lease is released, so a hold it brings
 * (published at once by `shareBackoff`) is in Redis before the slot frees.
 *
 * @param scopes The shared store.
 * @param throttler The throttler the gate uses (its limits are the ones enforced).
 * @param download The real download (any `DownloadFn`; it is also given the lease).
 * @param options Time-out, polling, error reporting, scheduler.
 * @returns A download function for `throttleByScope(throttler, ...)`.
 * @throws {RangeError} for a bad option, naming it.
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import { createThrottler } from "../throttler/throttler.ts";
 * import { throttleByScope } from "../../operators/throttle_by_scope.ts";
 * import { createRedisScopes } from "./redis_scopes.ts";
 * import { sharedDownload } from "./shared_download.ts";
 * const client = await createClient({ url: "redis://127.0.0.1:6390" }).connect();
 * const shared = await createRedisScopes(client, { prefix: "crawl-42:" });
 * const throttler = createThrottler<string>({ concurrentRequestsPerDomain: 2 });
 * const gate = throttleByScope(
 *   throttler,
 *   sharedDownload(shared, throttler, (url: string, ctx) => fetch(url, { signal: ctx.signal })),
 * );
 * ```
 */
export function sharedDownload<R, T>(
  scopes: RedisScopes,
  throttler: Throttler<R>,
  download: (request: R, context: SharedDownloadContext) => PromiseLike<T> | ObservableInput<T>,
  options: SharedDownloadOptions = {},
): DownloadFn<R, T> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const pollMs = options.pollMs ?? 250;
  const reuseLeases = options.reuseLeases ?? 8;
  if (!(Number.isInteger(reuseLeases) && reuseLeases >= 0)) {
    throw new RangeError(
      `Cannot create shared download as 'reuseLeases' must be an integer >= 0: current value is ${reuseLeases}`,
    );
  }
  for (const [name, value] of [["timeoutMs", timeoutMs], ["pollMs", pollMs]] as const) {
    if (!(typeof value === "number" && value > 0 && value < Infinity)) {
      throw new RangeError(
        `Cannot create shared download as '${name}' must be a finite number > 0: current value is ${value}`,
      );
    }
  }
  const shared = new SharedDownloads<R, T>(
    scopes,
    throttler,
    download,
    timeoutMs,
    pollMs,
    options.scheduler ?? throttler.scheduler,
    options.onError ?? warnOnThrottler(throttler),
    reuseLeases,
  );
  return (request: R, context: DownloadContext) =>
    new Observable<T>((subscriber) => {
      const one = new SharedRequest(shared, request, context, subscriber);
      return () => one.teardown();
    });
}
