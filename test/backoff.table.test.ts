/**
 * Backoff arithmetic as tables of explicit times: the scope manager's steps,
 * jitter and recovery, and the holds that response headers and `delayScope`
 * put on a scope through the throttler. Everything runs at chosen `now`
 * values; no timer is involved.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { of } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { ThrottlingScopeManager } from "../lib/managers/scope_manager.ts";
import {
  parseSettings,
  resolveScopeConfig,
  type ThrottlerSettingsInput,
} from "../lib/settings/settings.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import type { Outcome } from "../lib/outcome.ts";
import { backoffOn } from "../operators/backoff_on.ts";

function manager(settings: ThrottlerSettingsInput, scope = "a.test", random = () => 0.5) {
  // The reference's exponential arithmetic: not an adaptive scope (those: test/rampup.test.ts).
  const config = resolveScopeConfig(parseSettings({ adaptive: false, ...settings }), scope);
  return new ThrottlingScopeManager({ scope, config, random });
}

/** Delay and level after each of `n` triggers at times 0, 1, 2, ... */
function series(m: ThrottlingScopeManager, n: number): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < n; i++) {
    m.recordBackoff(i);
    const s = m.state(i);
    out.push([s.delayMs, s.backoffLevel]);
  }
  return out;
}

describe("backoff arithmetic (ThrottlingScopeManager)", () => {
  it("recordBackoff() steps 1, 2, 4, ... 256, 300 s from a zero delay with the defaults", () => {
    const m = manager({});
    expect(series(m, 11)).toEqual([
      [1_000, 1],
      [2_000, 2],
      [4_000, 3],
      [8_000, 4],
      [16_000, 5],
      [32_000, 6],
      [64_000, 7],
      [128_000, 8],
      [256_000, 9],
      [300_000, 10],
      [300_000, 11],
    ]);
  });

  it("recordBackoff() takes one step per overload: a request sent before the last step adds none", () => {
    const m = manager({ backoff: { jitter: 0 } });
    // Eight requests went out at t = 0..7; the first 429 arrives at t = 50.
    m.recordBackoff(50, { sentAt: 0 });
    const after = (now: number, sentAt: number) => {
      m.recordBackoff(now, { sentAt });
      const s = m.state(now);
      return [now, sentAt, s.delayMs, s.backoffLevel];
    };
    expect([
      after(51, 1), // in flight when the scope slowed down: same overload
      after(52, 7),
      after(1_100, 1_050), // sent after the step: a new trigger
      after(1_101, 1_040), // sent before that second step
    ]).toEqual([
      [51, 1, 1_000, 1],
      [52, 7, 1_000, 1],
      [1_100, 1_050, 2_000, 2],
      [1_101, 1_040, 2_000, 2],
    ]);
    // Without a send time (delayScope, a custom caller) every trigger counts.
    m.recordBackoff(1_200);
    expect(m.state(1_200).backoffLevel).toBe(3);
  });

  it("recordBackoff() multiplies a base delay by the factor and recovery never goes below it", () => {
    const m = manager({ downloadDelayMs: 3_000, backoff: { jitter: 0 } });
    expect(series(m, 3)).toEqual([[6_000, 1], [12_000, 2], [24_000, 3]]);
    // Three quiet windows from the last trigger (at t = 2).
    expect(m.advance(2 + 60_000)).toEqual([{ kind: "recovery", delayMs: 12_000, level: 2 }]);
    expect(m.advance(2 + 120_000)).toEqual([{ kind: "recovery", delayMs: 6_000, level: 1 }]);
    expect(m.advance(2 + 180_000)).toEqual([{ kind: "recovery", delayMs: 3_000, level: 0 }]);
    expect(m.advance(2 + 240_000)).toEqual([]);
    // A base delay below the minimum: the first step is the minimum.
    const low = manager({ downloadDelayMs: 300 });
    expect(series(low, 2)).toEqual([[1_000, 1], [2_000, 2]]);
  });

  it("recordBackoff() uses the scope's own factor, min and max; other scopes keep the defaults", () => {
    const settings: ThrottlerSettingsInput = {
      scopes: {
        "a.test": { backoff: { delayFactor: 1.5, minDelayMs: 5_000, maxDelayMs: 20_000 } },
      },
    };
    expect(series(manager(settings, "a.test"), 6)).toEqual([
      [5_000, 1],
      [7_500, 2],
      [11_250, 3],
      [16_875, 4],
      [20_000, 5],
      [20_000, 6],
    ]);
    expect(series(manager(settings, "b.test"), 3)).toEqual([[1_000, 1], [2_000, 2], [4_000, 3]]);
  });

  it("recordBackoff() holds the next send a full new delay after the trigger (none slips through)", () => {
    const m = manager({ backoff: { jitter: 0 } });
    m.recordSent(0); // delay 0: the next send could go at once
    expect(m.canSend(50)).toBe(0);
    m.recordBackoff(50);
    expect(m.canSend(50)).toBe(1_000);
    expect(m.canSend(1_049)).toBe(1);
    expect(m.canSend(1_050)).toBe(0);
  });

  it("backoff jitter keeps each delay within delay * (1 + [lo, hi]) and never changes the stored delay", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        fc.integer({ min: 1, max: 9 }),
        (r, triggers) => {
          const m = manager({ backoff: { jitter: 0.1 } }, "a.test", () => r);
          for (let i = 0; i < triggers; i++) m.recordBackoff(0);
          const delay = m.state(0).delayMs;
          m.recordSent(0);
          const wait = m.canSend(0);
          expect(wait).toBeGreaterThanOrEqual(delay * 0.9 - 1e-9);
          expect(wait).toBeLessThan(delay * 1.1 + 1e-9);
          expect(m.state(0).delayMs).toBe(delay);
        },
      ),
    );
  });

  it("backoff jitter [lo, hi] of a scope is used in backoff, the ordinary jitter outside it", () => {
    const settings: ThrottlerSettingsInput = {
      downloadDelayMs: 1_000,
      jitter: 0.5,
      scopes: { "a.test": { backoff: { jitter: [0.01, 0.33] } } },
    };
    const table: [random: number, atBase: number, inBackoff: number][] = [
      [0, 500, 2_000 * 1.01],
      [0.5, 1_000, 2_000 * 1.17],
      [0.75, 1_250, 2_000 * 1.25],
    ];
    for (const [r, atBase, inBackoff] of table) {
      const m = manager(settings, "a.test", () => r);
      m.recordSent(0);
      expect(m.canSend(0)).toBeCloseTo(atBase, 6);
      m.recordDone(0);
      m.recordBackoff(0); // 2 s, level 1
      m.recordSent(10_000);
      expect(m.canSend(10_000)).toBeCloseTo(inBackoff, 6);
    }
  });

  it("advance() recovers one trigger per quiet window: 2 s, then 1 s, then 0 (two triggers from zero)", () => {
    const m = manager({});
    m.recordBackoff(0);
    m.recordBackoff(0);
    const table: [now: number, steps: unknown[], delay: number, level: number][] = [
      [0, [], 2_000, 2],
      [59_999, [], 2_000, 2],
      [60_000, [{ kind: "recovery", delayMs: 1_000, level: 1 }], 1_000, 1],
      [119_999, [], 1_000, 1],
      [120_000, [{ kind: "recovery", delayMs: 0, level: 0 }], 0, 0],
      [500_000, [], 0, 0],
    ];
    for (const [now, steps, delay, level] of table) {
      expect(m.advance(now)).toEqual(steps);
      expect([m.state(now).delayMs, m.state(now).backoffLevel]).toEqual([delay, level]);
    }
    expect(m.nextWakeAt(500_000)).toBeUndefined();
  });

  it("advance(): a trigger in the middle of recovery restarts the countdown from that trigger", () => {
    const m = manager({});
    m.recordBackoff(0);
    m.recordBackoff(0);
    expect(m.advance(60_000)).toEqual([{ kind: "recovery", delayMs: 1_000, level: 1 }]);
    m.recordBackoff(90_000); // 2 s again, level 2
    expect(m.nextWakeAt(90_000)).toBe(150_000);
    expect(m.advance(120_000)).toEqual([]); // the old countdown would have stepped here
    expect(m.advance(149_999)).toEqual([]);
    expect(m.advance(150_000)).toEqual([{ kind: "recovery", delayMs: 1_000, level: 1 }]);
    expect(m.advance(210_000)).toEqual([{ kind: "recovery", delayMs: 0, level: 0 }]);
  });

  it("backoff windowMs 0 recovers at once: a trigger leaves no delay, only its hold", () => {
    const m = manager({ backoff: { windowMs: 0 } });
    m.recordBackoff(0);
    m.recordBackoff(0);
    expect([m.state(0).delayMs, m.state(0).backoffLevel]).toEqual([0, 0]);
    expect(m.canSend(0)).toBe(0);
    m.recordBackoff(10, { holdMs: 5_000 });
    expect(m.canSend(10)).toBe(5_000);
    expect(m.canSend(5_010)).toBe(0);
    expect(m.nextWakeAt(5_010)).toBeUndefined();
  });
});

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

/** The state of scope a.test after one outcome with `status` and `headers` went through backoffOn at time 0. */
function afterResponse(
  status: number,
  headers: Record<string, string>,
  settings: ThrottlerSettingsInput = {},
) {
  const scheduler = new TestScheduler(() => {});
  const throttler = createThrottler({ adaptive: false, ...settings }, {
    scheduler,
    random: () => 0.5,
  });
  const outcome: Outcome<string, unknown> = {
    kind: "response",
    request: "http://a.test/",
    response: { status, headers },
    scopes: ["a.test"],
    attempt: 1,
    sentAt: 0,
    latencyMs: 0,
  };
  of(outcome).pipe(backoffOn(throttler, { retry: false, nowEpochMs: () => T0 })).subscribe();
  // A scope that nothing changed may not be in memory: then it is as configured.
  const s = throttler.state("a.test") ??
    { holdUntil: 0, delayMs: throttler.scopeConfig("a.test").delayMs, backoffLevel: 0 };
  return { holdUntil: s.holdUntil, delayMs: s.delayMs, level: s.backoffLevel };
}

describe("server-given holds (backoffOn on one outcome at time 0)", () => {
  const date = (ms: number) => new Date(ms).toUTCString();
  const table: [
    name: string,
    status: number,
    headers: Record<string, string>,
    holdUntil: number,
    delay: number,
  ][] = [
    ["Retry-After: 0 (no hold, still a trigger)", 429, { "retry-after": "0" }, 0, 1_000],
    ["Retry-After: 0.5 (500 ms)", 429, { "retry-after": "0.5" }, 500, 1_000],
    ["Retry-After: 5", 429, { "retry-after": "5" }, 5_000, 1_000],
    ["Retry-After over the cap (300 s)", 429, { "retry-after": "3600" }, 300_000, 1_000],
    [
      "Retry-After as an HTTP-date 30 s ahead",
      503,
      { "retry-after": date(T0 + 30_000) },
      30_000,
      1_000,
    ],
    [
      "Retry-After as an HTTP-date in the past (ignored)",
      503,
      { "retry-after": date(T0 - 30_000) },
      0,
      1_000,
    ],
    [
      "HTTP-date read against the response's Date header",
      503,
      { "retry-after": date(T0 + 70_000), date: date(T0 + 60_000) },
      10_000,
      1_000,
    ],
    ["garbage Retry-After (ignored)", 429, { "retry-after": "soon" }, 0, 1_000],
    ["negative Retry-After (ignored)", 429, { "retry-after": "-5" }, 0, 1_000],
    ["RateLimit-Reset: 7", 429, { "ratelimit-reset": "7" }, 7_000, 1_000],
    // A spent quota (remaining 0 and a reset) explains the refusal: its hold, no step.
    [
      "RateLimit t with r=0 (explained: no step)",
      429,
      { ratelimit: '"default";r=0;t=12' },
      12_000,
      0,
    ],
    [
      "RateLimit t with r=3 (not spent: no hold)",
      429,
      { ratelimit: '"default";r=3;t=12' },
      0,
      1_000,
    ],
    [
      "several headers at once: the largest wins (explained by r=0: no step)",
      429,
      { "retry-after": "10", "ratelimit-reset": "30", ratelimit: '"default";r=0;t=20' },
      30_000,
      0,
    ],
    [
      "several headers at once, none saying the quota is spent: the largest wins",
      429,
      { "retry-after": "10", "ratelimit-reset": "30" },
      30_000,
      1_000,
    ],
    ["Retry-After on a status that is no trigger (ignored)", 200, { "retry-after": "10" }, 0, 0],
  ];
  for (const [name, status, headers, holdUntil, delay] of table) {
    it(`backoffOn() hold: ${name}`, () => {
      expect(afterResponse(status, headers)).toEqual({
        holdUntil,
        delayMs: delay,
        level: delay > 0 ? 1 : 0,
      });
    });
  }

  it("backoffOn() caps a server hold at the scope's own max delay", () => {
    const settings = { scopes: { "a.test": { backoff: { maxDelayMs: 10_000 } } } };
    expect(afterResponse(429, { "retry-after": "60" }, settings).holdUntil).toBe(10_000);
  });

  it("Throttler.delayScope() holds for its full time over the cap, counted as a trigger", () => {
    const scheduler = new TestScheduler(() => {});
    const throttler = createThrottler({ adaptive: false, backoff: { maxDelayMs: 10_000 } }, {
      scheduler,
    });
    throttler.delayScope("a.test", 600_000);
    expect(throttler.state("a.test")).toMatchObject({
      holdUntil: 600_000,
      delayMs: 1_000,
      backoffLevel: 1,
    });
    expect(() => throttler.delayScope("a.test", -1)).toThrow(RangeError);
    expect(() => throttler.delayScope("a.test", Number.NaN)).toThrow(
      /'ms' must be a finite number >= 0/,
    );
  });
});
