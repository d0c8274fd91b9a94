import { describe, expect, it } from "vitest";
import { ThrottlingScopeManager } from "../lib/managers/scope_manager.ts";
import {
  parseSettings,
  resolveScopeConfig,
  type ThrottlerSettingsInput,
  type ThrottlingScopeConfig,
} from "../lib/settings/settings.ts";

const S = "example.com";

/** A manager of scope `example.com` with its own config and the given random source. */
function manager(
  scope: ThrottlingScopeConfig = {},
  settings: ThrottlerSettingsInput = {},
  random: () => number = () => 0.5,
): ThrottlingScopeManager {
  // The reference's arithmetic (exponential steps): the scope is not adaptive
  // unless a test says so (adaptive scopes: test/rampup.test.ts).
  const config = resolveScopeConfig(
    parseSettings({ ...settings, scopes: { [S]: { adaptive: false, ...scope } } }),
    S,
  );
  return new ThrottlingScopeManager({ scope: S, config, random });
}

describe("ThrottlingScopeManager (adaptive slow start)", () => {
  /** Admitted answers 50 ms apart from `from` for `ms`, each sent and answered at once. */
  function admits(m: ThrottlingScopeManager, from: number, ms: number, latencyMs = 0): void {
    for (let t = from; t < from + ms; t += 50) {
      m.recordSent(t);
      m.recordDone(t, { latencyMs, status: 200 });
    }
  }

  // Doubling at most once per round: three round trips, at least 200 ms.
  const slowStart: { latencyMs: number; table: [number, number][] }[] = [
    // [until, concurrency]
    { latencyMs: 0, table: [[0, 2], [199, 2], [399, 4], [599, 8], [2_000, 8]] },
    { latencyMs: 20, table: [[0, 2], [199, 2], [399, 4], [599, 8], [2_000, 8]] },
    { latencyMs: 100, table: [[0, 2], [199, 2], [499, 4], [799, 8], [2_000, 8]] },
  ];
  for (const { latencyMs, table } of slowStart) {
    it(`ThrottlingScopeManager slow start: 2, then one more per admitted answer, at most doubling per round (${latencyMs} ms round trips)`, () => {
      const m = manager({ adaptive: true, concurrency: 8 });
      let t = 0;
      for (const [until, concurrency] of table) {
        admits(m, t, until - t + 1, latencyMs);
        t = until + 1;
        expect({ until, c: m.state(until).concurrency }).toEqual({ until, c: concurrency });
      }
    });
  }

  it("ThrottlingScopeManager.setConcurrency(): a temporary limit lets slow start go on, a permanent one ends it", () => {
    const temporary = manager({ adaptive: true, concurrency: 8 });
    const permanent = manager({ adaptive: true, concurrency: 8 });
    temporary.setConcurrency(1, { temporary: true });
    temporary.setConcurrency(2, { temporary: true });
    permanent.setConcurrency(2);
    admits(temporary, 0, 1_000);
    admits(permanent, 0, 1_000);
    expect(temporary.state(1_000).concurrency).toBe(8);
    expect(permanent.state(1_000).concurrency).toBe(2);
  });

  it("ThrottlingScopeManager slow start counts answers without a status as admitted, failures not", () => {
    const answered = manager({ adaptive: true, concurrency: 8 });
    const failing = manager({ adaptive: true, concurrency: 8 });
    for (let t = 0; t < 1_000; t += 50) {
      answered.recordSent(t);
      answered.recordDone(t, { latencyMs: 0, status: undefined });
      failing.recordSent(t);
      failing.recordDone(t, { latencyMs: 0, status: undefined, failed: true });
    }
    expect(answered.state(1_000).concurrency).toBe(8);
    expect(failing.state(1_000).concurrency).toBe(2);
  });
});

describe("ThrottlingScopeManager (soft triggers: a flaky backend is no limit)", () => {
  /**
   * 20 admitted answers, then `pattern` one answer per character, 50 ms
   * apart (each answered 10 ms after its send): "." admitted, "s" a soft
   * trigger (a 502), "h" a hard one (a 503). Returns whether the scope slowed.
   */
  function slowedBy(pattern: string, adaptive = true): boolean {
    const m = manager({ adaptive, concurrency: 8 });
    let t = 0;
    const answer = (c: string) => {
      m.recordSent(t);
      const status = c === "." ? 200 : c === "s" ? 502 : 503;
      if (c !== ".") {
        m.recordBackoff(t + 10, {
          cause: `status ${status}`,
          sentAt: t,
          ...(c === "s" ? { soft: true } : {}),
        });
      }
      m.recordDone(t + 10, { latencyMs: 10, status, sentAt: t });
      t += 50;
    };
    for (let i = 0; i < 20; i++) answer(".");
    const before = m.state(t);
    for (const c of pattern) answer(c);
    const after = m.state(t);
    return after.delayMs > before.delayMs || after.concurrency < before.concurrency ||
      after.backoffLevel > 0;
  }

  it("an adaptive scope slows down for 4 soft triggers among 10 answers, not for fewer; a hard one at once", () => {
    // [answers after 20 admitted, slowed]
    const table: [string, boolean][] = [
      ["s", false],
      ["s.........", false],
      ["sss", false],
      ["ss.s", false],
      ["ssss", true],
      ["s.s.s.s", true],
      ["s..s..s..s", true],
      ["s....s....s....s", false],
      ["s...s...s...s", false],
      ["h", true],
      ["sss.h", true],
    ];
    for (const [pattern, slowed] of table) {
      expect({ pattern, slowed: slowedBy(pattern) }).toEqual({ pattern, slowed });
    }
  });

  it("a scope that is not adaptive steps back for every soft trigger, as the reference does", () => {
    expect(slowedBy("s", false)).toBe(true);
  });
});

describe("ThrottlingScopeManager", () => {
  it("ThrottlingScopeManager.canSend() answers the wait until the delay after the last send", () => {
    const m = manager({ delayMs: 100, jitter: 0, concurrency: 4 });
    // [op, now, expected canSend after the op]
    const table: ["sent" | "check", number, number][] = [
      ["check", 0, 0],
      ["sent", 0, 100],
      ["check", 40, 60],
      ["check", 99, 1],
      ["check", 100, 0],
      ["check", 5_000, 0],
      ["sent", 5_000, 100],
      ["check", 5_050, 50],
    ];
    for (const [op, now, wait] of table) {
      if (op === "sent") m.recordSent(now);
      expect({ op, now, wait: m.canSend(now) }).toEqual({ op, now, wait });
    }
  });

  it("ThrottlingScopeManager.canSend() answers Infinity while concurrency is full, 0 after recordDone", () => {
    const m = manager({ concurrency: 2, delayMs: 0 });
    m.recordSent(0);
    expect(m.canSend(0)).toBe(0);
    m.recordSent(0);
    expect(m.canSend(0)).toBe(Infinity);
    expect(m.canSend(1_000_000)).toBe(Infinity);
    m.recordDone(10);
    expect(m.canSend(10)).toBe(0);
    expect(m.state(10).active).toBe(1);
    // A stray recordDone never makes `active` negative.
    m.recordDone(11);
    m.recordDone(12);
    expect(m.state(12).active).toBe(0);
  });

  it("ThrottlingScopeManager applies jitter delay * uniform(1 - j, 1 + j) to each send, never to the stored delay", () => {
    // [jitter, random, expected gap]
    const table: [number | [number, number] | boolean, number, number][] = [
      [0, 0.999, 1000],
      [0.5, 0, 500],
      [0.5, 0.5, 1000],
      [0.5, 0.999, 1499],
      [true, 0, 500],
      [0.2, 0.25, 900],
      [[0, 1], 0.5, 1500],
      [[-0.25, 0], 0, 750],
    ];
    for (const [jitter, r, gap] of table) {
      const m = manager({ delayMs: 1000, jitter, concurrency: 8 }, {}, () => r);
      m.recordSent(0);
      expect({ jitter, r, gap: m.canSend(0) }).toEqual({ jitter, r, gap: expect.closeTo(gap, 9) });
      expect(m.state(0).delayMs).toBe(1000);
    }
  });

  it("ThrottlingScopeManager jitter does not compound over many sends (seeded sequence)", () => {
    const randoms = [0.1, 0.9, 0.0, 0.999, 0.5, 0.3, 0.7];
    let i = 0;
    const m = manager(
      { delayMs: 200, jitter: 0.5, concurrency: 8 },
      {},
      () => randoms[i++ % randoms.length]!,
    );
    let now = 0;
    for (let k = 0; k < 21; k++) {
      const r = randoms[k % randoms.length]!;
      m.recordSent(now);
      m.recordDone(now);
      const gap = m.canSend(now);
      expect(gap).toBeCloseTo(200 * (0.5 + r), 9);
      expect(m.state(now).delayMs).toBe(200);
      now += gap;
      expect(m.canSend(now)).toBe(0);
    }
  });

  it("ThrottlingScopeManager.recordBackoff() steps the delay 1 s, 2 s, 4 s ... 256 s, 300 s from a delay of 0", () => {
    const m = manager({ delayMs: 0 });
    const delays: number[] = [];
    for (let k = 0; k < 11; k++) {
      m.recordBackoff(k);
      delays.push(m.state(k).delayMs / 1000);
    }
    expect(delays).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    expect(m.state(11).backoffLevel).toBe(11);
  });

  it("ThrottlingScopeManager.recordBackoff() multiplies a configured delay by the factor, clamped to [min, max]", () => {
    // [delayMs, backoff, expected delays after 3 triggers]
    const table: [number, ThrottlingScopeConfig["backoff"], number[]][] = [
      [300, {}, [1000, 2000, 4000]],
      [1500, {}, [3000, 6000, 12000]],
      [100, { minDelayMs: 50, delayFactor: 3 }, [300, 900, 2700]],
      [100, { minDelayMs: 50, delayFactor: 3, maxDelayMs: 1000 }, [300, 900, 1000]],
    ];
    for (const [delayMs, backoff, expected] of table) {
      const m = manager(backoff === undefined ? { delayMs } : { delayMs, backoff });
      const got: number[] = [];
      for (let k = 0; k < 3; k++) {
        m.recordBackoff(0);
        got.push(m.state(0).delayMs);
      }
      expect({ delayMs, got }).toEqual({ delayMs, got: expected });
    }
  });

  it("ThrottlingScopeManager recovers one trigger per full quiet window, back to the configured delay", () => {
    const m = manager({ delayMs: 0, backoff: { windowMs: 60_000 } });
    m.recordBackoff(0);
    m.recordBackoff(0);
    expect(m.state(0)).toMatchObject({ delayMs: 2000, backoffLevel: 2 });
    expect(m.nextWakeAt(0)).toBe(60_000);
    // [now, steps taken, delay, level]
    const table: [number, number, number, number][] = [
      [59_999, 0, 2000, 2],
      [60_000, 1, 1000, 1],
      [60_001, 0, 1000, 1],
      [119_999, 0, 1000, 1],
      [120_000, 1, 0, 0],
      [600_000, 0, 0, 0],
    ];
    for (const [now, steps, delayMs, level] of table) {
      const taken = m.advance(now);
      expect({
        now,
        steps: taken.length,
        delayMs: m.state(now).delayMs,
        level: m.state(now).backoffLevel,
      })
        .toEqual({ now, steps, delayMs, level });
    }
    expect(m.nextWakeAt(600_000)).toBeUndefined();
  });

  it("ThrottlingScopeManager.advance() after a long gap undoes one trigger per whole window elapsed", () => {
    const m = manager({ delayMs: 500, backoff: { windowMs: 1000 } });
    for (let k = 0; k < 4; k++) m.recordBackoff(0); // 1000, 2000, 4000, 8000
    expect(m.state(0).delayMs).toBe(8000);
    const steps = m.advance(2500);
    expect(steps).toEqual([
      { kind: "recovery", delayMs: 4000, level: 3 },
      { kind: "recovery", delayMs: 2000, level: 2 },
    ]);
    expect(m.advance(10_000).map((s) => s.kind === "recovery" && s.delayMs)).toEqual([1000, 500]);
    expect(m.state(10_000)).toMatchObject({ delayMs: 500, backoffLevel: 0 });
  });

  it("ThrottlingScopeManager: a new trigger restarts the recovery countdown", () => {
    const m = manager({ delayMs: 0, backoff: { windowMs: 1000 } });
    m.recordBackoff(0);
    m.advance(900);
    m.recordBackoff(900); // 2000, countdown from 900
    expect(m.advance(1000)).toEqual([]);
    expect(m.advance(1899)).toEqual([]);
    expect(m.advance(1900)).toEqual([{ kind: "recovery", delayMs: 1000, level: 1 }]);
  });

  it("ThrottlingScopeManager with backoff windowMs 0 recovers at once: no lasting delay", () => {
    const m = manager({ delayMs: 100, jitter: 0, backoff: { windowMs: 0 } });
    m.recordBackoff(0);
    expect(m.state(0)).toMatchObject({ delayMs: 100, backoffLevel: 0 });
    m.recordBackoff(0, { holdMs: 5000 });
    expect(m.canSend(1000)).toBe(4000);
    expect(m.state(0).backoffLevel).toBe(0);
  });

  it("ThrottlingScopeManager uses the backoff jitter (default ±10%) while in backoff", () => {
    const lo = manager({ delayMs: 0 }, {}, () => 0);
    lo.recordBackoff(0);
    lo.recordSent(0);
    expect(lo.canSend(0)).toBeCloseTo(900, 9);
    const hi = manager({ delayMs: 0 }, {}, () => 0.999);
    hi.recordBackoff(0);
    hi.recordSent(0);
    expect(hi.canSend(0)).toBeCloseTo(1099.8, 9);
  });

  it("ThrottlingScopeManager.recordBackoff() with holdMs holds the scope, capped at maxDelayMs unless uncapped", () => {
    // [signal, canSend at 1000]
    const table: [{ holdMs: number; uncapped?: boolean }, number][] = [
      [{ holdMs: 5000 }, 4000],
      [{ holdMs: 1_000_000 }, 299_000],
      [{ holdMs: 1_000_000, uncapped: true }, 999_000],
    ];
    for (const [signal, wait] of table) {
      const m = manager({ delayMs: 0, concurrency: 4 });
      m.recordBackoff(0, signal);
      expect({ signal, wait: m.canSend(1000) }).toEqual({ signal, wait });
      // A hold is also an ordinary trigger: the steady delay takes its step.
      expect(m.state(1000)).toMatchObject({ delayMs: 1000, backoffLevel: 1 });
    }
  });

  it("ThrottlingScopeManager keeps the longer of two holds", () => {
    const m = manager({ delayMs: 0 });
    m.recordBackoff(0, { holdMs: 10_000 });
    m.recordBackoff(1000, { holdMs: 2_000 });
    expect(m.state(1000).holdUntil).toBe(10_000);
    expect(m.nextWakeAt(1000)).toBe(10_000);
  });

  it("ThrottlingScopeManager quota: fixed windows from first use, amounts, oversized request in an empty window", () => {
    const m = manager({ quota: 10, windowMs: 60_000, concurrency: 100, delayMs: 0 });
    // [op, now, amount, expected canSend(now, amount) before the op]
    const table: ["sent" | "check", number, number | undefined, number][] = [
      ["sent", 1000, 4, 0], // opens the window [1000, 61000)
      ["sent", 2000, 4, 0],
      ["check", 3000, 4, 58_000], // 8 + 4 > 10
      ["sent", 3000, 2, 0], // 8 + 2 = 10 fits
      ["check", 3000, 1, 58_000],
      ["sent", 3000, undefined, 0], // no amount: consumes nothing, never waits
      ["sent", 3000, 0, 0],
      ["sent", 61_000, 15, 0], // new window, empty: an oversized request goes
      ["check", 61_001, 1, 59_999],
      ["sent", 121_000, 1, 0],
    ];
    for (const [op, now, amount, wait] of table) {
      expect({ op, now, amount, wait: m.canSend(now, amount) }).toEqual({ op, now, amount, wait });
      if (op === "sent") {
        m.recordSent(now, amount);
        m.recordDone(now);
      }
    }
    expect(m.state(121_000).quota).toEqual({ limit: 10, used: 1, resetsAt: 181_000 });
  });

  it("ThrottlingScopeManager.reconcileQuota(): remaining sets used, consumed adds, remaining wins", () => {
    // [reconciliation, used after (from 4 used)]
    const table: [{ consumed?: number; remaining?: number }, number][] = [
      [{ consumed: 3 }, 7],
      [{ consumed: -2 }, 2],
      [{ consumed: -10 }, 0],
      [{ remaining: 1 }, 9],
      [{ remaining: 20 }, 0],
      [{ remaining: 5, consumed: 100 }, 5],
      [{ consumed: Number.NaN }, 4],
    ];
    for (const [r, used] of table) {
      const m = manager({ quota: 10, windowMs: 1000, concurrency: 100 });
      m.recordSent(0, 4);
      m.reconcileQuota(10, r);
      expect({ r, used: m.state(10).quota?.used }).toEqual({ r, used });
    }
    const m = manager({ quota: 10, windowMs: 1000 });
    m.recordSent(0, 4);
    m.reconcileQuota(10, { remaining: 0 });
    expect(m.canSend(10, 1)).toBe(990);
    // A scope without a quota ignores reconciliation.
    const free = manager({});
    free.reconcileQuota(0, { consumed: 5 });
    expect(free.state(0).quota).toBeUndefined();
  });

  it("ThrottlingScopeManager.setBaseDelay() replaces the delay at level 0, and in backoff only raises it", () => {
    const m = manager({ delayMs: 100, jitter: 0 });
    m.setBaseDelay(2000);
    expect(m.state(0)).toMatchObject({ delayMs: 2000, baseDelayMs: 2000 });
    m.recordBackoff(0); // 4000
    m.setBaseDelay(500);
    expect(m.state(0)).toMatchObject({ delayMs: 4000, baseDelayMs: 500 });
    m.setBaseDelay(9000);
    expect(m.state(0).delayMs).toBe(9000);
  });

  it("ThrottlingScopeManager.setConcurrency() replaces the limit, never below 1", () => {
    const m = manager({ concurrency: 3 });
    m.setConcurrency(0);
    expect(m.state(0).concurrency).toBe(1);
    m.recordSent(0);
    expect(m.canSend(0)).toBe(Infinity);
    m.setConcurrency(2);
    expect(m.canSend(0)).toBe(0);
  });

  it("ThrottlingScopeManager.isIdle() is false with requests in flight, in a hold, in backoff, or used recently", () => {
    // [setup, now, maxIdleMs, idle]
    const table: [string, (m: ThrottlingScopeManager) => void, number, number, boolean][] = [
      ["fresh", () => {}, 0, 0, true],
      ["fresh, max idle 1000", () => {}, 999, 1000, false],
      ["fresh, max idle 1000 at 1000", () => {}, 1000, 1000, true],
      ["in flight", (m) => m.recordSent(0), 10_000, 0, false],
      [
        "done",
        (m) => {
          m.recordSent(0);
          m.recordDone(500);
        },
        1400,
        1000,
        false,
      ],
      [
        "done, idle long enough",
        (m) => {
          m.recordSent(0);
          m.recordDone(500);
        },
        1500,
        1000,
        true,
      ],
      ["in backoff", (m) => m.recordBackoff(0), 30_000, 0, false],
      [
        "backoff recovered",
        (m) => {
          m.recordBackoff(0);
          m.advance(60_000);
        },
        60_000,
        0,
        true,
      ],
      ["in a hold", (m) => m.recordBackoff(0, { holdMs: 5000, uncapped: true }), 4999, 0, false],
    ];
    for (const [name, setup, now, maxIdle, idle] of table) {
      const m = manager({ delayMs: 0, backoff: { windowMs: 60_000 } });
      setup(m);
      expect({ name, idle: m.isIdle(now, maxIdle) }).toEqual({ name, idle });
    }
  });

  it("ThrottlingScopeManager.isIdle() is false while a send must still wait or a quota window has use", () => {
    const delayed = manager({ delayMs: 100, jitter: 0 });
    delayed.recordSent(0);
    delayed.recordDone(10);
    // [now, idle]: the next send may go at 100; forgotten before, it would go at once.
    expect([[50, delayed.isIdle(50, 0)], [100, delayed.isIdle(100, 0)]]).toEqual([[50, false], [
      100,
      true,
    ]]);
    const quota = manager({ delayMs: 0, quota: 10, windowMs: 1000 });
    quota.recordSent(0, 4);
    quota.recordDone(10);
    expect([[500, quota.isIdle(500, 0)], [1000, quota.isIdle(1000, 0)]]).toEqual([[500, false], [
      1000,
      true,
    ]]);
  });

  it("ThrottlingScopeManager.state() reports hold and next send only while in the future", () => {
    const m = manager({ delayMs: 100, jitter: 0, concurrency: 2 });
    m.recordSent(0);
    expect(m.state(50)).toEqual({
      scope: S,
      delayMs: 100,
      baseDelayMs: 100,
      concurrency: 2,
      active: 1,
      backoffLevel: 0,
      holdUntil: 0,
      nextSendAt: 100,
      quota: undefined,
      rampup: false,
    });
    expect(m.state(100).nextSendAt).toBe(0);
  });
});

/**
 * Send greedily from `from` to `to`: each request at the first moment
 * `canSend` allows, settled at once unless `hold` keeps it in flight. Returns
 * the send times.
 */
function sendGreedily(m: ThrottlingScopeManager, from: number, to: number): number[] {
  const sends: number[] = [];
  let t = from;
  while (t < to && sends.length < 1000) {
    const wait = m.canSend(t);
    if (wait === Infinity) break;
    if (wait > 0) {
      t += wait;
      continue;
    }
    m.recordSent(t);
    m.recordDone(t);
    sends.push(t);
  }
  return sends.filter((at) => at < to);
}

describe("ThrottlingScopeManager.recordWentOut() (spacing from the wire)", () => {
  it("ThrottlingScopeManager.recordWentOut() moves the next send back by the lateness, only while a spacing from that send is pending", () => {
    // [delayMs, sent at, went out late by (reported at sent + 10), canSend at 100]
    const table: [number, number, number, number][] = [
      [100, 0, 5, 5], // the next send is 100 ms after it went out
      [100, 0, 0, 0],
      [0, 0, 5, 0], // no delay: nothing to space
      [100, 0, 250, 250], // later than the delay: 100 ms after it went out all the same
    ];
    for (const [delayMs, sentAt, late, wait] of table) {
      const m = manager({ delayMs, jitter: 0, concurrency: 4 });
      m.recordSent(sentAt);
      m.recordWentOut(sentAt, late);
      expect({ delayMs, late, wait: m.canSend(100) }).toEqual({ delayMs, late, wait });
    }
    // A report that comes after a later send moves that send's spacing:
    // slower, never faster (a report comes within ms of its send, under a
    // delay the later send is rare).
    const m = manager({ delayMs: 100, jitter: 0, concurrency: 4 });
    m.recordSent(0);
    m.recordSent(200);
    m.recordWentOut(0, 5);
    expect(m.canSend(300)).toBe(5);
  });

  it("ThrottlingScopeManager.recordWentOut() moves an announced budget's pace too", () => {
    const m = manager({ delayMs: 0, concurrency: 4 });
    // 10 left over 10 s: spread over the time to the reset.
    m.recordAnnounced(0, { remaining: 10, resetInMs: 10_000, limit: 10 });
    m.recordSent(0);
    const paced = m.canSend(0);
    expect(paced).toBeGreaterThan(0);
    m.recordWentOut(0, 7);
    expect(m.canSend(0)).toBe(paced + 7);
  });
});

describe("ThrottlingScopeManager.recordAnnounced() (budgets from rate-limit headers)", () => {
  it("ThrottlingScopeManager.recordAnnounced(): a budget announced in slow start opens concurrency to what its pace needs", () => {
    // [mode, budget announced by the first answer (sent at 0, answered at
    // 200 ms), concurrency after]: 48 left for 800 ms, sent over 0.3 of it,
    // is 200/s (a send every 5 ms), about 40 in flight at 200 ms, one more for the
    // answer on its way; capped by the scope's concurrency (adaptive) or the
    // crawl's (rampup); 12 left for 4 s go at the limit's own pace (50 per
    // 4 s: 80 ms apart, 24 ms spread), about 10 in flight, one more; with
    // a small budget slow start goes on as it would (one step: 3), and a
    // scope that is not adaptive keeps its configured concurrency.
    const table: [string, { remaining: number; resetInMs: number }, number][] = [
      ["adaptive", { remaining: 48, resetInMs: 800 }, 8],
      ["adaptive, 64 allowed", { remaining: 48, resetInMs: 800 }, 42],
      ["adaptive, 64 allowed", { remaining: 12, resetInMs: 4_000 }, 11],
      ["rampup", { remaining: 48, resetInMs: 800 }, 16],
      ["rampup", { remaining: 2, resetInMs: 800 }, 3],
      ["fixed", { remaining: 48, resetInMs: 800 }, 4],
    ];
    for (const [mode, budget, concurrency] of table) {
      const m = mode === "fixed"
        ? manager({ delayMs: 0, concurrency: 4 })
        : mode === "rampup"
        ? manager({ delayMs: 0, rampup: true }, { concurrentRequests: 16 })
        : manager({ adaptive: true, concurrency: mode === "adaptive" ? 8 : 64 });
      m.recordSent(0);
      m.recordSent(0);
      m.recordAnnounced(200, { ...budget, limit: 50, sentAt: 0 });
      m.recordDone(200, { latencyMs: 200, status: 200, sentAt: 0 });
      m.advance(200);
      expect({ mode, budget, c: m.state(200).concurrency }).toEqual({
        mode,
        budget,
        c: concurrency,
      });
    }
  });

  it("ThrottlingScopeManager.recordAnnounced() holds until the reset on remaining 0, without a backoff step", () => {
    // [budget, canSend at 1000 after the announcement at 0]
    const table: [{ remaining: number; resetInMs: number; limit?: number }, number][] = [
      [{ remaining: 0, resetInMs: 5_000 }, 4_000],
      [{ remaining: 0, resetInMs: 5_000, limit: 10 }, 4_000],
      // Capped like any server-given hold (backoff.maxDelayMs, 300 s).
      [{ remaining: 0, resetInMs: 3_600_000 }, 299_000],
    ];
    for (const [budget, wait] of table) {
      const m = manager({ delayMs: 0, concurrency: 4 });
      m.recordAnnounced(0, budget);
      expect({ budget, wait: m.canSend(1000) }).toEqual({ budget, wait });
      expect(m.state(1000)).toMatchObject({ delayMs: 0, backoffLevel: 0, holdUntil: wait + 1000 });
    }
  });

  it("ThrottlingScopeManager.recordAnnounced(): a limit told on refusals only is tried higher, window by window, and a refused try goes back", () => {
    // Sends as many as the scope lets through in each 1 s window from `from`
    // on (answered at once), and returns the counts.
    const windows = (m: ThrottlingScopeManager, from: number, count: number): number[] => {
      const sent: number[] = [];
      for (let w = 0; w < count; w++) {
        const end = from + 1_000 * (w + 1);
        let t = from + 1_000 * w;
        let n = 0;
        for (;;) {
          const wait = m.canSend(t);
          if (wait > 0) {
            if (t + wait >= end) break;
            t += wait;
            continue;
          }
          m.recordSent(t);
          m.recordDone(t, { latencyMs: 0, status: 200, sentAt: t });
          n++;
        }
        sent.push(n);
      }
      return sent;
    };
    // [told on a refusal, sends per window in the four windows after its reset]
    const table: [boolean, number[]][] = [
      // X-RateLimit-Limit: 10 on a 429 only (a bucket's size, or a window's
      // quota): each full window unrefused tries 20% more.
      [true, [10, 12, 14, 17]],
      // The same told on an admitted answer: the site's quota, obeyed.
      [false, [10, 10, 10, 10]],
    ];
    for (const [refused, perWindow] of table) {
      const m = manager({ delayMs: 0, concurrency: 4 });
      m.recordAnnounced(0, { limit: 10, remaining: 0, resetInMs: 1_000, refused, sentAt: 0 });
      expect({ refused, perWindow: windows(m, 1_000, 4) }).toEqual({ refused, perWindow });
    }
    // The try of 14 refused in its window: back to the last one found, 12.
    const m = manager({ delayMs: 0, concurrency: 4 });
    m.recordAnnounced(0, { limit: 10, remaining: 0, resetInMs: 1_000, refused: true, sentAt: 0 });
    expect(windows(m, 1_000, 2)).toEqual([10, 12]);
    m.recordSent(3_000);
    expect(m.state(3_000).quota?.limit).toBe(14);
    m.recordAnnounced(3_100, {
      limit: 10,
      remaining: 0,
      resetInMs: 900,
      refused: true,
      sentAt: 3_000,
    });
    expect(m.state(3_100).quota?.limit).toBe(12);
    // A window with its own length said (RateLimit-Policy's w) is a policy, obeyed as told.
    const said = manager({ delayMs: 0, concurrency: 4 });
    said.recordAnnounced(0, {
      limit: 10,
      windowMs: 1_000,
      remaining: 0,
      resetInMs: 1_000,
      refused: true,
      sentAt: 0,
    });
    expect(windows(said, 1_000, 3)).toEqual([10, 10, 10]);
  });

  it("ThrottlingScopeManager.recordAnnounced(): a small budget spent with a reset told as a second tries a shorter hold, once a try at a time", () => {
    // [what the spending answer told, hold] for a budget spent at 40 by a request sent at 0.
    type Told = { limit: number; resetInMs: number; windowMs?: number; resetIsEpoch?: boolean };
    const table: [Told, number][] = [
      // A second may be a whole second's rounding of a few ms (a token
      // bucket of 1 tells its time until full): half of it is tried.
      [{ limit: 1, resetInMs: 1_000 }, 500],
      [{ limit: 5, resetInMs: 1_000 }, 500],
      // A second read a little late.
      [{ limit: 1, resetInMs: 1_080 }, 540],
      // A larger limit, or a longer reset, is waited out as told.
      [{ limit: 6, resetInMs: 1_000 }, 1_000],
      [{ limit: 1, resetInMs: 2_000 }, 2_000],
      // A window said is a policy; an epoch reset is the next whole second.
      [{ limit: 1, resetInMs: 1_000, windowMs: 1_000 }, 1_000],
      [{ limit: 1, resetInMs: 1_000, resetIsEpoch: true }, 1_000],
    ];
    for (const [told, hold] of table) {
      const m = manager({ delayMs: 0, concurrency: 4 });
      m.recordSent(0);
      m.recordAnnounced(40, { ...told, remaining: 0, sentAt: 0 });
      expect({ told, hold: m.canSend(40) }).toEqual({ told, hold });
    }
    // A bucket of 1 that says "remaining 0, reset 1" after every request,
    // answered in 40 ms, each send as soon as the scope lets it: tries that
    // pass halve the share (holds of 500, 250 of the told second; 460 and
    // 150 end at the earlier bound of the resets told, the sends' own), and
    // the try of a quarter refused (the seventh) is held half the told
    // second, the share in use, not all of it.
    {
      const m = manager({ delayMs: 0, concurrency: 4 });
      const holds: number[] = [];
      let t = 0;
      for (let k = 0; k < 8; k++) {
        const refused = k === 6;
        m.recordSent(t);
        if (refused) {
          m.recordBackoff(t + 40, {
            holdMs: 1_000,
            explained: true,
            cause: "status 429",
            sentAt: t,
          });
        }
        m.recordAnnounced(t + 40, {
          limit: 1,
          remaining: 0,
          resetInMs: 1_000,
          sentAt: t,
          refused,
        });
        m.recordDone(t + 40, { latencyMs: 40, status: refused ? 429 : 200, sentAt: t });
        holds.push(m.canSend(t + 40));
        t += 40 + holds.at(-1)!;
      }
      expect(holds).toEqual([500, 460, 500, 250, 150, 250, 500, 150]);
    }
    // The try's send refused: held as told, and the next spent budget
    // (told by that refusal) is not tried again at once.
    const m = manager({ delayMs: 0, concurrency: 4 });
    m.recordSent(0);
    m.recordAnnounced(40, { limit: 1, remaining: 0, resetInMs: 1_000, sentAt: 0 });
    m.recordSent(540);
    m.recordBackoff(580, { holdMs: 1_000, explained: true, cause: "status 429", sentAt: 540 });
    m.recordAnnounced(580, {
      limit: 1,
      remaining: 0,
      resetInMs: 1_000,
      sentAt: 540,
      refused: true,
    });
    expect(m.canSend(580)).toBe(1_000);
  });

  it("ThrottlingScopeManager.recordAnnounced() reads an answer that comes out of order as older news", () => {
    // [what the late answer (sent at 20, read at 120) says, quota shown after it]
    const table: [{ remaining: number; resetInMs: number }, { used: number; resetsAt: number }][] =
      [
        // A remaining above the last one is no new window: the budget stays spent as told.
        [{ remaining: 6, resetInMs: 1_000 }, { used: 5, resetsAt: 1_100 }],
        // A spent budget was spent in the window the newer answer told of: no hold.
        [{ remaining: 0, resetInMs: 1_000 }, { used: 5, resetsAt: 1_100 }],
      ];
    for (const [late, quota] of table) {
      const m = manager({ delayMs: 0, concurrency: 4 });
      m.recordAnnounced(100, { limit: 10, remaining: 5, resetInMs: 1_000, sentAt: 50 });
      m.recordAnnounced(120, { limit: 10, ...late, sentAt: 20 });
      expect({ late, quota: m.state(120).quota }).toEqual({ late, quota: { limit: 10, ...quota } });
      expect(m.state(120).holdUntil).toBe(0);
    }
    // In order, the same answer is news: a new window, or a spent budget held until its reset.
    const inOrder = manager({ delayMs: 0, concurrency: 4 });
    inOrder.recordAnnounced(100, { limit: 10, remaining: 5, resetInMs: 1_000, sentAt: 50 });
    inOrder.recordAnnounced(120, { limit: 10, remaining: 0, resetInMs: 1_000, sentAt: 60 });
    expect(inOrder.state(120).holdUntil).toBe(1_100);
  });

  it("ThrottlingScopeManager.recordAnnounced() holds a spent budget no longer than its own sends say the window frees a slot", () => {
    // 3 per second said in the policy; resets in whole seconds (up to a second
    // late). The third-last send plus the window (and 2%) is when a sliding
    // window frees its oldest slot, and after a fixed window's reset.
    // [sends after the first answer, hold end after "remaining 0, reset in 1 s" at 500]
    const table: [number[], number][] = [
      [[100, 110, 120], 1_120],
      [[100, 110, 120, 400], 1_130],
      // Fewer sends than the quota: the announced reset.
      [[100, 110], 1_500],
    ];
    for (const [sends, holdUntil] of table) {
      const m = manager({ delayMs: 0, concurrency: 8 });
      m.recordAnnounced(50, { limit: 3, windowMs: 1_000 });
      for (const t of sends) m.recordSent(t);
      m.recordAnnounced(500, { limit: 3, windowMs: 1_000, remaining: 0, resetInMs: 1_000 });
      expect({ sends, holdUntil: m.state(500).holdUntil }).toEqual({ sends, holdUntil });
    }
  });

  it("ThrottlingScopeManager.recordAnnounced() tries a window a second shorter than epoch resets tell, and keeps what the try found", () => {
    // 3 per window, no window said; resets as epoch whole seconds. The first
    // answer tells a reset 2 s after the first send, so the window reads as
    // 2 s; it may be 1 s, its reset rounded up to the next whole second.
    const run = (answer: "admitted" | "refused" | "admitted, none left") => {
      const m = manager({ delayMs: 0, concurrency: 8 });
      const told = (
        now: number,
        left: number,
        resetAt: number,
        sentAt: number,
        refused = false,
      ) =>
        m.recordAnnounced(now, {
          limit: 3,
          remaining: left,
          resetInMs: resetAt - now,
          resetIsEpoch: true,
          sentAt,
          refused,
        });
      told(30, 2, 2_000, 0);
      for (const t of [0, 10, 20]) m.recordSent(t);
      told(50, 0, 2_000, 20);
      // The spent budget's hold tries 1 s: the third-last send plus 1 s and 2%.
      const tried = m.state(50).holdUntil;
      m.recordSent(1_030);
      if (answer === "refused") {
        // The told reset was on time: held until it, and no more tries.
        told(1_060, 0, 2_000, 1_030, true);
        return [tried, m.state(1_060).holdUntil];
      }
      if (answer === "admitted, none left") {
        // A sliding log frees one slot and the send took it: the length
        // holds, and the next spent budget is held a window after the
        // third-last send (the try's send, 10 ms late, counts 1,010 ms).
        told(1_060, 0, 3_000, 1_030);
        for (const t of [1_070, 1_080]) m.recordSent(t);
        told(1_100, 0, 3_000, 1_080);
        return [tried, m.state(1_100).holdUntil];
      }
      // A new window (its reset told 2 s on): the window is at most 1 s and
      // 10 ms (the send went 10 ms after the hold), its spent budgets are
      // held so long after its first send.
      told(1_060, 2, 3_000, 1_030);
      for (const t of [1_040, 1_050]) m.recordSent(t);
      told(1_080, 0, 3_000, 1_050);
      return [tried, m.state(1_080).holdUntil];
    };
    expect(run("admitted")).toEqual([1_020, 1_030 + 1_010 * 1.02]);
    expect(run("refused")).toEqual([1_020, 2_000]);
    expect(run("admitted, none left")).toEqual([1_020, 1_030 + 1_010 * 1.02]);
    // Delta resets are not tried shorter (answers at several times narrow them).
    const delta = manager({ delayMs: 0, concurrency: 8 });
    delta.recordAnnounced(30, { limit: 3, remaining: 2, resetInMs: 1_970, sentAt: 0 });
    for (const t of [0, 10, 20]) delta.recordSent(t);
    delta.recordAnnounced(50, { limit: 3, remaining: 0, resetInMs: 1_950, sentAt: 20 });
    expect(delta.state(50).holdUntil).toBe(2_000);
  });

  it("ThrottlingScopeManager.recordBackoff() with explained takes the hold only: no step, no rampup cut", () => {
    const plain = manager({ delayMs: 0, concurrency: 4 });
    plain.recordBackoff(0, { holdMs: 5_000, explained: true });
    expect(plain.state(0)).toMatchObject({ delayMs: 0, backoffLevel: 0, holdUntil: 5_000 });
    const unexplained = manager({ delayMs: 0, concurrency: 4 });
    unexplained.recordBackoff(0, { holdMs: 5_000 });
    expect(unexplained.state(0)).toMatchObject({ delayMs: 1000, backoffLevel: 1 });

    const ramp = manager({ delayMs: 400, rampup: { minDelayMs: 100 } });
    for (let t = 0; t < 120_000; t += 100) {
      ramp.advance(t);
      if (ramp.canSend(t) === 0) {
        ramp.recordSent(t);
        ramp.recordDone(t + 10, { latencyMs: 10, status: 200 });
      }
    }
    const before = ramp.state(120_000);
    ramp.recordBackoff(120_000, { holdMs: 2_000, explained: true, sentAt: 119_990 });
    expect(ramp.state(120_000)).toMatchObject({
      delayMs: before.delayMs,
      concurrency: before.concurrency,
      backoffLevel: 0,
      holdUntil: 122_000,
    });
  });

  it("ThrottlingScopeManager.recordAnnounced() never lets the (remaining + 1)th request out before the reset", () => {
    // [remaining, reset, requests still in flight besides the announcing one, sends before the reset]
    const table: [number, number, number, number[]][] = [
      // Spread over the first 0.3 of the time to the reset (ANNOUNCED_SPREAD).
      [4, 2_000, 0, [0, 150, 300, 450]],
      [1, 2_000, 0, [0]],
      [4, 2_000, 2, [0, 300]],
      [4, 2_000, 5, []],
      [3, 1_500, 0, [0, 150, 300]],
      // And over a second at most (0.3 of 4 s is 1.2 s).
      [4, 4_000, 0, [0, 250, 500, 750]],
    ];
    for (const [remaining, resetInMs, others, wanted] of table) {
      const m = manager({ delayMs: 0, concurrency: 16 });
      for (let i = 0; i < others + 1; i++) m.recordSent(-10); // in flight, sent earlier
      m.recordAnnounced(0, { remaining, resetInMs });
      m.recordDone(0); // the announcing request settles after its headers are read
      const sends = sendGreedily(m, 0, resetInMs);
      expect({ remaining, resetInMs, others, sends }).toEqual({
        remaining,
        resetInMs,
        others,
        sends: wanted,
      });
    }
  });

  it("ThrottlingScopeManager.recordAnnounced() re-paces on each announcement from the last send, not from now", () => {
    const m = manager({ delayMs: 0, concurrency: 16 });
    m.recordSent(0);
    m.recordAnnounced(50, { remaining: 9, resetInMs: 2_000 }); // 4.5 per second
    m.recordDone(50);
    expect(m.canSend(50)).toBe(0);
    m.recordSent(50);
    m.recordAnnounced(100, { remaining: 8, resetInMs: 1_950 }); // the answer to the send at 50
    m.recordDone(100);
    // Not at once: the last send was at 50, the next goes a gap after it. The
    // same reset told again keeps the spread's pace (0.3 of 2000 / 9), which
    // spread again would slow (0.3 of 1950 / 8).
    expect(m.canSend(100)).toBeCloseTo(50 + 0.3 * (2_000 / 9) - 100, 6);
    // A later reset (a new window) spreads its budget anew.
    m.recordSent(350);
    m.recordAnnounced(400, { remaining: 3, resetInMs: 3_000 });
    m.recordDone(400);
    expect(m.canSend(400)).toBeCloseTo(350 + 0.3 * (3_000 / 3) - 400, 6);
  });

  it("ThrottlingScopeManager.recordAnnounced(): a reset told as the same whole second again keeps the spread's pace", () => {
    // A window of 50 per 5 s that the crawl meets 0.42 s before its end, its
    // reset told in whole seconds: every answer says "49, 48, ... left, reset
    // in 1 s". Spread again over 0.3 of a second at each, the pace slowed as
    // the budget shrank: 30 sent by the window's end, 20 lost (0.67 of the
    // site's rate over 200 pages).
    const m = manager({ delayMs: 0, concurrency: 8 });
    const sends: number[] = [];
    let t = 0;
    for (let left = 49; left >= 0 && t < 2_000; left--) {
      const wait = m.canSend(t);
      if (wait > 0) t += wait;
      m.recordSent(t);
      sends.push(t);
      m.recordAnnounced(t + 1, {
        limit: 50,
        windowMs: 5_000,
        remaining: left,
        resetInMs: 1_000,
        sentAt: t,
      });
      m.recordDone(t + 1, { latencyMs: 1, status: 200, sentAt: t });
    }
    // All 50 go within the first 0.3 s and a little (the spread's share of the
    // second the first answer told).
    expect(sends.filter((at) => at < 420).length).toBe(50);
  });

  it("ThrottlingScopeManager.recordAnnounced(): a limit and a window are the learned quota, paced over each next window", () => {
    const m = manager({ delayMs: 0, concurrency: 16 });
    m.recordSent(0);
    m.recordAnnounced(0, { limit: 5, windowMs: 1_000, remaining: 4, resetInMs: 1_000 });
    m.recordDone(0);
    expect(m.state(0).quota).toEqual({ limit: 5, used: 1, resetsAt: 1_000 });
    const sends = sendGreedily(m, 0, 3_000);
    // The announced budget over 0.3 of the time to its reset (never faster than
    // 0.3 of the quota's spacing), then the learned quota's own pace each window.
    expect(sends).toEqual([
      0,
      60,
      120,
      180,
      1_000,
      1_200,
      1_400,
      1_600,
      1_800,
      2_000,
      2_200,
      2_400,
      2_600,
      2_800,
    ]);
    expect(m.state(2_900).quota).toEqual({ limit: 5, used: 5, resetsAt: 3_000 });
  });

  it("ThrottlingScopeManager.recordAnnounced(): without a limit the scope is free again after the reset", () => {
    const m = manager({ delayMs: 0, concurrency: 16 });
    m.recordAnnounced(0, { remaining: 2, resetInMs: 1_000 });
    expect(m.state(0).quota).toBeUndefined();
    expect(sendGreedily(m, 0, 1_000)).toEqual([0, 150]);
    expect(sendGreedily(m, 1_000, 1_001)).toHaveLength(1000); // no budget in force: no wait at all
  });

  it("ThrottlingScopeManager.recordAnnounced(): a limit without a window takes the longest reset, in whole seconds, as its window", () => {
    const m = manager({ delayMs: 0, concurrency: 16 });
    // [now, remaining, reset, learned quota after]
    const table: [number, number, number, unknown][] = [
      [0, 4, 1_200, { limit: 5, used: 1, resetsAt: 1_200 }], // a window of 2 s
      [100, 3, 1_100, { limit: 5, used: 2, resetsAt: 1_200 }], // the same reset, told later
      [1_300, 4, 700, { limit: 5, used: 1, resetsAt: 2_000 }], // a shorter one: still 2 s
      [2_100, 4, 2_950, { limit: 5, used: 1, resetsAt: 5_050 }], // longer: 3 s
    ];
    for (const [now, remaining, resetInMs, quota] of table) {
      m.recordAnnounced(now, { limit: 5, remaining, resetInMs });
      expect({ now, quota: m.state(now).quota }).toEqual({ now, quota });
    }
  });

  it("ThrottlingScopeManager.recordAnnounced(): a configured quota wins over an announced one", () => {
    const m = manager({ delayMs: 0, quota: 100, windowMs: 60_000 });
    m.recordSent(0, 1);
    m.recordAnnounced(0, { limit: 5, windowMs: 1_000, remaining: 4, resetInMs: 1_000 });
    expect(m.state(0).quota).toEqual({ limit: 100, used: 1, resetsAt: 60_000 });
  });

  it("ThrottlingScopeManager.recordAnnounced() ignores values that are not finite and >= 0, and a reset of 0", () => {
    const bad = [Number.NaN, -1, Infinity, -Infinity];
    for (const v of bad) {
      const m = manager({ delayMs: 0, concurrency: 4 });
      m.recordAnnounced(0, { limit: v, windowMs: v, remaining: v, resetInMs: v });
      m.recordAnnounced(0, { remaining: 0, resetInMs: v });
      m.recordAnnounced(0, { remaining: v, resetInMs: 1_000 });
      expect(m.canSend(0)).toBe(0);
      expect(m.state(0)).toMatchObject({ holdUntil: 0, quota: undefined });
    }
    const zero = manager({ delayMs: 0 });
    zero.recordAnnounced(0, { remaining: 0, resetInMs: 0 });
    expect(zero.canSend(0)).toBe(0);
  });

  it("ThrottlingScopeManager.isIdle() is false while an announced budget is in force", () => {
    const m = manager({ delayMs: 0 });
    m.recordAnnounced(0, { remaining: 3, resetInMs: 1_000 });
    expect([m.isIdle(500, 0), m.isIdle(1_000, 0)]).toEqual([false, true]);
  });
});
