/**
 * The real Redis of the Redis-shared tests (127.0.0.1:$REDIS_PORT, 6390 by
 * default): a connection that fails with a message saying how to get Redis
 * (never a skip: a test skipped for want of Redis is a defect), stores
 * ("processes") on a fresh random prefix, and the clean-ups of both.
 *
 * @module
 */
import process from "node:process";
import { createClient } from "redis";
import {
  createRedisScopes,
  type RedisScopes,
  type RedisScopesOptions,
} from "../../lib/redis/redis_scopes.ts";

/** The port of the Redis the tests use. */
export const REDIS_PORT: number = Number(process.env.REDIS_PORT ?? 6390);

function newClient() {
  return createClient({
    socket: { host: "127.0.0.1", port: REDIS_PORT, reconnectStrategy: false, connectTimeout: 2000 },
  });
}

/** A node-redis client as the tests make it. */
export type RedisClient = ReturnType<typeof newClient>;

/** Clean-ups of the running test, run last first by {@link runCleanups}. */
const cleanups: (() => unknown)[] = [];

/** Run `fn` when the test ends (in `afterEach(runCleanups)`), before what was added earlier. */
export function onCleanup(fn: () => unknown): void {
  cleanups.push(fn);
}

/** Run and forget the clean-ups, last added first; one that fails (already closed) does not stop the others. */
export async function runCleanups(): Promise<void> {
  while (cleanups.length > 0) {
    try {
      await cleanups.pop()!();
    } catch { /* already closed */ }
  }
}

/** A connected client (closed at clean-up), or a failure that says how to get Redis. */
export async function connectRedis(): Promise<RedisClient> {
  const client = newClient();
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    throw new Error(
      `Redis is not reachable on 127.0.0.1:${REDIS_PORT} (these tests need a real one: ` +
        `redis-server --port ${REDIS_PORT} --bind 127.0.0.1 --daemonize yes, or set REDIS_PORT): ${error}`,
    );
  }
  onCleanup(() => client.isOpen && client.close());
  return client;
}

/** One "process": its own client and store. */
export interface RedisProcess {
  readonly client: RedisClient;
  readonly store: RedisScopes;
}

/**
 * `n` processes (client and store each, ids `p0`, `p1`, ...) on one fresh
 * random prefix; at clean-up the stores and clients close and the prefix's
 * keys are deleted.
 */
export async function redisProcesses(
  n: number,
  options: Omit<RedisScopesOptions, "prefix" | "processId"> = {},
): Promise<RedisProcess[]> {
  const prefix = `test:${crypto.randomUUID()}:`;
  const admin = await connectRedis();
  // Runs after the stores and clients below closed (clean-ups run last first).
  onCleanup(async () => {
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(keys);
  });
  const out: RedisProcess[] = [];
  for (let i = 0; i < n; i++) {
    const client = await connectRedis();
    const store = await createRedisScopes(client, { prefix, processId: `p${i}`, ...options });
    onCleanup(() => store.close());
    out.push({ client, store });
  }
  return out;
}

/** A real-time pause, for real I/O (pub/sub, Redis's clock) only. */
export const sleep = (ms: number): Promise<void> =>
  new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Poll a condition (real I/O) every 5 ms until it holds, or fail naming it after 3 s. */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await check()) return;
    await sleep(5);
  }
  throw new Error(`timed out waiting for ${what}`);
}
