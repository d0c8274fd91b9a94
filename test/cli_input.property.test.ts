import { afterEach, describe, expect, it } from "vitest";
import fc from "fast-check";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseInputLine } from "../lib/cli/input.ts";
import type { RequestObject } from "../lib/request.ts";
import { RequestQueue } from "../lib/queue/request_queue.ts";
import { oddKey } from "./_helpers/odd_keys.ts";

const META_NAMES = new Set([
  "throttling_scopes",
  "throttlingScopes",
  "throttling_delay",
  "throttlingDelayMs",
  "throttling_dont_track",
  "throttlingDontTrack",
  "dont_filter",
  "dontFilter",
]);

/** A meta key that is not one of the names politely reads. */
const otherKey = oddKey.filter((k) => !META_NAMES.has(k));

/** Any JSON value, `{"dontFilter": true}` often (what a prototype would lend). */
const jsonValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant({ dontFilter: true, throttlingScopes: "stolen" }),
  fc.constant("abc"),
  fc.jsonValue({ maxDepth: 2 }),
);

/** Distinct keys with values, as `Object.fromEntries` (and `JSON.parse`) would hold them. */
const metaEntries = fc.uniqueArray(fc.tuple(otherKey, jsonValue), {
  minLength: 1,
  maxLength: 5,
  selector: ([k]) => k,
});

/** Entries the way the same object holds them (integer-like keys first), compared as JSON. */
function entriesOf(object: object): string {
  return JSON.stringify(Object.entries(object));
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("parseInputLine() with prototype-named and odd Unicode meta keys", () => {
  it("parseInputLine() keeps every other meta key as data: never refused, dropped, renamed or turned into the object's prototype", () => {
    fc.assert(
      fc.property(metaEntries, (entries) => {
        const meta = Object.fromEntries(entries);
        const text = JSON.stringify({ url: "http://a.example/", meta });
        const line = parseInputLine(text, 7);
        expect(line.kind).toBe("request");
        const got = (line as { request: RequestObject }).request.meta!;
        expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
        expect(entriesOf(got)).toBe(entriesOf(JSON.parse(text).meta));
        for (const [key, value] of entries) {
          expect(Object.hasOwn(got, key)).toBe(true);
          expect(JSON.stringify(got[key])).toBe(JSON.stringify(value));
        }
        // Nothing read through a prototype: politely's own names stay unset.
        expect(got.dontFilter).toBeUndefined();
        expect(got.throttlingScopes).toBeUndefined();
      }),
    );
  });

  it("parseInputLine() still checks politely's own meta names beside odd keys", () => {
    fc.assert(
      fc.property(metaEntries, fc.boolean(), (entries, dontFilter) => {
        const meta = {
          ...Object.fromEntries(entries),
          dont_filter: dontFilter,
          throttling_delay: 2,
        };
        const line = parseInputLine(JSON.stringify({ url: "http://a.example/", meta }), 1);
        expect(line.kind).toBe("request");
        const got = (line as { request: RequestObject }).request.meta!;
        expect(got.dontFilter).toBe(dontFilter);
        expect(got.throttlingDelayMs).toBe(2000);
        const bad = parseInputLine(
          JSON.stringify({ url: "http://a.example/", meta: { ...meta, dont_filter: "yes" } }),
          3,
        );
        expect(bad.kind === "error" && bad.error.message).toBe(
          `line 3: 'meta.dont_filter' must be true or false: current value is "yes"`,
        );
      }),
    );
  });

  it('parseInputLine() reads meta {"constructor": "abc"} as data, and {"__proto__": true} as a key named "__proto__"', () => {
    const a = parseInputLine('{"url": "http://a.example/", "meta": {"constructor": "abc"}}', 1);
    expect(a.kind === "request" && Object.entries(a.request.meta!)).toEqual([[
      "constructor",
      "abc",
    ]]);
    const b = parseInputLine('{"url": "http://a.example/", "meta": {"__proto__": true}}', 2);
    expect(b.kind === "request" && Object.entries(b.request.meta!)).toEqual([["__proto__", true]]);
  });

  it("RequestQueue keeps odd meta keys through the job directory, and a prototype-named key lends no dontFilter", () => {
    fc.assert(
      fc.property(metaEntries, (entries) => {
        const dir = mkdtempSync(join(tmpdir(), "politely-meta-"));
        dirs.push(dir);
        const line = parseInputLine(
          JSON.stringify({ url: "http://a.example/", meta: Object.fromEntries(entries) }),
          1,
        );
        const request = (line as { request: RequestObject }).request;
        const q1 = new RequestQueue<RequestObject>({ jobDir: dir });
        expect(q1.enqueue(request)).toBe(true);
        // The same URL again is a duplicate: no key made it `dontFilter`.
        expect(q1.enqueue({ ...request })).toBe(false);
        q1.close();
        const q2 = new RequestQueue<RequestObject>({ jobDir: dir });
        const out: RequestObject[] = [];
        q2.requests$.subscribe((r) => out.push(r)).unsubscribe();
        q2.close();
        expect(out).toHaveLength(1);
        expect(entriesOf(out[0]!.meta!)).toBe(entriesOf(request.meta!));
        expect(Object.getPrototypeOf(out[0]!.meta)).toBe(Object.prototype);
      }),
      { numRuns: 40 },
    );
  });
});
