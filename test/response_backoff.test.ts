import { describe, expect, it } from "vitest";
import { DownloadTimeoutError } from "../lib/http/download_errors.ts";
import type { Outcome } from "../lib/outcome.ts";
import {
  defaultResponseBackoff,
  rateLimited403,
  responseHeaders,
  updateScopeBackoff,
} from "../lib/http/response_backoff.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";

const NOW = Date.UTC(2025, 0, 1, 12, 0, 0);

function response(
  status: number,
  headers: Record<string, string> | Headers,
  scopes: string[],
): Outcome<string, unknown> {
  return {
    kind: "response",
    request: "http://a.test/",
    response: { status, headers },
    scopes,
    attempt: 1,
    sentAt: 0,
    latencyMs: 5,
  };
}

describe("defaultResponseBackoff()", () => {
  const throttler = createThrottler({
    scopes: { "a.test": { backoff: { httpCodes: [503] } }, api: { quota: 100 } },
  });

  it("defaultResponseBackoff() triggers each scope by its own codes, with a hold only on a trigger", () => {
    const read = defaultResponseBackoff(
      throttler,
      response(429, { "retry-after": "3" }, ["a.test", "b.test"]),
      NOW,
    );
    expect(read).toEqual({
      "a.test": { trigger: false },
      "b.test": { trigger: true, cause: "status 429", holdMs: 3_000, holdSource: "retry-after" },
    });
  });

  it("defaultResponseBackoff() reads a WHATWG Headers object and a RateLimit hold, explained as a spent quota", () => {
    const headers = new Headers({ ratelimit: '"default";r=0;t=9' });
    expect(defaultResponseBackoff(throttler, response(503, headers, ["a.test"]), NOW)).toEqual({
      "a.test": {
        trigger: true,
        cause: "status 503",
        holdMs: 9_000,
        holdSource: "ratelimit",
        explained: true,
        announced: { policy: "default", remaining: 0, resetInMs: 9_000 },
      },
    });
  });

  it("defaultResponseBackoff() explains no refusal whose headers leave budget or give no reset", () => {
    for (
      const headers of [
        { ratelimit: '"default";r=3;t=9' },
        { "x-ratelimit-remaining": "0" },
        { "retry-after": "5", "ratelimit-remaining": "0", "ratelimit-reset": "abc" },
      ]
    ) {
      const read = defaultResponseBackoff(throttler, response(429, headers, ["b.test"]), NOW);
      expect(read["b.test"]?.trigger).toBe(true);
      expect(read["b.test"]?.explained).toBeUndefined();
    }
  });

  it("defaultResponseBackoff() takes a 403 its headers call a rate limit for a refusal, and a plain 403 for none", () => {
    const epoch = String(NOW / 1000 + 30);
    // [headers, trigger, hold ms, explained]
    const table: [Record<string, string>, boolean, number | undefined, boolean][] = [
      // GitHub's secondary limit: 403 with Retry-After.
      [{ "retry-after": "60" }, true, 60_000, false],
      // GitHub's primary limit: 403 with a spent budget and its epoch reset.
      [{ "x-ratelimit-remaining": "0", "x-ratelimit-reset": epoch }, true, 30_000, true],
      [{ ratelimit: '"default";r=0;t=9' }, true, 9_000, true],
      // Forbidden, not limited: budget left, or no reset, or nothing said.
      [{ "x-ratelimit-remaining": "12", "x-ratelimit-reset": epoch }, false, undefined, false],
      [{ "x-ratelimit-remaining": "0" }, false, undefined, false],
      [{ "retry-after": "soon" }, false, undefined, false],
      [{}, false, undefined, false],
    ];
    for (const [headers, trigger, holdMs, explained] of table) {
      const outcome = response(403, headers, ["b.test"]);
      expect(rateLimited403(outcome, NOW), JSON.stringify(headers)).toBe(trigger);
      const read = defaultResponseBackoff(throttler, outcome, NOW)["b.test"]!;
      expect(read.trigger, JSON.stringify(headers)).toBe(trigger);
      expect(read.holdMs, JSON.stringify(headers)).toBe(holdMs);
      expect(read.explained === true, JSON.stringify(headers)).toBe(explained);
      if (trigger) expect(read.cause).toBe("status 403");
    }
    // Only a 403: a 401 or a 404 with the same headers is what it says.
    for (const status of [401, 404]) {
      const outcome = response(status, { "retry-after": "60" }, ["b.test"]);
      expect(rateLimited403(outcome, NOW)).toBe(false);
      expect(defaultResponseBackoff(throttler, outcome, NOW)["b.test"]?.trigger).toBe(false);
    }
  });

  it("defaultResponseBackoff() announces to domain and IP scopes, and to custom scopes only with a quota", () => {
    const read = defaultResponseBackoff(
      throttler,
      response(200, { "x-ratelimit-remaining": "4", "x-ratelimit-reset": "2" }, [
        "b.test",
        "10.0.0.1",
        "api",
        "custom-key",
      ]),
      NOW,
    );
    const announced = { remaining: 4, resetInMs: 2_000 };
    expect(read["b.test"]?.announced).toEqual(announced);
    expect(read["10.0.0.1"]?.announced).toEqual(announced);
    expect(read["api"]?.announced).toEqual(announced);
    expect(read["custom-key"]?.announced).toBeUndefined();
  });

  it("defaultResponseBackoff() triggers on a download error that matches backoff.exceptions, by its class name", () => {
    const outcome: Outcome<string, unknown> = {
      kind: "error",
      request: "http://b.test/",
      error: new DownloadTimeoutError("timed out", { timeoutMs: 5 }),
      scopes: ["b.test"],
      attempt: 1,
      sentAt: 0,
      latencyMs: 5,
    };
    expect(defaultResponseBackoff(throttler, outcome, NOW)).toEqual({
      "b.test": { trigger: true, cause: "DownloadTimeoutError" },
    });
    const other = { ...outcome, error: new SyntaxError("bad JSON") };
    expect(defaultResponseBackoff(throttler, other, NOW)).toEqual({ "b.test": { trigger: false } });
  });

  it("defaultResponseBackoff() gives the quota left to scopes with a quota, even without a trigger", () => {
    const read = defaultResponseBackoff(
      throttler,
      response(200, { ratelimit: '"default";r=40;t=30' }, ["api", "b.test"]),
      NOW,
    );
    const announced = { policy: "default", remaining: 40, resetInMs: 30_000 };
    expect(read).toEqual({
      api: { trigger: false, remaining: 40, announced },
      "b.test": { trigger: false, announced },
    });
  });

  it("defaultResponseBackoff() ignores malformed hold values: the trigger stays, without a hold", () => {
    for (
      const value of ["", "abc", "-1", "1e3", "Infinity", "\u0000", "Wed, 01 Jan 2025 11:00:00 GMT"]
    ) {
      expect(
        defaultResponseBackoff(throttler, response(429, { "retry-after": value }, ["b.test"]), NOW),
      ).toEqual({
        "b.test": { trigger: true, cause: "status 429" },
      });
    }
  });

  it("responseHeaders() finds headers only on objects that have them", () => {
    expect(responseHeaders(null)).toBeUndefined();
    expect(responseHeaders("x")).toBeUndefined();
    expect(responseHeaders({ status: 200 })).toBeUndefined();
    expect(responseHeaders({ status: 200, headers: { a: "b" } })).toEqual({ a: "b" });
  });
});

describe("updateScopeBackoff()", () => {
  it("updateScopeBackoff() returns a copy with one scope updated, adding it as no trigger when missing", () => {
    const read = { "a.test": { trigger: true, cause: "status 429" } };
    const next = updateScopeBackoff(read, "cost", { consumed: 2.5 });
    expect(next).toEqual({
      "a.test": { trigger: true, cause: "status 429" },
      cost: { trigger: false, consumed: 2.5 },
    });
    expect(read).toEqual({ "a.test": { trigger: true, cause: "status 429" } });
    expect(updateScopeBackoff(next, "a.test", { trigger: false })["a.test"]).toEqual({
      trigger: false,
      cause: "status 429",
    });
  });
});
