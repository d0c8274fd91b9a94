/**
 * Checks that test/deno/vitest.ts (what "vitest" means under `deno test`)
 * keeps vitest's hook order, naming and assertion counting.
 *
 * @module
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";

const log: string[] = [];

beforeAll(() => {
  log.push("beforeAll");
  return () => log.push("beforeAll teardown");
});
beforeEach(() => {
  log.push("beforeEach");
});
afterEach(() => {
  log.push("afterEach");
});

describe("vitest shim", () => {
  beforeEach(() => {
    log.push("inner beforeEach");
  });

  it("runs hooks outer to inner before a test", () => {
    expect(log).toEqual(["beforeAll", "beforeEach", "inner beforeEach"]);
  });

  it.each([[1, 2, 3], [2, 3, 5]])(
    "it.each() spreads row %# (%i + %i = %i)",
    (a: number, b: number, sum: number) => {
      expect(a + b).toBe(sum);
    },
  );

  it("expect() fails a wrong assertion with vitest's message", () => {
    expect(() => expect({ a: 1 }).toEqual({ a: 2 })).toThrow(/expected \{ a: 1 \} to deeply equal/);
  });

  it("expect().rejects and asymmetric matchers work", async () => {
    await expect(Promise.reject(new RangeError("bad"))).rejects.toThrow(RangeError);
    expect({ id: 3, name: "x" }).toEqual(expect.objectContaining({ id: expect.any(Number) }));
  });

  it("vi.fn() records calls", () => {
    const f = vi.fn((x: number) => x * 2);
    f(2);
    expect(f).toHaveBeenCalledWith(2);
    expect(f).toHaveReturnedWith(4);
  });

  it("vi reports what it cannot do", () => {
    expect(() => vi.useFakeTimers()).toThrow(/not available under Deno/);
  });
});

describe("after the first suite", () => {
  it("ran afterEach after every earlier test", () => {
    expect(log.filter((entry) => entry === "afterEach").length).toBe(7);
  });
});
