import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { VirtualTimeScheduler } from "rxjs";
import { describe, expect, it } from "vitest";
import {
  CONCURRENCY_IDLE,
  concurrencyAcquire,
  concurrencyRelease,
  createStatsRecorder,
  FIXED_WINDOW_UNUSED,
  type FixedWindowState,
  fixedWindowTake,
  type MinIntervalState,
  minIntervalTake,
  rateLimitFields,
  retryAfterDate,
  retryAfterSeconds,
  tokenBucketStart,
  type TokenBucketState,
  tokenBucketTake,
} from "../lib/demo/_limiters.ts";
import { type Site, startDemoSites, startSite } from "../lib/demo/sites.ts";
import { runProcess } from "./_helpers/run_process.ts";

// ---------------------------------------------------------------------------
// Pure limiters

describe("tokenBucketTake()", () => {
  it("tokenBucketTake() admits the burst at once, then one request per 1000 / rate ms", () => {
    const config = { ratePerSec: 10, burst: 3 };
    // [arrival ms, admitted, remaining after, next token in ms]
    const table: [number, boolean, number, number][] = [
      [0, true, 2, 0],
      [0, true, 1, 0],
      [0, true, 0, 100],
      [0, false, 0, 100],
      [50, false, 0, 50],
      [100, true, 0, 100],
      [150, false, 0, 50],
      [200, true, 0, 100],
      [500, true, 2, 0], // three tokens' worth of time refills a full bucket
      [10_000, true, 2, 0], // never more than the burst
    ];
    let state: TokenBucketState = tokenBucketStart(config, 0);
    for (const [at, allowed, remaining, nextTokenInMs] of table) {
      const d = tokenBucketTake(config, state, at);
      expect({ at, allowed: d.allowed, remaining: d.remaining, next: d.nextTokenInMs })
        .toEqual({ at, allowed, remaining, next: expect.closeTo(nextTokenInMs, 6) });
      state = d.state;
    }
  });

  it("tokenBucketTake() admits a token accumulated from float fractions (rate 3/s)", () => {
    const config = { ratePerSec: 3, burst: 1 };
    let state = tokenBucketTake(config, tokenBucketStart(config, 0), 0).state;
    // 1000/3 ms in three unequal steps: the sum is one token up to rounding.
    for (const at of [100, 200]) state = tokenBucketTake(config, state, at).state;
    expect(tokenBucketTake(config, state, 1000 / 3).allowed).toBe(true);
  });

  it("tokenBucketTake() mints no tokens when the clock steps back", () => {
    const config = { ratePerSec: 10, burst: 1 };
    const empty = tokenBucketTake(config, tokenBucketStart(config, 1000), 1000).state;
    const back = tokenBucketTake(config, empty, 0);
    expect(back.allowed).toBe(false);
    expect(tokenBucketTake(config, back.state, 1099).allowed).toBe(false);
    expect(tokenBucketTake(config, back.state, 1100).allowed).toBe(true);
  });

  it("tokenBucketTake() with an infinite rate admits everything", () => {
    const config = { ratePerSec: Infinity, burst: 1 };
    let state = tokenBucketStart(config, 0);
    for (let i = 0; i < 5; i++) {
      const d = tokenBucketTake(config, state, 0);
      expect(d.allowed).toBe(true);
      state = d.state;
    }
  });

  it("tokenBucketTake() never admits more than burst + rate * span in any span", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.integer({ min: 0, max: 200 }), { minLength: 1, maxLength: 60 }),
        (ratePerSec, burst, gaps) => {
          const config = { ratePerSec, burst };
          let now = 0;
          let state = tokenBucketStart(config, 0);
          const admitted: number[] = [];
          for (const gap of gaps) {
            now += gap;
            const d = tokenBucketTake(config, state, now);
            state = d.state;
            if (d.allowed) admitted.push(now);
          }
          for (let i = 0; i < admitted.length; i++) {
            for (let j = i; j < admitted.length; j++) {
              const span = admitted[j]! - admitted[i]!;
              expect(j - i + 1).toBeLessThanOrEqual(burst + (ratePerSec * span) / 1000 + 1e-6);
            }
          }
        },
      ),
    );
  });
});

describe("concurrencyAcquire()", () => {
  it("concurrencyAcquire() admits up to the limit and concurrencyRelease() frees a slot", () => {
    let state = CONCURRENCY_IDLE;
    const admitted: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const d = concurrencyAcquire(2, state);
      admitted.push(d.allowed);
      state = d.state;
    }
    expect(admitted).toEqual([true, true, false]);
    expect(state.inFlight).toBe(2);
    state = concurrencyRelease(state);
    expect(concurrencyAcquire(2, state).allowed).toBe(true);
    expect(concurrencyRelease(CONCURRENCY_IDLE).inFlight).toBe(0);
  });
});

describe("fixedWindowTake()", () => {
  it("fixedWindowTake() counts per window, starting at first use, back to back", () => {
    const config = { quota: 2, windowMs: 1000 };
    // [arrival ms, admitted, remaining, reset in ms]
    const table: [number, boolean, number, number][] = [
      [300, true, 1, 1000],
      [800, true, 0, 500],
      [1299, false, 0, 1],
      [1300, true, 1, 1000],
      [3750, true, 1, 550], // windows stay aligned to 300 + k * 1000 after a quiet spell
      [3900, true, 0, 400],
      [4000, false, 0, 300],
    ];
    let state: FixedWindowState = FIXED_WINDOW_UNUSED;
    for (const [at, allowed, remaining, resetInMs] of table) {
      const d = fixedWindowTake(config, state, at);
      expect({ at, allowed: d.allowed, remaining: d.remaining, reset: d.resetInMs })
        .toEqual({ at, allowed, remaining, reset: resetInMs });
      state = d.state;
    }
  });

  it('fixedWindowTake() with anchor "request" begins each window at the first arrival after the last one ended', () => {
    const config = { quota: 2, windowMs: 1000, anchor: "request" } as const;
    // [arrival ms, admitted, remaining, reset in ms]
    const table: [number, boolean, number, number][] = [
      [300, true, 1, 1000],
      [800, true, 0, 500],
      [1299, false, 0, 1],
      [1310, true, 1, 1000], // the second window begins here, not at 1300
      [2305, true, 0, 5],
      [2309, false, 0, 1],
      [3750, true, 1, 1000], // and after a quiet spell, here
    ];
    let state: FixedWindowState = FIXED_WINDOW_UNUSED;
    for (const [at, allowed, remaining, resetInMs] of table) {
      const d = fixedWindowTake(config, state, at);
      expect({ at, allowed: d.allowed, remaining: d.remaining, reset: d.resetInMs })
        .toEqual({ at, allowed, remaining, reset: resetInMs });
      state = d.state;
    }
  });
});

describe("minIntervalTake()", () => {
  it("minIntervalTake() admits arrivals at least interval - tolerance after the last admitted", () => {
    const config = { intervalMs: 500, toleranceMs: 10 };
    // [arrival ms, admitted, wait ms]
    const table: [number, boolean, number][] = [
      [0, true, 0],
      [100, false, 390],
      [489, false, 1], // rejected arrivals do not restart the interval
      [490, true, 0],
      [1000, true, 0],
    ];
    let state: MinIntervalState = { lastAdmittedMs: undefined };
    for (const [at, allowed, waitMs] of table) {
      const d = minIntervalTake(config, state, at);
      expect({ at, allowed: d.allowed, wait: d.waitMs }).toEqual({ at, allowed, wait: waitMs });
      state = d.state;
    }
  });
});

describe("header helpers", () => {
  it("retryAfterSeconds() rounds up to whole seconds, at least 1", () => {
    expect([0, 1, 999, 1000, 1001, 2500].map(retryAfterSeconds)).toEqual([
      "1",
      "1",
      "1",
      "1",
      "2",
      "3",
    ]);
  });

  it("retryAfterDate() writes an IMF-fixdate rounded up to the next second", () => {
    expect(retryAfterDate(0, 1000)).toBe("Thu, 01 Jan 1970 00:00:01 GMT");
    expect(retryAfterDate(1500, 1000)).toBe("Thu, 01 Jan 1970 00:00:03 GMT");
  });

  it("rateLimitFields() writes the structured RateLimit and RateLimit-Policy fields", () => {
    expect(rateLimitFields(100, 60_000, 42, 12_300)).toEqual({
      "ratelimit-policy": '"default";q=100;w=60',
      ratelimit: '"default";r=42;t=13',
    });
  });
});

describe("createStatsRecorder()", () => {
  it("createStatsRecorder() counts statuses, rejections, in-flight peaks and aborts", () => {
    const rec = createStatsRecorder();
    rec.enter();
    rec.arrive(0, "/a", 200);
    rec.enter();
    rec.arrive(5, "/b", 429);
    rec.depart(false);
    rec.enter();
    rec.arrive(7, "/c", 503);
    rec.depart(false);
    rec.depart(true);
    const s = rec.snapshot();
    expect(s).toEqual({
      requests: 3,
      byStatus: { 200: 1, 429: 1, 503: 1 },
      arrivals: [0, 5, 7],
      log: [
        { atMs: 0, path: "/a", status: 200 },
        { atMs: 5, path: "/b", status: 429 },
        { atMs: 7, path: "/c", status: 503 },
      ],
      inFlight: 0,
      maxInFlight: 2,
      rejected: 2,
      aborted: 1,
    });
  });
});

// ---------------------------------------------------------------------------
// Real loopback servers

/** Waits (real time, for real I/O) until `condition` holds. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`Timed out waiting for ${what}`);
}

/**
 * Sends `count` concurrent GETs to a site on a virtual clock: every arrival
 * sees the same time, and admitted answers are released by one flush once all
 * have arrived.
 */
async function hammer(
  site: Site,
  scheduler: VirtualTimeScheduler,
  count: number,
  path = "/",
): Promise<Response[]> {
  const before = site.stats().requests;
  const responses = Array.from({ length: count }, () => fetch(`${site.url}${path}`));
  await until(() => site.stats().requests === before + count, `${count} arrivals`);
  scheduler.flush();
  return Promise.all(responses);
}

async function get(site: Site, scheduler: VirtualTimeScheduler, path: string): Promise<Response> {
  const [response] = await hammer(site, scheduler, 1, path);
  return response!;
}

/** Moves a virtual clock to `frame`. */
function advanceTo(scheduler: VirtualTimeScheduler, frame: number): void {
  scheduler.schedule(() => {}, frame - scheduler.frame);
  scheduler.flush();
}

function countBy(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}

describe("startSite()", () => {
  it("startSite() token bucket answers 429 past the burst when hammered", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "token-bucket", ratePerSec: 10, burst: 3, scheduler });
    try {
      const responses = await hammer(site, scheduler, 10);
      expect(countBy(responses.map((r) => r.status))).toEqual({ 200: 3, 429: 7 });
      const rejected = responses.find((r) => r.status === 429)!;
      expect(rejected.headers.get("retry-after")).toBeNull();
      await Promise.all(responses.map((r) => r.text()));
      const stats = site.stats();
      expect(stats.requests).toBe(10);
      expect(stats.byStatus).toEqual({ 200: 3, 429: 7 });
      expect(stats.rejected).toBe(7);
      expect(stats.arrivals).toEqual(Array(10).fill(0));
    } finally {
      await site.close();
    }
  });

  it("startSite() token bucket refills at its hidden rate on the server clock", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({
      style: "token-bucket",
      ratePerSec: 10,
      burst: 1,
      latencyMs: 0,
      retryAfter: true,
      scheduler,
    });
    try {
      expect((await get(site, scheduler, "/")).status).toBe(200);
      const early = await get(site, scheduler, "/");
      expect(early.status).toBe(429);
      expect(early.headers.get("retry-after")).toBe("1");
      advanceTo(scheduler, 99);
      expect((await get(site, scheduler, "/")).status).toBe(429);
      advanceTo(scheduler, 100);
      expect((await get(site, scheduler, "/")).status).toBe(200);
      expect(site.stats().log.map((a) => [a.atMs, a.status])).toEqual([
        [0, 200],
        [0, 429],
        [99, 429],
        [100, 200],
      ]);
    } finally {
      await site.close();
    }
  });

  it("startSite() token bucket on the real clock rejects a burst of 20", async () => {
    const site = await startSite({ style: "token-bucket", ratePerSec: 10, burst: 3 });
    try {
      const responses = await Promise.all(
        Array.from({ length: 20 }, () => fetch(`${site.url}/`)),
      );
      await Promise.all(responses.map((r) => r.text()));
      const statuses = countBy(responses.map((r) => r.status));
      expect(statuses[200]).toBeGreaterThanOrEqual(3);
      expect(statuses[429]).toBeGreaterThanOrEqual(1);
      expect(site.stats().rejected).toBe(statuses[429]);
    } finally {
      await site.close();
    }
  });

  it("startSite() hides its limit: no rate or limit header on any answer by default", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "token-bucket", ratePerSec: 10, burst: 1, scheduler });
    try {
      const responses = await hammer(site, scheduler, 2);
      for (const r of responses) {
        expect([...r.headers.keys()].filter((k) => /limit|rate|retry/i.test(k))).toEqual([]);
        await r.text();
      }
    } finally {
      await site.close();
    }
  });

  it("startSite() with rateLimitHeaders adds IETF RateLimit and RateLimit-Policy", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({
      style: "fixed-window",
      quota: 2,
      windowMs: 10_000,
      rateLimitHeaders: true,
      retryAfter: true,
      scheduler,
    });
    try {
      const responses = await hammer(site, scheduler, 3);
      expect(countBy(responses.map((r) => r.status))).toEqual({ 200: 2, 429: 1 });
      const rejected = responses.find((r) => r.status === 429)!;
      expect(rejected.headers.get("ratelimit-policy")).toBe('"default";q=2;w=10');
      expect(rejected.headers.get("ratelimit")).toBe('"default";r=0;t=10');
      expect(rejected.headers.get("retry-after")).toBe("10");
      await Promise.all(responses.map((r) => r.text()));
    } finally {
      await site.close();
    }
  });

  it("startSite() concurrency cap answers 503 with an HTTP-date Retry-After", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "concurrency-cap", maxConcurrency: 4, scheduler });
    try {
      // The four admitted answers wait for the flush, so all ten are in flight together.
      const responses = await hammer(site, scheduler, 10);
      expect(countBy(responses.map((r) => r.status))).toEqual({ 200: 4, 503: 6 });
      for (const r of responses.filter((r) => r.status === 503)) {
        const retryAfter = r.headers.get("retry-after")!;
        expect(retryAfter).toBe("Thu, 01 Jan 1970 00:00:01 GMT");
        expect(Date.parse(retryAfter)).toBe(1000);
      }
      await Promise.all(responses.map((r) => r.text()));
      await until(() => site.stats().inFlight === 0, "slots to be freed");
      // With the slots free again, the next four are admitted.
      const again = await hammer(site, scheduler, 4);
      expect(again.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      await Promise.all(again.map((r) => r.text()));
      expect(site.stats().rejected).toBe(6);
      expect(site.stats().maxInFlight).toBeGreaterThanOrEqual(5);
    } finally {
      await site.close();
    }
  });

  it("startSite() robots-delay serves Crawl-delay and answers 429 to faster arrivals", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "robots-delay", crawlDelayMs: 500, scheduler });
    try {
      const robots = await get(site, scheduler, "/robots.txt");
      expect(robots.status).toBe(200);
      expect(await robots.text()).toBe("User-agent: *\nCrawl-delay: 0.5\n");
      expect(scheduler.frame).toBe(10);
      expect((await get(site, scheduler, "/page/1")).status).toBe(200); // robots.txt is not limited
      expect((await get(site, scheduler, "/page/2")).status).toBe(429);
      advanceTo(scheduler, 499); // 10 ms early at 10 + 500: within the tolerance is 500
      expect((await get(site, scheduler, "/page/2")).status).toBe(429);
      advanceTo(scheduler, 500);
      expect((await get(site, scheduler, "/page/2")).status).toBe(200);
      expect(site.stats().byStatus).toEqual({ 200: 3, 429: 2 });
    } finally {
      await site.close();
    }
  });

  it("startSite() answers 404 for robots.txt unless it is a robots-delay site", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "fine", scheduler });
    try {
      const robots = await get(site, scheduler, "/robots.txt");
      expect(robots.status).toBe(404);
      await robots.text();
    } finally {
      await site.close();
    }
  });

  it("startSite() serves a tree of pages linking /page/N to /page/2N and /page/2N+1", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "fine", pages: 7, scheduler });
    try {
      const links = async (path: string) => {
        const r = await get(site, scheduler, path);
        expect(r.status).toBe(200);
        expect(r.headers.get("content-type")).toBe("text/html; charset=utf-8");
        return [...(await r.text()).matchAll(/href="([^"]+)"/g)].map((m) => m[1]);
      };
      expect(await links("/")).toEqual(["/page/1"]);
      expect(await links("/page/1")).toEqual(["/page/2", "/page/3"]);
      expect(await links("/page/3")).toEqual(["/page/6", "/page/7"]);
      expect(await links("/page/4")).toEqual([]);
      expect(await links("/elsewhere?q=1")).toEqual(["/"]);
      expect(site.stats().log.map((a) => a.path)).toEqual([
        "/",
        "/page/1",
        "/page/3",
        "/page/4",
        "/elsewhere",
      ]);
    } finally {
      await site.close();
    }
  });

  it("startSite() slow site takes a latency from its range, the same for a path every time", async () => {
    const scheduler = new VirtualTimeScheduler();
    const site = await startSite({ style: "slow", scheduler });
    try {
      const latency = async (path: string) => {
        const start = scheduler.frame;
        await (await get(site, scheduler, path)).text();
        return scheduler.frame - start;
      };
      const first = await latency("/page/5");
      expect(first).toBeGreaterThanOrEqual(300);
      expect(first).toBeLessThanOrEqual(800);
      expect(await latency("/page/5")).toBe(first);
    } finally {
      await site.close();
    }
    const injected = new VirtualTimeScheduler();
    const seeded = await startSite({ style: "slow", random: () => 0.5, scheduler: injected });
    try {
      await (await get(seeded, injected, "/")).text();
      expect(injected.frame).toBe(550);
    } finally {
      await seeded.close();
    }
  });

  it("startSite() close() frees the port even with an answer pending", async () => {
    const scheduler = new VirtualTimeScheduler(); // never flushed: the answer stays pending
    const site = await startSite({ style: "fine", scheduler });
    const pending = fetch(`${site.url}/`).then(
      (r) => r.status,
      () => "failed",
    );
    await until(() => site.stats().requests === 1, "the arrival");
    await site.close();
    expect(await pending).toBe("failed");
    await expect(fetch(`${site.url}/`)).rejects.toThrow();
    const other = createServer();
    await new Promise<void>((resolve, reject) => {
      other.once("error", reject);
      other.listen(site.port, "127.0.0.1", resolve);
    });
    await new Promise((resolve) => other.close(resolve));
    await site.close(); // twice is fine
  });

  it("startSite() leaves no handle that keeps the process alive after close()", async () => {
    const moduleUrl = new URL("../lib/demo/sites.ts", import.meta.url).href;
    const code = `const { startSite } = await import(${JSON.stringify(moduleUrl)});
for (const style of ["token-bucket", "concurrency-cap", "slow", "robots-delay", "fine"]) {
  const site = await startSite({ style });
  const statuses = await Promise.all([1, 2, 3].map(() => fetch(site.url + "/").then((r) => r.text().then(() => r.status))));
  fetch(site.url + "/page/1").catch(() => {});
  await site.close();
  console.log(style, statuses.join(","));
}`;
    const runtime = process.versions["bun"] ? "bun" : "Deno" in globalThis ? "deno" : "node";
    const args = runtime === "bun"
      ? ["-e", code]
      : runtime === "deno"
      ? ["eval", code]
      : ["--import", "tsx", "--input-type=module", "-e", code];
    const root = fileURLToPath(new URL("..", import.meta.url));
    const run = await runProcess(process.execPath, args, { cwd: root, timeoutMs: 20_000 });
    const output = run.stdout + run.stderr;
    const code_ = run.code;
    expect(output).toContain("fine 200,200,200");
    expect(code_).toBe(0);
  }, 120_000);

  it("startSite() rejects an out-of-range option before listening, naming it", () => {
    expect(() => startSite({ style: "token-bucket", ratePerSec: -1 })).toThrow(
      new RangeError(
        "Cannot start site as 'ratePerSec' must be a finite number > 0: current value is -1",
      ),
    );
    expect(() => startSite({ style: "concurrency-cap", maxConcurrency: 1.5 })).toThrow(
      /'maxConcurrency' must be an integer >= 1: current value is 1.5/,
    );
    expect(() => startSite({ style: "nope" as "fine" })).toThrow(/'style' must be one of/);
    expect(() => startSite({ style: "slow", slowLatencyMs: [500, 100] })).toThrow(
      /'slowLatencyMs\[1\]' must be >= 500: current value is 100/,
    );
  });
});

describe("startDemoSites()", () => {
  it("startDemoSites() starts one site per style with its hidden limit in words", async () => {
    const demo = await startDemoSites();
    try {
      expect(demo.sites.map((s) => [s.name, s.style])).toEqual([
        ["bucket", "token-bucket"],
        ["capped", "concurrency-cap"],
        ["slow", "slow"],
        ["robots", "robots-delay"],
        ["fine", "fine"],
      ]);
      expect(new Set(demo.sites.map((s) => s.port)).size).toBe(5);
      for (const s of demo.sites) {
        expect(s.url).toBe(`http://127.0.0.1:${s.port}`);
        expect(s.hiddenLimit.length).toBeGreaterThan(0);
      }
      const robots = demo.sites.find((s) => s.name === "robots")!;
      const r = await fetch(`${robots.url}/robots.txt`);
      expect(await r.text()).toBe("User-agent: *\nCrawl-delay: 0.5\n");
      expect(robots.stats().requests).toBe(1);
    } finally {
      await demo.close();
    }
    for (const s of demo.sites) await expect(fetch(`${s.url}/`)).rejects.toThrow();
  });
});
