/**
 * The limiter shapes issue 11 measured, each with several parameters: the
 * set `bench/zoo_sweep.bench.ts --set issue` crawls. Unlike
 * `generateZooSites`, these values were picked (and the controller was tuned
 * with them in view); the drawn zoo is the one to judge it on.
 *
 * @module
 */
import type { ZooSiteSpec } from "./zoo.ts";

/**
 * 162 sites: fixed windows announced with IETF `RateLimit` fields, with
 * `X-RateLimit-*` or not at all; strict spacers answering 503; concurrency
 * caps; buckets with a large burst; 5/s limits answering `Retry-After` of
 * their wait (a second) or always 2 s; a 10/s bucket with a burst of 3. Each
 * at 5, 40 and 120 ms, with and without ±30% latency variation.
 *
 * @returns The sites, in a fixed order.
 */
export function issueShapeSites(): ZooSiteSpec[] {
  const sites: ZooSiteSpec[] = [];
  for (const latencyMs of [5, 40, 120]) {
    for (const latencyJitter of [0, 0.3]) {
      const c = { latencyMs, latencyJitter, announce: "none" as const, status: 429 as const };
      for (const [quota, windowMs] of [[10, 2000], [30, 5000], [20, 1000], [50, 10000]] as const) {
        const limiter = { shape: "fixed-window", quota, windowMs } as const;
        const w = `${quota}/${windowMs / 1000}s`;
        sites.push(
          { ...c, name: `fixed ${w}, ietf`, limiter, retryAfter: "seconds", announce: "ietf" },
          { ...c, name: `fixed ${w}, x-epoch`, limiter, retryAfter: "none", announce: "x-epoch" },
          { ...c, name: `fixed ${w}, no headers`, limiter, retryAfter: "none" },
        );
      }
      for (const ratePerSec of [4, 10, 25]) {
        sites.push({
          ...c,
          name: `spacer ${ratePerSec}/s, 503`,
          limiter: { shape: "token-bucket", ratePerSec, burst: 1 },
          status: 503,
        });
      }
      for (const maxConcurrency of [2, 3, 5]) {
        sites.push({
          ...c,
          name: `conc ${maxConcurrency}, 503`,
          limiter: { shape: "concurrency", maxConcurrency },
          status: 503,
        });
      }
      for (const [ratePerSec, burst] of [[10, 50], [20, 100], [5, 30]] as const) {
        sites.push({
          ...c,
          name: `bucket ${ratePerSec}/s burst ${burst}`,
          limiter: { shape: "token-bucket", ratePerSec, burst },
        });
      }
      for (const ratePerSec of [5, 3]) {
        sites.push({
          ...c,
          name: `spacer ${ratePerSec}/s, Retry-After its wait`,
          limiter: { shape: "token-bucket", ratePerSec, burst: 1 },
          retryAfter: "seconds",
        });
      }
      for (const ratePerSec of [5, 10]) {
        sites.push({
          ...c,
          name: `spacer ${ratePerSec}/s, Retry-After always 2`,
          limiter: { shape: "token-bucket", ratePerSec, burst: 1 },
          retryAfter: 2,
        });
      }
      sites.push({
        ...c,
        name: "fixed 5/1s, Retry-After always 2",
        limiter: { shape: "fixed-window", quota: 5, windowMs: 1000 },
        retryAfter: 2,
      });
      sites.push({
        ...c,
        name: "bucket 10/s burst 3",
        limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 },
      });
    }
  }
  return sites;
}

/**
 * 144 sites of 2, 5 and 10/s that answer every refusal with a hold: strict
 * spacers, buckets of a second's worth, fixed windows of a second and
 * sliding windows of two, each with `Retry-After` of its wait (whole
 * seconds) or always 1, 2 or 5 s, at 5, 60 and 150 ms ± 30%. Each refusal
 * costs its hold, so what matters is how few a search for the rate takes.
 * The set `bench/zoo_sweep.bench.ts --set retry-after` crawls.
 *
 * @returns The sites, in a fixed order.
 */
export function retryAfterSites(): ZooSiteSpec[] {
  const sites: ZooSiteSpec[] = [];
  for (const r of [2, 5, 10]) {
    for (const retryAfter of ["seconds", 1, 2, 5] as const) {
      for (const latencyMs of [5, 60, 150]) {
        const c = { latencyMs, latencyJitter: 0.3, status: 429 as const, retryAfter };
        const ra = `Retry-After ${
          retryAfter === "seconds" ? "its wait" : retryAfter
        }, ${latencyMs} ms`;
        sites.push(
          {
            ...c,
            name: `spacer ${r}/s, ${ra}`,
            limiter: { shape: "token-bucket", ratePerSec: r, burst: 1 },
          },
          {
            ...c,
            name: `bucket ${r}/s burst ${Math.max(2, r)}, ${ra}`,
            limiter: { shape: "token-bucket", ratePerSec: r, burst: Math.max(2, r) },
          },
          {
            ...c,
            name: `fixed ${r}/1s, ${ra}`,
            limiter: { shape: "fixed-window", quota: r, windowMs: 1000 },
          },
          {
            ...c,
            name: `sliding ${2 * r}/2s, ${ra}`,
            limiter: { shape: "sliding-window", quota: 2 * r, windowMs: 2000 },
          },
        );
      }
    }
  }
  return sites;
}

/**
 * 36 sites whose backend fails some requests at random, whatever the load
 * (`errorRate` 2% and 10% answered 502, 5% answered 504): no limit, a bucket of 10/s
 * with a burst of 5, a 20/s spacer, 4 at once, a fixed window of 30 per 3 s
 * and a sliding one of 20 per 2 s (refusals 429), at 40 and 150 ms ± 20%.
 * A client that slows down for every failure crawls them far below the
 * limit; compare each with the same site without failures (`errorRate: 0`).
 * The set `bench/zoo_sweep.bench.ts --set flaky` crawls.
 *
 * @returns The sites, in a fixed order.
 */
export function flakySites(): ZooSiteSpec[] {
  const limiters: [string, ZooSiteSpec["limiter"]][] = [
    ["no limit", { shape: "none" }],
    ["bucket 10/s burst 5", { shape: "token-bucket", ratePerSec: 10, burst: 5 }],
    ["spacer 20/s", { shape: "token-bucket", ratePerSec: 20, burst: 1 }],
    ["4 at once", { shape: "concurrency", maxConcurrency: 4 }],
    ["fixed 30/3s", { shape: "fixed-window", quota: 30, windowMs: 3000 }],
    ["sliding 20/2s", { shape: "sliding-window", quota: 20, windowMs: 2000 }],
  ];
  const sites: ZooSiteSpec[] = [];
  for (const [name, limiter] of limiters) {
    for (const latencyMs of [40, 150]) {
      for (const [errorRate, errorStatus] of [[0.02, 502], [0.05, 504], [0.1, 502]] as const) {
        {
          sites.push({
            name: `${name}, ${latencyMs} ms, ${100 * errorRate}% ${errorStatus}`,
            limiter,
            latencyMs,
            latencyJitter: 0.2,
            status: 429,
            errorRate,
            errorStatus,
          });
        }
      }
    }
  }
  return sites;
}

/**
 * Sliding windows that announce their budgets: logs and sliding-window
 * counters of 20 per second to 150 per 10 s, each with RateLimit headers
 * (`ietf`), `X-RateLimit-*` with epoch resets and with delta resets, at 17
 * and 120 ms. A counter tells its current window's end as the reset while it
 * frees room all the time; a log tells its oldest request's expiry; epoch
 * resets are a second late. The set `bench/zoo_sweep.bench.ts --set
 * sliding-headers` crawls (500 pages each there is the table of
 * docs/DECISIONS.md; the sweep's default of 200 finishes the larger windows
 * within their first burst or two).
 *
 * @returns The sites, in a fixed order.
 */
export function slidingHeaderSites(): ZooSiteSpec[] {
  const sites: ZooSiteSpec[] = [];
  for (const shape of ["sliding-counter", "sliding-window"] as const) {
    for (const announce of ["x-epoch", "ietf", "x-delta"] as const) {
      for (
        const [quota, windowMs] of [
          [20, 1000],
          [30, 2000],
          [50, 10_000],
          [80, 2000],
          [150, 10_000],
        ] as const
      ) {
        for (const latencyMs of [17, 120]) {
          sites.push({
            name: `${shape === "sliding-window" ? "log" : "counter"} ${quota}/${
              windowMs / 1000
            } s ${announce}, ${latencyMs} ms`,
            limiter: { shape, quota, windowMs },
            latencyMs,
            status: 429,
            retryAfter: "seconds",
            announce,
          });
        }
      }
    }
  }
  return sites;
}

/**
 * 396 sites that announce nothing, in a grid: token buckets (3, 10 and 25/s
 * with a burst of 1, 3 or two seconds' worth), fixed windows counted from
 * the first use and from the first request after each reset (10/s, 30 per
 * 5 s, 20 per 2 s, 100 per minute), sliding logs, sliding-window counters
 * whose window ends 100 ms, half a window or 95% of one after the crawl
 * starts, and caps of 1, 3 and 6; each at 20, 80 and 200 ms (±20%), 429 or
 * 503, with no `Retry-After` or with its wait in seconds. The set
 * `bench/zoo_sweep.bench.ts --set headerless` crawls (with 3 ms of
 * outbound jitter: `--jitter 3`). It found the sliding log and the
 * sliding-window counter that docs/DECISIONS.md's seventh-session entries
 * fixed; unlike the drawn zoo, it covers every shape at every setting.
 *
 * @returns The sites, in a fixed order.
 */
export function headerlessGridSites(): ZooSiteSpec[] {
  const limiters: [string, ZooSiteSpec["limiter"]][] = [];
  for (const rate of [3, 10, 25]) {
    for (const burst of [1, 3, 2 * rate]) {
      limiters.push([`bucket ${rate}/s of ${burst}`, {
        shape: "token-bucket",
        ratePerSec: rate,
        burst,
      }]);
    }
  }
  for (const [quota, windowMs] of [[10, 1000], [30, 5000], [100, 60_000], [20, 2000]] as const) {
    for (const anchor of ["first-use", "request"] as const) {
      limiters.push([`fixed ${quota}/${windowMs / 1000} s ${anchor}`, {
        shape: "fixed-window",
        quota,
        windowMs,
        anchor,
      }]);
    }
  }
  for (const [quota, windowMs] of [[10, 1000], [30, 5000], [20, 2000], [100, 60_000]] as const) {
    limiters.push([`log ${quota}/${windowMs / 1000} s`, {
      shape: "sliding-window",
      quota,
      windowMs,
    }]);
  }
  for (const [quota, windowMs] of [[10, 1000], [50, 10_000], [20, 2000]] as const) {
    for (const phaseMs of [100, windowMs / 2, 0.95 * windowMs]) {
      limiters.push([`counter ${quota}/${windowMs / 1000} s ending at ${phaseMs} ms`, {
        shape: "sliding-counter",
        quota,
        windowMs,
        phaseMs,
      }]);
    }
  }
  for (const maxConcurrency of [1, 3, 6]) {
    limiters.push([`cap ${maxConcurrency}`, { shape: "concurrency", maxConcurrency }]);
  }
  const sites: ZooSiteSpec[] = [];
  for (const [name, limiter] of limiters) {
    for (const latencyMs of [20, 80, 200]) {
      for (const status of [429, 503] as const) {
        for (const retryAfter of ["none", "seconds"] as const) {
          sites.push({
            name: `${name}, ${latencyMs} ms, ${status}, Retry-After ${retryAfter}`,
            limiter,
            latencyMs,
            latencyJitter: 0.2,
            status,
            retryAfter,
          });
        }
      }
    }
  }
  return sites;
}
