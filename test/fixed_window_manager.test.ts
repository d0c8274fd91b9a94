import { describe, expect, it } from "vitest";
import {
  fixedWindowManager,
  FixedWindowScopeManager,
} from "../lib/managers/fixed_window_manager.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";

describe("FixedWindowScopeManager", () => {
  it("FixedWindowScopeManager lets a window's quota through, then waits for the next window", () => {
    const m = new FixedWindowScopeManager({ scope: "api", quota: 3, windowMs: 1_000 });
    // [op, now, amount, expected canSend(now, amount) after]
    const table: ["send" | "check", number, number, number][] = [
      ["check", 0, 1, 0],
      ["send", 100, 1, 0], // window [100, 1100)
      ["send", 200, 2, 900], // used 3
      ["check", 300, 1, 800],
      ["check", 1_100, 1, 0], // reset
      ["send", 1_500, 5, 1_000], // oversized, through the empty window
    ];
    for (const [op, now, amount, wait] of table) {
      if (op === "send") m.recordSent(now, amount);
      expect({ op, now, wait: m.canSend(now, amount) }).toEqual({ op, now, wait });
    }
  });

  it("FixedWindowScopeManager ignores backoff and reconciles like the reference", () => {
    const m = new FixedWindowScopeManager({ scope: "api", quota: 10, windowMs: 1_000 });
    m.recordSent(0, 4);
    m.recordBackoff();
    expect(m.canSend(1, 1)).toBe(0);
    m.reconcileQuota(1, { consumed: -10 });
    expect(m.state(1).quota?.used).toBe(0);
    m.reconcileQuota(1, { remaining: 1, consumed: 5 });
    expect(m.state(1).quota?.used).toBe(9);
  });

  it("FixedWindowScopeManager.isIdle() is false while requests are in flight", () => {
    const m = new FixedWindowScopeManager({ scope: "api", quota: 1, windowMs: 1_000 });
    m.recordSent(0, 1);
    expect(m.isIdle(5_000, 0)).toBe(false);
    m.recordDone(10);
    expect(m.isIdle(5_000, 1_000)).toBe(true);
  });

  it("FixedWindowScopeManager.isIdle() is false while its window has use to remember", () => {
    const m = new FixedWindowScopeManager({ scope: "api", quota: 3, windowMs: 1_000 });
    m.recordSent(0, 2);
    m.recordDone(10);
    expect(m.isIdle(500, 0)).toBe(false); // forgotten, the window could take 3 more
    expect(m.isIdle(1_000, 0)).toBe(true); // the window has rolled over
  });

  it("fixedWindowManager() builds the manager from a scope's quota and window, and needs a quota", () => {
    const throttler = createThrottler({
      windowMs: 30_000,
      scopes: {
        api: { quota: 5, manager: fixedWindowManager() },
        bad: { manager: fixedWindowManager() },
      },
    });
    expect(throttler.manager("api").state?.(0).quota).toEqual({ limit: 5, used: 0, resetsAt: 0 });
    expect(() => throttler.manager("bad")).toThrow(/'quota' must be set/);
    expect(() => new FixedWindowScopeManager({ scope: "x", quota: 0, windowMs: 1 })).toThrow(
      RangeError,
    );
  });
});
