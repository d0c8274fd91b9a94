import { describe, expect, it } from "vitest";
import { SendLog } from "../lib/managers/_send_log.ts";

describe("SendLog", () => {
  it("take finds a send's in-flight count once: a refusal the highest of an instant, an admit the lowest", () => {
    const log = new SendLog(8);
    log.push(0, 1);
    log.push(10, 2);
    log.push(10, 3);
    expect(log.take(10, true)).toBe(3);
    expect(log.take(10, true)).toBe(2);
    expect(log.take(10, true)).toBeUndefined();
    expect(log.take(0, false)).toBe(1);
  });

  it("discount: the sends after a refused one, still unanswered, had one fewer in flight at the site", () => {
    const log = new SendLog(8);
    for (const [at, f] of [[0, 1], [5, 2], [5, 3], [7, 3], [8, 4], [9, 1]] as const) {
      log.push(at, f);
    }
    expect(log.take(7, false)).toBe(3); // answered: not discounted
    log.discount(5);
    // The sends at 5 are the refused one's instant; 8 goes down; 9 stays at its floor of 1.
    expect([5, 5, 8, 9, 0].map((at) => log.take(at, true))).toEqual([3, 2, 3, 1, 1]);
  });

  it("admittedWithin: the most in flight of an admitted send in a span, copied with the log", () => {
    const log = new SendLog(8);
    // [sent at, in flight, admitted]
    const sends: [number, number, boolean][] = [[0, 5, true], [10, 6, false], [10.06, 7, true], [
      20,
      8,
      true,
    ]];
    for (const [at, f] of sends) log.push(at, f);
    for (const [at, f, ok] of sends) if (ok) log.admitted(at, f);
    // [from, to, most in flight of an admitted send then]
    const table: [number, number, number][] = [[10, 13, 7], [10, 10, 0], [0, 9, 5], [21, 30, 0]];
    const copy = new SendLog(8);
    copy.copyFrom(log);
    for (const [from, to, most] of table) {
      expect({ from, to, most: log.admittedWithin(from, to) }).toEqual({ from, to, most });
      expect({ from, to, copied: copy.admittedWithin(from, to) }).toEqual({
        from,
        to,
        copied: most,
      });
    }
  });

  it("pendingAt and pendingBefore: unanswered sends at an instant and before it", () => {
    const log = new SendLog(8);
    for (const [at, f] of [[0, 1], [3, 2], [10, 3], [10, 4], [10, 5], [12, 6]] as const) {
      log.push(at, f);
    }
    log.take(10, true); // the refused one: 5
    log.take(3, false); // answered
    // [instant, pending at it, pending before it]
    const table: [number, number, number][] = [[10, 2, 1], [0, 1, 0], [3, 0, 1], [12, 1, 3]];
    for (const [at, atIt, before] of table) {
      expect({ at, atIt: log.pendingAt(at), before: log.pendingBefore(at) }).toEqual({
        at,
        atIt,
        before,
      });
    }
  });

  it("before and after: the nearest send on either side of an instant", () => {
    const log = new SendLog(8);
    for (const at of [0, 10, 10, 13.8, 20]) log.push(at, 1);
    // [instant, send before it, send after it]
    const table: [number, number | undefined, number | undefined][] = [
      [10, 0, 13.8],
      [13.8, 10, 20],
      [0, undefined, 10],
      [20, 13.8, undefined],
    ];
    for (const [at, before, after] of table) {
      expect({ at, before: log.before(at), after: log.after(at) }).toEqual({ at, before, after });
    }
  });

  it("pendingWithin: unanswered sends after an instant, up to a time", () => {
    const log = new SendLog(8);
    for (const [at, f] of [[0, 1], [10, 2], [10, 3], [11, 3], [12.5, 4], [14, 5]] as const) {
      log.push(at, f);
    }
    log.take(12.5, false); // answered
    // [from, to, pending in (from, to]]: the sends at `from` itself are not after it.
    const table: [number, number, number][] = [[10, 13, 1], [10, 14, 2], [0, 10, 2], [14, 20, 0]];
    for (const [from, to, n] of table) {
      expect({ from, to, n: log.pendingWithin(from, to) }).toEqual({ from, to, n });
    }
  });
});
