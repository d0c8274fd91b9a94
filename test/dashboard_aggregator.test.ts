import { map, type Observable, Subject } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { describe, expect, it } from "vitest";
import {
  DashboardAggregator,
  type DashboardSource,
} from "../lib/dashboard/dashboard_aggregator.ts";
import type { ThrottleEvent } from "../lib/events.ts";
import type { ScopeState } from "../lib/managers/scope_manager_protocol.ts";

function scopeState(scope: string, over: Partial<ScopeState> = {}): ScopeState {
  return {
    scope,
    delayMs: 1000,
    baseDelayMs: 1000,
    concurrency: 2,
    active: 0,
    backoffLevel: 0,
    holdUntil: 0,
    nextSendAt: 0,
    quota: undefined,
    rampup: false,
    ...over,
  };
}

/** A throttler as the aggregator sees it, driven by a script. */
function scripted(
  scheduler: DashboardSource["scheduler"],
  events$: Observable<ThrottleEvent>,
  states = new Map<string, ScopeState>(),
): DashboardSource {
  return {
    events$,
    scheduler,
    state: (scope) => states.get(scope),
    active: 3,
    held: 4,
    scopeCount: states.size,
  };
}

const sent = (at: number, scope: string): ThrottleEvent => ({
  type: "request-sent",
  at,
  scopes: [scope],
  attempt: 1,
});
const done = (at: number, scope: string, status: number): ThrottleEvent => ({
  type: "request-done",
  at,
  scopes: [scope],
  attempt: 1,
  latencyMs: 10,
  status,
  error: undefined,
});
const backoff = (at: number, scope: string): ThrottleEvent => ({
  type: "backoff",
  at,
  scope,
  delayMs: 2000,
  level: 1,
  concurrency: 1,
  holdUntil: undefined,
  cause: "429",
});

function testScheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

describe("DashboardAggregator", () => {
  it("DashboardAggregator snapshots one tick of a scripted throttler in virtual time", () => {
    const scheduler = testScheduler();
    scheduler.run(({ hot, expectObservable }) => {
      const events$ = hot<ThrottleEvent>("100ms a 199ms b 199ms c 99ms d 99ms e", {
        a: sent(100, "a.test"),
        b: done(300, "a.test", 200),
        c: sent(500, "b.test"),
        d: done(600, "b.test", 429),
        e: backoff(700, "b.test"),
      });
      const states = new Map([
        ["a.test", scopeState("a.test")],
        ["b.test", scopeState("b.test", { delayMs: 2000, concurrency: 1, backoffLevel: 1 })],
      ]);
      const source = scripted(scheduler, events$, states);
      const agg = new DashboardAggregator(source);
      agg.start();
      // The ticks never end by themselves: a test closes the aggregator.
      scheduler.schedule(() => agg.close(), 2500);
      const seen = agg.snapshots$.pipe(map((s) => ({
        seq: s.seq,
        at: s.at,
        totals: [s.totals.sent, s.totals.done, s.totals.errors, s.totals.backoffs],
        rows: s.rows.map((r) => [r.scope, r.sent, r.done, r.errors, r.delayMs, r.backoffLevel]),
        log: s.log.map((e) => [e.seq, e.scope, e.type]),
        marks: Object.keys(s.marks),
      })));
      expectObservable(seen).toBe("1000ms x 999ms y 499ms |", {
        x: {
          seq: 1,
          at: 1000,
          totals: [2, 2, 1, 1],
          rows: [
            ["a.test", 1, 1, 0, 1000, 0],
            ["b.test", 1, 1, 1, 2000, 1],
          ],
          log: [[1, "b.test", "backoff"]],
          marks: ["b.test"],
        },
        y: {
          seq: 2,
          at: 2000,
          totals: [2, 2, 1, 1],
          rows: [
            ["a.test", 1, 1, 0, 1000, 0],
            ["b.test", 1, 1, 1, 2000, 1],
          ],
          log: [],
          marks: [],
        },
      });
    });
  });

  it("DashboardAggregator keeps historyPoints points and maxEvents log entries", () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush }) => {
      const events$ = new Subject<ThrottleEvent>();
      const agg = new DashboardAggregator(scripted(scheduler, events$), {
        historyPoints: 5,
        maxEvents: 3,
        maxMarks: 3,
      });
      agg.start();
      for (let i = 0; i < 20; i++) {
        scheduler.schedule(() => {
          events$.next(sent(i * 1000 + 500, "a.test"));
          events$.next(backoff(i * 1000 + 500, "a.test"));
        }, i * 1000 + 500);
      }
      scheduler.schedule(() => agg.close(), 20_500);
      flush();
      const h = agg.history();
      expect(h.seq).toBe(20);
      const series = h.series[0]!;
      expect(series.t).toEqual([16, 17, 18, 19, 20]);
      expect(series.columns.sent).toEqual([1, 1, 1, 1, 1]);
      expect(series.columns.delayMs).toEqual([null, null, null, null, null]); // no state
      expect(series.marks.map((m) => m.at)).toEqual([17_500, 18_500, 19_500]);
      expect(h.log.map((e) => e.seq)).toEqual([18, 19, 20]);
      expect(h.rows[0]!.sent).toBe(20);
    });
  });

  it("DashboardAggregator tracks the most active maxScopes scopes and sends topScopes series", () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush }) => {
      const events$ = new Subject<ThrottleEvent>();
      const agg = new DashboardAggregator(scripted(scheduler, events$), {
        maxScopes: 3,
        topScopes: 2,
      });
      agg.start();
      scheduler.schedule(() => {
        // Scope sN gets N sends.
        for (let n = 1; n <= 10; n++) {
          for (let k = 0; k < n; k++) events$.next(sent(500, `s${n}`));
        }
      }, 500);
      scheduler.schedule(() => agg.close(), 1500);
      flush();
      const h = agg.history();
      expect(h.rows.map((r) => r.scope)).toEqual(["s10", "s9", "s8"]);
      expect(h.series.map((s) => s.scope)).toEqual(["s10", "s9"]);
      expect(h.totals.sent).toBe(55);
      expect(h.totals.tracked).toBe(3);
      // Between ticks at most 2 x maxScopes are tracked: the least active half went twice.
      expect(h.totals.untracked).toBe(7);
      expect(agg.series("s1")).toBeUndefined();
    });
  });

  it("DashboardAggregator stays bounded over an hour of 10,000 scopes in virtual time", () => {
    // Ticked by hand on a clock moved by hand: an hour of `interval` on a
    // TestScheduler nests one action per tick and overflows the stack.
    let now = 0;
    const clock = { now: () => now } as DashboardSource["scheduler"];
    const agg = new DashboardAggregator(scripted(clock, new Subject<ThrottleEvent>()), {
      maxScopes: 50,
      historyPoints: 60,
      maxEvents: 100,
    });
    const seconds = 3600;
    let maxTracked = 0;
    for (let i = 0; i < seconds; i++) {
      now = i * 1000 + 1;
      for (let k = 0; k < 20; k++) {
        const scope = `site${(i * 20 + k) % 10_000}.test`;
        agg.record(sent(now, scope));
        if (k === 0) agg.record(backoff(now, scope));
      }
      now = (i + 1) * 1000;
      const s = agg.tick();
      maxTracked = Math.max(maxTracked, s.totals.tracked);
      expect(s.log.length).toBeLessThanOrEqual(100);
    }
    const h = agg.history();
    expect(h.seq).toBe(seconds);
    expect(maxTracked).toBeLessThanOrEqual(50);
    expect(h.log.length).toBe(100);
    expect(h.totals.sent).toBe(seconds * 20);
    expect(h.series.length).toBe(12);
    for (const s of h.series) expect(s.t.length).toBe(60);
  }, 60_000); // a hang limit for a loaded machine, not a timing assertion

  it("DashboardAggregator refuses bounds that are not whole numbers >= 1", () => {
    const source = scripted(testScheduler(), new Subject<ThrottleEvent>());
    expect(() => new DashboardAggregator(source, { maxScopes: 0 })).toThrow(
      "Cannot create dashboard as 'maxScopes' must be a whole number >= 1: current value is 0",
    );
    expect(() => new DashboardAggregator(source, { tickMs: -1 })).toThrow(RangeError);
  });
});
