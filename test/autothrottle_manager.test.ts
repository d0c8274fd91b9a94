import { describe, expect, it } from "vitest";
import { autoThrottleDelay, autoThrottleManager } from "../lib/managers/autothrottle_manager.ts";
import { parseSettings, resolveScopeConfig } from "../lib/settings/settings.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";

const limits = { targetConcurrency: 1, minDelayMs: 0, maxDelayMs: 60_000 };

describe("autoThrottleDelay()", () => {
  // [old delay, latency, target concurrency, status, new delay]
  const table: [number, number, number, number | undefined, number][] = [
    [5_000, 1_000, 1, 200, 3_000], // (5000 + 1000) / 2
    [3_000, 1_000, 1, 200, 2_000],
    [1_000, 1_000, 1, 200, 1_000], // settled at latency / N
    [100, 1_000, 1, 200, 1_000], // target above old: jumps to the target
    [5_000, 1_000, 2, 200, 2_750], // target 500
    [5_000, 1_000, 0.5, 200, 3_500], // target 2000
    [400, 100, 4, 200, 212.5], // target 25: (400 + 25) / 2
    [1_000, 100, 1, 503, 1_000], // non-200 may not lower
    [1_000, 100, 1, 429, 1_000],
    [1_000, 100, 1, undefined, 1_000], // an error neither
    [100, 3_000, 1, 503, 3_000], // but may raise
    [5_000, 200_000, 1, 200, 60_000], // clamped to maxDelayMs
  ];
  for (const [old, latency, n, status, expected] of table) {
    it(`autoThrottleDelay() from ${old} ms with latency ${latency} ms, target ${n}, status ${status} gives ${expected} ms`, () => {
      expect(autoThrottleDelay(old, latency, status, { ...limits, targetConcurrency: n })).toBe(
        expected,
      );
    });
  }

  it("autoThrottleDelay() never goes below DOWNLOAD_DELAY (minDelayMs)", () => {
    expect(autoThrottleDelay(300, 10, 200, { ...limits, minDelayMs: 250 })).toBe(250);
  });
});

describe("autoThrottleManager()", () => {
  function manager(downloadDelayMs: number, options = {}) {
    const config = resolveScopeConfig(parseSettings({ downloadDelayMs, jitter: 0 }), "a.test");
    return autoThrottleManager(options)({ scope: "a.test", config, random: () => 0.5 });
  }

  it("autoThrottleManager() starts at max(DOWNLOAD_DELAY, startDelayMs)", () => {
    expect(manager(0).state?.(0).delayMs).toBe(5_000);
    expect(manager(8_000).state?.(0).delayMs).toBe(8_000);
    expect(manager(100, { startDelayMs: 50 }).state?.(0).delayMs).toBe(100);
  });

  it("autoThrottleManager() moves the delay on each settled request and spaces sends by it", () => {
    const m = manager(0, { startDelayMs: 1_000, targetConcurrency: 2 });
    m.recordSent(0);
    m.recordDone(400, { latencyMs: 400, status: 200 }); // target 200: (1000 + 200) / 2
    expect(m.state?.(400).delayMs).toBe(600);
    m.recordSent(1_000);
    expect(m.canSend(1_000)).toBe(600);
    m.recordDone(1_050, { latencyMs: 50, status: 503 });
    expect(m.state?.(1_050).delayMs).toBe(600); // a 503 may not lower it
  });

  it("autoThrottleManager() rejects bad options naming the field", () => {
    expect(() => autoThrottleManager({ targetConcurrency: 0 })).toThrow(
      /'targetConcurrency' must be/,
    );
    expect(() => autoThrottleManager({ maxDelayMs: -1 })).toThrow(RangeError);
  });

  it("createThrottler() with autothrottle.enabled uses it as the default scope manager", () => {
    const on = createThrottler({ autothrottle: { enabled: true, startDelayMs: 2_000 } });
    expect(on.manager("a.test").state?.(0).delayMs).toBe(2_000);
    const off = createThrottler({ autothrottle: { startDelayMs: 2_000 } });
    expect(off.manager("a.test").state?.(0).delayMs).toBe(0);
  });
});
