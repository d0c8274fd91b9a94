/**
 * `createRedisScopes` against the real Redis on 127.0.0.1:$REDIS_PORT (6390
 * by default). Each test works under a fresh random key prefix; two or three
 * stores on one prefix stand for as many processes.
 */
import { afterEach, describe, expect, it } from "vitest";
import process from "node:process";
import { createClient } from "redis";
import {
  createRedisScopes,
  type RedisScopes,
  RedisScopesError,
  type SharedMessage,
} from "../lib/redis_scopes.ts";

const PORT = Number(process.env.REDIS_PORT ?? 6390);

function newClient() {
  return createClient({
    socket: { host: "127.0.0.1", port: PORT, reconnectStrategy: false, connectTimeout: 2000 },
  });
}
type Client = ReturnType<typeof newClient>;

/** A connected client, or a failure that says how to get Redis. */
async function connect(): Promise<Client> {
  const client = newClient();
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    throw new Error(
      `Redis is not reachable on 127.0.0.1:${PORT} (these tests need a real one: ` +
        `redis-server --port ${PORT} --bind 127.0.0.1 --daemonize yes, or set REDIS_PORT): ${error}`,
    );
  }
  return client;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!().catch(() => {});
});

/** `n` stores (processes) on one fresh prefix, each with its own client. */
async function cluster(
  n: number,
  options: { leaseMs?: number; idleTtlMs?: number } = {},
): Promise<{ stores: RedisScopes[]; client: Client; prefix: string }> {
  const prefix = `test:${crypto.randomUUID()}:`;
  const stores: RedisScopes[] = [];
  let first: Client | undefined;
  for (let i = 0; i < n; i++) {
    const client = await connect();
    first ??= client;
    cleanups.push(() => client.close());
    const store = await createRedisScopes(client, { prefix, processId: `p${i}`, ...options });
    cleanups.push(() => store.close());
    stores.push(store);
  }
  cleanups.push(async () => {
    const keys = await first!.keys(`${prefix}*`);
    if (keys.length > 0) await first!.del(keys);
  });
  return { stores, client: first!, prefix };
}

describe("createRedisScopes()", () => {
  it("createRedisScopes() grants no more leases across processes than the scope's concurrency", async () => {
    const { stores: [a, b, c] } = await cluster(3);
    const limits = [{ concurrency: 2, delayMs: 0 }];
    const first = await a!.acquire(["s"], limits);
    const second = await b!.acquire(["s"], limits);
    const third = await c!.acquire(["s"], limits);
    expect(first.ok && second.ok).toBe(true);
    expect(third).toMatchObject({ ok: false, full: true });
    if (!first.ok) throw new Error("unreachable");
    await a!.release(first.lease);
    expect((await c!.acquire(["s"], limits)).ok).toBe(true);
  });

  it("createRedisScopes() grants sends at least delayMs apart on the server's clock", async () => {
    const { stores } = await cluster(2);
    const delayMs = 30;
    const granted: number[] = [];
    await Promise.all(stores.map(async (store) => {
      while (granted.length < 8) {
        const got = await store.acquire(["d"], [{ concurrency: 10, delayMs }]);
        if (got.ok) {
          granted.push(got.lease.grantedAt);
          await store.release(got.lease);
        } else {
          await sleep(Math.max(1, got.waitMs));
        }
      }
    }));
    granted.sort((x, y) => x - y);
    for (let i = 1; i < granted.length; i++) {
      // The script compares times with microseconds; a millisecond of rounding allowed.
      expect(granted[i]! - granted[i - 1]!).toBeGreaterThanOrEqual(delayMs - 1);
    }
  });

  it("createRedisScopes() answers how long the delay has left", async () => {
    const { stores: [a, b] } = await cluster(2);
    expect((await a!.acquire(["w"], [{ concurrency: 5, delayMs: 10_000 }])).ok).toBe(true);
    const next = await b!.acquire(["w"], [{ concurrency: 5, delayMs: 0 }]);
    // The first sender's delay binds the second, whatever its own.
    expect(next.ok).toBe(false);
    if (next.ok) throw new Error("unreachable");
    expect(next.full).toBe(false);
    expect(next.waitMs).toBeGreaterThan(9_000);
    expect(next.waitMs).toBeLessThanOrEqual(10_000);
  });

  it("createRedisScopes() frees the slot of a crashed process when its lease expires", async () => {
    const { stores: [a, b] } = await cluster(2, { leaseMs: 150 });
    const limits = [{ concurrency: 1, delayMs: 0 }];
    expect((await a!.acquire(["c"], limits)).ok).toBe(true); // never released: a crash
    const blocked = await b!.acquire(["c"], limits);
    expect(blocked).toMatchObject({ ok: false, full: true });
    if (blocked.ok) throw new Error("unreachable");
    expect(blocked.expiresInMs).toBeGreaterThan(0);
    expect(blocked.expiresInMs).toBeLessThanOrEqual(150);
    await sleep(blocked.expiresInMs! + 5);
    expect((await b!.acquire(["c"], limits)).ok).toBe(true);
  });

  it("createRedisScopes() takes a lease in every scope of a request or in none", async () => {
    const { stores: [a, b], client, prefix } = await cluster(2);
    const one = { concurrency: 1, delayMs: 0 };
    const held = await a!.acquire(["x"], [one]);
    expect(held.ok).toBe(true);
    expect(await b!.acquire(["y", "x"], [one, one])).toMatchObject({ ok: false, full: true });
    expect(await client.zCard(`${prefix}lease:y`)).toBe(0);
    expect(await client.exists(`${prefix}state:y`)).toBe(0);
    if (!held.ok) throw new Error("unreachable");
    await a!.release(held.lease);
    const both = await b!.acquire(["y", "x"], [one, one]);
    expect(both.ok).toBe(true);
    expect(await client.zCard(`${prefix}lease:x`)).toBe(1);
    expect(await client.zCard(`${prefix}lease:y`)).toBe(1);
    // Either scope now refuses on its own.
    expect((await a!.acquire(["y"], [one])).ok).toBe(false);
    expect((await a!.acquire(["x"], [one])).ok).toBe(false);
  });

  it("createRedisScopes() lets the keys of an idle scope expire", async () => {
    const { stores: [a], client, prefix } = await cluster(1, { leaseMs: 100, idleTtlMs: 100 });
    const got = await a!.acquire(["idle"], [{ concurrency: 1, delayMs: 20 }]);
    if (!got.ok) throw new Error("expected a lease");
    for (const key of [`${prefix}lease:idle`, `${prefix}state:idle`]) {
      const ttl = await client.pTTL(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(200);
    }
    await a!.release(got.lease);
    await sleep(250);
    expect(await client.keys(`${prefix}*`)).toEqual([]);
  });

  it("createRedisScopes() renews a lease while it is held and not after it expired", async () => {
    const { stores: [a], client, prefix } = await cluster(1, { leaseMs: 100 });
    const got = await a!.acquire(["r"], [{ concurrency: 1, delayMs: 0 }]);
    if (!got.ok) throw new Error("expected a lease");
    const before = Number(await client.zScore(`${prefix}lease:r`, got.lease.id));
    await sleep(20);
    expect(await a!.renew(got.lease)).toBe(true);
    expect(Number(await client.zScore(`${prefix}lease:r`, got.lease.id))).toBeGreaterThan(before);
    await sleep(130);
    expect((await a!.acquire(["r"], [{ concurrency: 1, delayMs: 0 }])).ok).toBe(true); // swept
    expect(await a!.renew(got.lease)).toBe(false);
  });

  it("createRedisScopes() stores a published hold so every process waits for it", async () => {
    const { stores: [a, b] } = await cluster(2);
    await a!.publishBackoff({
      scope: "h",
      level: 1,
      cause: "status 429",
      hold: { ms: 5_000, source: "retry-after" },
    });
    const got = await b!.acquire(["h"], [{ concurrency: 4, delayMs: 0 }]);
    expect(got.ok).toBe(false);
    if (got.ok) throw new Error("unreachable");
    expect(got.waitMs).toBeGreaterThan(4_000);
    expect(got.waitMs).toBeLessThanOrEqual(5_000);
  });

  it("createRedisScopes() delivers messages to the other processes, not back to the sender", async () => {
    const { stores: [a, b] } = await cluster(2);
    const seenByA: SharedMessage[] = [];
    const seenByB: SharedMessage[] = [];
    a!.messages$.subscribe((m) => seenByA.push(m));
    b!.messages$.subscribe((m) => seenByB.push(m));
    await a!.publishBackoff({ scope: "m", level: 2, cause: "status 503", hold: undefined });
    const got = await a!.acquire(["m"], [{ concurrency: 1, delayMs: 0 }]);
    if (!got.ok) throw new Error("expected a lease");
    await a!.release(got.lease);
    for (let i = 0; i < 100 && seenByB.length < 2; i++) await sleep(5);
    expect(seenByB).toEqual([
      { type: "backoff", from: "p0", scope: "m", level: 2, cause: "status 503" },
      { type: "release", from: "p0", scopes: ["m"] },
    ]);
    expect(seenByA).toEqual([]);
  });

  it("createRedisScopes() rejects with a RedisScopesError when Redis fails", async () => {
    const { stores: [a], client } = await cluster(1);
    client.destroy();
    const error = await a!.acquire(["e"], [{ concurrency: 1, delayMs: 0 }]).catch((e) => e);
    expect(error).toBeInstanceOf(RedisScopesError);
    expect(error).toMatchObject({ name: "RedisScopesError", operation: "acquire", scopes: ["e"] });
  });

  it("createRedisScopes() names a bad option", async () => {
    const client = await connect();
    cleanups.push(() => client.close());
    await expect(createRedisScopes(client, { leaseMs: 0 })).rejects.toThrow(
      /'leaseMs' must be a finite number >= 1: current value is 0/,
    );
  });
});
