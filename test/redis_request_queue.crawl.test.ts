import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "./_helpers/wait_for.ts";
import { crawl } from "../lib/crawl.ts";
import { createRedisScopes } from "../lib/redis/redis_scopes.ts";
import { RedisRequestQueue } from "../lib/redis/redis_request_queue.ts";
import { sharedDownload } from "../lib/redis/shared_download.ts";
import { shareBackoff } from "../lib/redis/shared_backoff.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { type RecordingServer, startRecordingServer } from "./_helpers/loopback_server.ts";
import { readRedisQueueStatus } from "../lib/redis/redis_queue_status.ts";
import { main as sharedQueueExample } from "../examples/redis_shared_queue.ts";
import { connectRedis, onCleanup, runCleanups } from "./_helpers/redis.ts";

/** Hang limit of each test (real I/O; no timing is asserted). */
const HANG_MS = 120_000;

const servers: RecordingServer[] = [];
afterEach(async () => {
  await runCleanups();
  for (const s of servers.splice(0)) await s.close();
});

/** A site answering after `ms`, counting the most requests it had at once. */
async function site(ms: number) {
  let now = 0;
  const peak = { value: 0 };
  const s = await startRecordingServer((_req, res) => {
    now++;
    peak.value = Math.max(peak.value, now);
    setTimeout(() => {
      now--;
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    }, ms);
  });
  servers.push(s);
  return { origin: s.origin, arrivals: s.arrivals, peak };
}

/** A page: a URL, or a request object with a priority. */
type Page = string | { readonly url: string; readonly priority: number };

/** A worker: its own connection, store, throttler and queue on the job, crawling until the job is done. */
async function worker(
  prefix: string,
  name: string,
  start: readonly string[] | undefined,
  hold?: string,
) {
  const client = await connectRedis();
  const store = await createRedisScopes(client, { prefix, processId: name });
  onCleanup(() => store.close());
  const throttler = createThrottler<Page>({
    adaptive: false,
    concurrentRequestsPerDomain: 2,
    downloadDelayMs: 0,
  });
  const sharing = shareBackoff(store, throttler);
  onCleanup(() => sharing.unsubscribe());
  if (hold !== undefined) throttler.delayScope(hold, 3_600_000);
  const queue = new RedisRequestQueue<Page>(client, {
    prefix,
    view: throttler,
    awaitJob: true,
    pollMs: 20,
    ...(start !== undefined ? { start } : {}),
  });
  onCleanup(() => queue.close());
  const fetched: string[] = [];
  let outcomes = 0;
  const run = new Promise<number>((resolve, reject) => {
    const sub = crawl({
      throttler,
      queue,
      download: sharedDownload(store, throttler, (page: Page) => {
        const url = typeof page === "string" ? page : page.url;
        fetched.push(url);
        return fetch(url).then((r) => r.text());
      }),
    }).subscribe({ next: () => outcomes++, error: reject, complete: () => resolve(outcomes) });
    // Runs first at clean-up (added last): a worker left waiting stops.
    onCleanup(() => sub.unsubscribe());
  });
  return { throttler, queue, fetched, run };
}

describe("crawl() on a RedisRequestQueue with shared limits", () => {
  it(
    "two workers fetch every page once, and a site never has more in flight than its shared limit",
    async () => {
      const a = await site(30);
      const b = await site(30);
      const prefix = `test:${crypto.randomUUID()}:`;
      const admin = await connectRedis();
      onCleanup(async () => {
        const keys = [...await admin.keys(`{${prefix}}*`), ...await admin.keys(`${prefix}*`)];
        if (keys.length > 0) await admin.del(keys);
      });
      const urls = Array.from(
        { length: 40 },
        (_, i) => `${i % 2 === 0 ? a.origin : b.origin}/p${i}`,
      );
      const w1 = await worker(prefix, "w1", urls);
      const w2 = await worker(prefix, "w2", undefined);
      const [o1, o2] = await Promise.all([w1.run, w2.run]);
      expect(o1 + o2).toBe(40);
      expect([...w1.fetched, ...w2.fetched].sort()).toEqual([...urls].sort());
      expect(w1.fetched.length).toBeGreaterThan(0);
      expect(w2.fetched.length).toBeGreaterThan(0);
      expect(a.peak.value).toBeLessThanOrEqual(2);
      expect(b.peak.value).toBeLessThanOrEqual(2);
    },
    HANG_MS,
  );

  it(
    "a site held in both workers keeps its pages queued, untaken, while the other site's flow",
    async () => {
      const held = await site(5);
      const open = await site(5);
      const heldScope = new URL(held.origin).host;
      const prefix = `test:${crypto.randomUUID()}:`;
      const admin = await connectRedis();
      onCleanup(async () => {
        const keys = [...await admin.keys(`{${prefix}}*`), ...await admin.keys(`${prefix}*`)];
        if (keys.length > 0) await admin.del(keys);
      });
      // The held site's pages first in priority: a queue without throttling-aware takes would hand them out first.
      const urls = [
        ...Array.from({ length: 6 }, (_, i) => `${held.origin}/h${i}`),
        ...Array.from({ length: 20 }, (_, i) => `${open.origin}/o${i}`),
      ];
      const seed = new RedisRequestQueue<{ url: string; priority: number }>(await connectRedis(), {
        prefix,
      });
      for (const url of urls) seed.enqueue({ url, priority: url.includes("/h") ? 5 : 0 });
      await seed.close();
      await worker(prefix, "w1", undefined, heldScope);
      await worker(prefix, "w2", undefined, heldScope);
      await waitFor(
        async () => expect((await readRedisQueueStatus(admin, prefix)).done).toBe(20),
      );
      const status = await readRedisQueueStatus(admin, prefix);
      expect(held.arrivals.length).toBe(0);
      // Not even taken: no worker holds them in its gate, any other worker could take them.
      expect(status.scopes.find((s) => s.scope === heldScope)).toMatchObject({
        queued: 6,
        leased: 0,
      });
      expect(status).toMatchObject({ queued: 6, leased: 0, done: 20 });
    },
    HANG_MS,
  );

  it("examples/redis_shared_queue.ts crawls its 31 pages once across three workers", async () => {
    const run = await sharedQueueExample(() => {});
    expect(run).toMatchObject({ served: 31, distinct: 31, done: 31 });
    expect(run.perWorker.reduce((a, b) => a + b, 0)).toBe(31);
  }, HANG_MS);
});
