import { from, lastValueFrom, type Subscription, toArray } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { describe, expect, it } from "vitest";
import type { ThrottleEvent } from "../lib/events.ts";
import { ThrottlingScopeManager } from "../lib/scope_manager.ts";
import type { ScopeStep } from "../lib/scope_manager_protocol.ts";
import {
  parseSettings,
  resolveScopeConfig,
  type ThrottlerSettingsInput,
  type ThrottlingScopeConfig,
} from "../lib/settings.ts";
import { createSimulatedSite } from "../lib/sim/simulated_site.ts";
import { createThrottler } from "../lib/throttler.ts";
import { CUT_FACTOR } from "../lib/_rampup.ts";
import { backoffOn } from "../operators/backoff_on.ts";
import { rampup } from "../operators/rampup.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";

const S = "api.test";
const W = 1_000;

function manager(
  scope: ThrottlingScopeConfig,
  settings: ThrottlerSettingsInput = {},
): ThrottlingScopeManager {
  const parsed = parseSettings({
    backoff: { windowMs: W },
    jitter: 0,
    ...settings,
    scopes: { [S]: { concurrency: 8, ...scope } },
  });
  return new ThrottlingScopeManager({
    scope: S,
    config: resolveScopeConfig(parsed, S),
    random: () => 0.5,
  });
}

/** One request sent at `at` and answered `latency` ms later with `status`. */
function request(m: ThrottlingScopeManager, at: number, latency: number, status = 200): void {
  m.recordSent(at);
  if (status === 429) m.recordBackoff(at + latency, { cause: "status 429" });
  m.recordDone(at + latency, { latencyMs: latency, status });
}

function summary(steps: readonly ScopeStep[]): string[] {
  return steps.map((s) =>
    s.kind === "rampup" ? `${Math.round(s.delayMs * 100) / 100}/${s.concurrency} ${s.why}` : s.kind
  );
}

describe("rampup (slow start: the reference's steps)", () => {
  it("ThrottlingScopeManager rampup halves the delay each quiet window down to minDelay, then raises concurrency", () => {
    const m = manager({ delayMs: 800, rampup: { minDelayMs: 100 } });
    expect(m.state(0).concurrency).toBe(1); // a rampup scope starts at minConcurrency
    // [window end, expected delay, concurrency, why]
    const table: [number, number, number, string][] = [
      [1_000, 400, 1, "below target: lower delay"],
      [2_000, 200, 1, "below target: lower delay"],
      [3_000, 100, 1, "below target: lower delay"],
      [4_000, 100, 2, "below target: raise concurrency"],
      [5_000, 100, 3, "below target: raise concurrency"],
    ];
    let t = 0;
    for (const [end, delay, concurrency, why] of table) {
      for (; t < end; t += 250) request(m, t, 10);
      expect(summary(m.advance(end))).toEqual([`${delay}/${concurrency} ${why}`]);
    }
  });

  it("ThrottlingScopeManager rampup snaps to minDelay once within 1 ms of it", () => {
    const m = manager({ delayMs: 101, rampup: { minDelayMs: 50 } });
    request(m, 0, 5);
    expect(summary(m.advance(1_000))).toEqual(["50/1 below target: lower delay"]);
  });

  it("ThrottlingScopeManager rampup stops at concurrentRequests", () => {
    const m = manager({ delayMs: 0, rampup: true }, { concurrentRequests: 2 });
    request(m, 0, 5);
    expect(summary(m.advance(1_000))).toEqual(["0/2 below target: raise concurrency"]);
    request(m, 1_000, 5);
    expect(summary(m.advance(2_000))).toEqual(["0/2 at maximum"]);
  });

  it("ThrottlingScopeManager rampup takes one step after an idle gap, not one per window missed", () => {
    const m = manager({ delayMs: 800, rampup: true });
    request(m, 0, 10);
    expect(summary(m.advance(10_500))).toEqual(["400/1 below target: lower delay"]);
    expect(m.nextWakeAt(10_500)).toBeUndefined(); // no window open until the next send
    request(m, 20_000, 10);
    expect(m.advance(20_999)).toEqual([]);
    expect(summary(m.advance(21_000))).toEqual(["200/1 below target: lower delay"]);
  });

  it("ThrottlingScopeManager rampup does not step in a window without sends", () => {
    const m = manager({ delayMs: 800, rampup: true });
    request(m, 0, 10);
    expect(m.advance(1_000)).toHaveLength(1);
    expect(m.advance(2_000)).toEqual([]);
  });

  it("ThrottlingScopeManager rampup with backoff window 0 never steps, and a trigger only holds", () => {
    const m = manager({ delayMs: 400, rampup: true, backoff: { windowMs: 0 } });
    request(m, 0, 10, 429);
    m.recordBackoff(20, { holdMs: 500 });
    expect(m.state(20)).toMatchObject({
      delayMs: 400,
      concurrency: 1,
      backoffLevel: 0,
      holdUntil: 520,
    });
    expect(m.advance(100_000)).toEqual([]);
    expect(m.nextWakeAt(100_000)).toBeUndefined();
  });
});

describe("rampup (after the first trigger: our refinement)", () => {
  it("ThrottlingScopeManager rampup: a first trigger with light loss cuts the achieved rate by CUT_FACTOR", () => {
    const m = manager({ delayMs: 0, rampup: true });
    // 20 sends/s at concurrency 1 (50 ms latency), the 5th answered 429 at 250 ms:
    // over 250 ms, 20/s sent and 16/s admitted.
    for (let t = 0; t < 200; t += 50) request(m, t, 50);
    request(m, 200, 50, 429);
    const s = m.state(250);
    expect(1000 / s.delayMs).toBeCloseTo(CUT_FACTOR * 16, 6);
    expect(s.backoffLevel).toBe(0); // no exponential step: rampup's cut replaces it
    expect(summary(m.advance(250))).toEqual([
      "69.44/2 first trigger: 0.9 x achieved 16/s (sent 20/s, admitted 16/s)",
    ]);
  });

  it("ThrottlingScopeManager rampup: a first trigger with heavy loss halves the send rate", () => {
    const m = manager({ delayMs: 0, rampup: true, minConcurrency: 1 });
    for (let i = 0; i < 4; i++) m.recordSent(0); // 4 at once, none admitted yet
    m.recordBackoff(50, { cause: "status 429" });
    expect(1000 / m.state(50).delayMs).toBeCloseTo(0.5 * (4 / 0.05), 6);
    expect(summary(m.advance(50))).toEqual([
      "25/1 first trigger with heavy loss: half the send rate (sent 80/s, admitted 0/s)",
    ]);
  });

  it("ThrottlingScopeManager rampup: the first trigger goes back to the last quiet window's rate", () => {
    const m = manager({ delayMs: 200, rampup: true });
    for (let t = 0; t < 1_000; t += 200) request(m, t, 20); // 5/s in window 1
    m.advance(1_000); // -> delay 100
    for (let t = 1_000; t < 1_500; t += 100) request(m, t, 20);
    request(m, 1_500, 20, 429);
    expect(1000 / m.state(1_520).delayMs).toBeCloseTo(5, 6);
  });

  it("ThrottlingScopeManager rampup cuts the achieved rate by CUT_FACTOR on a later trigger", () => {
    const m = manager({ delayMs: 0, rampup: true });
    request(m, 0, 50, 429); // first trigger at 50: send rate 1/0.05 s -> 10/s after halving
    expect(1000 / m.state(50).delayMs).toBeCloseTo(10, 6);
    // 8/s achieved and admitted over [50, 1050): under the 10/s pace.
    for (let t = 75; t < 1_050; t += 125) request(m, t, 20);
    request(m, 1_050, 20, 429);
    // Over the last window [70, 1070]: 9 sent (8 + the trigger), 8 admitted.
    const achieved = Math.min(10, 9, 8);
    expect(1000 / m.state(1_070).delayMs).toBeCloseTo(CUT_FACTOR * achieved, 6);
  });

  it("ThrottlingScopeManager rampup ignores triggers of requests sent before the last cut", () => {
    const m = manager({ delayMs: 0, concurrency: 8, rampup: true });
    for (let i = 0; i < 4; i++) m.recordSent(i);
    m.recordBackoff(50, { cause: "status 429" }); // cut; 4 in flight
    const delay = m.state(50).delayMs;
    m.recordDone(50, { latencyMs: 50, status: 429 });
    m.recordBackoff(51, { cause: "status 429" }); // sent before the cut
    m.recordDone(51, { latencyMs: 50, status: 429 });
    expect(m.state(51).delayMs).toBe(delay);
  });

  it("ThrottlingScopeManager rampup: a window with a trigger holds, a quiet busy window steps up gently", () => {
    const m = manager({ delayMs: 0, rampup: true });
    request(m, 0, 50, 429); // cut to 10/s (delay 100)
    for (let t = 100; t < 1_000; t += 100) request(m, t, 20);
    // The cut is reported; the window with its 1 trigger holds.
    expect(summary(m.advance(1_000))).toEqual([
      "100/1 first trigger with heavy loss: half the send rate (sent 20/s, admitted 0/s)",
    ]);
    for (let t = 1_000; t < 2_000; t += 100) request(m, t, 20);
    const [step] = m.advance(2_000);
    if (step?.kind !== "rampup") throw new Error("expected a rampup step");
    expect(step.why).toMatch(
      /^below target \(0 triggers in window\): rate 10\/s \+ 0\.5 = 10\.5\/s$/,
    );
    expect(1000 / step.delayMs).toBeCloseTo(10.5, 6);
  });

  it("ThrottlingScopeManager rampup with a range target tolerates triggers below its low bound", () => {
    const m = manager({ delayMs: 400, rampup: { backoffTarget: [2, 4] } });
    request(m, 0, 10, 429); // 1 < 2: tolerated
    expect(m.state(10).delayMs).toBe(400);
    request(m, 400, 10);
    expect(summary(m.advance(1_000))).toEqual(["200/1 below target: lower delay"]);
    request(m, 1_000, 10, 429);
    request(m, 1_200, 10, 429); // the second in the window: cuts
    expect(m.state(1_210).delayMs).toBeGreaterThan(200);
    request(m, 1_600, 10);
    expect(m.advance(2_000).filter((s) => s.kind === "rampup" && s.why.startsWith("below")))
      .toEqual([]);
  });

  it("ThrottlingScopeManager rampup: a scalar target t means [t, t]", () => {
    const config = resolveScopeConfig(
      parseSettings({ scopes: { [S]: { rampup: { backoffTarget: 3 } } } }),
      S,
    );
    expect(config.rampup?.backoffTarget).toEqual([3, 3]);
  });

  it("ThrottlingScopeManager rampup concurrency follows the rate times the latency", () => {
    const m = manager({ delayMs: 0, rampup: true, concurrency: 8 }, { concurrentRequests: 64 });
    // 500 ms latency at concurrency 1: 2/s; a trigger halves to 1/s -> 1 x 0.5 s + 1 spare = 2.
    request(m, 0, 500);
    request(m, 500, 500, 429);
    expect(m.state(1_000).concurrency).toBe(2);
  });
});

describe("Throttler.enableRampup() and the rampup operator", () => {
  it("rampup() turns rampup on for matching scopes before the first request and passes outcomes through", async () => {
    const throttler = createThrottler({ concurrentRequestsPerDomain: 4 });
    const urls = ["http://a.test/1", "http://a.test/2", "http://b.test/1", "http://b.test/2"];
    const done = lastValueFrom(
      from(urls).pipe(
        throttleByScope(throttler, (url: string) => Promise.resolve({ status: 200, url })),
        backoffOn(throttler),
        rampup(throttler, { scopes: (s) => s === "a.test" }),
        toArray(),
      ),
    );
    // The gate took the requests synchronously: a.test ramps from concurrency 1.
    expect(throttler.state("a.test")).toMatchObject({ rampup: true, concurrency: 1, active: 1 });
    expect(throttler.state("b.test")).toMatchObject({ rampup: false, concurrency: 4, active: 2 });
    const outcomes = await done;
    expect(outcomes.map((o) => o.kind)).toEqual(["response", "response", "response", "response"]);
  });

  it("Throttler.enableRampup() applies to scopes in memory now and to new ones until stopped", () => {
    const throttler = createThrottler({ concurrentRequestsPerDomain: 4 });
    throttler.manager("a.test");
    const stop = throttler.enableRampup((s) => s.endsWith(".test"), { backoffTarget: [1, 2] });
    expect(throttler.state("a.test")).toMatchObject({ rampup: true, concurrency: 1 });
    throttler.manager("b.test");
    expect(throttler.state("b.test")?.rampup).toBe(true);
    expect(throttler.scopeConfig("c.test").rampup).toBeUndefined(); // settings untouched
    stop();
    throttler.manager("c.test");
    expect(throttler.state("c.test")?.rampup).toBe(false);
    expect(throttler.state("a.test")?.rampup).toBe(true); // what was learned is kept
  });

  it("rampup() rejects bad options at once, naming the field", () => {
    const throttler = createThrottler();
    expect(() => rampup(throttler, { delayFactor: 2 })).toThrow(/rampup\.delayFactor/);
    expect(() => rampup(throttler, { backoffTarget: [3, 1] })).toThrow(/rampup\.backoffTarget/);
    expect(() => rampup(throttler, { scopes: "a" as unknown as () => boolean })).toThrow(TypeError);
  });

  it("rampup() stops applying to new scopes when unsubscribed", () => {
    const throttler = createThrottler();
    const sub = from([]).pipe(rampup(throttler)).subscribe();
    sub.unsubscribe();
    throttler.manager("late.test");
    expect(throttler.state("late.test")?.rampup).toBe(false);
  });
});

interface SimRun {
  readonly arrivals: readonly { readonly atMs: number; readonly status: number }[];
  readonly events: readonly ThrottleEvent[];
}

/** Crawl a simulated token bucket with rampup for `durationMs` of virtual time. */
function simulate(
  ratePerSec: number,
  latencyMs: number,
  durationMs: number,
  windowMs = 2_000,
): SimRun {
  const ts = new TestScheduler((a, b) => expect(a).toEqual(b));
  const events: ThrottleEvent[] = [];
  let arrivals: SimRun["arrivals"] = [];
  ts.run(() => {
    const site = createSimulatedSite({ ratePerSec, burst: 3, latencyMs, scheduler: ts });
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const throttler = createThrottler(
      { backoff: { windowMs }, concurrentRequests: 64, retry: { times: 100 } },
      { scheduler: ts, random },
    );
    throttler.events$.subscribe((e) => {
      if (e.type === "rampup" || e.type === "backoff") events.push(e);
    });
    const n = Math.ceil((ratePerSec * durationMs) / 1000) + 50; // always more than the site admits
    const urls = Array.from({ length: n }, (_, i) => `http://sim.test/${i}`);
    let sub: Subscription | undefined = undefined;
    sub = from(urls).pipe(
      throttleByScope(throttler, (url: string, c) => site.download(url, { signal: c.signal })),
      backoffOn(throttler),
      rampup(throttler),
    ).subscribe();
    ts.schedule(() => {
      arrivals = site.stats().log;
      sub?.unsubscribe();
    }, durationMs);
  });
  return { arrivals, events };
}

describe("rampup against a simulated token bucket (virtual time)", () => {
  // [hidden rate/s, latency ms]: slow start takes about one window per
  // concurrency step, so the steady state is measured over the last 40 s of 100 s.
  const cases: [number, number][] = [[2, 50], [5, 200], [10, 50], [10, 500], [20, 50], [50, 20], [
    50,
    200,
  ]];
  for (const [rate, latency] of cases) {
    it(`rampup() settles near a hidden ${rate}/s (${latency} ms latency) with about the target number of 429s per window`, () => {
      const window = 2_000;
      const { arrivals } = simulate(rate, latency, 100_000, window);
      const from = 60_000;
      const to = 100_000;
      const steady = arrivals.filter((a) => a.atMs >= from && a.atMs < to);
      const admitted = steady.filter((a) => a.status === 200).length / ((to - from) / 1000);
      const rejected = steady.filter((a) => a.status === 429).length;
      // Model: after a cut the pace is CUT_FACTOR x the achieved rate and
      // only climbs until the next trigger, so the admitted rate stays above
      // CUT_FACTOR x the hidden rate (a few % of slack for jitter), and the
      // bucket cannot admit more than its rate plus one burst per period.
      expect(admitted).toBeGreaterThan((CUT_FACTOR - 0.03) * rate);
      expect(admitted).toBeLessThanOrEqual(rate + 3 / ((to - from) / 1000));
      // Target [1, 1]: quiet windows step up until a trigger, triggers cut:
      // on average at most about one 429 per window, never zero for long.
      const windows = (to - from) / window;
      expect(rejected / windows).toBeLessThanOrEqual(1.25);
      expect(rejected).toBeGreaterThan(0);
    });
  }

  it("rampup() says why each step was taken, once per window as time passes", () => {
    const { events } = simulate(10, 50, 20_000);
    const steps = events.filter((e): e is Extract<ThrottleEvent, { type: "rampup" }> =>
      e.type === "rampup"
    );
    expect(steps.length).toBeGreaterThan(3);
    for (const s of steps) {
      expect(s.why).toMatch(/^(first trigger|trigger|below target|at maximum)/);
    }
    const windowSteps = steps.filter((s) => s.why.startsWith("below target"));
    for (const s of windowSteps) expect(s.at % 2_000).toBe(0); // at window ends, not on traffic
    const ats = windowSteps.map((s) => s.at);
    expect(new Set(ats).size).toBe(ats.length); // never two in one window
  });
});
