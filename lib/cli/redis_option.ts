/**
 * `politely crawl --redis URL`: the connection to Redis and the shared scope
 * store behind it, opened before the crawl and closed after it. The `redis`
 * package (node-redis) is an optional peer dependency, so it is imported
 * only here, only when `--redis` is given.
 *
 * @module
 */
import { asyncScheduler, firstValueFrom, from, of, race, type SchedulerLike, timer } from "rxjs";
import { catchError, map } from "rxjs/operators";
import {
  createRedisScopes,
  type RedisScopes,
  type RedisScopesClient,
} from "../redis/redis_scopes.ts";
import { maskRedisUrl, type RedisArgs } from "./args.ts";
import { firstLine } from "./_first_line.ts";

/** `--redis` could not be used (the package is missing, Redis cannot be reached): one line for the user. */
export class RedisOptionError extends Error {
  override readonly name = "RedisOptionError";
}

/** The part of a node-redis client the command line uses (beside what the store uses). */
interface CliRedisClient extends RedisScopesClient {
  connect(): Promise<unknown>;
  on(event: "error", listener: (error: Error) => void): unknown;
  close(): Promise<void>;
  destroy(): void;
  readonly isReady: boolean;
}

/** What `import("redis")` gives the command line. */
export interface RedisModule {
  createClient(options: {
    url: string;
    socket: {
      connectTimeout: number;
      reconnectStrategy: (retries: number, cause: Error) => number | false;
    };
  }): unknown;
}

/** Options of {@link openRedisOption}. */
export interface OpenRedisOptionOptions {
  /** Loads the `redis` package. @default `() => import("redis")` */
  readonly importRedis?: () => Promise<RedisModule>;
  /** Told of connection errors once the store is open (once per distinct message). */
  readonly onError?: (message: string) => void;
  /** Longest wait for a TCP connection to Redis, in ms. @default 2000 */
  readonly connectTimeoutMs?: number;
  /** Longest wait at close for Redis to answer pending commands (releases), in ms. @default 2000 */
  readonly closeTimeoutMs?: number;
  /** Clock of the close time-out. @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
  /** Receive the other processes' messages (a second connection): not needed to read a job's status. @default true */
  readonly subscribe?: boolean;
}

/** An open `--redis`: the shared store and the connection under it. */
export interface RedisOption {
  /** The store the crawl shares its scope limits through. */
  readonly scopes: RedisScopes;
  /** The connection itself (the shared request queue and `politely status` use it). */
  readonly client: RedisScopesClient;
  /** The URL as it may be shown (password masked). */
  readonly where: string;
  /**
   * Close the store and the connection: pending commands (releases) are
   * waited for up to `closeTimeoutMs`, then the connection is cut. Never
   * rejects; idempotent.
   */
  close(): Promise<void>;
}

/**
 * Connect to the Redis of `--redis` and open the shared scope store on
 * `--redis-prefix`. A Redis that cannot be reached at start is an error (no
 * retrying: the user is told at once); once open, the connection reconnects
 * by itself (with a growing pause, at most 2 s), and the commands that fail
 * meanwhile become error outcomes of their requests (see `sharedDownload`).
 *
 * @param args The parsed `--redis` and `--redis-prefix`.
 * @param options Package loader, error reporting, time-outs.
 * @returns The open store and its `close`.
 * @throws {RedisOptionError} (as a rejection) when the `redis` package is
 *   missing (the message says `npm install redis`) or Redis cannot be reached
 *   or used (the message names `--redis` and the URL).
 * @example
 * ```ts
 * import { openRedisOption } from "./redis_option.ts";
 * const redis = await openRedisOption({ url: "redis://127.0.0.1:6390", prefix: "politely:" });
 * // ... runCrawl({ ..., shared: redis.scopes }) ...
 * await redis.close();
 * ```
 */
export async function openRedisOption(
  args: Pick<RedisArgs, "url" | "prefix"> & { readonly leaseMs?: number },
  options: OpenRedisOptionOptions = {},
): Promise<RedisOption> {
  const where = maskRedisUrl(args.url);
  let module: RedisModule;
  try {
    module = await (options.importRedis ?? (() => import("redis") as Promise<RedisModule>))();
  } catch (error) {
    throw new RedisOptionError(
      `--redis needs the 'redis' package: npm install redis (${firstLine(error)})`,
      { cause: error },
    );
  }
  let open = false;
  const client = module.createClient({
    url: args.url,
    socket: {
      connectTimeout: options.connectTimeoutMs ?? 2000,
      // Not at start (the user hears at once); later, reconnect with a growing pause.
      reconnectStrategy: (retries) => open ? Math.min(2000, 50 * 2 ** retries) : false,
    },
  }) as CliRedisClient;
  const seen = new Set<string>();
  // node-redis crashes the process on an 'error' event nobody listens to.
  client.on("error", (error) => {
    if (!open) return; // the failed start is reported as the rejection below
    const message = firstLine(error);
    if (seen.has(message)) return;
    seen.add(message);
    options.onError?.(message);
  });
  let scopes: RedisScopes;
  try {
    await client.connect();
    scopes = await createRedisScopes(client, {
      prefix: args.prefix,
      ...(args.leaseMs !== undefined ? { leaseMs: args.leaseMs } : {}),
      ...(options.subscribe === false ? { subscribe: false } : {}),
    });
  } catch (error) {
    client.destroy();
    throw new RedisOptionError(
      `--redis ${where}: cannot connect to Redis: ${firstLine(error)}`,
      { cause: error },
    );
  }
  open = true;
  const scheduler = options.scheduler ?? asyncScheduler;
  const closeTimeoutMs = options.closeTimeoutMs ?? 2000;
  let closing: Promise<void> | undefined;
  const close = async () => {
    open = false;
    // `close` waits for every pending command: bounded, then cut. `race`
    // drops the loser, so no timer is left to hold the process.
    const bounded = (done: Promise<unknown>) =>
      firstValueFrom(race(
        from(done).pipe(map(() => true), catchError(() => of(false))),
        timer(closeTimeoutMs, scheduler).pipe(map(() => false)),
      ));
    await bounded(scopes.close());
    if (!client.isReady || !(await bounded(client.close()))) client.destroy();
  };
  return {
    scopes,
    client,
    where,
    close: () => closing ??= close(),
  };
}
