import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "./_helpers/wait_for.ts";
import fc from "fast-check";
import { Subject, VirtualTimeScheduler } from "rxjs";
import {
  RedisRequestQueue,
  type RedisRequestQueueOptions,
} from "../lib/redis/redis_request_queue.ts";
import { readRedisQueueStatus } from "../lib/redis/redis_queue_status.ts";
import { type QueueThrottleView, RequestQueue } from "../lib/queue/request_queue.ts";
import { takeRequestDelayed } from "../lib/_request_delay.ts";
import type { CrawlQueue } from "../lib/queue/crawl_queue.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { connectRedis, onCleanup, type RedisClient, runCleanups } from "./_helpers/redis.ts";

/** Hang limit of each test (real I/O; no timing is asserted). */
const HANG_MS = 120_000;

afterEach(runCleanups);

/** A fresh job prefix whose keys are deleted at clean-up. */
async function freshJob(): Promise<{ prefix: string; admin: RedisClient }> {
  const prefix = `test:${crypto.randomUUID()}:`;
  const admin = await connectRedis();
  onCleanup(async () => {
    const keys = await admin.keys(`{${prefix}}*`);
    if (keys.length > 0) await admin.del(keys);
  });
  return { prefix, admin };
}

/** A queue on its own connection, closed at clean-up. */
async function worker<R = string>(
  prefix: string,
  options: Omit<RedisRequestQueueOptions<R>, "prefix"> = {},
): Promise<{ queue: RedisRequestQueue<R>; client: RedisClient }> {
  const client = await connectRedis();
  const queue = new RedisRequestQueue<R>(client, { prefix, pollMs: 20, ...options });
  onCleanup(() => queue.close());
  return { queue, client };
}

/**
 * Subscribe and collect what comes out; `end` decides what to do with each
 * request (default: done at once). Resolves when requests$ completes.
 */
function drain<R>(
  queue: Pick<CrawlQueue<R>, "requests$" | "markDone">,
  end: (r: R) => void = (r) => queue.markDone(r),
): { got: R[]; done: Promise<R[]>; stop: () => void } {
  const got: R[] = [];
  let stop = () => {};
  const done = new Promise<R[]>((resolve, reject) => {
    const sub = queue.requests$.subscribe({
      next: (r) => {
        got.push(r);
        end(r);
      },
      error: reject,
      complete: () => resolve(got),
    });
    stop = () => sub.unsubscribe();
  });
  return { got, done, stop };
}

/** A view that blocks the scopes in `blocked` until told otherwise. */
function blockingView(blocked: Set<string>): QueueThrottleView & { changes: Subject<unknown> } {
  const changes = new Subject<unknown>();
  return {
    waitMs: (scopes) => scopes.some((s) => blocked.has(s)) ? Infinity : 0,
    load: () => 0,
    quotaShare: () => 0,
    freeSlots: () => Infinity,
    changes$: changes,
    changes,
  };
}

/**
 * A worker that took both requests of a fresh job and holds them without
 * renewing (leases of 300 ms); `dead.client.destroy()` ends it.
 */
async function takingWorker(prefix: string) {
  const dead = await worker(prefix, {
    leaseMs: 300,
    outageWaitMs: 0,
    start: ["https://a.test/1", "https://b.test/2"],
  });
  const taken = drain(dead.queue, () => {});
  await waitFor(() => expect(taken.got.length).toBe(2));
  taken.stop();
  return dead;
}

describe("RedisRequestQueue", () => {
  it(
    "RedisRequestQueue hands out higher priorities first, start requests after regular ones of equal priority",
    async () => {
      const { prefix } = await freshJob();
      const { queue } = await worker<{ url: string; priority?: number }>(prefix);
      const seed = await worker<{ url: string; priority?: number }>(prefix);
      seed.queue.enqueue({ url: "https://a.test/low" });
      seed.queue.enqueue({ url: "https://a.test/high", priority: 5 });
      seed.queue.enqueue({ url: "https://a.test/start", priority: 5 }, { start: true });
      seed.queue.enqueue({ url: "https://a.test/mid", priority: 1 });
      await seed.queue.close();
      const got = await drain(queue).done;
      expect(got.map((r) => r.url)).toEqual([
        "https://a.test/high",
        "https://a.test/start",
        "https://a.test/mid",
        "https://a.test/low",
      ]);
    },
    HANG_MS,
  );

  it("RedisRequestQueue drops duplicates across workers and counts them", async () => {
    const { prefix, admin } = await freshJob();
    const a = await worker(prefix);
    const b = await worker(prefix);
    a.queue.enqueue("https://a.test/1");
    a.queue.enqueue("https://a.test/1#fragment");
    b.queue.enqueue("https://a.test/1");
    b.queue.enqueue("https://a.test/2");
    await a.queue.close();
    await b.queue.close();
    expect(a.queue.stats().filtered + b.queue.stats().filtered).toBe(2);
    const c = await worker(prefix);
    expect((await drain(c.queue).done).sort()).toEqual(["https://a.test/1", "https://a.test/2"]);
    const status = await readRedisQueueStatus(admin, prefix);
    expect(status).toMatchObject({ queued: 0, leased: 0, done: 2, failed: 0, seen: 2 });
    expect(await c.queue.jobStatus()).toEqual(status);
  }, HANG_MS);

  it(
    "RedisRequestQueue completes at once on an empty job, and waits for one with awaitJob",
    async () => {
      const { prefix } = await freshJob();
      const { queue } = await worker(prefix);
      expect(await drain(queue).done).toEqual([]);
      const joiner = await worker(prefix, { awaitJob: true });
      const run = drain(joiner.queue);
      const seeder = await worker(prefix, { start: ["https://a.test/"] });
      // The seeder works the job too; the joiner ends with it, whoever took the page.
      const seeded = await drain(seeder.queue).done;
      const joined = await run.done;
      expect([...seeded, ...joined]).toEqual(["https://a.test/"]);
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue: a seeding with no start requests at all still ends the workers waiting for the job",
    async () => {
      const { prefix } = await freshJob();
      const joiner = await worker(prefix, { awaitJob: true });
      const run = drain(joiner.queue);
      const seeder = await worker(prefix, { start: [] });
      expect(await drain(seeder.queue).done).toEqual([]);
      expect(await run.done).toEqual([]);
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue.markDone() counts failed requests apart, in all and per scope set",
    async () => {
      const { prefix } = await freshJob();
      const { queue } = await worker(prefix, {
        start: ["https://a.test/ok", "https://a.test/bad", "https://b.test/bad"],
      });
      await drain(queue, (r) => queue.markDone(r, { failed: r.endsWith("bad") })).done;
      const status = await queue.jobStatus();
      expect(status).toMatchObject({ done: 1, failed: 2, queued: 0, leased: 0, finished: true });
      expect(status.scopes).toEqual([
        { scope: "a.test", queued: 0, leased: 0, done: 1, failed: 1 },
        { scope: "b.test", queued: 0, leased: 0, done: 0, failed: 1 },
      ]);
    },
    HANG_MS,
  );

  it("RedisRequestQueue.markUnsent() puts the request back, its take not counted", async () => {
    const { prefix } = await freshJob();
    const { queue } = await worker(prefix, { start: ["https://a.test/x"] });
    let first = true;
    const takes: (number | undefined)[] = [];
    const got = await drain(queue, (r) => {
      takes.push(queue.takesOf(r));
      if (first) {
        first = false;
        queue.markUnsent(r);
      } else queue.markDone(r);
    }).done;
    expect(got).toEqual(["https://a.test/x", "https://a.test/x"]);
    expect(takes).toEqual([1, 1]);
  }, HANG_MS);

  it("RedisRequestQueue: two workers on one job never get the same request", async () => {
    const { prefix, admin } = await freshJob();
    const urls = Array.from({ length: 60 }, (_, i) => `https://h${i % 6}.test/p${i}`);
    const a = await worker(prefix, { start: urls.slice(0, 30) });
    const b = await worker(prefix, { start: urls.slice(30) });
    // Ended a turn later, so both are working at once.
    const later = (q: RedisRequestQueue<string>) => (r: string) =>
      void setTimeout(() => q.markDone(r), 1);
    const [ga, gb] = await Promise.all([
      drain(a.queue, later(a.queue)).done,
      drain(b.queue, later(b.queue)).done,
    ]);
    expect([...ga, ...gb].sort()).toEqual([...urls].sort());
    expect(ga.filter((u) => gb.includes(u))).toEqual([]);
    expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({ done: 60, leased: 0 });
  }, HANG_MS);

  it(
    "RedisRequestQueue gives an expired lease to another worker, with its takes counted",
    async () => {
      const { prefix } = await freshJob();
      // The dead worker: it takes and never renews (its connection is cut).
      const dead = await takingWorker(prefix);
      dead.client.destroy();
      const alive = await worker(prefix, { leaseMs: 300 });
      const takes: (number | undefined)[] = [];
      const before: number[] = [];
      const got = await drain(alive.queue, (r) => {
        takes.push(alive.queue.takesOf(r));
        before.push(alive.queue.attemptsBefore(r));
        alive.queue.markDone(r);
      }).done;
      expect(got.sort()).toEqual(["https://a.test/1", "https://b.test/2"]);
      expect(takes).toEqual([2, 2]);
      // The dead worker's take counts as an attempt: crawl() retries from 2.
      expect(before).toEqual([1, 1]);
      expect(alive.queue.attemptsBefore("https://a.test/1")).toBe(0);
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue.recordAttempt(): retries within a take count in Redis, so the next worker after a death starts from the attempts made",
    async () => {
      const { prefix, admin } = await freshJob();
      const dead = await takingWorker(prefix);
      // /1: its first attempt and two retries; /2: its first attempt only (not a retry: not counted).
      dead.queue.recordAttempt("https://a.test/1", 1);
      dead.queue.recordAttempt("https://a.test/1", 2);
      dead.queue.recordAttempt("https://a.test/1", 3);
      dead.queue.recordAttempt("https://b.test/2", 1);
      // A request this worker does not hold: nothing.
      dead.queue.recordAttempt("https://c.test/3", 2);
      await waitFor(async () =>
        expect(await admin.hVals(`{${prefix}}q:takes`)).toEqual(expect.arrayContaining(["3", "1"]))
      );
      dead.client.destroy();
      const alive = await worker(prefix, { leaseMs: 300 });
      const before = new Map<string, number>();
      await drain(alive.queue, (r) => {
        before.set(r, alive.queue.attemptsBefore(r));
        alive.queue.markDone(r);
      }).done;
      expect(Object.fromEntries(before)).toEqual({ "https://a.test/1": 3, "https://b.test/2": 1 });
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue never hands out again a request a slow worker finished after its lease expired",
    async () => {
      const { prefix, admin } = await freshJob();
      // The slow worker: its leases expire (no renewal before they do).
      const slow = await worker(prefix, {
        leaseMs: 200,
        renewEveryMs: 3_600_000,
        start: ["https://a.test/1"],
      });
      const slowRun = drain(slow.queue, () => {});
      await waitFor(() => expect(slowRun.got.length).toBe(1));
      // Paused: it holds the request but takes no more (it would take its own expired lease back).
      slowRun.stop();
      const other = await worker(prefix, { leaseMs: 200, renewEveryMs: 3_600_000 });
      const otherRun = drain(other.queue, () => {});
      await waitFor(() => expect(otherRun.got).toEqual(["https://a.test/1"]));
      slow.queue.markDone("https://a.test/1");
      await waitFor(async () => expect((await readRedisQueueStatus(admin, prefix)).done).toBe(1));
      other.queue.markDone("https://a.test/1");
      await otherRun.done;
      const third = await worker(prefix);
      expect(await drain(third.queue).done).toEqual([]);
      expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({
        done: 1,
        queued: 0,
        leased: 0,
      });
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue resumes a job after every worker closed, nothing finished handed out again",
    async () => {
      const { prefix, admin } = await freshJob();
      const urls = Array.from({ length: 20 }, (_, i) => `https://h${i % 3}.test/${i}`);
      const first = await worker(prefix, { start: urls });
      const finished: string[] = [];
      const run = drain(first.queue, (r) => {
        if (finished.length < 7) {
          finished.push(r);
          first.queue.markDone(r);
        }
        // The rest stays held: close() gives it back.
      });
      await waitFor(() => expect(finished.length).toBe(7));
      run.stop();
      await first.queue.close();
      expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({
        done: 7,
        leased: 0,
        queued: 13,
      });
      // Seeded again with the same input: nothing is added.
      const second = await worker(prefix, { start: urls });
      const rest = await drain(second.queue).done;
      expect(rest.sort()).toEqual(urls.filter((u) => !finished.includes(u)).sort());
      expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({ done: 20, queued: 0 });
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue leaves a blocked scope's requests queued while others flow, then hands them out",
    async () => {
      const { prefix, admin } = await freshJob();
      const blocked = new Set(["held.test"]);
      const view = blockingView(blocked);
      const seed = await worker<{ url: string; priority?: number }>(prefix);
      for (let i = 0; i < 5; i++) {
        seed.queue.enqueue({ url: `https://held.test/${i}`, priority: 10 });
      }
      for (let i = 0; i < 5; i++) seed.queue.enqueue({ url: `https://open${i % 2}.test/${i}` });
      await seed.queue.close();
      const { queue } = await worker<{ url: string }>(prefix, { view });
      const run = drain(queue);
      await waitFor(() => expect(run.got.length).toBe(5));
      // The held scope is first in priority and still untouched.
      expect(run.got.every((r) => !r.url.includes("held.test"))).toBe(true);
      const status = await readRedisQueueStatus(admin, prefix);
      expect(status.queued).toBe(5);
      expect(status.scopes.find((s) => s.scope === "held.test")).toMatchObject({ queued: 5 });
      blocked.clear();
      view.changes.next(undefined);
      const got = await run.done;
      expect(got.slice(5).map((r) => r.url).sort()).toEqual(
        [0, 1, 2, 3, 4].map((i) => `https://held.test/${i}`),
      );
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue checks a head request's quota amounts against the worker's throttler: one over the quota stays queued while smaller ones flow",
    async () => {
      const { prefix, admin } = await freshJob();
      type Req = { url: string; meta?: { throttlingScopes: Record<string, number> } };
      const throttler = createThrottler<Req>({
        scopes: { "api.test": { quota: 10, windowMs: 600_000 } },
      });
      // 8 of the window's 10 used (by this process, or told by the server).
      throttler.reconcileQuota("api.test", { remaining: 2 });
      const big = { url: "https://api.test/big", meta: { throttlingScopes: { "api.test": 5 } } };
      const small = {
        url: "https://api.test/small",
        meta: { throttlingScopes: { "api.test": 1 } },
      };
      const other = { url: "https://b.test/1" };
      const { queue } = await worker<Req>(prefix, { view: throttler, start: [big, small, other] });
      const run = drain(queue);
      await waitFor(() => expect(run.got.length).toBe(2));
      expect(run.got.map((r) => r.url).sort()).toEqual([small.url, other.url]);
      // Sets that differ by their amounts only are one row of the status.
      await waitFor(async () => {
        const status = await readRedisQueueStatus(admin, prefix);
        expect(status).toMatchObject({ queued: 1, done: 2 });
        expect(status.scopes.find((s) => s.scope === "api.test")).toMatchObject({
          queued: 1,
          done: 1,
        });
      });
      // The window has room again: the throttler's change lets the big one go.
      throttler.reconcileQuota("api.test", { remaining: 10 });
      expect((await run.done).map((r) => r.url)).toContain(big.url);
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue holds a request for its meta.throttlingDelayMs in Redis while the others go, as RequestQueue does, and tells the gate it waited",
    async () => {
      const { prefix, admin } = await freshJob();
      type Req = { url: string; meta?: { throttlingDelayMs: number } };
      const start = (): Req[] => [
        { url: "https://a.test/later", meta: { throttlingDelayMs: 300 } },
        { url: "https://a.test/now" },
      ];
      /** What comes out, and whether the queue marked it as having waited its delay. */
      const seen = (got: Req[], marked: boolean[]) => got.map((r, i) => `${r.url} ${marked[i]}`);

      const local = new RequestQueue<Req>({ start: start() });
      const localMarked: boolean[] = [];
      const localRun = drain(local, (r) => {
        localMarked.push(takeRequestDelayed(r));
        local.markDone(r);
      });

      const { queue } = await worker<Req>(prefix, { start: start() });
      const marked: boolean[] = [];
      const run = drain(queue, (r) => {
        marked.push(takeRequestDelayed(r));
        queue.markDone(r);
      });
      await waitFor(() => expect(run.got.map((r) => r.url)).toEqual(["https://a.test/now"]));
      // Still queued (the job is not finished), not takeable.
      await waitFor(async () =>
        expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({
          queued: 1,
          leased: 0,
          done: 1,
          finished: false,
        })
      );
      const got = await run.done;
      expect(seen(got, marked)).toEqual([
        "https://a.test/now false",
        "https://a.test/later true",
      ]);
      expect(seen(got, marked)).toEqual(seen(await localRun.done, localMarked));
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue serves scope sets of equal priority in turn: every site once before any twice",
    async () => {
      const { prefix } = await freshJob();
      const seed = await worker(prefix);
      const hosts = Array.from({ length: 40 }, (_, i) => `h${String(i).padStart(2, "0")}.test`);
      for (const h of hosts) for (const p of [1, 2]) seed.queue.enqueue(`https://${h}/${p}`);
      await seed.queue.close();
      // Four free slots at a time: a take asks for four.
      const view: QueueThrottleView = { ...blockingView(new Set()), freeSlots: () => 4 };
      const { queue } = await worker(prefix, { view, random: () => 0 });
      const got = await drain(queue).done;
      const first = got.slice(0, 40).map((u) => new URL(u).host);
      expect(new Set(first).size).toBe(40);
      expect(got).toHaveLength(80);
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue: every unique request enqueued is handed out exactly once across workers (property)",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 12 })), {
            minLength: 1,
            maxLength: 40,
          }),
          fc.integer({ min: 1, max: 3 }),
          async (pairs, workers) => {
            const { prefix } = await freshJob();
            const urls = pairs.map(([h, p]) => `https://h${h}.test/${p}`);
            const queues = await Promise.all(
              Array.from(
                { length: workers },
                (_, i) => worker(prefix, { start: urls.filter((_, j) => j % workers === i) }),
              ),
            );
            const runs = await Promise.all(
              queues.map((w) =>
                drain(w.queue, (r) => void setTimeout(() => w.queue.markDone(r), 0)).done
              ),
            );
            const all = runs.flat().sort();
            expect(all).toEqual([...new Set(urls)].sort());
            await runCleanups();
          },
        ),
        { numRuns: 15 },
      );
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue: unsubscribing clears its poll timer, and close() its renewal timer and gives back what it held",
    async () => {
      const { prefix, admin } = await freshJob();
      // Timers on a virtual clock: they are looked at, never run by the clock.
      const scheduler = new VirtualTimeScheduler();
      const { queue } = await worker(prefix, {
        scheduler,
        start: ["https://a.test/1", "https://b.test/2"],
      });
      const first = drain(queue, () => {});
      // Both taken (held, not done), so it waits for a change with a poll timer and renews.
      await waitFor(() => expect(first.got.length).toBe(2));
      await waitFor(() => expect(scheduler.actions.length).toBe(2));
      first.stop();
      expect(scheduler.actions.length).toBe(1); // the renewal: it still holds two requests
      await queue.close();
      expect(scheduler.actions.length).toBe(0);
      expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({ queued: 2, leased: 0 });
    },
    HANG_MS,
  );

  it(
    "RedisRequestQueue maxRequests bounds the job's requests across workers: past it links are dropped, start requests never",
    async () => {
      const { prefix, admin } = await freshJob();
      const a = await worker(prefix, { maxRequests: 5 });
      const b = await worker(prefix, { maxRequests: 5 });
      a.queue.enqueue("https://a.test/s1", { start: true });
      a.queue.enqueue("https://a.test/s2", { start: true });
      a.queue.enqueue("https://a.test/1");
      a.queue.enqueue("https://a.test/1"); // a duplicate does not count
      await a.queue.close();
      for (let i = 2; i <= 6; i++) b.queue.enqueue(`https://a.test/${i}`);
      // Past the limit, a start request still goes in (the input is never dropped).
      b.queue.enqueue("https://a.test/s3", { start: true });
      await b.queue.close();
      expect(a.queue.stats()).toMatchObject({ filtered: 1, limited: 0 });
      expect(b.queue.stats()).toMatchObject({ filtered: 0, limited: 3 });
      const c = await worker(prefix);
      expect((await drain(c.queue).done).sort()).toEqual([
        "https://a.test/1",
        "https://a.test/2",
        "https://a.test/3",
        "https://a.test/s1",
        "https://a.test/s2",
        "https://a.test/s3",
      ]);
      // A dropped request is not marked seen: a later job size could take it.
      expect(await readRedisQueueStatus(admin, prefix)).toMatchObject({
        done: 6,
        seen: 6,
        limited: 3,
      });
    },
    HANG_MS,
  );

  it("RedisRequestQueue refuses a bad option, naming it", async () => {
    const client = await connectRedis();
    expect(() => new RedisRequestQueue(client, { leaseMs: 0 })).toThrow(/'leaseMs' must be/);
    expect(() => new RedisRequestQueue(client, { prefix: "" })).toThrow(/'prefix'/);
    expect(() => new RedisRequestQueue(client, { maxRequests: -1 })).toThrow(/'maxRequests'/);
  }, HANG_MS);
});
