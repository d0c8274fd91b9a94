/**
 * `sharedDownload`: a download function that first takes a cluster-wide lease
 * for the request's scopes from a {@link RedisScopes} store, so that several
 * processes with their own throttlers keep one set of limits per scope.
 *
 * @module
 */
import {
  from,
  merge,
  Observable,
  type ObservableInput,
  type SchedulerLike,
  Subscription,
  timer,
} from "rxjs";
import { filter, take } from "rxjs/operators";
import type { DownloadContext, DownloadFn } from "../download.ts";
import type { Throttler } from "../throttler/throttler.ts";
import type { RequestScopes } from "../scopes/scopes.ts";
import { timerDelay } from "../util/_timer.ts";
import {
  type AcquireResult,
  type RedisScopes,
  RedisScopesError,
  type ScopeLease,
  type ScopeLimits,
  warnOnThrottler,
} from "./redis_scopes.ts";

/** A request waiting in its line: asked to ask Redis when its turn comes, or failed with the line. */
interface LineMember {
  ask(): void;
  fail(error: unknown): void;
}

/**
 * How long past its wait (`pollMs` at most when a scope is full) this process
 * keeps its place in a scope's queue in Redis: room for a round trip and a
 * busy event loop.
 */
const PATIENCE_MARGIN_MS = 2_000;

/** What the wrapped download is given: the gate's context and the cluster lease it holds. */
export interface SharedDownloadContext extends DownloadContext {
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
  for (const [name, value] of [["timeoutMs", timeoutMs], ["pollMs", pollMs]] as const) {
    if (!(typeof value === "number" && value > 0 && value < Infinity)) {
      throw new RangeError(
        `Cannot create shared download as '${name}' must be a finite number > 0: current value is ${value}`,
      );
    }
  }
  const scheduler = options.scheduler ?? throttler.scheduler;
  const onError = options.onError ?? warnOnThrottler(throttler);

  /** Resolve a Redis call, or fail with a RedisScopesError after `limitMs` (of `timeoutMs` in all). */
  const bounded = <V>(
    call: () => Promise<V>,
    operation: RedisScopesError["operation"],
    names: readonly string[],
    late: (value: V) => void,
    limitMs: number = timeoutMs,
  ): Observable<V> =>
    new Observable<V>((subscriber) => {
      let answer: Promise<V>;
      try {
        answer = call();
      } catch (error) {
        // A client may throw at once (closed, bad arguments): that too is a
        // failed call of this operation, not a crash of the pipeline.
        subscriber.error(RedisScopesError.from(operation, names, error));
        return;
      }
      let done = false;
      const t = scheduler.schedule(() => {
        done = true;
        subscriber.error(
          new RedisScopesError(
            `Cannot ${operation} for scopes ${
              names.join(", ")
            } as Redis did not answer within ${timeoutMs}ms`,
            operation,
            names,
          ),
        );
      }, Math.max(0, limitMs));
      answer.then(
        (value) => {
          t.unsubscribe();
          // A grant that comes after a time-out or an unsubscribe must still
          // be given back, or its slot stays taken until the lease expires.
          if (done || subscriber.closed) return late(value);
          done = true;
          subscriber.next(value);
          subscriber.complete();
        },
        (error) => {
          t.unsubscribe();
          if (done || subscriber.closed) return;
          done = true;
          subscriber.error(RedisScopesError.from(operation, names, error));
        },
      );
      return () => t.unsubscribe();
    });

  const limitsOf = (
    names: readonly string[],
    amounts: readonly (number | undefined)[] | undefined,
  ): ScopeLimits[] =>
    names.map((scope, i) => {
      const state = throttler.state(scope);
      const base = state ?? throttler.scopeConfig(scope);
      const limits = { concurrency: Math.max(1, base.concurrency), delayMs: base.delayMs };
      const amount = amounts?.[i];
      if (amount === undefined || !(amount > 0)) return limits;
      // The configured quota, as the gate checks it locally: Redis counts
      // every process's amounts in one window.
      const { quota, windowMs } = throttler.scopeConfig(scope);
      return quota === undefined
        ? limits
        : { ...limits, quota: { limit: quota, windowMs, amount } };
    });

  /**
   * A request's quota amounts, index for index with `names`, when one of its
   * scopes has a configured quota (`undefined` otherwise, or when its scopes
   * cannot be worked out again: the gate already did, so that is not for here
   * to fail on). The context carries only the names; the throttler resolves
   * the amounts as the gate did.
   */
  const amountsOf = (
    request: R,
    names: readonly string[],
  ):
    | (readonly (number | undefined)[] | undefined)
    | PromiseLike<
      readonly (number | undefined)[] | undefined
    > => {
    if (!names.some((scope) => throttler.scopeConfig(scope).quota !== undefined)) return undefined;
    const align = (resolved: RequestScopes) => {
      const given = resolved.amounts;
      if (given === undefined) return undefined;
      return names.map((scope) => {
        const i = resolved.names.indexOf(scope);
        return i < 0 ? undefined : given[i];
      });
    };
    try {
      const resolved = throttler.resolveScopes(request);
      return resolved instanceof Promise ? resolved.then(align, () => undefined) : align(resolved);
    } catch {
      return undefined;
    }
  };

  // One request per scope set asks Redis at a time; the others of the set
  // wait here in order (a release wakes one asker per process, not every
  // waiting request: no thundering herd). The asker hands over when granted,
  // or when it goes.
  const lines = new Map<string, Set<LineMember>>();

  // Redis calls of one turn go out together at its end, releases before
  // acquires: a release made after the outcome was emitted still reaches
  // Redis before the acquire of the request that outcome let start, and
  // after the hold the outcome brought (shareBackoff publishes a hold at
  // once, while the outcome is emitted).
  let outbox: { releases: (() => void)[]; acquires: (() => void)[] } | undefined;
  const flush = () => {
    const out = outbox!;
    outbox = undefined;
    for (const send of out.releases) send();
    for (const send of out.acquires) send();
  };
  const post = (kind: "releases" | "acquires", send: () => void) => {
    if (outbox === undefined) {
      outbox = { releases: [], acquires: [] };
      queueMicrotask(flush);
    }
    outbox[kind].push(send);
  };
  const releaseLater = (held: ScopeLease, names: readonly string[]) =>
    post("releases", () => {
      let released: Promise<void>;
      try {
        released = scopes.release(held);
      } catch (error) {
        onError(RedisScopesError.from("release", names, error));
        return;
      }
      released.catch((error) => onError(RedisScopesError.from("release", names, error)));
    });
  const patienceMs = pollMs + PATIENCE_MARGIN_MS;

  return (request: R, context: DownloadContext) =>
    new Observable<T>((subscriber) => {
      const names = context.scopes;
      const key = JSON.stringify(names);
      /** The request's quota amounts (see `amountsOf`). */
      let amounts: readonly (number | undefined)[] | undefined;
      /** This request's place while it waits in its line (not asking yet). */
      let member: LineMember | undefined;
      /** This request is its line's asker. */
      let asking = false;
      let lease: ScopeLease | undefined;
      let closed = false;
      let step: Subscription | undefined;
      let renewal: Subscription | undefined;
      let inner: Subscription | undefined;

      const giveBack = () => {
        renewal?.unsubscribe();
        const held = lease;
        lease = undefined;
        if (held === undefined) return;
        releaseLater(held, names);
      };

      /** Hand the asking to the next of the line, or close the line. */
      const passOn = () => {
        if (!asking) return;
        asking = false;
        const line = lines.get(key);
        if (line === undefined) return;
        const next = line.values().next();
        if (next.done === true) {
          lines.delete(key);
          return;
        }
        line.delete(next.value);
        next.value.ask();
      };

      /** Redis failed this line's asker: the requests waiting behind it fail with it. */
      const failLine = (error: unknown) => {
        if (!asking) return;
        asking = false;
        const line = lines.get(key);
        lines.delete(key);
        for (const waiting of [...(line ?? [])]) waiting.fail(error);
      };

      const join = () => {
        const line = lines.get(key);
        if (line === undefined) {
          lines.set(key, new Set());
          asking = true;
          attempt();
          return;
        }
        member = {
          ask: () => {
            member = undefined;
            asking = true;
            attempt();
          },
          fail: (error) => {
            member = undefined;
            subscriber.error(error);
          },
        };
        line.add(member);
      };

      /** When this request first asked (its time-out counts from there). */
      let askedAt: number | undefined;
      /** The last failure of a lost connection, told if the wait ends without Redis. */
      let lastLost: RedisScopesError | undefined;

      const attempt = () => {
        let gone = false;
        askedAt ??= scheduler.now();
        const leftMs = timeoutMs - (scheduler.now() - askedAt);
        step = bounded(
          () =>
            new Promise<AcquireResult>((resolve, reject) =>
              post("acquires", () => {
                if (gone) return; // unsubscribed before it went out: nothing to ask
                try {
                  scopes.acquire(names, limitsOf(names, amounts), { patienceMs }).then(
                    resolve,
                    reject,
                  );
                } catch (error) {
                  reject(error);
                }
              })
            ),
          "acquire",
          names,
          (late) => {
            if (late.ok) releaseLater(late.lease, names);
          },
          leftMs,
        ).subscribe({
          next: (result: AcquireResult) => {
            if (result.ok) {
              lease = result.lease;
              passOn();
              start();
              return;
            }
            // Wait out the delay or hold; when a scope is full, until a release
            // anywhere, the soonest lease expiry, or `pollMs`.
            let waitMs = result.waitMs;
            if (result.full) {
              waitMs = Math.max(waitMs, Math.min(pollMs, result.expiresInMs ?? pollMs));
            }
            // A hold past what a timer holds (an uncapped delayScope) wakes
            // early and asks again, instead of overflowing into a busy loop.
            waitMs = timerDelay(waitMs);
            const wake = result.full
              ? merge(
                timer(waitMs, scheduler),
                scopes.released$.pipe(
                  filter((released) => released.some((s) => names.includes(s))),
                ),
              )
              : timer(waitMs, scheduler);
            step = wake.pipe(take(1)).subscribe(() => attempt());
          },
          error: (error: RedisScopesError) => {
            const leftMs = timeoutMs - (scheduler.now() - (askedAt ?? scheduler.now()));
            const timedOut = isClientTimeout(error.cause);
            if ((timedOut || isConnectionLost(error.cause)) && leftMs > 0) {
              // The client gave up on the call, Redis may not have: a slow
              // Redis is a wait. (The store gives back a grant it may have
              // made.) A connection lost is one too: the client reconnects
              // (a restart, a failover). Ask again once Redis has had a
              // moment, within the bound.
              onError(
                new RedisScopesError(
                  `Cannot acquire for scopes ${names.join(", ")} as ${
                    timedOut ? "the Redis client timed out" : "the connection to Redis was lost"
                  }: asking again (a request waits up to ${timeoutMs}ms)`,
                  "acquire",
                  names,
                  { cause: error },
                ),
              );
              if (!timedOut) lastLost = error;
              step = timer(Math.min(pollMs, leftMs), scheduler).subscribe(() => attempt());
              return;
            }
            // The budget spent while the connection was down: say why.
            const final = lastLost !== undefined && error.cause === undefined
              ? new RedisScopesError(
                `Cannot acquire for scopes ${
                  names.join(", ")
                } as Redis stayed unreachable for ${timeoutMs}ms (${
                  lastLost.message.replace(/^Cannot acquire for scopes .*? as /, "")
                })`,
                "acquire",
                names,
                { cause: lastLost },
              )
              : error;
            failLine(final);
            subscriber.error(final);
          },
        });
        step.add(() => gone = true);
      };

      const start = () => {
        if (closed) return giveBack(); // unsubscribed while the grant was on its way
        const every = Math.max(1, scopes.leaseMs / 3);
        renewal = timer(every, every, scheduler).subscribe(() => {
          const held = lease;
          if (held === undefined) return;
          scopes.renew(held).then(
            (renewed) => {
              if (renewed || lease !== held) return;
              // Expired (a stall longer than leaseMs): its slots may already
              // be someone else's. The download goes on; say so once.
              renewal?.unsubscribe();
              onError(
                new RedisScopesError(
                  `Cannot renew for scopes ${
                    names.join(", ")
                  } as the lease had expired: the scopes' limits may be exceeded until this download ends`,
                  "renew",
                  names,
                ),
              );
            },
            (error) => onError(RedisScopesError.from("renew", names, error)),
          );
        });
        let input: Observable<T>;
        try {
          const shared: SharedDownloadContext = {
            signal: context.signal,
            attempt: context.attempt,
            scopes: names,
            lease: lease!,
            // The local scopes' spacing (the shared one is timed in Redis).
            ...(context.wentOut !== undefined ? { wentOut: () => context.wentOut!() } : {}),
          };
          input = from(download(request, shared));
        } catch (error) {
          giveBack();
          subscriber.error(error);
          return;
        }
        // Held before subscribing: a download that answers synchronously ends
        // this request (and runs the teardown) before `subscribe` returns.
        const innerHolder = new Subscription();
        inner = innerHolder;
        innerHolder.add(input.subscribe({
          // The outcome first, then the release: a hold the outcome brings is
          // published (by shareBackoff) while it is emitted, so it reaches
          // Redis before the slot frees. The release still goes out before
          // the acquire of the request the outcome let start (see `post`).
          next: (value) => {
            subscriber.next(value);
            giveBack();
            subscriber.complete();
          },
          error: (error) => {
            subscriber.error(error);
            giveBack();
          },
          complete: () => {
            giveBack();
            subscriber.complete();
          },
        }));
      };

      const found = amountsOf(request, names);
      if (found !== undefined && typeof (found as PromiseLike<unknown>).then === "function") {
        // Scopes that resolve later (a per-IP scope): join the line once known.
        (found as PromiseLike<readonly (number | undefined)[] | undefined>).then((a) => {
          if (closed) return;
          amounts = a;
          join();
        });
      } else {
        amounts = found as readonly (number | undefined)[] | undefined;
        join();
      }
      return () => {
        closed = true;
        if (member !== undefined) lines.get(key)?.delete(member);
        member = undefined;
        passOn();
        step?.unsubscribe();
        inner?.unsubscribe();
        giveBack();
      };
    });
}

/**
 * A client's own command time-out (node-redis's `TimeoutError`, which has no
 * message, or an error that says it timed out): the command may still have
 * run in Redis.
 */
/**
 * Whether a Redis client's error says the connection went away (it
 * reconnects by itself), as node-redis and ioredis word it; not a client
 * closed on purpose.
 */
function isConnectionLost(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.constructor.name === "ClientClosedError") return false;
  return /^(?:SocketClosedUnexpectedlyError|ClientOfflineError|ConnectionTimeoutError|DisconnectsClientError)$/
    .test(error.constructor.name) ||
    /\b(?:ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH)\b|socket closed|connection is closed|client is offline/i
      .test(`${(error as { code?: unknown }).code ?? ""} ${error.message}`);
}

function isClientTimeout(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return error.name === "TimeoutError" || error.constructor.name === "TimeoutError" ||
    /\btime(?:d)?[ -]?out\b/i.test(error.message);
}
