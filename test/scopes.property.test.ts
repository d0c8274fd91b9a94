import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { of } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { crawl } from "../lib/crawl.ts";
import type { Outcome } from "../lib/outcome.ts";
import type { RequestObject } from "../lib/request.ts";
import { RequestQueue } from "../lib/queue/request_queue.ts";
import { defaultResponseBackoff, updateScopeBackoff } from "../lib/http/response_backoff.ts";
import { addScope, normalizeScopes } from "../lib/scopes/scopes.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { oddKey } from "./_helpers/odd_keys.ts";

/** Scope names are data: any non-empty string. */
const scopeName = oddKey;

describe("scope names drawn from prototype names and odd Unicode", () => {
  it("addScope() adds a scope of any name as an own entry with its amount, and keeps the others", () => {
    fc.assert(
      fc.property(scopeName, scopeName, fc.nat(9), (first, added, amount) => {
        fc.pre(first !== added);
        // Sorted: an object lists integer-like keys ("0") first, whatever the insertion order.
        const sorted = (r: unknown) =>
          Object.entries(r as object).sort(([a], [b]) => (a < b ? -1 : 1));
        const want = (pairs: [string, number][]) => pairs.sort(([a], [b]) => (a < b ? -1 : 1));
        const record = addScope(Object.fromEntries([[first, 2]]), added, amount);
        expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
        expect(sorted(record)).toEqual(want([[first, 2], [added, amount]]));
        // Without an amount, a scope already there keeps its own; a new one gets 0.
        expect(sorted(addScope(record, added))).toEqual(want([[first, 2], [added, amount]]));
        // (A base of `first`, not a fixed name: `added` may be any name, "a" included.)
        expect(sorted(addScope(Object.fromEntries([[first, 1]]), added)))
          .toEqual(want([[first, 1], [added, 0]]));
        expect([...normalizeScopes(record).names].sort()).toEqual([first, added].sort());
      }),
    );
  });

  it("updateScopeBackoff() and defaultResponseBackoff() keep an entry for a scope of any name", () => {
    const throttler = createThrottler({});
    fc.assert(
      fc.property(scopeName, (scope) => {
        const updated = updateScopeBackoff({}, scope, { consumed: 2 });
        expect(Object.entries(updated)).toEqual([[scope, { trigger: false, consumed: 2 }]]);
        const outcome: Outcome<string, unknown> = {
          kind: "response",
          request: "http://a.test/",
          response: { status: 429, headers: {} },
          scopes: [scope],
          attempt: 1,
          sentAt: 0,
          latencyMs: 1,
        };
        const read = defaultResponseBackoff(throttler, outcome, 0);
        expect(Object.keys(read)).toEqual([scope]);
        expect(Object.getPrototypeOf(read)).toBe(Object.prototype);
        expect(Object.getOwnPropertyDescriptor(read, scope)?.value).toMatchObject({
          trigger: true,
          cause: "status 429",
        });
      }),
    );
  });

  it("crawl() backs off the scope a 429 names, whatever its name, and only that scope", () => {
    fc.assert(
      fc.property(scopeName, (scope) => {
        const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
        const throttler = createThrottler<RequestObject>({ jitter: [0, 0] }, { scheduler });
        const queue = new RequestQueue<RequestObject>({
          view: throttler,
          scheduler,
          start: [
            { url: "http://a.test/1", meta: { throttlingScopes: [scope] } },
            { url: "http://a.test/2", meta: { throttlingScopes: { [scope]: 1 } } },
          ],
        });
        let sent = 0;
        const statuses: number[] = [];
        scheduler.run(() => {
          crawl<RequestObject, { status: number }>({
            throttler,
            queue,
            download: () => of({ status: sent++ === 0 ? 429 : 200 }),
            backoff: { retry: { times: 2 } },
          }).subscribe((o) => {
            expect(o.scopes).toEqual([scope]);
            if (o.kind === "response") statuses.push(o.response.status);
          });
        });
        expect(statuses).toEqual([200, 200]);
        expect(throttler.state(scope)?.delayMs).toBeGreaterThan(0);
        expect(throttler.states().map((s) => s.scope)).toEqual([scope]);
      }),
      { numRuns: 40 },
    );
  });
});
