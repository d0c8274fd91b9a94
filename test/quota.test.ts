import { from, type Observable, timer } from "rxjs";
import { map } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { describe, expect, it } from "vitest";
import type { ThrottleEvent } from "../lib/events.ts";
import type { RequestObject } from "../lib/request.ts";
import { ThrottlingScopeManager } from "../lib/managers/scope_manager.ts";
import { parseSettings, resolveScopeConfig } from "../lib/settings/settings.ts";
import { createThrottler, type ThrottlerOptions } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";

const Q = "cost";

function manager(quota = 10, windowMs = 1_000): ThrottlingScopeManager {
  const config = resolveScopeConfig(
    parseSettings({ scopes: { [Q]: { quota, windowMs, concurrency: 100 } }, jitter: 0 }),
    Q,
  );
  return new ThrottlingScopeManager({ scope: Q, config, random: () => 0.5 });
}

describe("quota windows", () => {
  it("ThrottlingScopeManager quota: fixed windows start at first use and reset after windowMs", () => {
    const m = manager(10, 1_000);
    // [op, now, amount, expected wait after]
    const table: ["send" | "check", number, number, number][] = [
      ["check", 0, 4, 0],
      ["send", 500, 4, 0], // window [500, 1500)
      ["send", 600, 6, 900], // used 10 = quota: 6 more waits for the window's end
      ["check", 700, 1, 800], // waits for the window's end at 1500
      ["check", 1_499, 1, 1],
      ["check", 1_500, 1, 0], // new window
      ["send", 1_600, 9, 1_000], // window [1600, 2600)
      ["check", 1_700, 2, 900],
    ];
    for (const [op, now, amount, wait] of table) {
      if (op === "send") m.recordSent(now, amount);
      expect({ op, now, wait: m.canSend(now, amount) }).toEqual({ op, now, wait });
    }
    expect(m.state(1_700).quota).toEqual({ limit: 10, used: 9, resetsAt: 2_600 });
  });

  it("ThrottlingScopeManager quota: an oversized request goes through an empty window", () => {
    const m = manager(10, 1_000);
    expect(m.canSend(0, 25)).toBe(0);
    m.recordSent(0, 25);
    expect(m.canSend(10, 1)).toBe(990); // the window is over-used until it ends
    expect(m.canSend(1_000, 25)).toBe(0); // and the next empty window takes it again
  });

  it("ThrottlingScopeManager quota: a request without an amount consumes nothing", () => {
    const m = manager(1, 1_000);
    m.recordSent(0, 1);
    expect(m.canSend(1)).toBe(0);
    expect(m.canSend(1, 1)).toBe(999);
  });
});

describe("reconcileQuota()", () => {
  // [used before, reconciliation, used after]
  const table: [number, { consumed?: number; remaining?: number }, number][] = [
    [4, { consumed: 2.5 }, 6.5],
    [4, { consumed: -1 }, 3],
    [4, { consumed: -10 }, 0], // clamped at 0
    [4, { remaining: 7 }, 3],
    [4, { remaining: 15 }, 0], // clamped at 0
    [4, { remaining: -5 }, 15], // the server says we are over
    [4, { consumed: 100, remaining: 8 }, 2], // remaining wins
    [4, {}, 4], // none: unchanged
  ];
  for (const [before, r, after] of table) {
    it(`ThrottlingScopeManager.reconcileQuota(${JSON.stringify(r)}) from ${before} used leaves ${after}`, () => {
      const m = manager(10, 1_000);
      m.recordSent(0, before);
      m.reconcileQuota(10, r);
      expect(m.state(10).quota?.used).toBe(after);
    });
  }

  it("ThrottlingScopeManager.reconcileQuota() in a new window opens it", () => {
    const m = manager(10, 1_000);
    m.recordSent(0, 9);
    m.reconcileQuota(2_000, { consumed: 3 });
    expect(m.state(2_000).quota).toEqual({ limit: 10, used: 3, resetsAt: 3_000 });
  });

  it("Throttler.reconcileQuota() corrects the scope's use", () => {
    const throttler = createThrottler({ scopes: { [Q]: { quota: 10 } } });
    throttler.reconcileQuota(Q, { remaining: 4 });
    expect(throttler.state(Q)?.quota?.used).toBe(6);
  });
});

/** Run requests through the gate in virtual time; each download takes 10 ms. Returns send times by request id. */
function sendTimes(
  requests: readonly RequestObject[],
  options: ThrottlerOptions<RequestObject> = {},
  events: ThrottleEvent[] = [],
): Record<string, number> {
  const times: Record<string, number> = {};
  const ts = new TestScheduler((a, b) => expect(a).toEqual(b));
  ts.run(() => {
    const throttler = createThrottler<RequestObject>(
      { scopes: { [Q]: { quota: 10, windowMs: 1_000, concurrency: 100 } } },
      { scheduler: ts, ...options },
    );
    throttler.events$.subscribe((e) => events.push(e));
    const download = (r: RequestObject): Observable<{ status: number }> => {
      times[r.url] = ts.now();
      return timer(10, ts).pipe(map(() => ({ status: 200 })));
    };
    from(requests).pipe(throttleByScope(throttler, download)).subscribe();
  });
  return times;
}

describe("quota amounts through the gate", () => {
  it("throttleByScope() charges the amounts of meta.throttlingScopes records", () => {
    const times = sendTimes([
      { url: "a", meta: { throttlingScopes: { [Q]: 6 } } },
      { url: "b", meta: { throttlingScopes: { [Q]: 4 } } },
      { url: "c", meta: { throttlingScopes: { [Q]: 1 } } },
      { url: "d", meta: { throttlingScopes: { [Q]: 30 } } },
    ]);
    expect(times).toEqual({ a: 0, b: 0, c: 1_000, d: 2_000 });
  });

  it("throttleByScope() charges the amounts returned by getScopes", () => {
    const times = sendTimes(
      [{ url: "a" }, { url: "bb" }, { url: "ccc" }, { url: "dddd" }],
      { getScopes: (r) => ({ [Q]: r.url.length * 2 }) },
    );
    // 2 + 4 in the first window; 6 would go over 10; then 6 + 8 would too.
    expect(times).toEqual({ a: 0, bb: 0, ccc: 1_000, dddd: 2_000 });
  });

  it("Throttler warns once per quota scope whose requests carry no amounts", () => {
    const events: ThrottleEvent[] = [];
    sendTimes(
      [{ url: "a" }, { url: "b" }, { url: "c" }],
      { getScopes: () => [Q, "other"] },
      events,
    );
    const warnings = events.filter((e) => e.type === "warning");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: "quota-without-amounts", scope: Q });
    expect((warnings[0] as { message: string }).message).toMatch(/Scope 'cost' has a quota of 10/);
  });

  it("Throttler does not warn when a quota scope's requests carry amounts", () => {
    const events: ThrottleEvent[] = [];
    sendTimes([{ url: "a", meta: { throttlingScopes: { [Q]: 1 } } }], {}, events);
    expect(events.filter((e) => e.type === "warning")).toEqual([]);
  });
});
