/**
 * Randomness for the zoo: a seeded source and sites drawn from it.
 *
 * @module
 */
import type { Announce, LimiterSpec, ZooSiteSpec } from "./zoo.ts";

/**
 * A seeded uniform random source in [0, 1) (mulberry32): jitter in
 * simulations and tests, parameters of the zoo's sites.
 *
 * @param seed Any number; the same seed gives the same sequence.
 * @returns The source.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A function that picks one of its values at random from `random`. */
function picker(random: () => number): <T>(values: readonly T[]) => T {
  return (values) => values[Math.floor(random() * values.length)]!;
}

/**
 * Zoo sites with parameters drawn from `seed`, never picked: two token buckets,
 * two strict spacers, six fixed windows (without headers, with Retry-After,
 * then each header family), two sliding windows, two concurrency caps, one
 * load shedder, one queueing limiter (nginx's `limit_req`), one rate limit
 * that answers every refusal with the same Retry-After, with latencies,
 * how much they vary, 429 or 503 and Retry-After drawn too. Sites a
 * controller was not tuned on, for judging it (`bench/adaptive.bench.ts`).
 *
 * @param seed The draw.
 * @returns 17 sites.
 */
export function generateZooSites(seed: number): ZooSiteSpec[] {
  const random = seededRandom(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));
  const pick = picker(random);
  const status = () => pick([429, 503] as const);
  const retryAfter = () => pick(["none", "seconds", "date"] as const);
  const sites: ZooSiteSpec[] = [];
  const add = (
    name: string,
    limiter: LimiterSpec,
    latencyMs: number,
    more: Partial<ZooSiteSpec> = {},
  ) => {
    sites.push({
      name: `${name} ${sites.length + 1}`,
      limiter,
      latencyMs,
      status: status(),
      retryAfter: "none",
      announce: "none",
      ...more,
    });
  };
  for (let i = 0; i < 2; i++) {
    add(
      "bucket",
      { shape: "token-bucket", ratePerSec: int(2, 30), burst: int(1, 40) },
      int(10, 200),
      { retryAfter: pick(["none", "seconds"] as const) },
    );
  }
  for (let i = 0; i < 2; i++) {
    add(
      "spacer",
      { shape: "token-bucket", ratePerSec: int(2, 20), burst: 1 },
      int(10, 200),
      { retryAfter: pick(["none", "seconds"] as const) },
    );
  }
  const window = (): LimiterSpec => ({
    shape: "fixed-window",
    quota: int(5, 60),
    windowMs: int(1, 10) * 1000,
  });
  // Without headers: once without Retry-After, once with it; then each header family.
  add("fixed", window(), int(10, 200), { retryAfter: "none" });
  add("fixed", window(), int(10, 200), { retryAfter: pick(["seconds", "date"] as const) });
  for (const announce of ["ietf", "legacy", "x-epoch", "x-delta"] as const satisfies Announce[]) {
    add("fixed", window(), int(10, 200), { retryAfter: retryAfter(), announce });
  }
  for (let i = 0; i < 2; i++) {
    add(
      "sliding",
      { shape: "sliding-window", quota: int(5, 60), windowMs: int(1, 10) * 1000 },
      int(10, 200),
      { retryAfter: retryAfter(), announce: pick(["none", "ietf", "x-delta"] as const) },
    );
  }
  for (let i = 0; i < 2; i++) {
    add("conc", { shape: "concurrency", maxConcurrency: int(2, 8) }, int(50, 400), {
      retryAfter: pick(["none", "seconds"] as const),
    });
  }
  add("shed", { shape: "load-shed", workers: int(2, 8), maxQueue: int(0, 4) }, int(50, 400));
  // Drawn after the sites above, so their values stay those of earlier seeds.
  add(
    "queue",
    { shape: "leaky-queue", ratePerSec: int(2, 30), burst: int(0, 20) },
    int(10, 200),
    { status: 503 },
  );
  // Real answers take more or less time: each site varies its latency by
  // none, a fifth or a half.
  const varied = sites.map((site) => ({ ...site, latencyJitter: pick([0, 0.2, 0.5]) }));
  // Drawn after everything above, so those values stay those of earlier
  // seeds: a rate limit that answers every refusal with the same
  // Retry-After, whatever its own wait (servers that always say 2 s).
  add(
    "constant-ra",
    { shape: "token-bucket", ratePerSec: int(2, 20), burst: int(1, 10) },
    int(10, 200),
    { retryAfter: int(1, 5) },
  );
  return [...varied, { ...sites[varied.length]!, latencyJitter: pick([0, 0.2, 0.5]) }];
}

/**
 * Sliding logs and sliding-window counters that announce their budgets,
 * drawn from `seed`: rates of 2-32 per second, windows of 1-30 s, every
 * header family (RateLimit, the legacy `RateLimit-*`, `X-RateLimit-*` with
 * epoch and with delta resets), 5-205 ms, `Retry-After` in seconds or none.
 * Where `slidingHeaderSites()` is the table the announced-window rules were
 * fixed on, these are sites they were not (`bench/zoo_sweep.bench.ts --set
 * sliding-headers-drawn`).
 *
 * @param seed The draw.
 * @returns 30 sites.
 */
export function drawnSlidingHeaderSites(seed: number): ZooSiteSpec[] {
  const random = seededRandom(seed * 7_919 + 101);
  const pick = picker(random);
  const sites: ZooSiteSpec[] = [];
  for (let i = 0; i < 30; i++) {
    const shape = pick(["sliding-counter", "sliding-window"] as const);
    const windowMs = pick([1_000, 2_000, 3_000, 5_000, 10_000, 30_000]);
    const quota = Math.max(8, Math.round(((2 + random() * 30) * windowMs) / 1000));
    const announce = pick(["x-epoch", "ietf", "x-delta", "legacy"] as const);
    const latencyMs = Math.round(5 + random() * 200);
    const retryAfter = pick(["seconds", "none"] as const);
    sites.push({
      name: `${shape === "sliding-window" ? "log" : "counter"} ${quota}/${
        windowMs / 1000
      } s ${announce}, ${latencyMs} ms, Retry-After ${retryAfter}`,
      limiter: { shape, quota, windowMs },
      latencyMs,
      status: 429,
      retryAfter,
      announce,
    });
  }
  return sites;
}
