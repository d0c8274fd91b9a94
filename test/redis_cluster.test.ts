// The shared request queue on a real Redis Cluster (three masters started
// here from redis-server, slots assigned with redis-cli --cluster create):
// a job's keys share one hash tag, so its scripts run on one node.
import { type ChildProcess, execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createCluster } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisRequestQueue } from "../lib/redis/redis_request_queue.ts";
import { readRedisQueueStatus } from "../lib/redis/redis_queue_status.ts";
import { queueKeyBase } from "../lib/redis/_redis_queue_scripts.ts";
import { redisClusterSender } from "../lib/redis/redis_cluster.ts";
import { freePort, startRedisServer, waitForRedis } from "./_helpers/own_redis.ts";
import { waitFor } from "./_helpers/wait_for.ts";

/** Hang limit (real processes; no timing is asserted). */
const HANG_MS = 120_000;

const run = promisify(execFile);
const nodes: ChildProcess[] = [];
const ports: number[] = [];
let dir = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "politely-cluster-"));
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    ports.push(port);
    nodes.push(
      startRedisServer(port, undefined, [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        `nodes-${port}.conf`,
        "--dir",
        dir,
      ]),
    );
  }
  for (const port of ports) await waitForRedis(port);
  await run("redis-cli", [
    "--cluster",
    "create",
    ...ports.map((p) => `127.0.0.1:${p}`),
    "--cluster-replicas",
    "0",
    "--cluster-yes",
  ]);
  await waitFor(async () => {
    const { stdout } = await run("redis-cli", ["-p", String(ports[0]), "cluster", "info"]);
    expect(stdout).toContain("cluster_state:ok");
  }, { timeoutMs: 30_000, intervalMs: 100 });
}, HANG_MS);

afterAll(() => {
  for (const n of nodes) n.kill("SIGKILL");
  if (dir !== "") rmSync(dir, { recursive: true, force: true });
});

describe("RedisRequestQueue on a Redis Cluster", () => {
  it(
    "two workers on a cluster share one job: every request once, its keys on one slot, status read through the cluster",
    async () => {
      const connect = () =>
        createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${ports[0]}` }] }).connect();
      const [c1, c2] = await Promise.all([connect(), connect()]);
      try {
        // Two jobs whose prefixes hash to different slots: each stays on its own.
        for (const prefix of ["jobA:", "jobB:"]) {
          const start = Array.from(
            { length: 12 },
            (_, i) => `https://s${i % 3}.test/${prefix}${i}`,
          );
          const a = new RedisRequestQueue<string>(redisClusterSender(c1), {
            prefix,
            pollMs: 20,
            start,
          });
          const b = new RedisRequestQueue<string>(redisClusterSender(c2), {
            prefix,
            pollMs: 20,
            awaitJob: true,
          });
          const got: string[] = [];
          const drain = (q: RedisRequestQueue<string>) =>
            new Promise<void>((resolve, reject) =>
              q.requests$.subscribe({
                next: (r) => {
                  got.push(r);
                  // A link found on the first page of each site, enqueued by whoever took it.
                  if (r.endsWith(`${prefix}0`)) q.enqueue(`https://s0.test/${prefix}link`);
                  q.markDone(r);
                },
                error: reject,
                complete: resolve,
              })
            );
          await Promise.all([drain(a), drain(b)]);
          await a.close();
          await b.close();
          expect(got.sort()).toEqual([...start, `https://s0.test/${prefix}link`].sort());
          const status = await readRedisQueueStatus(redisClusterSender(c1), prefix);
          expect(status).toMatchObject({ queued: 0, leased: 0, done: 13, finished: true });
          // Every key of the job on one slot (the hash tag's).
          const keys = await c1.sendCommand(queueKeyBase(prefix) + "seq", true, [
            "CLUSTER",
            "KEYSLOT",
            queueKeyBase(prefix) + "seq",
          ]);
          const slotOfReq = await c1.sendCommand(queueKeyBase(prefix) + "req", true, [
            "CLUSTER",
            "KEYSLOT",
            queueKeyBase(prefix) + "req",
          ]);
          expect(slotOfReq).toBe(keys);
        }
      } finally {
        await Promise.all([c1.close(), c2.close()]);
      }
    },
    HANG_MS,
  );
});
