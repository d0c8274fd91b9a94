import { TestScheduler } from "rxjs/testing";
import { describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AttemptsExhaustedError, crawl } from "../lib/crawl.ts";
import { RobotsTxtDisallowedError } from "../lib/robots/robots_download.ts";
import type { Outcome } from "../lib/outcome.ts";
import type { RequestObject } from "../lib/request.ts";
import { RequestQueue } from "../lib/queue/request_queue.ts";
import { createSimulatedSite, type SimulatedResponse } from "../lib/sim/simulated_site.ts";
import { createThrottler, type Throttler } from "../lib/throttler/throttler.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";
import { from, lastValueFrom, map, timer, toArray } from "rxjs";

const SITE = "http://site.test";

/** Page n links to pages 2n+1 and 2n+2, up to `pages`, and back to the home page. */
function links(url: string, pages: number): string[] {
  const n = Number(new URL(url).pathname.slice(3));
  return [2 * n + 1, 2 * n + 2].filter((c) => c < pages).map((c) => `${SITE}/p/${c}`).concat(
    `${SITE}/p/0`,
  );
}

function setup<R>(settings: ThrottlerSettingsInput): {
  scheduler: TestScheduler;
  throttler: Throttler<R>;
} {
  const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
  const throttler = createThrottler<R>({ jitter: [0, 0], ...settings }, {
    scheduler,
    random: () => 0.5,
  });
  return { scheduler, throttler };
}

/** Runs a virtual-time crawl to its end; returns `[url, sentAt]` per outcome and whether it completed. */
function runVirtual<R, T>(
  scheduler: TestScheduler,
  run: () => ReturnType<typeof crawl<R, T>>,
): { outcomes: Outcome<R, T>[]; completed: boolean } {
  const outcomes: Outcome<R, T>[] = [];
  let completed = false;
  scheduler.run(() => {
    run().subscribe({
      next: (o) => outcomes.push(o),
      complete: () => (completed = true),
    });
  });
  return { outcomes, completed };
}

function urlOf(r: unknown): string {
  return typeof r === "string" ? r : (r as RequestObject).url;
}

describe("crawl()", () => {
  it("crawl() follows links on a rate-limited simulated site: every page once, retries after 429, then completes", () => {
    const { scheduler, throttler } = setup<string>({ downloadDelayMs: 100 });
    const site = createSimulatedSite({
      ratePerSec: 5,
      burst: 2,
      latencyMs: 20,
      retryAfter: true,
      scheduler,
    });
    const queue = new RequestQueue<string>({
      view: throttler,
      scheduler,
      start: [`${SITE}/p/0`],
    });
    const { outcomes, completed } = runVirtual(scheduler, () =>
      crawl<string, SimulatedResponse>({
        throttler,
        queue,
        download: (url, { signal }) => site.download(url, { signal }),
        discover: (o) => o.kind === "response" ? links(o.request, 40) : [],
        backoff: { retry: { times: 10 } },
      }));
    expect(completed).toBe(true);
    const pages = outcomes.map((o) => o.request).sort();
    expect(pages).toEqual(Array.from({ length: 40 }, (_, i) => `${SITE}/p/${i}`).sort());
    expect(outcomes.every((o) => o.kind === "response" && o.response.status === 200)).toBe(true);
    const stats = site.stats();
    // Every page answered 200 exactly once; the home page's back-links were filtered.
    expect(stats.byStatus[200]).toBe(40);
    expect(stats.byStatus[429]).toBeGreaterThan(0); // retried, not lost
    expect(queue.stats()).toMatchObject({ pending: 0, inFlight: 0, completed: 40 });
    expect(queue.stats().filtered).toBeGreaterThan(0);
    // Sends of the one scope are at least the delay apart.
    const sends = outcomes.map((o) => o.sentAt).sort((a, b) => a - b);
    for (let i = 1; i < sends.length; i++) {
      expect(sends[i]! - sends[i - 1]!).toBeGreaterThanOrEqual(100);
    }
  });

  it("crawl() starts a request its queue says others tried at their count: retries left, not all again", async () => {
    const throttler = createThrottler<string>({ adaptive: false, backoff: { windowMs: 0 } });
    const done: [string, boolean | undefined][] = [];
    const sent: [string, number][] = [];
    const recorded: [string, number][] = [];
    const queue = {
      requests$: from(["https://a.test/new", "https://b.test/retaken", "https://c.test/poison"]),
      enqueue: () => {},
      markDone: (r: string, d?: { failed: boolean }) => void done.push([r, d?.failed]),
      markUnsent: () => {},
      // A shared queue's re-handed requests: two earlier takes by workers
      // that died, and three (as many as 1 + 2 retries allow).
      attemptsBefore: (r: string) => (r.includes("retaken") ? 2 : r.includes("poison") ? 3 : 0),
      // Told every attempt before its download (a shared queue counts the retries).
      recordAttempt: (r: string, attempt: number) => void recorded.push([r, attempt]),
    };
    const outcomes = await lastValueFrom(
      crawl<string, { status: number; headers: Record<string, string> }>({
        throttler,
        queue,
        download: (url, { attempt }) => {
          sent.push([url, attempt]);
          return Promise.resolve({ status: 503, headers: {} });
        },
        backoff: { retry: { times: 2, refusedTimes: 0 } },
      }).pipe(toArray()),
    );
    expect(sent.filter(([u]) => u.includes("b.test"))).toEqual([["https://b.test/retaken", 3]]);
    expect(sent.filter(([u]) => u.includes("a.test")).map(([, a]) => a)).toEqual([1, 2, 3]);
    expect(outcomes.map((o) => [o.request, o.attempt, o.exhausted]).sort()).toEqual([
      ["https://a.test/new", 3, true],
      ["https://b.test/retaken", 3, true],
      ["https://c.test/poison", 4, true],
    ]);
    // The one tried as often as allowed is given up unsent: an error outcome, done as failed.
    expect(sent.some(([u]) => u.includes("c.test"))).toBe(false);
    expect(recorded).toEqual(sent);
    const poison = outcomes.find((o) => o.request.includes("c.test"))!;
    expect(poison.kind === "error" && poison.error).toBeInstanceOf(AttemptsExhaustedError);
    expect(done.sort()).toEqual([
      ["https://a.test/new", true],
      ["https://b.test/retaken", true],
      ["https://c.test/poison", true],
    ]);
  });

  it("crawl() enqueues what discover() returns asynchronously before marking the parent done", async () => {
    const throttler = createThrottler<string>({});
    const dir = mkdtempSync(join(tmpdir(), "politely-crawl-"));
    try {
      const queue = new RequestQueue<string>({
        view: throttler,
        jobDir: dir,
        start: ["https://a.test/0"],
      });
      const seen: string[] = [];
      await new Promise<void>((resolve, reject) => {
        crawl<string, string>({
          throttler,
          queue,
          download: (url) => Promise.resolve(url),
          discover: async (o) => {
            await Promise.resolve();
            const n = Number(o.request.slice(-1));
            return n < 3 ? [`https://a.test/${n + 1}`] : [];
          },
          backoff: false,
        }).subscribe({ next: (o) => seen.push(o.request), error: reject, complete: resolve });
      });
      expect(seen).toEqual([
        "https://a.test/0",
        "https://a.test/1",
        "https://a.test/2",
        "https://a.test/3",
      ]);
      queue.close();
      // Nothing is left pending in the job directory.
      const resumed = new RequestQueue<string>({ jobDir: dir });
      expect(resumed.size).toBe(0);
      resumed.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("crawl() unsubscribed mid-crawl leaves the requests in flight pending in the job directory", () => {
    const { scheduler, throttler } = setup<string>({ concurrentRequestsPerDomain: 2 });
    const dir = mkdtempSync(join(tmpdir(), "politely-crawl-"));
    try {
      const start = ["https://a.test/1", "https://a.test/2", "https://a.test/3"];
      const queue = new RequestQueue<string>({ view: throttler, scheduler, jobDir: dir, start });
      const done: string[] = [];
      scheduler.run(() => {
        const sub = crawl<string, string>({
          throttler,
          queue,
          download: (url) => timer(url.endsWith("1") ? 10 : 1000, scheduler).pipe(map(() => url)),
          backoff: false,
        }).subscribe((o) => done.push(o.request));
        scheduler.schedule(() => sub.unsubscribe(), 50);
      });
      expect(done).toEqual(["https://a.test/1"]);
      queue.close();
      const resumed = new RequestQueue<string>({ jobDir: dir });
      expect(resumed.size).toBe(2);
      resumed.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("crawl() gives back an outcome that was never sent (LOCAL_FAILURE) unsent: it completes, and the job directory keeps it", () => {
    const { scheduler, throttler } = setup<string>({ concurrentRequestsPerDomain: 2 });
    const dir = mkdtempSync(join(tmpdir(), "politely-crawl-"));
    try {
      const start = ["https://a.test/1", "https://a.test/2", "https://a.test/3"];
      const queue = new RequestQueue<string>({ view: throttler, scheduler, jobDir: dir, start });
      // robots.txt unreachable for /2: an error of this side, the URL never sent.
      const unsent = new RobotsTxtDisallowedError("https://a.test/2", {
        url: "https://a.test/robots.txt",
        source: "unreachable",
        status: 503,
        error: undefined,
      });
      const { outcomes, completed } = runVirtual(scheduler, () =>
        crawl<string, string>({
          throttler,
          queue,
          download: (url) =>
            url.endsWith("2")
              ? timer(10, scheduler).pipe(map(() => {
                throw unsent;
              }))
              : timer(10, scheduler).pipe(map(() => url)),
          backoff: false,
        }));
      expect(completed).toBe(true);
      expect(outcomes.map((o) => `${o.request} ${o.kind}`).sort()).toEqual([
        "https://a.test/1 response",
        "https://a.test/2 error",
        "https://a.test/3 response",
      ]);
      expect(queue.stats()).toMatchObject({ completed: 2, unsent: 1, inFlight: 0, pending: 0 });
      queue.close();
      // Kept through the compaction at close: a resume sends it.
      const resumed = new RequestQueue<string>({ jobDir: dir });
      expect(resumed.size).toBe(1);
      const again: string[] = [];
      resumed.requests$.subscribe((r) => again.push(r)).unsubscribe();
      expect(again).toEqual(["https://a.test/2"]);
      resumed.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("crawl() through the queue waits a request's throttlingDelayMs once, not twice", () => {
    const { scheduler, throttler } = setup<RequestObject>({});
    const queue = new RequestQueue<RequestObject>({
      view: throttler,
      scheduler,
      start: [
        { url: "https://a.test/late", meta: { throttlingDelayMs: 500 } },
        { url: "https://a.test/now" },
      ],
    });
    const { outcomes } = runVirtual(scheduler, () =>
      crawl<RequestObject, string>({
        throttler,
        queue,
        download: (r) => timer(1, scheduler).pipe(map(() => r.url)),
        backoff: false,
      }));
    const sentAt = Object.fromEntries(outcomes.map((o) => [urlOf(o.request), o.sentAt]));
    expect(sentAt).toEqual({ "https://a.test/late": 500, "https://a.test/now": 0 });
  });
});

describe("crawl() head-of-line cases through the real throttler", () => {
  function sends(
    settings: ThrottlerSettingsInput,
    start: RequestObject[],
    latencyMs: (url: string) => number = () => 10,
  ): Record<string, number> {
    const { scheduler, throttler } = setup<RequestObject>(settings);
    const queue = new RequestQueue<RequestObject>({ view: throttler, scheduler, start });
    const { outcomes, completed } = runVirtual(scheduler, () =>
      crawl<RequestObject, string>({
        throttler,
        queue,
        download: (r) => timer(latencyMs(r.url), scheduler).pipe(map(() => r.url)),
        backoff: false,
      }));
    expect(completed).toBe(true);
    return Object.fromEntries(outcomes.map((o) => [urlOf(o.request), o.sentAt]));
  }

  it("crawl() sends a fast scope at its own pace while a slow scope (long delay) waits", () => {
    const slow = [1, 2, 3].map((i) => ({ url: `https://slow.test/${i}`, priority: 5 }));
    const fast = [1, 2, 3, 4].map((i) => ({ url: `https://fast.test/${i}` }));
    const at = sends(
      { downloadDelayMs: 100, scopes: { "slow.test": { delayMs: 10_000 } } },
      [...slow, ...fast],
    );
    expect([1, 2, 3].map((i) => at[`https://slow.test/${i}`])).toEqual([0, 10_000, 20_000]);
    expect([1, 2, 3, 4].map((i) => at[`https://fast.test/${i}`])).toEqual([0, 100, 200, 300]);
  });

  it("crawl() sends ready requests while a throttlingDelayMs request ahead of them waits aside", () => {
    const at = sends({}, [
      { url: "https://a.test/delayed", priority: 10, meta: { throttlingDelayMs: 2000 } },
      { url: "https://a.test/1" },
      { url: "https://b.test/1" },
    ]);
    expect(at).toEqual({
      "https://a.test/delayed": 2000,
      "https://a.test/1": 0,
      "https://b.test/1": 0,
    });
  });

  it("crawl() sends another scope's requests while a scope is at full concurrency", () => {
    const full = [1, 2, 3].map((i) => ({ url: `https://full.test/${i}`, priority: 5 }));
    const other = [1, 2].map((i) => ({ url: `https://other.test/${i}` }));
    const at = sends(
      { scopes: { "full.test": { concurrency: 1 } } },
      [...full, ...other],
      (url) => (url.includes("full.test") ? 1000 : 10),
    );
    expect([1, 2, 3].map((i) => at[`https://full.test/${i}`])).toEqual([0, 1000, 2000]);
    expect([1, 2].map((i) => at[`https://other.test/${i}`])).toEqual([0, 0]);
  });
});

describe("crawl() over loopback", () => {
  it("crawl() fetches a real loopback site by following its links, each page once", async () => {
    const server = await startRecordingServer((req, res) => {
      const n = Number((req.url ?? "/0").slice(1));
      const kids = [2 * n + 1, 2 * n + 2].filter((c) => c < 7);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(kids.map((k) => `/${k}`).concat("/0").join("\n"));
    });
    try {
      const throttler = createThrottler<string>({ downloadDelayMs: 5 });
      const queue = new RequestQueue<string>({ view: throttler, start: [`${server.origin}/0`] });
      const got: string[] = [];
      await new Promise<void>((resolve, reject) => {
        crawl<string, string>({
          throttler,
          queue,
          download: (url, { signal }) => fetch(url, { signal }).then((r) => r.text()),
          discover: (o) =>
            o.kind === "response"
              ? o.response.split("\n").map((p) => new URL(p, o.request).href)
              : [],
        }).subscribe({
          next: (o) => got.push(new URL(o.request).pathname),
          error: reject,
          complete: resolve,
        });
      });
      expect(got.sort()).toEqual(["/0", "/1", "/2", "/3", "/4", "/5", "/6"]);
      expect(server.arrivals.map((a) => a.path).sort()).toEqual(got);
    } finally {
      await server.close();
    }
  });
});
