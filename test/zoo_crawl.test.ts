import { describe, expect, it } from "vitest";
import {
  type Announce,
  createZooLimiter,
  idealMs,
  type LimiterSpec,
  validateZooSpec,
  type ZooSiteSpec,
} from "../lib/sim/zoo.ts";
import { runZooCrawl } from "../lib/sim/zoo_crawl.ts";
import { drawnSlidingHeaderSites, generateZooSites } from "../lib/sim/zoo_random.ts";
import {
  flakySites,
  headerlessGridSites,
  issueShapeSites,
  retryAfterSites,
} from "../lib/sim/zoo_issue_sites.ts";
import { createZooSite } from "../lib/sim/zoo_site.ts";
import { VirtualTimeScheduler } from "rxjs";

/**
 * Crawls `pages` pages of `site` with the defaults (ten retries) in virtual
 * time: every page fetched, at least `atLeast` of the ideal speed, at most
 * `refusedAtMost` refused.
 */
function expectReaches(
  site: ZooSiteSpec,
  pages: number,
  atLeast: number,
  refusedAtMost: number,
  outboundJitterMs?: number,
): void {
  const r = runZooCrawl({
    site,
    pages,
    ...(outboundJitterMs === undefined ? {} : { outboundJitterMs }),
    settings: { retry: { times: 10 } },
  });
  expect(r.ok).toBe(pages);
  expect(r.efficiency).toBeGreaterThanOrEqual(atLeast);
  expect(r.refused).toBeLessThanOrEqual(refusedAtMost);
}

describe("createZooLimiter()", () => {
  it("createZooLimiter() answers each shape as its server would", () => {
    // [limiter, arrival times, expected statuses]
    const table: [ZooSiteSpec["limiter"], number[], string][] = [
      [
        { shape: "token-bucket", ratePerSec: 10, burst: 2 },
        [0, 0, 0, 100, 150],
        "200,200,429,200,429",
      ],
      [{ shape: "token-bucket", ratePerSec: 10, burst: 1 }, [0, 99, 200], "200,429,200"],
      [
        { shape: "fixed-window", quota: 2, windowMs: 1000 },
        [0, 10, 20, 999, 1000],
        "200,200,429,429,200",
      ],
      [
        { shape: "sliding-window", quota: 2, windowMs: 1000 },
        [0, 500, 900, 1000, 1400],
        "200,200,429,200,429",
      ],
      [{ shape: "none" }, [0, 0, 0], "200,200,200"],
    ];
    for (const [limiter, times, expected] of table) {
      const l = createZooLimiter({ name: "t", limiter, latencyMs: 10 });
      expect({ limiter, got: times.map((t) => l.arrive(t).status).join() })
        .toEqual({ limiter, got: expected });
    }
  });

  it("createZooLimiter() with a leaky queue delays early requests to their turn and refuses past the queue", () => {
    // 10/s, two may wait: turns at 0, 100, 200, 300, ...
    const l = createZooLimiter({
      name: "q",
      limiter: { shape: "leaky-queue", ratePerSec: 10, burst: 2 },
      latencyMs: 10,
      status: 503,
    });
    // [arrival, status, latency (the wait for its turn, then 10 ms)]
    const table: [number, number, number][] = [
      [0, 200, 10],
      [0, 200, 110],
      [0, 200, 210],
      [0, 503, 10], // its turn would be at 300: three waiting
      [150, 200, 160], // its turn at 300
      [250, 200, 160], // at 400
      [260, 503, 10], // at 500: three waiting
    ];
    for (const [at, status, latency] of table) {
      const d = l.arrive(at);
      expect({ at, status: d.status, latency: Math.round(d.latencyMs) }).toEqual({
        at,
        status,
        latency,
      });
    }
  });

  it("createZooLimiter() caps concurrency until a slot is released, and queues then sheds under load", () => {
    const cap = createZooLimiter({
      name: "c",
      limiter: { shape: "concurrency", maxConcurrency: 1 },
      latencyMs: 10,
      status: 503,
    });
    const first = cap.arrive(0);
    expect(cap.arrive(0).status).toBe(503);
    first.release?.();
    expect(cap.arrive(1).status).toBe(200);
    const shed = createZooLimiter({
      name: "s",
      limiter: { shape: "load-shed", workers: 1, maxQueue: 1 },
      latencyMs: 100,
      status: 503,
    });
    expect(
      [shed.arrive(0), shed.arrive(0), shed.arrive(0)].map((d) => `${d.status}/${d.latencyMs}`),
    )
      .toEqual(["200/100", "200/200", "503/100"]);
  });

  it("createZooLimiter() announces its budget in each header family and Retry-After on refusals", () => {
    const spec = (announce: NonNullable<ZooSiteSpec["announce"]>): ZooSiteSpec => ({
      name: "a",
      limiter: { shape: "fixed-window", quota: 1, windowMs: 2000 },
      latencyMs: 10,
      announce,
      retryAfter: "seconds",
    });
    const ietf = createZooLimiter(spec("ietf"));
    ietf.arrive(0);
    expect(ietf.arrive(500).headers).toMatchObject({
      "ratelimit-policy": '"default";q=1;w=2',
      ratelimit: '"default";r=0;t=2',
      "retry-after": "2",
    });
    const x = createZooLimiter(spec("x-delta"));
    expect(x.arrive(0).headers).toMatchObject({
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
    });
  });

  it("createZooLimiter() with announceOn refusals says nothing while it admits", () => {
    const l = createZooLimiter({
      name: "a",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 1 },
      latencyMs: 10,
      announce: "x-delta",
      announceOn: "refusals",
    });
    const admitted = l.arrive(0);
    expect(admitted.status).toBe(200);
    expect(admitted.headers).toEqual({});
    expect(admitted.announced).toBeUndefined();
    const refused = l.arrive(10);
    expect(refused.status).toBe(429);
    expect(refused.headers).toMatchObject({
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
    });
    expect(refused.announced).toEqual({ remaining: 0, resetInMs: expect.any(Number) });
  });

  it("createZooLimiter() names a bad field", () => {
    expect(() =>
      createZooLimiter({
        name: "b",
        limiter: { shape: "token-bucket", ratePerSec: 0, burst: 1 },
        latencyMs: 1,
      })
    )
      .toThrow(/'limiter\.ratePerSec' must be a finite number > 0: current value is 0/);
    expect(() =>
      createZooLimiter({
        name: "b",
        limiter: { shape: "fixed-window", quota: 1.5, windowMs: 1 },
        latencyMs: 1,
      })
    )
      .toThrow(/'limiter\.quota'/);
    expect(() =>
      createZooLimiter({
        name: "b",
        limiter: {
          shape: "fixed-window",
          quota: 1,
          windowMs: 1,
          anchor: "clock" as unknown as "request",
        },
        latencyMs: 1,
      })
    )
      .toThrow(/'limiter\.anchor' must be "first-use" or "request": current value is clock/);
    expect(() =>
      createZooLimiter({
        name: "b",
        limiter: { shape: "none" },
        latencyMs: 1,
        latencyJitter: 1.5,
      })
    )
      .toThrow(/'latencyJitter' must be a number from 0 to 1: current value is 1.5/);
    expect(() =>
      createZooLimiter({
        name: "c",
        limiter: { shape: "sliding-counter", quota: 5, windowMs: 1000, phaseMs: 0 },
        latencyMs: 1,
      })
    ).toThrow(/'limiter\.phaseMs' must be a number > 0 and at most limiter\.windowMs/);
    expect(() =>
      createZooLimiter({ name: "f", limiter: { shape: "none" }, latencyMs: 1, errorRate: 1 })
    ).toThrow(/'errorRate' must be a number from 0 to below 1: current value is 1/);
    // A JavaScript caller's typo in a string field, silently a site that
    // announced nothing before (a crawl then read as 25 times its ideal).
    const plain = { name: "s", limiter: { shape: "none" }, latencyMs: 1 } as const;
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ announce: "draft6" }, /'announce' must be "none", "ietf", .*: current value is draft6/],
      [
        { announceOn: "errors" },
        /'announceOn' must be "all" or "refusals": current value is errors/,
      ],
      [{ status: 500 }, /'status' must be 429 or 503: current value is 500/],
      [{ retryAfter: "exact" }, /'retryAfter' must be .*"date": current value is exact/],
    ];
    for (const [field, message] of bad) {
      expect(() => createZooLimiter({ ...plain, ...field } as unknown as ZooSiteSpec)).toThrow(
        message,
      );
    }
    for (const ok of [{ announce: "x-delta" }, { status: 503 }, { retryAfter: 2 }]) {
      expect(() => createZooLimiter({ ...plain, ...ok } as ZooSiteSpec)).not.toThrow();
    }
  });

  it("createZooLimiter() with a sliding-window counter weighs the previous window by the share the span still covers", () => {
    // 10 per second, windows ending at 1000, 2000, ... (phase 1000 = time 0 starts a window).
    const l = createZooLimiter({
      name: "swc",
      limiter: { shape: "sliding-counter", quota: 10, windowMs: 1000 },
      latencyMs: 10,
      retryAfter: "seconds",
    });
    const at = (t: number) => {
      const d = l.arrive(t);
      return d.status === 200 ? "ok" : `${d.status} ${d.headers["retry-after"]}`;
    };
    // Ten at 900 fill the first window; the eleventh is refused until the
    // next window's weight of them is below 10 (at once: 1000 + a hair).
    for (let i = 0; i < 10; i++) expect(at(900)).toBe("ok");
    expect(at(950)).toBe("429 1");
    // At 1500 the first window still weighs 10 * 0.5 = 5: five more pass.
    for (let i = 0; i < 5; i++) expect(at(1500)).toBe("ok");
    expect(at(1500)).toBe("429 1");
    // At 1900 it weighs 1, with 5 in this window: 4 more.
    for (let i = 0; i < 4; i++) expect(at(1900)).toBe("ok");
    expect(at(1900)).toMatch(/^429 /);
    // A window with nothing before it (time 5000 after an idle one) admits its whole quota.
    for (let i = 0; i < 10; i++) expect(at(5000)).toBe("ok");
    expect(at(5000)).toMatch(/^429 /);
  });

  it("createZooLimiter() with errorRate fails that share of admitted requests with errorStatus, refusals untouched", () => {
    // Draws of 0.1 fail (below 0.25), 0.9 do not.
    const draws = [0.1, 0.9, 0.1, 0.9];
    let i = 0;
    const l = createZooLimiter(
      {
        name: "f",
        limiter: { shape: "token-bucket", ratePerSec: 10, burst: 2 },
        latencyMs: 10,
        errorRate: 0.25,
        errorStatus: 504,
      },
      { random: () => draws[i++ % draws.length]! },
    );
    // Two admitted (the first failed anyway), then refused: no draw for a refusal.
    expect([0, 0, 0, 100].map((t) => l.arrive(t).status)).toEqual([504, 200, 429, 504]);
  });

  it("createZooLimiter() with latencyJitter draws each latency within latencyMs * (1 ± jitter)", () => {
    let u = 0;
    const draws = [0, 0.5, 0.999];
    const l = createZooLimiter(
      { name: "j", limiter: { shape: "none" }, latencyMs: 100, latencyJitter: 0.5 },
      { random: () => draws[u++]! },
    );
    expect(draws.map(() => Math.round(l.arrive(0).latencyMs))).toEqual([50, 100, 150]);
  });

  it("idealMs() is what a client that knows the limit needs", () => {
    const L = 50;
    const cases: [ZooSiteSpec["limiter"], number][] = [
      [{ shape: "token-bucket", ratePerSec: 10, burst: 3 }, (197 / 10) * 1000 + L],
      [{ shape: "fixed-window", quota: 20, windowMs: 2000 }, 9 * 2000 + L],
      [{ shape: "concurrency", maxConcurrency: 4 }, 50 * L],
      [{ shape: "leaky-queue", ratePerSec: 10, burst: 5 }, (199 / 10) * 1000 + L],
      // A sliding-window counter admits its quota at once, then, the window
      // before weighing a full quota, one per window / quota from the end of
      // the first window on: it never takes a second burst.
      [{ shape: "sliding-counter", quota: 20, windowMs: 2000 }, 2000 + (179 * 2000) / 20 + L],
      [
        { shape: "sliding-counter", quota: 20, windowMs: 2000, phaseMs: 500 },
        500 + (179 * 2000) / 20 + L,
      ],
      // (All 200 within its quota: the client's own 16 at once bound it.)
      [{ shape: "sliding-counter", quota: 200, windowMs: 2000 }, Math.ceil(200 / 16) * L],
    ];
    for (const [limiter, ms] of cases) {
      expect(idealMs({ name: "i", limiter, latencyMs: L }, 200)).toBeCloseTo(ms, 6);
    }
  });

  it("runZooCrawl() cut at limitMs reckons the pages it got over the time up to the limit", () => {
    // One per 10 s, five pages, 25 s allowed: three admitted (at 0, 10 and
    // 20 s) and the crawl cut. Its efficiency was the ideal of all five
    // (40 s) over the 20 s to the last answer: 2.0.
    const r = runZooCrawl({
      site: {
        name: "1 per 10 s",
        limiter: { shape: "fixed-window", quota: 1, windowMs: 10_000 },
        latencyMs: 10,
      },
      pages: 5,
      limitMs: 25_000,
      settings: { retry: { times: 10 } },
    });
    expect(r.cut).toBe(true);
    expect(r.ok).toBe(3);
    expect(r.idealMs).toBe(idealMs(r.site, 3));
    expect(r.measuredMs).toBeCloseTo(25_000 - (r.stats.arrivals[0] ?? 0), 6);
    expect(r.efficiency).toBeLessThanOrEqual(1);
  });

  it("idealMs() of a sliding-window counter is a greedy client's time (its counter replayed)", () => {
    for (
      const [quota, windowMs, pages, phaseMs] of [
        [5, 1000, 23, undefined],
        [10, 1000, 64, 300],
        [7, 3000, 30, 2999],
      ] as const
    ) {
      const spec: ZooSiteSpec = {
        name: "g",
        limiter: {
          shape: "sliding-counter",
          quota,
          windowMs,
          ...(phaseMs === undefined ? {} : { phaseMs }),
        },
        latencyMs: 0,
      };
      const limiter = createZooLimiter(spec);
      let t = 0;
      let sent = 0;
      let last = 0;
      while (sent < pages) {
        if (limiter.arrive(t).status === 200) {
          sent++;
          last = t;
        } else t += 0.25;
      }
      // The replay steps a quarter of a millisecond past each admission.
      expect(Math.abs(idealMs(spec, pages) - last)).toBeLessThanOrEqual(0.25);
    }
  });
});

/**
 * The zoo in virtual time, 200 pages each, with the defaults and with rampup.
 * [site, lowest efficiency, most refusals as a share of requests] — the
 * figures the controller reaches today (docs/ZOO.md lists the shapes still
 * short of the targets, which these rows do not include).
 */
const ZOO: [ZooSiteSpec, boolean, number, number][] = [
  [
    {
      name: "bucket 10/s b3",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 },
      latencyMs: 50,
    },
    true,
    0.95,
    0.05,
  ],
  [
    {
      name: "bucket 2/s b2",
      limiter: { shape: "token-bucket", ratePerSec: 2, burst: 2 },
      latencyMs: 100,
    },
    true,
    // 0.95 when rampup started at one in flight; from two (docs/DECISIONS.md)
    // the first round's three at once overrun the burst of 2: 0.938. (11
    // refused of 211 since a block's probes wait for round resets: 10 before.)
    0.93,
    0.055,
  ],
  [
    {
      name: "bucket 10/s b3",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 },
      latencyMs: 50,
    },
    false,
    0.95,
    0.1,
  ],
  [
    {
      name: "bucket 20/s b40",
      limiter: { shape: "token-bucket", ratePerSec: 20, burst: 40 },
      latencyMs: 50,
    },
    false,
    0.95,
    0.1,
  ],
  [
    {
      name: "gcra 8/s",
      limiter: { shape: "token-bucket", ratePerSec: 8, burst: 1 },
      latencyMs: 30,
      status: 503,
    },
    false,
    0.9,
    0.05,
  ],
  [
    {
      name: "gcra 4/s",
      limiter: { shape: "token-bucket", ratePerSec: 4, burst: 1 },
      latencyMs: 100,
      status: 503,
    },
    true,
    0.9,
    0.05,
  ],
  [
    {
      name: "fixed 20/2s ietf",
      limiter: { shape: "fixed-window", quota: 20, windowMs: 2000 },
      latencyMs: 30,
      announce: "ietf",
    },
    false,
    0.88,
    0,
  ],
  [
    {
      name: "fixed 60/10s legacy",
      limiter: { shape: "fixed-window", quota: 60, windowMs: 10_000 },
      latencyMs: 30,
      announce: "legacy",
    },
    false,
    0.88,
    0,
  ],
  [
    {
      name: "fixed 15/3s x-epoch",
      limiter: { shape: "fixed-window", quota: 15, windowMs: 3000 },
      latencyMs: 30,
      announce: "x-epoch",
    },
    true,
    0.88,
    // One try of a window a second shorter than the epoch resets tell: its
    // resets are on time here (windows start on whole seconds).
    0.005,
  ],
  [
    {
      name: "fixed 20/2s Retry-After date",
      limiter: { shape: "fixed-window", quota: 20, windowMs: 2000 },
      latencyMs: 30,
      retryAfter: "date",
    },
    false,
    0.9,
    0.15,
  ],
  [
    {
      // Each refusal costs a second's hold: probing stops within 10% (a
      // quarter of the way up at a time), not 3%.
      name: "gcra 16/s, Retry-After seconds",
      limiter: { shape: "token-bucket", ratePerSec: 16, burst: 1 },
      latencyMs: 80,
      status: 503,
      retryAfter: "seconds",
    },
    false,
    0.75,
    0.05,
  ],
  [
    {
      // A window no header tells, read from a block of refusals, becomes a
      // quota sent in bursts like the site's windows take them: paced
      // evenly, the first and the last windows' bursts were lost (0.70).
      // (0.82: the zoo's windows are the clock's, and the next window after
      // the block begins a period after its admitted probe, where windows
      // counted from the first request and sliding logs begin: 0.88 → 0.83
      // here, sliding logs 0.76-0.83 → 0.88-0.92.)
      name: "fixed 50/10s, no headers, 5 ms",
      limiter: { shape: "fixed-window", quota: 50, windowMs: 10_000 },
      latencyMs: 5,
    },
    true,
    0.82,
    0.06,
  ],
  [
    {
      name: "fixed 50/10s, no headers, 5 ms",
      limiter: { shape: "fixed-window", quota: 50, windowMs: 10_000 },
      latencyMs: 5,
    },
    false,
    0.82,
    0.06,
  ],
  [
    {
      // A generous bucket's spent burst read as a window of 34 per 1.2 s:
      // each burst found six refilled and the rest in flight refused (22%
      // refused). A window admits its quota once re-opened, so a refusal
      // after a few admits hands the scope back, and a blind window's sends
      // double with its admits.
      name: "bucket 5/s of 30, 120 ms ± 30%",
      limiter: { shape: "token-bucket", ratePerSec: 5, burst: 30 },
      latencyMs: 120,
      latencyJitter: 0.3,
    },
    true,
    0.95,
    0.09,
  ],
  [
    {
      // A slow bucket's spent burst ends in a block long enough to read as a
      // window; the one it refilled, then a refusal, says it is none.
      name: "bucket 1/s of 30, 40 ms",
      limiter: { shape: "token-bucket", ratePerSec: 1, burst: 30 },
      latencyMs: 40,
    },
    true,
    // (0.969 with 18 refused before the refusal budget held a last step
    // toward a refused pace over 4% refused: 0.943 with 17.)
    0.94,
    // (18 of 218 since its block's probe waits for the round reset at 1 s: 16 before.)
    0.085,
  ],
  [
    {
      // The first refusal looks like a cap (refused with 8 in flight only):
      // nothing new goes until one is admitted, so the spent window is not
      // sent seven more requests per round trip (12.7% refused before).
      name: "fixed 20/2s, no headers, 100 ms",
      limiter: { shape: "fixed-window", quota: 20, windowMs: 2000 },
      latencyMs: 100,
    },
    true,
    0.8,
    0.08,
  ],
  [
    {
      // Rampup's slow start sends at one instant; the strict spacer refuses
      // the second of them, which says nothing of the rate sent at.
      name: "gcra 20/s, 100 ms",
      limiter: { shape: "token-bucket", ratePerSec: 20, burst: 1 },
      latencyMs: 100,
      status: 503,
    },
    true,
    0.85,
    0.05,
  ],
  [
    {
      name: "conc 2",
      limiter: { shape: "concurrency", maxConcurrency: 2 },
      latencyMs: 100,
      status: 503,
    },
    false,
    0.95,
    0.05,
  ],
  [
    {
      name: "conc 3",
      limiter: { shape: "concurrency", maxConcurrency: 3 },
      latencyMs: 200,
      status: 503,
    },
    true,
    0.95,
    0.05,
  ],
  [
    {
      // Latencies 75-225 ms: requests sent after a refusal (still on its way
      // back) count it in flight, though it holds no slot at the site, and
      // are admitted "above" the cap.
      name: "conc 4, 150 ms ± 50%",
      limiter: { shape: "concurrency", maxConcurrency: 4 },
      latencyMs: 150,
      latencyJitter: 0.5,
      status: 503,
    },
    false,
    0.9,
    0.05,
  ],
  [
    {
      // A refusal under the supposed cap: what the site was serving when it
      // came counts the long requests still out.
      name: "conc 6, 250 ms ± 50%",
      limiter: { shape: "concurrency", maxConcurrency: 6 },
      latencyMs: 250,
      latencyJitter: 0.5,
      status: 503,
    },
    false,
    0.9,
    0.05,
  ],
  [
    {
      // nginx's limit_req: early requests wait their turn, a full queue refuses.
      name: "leaky queue 20/s, 10 queued, 50 ms ± 50%",
      limiter: { shape: "leaky-queue", ratePerSec: 20, burst: 10 },
      latencyMs: 50,
      latencyJitter: 0.5,
      status: 503,
    },
    false,
    0.95,
    0.05,
  ],
  [
    {
      name: "shed 1 worker",
      limiter: { shape: "load-shed", workers: 1, maxQueue: 3 },
      latencyMs: 50,
      status: 503,
    },
    false,
    0.95,
    0.05,
  ],
  [
    {
      name: "conc 4, 429 after 300 ms",
      limiter: { shape: "concurrency", maxConcurrency: 4 },
      latencyMs: 300,
    },
    false,
    0.95,
    0.05,
  ],
  [
    {
      name: "fixed 10/1s, no headers",
      limiter: { shape: "fixed-window", quota: 10, windowMs: 1000 },
      latencyMs: 30,
    },
    false,
    0.85,
    0.05,
  ],
  [
    {
      name: "sliding 10/2s, no headers",
      limiter: { shape: "sliding-window", quota: 10, windowMs: 2000 },
      latencyMs: 30,
    },
    false,
    0.9,
    0.05,
  ],
  [
    {
      // Rampup starts from below at 8/s after its first refusal (read from
      // three sends at once as 300/s) and climbs 1.5x a round to 25/s: 2.4 s
      // of an 8 s crawl to get there, 0.87 (halving from 300/s took four
      // refusals in 0.3 s, 0.95, but cost refusals and holds on slower
      // sites: docs/DECISIONS.md). The floor guards against a climb that
      // stalls below the rate.
      name: "gcra 25/s, 10 ms",
      limiter: { shape: "token-bucket", ratePerSec: 25, burst: 1 },
      latencyMs: 10,
      status: 503,
    },
    true,
    0.85,
    0.05,
  ],
  [
    {
      // Halved from 182/s to 11/s with a block of refused probes at each
      // pace: their waits counted as slow sending made the admitted rate
      // 3.5/s and capped the climb at 6.9/s (0.64); they are holds now.
      name: "spacer 10/s, 11 ms, 429",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 1 },
      latencyMs: 11,
    },
    false,
    0.9,
    0.06,
  ],
  [
    {
      // A burst far above the rate: the block after it looked like a window's
      // end, and every later refusal cut only 3% (half the requests refused).
      name: "bucket 2/s burst 38, 503",
      limiter: { shape: "token-bucket", ratePerSec: 2, burst: 38 },
      latencyMs: 108,
      status: 503,
    },
    false,
    0.95,
    0.15,
  ],
  [
    {
      // Announced on every answer: spread over a third of the time to each
      // reset, the crawl's last window ends early (an even spread: 0.77).
      name: "fixed 51/8s, X-RateLimit-Reset seconds",
      limiter: { shape: "fixed-window", quota: 51, windowMs: 8000 },
      latencyMs: 47,
      announce: "legacy",
    },
    false,
    0.9,
    0.01,
  ],
  [
    {
      name: "sliding 25/2s, X-RateLimit-Reset delta",
      limiter: { shape: "sliding-window", quota: 25, windowMs: 2000 },
      latencyMs: 82,
      announce: "x-delta",
      retryAfter: "seconds",
    },
    false,
    0.8,
    0.01,
  ],
  [
    {
      name: "shed 3 workers, queue 1",
      limiter: { shape: "load-shed", workers: 3, maxQueue: 1 },
      latencyMs: 100,
      status: 503,
    },
    false,
    0.95,
    0.05,
  ], // Loopback round trips (5 ms): the first refusal is read at hundreds a
  // second. A spacer's Retry-After: 1 pays for one admit per hold, which
  // counted with the held time left out read as the refused pace (0.44, 22%
  // refused); a bucket's small burst gave 27% refused.
  [
    {
      name: "spacer 5/s, Retry-After 1 s, 5 ms",
      limiter: { shape: "token-bucket", ratePerSec: 5, burst: 1 },
      latencyMs: 5,
      status: 429,
      retryAfter: "seconds",
    },
    false,
    0.8,
    0.05,
  ],
  [
    {
      name: "bucket 10/s b3, 5 ms",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 },
      latencyMs: 5,
    },
    false,
    0.9,
    0.05,
  ],
  // A bucket's burst ran out: halving from the pace that emptied it sent a
  // round trip's worth into the empty bucket per step (18 refused, 8.3%).
  [
    {
      name: "bucket 10/s b25, 147 ms ±20%, 503",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 25 },
      latencyMs: 147,
      latencyJitter: 0.2,
      status: 503,
    },
    false,
    0.9,
    0.06,
  ],
  // Rampup's slow start doubled concurrency at once: a cap of 8 refused the
  // whole new half (15 refused, 0.57) and was read as a cap of 11. (The ideal
  // here is 25 round trips: slow start from one request costs a short crawl
  // most of the rest.)
  [
    {
      name: "conc 8, 150 ms, Retry-After seconds",
      limiter: { shape: "concurrency", maxConcurrency: 8 },
      latencyMs: 150,
      retryAfter: "seconds",
    },
    true,
    0.62,
    0.05,
  ],
  // 0.93 until a refusal at the first sends under 10% above a quiet pace
  // ended the search there (refused at 4/s, quiet at 3.71/s: 0.89, the same
  // 12 refused; over the zoo it spared refusals: 476 → 466 misses).
  [
    {
      name: "gcra 4/s, 5 ms",
      limiter: { shape: "token-bucket", ratePerSec: 4, burst: 1 },
      latencyMs: 5,
      status: 503,
    },
    false,
    0.88,
    0.075,
  ],
  // A bucket that ran dry after a hold refused six sent at once with one
  // admitted in flight: read as a cap lowered from 6 to 1 (0.32). (0.57
  // when such a burst's own sends did not count as served; 0.46 now that
  // they do, for a cap's sake: a cap lowered a step per hold, then a rate.)
  [
    {
      name: "bucket 16/s b4, 196 ms ± 50%, 503, Retry-After seconds",
      limiter: { shape: "token-bucket", ratePerSec: 16, burst: 4 },
      latencyMs: 196,
      latencyJitter: 0.5,
      status: 503,
      retryAfter: "seconds",
    },
    false,
    0.45,
    0.05,
  ],
  // A Retry-After that is always 2 s, on a window of 1 s: the first hold
  // told a quota of 5 per 2.6 s, and the told window shrank 3% per window
  // down to half of it, never nearer the site's (0.70 at 5 ms, 0.71 at
  // 30 ms). Quiet at half the told window, the holds tell no window and the
  // controller paces from there.
  [
    {
      name: "fixed 5/1s, Retry-After always 2, 5 ms",
      limiter: { shape: "fixed-window", quota: 5, windowMs: 1000 },
      latencyMs: 5,
      status: 429,
      retryAfter: 2,
    },
    false,
    0.8,
    0.05,
  ],
  [
    {
      name: "fixed 5/1s, Retry-After always 2, 30 ms",
      limiter: { shape: "fixed-window", quota: 5, windowMs: 1000 },
      latencyMs: 30,
      status: 429,
      retryAfter: 2,
    },
    false,
    0.8,
    0.05,
  ],
];

describe("createZooSite() in virtual time", () => {
  it("createZooSite(): a request reaches the site outboundMs after it is sent, and its latency counts from there", () => {
    const scheduler = new VirtualTimeScheduler();
    const delays = [3, 0.5];
    const site = createZooSite(
      { name: "n", limiter: { shape: "none" }, latencyMs: 10 },
      scheduler,
      { outboundMs: () => delays.shift() ?? 0 },
    );
    const answered: number[] = [];
    site.download("http://zoo.test/a").subscribe(() => answered.push(scheduler.now()));
    site.download("http://zoo.test/b").subscribe(() => answered.push(scheduler.now()));
    scheduler.flush();
    expect(site.stats().arrivals).toEqual([0.5, 3]);
    expect(answered).toEqual([10.5, 13]);
  });

  it("createZooSite(): an answer is read inboundMs after the site sent it, and its slot was freed when it was sent", () => {
    const scheduler = new VirtualTimeScheduler();
    const site = createZooSite(
      { name: "cap 1", limiter: { shape: "concurrency", maxConcurrency: 1 }, latencyMs: 10 },
      scheduler,
      { inboundMs: () => 4 },
    );
    const answered: number[] = [];
    site.download("http://zoo.test/a").subscribe(() => answered.push(scheduler.now()));
    // Sent after the site answered the first (at 10) but before the client read it (at 14).
    scheduler.schedule(() => {
      site.download("http://zoo.test/b").subscribe((r) => answered.push(r.status));
    }, 12);
    scheduler.flush();
    expect(answered).toEqual([14, 200]);
  });

  it("createZooSite(): a site that frees a slot releaseLagMs after it answered refuses a request sent as the answer is read", () => {
    const run = (lagMs: number) => {
      const scheduler = new VirtualTimeScheduler();
      const site = createZooSite(
        { name: "cap 1", limiter: { shape: "concurrency", maxConcurrency: 1 }, latencyMs: 10 },
        scheduler,
        lagMs > 0 ? { releaseLagMs: () => lagMs } : {},
      );
      const statuses: number[] = [];
      // The next request goes as soon as the answer is read, as a client at its cap does.
      site.download("http://zoo.test/a").subscribe(() => {
        site.download("http://zoo.test/b").subscribe((r) => statuses.push(r.status));
      });
      scheduler.flush();
      return statuses;
    };
    expect(run(0)).toEqual([200]);
    expect(run(1)).toEqual([429]);
  });

  it("runZooCrawl() passes inboundJitterMs and releaseLagMs to the site", () => {
    const site: ZooSiteSpec = {
      name: "cap 1",
      limiter: { shape: "concurrency", maxConcurrency: 1 },
      latencyMs: 100,
    };
    // One at a time, not adaptive: the time says what the site did, not
    // what the crawler learned from it.
    const one = { concurrentRequestsPerDomain: 1, adaptive: false };
    const plain = runZooCrawl({ site, pages: 30, settings: one });
    expect(runZooCrawl({ site, pages: 30, inboundJitterMs: 50, settings: one }).measuredMs)
      .toBeGreaterThan(plain.measuredMs);
    // The site frees each slot 200 ms after it answered: the next request finds it taken.
    const lagging = runZooCrawl({ site, pages: 30, releaseLagMs: 200 });
    expect(lagging.refused).toBeGreaterThan(plain.refused);
    expect(lagging.measuredMs).toBeGreaterThan(2 * plain.measuredMs);
  });

  it("createZooSite(): a request aborted before it reaches the site never arrives and errors with the reason", () => {
    const scheduler = new VirtualTimeScheduler();
    const site = createZooSite(
      { name: "n", limiter: { shape: "none" }, latencyMs: 10 },
      scheduler,
      { outboundMs: () => 5 },
    );
    const abort = new AbortController();
    const errors: unknown[] = [];
    site.download("http://zoo.test/a", { signal: abort.signal }).subscribe({
      error: (e) => errors.push(e),
    });
    scheduler.schedule(() => abort.abort(new Error("stop")), 2);
    scheduler.flush();
    expect(site.stats().requests).toBe(0);
    expect(errors.map((e) => (e as Error).message)).toEqual(["stop"]);
    // Unsubscribed before arrival: nothing arrives either.
    const sub = site.download("http://zoo.test/b").subscribe();
    scheduler.schedule(() => sub.unsubscribe(), 1);
    scheduler.flush();
    expect(site.stats().requests).toBe(0);
  });

  it("runZooCrawl() with outbound jitter: the site sees gaps shorter than the client sent, and the crawl still converges", () => {
    const site: ZooSiteSpec = {
      name: "spacer 10/s",
      limiter: { shape: "token-bucket", ratePerSec: 10, burst: 1 },
      latencyMs: 50,
    };
    const r = runZooCrawl({ site, pages: 200, outboundJitterMs: 6 });
    const gaps = r.stats.arrivals.slice(1).map((t, i) => t - r.stats.arrivals[i]!);
    expect(Math.min(...gaps)).toBeLessThan(1000 / 10);
    expect(r.ok).toBe(200);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.75);
  });
});

describe("adaptive limits on a real clock's gaps (outbound jitter, virtual time)", () => {
  // A 20/s strict spacer answering 503 with Retry-After in whole seconds: each
  // refusal holds the scope a second, 20 requests' worth. Over real loopback
  // rampup settled near 5/s on it (0.27); the same collapse showed here with
  // a few ms of jitter between send and arrival.
  const spacer: ZooSiteSpec = {
    name: "spacer 20/s",
    limiter: { shape: "token-bucket", ratePerSec: 20, burst: 1 },
    latencyMs: 110,
    status: 503,
    retryAfter: "seconds",
  };
  const table: [mode: "rampup" | "defaults", jitterMs: number, seed: number, atLeast: number][] =
    [];
  for (const jitterMs of [2, 5]) {
    for (const seed of [1, 2, 3]) {
      table.push(["rampup", jitterMs, seed, 0.5], ["defaults", jitterMs, seed, 0.65]);
    }
  }
  for (const [mode, jitterMs, seed, atLeast] of table) {
    it(`the 20/s spacer with 1 s holds, ${mode}, ${jitterMs} ms jitter, seed ${seed}: at least ${atLeast} of its rate, no quota told by its 1 s holds`, () => {
      const r = runZooCrawl({
        site: spacer,
        pages: 200,
        seed,
        rampup: mode === "rampup",
        outboundJitterMs: jitterMs,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const steps = rampupWhy(r);
      // A hold of one second read a fraction of a millisecond long is still
      // a spacer's Retry-After, not a window's reset (it was a quota of 3 per 1.3 s).
      expect(steps.filter((w) => w.startsWith("held again"))).toEqual([]);
      expect(r.ok).toBe(200);
      expect(r.efficiency).toBeGreaterThanOrEqual(atLeast);
      expect(r.refused / r.requests).toBeLessThanOrEqual(0.05);
    });
  }
});

describe("a strict spacer's refusal near a quiet pace (outbound jitter, virtual time)", () => {
  // A 10/s spacer answering 429 with no Retry-After; 5 ms between send and
  // arrival. Refused after a while at a pace just above a quiet one, the
  // scope went to the rate admitted since the first refusal (which counts the
  // climb to it: 0.88-0.89); now 6% below the quiet pace.
  const spacer: ZooSiteSpec = {
    name: "spacer 10/s",
    limiter: { shape: "token-bucket", ratePerSec: 10, burst: 1 },
    latencyMs: 103,
    status: 429,
  };
  for (const seed of [1, 2, 4]) {
    it(`defaults reach 0.9 of a 10/s spacer through 5 ms of jitter, seed ${seed}`, () => {
      const r = runZooCrawl({
        site: spacer,
        pages: 200,
        seed,
        outboundJitterMs: 5,
        settings: { retry: { times: 10 } },
      });
      expect(r.ok).toBe(200);
      expect(r.efficiency).toBeGreaterThanOrEqual(0.9);
      expect(r.refused / r.requests).toBeLessThanOrEqual(0.05);
    });
  }
});

describe("a slow strict spacer, under 2/s, without Retry-After or with a constant one shorter than its interval (virtual time)", () => {
  // Paced from below at 8/s after the first refusal, a 1/s spacer was refused
  // at 8, 2 and 1/s, then bisected from 0.5/s toward 8/s a refusal a step:
  // 0.76 with 11 refused. The block's admitted probe tells the interval (its
  // gap after the admit before it), the last refused probe bounds it, and the
  // next send is timed with that slower pace. With a constant Retry-After
  // shorter than the interval, the probe sent at the hold's end was refused
  // and the pace halved from 8/s a refusal a step (10 refused in 20 pages of
  // a 0.42/s spacer answering "2"); a held block tells the interval too, the
  // admitted probe's gap a safe pace.
  // [rate/s, latency ms, status, Retry-After, pages, efficiency at least, refused at most]
  const table: [number, number, 429 | 503, "none" | number, number, number, number][] = [
    [1, 30, 429, "none", 60, 0.85, 9],
    [0.5, 100, 503, "none", 40, 0.85, 12],
    [0.42, 8, 429, 2, 20, 0.65, 6],
    [0.4, 50, 429, 1, 30, 0.8, 9],
    [0.8, 30, 503, 1, 40, 0.75, 6],
  ];
  for (const [ratePerSec, latencyMs, status, retryAfter, pages, atLeast, refusedAtMost] of table) {
    it(`defaults reach ${atLeast} of a ${ratePerSec}/s spacer at ${latencyMs} ms (${status}, Retry-After ${retryAfter}), ${refusedAtMost} refused at most`, () => {
      expectReaches(
        {
          name: `spacer ${ratePerSec}/s`,
          limiter: { shape: "token-bucket", ratePerSec, burst: 1 },
          latencyMs,
          status,
          retryAfter,
        },
        pages,
        atLeast,
        refusedAtMost,
      );
    });
  }
});

describe("a sliding log without headers, read from a block of refusals (virtual time)", () => {
  // The window read at the block's end began at the reset guessed half way
  // back from the admitted probe, before the site's (which began at that
  // probe); the next window's first send was refused, and the window was
  // taken as too short at its nominal length for good: 0.76-0.83. Now the
  // window begins at the admitted probe, and an early refusal bounds the
  // site's window from the ended window's first send.
  // [quota, window ms, latency ms, status, pages, efficiency at least, refused at most]
  const table: [number, number, number, 429 | 503, number, number, number][] = [
    [8, 1000, 30, 429, 200, 0.86, 9],
    [12, 2000, 80, 429, 200, 0.86, 11],
    [5, 1000, 40, 503, 150, 0.86, 9],
  ];
  for (const [quota, windowMs, latencyMs, status, pages, atLeast, refusedAtMost] of table) {
    it(`defaults reach ${atLeast} of a sliding log of ${quota} per ${windowMs / 1000} s at ${latencyMs} ms (${status}), ${refusedAtMost} refused at most`, () => {
      expectReaches(
        {
          name: `sliding ${quota}/${windowMs}`,
          limiter: { shape: "sliding-window", quota, windowMs },
          latencyMs,
          status,
        },
        pages,
        atLeast,
        refusedAtMost,
        3,
      );
    });
  }
});

describe("a cap read from refusals on their way (virtual time)", () => {
  it("defaults reach 0.85 of a cap of 5 at 20 ms: a send made at the instant the cap was lowered is answered for by it", () => {
    // Slow start reached 8 in flight; refusals on their way lowered the cap
    // to 6, then 5, the last when an admitted answer came in. Sends made
    // at that same instant, before the lower cap applied, went with 6 in
    // flight; one of them refused 20 ms later was read as a refusal under
    // the cap, the cap was refuted and the site paced as a rate of 70/s
    // (its rate is 250/s): 0.53 over 500 pages. The lowered cap now counts
    // as a cut for what was sent up to it: 0.92.
    expectReaches(
      {
        name: "cap 5",
        limiter: { shape: "concurrency", maxConcurrency: 5 },
        latencyMs: 20,
        status: 503,
      },
      500,
      0.85,
      8,
    );
  });
});

describe("a first refusal that read no pace (virtual time)", () => {
  it("defaults reach 0.65 of a 40/s strict spacer at 150 ms with one-second holds: two sends at one instant bound nothing", () => {
    // The first two sends went at one instant and the second was refused:
    // two in flight over the refusal's round trip read as 18.74/s, halved,
    // and the search stayed under that bound, probing past it once a
    // window: 17/s for the crawl, 0.42. Such a first refusal now starts the
    // search from below at 8/s and climbs past it: 0.75.
    expectReaches(
      {
        name: "spacer 40/s",
        limiter: { shape: "token-bucket", ratePerSec: 40, burst: 1 },
        latencyMs: 150,
        latencyJitter: 0.3,
        status: 429,
        retryAfter: "seconds",
      },
      600,
      0.65,
      8,
    );
  });
});

describe("a sliding-window counter that announces a budget the requests on their way spend (virtual time)", () => {
  it("defaults reach 0.9 of a counter of 100 per 10 s at 150 ms announcing its budget on every answer: room it frees is used at once", () => {
    // Read as a counter, the scope paced at its trickle, and each answer
    // told one to three left until the current window's end. With as many
    // requests still on their way, nothing was left to spread, and the
    // scope waited for that end, then sent a burst the counter cut short:
    // every other window waited out, 0.64 (X-RateLimit epoch resets) and
    // 0.74 (IETF RateLimit) over 450 pages. It now waits a slot's time, as
    // a spent counter's budget does: 0.99 both.
    for (const announce of ["x-epoch", "ietf"] as const) {
      expectReaches(
        {
          name: `counter 100/10s ${announce}`,
          limiter: { shape: "sliding-counter", quota: 100, windowMs: 10_000 },
          latencyMs: 150,
          latencyJitter: 0.3,
          status: 429,
          retryAfter: "seconds",
          announce,
        },
        450,
        0.9,
        9,
        3,
      );
    }
  });
});

describe("a quota told by holds refused late in two windows, short of it (virtual time)", () => {
  it("defaults reach 0.8 of a sliding-window counter of 30 per 2 s at 20 ms answering Retry-After in seconds: the quota is spread over its window", () => {
    // Its holds told a quota of 30 per 2.26 s, sent in bursts; the counter
    // weighs the window before and refused late in each burst, short of the
    // quota, and the scope waited out the hold: 0.70 over 600 pages, 17
    // refused. Refused so in two windows in a row, the quota is
    // spread over the whole window from then on: 0.84, 8 refused.
    expectReaches(
      {
        name: "counter 30/2s, Retry-After",
        limiter: { shape: "sliding-counter", quota: 30, windowMs: 2000 },
        latencyMs: 20,
        latencyJitter: 0.3,
        status: 429,
        retryAfter: "seconds",
      },
      600,
      0.8,
      12,
      3,
    );
  });
});

describe("a block's probes and backoff.maxDelayMs (virtual time)", () => {
  it("a block of refusals is probed at least once per backoff.maxDelayMs: its growing waits stop there", () => {
    // A window of 5 per minute without Retry-After, six pages: the sixth
    // waits out the block, probed at waits growing 1.5 times from 250 ms
    // (6.4, 9.6, 14.4 s, ... past a 5 s maxDelayMs: 21.6 s between the
    // last two), a hold no setting allowed.
    const r = runZooCrawl({
      site: {
        name: "5 per 60 s",
        limiter: { shape: "fixed-window", quota: 5, windowMs: 60_000 },
        latencyMs: 20,
        status: 429,
      },
      pages: 6,
      events: true,
      settings: { retry: { times: 100 }, backoff: { maxDelayMs: 5_000 } },
    });
    expect(r.ok).toBe(6);
    const sends = r.events.filter((e) => e.type === "request-sent").map((e) => e.at);
    let longest = 0;
    for (let i = 1; i < sends.length; i++) longest = Math.max(longest, sends[i]! - sends[i - 1]!);
    expect(longest).toBeLessThanOrEqual(5_000 + 50);
  });
});

describe("a blind quota refused late in its window, short of its quota (virtual time)", () => {
  it("defaults reach 0.8 of a sliding-window counter of 30 per 2 s at 20 ms: the quota is spread over its window", () => {
    // Read as a window of 30 per 1.96 s from its first block, sent in
    // bursts; the counter weighs the window before and refused 10-27 into
    // each burst, and the scope waited for the next window: 0.65 over 600
    // pages, 21 refused. Refused short of its quota, the quota is spread
    // over the whole window from then on: 0.87, 12 refused.
    expectReaches(
      {
        name: "counter 30/2s",
        limiter: { shape: "sliding-counter", quota: 30, windowMs: 2000 },
        latencyMs: 20,
        latencyJitter: 0.3,
        status: 429,
      },
      600,
      0.8,
      15,
      3,
    );
  });
});

describe("a sliding-window counter met late in its window, held by Retry-After (virtual time)", () => {
  it("defaults reach 0.6 of a counter of 50 per 10 s whose window ends 100 ms in: the holds' quota is left at what it admitted since the first send", () => {
    // Its first burst straddles the window's end; it then admits next to
    // nothing until the window rolls (the dead time). Windows begun at its
    // holds' end were refused early, and the quota told by the holds was
    // left at what the site admitted since its first window (the dead
    // time's: 0.55/s where its rate is 5/s), then cut in the dead time to
    // 0.27/s: 0.13. What it admitted since the first send, burst included,
    // is nearer its rate: 0.69. Refused: still about a tenth (20 of 220).
    expectReaches(
      {
        name: "counter 50/10s",
        limiter: { shape: "sliding-counter", quota: 50, windowMs: 10_000, phaseMs: 100 },
        latencyMs: 80,
        latencyJitter: 0.2,
        status: 429,
        retryAfter: "seconds",
      },
      200,
      0.6,
      20,
      3,
    );
  });
});

describe("a window whose constant Retry-After is shorter than the window (virtual time)", () => {
  // Each probe went at the end of a 1 s hold and was refused until the window
  // re-opened; a block the server held was never read as a window, so the
  // scope went on cutting its pace (a fixed window of 30 per 10 s: 0.84, 28
  // refused in 100 pages). A probe refused after its hold had ended says the
  // hold did not reach the reset: the block's end tells the window as an
  // unheld block's does.
  // [limiter, latency ms, status, Retry-After s, pages, efficiency at least, refused at most]
  const table: [LimiterSpec, number, 429 | 503, number, number, number, number][] = [
    [{ shape: "fixed-window", quota: 30, windowMs: 10_000 }, 30, 429, 1, 100, 0.88, 14],
    [{ shape: "fixed-window", quota: 50, windowMs: 5_000 }, 50, 503, 1, 200, 0.8, 15],
    // (0.8 until a block's probes went at round resets: a window of 4 s,
    // not a round length, is read as 5 s, docs/DECISIONS.md.)
    [
      { shape: "fixed-window", quota: 20, windowMs: 4_000, anchor: "request" },
      80,
      429,
      1,
      100,
      0.74,
      12,
    ],
    [{ shape: "sliding-window", quota: 30, windowMs: 10_000 }, 50, 429, 1, 100, 0.85, 18],
  ];
  for (const [limiter, latencyMs, status, retryAfter, pages, atLeast, refusedAtMost] of table) {
    it(`defaults reach ${atLeast} of ${JSON.stringify(limiter)} answering ${status} "Retry-After: ${retryAfter}", ${refusedAtMost} refused at most`, () => {
      expectReaches(
        { name: limiter.shape, limiter, latencyMs, status, retryAfter },
        pages,
        atLeast,
        refusedAtMost,
        3,
      );
    });
  }
});

describe("a concurrency cap whose refusals bring a hold of seconds (virtual time)", () => {
  // The first refusal's hold read as a window's (16 admitted, then held 2 s);
  // the probe that tells a window from a cap sends its extras one at a time,
  // and over a long round trip half a window held fewer than the half quota
  // it waited for: the cap stayed a window (0.20-0.22 of its rate).
  // [cap, latency ms, status, Retry-After, efficiency at least, refused at most]
  const table: [number, number, 429 | 503, number | "date", number, number][] = [
    [6, 150, 429, 2, 0.5, 3],
    [6, 200, 503, 2, 0.48, 3],
    [6, 150, 503, "date", 0.5, 3],
  ];
  for (const [maxConcurrency, latencyMs, status, retryAfter, atLeast, refusedAtMost] of table) {
    it(`defaults reach ${atLeast} of ${maxConcurrency} at once at ${latencyMs} ms answering ${status} "Retry-After: ${retryAfter}", ${refusedAtMost} refused at most`, () => {
      expectReaches(
        {
          name: `cap ${maxConcurrency}`,
          limiter: { shape: "concurrency", maxConcurrency },
          latencyMs,
          status,
          retryAfter,
        },
        200,
        atLeast,
        refusedAtMost,
        3,
      );
    });
  }
});

describe("drawnSlidingHeaderSites()", () => {
  it("drawnSlidingHeaderSites() draws the same 30 sites for a seed: logs and counters, every header family", () => {
    const a = drawnSlidingHeaderSites(3);
    expect(a).toEqual(drawnSlidingHeaderSites(3));
    expect(a).not.toEqual(drawnSlidingHeaderSites(4));
    expect(a).toHaveLength(30);
    const all = [1, 2, 3, 4, 5].flatMap(drawnSlidingHeaderSites);
    expect(new Set(all.map((s) => s.limiter.shape))).toEqual(
      new Set(["sliding-counter", "sliding-window"]),
    );
    expect(new Set(all.map((s) => s.announce))).toEqual(
      new Set(["x-epoch", "ietf", "x-delta", "legacy"]),
    );
    for (const s of all) {
      const l = s.limiter as { quota: number; windowMs: number };
      expect(l.quota).toBeGreaterThanOrEqual(8);
      expect(l.quota / (l.windowMs / 1000)).toBeLessThanOrEqual(32.5);
    }
  });
});

describe("generateZooSites()", () => {
  it("generateZooSites() draws the same 17 sites for a seed, every shape, the constant Retry-After last", () => {
    const a = generateZooSites(7);
    expect(a).toEqual(generateZooSites(7));
    expect(a).not.toEqual(generateZooSites(8));
    expect(a).toHaveLength(17);
    expect(new Set(a.map((s) => s.limiter.shape))).toEqual(
      new Set([
        "token-bucket",
        "fixed-window",
        "sliding-window",
        "concurrency",
        "load-shed",
        "leaky-queue",
      ]),
    );
    const last = a[16]!;
    expect(last.name).toBe("constant-ra 17");
    expect(typeof last.retryAfter).toBe("number");
    expect([0, 0.2, 0.5]).toContain(last.latencyJitter);
  });
});

describe("issueShapeSites()", () => {
  it("issueShapeSites() gives the 27 shapes issue 11 measured at three latencies, with and without variation, each valid", () => {
    const sites = issueShapeSites();
    expect(sites).toHaveLength(162);
    for (const s of sites) expect(() => validateZooSpec(s), s.name).not.toThrow();
    const kinds = new Set(sites.map((s) => `${s.name} ${s.latencyMs} ${s.latencyJitter}`));
    expect(kinds.size).toBe(162);
    expect(sites.filter((s) => s.retryAfter === 2)).toHaveLength(18);
  });
});

describe("headerlessGridSites()", () => {
  it("headerlessGridSites() gives 396 valid sites, every shape at every setting, none announcing", () => {
    const sites = headerlessGridSites();
    expect(sites).toHaveLength(396);
    for (const s of sites) expect(() => validateZooSpec(s), s.name).not.toThrow();
    expect(new Set(sites.map((s) => s.name)).size).toBe(396);
    expect(sites.every((s) => s.announce === undefined)).toBe(true);
    const shapes = new Map<string, number>();
    for (const s of sites) shapes.set(s.limiter.shape, (shapes.get(s.limiter.shape) ?? 0) + 1);
    expect(Object.fromEntries(shapes)).toEqual({
      "token-bucket": 108,
      "fixed-window": 96,
      "sliding-window": 48,
      "sliding-counter": 108,
      concurrency: 36,
    });
  });
});

describe("retryAfterSites()", () => {
  it("retryAfterSites() gives 144 valid sites that each answer a refusal with a hold", () => {
    const sites = retryAfterSites();
    expect(sites).toHaveLength(144);
    for (const s of sites) expect(() => validateZooSpec(s), s.name).not.toThrow();
    expect(new Set(sites.map((s) => s.name)).size).toBe(144);
    expect(sites.every((s) => s.retryAfter !== undefined && s.retryAfter !== "none")).toBe(true);
  });

  it("the defaults search from below where a refusal costs a hold: the 144 sites' mean efficiency is at least 0.77 (0.758 halving from the first pace), every page fetched", () => {
    let sum = 0;
    for (const site of retryAfterSites()) {
      const r = runZooCrawl({
        site,
        pages: 200,
        outboundJitterMs: 6,
        settings: { retry: { times: 10 } },
      });
      expect({ site: site.name, ok: r.ok }).toEqual({ site: site.name, ok: 200 });
      sum += Math.min(1, r.efficiency);
    }
    expect(sum / 144).toBeGreaterThanOrEqual(0.77);
  });
});

describe("flakySites()", () => {
  it("flakySites() gives 36 valid sites that fail some admitted requests with 502 or 504", () => {
    const sites = flakySites();
    expect(sites).toHaveLength(36);
    for (const s of sites) expect(() => validateZooSpec(s), s.name).not.toThrow();
    expect(new Set(sites.map((s) => s.name)).size).toBe(36);
    expect(sites.every((s) => (s.errorRate ?? 0) > 0)).toBe(true);
  });

  it("the defaults crawl a flaky backend nearly as fast as a sound one: mean 0.83 of each site's efficiency without failures (0.48 when every 502 slowed the scope), every page fetched", () => {
    let sum = 0;
    const crawl = (site: ZooSiteSpec) =>
      runZooCrawl({ site, pages: 200, outboundJitterMs: 6, settings: { retry: { times: 10 } } });
    for (const site of flakySites()) {
      const r = crawl(site);
      expect({ site: site.name, ok: r.ok }).toEqual({ site: site.name, ok: 200 });
      sum += r.efficiency / crawl({ ...site, errorRate: 0 }).efficiency;
    }
    expect(sum / 36).toBeGreaterThanOrEqual(0.83);
  });
});

/**
 * Crawls each site of `table` (200 pages, 3 ms of jitter each way) and
 * checks that it reaches its efficiency with at most its share refused.
 */
/** The reasons of a crawl's rampup steps, in order (the crawl ran with `events: true`). */
/** A site that serves `cap` requests at once. */
function capSite(cap: number, fields: Omit<ZooSiteSpec, "name" | "limiter">): ZooSiteSpec {
  return { name: `cap ${cap}`, limiter: { shape: "concurrency", maxConcurrency: cap }, ...fields };
}

function rampupWhy(r: ReturnType<typeof runZooCrawl>): string[] {
  return r.events.flatMap((e) => e.type === "rampup" ? [e.why] : []);
}

/** The rampup steps of a crawl, with their times. */
function rampupSteps(r: ReturnType<typeof runZooCrawl>): { at: number; why: string }[] {
  return r.events.flatMap((e) => e.type === "rampup" ? [{ at: e.at, why: e.why }] : []);
}

/** A fixed window of `quota` per `windowMs` that tells its reset as a whole epoch second (`X-RateLimit-Reset`). */
function epochWindow(
  quota: number,
  windowMs: number,
  latencyMs: number,
  anchor: "first-use" | "request",
): ZooSiteSpec {
  return {
    name: `fixed ${quota}/${windowMs / 1000} s x-epoch ${anchor}`,
    limiter: { shape: "fixed-window", quota, windowMs, anchor },
    latencyMs,
    announce: "x-epoch",
    retryAfter: "seconds",
  };
}

function expectEachReaches(
  table: readonly [ZooSiteSpec, number, number][],
  pages = 200,
): void {
  for (const [site, atLeast, refusedAtMost] of table) {
    const r = runZooCrawl({
      site,
      pages,
      outboundJitterMs: 3,
      inboundJitterMs: 3,
      settings: { retry: { times: 10 } },
    });
    expect({ site: site.name, ok: r.ok }).toEqual({ site: site.name, ok: pages });
    expect({ site: site.name, atLeast: r.efficiency >= atLeast }).toEqual({
      site: site.name,
      atLeast: true,
    });
    expect({ site: site.name, refusedAtMost: r.refused / r.requests <= refusedAtMost }).toEqual({
      site: site.name,
      refusedAtMost: true,
    });
  }
}

describe("runZooCrawl() over the limiter zoo (virtual time)", () => {
  for (const [site, ramp, minEfficiency, maxRefused] of ZOO) {
    it(`adaptive limits reach ${minEfficiency} of ${site.name} (${ramp ? "rampup" : "defaults"}) with at most ${maxRefused * 100}% refused`, () => {
      const r = runZooCrawl({ site, pages: 200, rampup: ramp, settings: { retry: { times: 10 } } });
      expect(r.ok).toBe(200);
      expect(r.efficiency).toBeGreaterThanOrEqual(minEfficiency);
      expect(r.refused / r.requests).toBeLessThanOrEqual(maxRefused);
    });
  }

  it("a fixed window announced in headers, answered out of order, is never held through a whole window", () => {
    // 17 per second announced with IETF fields, answers at 133 ms ± 50%: an
    // older request's answer read after a newer one showed more left and
    // looked like a new window; the scope lost every other window (0.77, 13
    // refused).
    const site: ZooSiteSpec = {
      name: "fixed 17/1 s ietf",
      limiter: { shape: "fixed-window", quota: 17, windowMs: 1_000 },
      latencyMs: 133,
      latencyJitter: 0.5,
      announce: "ietf",
    };
    const r = runZooCrawl({ site, pages: 200, seed: 14, settings: { retry: { times: 10 } } });
    expect(r.ok).toBe(200);
    expect(r.refused).toBe(0);
    // (0.90 while slow start opened to the budget spread over the whole time
    // to the reset; 0.89 opened to the share it is sent in, which other seeds
    // gain by: 0.90 -> 0.94 at seed 5.)
    expect(r.efficiency).toBeGreaterThanOrEqual(0.88);
  });

  it("a sliding window announced in whole seconds is held only until the scope's own sends free a slot", () => {
    // 24 per 2 s, IETF fields: a spent budget's reset is told in whole
    // seconds, up to a second late; the 24th-last send plus the window is
    // when the oldest slot frees (0.85 with rampup when the told reset was
    // waited out).
    const site: ZooSiteSpec = {
      name: "sliding 24/2 s ietf",
      limiter: { shape: "sliding-window", quota: 24, windowMs: 2_000 },
      latencyMs: 53,
      announce: "ietf",
      retryAfter: "date",
    };
    for (const ramp of [true, false]) {
      const r = runZooCrawl({
        site,
        pages: 200,
        seed: 17,
        rampup: ramp,
        settings: { retry: { times: 10 } },
      });
      expect({ ramp, ok: r.ok, refused: r.refused }).toEqual({ ramp, ok: 200, refused: 0 });
      expect(r.efficiency).toBeGreaterThanOrEqual(0.9);
    }
  });

  it("a short window with epoch X-RateLimit-Reset in whole seconds is not waited out a second too long each window", () => {
    // 10 per second, express-rate-limit's legacy headers: the reset is the
    // window's end rounded up to a whole epoch second. Arrivals a few ms
    // late start each window just after a whole second, so the told reset
    // is nearly a second late (0.49 of the rate when it was waited out).
    // [site, at least 0.85, none refused]
    expectEachReaches(
      (["first-use", "request"] as const).map((
        anchor,
      ) => [epochWindow(10, 1_000, 30, anchor), 0.85, 0]),
    );
  });

  it("a window of more than the scope keeps sends for, told by epoch resets, is tried shorter from the window's first send", () => {
    // 80 per 2 s: a window's end told as the next whole epoch second is up
    // to a second late. A limit this large is more sends than the scope
    // keeps to tell when a slot frees, so the try of a whole-second window
    // starts from the window's first send; before, it never tried and
    // waited out each told reset (0.66 and 0.91 of the ideal).
    // [site, at least this efficiency, none refused]
    expectEachReaches(
      (["request", "first-use"] as const).map((
        anchor,
      ) => [epochWindow(80, 2_000, 17, anchor), 0.93, 0]),
      500,
    );
  });

  it("a sliding-window counter that tells its current window's end as the reset is not waited out each window", () => {
    // A counter (Cloudflare's, Upstash's) weighs the last window's count on
    // the current one and frees room all the time; told "0 left until the
    // window's end" right after a busy window, the scope waited that end out
    // and sent every other window (0.52, 0.78, 0.60 before). A sliding log
    // (resets its oldest request's) and a fixed window are not read as one:
    // none refused there.
    const counter = (quota: number, windowMs: number) =>
      ({ shape: "sliding-counter", quota, windowMs }) as const;
    const log = (quota: number, windowMs: number) =>
      ({ shape: "sliding-window", quota, windowMs }) as const;
    // [name, limiter, latency ms, header family, at least this efficiency, at most this share refused]
    const rows: [
      string,
      ZooSiteSpec["limiter"],
      number,
      NonNullable<ZooSiteSpec["announce"]>,
      number,
      number,
    ][] = [
      ["counter 80/2 s ietf", counter(80, 2_000), 17, "ietf", 0.85, 0.01],
      ["counter 80/2 s x-epoch 120 ms", counter(80, 2_000), 120, "x-epoch", 0.85, 0.01],
      ["counter 50/10 s x-delta", counter(50, 10_000), 17, "x-delta", 0.7, 0],
      // Read as a counter without a hold until a told reset before it (a try
      // a second shorter refused, then a Retry-After's): 0.50 when it was not.
      ["counter 150/10 s x-epoch", counter(150, 10_000), 17, "x-epoch", 0.85, 0.01],
      ["log 30/2 s ietf", log(30, 2_000), 17, "ietf", 0.9, 0],
      // More than the 64 sends a scope keeps: its try of a window from the
      // window's first send is not made from an older window's.
      ["log 80/2 s ietf", log(80, 2_000), 17, "ietf", 0.8, 0],
      // Resets told as deltas are not tried from the window's first send
      // (they narrow by themselves): 2 refused when they were.
      ["log 80/2 s ietf 120 ms", log(80, 2_000), 120, "ietf", 0.85, 0],
      ["log 50/10 s x-delta", log(50, 10_000), 17, "x-delta", 0.9, 0],
    ];
    expectEachReaches(
      rows.map(([name, limiter, latencyMs, announce, atLeast, refused]) => [
        { name, limiter, latencyMs, announce, retryAfter: "seconds" },
        atLeast,
        refused,
      ]),
      500,
    );
  });

  it("a sliding log told by epoch resets is paced at its rate once its window's length is found", () => {
    // Its `remaining` seldom comes back to `limit - 1` under load, so the
    // send that began "the window" was long past, and the budget was spread
    // to an end already gone: one burst a told window, a third of the rate
    // (0.62 before). The try of a window a second shorter is admitted with
    // none left where a log frees one slot and the send takes it: that
    // length holds (20 per second 0.49 before: the try read as refused).
    // [site, at least this efficiency, at most one refused of 500: a first
    // send after a hold whose told reset moved two seconds (epoch rounding)
    // reads as a sliding-window counter's, refused once and undone]
    expectEachReaches(
      ([[30, 2_000, 0.85], [20, 1_000, 0.8]] as const).map(([quota, windowMs, atLeast]) => [
        {
          name: `log ${quota}/${windowMs / 1000} s x-epoch`,
          limiter: { shape: "sliding-window", quota, windowMs },
          latencyMs: 17,
          announce: "x-epoch",
          retryAfter: "seconds",
        },
        atLeast,
        0.002,
      ]),
      500,
    );
  });

  it("sliding windows told by epoch resets, no jitter: the window's length is tried again when the resets say more, and a counter is read as one", () => {
    const log = (quota: number) => ({ shape: "sliding-window", quota, windowMs: 2_000 }) as const;
    // [name, limiter, latency ms, at least this efficiency, at most this many refused]; 500 pages.
    const rows: [string, ZooSiteSpec["limiter"], number, number, number][] = [
      // The first try (1 s, while the resets had told 2 s) was refused, which
      // settled the told resets as on time for good; a later reset of 2.98 s
      // grew the window read to 3 s, and every told reset, a second late,
      // was waited out: 30 per 3 s, 0.69 (80 per 2 s: 0.70). A refused try
      // now rules out only its own length and shorter ones.
      ["log 30/2 s", log(30), 17, 0.77, 3],
      ["log 80/2 s", log(80), 17, 0.77, 3],
      // The try of 1 s was admitted early on (the scope's first sends said
      // little of the log), and every window after it the hold that length
      // ended was refused twice: 30 refused of 530 (5.7%). The found length
      // refused, the next try was 2 s, but its send went 958 ms late (a
      // Retry-After's hold) and "found" 2.96 s: every told reset, a second
      // late, was waited out (0.69). A found length a tenth or more over the
      // whole second under the told window leaves that second to try: 0.88.
      ["log 30/2 s, 120 ms", log(30), 120, 0.83, 5],
      // Each window's budget went at its start, the hold until the told reset
      // ended where the counter still weighed that window in full, and the
      // refusal's Retry-After held the scope through the next: every other
      // window, a refusal each (0.50, 23 refused). Refused there with the
      // reset a window later, the site is read as a counter: 0.90.
      ["counter 20/1 s", { shape: "sliding-counter", quota: 20, windowMs: 1_000 }, 17, 0.85, 5],
    ];
    for (const [name, limiter, latencyMs, atLeast, refusedAtMost] of rows) {
      const r = runZooCrawl({
        site: { name, limiter, latencyMs, announce: "x-epoch", retryAfter: "seconds" },
        pages: 500,
        settings: { retry: { times: 10 } },
      });
      expect({ name, ok: r.ok }).toEqual({ name, ok: 500 });
      expect({ name, efficient: r.efficiency >= atLeast }).toEqual({ name, efficient: true });
      expect({ name, refused: r.refused <= refusedAtMost }).toEqual({ name, refused: true });
    }
  });

  it("a limit told on 429s only is tried higher where the site admits more (a bucket's size), obeyed where its window is said", () => {
    // [site, at least this efficiency, at most this share refused]; 3 ms of
    // jitter each way. Before the tries the two buckets ran at exactly their
    // told limit per told window: 0.64 and 0.65.
    const table: [ZooSiteSpec, number, number][] = [
      [
        {
          name: "15/s burst 10, x-epoch on 429s",
          limiter: { shape: "token-bucket", ratePerSec: 15, burst: 10 },
          latencyMs: 30,
          announce: "x-epoch",
          announceOn: "refusals",
        },
        0.8,
        0.03,
      ],
      [
        {
          name: "5/s burst 10, x-epoch on 429s",
          limiter: { shape: "token-bucket", ratePerSec: 5, burst: 10 },
          latencyMs: 200,
          announce: "x-epoch",
          announceOn: "refusals",
        },
        0.85,
        0.05,
      ],
      // A window told with its length (RateLimit-Policy w): no tries, no refusals past the first.
      [
        {
          name: "fixed 5/1s, ietf on 429s",
          limiter: { shape: "fixed-window", quota: 5, windowMs: 1_000 },
          latencyMs: 40,
          announce: "ietf",
          announceOn: "refusals",
        },
        0.95,
        0.01,
      ],
    ];
    expectEachReaches(table);
  });

  it("a token bucket of a few that announces its size and its time until full is not held a second per token", () => {
    // [site, at least this efficiency, at most this share refused]; 3 ms of
    // jitter each way, 40 ms latency. The buckets held a whole told second
    // every time their budget was spent before: 0.05, 0.58 and 0.65.
    const bucket = (ratePerSec: number, burst: number, announce: Announce): ZooSiteSpec => ({
      name: `${ratePerSec}/s burst ${burst} ${announce}`,
      limiter: { shape: "token-bucket" as const, ratePerSec, burst },
      latencyMs: 40,
      announce,
    });
    const table: [ZooSiteSpec, number, number][] = [
      [bucket(20, 1, "x-delta"), 0.4, 0.06],
      [bucket(20, 3, "x-delta"), 0.7, 0.01],
      [bucket(3, 2, "legacy"), 0.8, 0.01],
      // A window of 5 per second with the same fields: a try costs a refusal.
      [
        {
          name: "fixed 5/1s x-delta",
          limiter: { shape: "fixed-window", quota: 5, windowMs: 1_000 },
          latencyMs: 40,
          announce: "x-delta",
        },
        0.9,
        0.01,
      ],
      // A window said with the limit (q=1;w=1) is a policy: obeyed as told,
      // a bucket that announces so included.
      [bucket(20, 1, "ietf"), 0.04, 0.01],
    ];
    expectEachReaches(table);
  });

  it("a window spent with 8 in flight is no concurrency cap, and the lone send after it says no pace", () => {
    // 20 per second, no headers, 120 ms: the first flight spends the window
    // with 8 in flight (read as a cap of 7), and the one send the cap lets
    // out is refused too. It was read as refused at 8.33/s (one in flight
    // over a round trip) and the scope bisected up to it: 0.38.
    const site: ZooSiteSpec = {
      name: "fixed 20/1s, no headers, 120 ms",
      limiter: { shape: "fixed-window", quota: 20, windowMs: 1_000 },
      latencyMs: 120,
    };
    const r = runZooCrawl({ site, pages: 200, events: true, settings: { retry: { times: 10 } } });
    expect(r.ok).toBe(200);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.8);
    const why = rampupWhy(r);
    expect(why.some((w) => /the one send after a cap's cut refused/.test(w))).toBe(true);
    // (Its block was read as a window until a block's probes went at round
    // resets: the probe at the second's reset ends it in 60 ms, too short
    // to tell a window, and the pace reading that follows holds 0.87.)
  });

  it("a sliding-window counter read as a bucket that refills slowly climbs in rounds of seconds, not of the refill time", () => {
    // 503 without Retry-After: the quota goes at once, the trickle after it
    // reads as a bucket of 30-71 refilling at 1-2/s, and each round of the
    // climb lasted as long as such a bucket takes to refill (up to a
    // minute): 0.25, 0.26, 0.28.
    const table: [number, number, number, number][] = [
      [50, 10_000, 10, 0.5],
      [71, 10_000, 20, 0.5],
      [30, 5_000, 10, 1],
    ];
    for (const [quota, windowMs, latencyMs, phase] of table) {
      const site: ZooSiteSpec = {
        name: `sliding counter ${quota} per ${windowMs} ms, ${latencyMs} ms`,
        limiter: { shape: "sliding-counter", quota, windowMs, phaseMs: phase * windowMs },
        latencyMs,
        status: 503,
      };
      const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } } });
      // (The efficiency itself when under 0.5, so that a failure shows it.)
      const efficiency = r.efficiency >= 0.5 ? "0.5 or more" : r.efficiency;
      expect({ site: site.name, ok: r.ok, efficiency }).toEqual({
        site: site.name,
        ok: 200,
        efficiency: "0.5 or more",
      });
    }
  });

  it("a small bucket's rate is read with each hold refilling no more than its burst", () => {
    // 20/s with a burst of 3 at 150 ms, Retry-After in whole seconds: each
    // 1 s hold refills 3, not 20, and counting the holds in full read about
    // 7/s (0.62).
    const site: ZooSiteSpec = {
      name: "bucket 20/s of 3, 150 ms, Retry-After seconds",
      limiter: { shape: "token-bucket", ratePerSec: 20, burst: 3 },
      latencyMs: 150,
      latencyJitter: 0.3,
      status: 429,
      retryAfter: "seconds",
    };
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } } });
    expect(r.ok).toBe(200);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.68);
    expect(r.refused / r.requests).toBeLessThanOrEqual(0.03);
  });

  it("a concurrency cap is read at its size when a send a moment after the refused one reached the site first", () => {
    // Two sends 0.06 ms apart reach the site in the other order (3 ms of
    // noise): the later one, sent with one more in flight, is admitted and
    // the earlier one refused. Read from the refused send alone, a cap of 6
    // was 5 for the rest of the crawl (0.82, 0.68; a cap of 5 read as 4: 0.78).
    const table: [number, number, number][] = [[6, 200, 1], [6, 200, 6], [5, 150, 4]];
    for (const [cap, latencyMs, seed] of table) {
      const r = runZooCrawl({
        site: capSite(cap, { latencyMs, status: 503, retryAfter: "none" }),
        pages: 200,
        seed,
        outboundJitterMs: 3,
        inboundJitterMs: 3,
        settings: { retry: { times: 10 } },
      });
      expect({ cap, seed, ok: r.ok }).toEqual({ cap, seed, ok: 200 });
      expect({ cap, seed, efficient: r.efficiency >= 0.9 }).toEqual({ cap, seed, efficient: true });
    }
  });

  it("a site that serves one at a time, with latencies that vary, is a concurrency cap of one, not a pace", () => {
    // Paced, a site serving one request at a time refuses whenever an answer
    // takes longer than the gap: a cap of one at 90 ms ± 50% was paced below
    // 1/90 ms and refused the second of two in flight again and again (0.63-
    // 0.66 of its rate, 0.58-0.75 over the rows below). Refused only with two
    // in flight, admitted alone: one in flight, unpaced (0.91-1.0).
    // (At 20 ms a cap of one serves 50/s, and the search from below climbs
    // there from 8/s first: 1.8 s of a 4 s crawl.)
    const table: [number, number, number, number][] = [
      [90, 0.5, 1, 0.85],
      [40, 0.3, 2, 0.85],
      [20, 0.5, 3, 0.7],
      [150, 0.3, 1, 0.85],
    ];
    for (const [latencyMs, latencyJitter, seed, least] of table) {
      const site: ZooSiteSpec = {
        name: "one at a time",
        limiter: { shape: "concurrency", maxConcurrency: 1 },
        latencyMs,
        latencyJitter,
        status: 429,
        retryAfter: "none",
      };
      const r = runZooCrawl({
        site,
        pages: 200,
        seed,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const why = rampupWhy(r);
      const row = { latencyMs, seed };
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: 200 });
      expect({ ...row, capOne: why.some((w) => /admitted alone: concurrency cap 1$/.test(w)) })
        .toEqual({ ...row, capOne: true });
      expect({ ...row, efficient: r.efficiency >= least }).toEqual({ ...row, efficient: true });
    }
  });

  it("a site that serves one at a time and holds each refusal is a cap of one at its second refusal", () => {
    // Each refusal costs a hold here, so the evidence of a cap of one is
    // taken early: refused twice with two in flight (the first sends at one
    // instant, then the climb from 8/s) and admitted alone twice. Asked for
    // eight admits alone, the scope paced and climbed under the cap until
    // a third refusal (0.54-0.68 over these rows; 0.65-0.79 now, two
    // refused, the first of them the two sends at one instant).
    const table: [number, number, "seconds" | "date" | number, number][] = [
      [80, 0.3, "seconds", 0.75],
      [80, 0.5, 2, 0.63],
      [110, 0.5, "date", 0.63],
    ];
    for (const [latencyMs, latencyJitter, retryAfter, least] of table) {
      const site: ZooSiteSpec = {
        name: "one at a time, held",
        limiter: { shape: "concurrency", maxConcurrency: 1 },
        latencyMs,
        latencyJitter,
        status: 429,
        retryAfter,
      };
      const pages = Math.round(8000 / latencyMs);
      const r = runZooCrawl({
        site,
        pages,
        seed: 1,
        outboundJitterMs: 3,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const row = { latencyMs, retryAfter };
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: pages });
      expect({
        ...row,
        capOne: rampupWhy(r).some((w) => /admitted alone: concurrency cap 1$/.test(w)),
      })
        .toEqual({ ...row, capOne: true });
      expect({ ...row, refused: r.refused }).toEqual({ ...row, refused: 2 });
      expect({ ...row, efficient: r.efficiency >= least }).toEqual({ ...row, efficient: true });
    }
  });

  it("a cap of one probed at two and refused goes back to one, not to a pace", () => {
    const site: ZooSiteSpec = {
      name: "one at a time",
      limiter: { shape: "concurrency", maxConcurrency: 1 },
      latencyMs: 40,
      latencyJitter: 0.3,
      status: 503,
      retryAfter: "none",
    };
    const r = runZooCrawl({
      site,
      pages: 3000,
      seed: 1,
      settings: { retry: { times: 10 } },
      events: true,
    });
    const why = rampupWhy(r);
    const probe = why.indexOf("quiet: probing concurrency 2");
    expect(probe).toBeGreaterThan(0);
    expect(why[probe + 1]).toBe("refused with 2 in flight: concurrency cap 1");
    expect(r.ok).toBe(3000);
    expect(r.refused).toBeLessThanOrEqual(6);
  });

  it("a concurrency cap that answers with a Retry-After of seconds is a cap once its holds tell no window", () => {
    // The first refusal of a cap with a 2 s Retry-After reads as a window
    // (many admits, then held most of the time since the first send): a
    // quota, then a pace once its probe shows the holds tell no window. The
    // pace climbed for the rest of the crawl (0.11-0.43 over these rows);
    // the cap the first refusal pointed to is tried instead, at the most
    // the site was seen serving at once.
    // [cap, latency ms, Retry-After s, status, seed, least efficiency (before)]
    const table: [number, number, number, 429 | 503, number, number][] = [
      [3, 60, 2, 503, 1, 0.5], // 0.29
      [4, 56, 2, 503, 3, 0.45], // 0.28
      [4, 100, 2, 429, 2, 0.55], // 0.39
      [6, 80, 5, 429, 1, 0.25], // 0.13 (two 5 s holds in a 4 s crawl)
      [2, 30, 2, 429, 3, 0.45], // 0.25
    ];
    for (const [cap, latencyMs, retryAfter, status, seed, least] of table) {
      const r = runZooCrawl({
        site: capSite(cap, { latencyMs, latencyJitter: 0.3, status, retryAfter }),
        pages: 300,
        seed,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const row = { cap, latencyMs, seed };
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: 300 });
      const why = rampupWhy(r);
      expect({
        ...row,
        read: why.some((w) => w.endsWith(`tell no window: concurrency cap ${cap}`)),
        refuted: why.some((w) => w.includes("under a cap tried after holds")),
      })
        .toEqual({ ...row, read: true, refuted: false });
      expect({ ...row, efficient: r.efficiency >= least }).toEqual({ ...row, efficient: true });
    }
  });

  it("a bucket whose burst and constant Retry-After read as a cap goes back to its pace at the cap's first refusal", () => {
    const site = generateZooSites(6).find((s) => s.name === "constant-ra 17")!;
    expect(site.limiter).toEqual({ shape: "token-bucket", ratePerSec: 18, burst: 8 });
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } }, events: true });
    const why = rampupWhy(r);
    const tried = why.findIndex((w) => /tell no window: concurrency cap \d+$/.test(w));
    expect(tried).toBeGreaterThan(0);
    const back = why.findIndex((w, i) => i > tried && w.includes("under a cap tried after holds"));
    expect(why[back]).toMatch(/^refused with \d+ in flight under a cap tried after holds: pacing /);
    expect(why.slice(back + 1).some((w) => /concurrency cap/.test(w))).toBe(false);
    expect(r.ok).toBe(200);
    expect(r.refused).toBeLessThanOrEqual(4);
  });

  it("a sliding-window counter met late in its window climbs from the rate its block read, a send a round", () => {
    // After its quota's burst, a sliding-window counter refuses until its
    // window rolls over, then admits its rate. The admits over that block
    // read a rate as low as the block is long, and the climb from it went
    // in rounds as long as the block's window or four sends: 100 per 10 s
    // met 8 s before a roll ran at 0.26 of its rate.
    const table: [number, number, number, number, number][] = [
      // quota, window, latency, where the window rolls, efficiency before -> after
      [100, 10_000, 15, 8_000, 0.5], // 0.26 -> 0.53
      [71, 10_000, 20, 8_000, 0.6], // 0.36 -> 0.66
      [100, 10_000, 15, 4_000, 0.65], // 0.47 -> 0.70
      // (One admit after the block; 0.35 -> 0.59, 0.50 since a blind quota
      // refused so is first tried spread over its window: over twelve seeds
      // 0.70 -> 0.58 with 33 -> 26 refused, docs/DECISIONS.md.)
      [40, 10_000, 50, 4_000, 0.5],
      // A climb from the block refused at 84/s: the rate admitted since the
      // first refusal, 18 s before, counted the climb's own slow sends.
      [50, 5_000, 20, 3_750, 0.45], // 0.34 -> 0.51
      [50, 5_000, 20, 2_500, 0.55], // 0.45 -> 0.65
    ];
    for (const [quota, windowMs, latencyMs, phaseMs, least] of table) {
      const r = runZooCrawl({
        site: {
          name: `sliding counter ${quota}/${windowMs}`,
          limiter: { shape: "sliding-counter", quota, windowMs, phaseMs },
          latencyMs,
          latencyJitter: 0.3,
          status: 503,
        },
        pages: 200,
        seed: 1,
        settings: { retry: { times: 10 } },
      });
      const row = { quota, phaseMs };
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: 200 });
      expect({ ...row, efficient: r.efficiency >= least }).toEqual({ ...row, efficient: true });
    }
  });

  it("a cut to what an episode admitted goes no lower than most of the last quiet pace", () => {
    // The episode's estimate counts its holds: a fixed window of 35 per
    // second with 1 s holds, quiet at 39.5/s and refused at 43.4/s, read
    // "admitted 17.86/s" and was cut to 17/s (0.48).
    const site: ZooSiteSpec = {
      name: "fixed 35/1s",
      limiter: { shape: "fixed-window", quota: 35, windowMs: 1000 },
      latencyMs: 177,
      status: 503,
      retryAfter: "seconds",
    };
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } }, events: true });
    const why = rampupWhy(r);
    const cut = why.find((w) => w.startsWith("refused at 43.4/s, admitted"));
    expect(cut).toBe("refused at 43.4/s, admitted 17.86/s: rate 27.67/s");
    expect(r.ok).toBe(200);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.55);
  });

  it("the bound of a cut floored at most of the last quiet pace lies above it, between that pace and the refused one", () => {
    // Floored to 17.4/s, the scope kept the bound the estimate read (18.2/s)
    // and converged under it at once: 0.85. (Where the floor lay above that
    // bound, the scope sat above it and never stepped again: a cap of 4
    // mixed with a 12/s bucket, 0.69 on the outside check.)
    const site: ZooSiteSpec = {
      name: "bucket 21/s of 11",
      limiter: { shape: "token-bucket", ratePerSec: 21, burst: 11 },
      latencyMs: 185,
      latencyJitter: 0.5,
      status: 503,
    };
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } }, events: true });
    const why = rampupWhy(r);
    const cut = why.indexOf("refused at 45.28/s, admitted 17.14/s: rate 17.39/s");
    expect(cut).toBeGreaterThan(0);
    expect(why[cut + 1]).toBe("quiet at 17.39/s: halfway to 35.06/s");
    expect(r.ok).toBe(200);
    // 0.978 with 9 refused before the refusal budget, 0.941 with 8: a last
    // step held over 4% refused, the next refusal came at a lower pace and
    // bounded the search closer under the site's rate.
    expect(r.efficiency).toBeGreaterThanOrEqual(0.94);
    expect(r.refused / r.requests).toBeLessThanOrEqual(0.05);
  });

  it("a refusal on its way at a cap's cut, sent with fewer in flight, lowers the cap", () => {
    // Refusals of several sends come back together; the cap was read from
    // the one with most in flight and the others, sent with fewer, were
    // answered for by that cut: the next send after the hold found the cap
    // again, at the cost of another hold (0.55 and 0.60 of the site's rate).
    const table: [number, number, 429 | 503, number, number][] = [
      // cap, latency, status, jitter, least efficiency
      [4, 79, 503, 0.2, 0.75], // 0.55 -> 0.78
      [4, 104, 429, 0.5, 0.8], // 0.60 -> 0.83
    ];
    for (const [cap, latencyMs, status, latencyJitter, least] of table) {
      const r = runZooCrawl({
        site: {
          name: `conc ${cap}`,
          limiter: { shape: "concurrency", maxConcurrency: cap },
          latencyMs,
          latencyJitter,
          status,
          retryAfter: "seconds",
        },
        pages: 200,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const why = rampupWhy(r);
      const row = { cap, latencyMs };
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: 200 });
      expect({ ...row, lowered: why.some((w) => w.startsWith("refused on its way with")) })
        .toEqual({ ...row, lowered: true });
      expect({ ...row, efficient: r.efficiency >= least }).toEqual({ ...row, efficient: true });
    }
  });

  it("a refusal under a supposed cap in the burst sent at a hold's end is a rate that takes no bursts, not a smaller cap", () => {
    // Every free slot sends at the instant a server hold ends; a bucket of 2
    // refuses the third of them whatever its rate. Read as a cap lowered to
    // 2 (a round trip of 200 ms: 7.5-10/s), the scope ran at 0.44-0.63.
    const table: [number, number, number, number][] = [
      // rate, latency, jitter, least efficiency
      [21.4, 206, 0.3, 0.6], // 0.44 -> 0.65
      [15, 200, 0, 0.75], // 0.63 -> 0.81
    ];
    for (const [ratePerSec, latencyMs, latencyJitter, least] of table) {
      const r = runZooCrawl({
        site: {
          name: `bucket ${ratePerSec}/s of 2`,
          limiter: { shape: "token-bucket", ratePerSec, burst: 2 },
          latencyMs,
          latencyJitter,
          status: 429,
          retryAfter: "seconds",
        },
        pages: 300,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const why = rampupWhy(r);
      const row = { ratePerSec, latencyMs };
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: 300 });
      expect({ ...row, lowered: why.some((w) => w.includes("lowered to")) })
        .toEqual({ ...row, lowered: false });
      expect({ ...row, efficient: r.efficiency >= least }).toEqual({ ...row, efficient: true });
    }
  });

  it("a refusal on its way of a send made at one instant with another is no pace refused", () => {
    // A strict spacer of 30/s at 259 ms: the first answer freed a slot and
    // slow start added one, two sends at one instant, the second refused.
    // Its gap to the send before that instant (259 ms) was read as a pace
    // refused, 3.86/s, and halved: 0.12 of the site's rate.
    const site: ZooSiteSpec = {
      name: "spacer 30/s",
      limiter: { shape: "token-bucket", ratePerSec: 30, burst: 1 },
      latencyMs: 259,
      status: 429,
      retryAfter: "date",
    };
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } }, events: true });
    const why = rampupWhy(r);
    expect(why.filter((w) => w.startsWith("refused on its way"))).toEqual([]);
    expect(r.ok).toBe(200);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.25);
  });

  it("a first refusal at a pace read from a few sends starts the search from below, where a refusal costs no hold too", () => {
    // Two sends at one instant over a short round trip read as 81-200/s;
    // halving from there to a slow strict spacer's rate cost a refusal a
    // step (and a probe refused per block): 9-11 of 100 requests.
    const table: [number, number, number][] = [
      // rate, latency, jitter
      [2.7, 35, 0.3], // 11 -> 6 refused
      [8, 10, 0], // 9 -> 6 refused, 0.86 -> 0.96
    ];
    for (const [ratePerSec, latencyMs, latencyJitter] of table) {
      const r = runZooCrawl({
        site: {
          name: `spacer ${ratePerSec}/s`,
          limiter: { shape: "token-bucket", ratePerSec, burst: 1 },
          latencyMs,
          latencyJitter,
          status: 429,
        },
        pages: 100,
        settings: { retry: { times: 10 } },
        events: true,
      });
      const why = rampupWhy(r);
      const row = { ratePerSec };
      expect({ ...row, first: why[0]?.endsWith(": from below at 8/s") }).toEqual({
        ...row,
        first: true,
      });
      expect({ ...row, ok: r.ok }).toEqual({ ...row, ok: 100 });
      expect({ ...row, few: r.refused <= 6 }).toEqual({ ...row, few: true });
      expect({ ...row, efficient: r.efficiency >= 0.85 }).toEqual({ ...row, efficient: true });
    }
  });

  it("a bucket whose burst ran out just as slow start reached its top is a rate, not a concurrency cap", () => {
    // Refused with 8 in flight, then again with 7 after the Retry-After hold
    // (the site had served 7 at once): lowering the cap one by one, a second
    // of hold each time, is what a cap would need; a bucket needs a pace.
    const site: ZooSiteSpec = {
      name: "bucket 13/s burst 19",
      limiter: { shape: "token-bucket", ratePerSec: 13, burst: 19 },
      latencyMs: 55,
      status: 503,
      retryAfter: "seconds",
    };
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } }, events: true });
    const caps = r.events.filter((e) => e.type === "rampup" && /concurrency cap/.test(e.why));
    expect(r.ok).toBe(200);
    expect(caps.length).toBeLessThanOrEqual(1);
    // 0.945 since quiet rounds last as long as the saved burst takes to
    // refill (it hides a pace above the rate); 0.95 before, at more refusals
    // on other buckets.
    expect(r.efficiency).toBeGreaterThanOrEqual(0.93);
  });

  it("runZooCrawl() is deterministic for a seed", () => {
    const site = ZOO[0]![0];
    const a = runZooCrawl({ site, pages: 50, seed: 3 });
    const b = runZooCrawl({ site, pages: 50, seed: 3 });
    expect(a.stats.arrivals).toEqual(b.stats.arrivals);
  });
});

describe("a bucket that always says the same Retry-After (virtual time)", () => {
  // A 14/s bucket of 5 answering 503 with Retry-After: 2 whatever its own
  // wait: its first hold told a quota of 5 per 2.1 s (2.4/s). Quiet at half
  // that window only after 14 s, the scope then paced at 5.8/s and never
  // climbed (0.34 of the site's rate). Its probe, half a quota more half way
  // through the first window, is admitted: the holds told no window, and the
  // scope climbs from twice the told rate until refused, then stays under
  // the pace it climbed from.
  const site: ZooSiteSpec = {
    name: "bucket 14/s b5, Retry-After always 2",
    limiter: { shape: "token-bucket", ratePerSec: 14, burst: 5 },
    latencyMs: 28,
    status: 503,
    retryAfter: 2,
  };
  it("the defaults leave the told quota within one window and climb to just under the site's rate", () => {
    const r = runZooCrawl({ site, pages: 200, settings: { retry: { times: 10 } }, events: true });
    const steps = rampupSteps(r);
    const left = steps.find((s) => s.why.includes("the holds tell no window"));
    expect(left?.why).toMatch(/^half a quota more half way through a window/);
    expect(left!.at).toBeLessThan(5_000);
    const refusedClimbing = steps.filter((s) => s.why.startsWith("refused climbing at"));
    expect(refusedClimbing.length).toBeGreaterThanOrEqual(1);
    expect(r.ok).toBe(200);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.5);
    expect(r.refused / r.requests).toBeLessThanOrEqual(0.05);
  });
});

describe("a concurrency cap that answers Retry-After of seconds (virtual time)", () => {
  // The first refusal, at the first send with one more in flight than ever
  // admitted, reads as a cap and, its hold a window's (two seconds after
  // many admits), as a quota told by holds as well. The quota goes first;
  // its probe of more than the quota goes as soon as the first window's
  // quota is spent (a cap admits it, a window refuses the first extra), not
  // half way through the window: the cap is read a window's time sooner.
  // Before: half way, 4.3-4.5 s after the first refusal, 0.75 (a cap of 2)
  // and 0.58 (a cap of 4) of the site's rate over 400 pages.
  for (const [cap, floor] of [[2, 0.8], [4, 0.65]] as const) {
    for (const seed of [1, 2]) {
      it(`a cap of ${cap} at 56 ms answering Retry-After: 2, seed ${seed}: the cap read within 3.2 s of the first refusal, efficiency at least ${floor}`, () => {
        const site = capSite(cap, {
          latencyMs: 56,
          latencyJitter: 0.3,
          status: 503,
          retryAfter: 2,
        });
        const r = runZooCrawl({
          site,
          pages: 400,
          seed,
          settings: { retry: { times: 10 } },
          events: true,
        });
        const steps = rampupSteps(r);
        const found = steps.find((s) => s.why.endsWith(`concurrency cap ${cap}`));
        expect(found?.why).toMatch(
          /^more than a quota told by holds was admitted as soon as it was spent/,
        );
        expect(found!.at - steps[0]!.at).toBeLessThan(3_200);
        expect(r.ok).toBe(400);
        expect(r.efficiency).toBeGreaterThanOrEqual(floor);
        expect(r.refused).toBeLessThanOrEqual(cap);
      });
    }
  }
});

describe("announced windows that begin at the client's first request (virtual time)", () => {
  // A window that begins at the first request after the last one ended (a
  // counter with a time-to-live) announced with IETF fields, 10 per second,
  // reset in whole seconds. With a few ms between send and arrival each
  // window began a little later than the one before; the scope held until
  // the reset rolled on from the last one, a guess read as the tighter bound
  // over the announcements of the new window, and was refused at every few
  // windows' first send (0.71, 14 refused).
  for (const announce of ["ietf", "x-delta"] as const) {
    it(`fixed 10/1s from the first request, ${announce}, 5 ms jitter: no refusal, at least 0.9 of the rate`, () => {
      const r = runZooCrawl({
        site: {
          name: `fixed 10/1s anchored, ${announce}`,
          limiter: { shape: "fixed-window", quota: 10, windowMs: 1_000, anchor: "request" },
          latencyMs: 5,
          status: 429,
          retryAfter: "seconds",
          announce,
        },
        pages: 200,
        outboundJitterMs: 5,
        settings: { retry: { times: 10 } },
      });
      expect(r.ok).toBe(200);
      expect(r.refused).toBe(0);
      expect(r.efficiency).toBeGreaterThanOrEqual(0.9);
    });
  }
});

describe("a block's probes at round resets (virtual time)", () => {
  // A window without headers or Retry-After is found by probing its block of
  // refusals; windows are mostly of round lengths, so a probe waits for the
  // next round reset no refused probe has passed (counted from the window's
  // first send, or aligned to the clock) where it comes within a few of the
  // growing waits, and the window is read as that length.
  it("finds a fixed window's end with fewer refused probes", () => {
    // [quota, window ms, latency ms, refused at most over seeds 1 and 2]
    // (10-12, 13 and 16-17 refused with probes at growing waits alone.)
    const table: [number, number, number, number][] = [
      [10, 2_000, 40, 9],
      [30, 5_000, 40, 11],
      [50, 10_000, 120, 14],
    ];
    for (const [quota, windowMs, latencyMs, refusedAtMost] of table) {
      for (const seed of [1, 2]) {
        const r = runZooCrawl({
          site: {
            name: `fixed ${quota} per ${windowMs} ms`,
            limiter: { shape: "fixed-window", quota, windowMs },
            latencyMs,
            latencyJitter: 0.3,
          },
          pages: 200,
          seed,
          outboundJitterMs: 3,
          settings: { retry: { times: 10 } },
        });
        expect({ quota, windowMs, seed, ok: r.ok, fast: r.efficiency >= 0.9, refused: r.refused })
          .toEqual({
            quota,
            windowMs,
            seed,
            ok: 200,
            fast: true,
            refused: Math.min(r.refused, refusedAtMost),
          });
      }
    }
  });

  it("paces a sliding-window counter at its window's rate from the reset on", () => {
    // A counter of 300 per minute: its quota goes in the first seconds, its
    // block lasts to the minute, then it frees room at 5/s. Read from one
    // admit over the whole block (0.02/s) it ran at 0.75-0.83 of its rate.
    // Met half way through its minute (a boundary at 30 s, read as a window
    // of 30 s), the rate it admits from the reset on is the one read.
    // [quota, window ms, phase ms, pages, efficiency at least]
    const table: [number, number, number, number, number][] = [
      [300, 60_000, 60_000, 1_200, 0.95],
      [300, 60_000, 30_000, 1_200, 0.85],
      [120, 60_000, 20_000, 480, 0.85],
    ];
    for (const [quota, windowMs, phaseMs, pages, atLeast] of table) {
      for (const seed of [1, 2]) {
        const r = runZooCrawl({
          site: {
            name: `sliding counter ${quota} per ${windowMs} ms`,
            limiter: { shape: "sliding-counter", quota, windowMs, phaseMs },
            latencyMs: 100,
            latencyJitter: 0.3,
          },
          pages,
          seed,
          outboundJitterMs: 3,
          settings: { retry: { times: 10 } },
        });
        const efficiency = r.efficiency >= atLeast ? `${atLeast} or more` : r.efficiency;
        expect({ quota, phaseMs, seed, ok: r.ok, efficiency }).toEqual({
          quota,
          phaseMs,
          seed,
          ok: pages,
          efficiency: `${atLeast} or more`,
        });
      }
    }
  });
});

describe("a window per clock second, held a second per refusal (virtual time)", () => {
  // A counter per epoch second answering `Retry-After: 1`: the one-second
  // holds tell no window (a spacer or a bucket holds as long), so the pace
  // alone was left to find it, one refusal every few seconds. Three seconds
  // in a row whose first refusal came after as many admits tell a quota per
  // clock second (the zoo's windows begin at time 0, on the clock's seconds).
  const crawl = (
    limiter: ZooSiteSpec["limiter"],
    latencyMs: number,
    status: 429 | 503,
    retryAfter: NonNullable<ZooSiteSpec["retryAfter"]>,
    pages: number,
    seed: number,
  ) => {
    const r = runZooCrawl({
      site: { name: "clock seconds", limiter, latencyMs, latencyJitter: 0.3, status, retryAfter },
      pages,
      seed,
      outboundJitterMs: 3,
      events: true,
      settings: { retry: { times: 10 } },
    });
    const told = r.events.flatMap((e) =>
      e.type === "rampup" && / per second$/.test(e.why) ? [e.why.replace(/.*: /, "")] : []
    );
    return { r, told };
  };

  it("reads the window's quota per second and keeps to it", () => {
    // [quota, latency ms, status, Retry-After, efficiency at least]
    // (Before: no quota read; 0.75 and 0.69 on the first row.)
    const table: [number, number, 429 | 503, NonNullable<ZooSiteSpec["retryAfter"]>, number][] = [
      [5, 60, 429, "seconds", 0.84],
      [12, 60, 503, 1, 0.75],
      [20, 10, 503, 1, 0.78],
      [40, 10, 429, "seconds", 0.78],
    ];
    for (const [quota, latencyMs, status, retryAfter, atLeast] of table) {
      for (const seed of [1, 2]) {
        const limiter = { shape: "fixed-window", quota, windowMs: 1000 } as const;
        const { r, told } = crawl(limiter, latencyMs, status, retryAfter, 20 * quota, seed);
        expect({ quota, seed, told, ok: r.ok, fast: r.efficiency >= atLeast }).toEqual({
          quota,
          seed,
          told: [`a quota of ${quota} per second`],
          ok: 20 * quota,
          fast: true,
        });
      }
    }
  });

  it("leaves strict spacers and buckets with one-second holds to the pace", () => {
    // A bucket's refill after a one-second hold is as regular as a window's
    // second; read as a window, one with a small burst ran at half its rate.
    const table: [number, number][] = [[6, 2], [8, 1], [15, 5], [20, 10]];
    for (const [ratePerSec, burst] of table) {
      for (const latencyMs of [10, 60]) {
        const limiter = { shape: "token-bucket", ratePerSec, burst } as const;
        const { told } = crawl(limiter, latencyMs, 429, 1, 200, 1);
        expect({ ratePerSec, burst, latencyMs, told }).toEqual({
          ratePerSec,
          burst,
          latencyMs,
          told: [],
        });
      }
    }
  });
});

describe("a refusal budget for the last steps of a search (virtual time)", () => {
  // A slow bucket (1/s, a burst of 5) over 200 pages: its burst, the first
  // cuts and the steps toward a refused pace cost refusals. Where more than
  // 4% of the answers so far were refusals, the steps within a tenth of the
  // refused pace wait (they gain at most a tenth, and each may be refused).
  // Before: 11 of 211 and 12 of 212 refused at 300 ms, 12 of 212 at 100 ms.
  const crawl = (latencyMs: number, seed: number, pages: number) =>
    runZooCrawl({
      site: {
        name: "slow bucket",
        limiter: { shape: "token-bucket", ratePerSec: 1, burst: 5 },
        latencyMs,
        latencyJitter: 0.3,
        status: 429,
      },
      pages,
      seed,
      outboundJitterMs: 3,
      settings: { retry: { times: 10 } },
      events: true,
    });
  const table: [latencyMs: number, seed: number][] = [[300, 1], [300, 2], [100, 1]];
  for (const [latencyMs, seed] of table) {
    it(`a bucket of 1/s with a burst of 5 at ${latencyMs} ms, seed ${seed}: at most 5% refused, efficiency at least 0.85`, () => {
      const r = crawl(latencyMs, seed, 200);
      expect(r.ok).toBe(200);
      expect(r.refused / r.requests).toBeLessThanOrEqual(0.05);
      expect(r.efficiency).toBeGreaterThanOrEqual(0.85);
    });
  }

  it("a step toward the refused pace from within a tenth of it waits while refusals are over 4% of the answers", () => {
    const r = crawl(300, 1, 600);
    // The refused share of the answers before each halfway step that starts
    // within a tenth of the refused pace it heads for.
    let refused = 0;
    let answers = 0;
    const fine: number[] = [];
    for (const e of r.events) {
      if (e.type === "request-done") {
        answers++;
        if (e.status === 429) refused++;
      } else if (e.type === "rampup") {
        const m = /^quiet at ([0-9.]+)\/s: halfway to ([0-9.]+)\/s/.exec(e.why);
        if (m !== null && Number(m[1]) >= 0.9 * Number(m[2])) fine.push(refused / answers);
      }
    }
    // Such steps come once enough admitted answers have brought the refused
    // share under the budget (over 600 pages it does), never before.
    expect(fine.length).toBeGreaterThan(0);
    for (const share of fine) expect(share).toBeLessThanOrEqual(0.04);
  });
});

describe("a cut back under a pace the site admitted keeps its concurrency (virtual time)", () => {
  // A strict spacer of 25/s at 120 ms: refused at a pace just above one
  // that passed a round quiet, the scope goes back under it. Before, the cut
  // also kept one request in flight until an answer came (two round trips
  // at a tenth of the pace, for a refusal that was no wall): the defaults
  // 0.77 and 0.87, rampup 0.80 (±0% and ±30%); now 0.78 and 0.88, rampup
  // 0.83 and 0.82.
  for (const rampup of [false, true]) {
    for (const latencyJitter of [0, 0.3]) {
      it(`${rampup ? "rampup" : "defaults"}, ±${latencyJitter * 100}%: the near-quiet cut keeps the concurrency the pace needs`, () => {
        const r = runZooCrawl({
          site: {
            name: "spacer 25/s",
            limiter: { shape: "token-bucket", ratePerSec: 25, burst: 1 },
            latencyMs: 120,
            latencyJitter,
            status: 503,
          },
          pages: 200,
          rampup,
          settings: { retry: { times: 10 } },
          events: true,
        });
        const near = r.events.flatMap((e) =>
          e.type === "rampup" && /near the quiet/.test(e.why) ? [e.concurrency] : []
        );
        expect(near.length).toBeGreaterThan(0);
        // 25/s over 120 ms round trips needs 4 in flight.
        for (const c of near) expect(c).toBeGreaterThanOrEqual(4);
        expect(r.ok).toBe(200);
        expect(r.efficiency).toBeGreaterThanOrEqual(0.775);
      });
    }
  }
});
