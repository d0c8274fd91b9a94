import { describe, expect, it } from "vitest";
import { AnnouncedWindow, type ToldQuota } from "../lib/managers/_announced_window.ts";

/**
 * A quota of 10 per 1000 ms read from a block of refusals (no holds), as
 * lib/managers/_rampup.ts tells it: the block ended with an admitted probe
 * sent at 900 and answered at 1000, the site's reset guessed at 800, so the
 * window in force ends at 1800 with 9 left.
 */
function blindWindow(limit = 10): AnnouncedWindow {
  const a = new AnnouncedWindow();
  a.infer(1_000, {
    limit,
    windowMs: 1_000,
    resetAt: 1_800,
    lateFrom: Number.NaN,
    lateUntil: Number.NaN,
    blind: true,
    left: limit - 1,
    since: 900,
  });
  return a;
}

/** A quota of `limit` per `windowMs` told by holds, the hold ending at `resetAt`. */
function heldQuota(limit: number, windowMs: number, resetAt: number): ToldQuota {
  return { limit, windowMs, resetAt, lateFrom: Number.NaN, lateUntil: Number.NaN };
}

/** Sends `n` requests from `at` on, each as soon as the window lets it; returns their send times. */
function sendAll(a: AnnouncedWindow, at: number, n: number): number[] {
  const sent: number[] = [];
  let t = at;
  for (let i = 0; i < n; i++) {
    t += Math.max(0, a.waitMs(t));
    a.onSent(t);
    sent.push(t);
  }
  return sent;
}

describe("AnnouncedWindow: a blind quota (a window read from a block of refusals, no holds)", () => {
  it("AnnouncedWindow.infer() with blind: the rest of the window in bursts, two sends then none until they are admitted", () => {
    const a = blindWindow();
    expect(a.blind && a.inferred).toBe(true);
    expect(a.probe).toBe("done"); // no probe of half a quota more
    // Two more after the admitted probe, then a wait for their answers
    // (or a sixteenth of the window, at least 100 ms, should none come).
    // (Spaced 0.3 of the time left per request: 800 ms / 9 × 0.3.)
    const two = sendAll(a, 1_000, 2);
    expect(two[1]! - two[0]!).toBeCloseTo((800 / 9) * 0.3, 9);
    expect(a.waitMs(1_040)).toBe(60);
    a.blindAdmitted(1_080, 1_000);
    a.blindAdmitted(1_090, 1_030);
    expect(a.waitMs(1_090)).toBeLessThanOrEqual(0);
    // Then sends double with the admits (a slow start): with three
    // admitted, seven sent in all, then a wait for their answers.
    const four = sendAll(a, 1_090, 4);
    expect(a.waitMs(four[3]!)).toBe(100);
    for (const t of four) a.blindAdmitted(t + 50, t);
    // Seven admitted: the rest of the quota (3), then nothing until the window ends.
    const rest = sendAll(a, four[3]! + 50, 3);
    expect(rest[2]).toBeLessThan(1_800);
    expect(a.waitMs(rest[2]!)).toBe(1_800 - rest[2]!);
  });

  it("AnnouncedWindow.blindRefused(): a refusal right after the block's admit, with under three admitted, is a sliding log's the first time (the quota spread over its window from then on), a bucket's refill the second", () => {
    const a = blindWindow();
    sendAll(a, 1_000, 2);
    // Refused: a send made after the admitted probe, none of them admitted yet.
    expect(a.blindRefused(1_100, 1_000)).toBe(true);
    // One try again, alone; admitted, its window's sends go a tenth of the
    // window apart (10 per 1000 ms), not in a burst over 0.3 of it.
    const at = 1_100 + a.waitMs(1_100);
    sendAll(a, at, 1);
    a.blindAdmitted(at + 50, at);
    const next = sendAll(a, at + 50, 2);
    expect(next[1]! - next[0]!).toBeCloseTo(a.windowMs / a.limit, 9);
    // Refused so again: a bucket's refill.
    expect(a.blindRefused(next[1]! + 50, next[0]!)).toBe(false);
    const b = blindWindow();
    sendAll(b, 1_000, 2);
    b.blindAdmitted(1_080, 1_000);
    b.blindAdmitted(1_090, 1_030);
    // Three admitted: a window's quota; a refusal now is one in a window.
    expect(b.blindRefused(1_200, 1_100)).toBe(true);
    // Three admitted of a quota of forty, then refused: well under a
    // window's quota, a site that refills (a bucket read as a window).
    const c = blindWindow(40);
    const sent = sendAll(c, 1_000, 2);
    for (const t of sent) c.blindAdmitted(t + 50, t);
    const more = sendAll(c, 1_100, 3);
    expect(c.blindRefused(1_200, more[2]!)).toBe(false);
  });

  it("AnnouncedWindow.blindRefused(): late in a window, the quota is one less and nothing goes before the window's end", () => {
    const a = blindWindow();
    sendAll(a, 1_000, 2);
    a.blindAdmitted(1_080, 1_000);
    a.blindAdmitted(1_090, 1_030);
    const rest = sendAll(a, 1_090, 7);
    for (const t of rest.slice(0, 5)) a.blindAdmitted(t + 20, t);
    // [refused send, limit after, wait at 1500]: the ninth of ten refused.
    expect(a.blindRefused(1_500, rest[5]!)).toBe(true);
    expect({ limit: a.limit, wait: a.waitMs(1_500) }).toEqual({ limit: 9, wait: 300 });
  });

  it("AnnouncedWindow.told(): a limit announced in headers ends a blind quota: no waiting for admits", () => {
    const a = blindWindow();
    // The site begins to announce 10 left until 2800: an announced budget,
    // spread at 0.3 of the limit's own spacing (10 per 1000 ms), not a blind
    // window's sends waiting for admits (a send, two, then a wait).
    a.told(1_000, 10, false, undefined);
    a.start(1_000, 2_800, 10);
    expect({ inferred: a.inferred, blind: a.blind }).toEqual({ inferred: false, blind: false });
    const sent = sendAll(a, 1_000, 10);
    const gap = 0.3 * (1_000 / 10);
    expect(sent).toEqual(Array.from({ length: 10 }, (_, i) => 1_000 + i * gap));
  });

  it("AnnouncedWindow.blindRefused(): early in a window, one send tries again, no sooner than a window after the block's admit, then twice as long after each refusal", () => {
    const a = blindWindow();
    sendAll(a, 1_000, 2);
    a.blindAdmitted(1_080, 1_000);
    a.blindAdmitted(1_090, 1_030);
    sendAll(a, 1_090, 7);
    // The next window from 1800: its first send goes alone.
    expect(sendAll(a, 1_800, 1)).toEqual([1_800]);
    expect(a.waitMs(1_801)).toBeGreaterThan(0);
    // Refused: the site's window had not reset (it began at 900, not 800).
    expect(a.blindRefused(1_850, 1_800)).toBe(true);
    expect(a.windowMs).toBeGreaterThan(1_000); // this window was too short
    // The try: a window (the longer one) after the probe sent at 900, not
    // 100 ms (a sixteenth of it, at least 100 ms) after the refusal; alone.
    const w = a.windowMs;
    const tryAt = 900 + w;
    expect(a.waitMs(1_850)).toBeCloseTo(tryAt - 1_850, 9);
    expect(sendAll(a, 1_850, 1)).toEqual([tryAt]);
    expect(a.waitMs(tryAt + 50)).toBeGreaterThan(1_000);
    // Refused again: the next try waits twice as long as a first one.
    expect(a.blindRefused(tryAt + 50, tryAt)).toBe(true);
    expect(a.waitMs(tryAt + 50)).toBeCloseTo(2 * Math.max(100, w / 16), 9);
    // Admitted: the window begins at that try's send, with its quota less one.
    const at = tryAt + 50 + a.waitMs(tryAt + 50);
    sendAll(a, at, 1);
    a.blindAdmitted(at + 50, at);
    expect(a.resetAt).toBe(at + a.windowMs);
    expect(a.left).toBe(a.limit - 1);
  });
});

describe("AnnouncedWindow: an announced budget's spread", () => {
  it("AnnouncedWindow.start(): a budget left goes over 0.3 of the time to its reset, and over a second at most", () => {
    // [left, time to the reset ms, the limit, per window ms, gap between sends ms]
    const table: [number, number, number, number, number][] = [
      // 0.3 of 2 s over 50: 12 ms apart, all of it within 0.6 s.
      [50, 2_000, 50, 2_000, 12],
      // 0.3 of 60 s over 198 would be 91 ms apart: 18 s for a budget a
      // crawl of 100 pages does not spend. A second at most.
      [198, 60_000, 200, 60_000, 1_000 / 198],
      // A limit's own spacing bounds it first (a bucket's reset is when it is full).
      [5, 10_000, 10, 1_000, 0.3 * 100],
    ];
    for (const [left, toReset, limit, windowMs, gap] of table) {
      const a = new AnnouncedWindow();
      a.limit = limit;
      a.windowMs = windowMs;
      a.start(0, toReset, left);
      expect({ left, toReset, gap: a.gapMs }).toEqual({
        left,
        toReset,
        gap: expect.closeTo(gap, 9),
      });
    }
  });
});

describe("AnnouncedWindow: a window told on refusals only that begins at a first request", () => {
  it("AnnouncedWindow.told(): refused early in a window rolled on from the last reset, the next windows open no sooner than the scope's own sends free a slot", () => {
    const a = new AnnouncedWindow();
    a.windowMs = 2_000;
    /** Sends the quota from `at`, 400 ms apart (the quota's own spacing). */
    const window = (at: number) => {
      for (let k = 0; k < 5; k++) {
        const t = at + 400 * k;
        expect(a.waitMs(t)).toBeLessThanOrEqual(0);
        a.onSent(t);
      }
    };
    // Five admitted from 0 (no headers on them), the sixth refused at 500
    // with a limit of 5 and a reset at 2,000.
    for (let t = 0; t <= 500; t += 100) a.onSent(t);
    a.told(510, 5, true, 500);
    a.start(510, 2_000, 0);
    // The site's window began at its first request: rolled on from 2,000,
    // the next opens at 4,000, while the site's began at 2,005.
    window(2_005);
    expect(a.waitMs(4_000)).toBeLessThanOrEqual(0);
    a.onSent(4_000);
    a.told(4_010, 5, true, 4_000);
    a.start(4_010, 5_010, 0);
    // From then on a window opens no sooner than its quota's first send plus
    // the window (and 2%).
    window(5_010);
    expect(a.waitMs(7_010)).toBe(5_010 + 2_040 - 7_010);
    expect(a.waitMs(7_050)).toBeLessThanOrEqual(0);
  });
});

describe("AnnouncedWindow.counterSeen(): a sliding-window counter told apart from a fixed window and a sliding log", () => {
  /** A window of `limit` per 2000 ms told at 0, with `sends` sends at the given times. */
  function told(limit: number, sends: readonly number[]): AnnouncedWindow {
    const a = new AnnouncedWindow();
    a.windowMs = 2_000;
    a.told(0, limit, false, 0);
    a.start(0, 2_000, limit);
    for (const t of sends) a.onSent(t);
    return a;
  }
  const burst = (n: number, from: number, gap: number) =>
    Array.from({ length: n }, (_, i) => from + i * gap);

  it("AnnouncedWindow.counterSeen() reads what is left plus what was sent within a window (by eighths, never fewer)", () => {
    // [what the scope sent, when the answer came, remaining, refused, read as a counter]
    const table: [string, readonly number[], number, number, boolean, boolean][] = [
      // 80 sent in the first 400 ms; 2.1 s later none left although only a
      // few of them fall within the last window: the site counts older ones.
      ["counter after a busy window", burst(80, 0, 5), 2_500, 0, false, true],
      // The same answer while the burst is still within a window: a fixed
      // window or a log says the same, nothing to read.
      ["the burst still within the window", burst(80, 0, 5), 1_000, 0, false, false],
      // A fixed window's new one: nearly all of it left.
      ["a fixed window's new one", burst(80, 0, 5), 2_500, 78, false, false],
      // A refusal's answer reads nothing (a refused send counted by the scope
      // may not be counted by the site).
      ["a refusal", burst(80, 0, 5), 2_500, 0, true, false],
      // Limits under 8 are not read: a few in flight are a quarter of them.
      ["a limit of 6", burst(6, 0, 5), 2_500, 0, false, false],
    ];
    for (const [name, sends, at, remaining, refused, counter] of table) {
      const limit = sends.length;
      const a = told(limit, sends);
      a.counterSeen(at, undefined, at + 1_000, remaining, refused);
      expect({ name, counter: a.slidingCounter }).toEqual({ name, counter });
    }
  });

  it("AnnouncedWindow.counterSeen() reads a budget spent again right after a hold until the told reset, the reset a window later", () => {
    // [the reset the next answer tells, remaining, read as a counter]
    const table: [number, number, boolean][] = [
      [4_000, 0, true], // a window later: a counter still weighing the last one
      [3_100, 0, false], // 1.1 s later: a whole second's rounding, a log's next oldest
      [4_000, 5, false], // some left: nothing to read
    ];
    for (const [resetAt, remaining, counter] of table) {
      // 20 sent within the last window (a log would count them all): the
      // first reading cannot tell, only the hold's.
      const a = told(20, burst(20, 1_000, 40));
      a.heldToReset(2_000);
      a.counterSeen(2_050, 2_000, resetAt, remaining, false);
      expect({ resetAt, remaining, counter: a.slidingCounter }).toEqual({
        resetAt,
        remaining,
        counter,
      });
    }
  });

  it("AnnouncedWindow.counterSeen(): a refusal of a send the reading let out undoes it for good", () => {
    const a = told(80, burst(80, 0, 5));
    a.counterSeen(2_500, undefined, 3_500, 0, false);
    expect(a.slidingCounter).toBe(true);
    // A slot after the last send, not the window's end.
    expect(a.counterFreedBy(2_500)).toBe(2_500);
    expect(a.counterFreedBy(0)).toBeCloseTo(395 + 2_000 / 79, 9);
    a.counterSeen(2_600, undefined, 3_500, 0, true);
    expect(a.slidingCounter).toBe(false);
    a.counterSeen(4_600, undefined, 5_500, 0, false);
    expect(a.slidingCounter).toBe(false);
  });
});

describe("AnnouncedWindow: a quota per clock second (`_rampup.ts` counts it in the clock's seconds)", () => {
  it("AnnouncedWindow.infer() with clock: quiet windows keep the second and the quota, where a hold's window shortens and grows", () => {
    const told = heldQuota(12, 1_000, 2_000);
    const clock = new AnnouncedWindow();
    clock.infer(1_500, { ...told, clock: true });
    const held = new AnnouncedWindow();
    held.infer(1_500, told);
    // Ten windows' worth of sends, every one admitted (nothing refused).
    const last = (a: AnnouncedWindow) => sendAll(a, 2_000, 10 * 12).at(-1)!;
    const clockEnd = last(clock);
    const heldEnd = last(held);
    expect({ windowMs: clock.windowMs, limit: clock.limit }).toEqual({
      windowMs: 1_000,
      limit: 12,
    });
    // Told by a hold's whole seconds, the window is tried shorter each quiet
    // window, and one more after eight: ten windows go sooner.
    expect(held.windowMs).toBeLessThan(1_000);
    expect(held.limit).toBe(13);
    expect(heldEnd).toBeLessThan(clockEnd);
    expect(clockEnd).toBeGreaterThanOrEqual(11_000);
  });
});

describe("AnnouncedWindow: a quota told by holds whose refusal read as a cap as well (`capUpTo`)", () => {
  /** 20 per 2000 ms told at 500, its hold ending at 2000. */
  const told = heldQuota(20, 2_000, 2_000);

  it("AnnouncedWindow.infer() with capUpTo: the probe goes once the first window's quota is spent, cap + 1 extras admitted tell no window at once", () => {
    const a = new AnnouncedWindow();
    a.infer(500, { ...told, capUpTo: 3 });
    const sent = sendAll(a, 2_000, 20);
    const spent = sent.at(-1)!;
    // The first extra goes at the quota's pace (0.3 of 2000 / 20 after the
    // last send); without capUpTo it would wait half the told window (3000).
    expect(a.waitMs(spent)).toBeCloseTo(30, 9);
    expect(a.probe).toBe("on");
    expect(a.probeNeed).toBe(4);
    let t = spent;
    for (let i = 0; i < 4; i++) {
      t += Math.max(0, a.waitMs(t));
      a.onSent(t);
      expect(a.probing(t)).toBe(true);
      t += 10;
      a.probeAdmitted(t);
    }
    expect(a.probe).toBe("done");
    expect(a.probed && a.probedEarly).toBe(true);
    // Outgrown at the last extra's answer, not at the window's end (4000).
    expect(a.outgrownAt).toBe(t);
    expect(t).toBeLessThan(3_000);

    const plain = new AnnouncedWindow();
    plain.infer(500, told);
    const plainSpent = sendAll(plain, 2_000, 20).at(-1)!;
    expect(plain.waitMs(plainSpent)).toBeCloseTo(3_000 - plainSpent, 9);
    expect(plain.probe).toBe("armed");
  });

  it("AnnouncedWindow.refusedWithin(): refused before the quota was spent, the probe goes half way through as for any quota told by holds", () => {
    const a = new AnnouncedWindow();
    a.infer(500, { ...told, capUpTo: 3 });
    sendAll(a, 2_000, 5);
    expect(a.probe).toBe("armed");
    a.refusedWithin(2_100, 2_100);
    expect(a.probeAt).toBe(3_000);
    expect(a.probedEarly).toBe(false);
  });

  it("AnnouncedWindow.probeRefused(): the early probe refused (a window), the next window probes half way through", () => {
    const a = new AnnouncedWindow();
    a.infer(500, { ...told, capUpTo: 3 });
    const spent = sendAll(a, 2_000, 20).at(-1)!;
    const extra = spent + a.waitMs(spent);
    expect(a.probe).toBe("on");
    a.onSent(extra);
    expect(a.probing(extra)).toBe(true);
    a.probeRefused(4_000);
    expect(a.probe).toBe("due");
    // The next window (4000-6000) arms the ordinary probe, at 5000.
    a.waitMs(4_000);
    expect(a.probe).toBe("armed");
    expect(a.probeAt).toBe(5_000);
  });
});
