// The knee of a server that slows down instead of refusing (lib/managers/_knee.ts),
// read from rounds of admitted answers; then end to end on the zoo's
// slowdown site in virtual time.
import { describe, expect, it } from "vitest";
import { KneeMeter } from "../lib/managers/_knee.ts";
import { runZooCrawl } from "../lib/sim/zoo_crawl.ts";
import type { ZooSiteSpec } from "../lib/sim/zoo.ts";

/**
 * Answers of a scope that keeps `n` in flight for `ms` at a time, for each
 * `n` in turn, against a server whose latency with `n` in flight is
 * `latency(n)`: one answer every latency(n) / n ms. Returns the knee the
 * meter found, and at which answer time (undefined: none).
 */
function drive(
  counts: readonly number[],
  latency: (n: number) => number,
  ms = 3_000,
): { knee: number | undefined; at: number | undefined } {
  const meter = new KneeMeter();
  let t = 0;
  for (const n of counts) {
    const end = t + ms;
    const l = latency(n);
    while (t < end) {
      t += l / n;
      const knee = meter.admitted(t, l, n);
      if (knee !== undefined) return { knee, at: t };
    }
  }
  return { knee: undefined, at: undefined };
}

describe("KneeMeter", () => {
  // [what, counts in flight in turn, latency with n in flight, knee]
  const table: [string, number[], (n: number) => number, number | undefined][] = [
    [
      "a backend that thrashes past 4 (100 ms + 60 ms each beyond)",
      [2, 4, 8],
      (n) => 100 + 60 * Math.max(0, n - 4),
      4,
    ],
    ["the same, found from 3 and 6 in flight", [3, 6], (n) => 100 + 60 * Math.max(0, n - 4), 3],
    [
      "a queue in front of 5 workers (300 ms each): as many served, each later",
      [2, 5, 8],
      (n) => 300 * Math.max(1, n / 5),
      5,
    ],
    ["a server whose latency does not move", [2, 4, 8, 16], () => 120, undefined],
    [
      "latency that grows, and throughput with it (more than 10%)",
      [2, 4, 8],
      (n) => 100 + 10 * n,
      undefined,
    ],
    [
      "fewer in flight later: no knee from a round with less in flight",
      [8, 4, 2],
      (n) => 100 + 60 * Math.max(0, n - 4),
      undefined,
    ],
  ];
  for (const [what, counts, latency, knee] of table) {
    it(`KneeMeter: ${what} -> ${knee ?? "no knee"}`, () => {
      expect(drive(counts, latency).knee).toBe(knee);
    });
  }

  it("KneeMeter: a round of fewer than 8 admits says nothing (a slow server's few answers)", () => {
    // 1 s answers: a round of 3 latencies holds at most 3 answers per request in flight.
    expect(drive([2, 4], (n) => 1_000 + 800 * Math.max(0, n - 2), 10_000).knee).toBeUndefined();
  });
});

describe("adaptive limits on a server that slows down (virtual time)", () => {
  // Never refuses; each request in flight beyond 4 adds 60 ms to the 100 ms
  // latency. The defaults kept 8 in flight (23.5/s of the 40/s at 4): 0.59.
  const site: ZooSiteSpec = {
    name: "slowdown 4, +60 ms",
    limiter: { shape: "slowdown", workers: 4, extraMs: 60 },
    latencyMs: 100,
  };
  it("the defaults find the knee and keep 4 in flight: at least 0.85 of the most it serves", () => {
    const r = runZooCrawl({ site, pages: 250, settings: { retry: { times: 10 } }, events: true });
    const steps = r.events.flatMap((e) => e.type === "rampup" ? [e.why] : []);
    expect(steps).toEqual(["slower with more in flight, no more served: concurrency 8 -> 4"]);
    expect(r.ok).toBe(250);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.85);
  });

  it("rampup reads the knee too, and goes back to it after probing one more (0.50 before)", () => {
    const r = runZooCrawl({
      site,
      pages: 250,
      rampup: true,
      settings: { retry: { times: 10 } },
      events: true,
    });
    const knees = r.events.flatMap((e) =>
      e.type === "rampup" && e.why.startsWith("slower with more in flight") ? [e.concurrency] : []
    );
    expect(knees.length).toBeGreaterThanOrEqual(1);
    expect(knees.every((c) => c >= 4 && c <= 5)).toBe(true);
    expect(r.ok).toBe(250);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.6);
  });

  it("a queue in front of 5 workers (the zoo's load-shed site) keeps at least 5 in flight", () => {
    const r = runZooCrawl({
      site: {
        name: "shed 5",
        limiter: { shape: "load-shed", workers: 5, maxQueue: 4 },
        latencyMs: 297,
      },
      pages: 200,
      settings: { retry: { times: 10 } },
      events: true,
    });
    const knee = r.events.flatMap((e) =>
      e.type === "rampup" && e.why.startsWith("slower") ? [e.concurrency] : []
    );
    expect(knee.every((c) => c >= 5)).toBe(true);
    expect(r.efficiency).toBeGreaterThanOrEqual(0.9);
  });

  it("createZooLimiter() names a bad slowdown field", async () => {
    const { createZooLimiter } = await import("../lib/sim/zoo.ts");
    expect(() =>
      createZooLimiter({
        name: "s",
        limiter: { shape: "slowdown", workers: 2, extraMs: -1 },
        latencyMs: 1,
      })
    ).toThrow(/'limiter\.extraMs' must be a finite number >= 0: current value is -1/);
  });
});
