/**
 * `sharedDownload` against the real Redis on 127.0.0.1:$REDIS_PORT (6390 by
 * default) and a loopback HTTP server: several throttlers (processes) in one
 * test share a fresh random prefix.
 */
import { afterEach, describe, expect, it } from "vitest";
import process from "node:process";
import { spawn } from "node:child_process";
import { createClient } from "redis";
import { from, lastValueFrom, NEVER, type Subscription, toArray } from "rxjs";
import { createRedisScopes, type RedisScopes, RedisScopesError } from "../lib/redis_scopes.ts";
import { sharedDownload } from "../lib/shared_download.ts";
import { createThrottler, type Throttler } from "../lib/throttler.ts";
import type { Outcome } from "../lib/outcome.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";

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

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) {
    try {
      await cleanups.pop()!();
    } catch { /* already closed */ }
  }
});

interface Process {
  readonly client: Client;
  readonly store: RedisScopes;
}

/** `n` processes (client and store each) on one fresh prefix. */
async function processes(n: number, leaseMs?: number): Promise<Process[]> {
  const prefix = `test:${crypto.randomUUID()}:`;
  const out: Process[] = [];
  for (let i = 0; i < n; i++) {
    const client = await connect();
    cleanups.push(() => client.close());
    const store = await createRedisScopes(client, {
      prefix,
      processId: `p${i}`,
      ...(leaseMs === undefined ? {} : { leaseMs }),
    });
    cleanups.push(() => store.close());
    out.push({ client, store });
  }
  const first = out[0]!.client;
  cleanups.unshift(async () => {
    const keys = await first.keys(`${prefix}*`);
    if (keys.length > 0) await first.del(keys);
  });
  return out;
}

const WORKER = new URL("./_redis_worker.ts", import.meta.url).pathname;

/** Run test/_redis_worker.ts as a real child process on the runtime running the tests. */
function runWorker(args: readonly string[]): Promise<{ code: number | null; out: string }> {
  const runtime = "Deno" in globalThis
    ? ["run", "-A", WORKER]
    : "Bun" in globalThis
    ? [WORKER]
    : ["--import", "tsx", WORKER];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...runtime, ...args], {
      env: { ...process.env, REDIS_PORT: String(PORT) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (chunk) => out += chunk);
    child.stderr.on("data", (chunk) => out += chunk);
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, out }));
  });
}

/** Poll a condition on Redis (real I/O) until it holds or 2 s passed. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("sharedDownload()", () => {
  it("sharedDownload() keeps the combined in-flight of three throttlers within the scope's concurrency", async () => {
    let inFlight = 0;
    let most = 0;
    const server = await startRecordingServer((_req, res) => {
      most = Math.max(most, ++inFlight);
      setTimeout(() => {
        inFlight--;
        res.writeHead(200).end("ok");
      }, 15);
    });
    cleanups.push(() => server.close());
    const procs = await processes(3);
    const runs = procs.map(({ store }, p) => {
      // Each throttler alone would allow 2 in flight: 6 together without Redis.
      const throttler = createThrottler({ concurrentRequestsPerDomain: 2, downloadDelayMs: 0 });
      const download = sharedDownload(store, throttler, async (url: string, ctx) => {
        const response = await fetch(url, { signal: ctx.signal });
        await response.text();
        return response.status;
      });
      const urls = Array.from({ length: 8 }, (_, i) => `${server.origin}/p${p}/${i}`);
      return lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
    });
    const outcomes = (await Promise.all(runs)).flat();
    expect(outcomes.map((o) => o.kind === "response" ? o.response : o.error)).toEqual(
      Array(24).fill(200),
    );
    expect(server.arrivals).toHaveLength(24);
    expect(most).toBeGreaterThanOrEqual(1);
    expect(most).toBeLessThanOrEqual(2);
  });

  it("sharedDownload() keeps two real child processes within the scope's concurrency", async () => {
    let inFlight = 0;
    let most = 0;
    const server = await startRecordingServer((_req, res) => {
      most = Math.max(most, ++inFlight);
      setTimeout(() => {
        inFlight--;
        res.writeHead(200).end("ok");
      }, 10);
    });
    cleanups.push(() => server.close());
    const [a] = await processes(1); // for the prefix and the clean-up of its keys
    const runs = await Promise.all(
      ["w1", "w2"].map((tag) => runWorker([server.origin, a!.store.prefix, "10", "2", tag])),
    );
    for (const run of runs) {
      expect(run.code, run.out).toBe(0);
      expect(JSON.parse(run.out.trim().split("\n").at(-1)!)).toEqual({
        statuses: Array(10).fill(200),
      });
    }
    expect(server.arrivals).toHaveLength(20);
    expect(most).toBeLessThanOrEqual(2);
  }, 30_000);

  it("sharedDownload() spaces two throttlers' sends by the delay on the Redis clock", async () => {
    const procs = await processes(2);
    const delayMs = 25;
    const granted: number[] = [];
    const runs = procs.map(({ store }, p) => {
      const throttler = createThrottler({
        concurrentRequestsPerDomain: 4,
        downloadDelayMs: delayMs,
        jitter: [0, 0],
      });
      const download = sharedDownload(store, throttler, (_url: string, ctx) => {
        granted.push(ctx.lease.grantedAt);
        return Promise.resolve(200);
      });
      const urls = Array.from({ length: 4 }, (_, i) => `http://delay.test/p${p}/${i}`);
      return lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
    });
    await Promise.all(runs);
    expect(granted).toHaveLength(8);
    granted.sort((a, b) => a - b);
    for (let i = 1; i < granted.length; i++) {
      expect(granted[i]! - granted[i - 1]!).toBeGreaterThanOrEqual(delayMs - 1);
    }
  });

  it("sharedDownload() releases the lease when the pipeline is unsubscribed mid-download", async () => {
    const [a] = await processes(1);
    const { client, store } = a!;
    const throttler = createThrottler();
    let started = 0;
    const subscription = from(["http://hang.test/1"]).pipe(
      throttleByScope(
        throttler,
        sharedDownload(store, throttler, () => {
          started++;
          return NEVER;
        }),
      ),
    ).subscribe();
    cleanups.push(() => subscription.unsubscribe());
    const key = `${store.prefix}lease:hang.test`;
    await until(async () => (await client.zCard(key)) === 1, "the lease");
    expect(started).toBe(1);
    subscription.unsubscribe();
    await until(async () => (await client.zCard(key)) === 0, "the release");
  });

  it("sharedDownload() gives back nothing it did not get when unsubscribed while waiting", async () => {
    const [a, b] = await processes(2);
    const key = `${a!.store.prefix}lease:wait.test`;
    const held = await a!.store.acquire(["wait.test"], [{ concurrency: 1, delayMs: 0 }]);
    if (!held.ok) throw new Error("expected a lease");
    const throttler = createThrottler({ concurrentRequestsPerDomain: 1 });
    let started = 0;
    const subscription: Subscription = from(["http://wait.test/1"]).pipe(
      throttleByScope(
        throttler,
        sharedDownload(b!.store, throttler, () => {
          started++;
          return Promise.resolve(200);
        }, { pollMs: 20 }),
      ),
    ).subscribe();
    await sleep(60); // a few polls, all refused
    subscription.unsubscribe();
    await a!.store.release(held.lease);
    await sleep(60); // a poll would have got it by now, had one been left running
    expect(started).toBe(0);
    expect(await a!.client.zCard(key)).toBe(0);
  });

  it("sharedDownload() wakes a waiting request when another process releases", async () => {
    const [a, b] = await processes(2);
    const held = await a!.store.acquire(["wake.test"], [{ concurrency: 1, delayMs: 0 }]);
    if (!held.ok) throw new Error("expected a lease");
    const throttler = createThrottler({ concurrentRequestsPerDomain: 1 });
    const done = lastValueFrom(
      from(["http://wake.test/1"]).pipe(
        // A poll of a minute: only the release message can wake it within the test.
        throttleByScope(
          throttler,
          sharedDownload(b!.store, throttler, () => Promise.resolve(200), { pollMs: 60_000 }),
        ),
      ),
    );
    await sleep(30);
    await a!.store.release(held.lease);
    const outcome = await done;
    expect(outcome.kind).toBe("response");
  });

  it("sharedDownload() turns a Redis failure into an error outcome with a RedisScopesError", async () => {
    const [a] = await processes(1);
    a!.client.destroy();
    const throttler: Throttler<string> = createThrottler();
    let started = 0;
    const outcomes: Outcome<string, number>[] = await lastValueFrom(
      from(["http://down.test/1", "http://down.test/2"]).pipe(
        throttleByScope(
          throttler,
          sharedDownload(a!.store, throttler, () => {
            started++;
            return Promise.resolve(200);
          }),
        ),
        toArray(),
      ),
    );
    expect(started).toBe(0);
    expect(outcomes).toHaveLength(2);
    for (const outcome of outcomes) {
      expect(outcome.kind).toBe("error");
      if (outcome.kind !== "error") continue;
      expect(outcome.error).toBeInstanceOf(RedisScopesError);
      expect(outcome.error).toMatchObject({ operation: "acquire", scopes: ["down.test"] });
    }
  });

  it("sharedDownload() names a bad option", async () => {
    const [a] = await processes(1);
    expect(() =>
      sharedDownload(a!.store, createThrottler(), () => Promise.resolve(1), { pollMs: 0 })
    ).toThrow(/'pollMs' must be a finite number > 0: current value is 0/);
  });
});
