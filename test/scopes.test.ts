import { describe, expect, it } from "vitest";
import { addScope, InvalidScopesError, normalizeScopes, scopeCache } from "../lib/scopes/scopes.ts";
import type { ScopesInput } from "../lib/request.ts";

describe("normalizeScopes()", () => {
  it("normalizeScopes() accepts a name, an iterable of names and a record of amounts", () => {
    const table: [ScopesInput, { names: string[]; amounts: (number | undefined)[] | undefined }][] =
      [
        ["api", { names: ["api"], amounts: undefined }],
        [["a", "b", "a"], { names: ["a", "b"], amounts: undefined }],
        [new Set(["x", "y"]), { names: ["x", "y"], amounts: undefined }],
        [{ api: 2, "example.com": 0 }, { names: ["api", "example.com"], amounts: [2, 0] }],
        [[], { names: [], amounts: undefined }],
      ];
    for (const [input, expected] of table) expect(normalizeScopes(input)).toEqual(expected);
  });

  it("normalizeScopes() rejects empty names, bad amounts and wrong shapes with InvalidScopesError", () => {
    const bad: unknown[] = [
      "",
      ["a", ""],
      ["a", 3],
      { "": 1 },
      { a: -1 },
      { a: Number.NaN },
      { a: Infinity },
      { a: "1" },
      42,
      null,
      true,
    ];
    for (const input of bad) {
      let caught: unknown;
      try {
        normalizeScopes(input as ScopesInput);
      } catch (error) {
        caught = error;
      }
      expect(caught, JSON.stringify(input)).toBeInstanceOf(InvalidScopesError);
      expect(caught).toBeInstanceOf(TypeError);
      expect((caught as InvalidScopesError).message).toMatch(/^Invalid throttling scopes/);
      expect((caught as InvalidScopesError).input).toBe(input);
    }
  });
});

describe("addScope()", () => {
  it("addScope() adds a name to names, and to a record with its amount", () => {
    const table: [ScopesInput | undefined, string, number | undefined, ScopesInput][] = [
      [undefined, "a", undefined, ["a"]],
      ["a", "b", undefined, ["a", "b"]],
      [["a", "b"], "b", undefined, ["a", "b"]],
      [["a"], "cost", 3, { a: 0, cost: 3 }],
      [{ a: 2 }, "b", undefined, { a: 2, b: 0 }],
      [{ a: 2 }, "a", undefined, { a: 2 }],
      [{ a: 2 }, "a", 5, { a: 5 }],
    ];
    for (const [scopes, scope, amount, expected] of table) {
      expect({ scopes, scope, amount, out: addScope(scopes, scope, amount) })
        .toEqual({ scopes, scope, amount, out: expected });
    }
  });
});

describe("scopeCache()", () => {
  it("scopeCache() calls the scope function once per request object, every time for strings", () => {
    const calls: unknown[] = [];
    const fn = scopeCache((r: unknown) => {
      calls.push(r);
      return Promise.resolve(["x"]);
    });
    const a = { url: "http://a.test/" };
    const b = { url: "http://a.test/" };
    const first = fn(a);
    expect(fn(a)).toBe(first);
    expect(fn(b)).not.toBe(first);
    fn("http://a.test/");
    fn("http://a.test/");
    expect(calls).toEqual([a, b, "http://a.test/", "http://a.test/"]);
  });
});
