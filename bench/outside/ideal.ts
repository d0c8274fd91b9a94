/**
 * The ideal time of a site: a client that knows the hidden rules exactly,
 * replayed in virtual time against fresh copies of the same limiters. It
 * sends whenever every rule admits (never a refusal), keeps at most `c`
 * requests in flight, and takes the best `c` from 1 to `maxConcurrency`
 * (politely's default per-site concurrency, 8: a site that slows down under
 * load is best served at its knee, not at 8). Latencies are the model's mean
 * (no spread). Starts at the crawl's first arrival, so a window aligned to the
 * clock is met at the same phase as the crawl met it.
 *
 * @module
 */
import { latencyMs, type SiteSpec } from "./site.ts";

/** Milliseconds from the first send to the last answer, for the best concurrency. */
export function idealMs(spec: SiteSpec, startEpochMs: number, maxConcurrency = 8): number {
  let best = Infinity;
  for (let c = 1; c <= maxConcurrency; c++) {
    best = Math.min(best, replay(spec, startEpochMs, c));
  }
  return best;
}

function replay(spec: SiteSpec, t0: number, c: number): number {
  const rules = spec.rules();
  const finishes: number[] = []; // end times of requests in flight
  let t = t0;
  let sent = 0;
  let last = t0;
  const mean = () => 0.5;
  for (let guard = 0; guard < 10_000_000; guard++) {
    // Finish what has finished.
    finishes.sort((a, b) => a - b);
    while (finishes.length > 0 && finishes[0]! <= t) {
      const f = finishes.shift()!;
      for (const r of rules) r.limiter.release(f);
    }
    if (sent === spec.pages && finishes.length === 0) return last - t0;
    let wait = Infinity;
    if (sent < spec.pages && finishes.length < c) {
      wait = Math.max(0, ...rules.map((r) => r.limiter.wait(t)));
      if (wait === 0) {
        let queued = 0;
        for (const r of rules) queued = Math.max(queued, r.limiter.take(t));
        const end = t + queued + latencyMs(spec.latency, finishes.length + 1, mean);
        finishes.push(end);
        last = Math.max(last, end);
        sent++;
        continue;
      }
    }
    const next = Math.min(t + wait, finishes[0] ?? Infinity);
    if (!Number.isFinite(next)) throw new Error(`ideal replay of ${spec.name} is stuck`);
    t = Math.max(next, t + 1e-3); // epoch ms carry about 1e-4 ms of precision
  }
  throw new Error(`ideal replay of ${spec.name} did not end`);
}
