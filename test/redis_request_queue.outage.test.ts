import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "./_helpers/wait_for.ts";
import { createClient } from "redis";
import { RedisRequestQueue } from "../lib/redis/redis_request_queue.ts";
import { readRedisQueueStatus } from "../lib/redis/redis_queue_status.ts";
import { onCleanup, runCleanups } from "./_helpers/redis.ts";
import { startOwnRedis, startRedisServer, waitForRedis } from "./_helpers/own_redis.ts";

/** Hang limit of each test (real I/O; no timing is asserted). */
const HANG_MS = 180_000;

afterEach(runCleanups);

/** A client of the test's own Redis that reconnects (backing off to 500 ms) while it is down. */
async function reconnectingClient(port: number) {
  const client = createClient({
    socket: {
      host: "127.0.0.1",
      port,
      reconnectStrategy: (retries: number) => Math.min(500, 50 * 2 ** retries),
    },
  });
  client.on("error", () => {});
  await client.connect();
  onCleanup(() => client.destroy());
  return client;
}

describe("RedisRequestQueue through a Redis restart", () => {
  it(
    "RedisRequestQueue waits through a Redis killed and restarted with its AOF: every request handed out, every acknowledgement kept",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "politely-queue-aof-"));
      const own = await startOwnRedis(dir);
      const port = own.port;
      let redis = own.server;
      onCleanup(() => redis.kill("SIGKILL"));
      const client = await reconnectingClient(port);
      const urls = Array.from({ length: 40 }, (_, i) => `https://h${i % 4}.test/${i}`);
      const queue = new RedisRequestQueue<string>(client, {
        prefix: "outage:",
        start: urls,
        leaseMs: 2000,
        pollMs: 20,
      });
      const got: string[] = [];
      let acked = 0;
      const done = new Promise<void>((resolve, reject) =>
        queue.requests$.subscribe({
          next: (url) => {
            got.push(url);
            // Ended a little later, as a download would be.
            setTimeout(() => {
              queue.markDone(url);
              acked++;
            }, 20);
          },
          error: reject,
          complete: resolve,
        })
      );
      await waitFor(() => expect(acked).toBeGreaterThanOrEqual(10));
      redis.kill("SIGKILL");
      await new Promise((r) => redis.once("exit", r));
      // Down for a moment while the queue goes on asking.
      await new Promise((r) => setTimeout(r, 1500));
      redis = startRedisServer(port, dir);
      await done;
      // No warning is asserted: a client that queues commands while it
      // reconnects may fail none of them, and then the queue only waits.
      expect([...new Set(got)].sort()).toEqual([...urls].sort());
      const status = await readRedisQueueStatus(client, "outage:");
      expect(status).toMatchObject({ queued: 0, leased: 0, done: 40, finished: true });
      // Handed out twice: only requests whose acknowledgement the kill lost.
      console.log(`outage: ${got.length} handed out for ${urls.length} requests`);
      await queue.close();
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue errors, naming the loss, when Redis comes back without the job's data",
    async () => {
      const own = await startOwnRedis();
      const port = own.port;
      let redis = own.server;
      onCleanup(() => redis.kill("SIGKILL"));
      const client = await reconnectingClient(port);
      const queue = new RedisRequestQueue<string>(client, {
        prefix: "lost:",
        start: ["https://a.test/1", "https://a.test/2"],
        pollMs: 20,
      });
      onCleanup(() => queue.close().catch(() => {}));
      const got: string[] = [];
      const ended = new Promise<unknown>((resolve) =>
        queue.requests$.subscribe({
          next: (url) => got.push(url),
          error: resolve,
          complete: () => resolve("completed"),
        })
      );
      await waitFor(() => expect(got.length).toBe(2));
      redis.kill("SIGKILL");
      await new Promise((r) => redis.once("exit", r));
      redis = startRedisServer(port);
      await waitForRedis(port);
      for (const url of got) queue.markDone(url);
      const error = await ended;
      expect(String(error)).toMatch(/job is gone from Redis .*appendonly yes/);
    },
    HANG_MS,
  );
});
