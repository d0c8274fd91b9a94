import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  announcedBudget,
  headerValue,
  parseHttpDate,
  parseRateLimit,
  parseRateLimitPolicy,
  parseRateLimitReset,
  parseRetryAfter,
  parseXRateLimitReset,
  quotaRemaining,
  serverDelayMs,
} from "../lib/http/rate_limit_headers.ts";
import { parseStructuredDictionary, parseStructuredList } from "../lib/http/_structured_fields.ts";

const NOW = Date.UTC(2025, 0, 1, 12, 0, 0); // Wed, 01 Jan 2025 12:00:00 GMT
const GARBAGE = [
  "",
  " ",
  "soon",
  "-1",
  "-0",
  "+5",
  "1e3",
  "1e400",
  "Infinity",
  "NaN",
  "0x10",
  "5s",
  "1 0",
  "1.5.5",
  ".5",
  "5.",
  "١٢", // Arabic-Indic digits
  "５", // fullwidth digit
  "5\u0000",
  "\n5",
  "5\r\n",
  "9".repeat(400),
  "1" + "0".repeat(306), // finite seconds, infinite ms
];

describe("headerValue()", () => {
  it("headerValue() reads a WHATWG Headers case-insensitively", () => {
    const h = new Headers({ "Retry-After": "5" });
    expect(headerValue(h, "retry-after")).toBe("5");
    expect(headerValue(h, "RETRY-AFTER")).toBe("5");
    expect(headerValue(h, "ratelimit")).toBeUndefined();
  });

  it("headerValue() reads a record case-insensitively and joins lists and repeats", () => {
    expect(headerValue({ "Retry-After": "5" }, "retry-after")).toBe("5");
    expect(headerValue({ "retry-after": ["5", "7"] }, "Retry-After")).toBe("5, 7");
    expect(headerValue({ "RateLimit": "a", "ratelimit": "b" }, "RateLimit")).toBe("a, b");
    expect(headerValue({ "retry-after": undefined }, "retry-after")).toBeUndefined();
    expect(headerValue({ "retry-after": [] }, "retry-after")).toBeUndefined();
  });

  it("headerValue() has nothing to say for null or undefined headers", () => {
    expect(headerValue(undefined, "retry-after")).toBeUndefined();
    expect(headerValue(null, "retry-after")).toBeUndefined();
  });
});

describe("parseRetryAfter()", () => {
  it("parseRetryAfter() reads delta-seconds", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120_000);
    expect(parseRetryAfter("0", NOW)).toBe(0);
    expect(parseRetryAfter("007", NOW)).toBe(7_000);
    expect(parseRetryAfter(" 5\t", NOW)).toBe(5_000);
  });

  it("parseRetryAfter() reads fractions exactly and rounds sub-millisecond parts up", () => {
    expect(parseRetryAfter("0.5", NOW)).toBe(500);
    expect(parseRetryAfter("1.1", NOW)).toBe(1_100);
    expect(parseRetryAfter("2.345", NOW)).toBe(2_345);
    expect(parseRetryAfter("0.0001", NOW)).toBe(1);
    expect(parseRetryAfter("1.0000", NOW)).toBe(1_000);
  });

  it("parseRetryAfter() reads an HTTP-date", () => {
    expect(parseRetryAfter("Wed, 01 Jan 2025 12:00:30 GMT", NOW)).toBe(30_000);
    expect(parseRetryAfter("Wednesday, 01-Jan-25 12:01:00 GMT", NOW)).toBe(60_000);
    expect(parseRetryAfter("Wed Jan  1 12:00:10 2025", NOW)).toBe(10_000);
    expect(parseRetryAfter("Wed, 01 Jan 2025 12:00:00 GMT", NOW)).toBe(0);
  });

  it("parseRetryAfter() measures a date from a now that is not a whole second", () => {
    expect(parseRetryAfter("Wed, 01 Jan 2025 12:00:30 GMT", NOW + 250)).toBe(29_750);
    expect(parseRetryAfter("Wed, 01 Jan 2025 12:00:30 GMT", NOW + 0.5)).toBe(30_000);
  });

  it("parseRetryAfter() ignores a date in the past", () => {
    expect(parseRetryAfter("Wed, 01 Jan 2025 11:59:59 GMT", NOW)).toBeUndefined();
    expect(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", NOW)).toBeUndefined();
  });

  it("parseRetryAfter() ignores garbage, signs, exponents and non-finite values", () => {
    for (const v of GARBAGE) expect(parseRetryAfter(v, NOW), JSON.stringify(v)).toBeUndefined();
    expect(parseRetryAfter(null, NOW)).toBeUndefined();
    expect(parseRetryAfter(undefined, NOW)).toBeUndefined();
  });

  it("parseRetryAfter() keeps huge but finite values for the caller to cap", () => {
    expect(parseRetryAfter("99999999999999999999", NOW)).toBe(1e23);
  });

  it("parseRetryAfter() takes the largest valid member of a repeated field", () => {
    expect(parseRetryAfter("5, 7", NOW)).toBe(7_000);
    expect(parseRetryAfter("5, soon", NOW)).toBe(5_000);
    expect(parseRetryAfter("Wed, 01 Jan 2025 12:00:30 GMT, 5", NOW)).toBe(30_000);
    expect(
      parseRetryAfter("Wed, 01 Jan 2025 12:00:30 GMT, Wed, 01 Jan 2025 12:00:40 GMT", NOW),
    ).toBe(40_000);
    expect(parseRetryAfter(",", NOW)).toBeUndefined();
  });

  it("parseRetryAfter() never throws and never returns a negative or non-finite delay", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), fc.integer({ min: 0, max: 2 ** 45 }), (s, now) => {
        const ms = parseRetryAfter(s, now);
        return ms === undefined || (Number.isFinite(ms) && ms >= 0);
      }),
    );
  });

  it("parseRetryAfter() reads every non-negative integer as that many seconds", () => {
    fc.assert(
      fc.property(fc.nat(), (n) => parseRetryAfter(String(n), NOW) === n * 1000),
    );
  });
});

describe("parseHttpDate()", () => {
  const T = 784111777000; // Sun, 06 Nov 1994 08:49:37 GMT

  it("parseHttpDate() reads the three RFC 9110 forms", () => {
    expect(parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT", NOW)).toBe(T);
    expect(parseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", Date.UTC(2000, 0, 1))).toBe(T);
    expect(parseHttpDate("Sun Nov  6 08:49:37 1994", NOW)).toBe(T);
    expect(parseHttpDate("Sun Nov 06 08:49:37 1994", NOW)).toBe(T);
  });

  it("parseHttpDate() agrees with toUTCString() for any date", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253402300799 }), (s) => {
        const ms = s * 1000;
        return parseHttpDate(new Date(ms).toUTCString(), NOW) === ms;
      }),
    );
  });

  it("parseHttpDate() places an RFC 850 two-digit year at most 50 years ahead", () => {
    const in2025 = Date.UTC(2025, 5, 1);
    expect(parseHttpDate("Monday, 01-Jan-75 00:00:00 GMT", in2025)).toBe(Date.UTC(2075, 0, 1));
    expect(parseHttpDate("Friday, 01-Jan-76 00:00:00 GMT", in2025)).toBe(Date.UTC(1976, 0, 1));
    expect(parseHttpDate("Friday, 01-Jan-01 00:00:00 GMT", Date.UTC(2099, 0, 1)))
      .toBe(Date.UTC(2101, 0, 1));
  });

  it("parseHttpDate() reads years below 100 as written, not as 19xx", () => {
    expect(parseHttpDate("Sat, 01 Jan 0050 00:00:00 GMT", NOW))
      .toBe(new Date("0050-01-01T00:00:00Z").getTime());
  });

  it("parseHttpDate() rejects impossible dates and other formats", () => {
    for (
      const v of [
        "Sun, 31 Feb 2025 00:00:00 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 PST",
        "Sun, 06 Nov 1994 08:49:37",
        "Funday, 06-Nov-94 08:49:37 GMT",
        "1994-11-06T08:49:37Z",
        "5",
        "Sun, 06 Nov 1994 08:49:37 GMT trailing",
      ]
    ) {
      expect(parseHttpDate(v, NOW), v).toBeUndefined();
    }
  });
});

describe("parseRateLimitReset()", () => {
  it("parseRateLimitReset() reads delta-seconds", () => {
    expect(parseRateLimitReset("30")).toBe(30_000);
    expect(parseRateLimitReset("0.25")).toBe(250);
    expect(parseRateLimitReset("0")).toBe(0);
  });

  it("parseRateLimitReset() ignores garbage", () => {
    for (const v of GARBAGE) expect(parseRateLimitReset(v), JSON.stringify(v)).toBeUndefined();
    expect(parseRateLimitReset("Wed, 01 Jan 2025 12:00:30 GMT")).toBeUndefined();
    expect(parseRateLimitReset(null)).toBeUndefined();
  });
});

describe("parseXRateLimitReset()", () => {
  const now = 1_700_000_000_000;

  it("parseXRateLimitReset() reads small values as delta-seconds", () => {
    expect(parseXRateLimitReset("60", now)).toBe(60_000);
    expect(parseXRateLimitReset("1000000000", now)).toBe(1e12);
  });

  it("parseXRateLimitReset() reads values above 10^9 as epoch seconds", () => {
    expect(parseXRateLimitReset("1700000060", now)).toBe(60_000);
    expect(parseXRateLimitReset("1700000000.5", now)).toBe(500);
    expect(parseXRateLimitReset("1699999999", now)).toBeUndefined();
  });

  it("parseXRateLimitReset() reads values above 10^12 as epoch milliseconds", () => {
    expect(parseXRateLimitReset("1700000060000", now)).toBe(60_000);
    expect(parseXRateLimitReset("1699999999999", now)).toBeUndefined();
  });

  it("parseXRateLimitReset() ignores garbage", () => {
    for (const v of GARBAGE.slice(0, -1)) {
      expect(parseXRateLimitReset(v, now), JSON.stringify(v)).toBeUndefined();
    }
    // 10^306 is no delta but a (silly, finite) epoch-ms timestamp: the caller caps it.
    expect(parseXRateLimitReset("1" + "0".repeat(306), now)).toBe(1e306 - now);
  });
});

describe("parseStructuredList()", () => {
  const item = (list: ReturnType<typeof parseStructuredList>, i = 0) => {
    const m = list?.[i];
    if (m?.kind !== "item") throw new Error(`member ${i} is not an item`);
    return m;
  };

  it("parseStructuredList() reads every bare item type", () => {
    const list = parseStructuredList(
      '42, -7, 4.5, -0.125, "a \\"q\\" \\\\", tok/en:*, ?1, ?0, :aGk=:, @1700000000, %"f%c3%bcr"',
    );
    expect(list?.map((m) => m.kind === "item" ? m.value : undefined)).toEqual([
      { type: "integer", value: 42 },
      { type: "integer", value: -7 },
      { type: "decimal", value: 4.5 },
      { type: "decimal", value: -0.125 },
      { type: "string", value: 'a "q" \\' },
      { type: "token", value: "tok/en:*" },
      { type: "boolean", value: true },
      { type: "boolean", value: false },
      { type: "bytes", value: "aGk=" },
      { type: "date", value: 1700000000 },
      { type: "displaystring", value: "für" },
    ]);
  });

  it("parseStructuredList() reads parameters, with a bare key meaning true", () => {
    const m = item(parseStructuredList('"default";r=50;t=30;x;y=?0'));
    expect(m.value).toEqual({ type: "string", value: "default" });
    expect([...m.params]).toEqual([
      ["r", { type: "integer", value: 50 }],
      ["t", { type: "integer", value: 30 }],
      ["x", { type: "boolean", value: true }],
      ["y", { type: "boolean", value: false }],
    ]);
  });

  it("parseStructuredList() keeps a repeated parameter's first place and last value", () => {
    const m = item(parseStructuredList("a;r=1;t=2;r=3"));
    expect([...m.params.entries()].map(([k, v]) => [k, v.value])).toEqual([["r", 3], ["t", 2]]);
  });

  it("parseStructuredList() reads inner lists", () => {
    const list = parseStructuredList('( 1 "b" );p=1, ()');
    expect(list?.[0]).toMatchObject({
      kind: "inner-list",
      items: [{ value: { value: 1 } }, { value: { value: "b" } }],
    });
    expect(list?.[0]?.params.get("p")).toEqual({ type: "integer", value: 1 });
    expect(list?.[1]).toMatchObject({ kind: "inner-list", items: [] });
  });

  it("parseStructuredList() reads an empty field as an empty list and tolerates OWS around commas", () => {
    expect(parseStructuredList("")).toEqual([]);
    expect(parseStructuredList("   ")).toEqual([]);
    expect(parseStructuredList("a ,\tb  ")?.length).toBe(2);
  });

  it("parseStructuredList() enforces the number limits", () => {
    expect(item(parseStructuredList("999999999999999")).value.value).toBe(999999999999999);
    expect(parseStructuredList("1000000000000000")).toBeUndefined();
    expect(item(parseStructuredList("123456789012.123")).value.value).toBe(123456789012.123);
    expect(parseStructuredList("1234567890123.1")).toBeUndefined();
    expect(parseStructuredList("1.1234")).toBeUndefined();
  });

  it("parseStructuredList() rejects invalid fields whole", () => {
    for (
      const v of [
        "a,",
        ",a",
        "a,,b",
        "a b",
        '"unterminated',
        '"bad \\n escape"',
        '"tab\tinside"',
        '"ü"',
        "ü",
        "1.",
        "-",
        "--1",
        "+5",
        "1e400",
        "?2",
        ":abc",
        "@1.5",
        '%"%C3%BC"', // upper-case hex
        '%"%ff"', // not UTF-8
        "(1 2",
        "(1,2)",
        "a;R=1",
        "a;r=",
        "a;=1",
        "\ta",
        "r=5",
        "a\u0000",
      ]
    ) {
      expect(parseStructuredList(v), JSON.stringify(v)).toBeUndefined();
    }
  });

  it("parseStructuredList() never throws on any input", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (s) => {
        parseStructuredList(s);
        parseStructuredDictionary(s);
        return true;
      }),
    );
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...'"\\;=,()?:@%-.0123456789abrtq* \t'.split(""))),
        (chars) => {
          parseStructuredList(chars.join(""));
          parseStructuredDictionary(chars.join(""));
          return true;
        },
      ),
    );
  });
});

describe("parseStructuredDictionary()", () => {
  it("parseStructuredDictionary() reads key=value members and bare keys", () => {
    const d = parseStructuredDictionary("limit=100, remaining=0;w=1, reset=30, flag, l=(1 2)");
    expect([...(d?.keys() ?? [])]).toEqual(["limit", "remaining", "reset", "flag", "l"]);
    expect(d?.get("remaining")).toMatchObject({ value: { value: 0 } });
    expect(d?.get("flag")).toMatchObject({ value: { type: "boolean", value: true } });
    expect(d?.get("l")?.kind).toBe("inner-list");
  });

  it("parseStructuredDictionary() rejects invalid fields", () => {
    for (const v of ['"default";r=1', "a=", "A=1", "a=1,", "a=1 b=2"]) {
      expect(parseStructuredDictionary(v), v).toBeUndefined();
    }
  });
});

describe("parseRateLimit()", () => {
  it("parseRateLimit() reads one entry per policy", () => {
    expect(parseRateLimit('"default";r=50;t=30, "daily";r=0;t=3600')).toEqual([
      { policy: "default", remaining: 50, resetMs: 30_000, limit: undefined },
      { policy: "daily", remaining: 0, resetMs: 3_600_000, limit: undefined },
    ]);
    expect(parseRateLimit("burst;r=1")).toEqual([
      { policy: "burst", remaining: 1, resetMs: undefined, limit: undefined },
    ]);
  });

  it("parseRateLimit() reads the older dictionary form", () => {
    expect(parseRateLimit("limit=100, remaining=0, reset=30")).toEqual([
      { policy: undefined, remaining: 0, resetMs: 30_000, limit: 100 },
    ]);
  });

  it("parseRateLimit() reads decimals and leaves out negative or non-numeric parameters", () => {
    expect(parseRateLimit("a;r=0;t=0.5")[0]?.resetMs).toBe(500);
    expect(parseRateLimit("a;r=-1;t=-5")).toEqual([]);
    expect(parseRateLimit('a;r="0";t=5')).toEqual([
      { policy: "a", remaining: undefined, resetMs: 5_000, limit: undefined },
    ]);
  });

  it("parseRateLimit() gives nothing for garbage", () => {
    for (const v of ["", "garbage;", "r=", "a;r=1e400", "\u00ff;r=0;t=5", null, undefined]) {
      expect(parseRateLimit(v), String(v)).toEqual([]);
    }
  });
});

describe("parseRateLimitPolicy()", () => {
  it("parseRateLimitPolicy() reads q and w", () => {
    expect(parseRateLimitPolicy('"burst";q=100;w=60, "daily";q=1000;w=86400')).toEqual([
      { policy: "burst", quota: 100, windowMs: 60_000 },
      { policy: "daily", quota: 1000, windowMs: 86_400_000 },
    ]);
  });

  it("parseRateLimitPolicy() reads draft-polli's integer form", () => {
    expect(parseRateLimitPolicy("100;w=60")).toEqual([
      { policy: undefined, quota: 100, windowMs: 60_000 },
    ]);
  });

  it("parseRateLimitPolicy() leaves out items without a quota and gives nothing for garbage", () => {
    expect(parseRateLimitPolicy('"x";w=60, "y";q=-1')).toEqual([]);
    expect(parseRateLimitPolicy("q=")).toEqual([]);
  });
});

describe("serverDelayMs()", () => {
  it("serverDelayMs() reads Retry-After from either headers shape", () => {
    expect(serverDelayMs(new Headers({ "Retry-After": "10" }), NOW)).toEqual({
      delayMs: 10_000,
      source: "retry-after",
    });
    expect(serverDelayMs({ "retry-after": ["10"] }, NOW)).toEqual({
      delayMs: 10_000,
      source: "retry-after",
    });
  });

  it("serverDelayMs() takes the largest of the delays given", () => {
    const headers = {
      "Retry-After": "10",
      "RateLimit": '"default";r=0;t=30',
      "RateLimit-Reset": "20",
    };
    expect(serverDelayMs(headers, NOW)).toEqual({ delayMs: 30_000, source: "ratelimit" });
    expect(serverDelayMs({ ...headers, "Retry-After": "40" }, NOW)).toEqual({
      delayMs: 40_000,
      source: "retry-after",
    });
  });

  it("serverDelayMs() names Retry-After as the source on a tie", () => {
    expect(serverDelayMs({ "Retry-After": "30", "RateLimit-Reset": "30" }, NOW)?.source)
      .toBe("retry-after");
  });

  it("serverDelayMs() uses a quota reset only when that quota is spent or unknown", () => {
    expect(serverDelayMs({ RateLimit: '"default";r=5;t=30' }, NOW)).toBeUndefined();
    expect(serverDelayMs({ RateLimit: '"default";t=30' }, NOW)?.delayMs).toBe(30_000);
    expect(serverDelayMs({ RateLimit: '"a";r=5;t=30, "b";r=0;t=10' }, NOW)?.delayMs).toBe(10_000);
    expect(serverDelayMs({ "RateLimit-Reset": "30" }, NOW)?.delayMs).toBe(30_000);
    expect(serverDelayMs({ "RateLimit-Reset": "30", "RateLimit-Remaining": "0" }, NOW)?.delayMs)
      .toBe(30_000);
    expect(serverDelayMs({ "RateLimit-Reset": "30", "RateLimit-Remaining": "9" }, NOW))
      .toBeUndefined();
    expect(serverDelayMs({ "RateLimit": "limit=10, remaining=0, reset=7" }, NOW)?.delayMs)
      .toBe(7_000);
  });

  it("serverDelayMs() reads X-RateLimit-Reset as delta or epoch", () => {
    const epoch = String(NOW / 1000 + 45);
    expect(serverDelayMs({ "X-RateLimit-Reset": epoch, "X-RateLimit-Remaining": "0" }, NOW))
      .toEqual({ delayMs: 45_000, source: "ratelimit" });
    expect(serverDelayMs({ "X-RateLimit-Reset": "12" }, NOW)?.delayMs).toBe(12_000);
    expect(serverDelayMs({ "X-RateLimit-Reset": epoch, "X-RateLimit-Remaining": "4999" }, NOW))
      .toBeUndefined();
  });

  it("serverDelayMs() reads the X-Rate-Limit-* spelling (X/Twitter, Okta) as X-RateLimit-*", () => {
    const epoch = String(NOW / 1000 + 45);
    expect(serverDelayMs({ "x-rate-limit-reset": epoch, "x-rate-limit-remaining": "0" }, NOW))
      .toEqual({ delayMs: 45_000, source: "ratelimit" });
    expect(serverDelayMs({ "x-rate-limit-reset": epoch, "x-rate-limit-remaining": "2" }, NOW))
      .toBeUndefined();
  });

  it("serverDelayMs() ignores invalid values and falls back to valid ones", () => {
    expect(serverDelayMs({ "Retry-After": "-5", "RateLimit-Reset": "1e400" }, NOW))
      .toBeUndefined();
    expect(serverDelayMs({ "Retry-After": "soon", "RateLimit": "garbage(" }, NOW)).toBeUndefined();
    expect(
      serverDelayMs(
        { "Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT", "RateLimit-Reset": "3" },
        NOW,
      ),
    )
      .toEqual({ delayMs: 3_000, source: "ratelimit" });
    expect(serverDelayMs({}, NOW)).toBeUndefined();
    expect(serverDelayMs(undefined, NOW)).toBeUndefined();
  });

  it("serverDelayMs() reports a zero delay as a valid answer", () => {
    expect(serverDelayMs({ "Retry-After": "0" }, NOW)).toEqual({
      delayMs: 0,
      source: "retry-after",
    });
  });

  it("serverDelayMs() does not cap", () => {
    expect(serverDelayMs({ "Retry-After": "86400" }, NOW)?.delayMs).toBe(86_400_000);
  });

  it("serverDelayMs() never throws and gives a finite non-negative delay for any header values", () => {
    const names = [
      "Retry-After",
      "RateLimit",
      "RateLimit-Reset",
      "RateLimit-Remaining",
      "X-RateLimit-Reset",
      "X-RateLimit-Remaining",
    ];
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom(...names), fc.string({ unit: "binary" })),
        (headers) => {
          const d = serverDelayMs(headers, NOW);
          return d === undefined || (Number.isFinite(d.delayMs) && d.delayMs >= 0);
        },
      ),
    );
  });
});

describe("quotaRemaining()", () => {
  it("quotaRemaining() reads RateLimit with its named policy", () => {
    expect(
      quotaRemaining({
        RateLimit: '"daily";r=900;t=3600, "burst";r=3;t=5',
        "RateLimit-Policy": '"burst";q=10;w=10, "daily";q=1000;w=86400',
      }),
    ).toEqual({ remaining: 3, limit: 10, resetMs: 5_000, windowMs: 10_000, policy: "burst" });
  });

  it("quotaRemaining() uses the only policy when the names do not match", () => {
    expect(quotaRemaining({ RateLimit: "r=1", "RateLimit-Policy": "q=5" })).toBeUndefined();
    expect(quotaRemaining({ RateLimit: '"x";r=1', "RateLimit-Policy": '"y";q=5;w=1' }))
      .toEqual({ remaining: 1, limit: 5, windowMs: 1_000, policy: "x" });
  });

  it("quotaRemaining() reads the older dictionary form", () => {
    expect(quotaRemaining({ RateLimit: "limit=100, remaining=50, reset=30" }))
      .toEqual({ remaining: 50, limit: 100, resetMs: 30_000 });
  });

  it("quotaRemaining() reads the draft-polli and X- headers", () => {
    expect(
      quotaRemaining(
        new Headers({
          "RateLimit-Remaining": "7",
          "RateLimit-Limit": "10, 10;w=1",
          "RateLimit-Reset": "2",
        }),
      ),
    ).toEqual({ remaining: 7, limit: 10, resetMs: 2_000 });
    expect(
      quotaRemaining({
        "X-RateLimit-Remaining": "4999",
        "X-RateLimit-Limit": "5000",
        "X-RateLimit-Reset": String(NOW / 1000 + 60),
      }, NOW),
    ).toEqual({ remaining: 4999, limit: 5000, resetMs: 60_000 });
    expect(
      quotaRemaining({
        "X-RateLimit-Remaining": "1",
        "X-RateLimit-Reset": String(NOW / 1000 + 60),
      }),
    ).toEqual({ remaining: 1 });
    expect(
      quotaRemaining({
        "X-Rate-Limit-Remaining": "899",
        "X-Rate-Limit-Limit": "900",
        "X-Rate-Limit-Reset": String(NOW / 1000 + 600),
      }, NOW),
    ).toEqual({ remaining: 899, limit: 900, resetMs: 600_000 });
  });

  it("quotaRemaining() takes a policy's quota for the legacy headers", () => {
    expect(quotaRemaining({ "RateLimit-Remaining": "3", "RateLimit-Policy": "10;w=60" }))
      .toEqual({ remaining: 3, limit: 10, windowMs: 60_000 });
  });

  it("quotaRemaining() prefers RateLimit over the legacy headers", () => {
    expect(quotaRemaining({ RateLimit: "a;r=2", "RateLimit-Remaining": "9" })?.remaining).toBe(2);
  });

  it("quotaRemaining() takes the smallest of repeated remaining counts", () => {
    expect(quotaRemaining({ "ratelimit-remaining": ["9", "4"] })?.remaining).toBe(4);
  });

  it("quotaRemaining() gives undefined when no header says, or only garbage does", () => {
    expect(quotaRemaining({})).toBeUndefined();
    expect(quotaRemaining({ "RateLimit-Remaining": "-1", RateLimit: "r=" })).toBeUndefined();
    expect(quotaRemaining({ "X-RateLimit-Remaining": "lots" })).toBeUndefined();
  });
});

describe("announcedBudget()", () => {
  const epoch = (s: number) => String(NOW / 1000 + s);
  // [what, headers, reading]
  const table: [string, Record<string, string | string[]> | Headers, unknown][] = [
    [
      "IETF RateLimit with its policy",
      { RateLimit: '"default";r=7;t=3', "RateLimit-Policy": '"default";q=10;w=5' },
      { limit: 10, windowMs: 5_000, remaining: 7, resetInMs: 3_000, policy: "default" },
    ],
    [
      "IETF fields in a WHATWG Headers",
      new Headers({ RateLimit: '"default";r=0;t=3', "RateLimit-Policy": '"default";q=10;w=5' }),
      { limit: 10, windowMs: 5_000, remaining: 0, resetInMs: 3_000, policy: "default" },
    ],
    [
      "the policy with the fewest units left binds",
      {
        RateLimit: '"day";r=900;t=3600, "burst";r=2;t=4',
        "RateLimit-Policy": '"burst";q=10;w=10, "day";q=1000;w=86400',
      },
      { limit: 10, windowMs: 10_000, remaining: 2, resetInMs: 4_000, policy: "burst" },
    ],
    ["a policy alone", { "RateLimit-Policy": "100;w=60" }, { limit: 100, windowMs: 60_000 }],
    [
      "draft-polli RateLimit-*, window from RateLimit-Limit's w",
      { "RateLimit-Limit": "10, 10;w=2", "RateLimit-Remaining": "3", "RateLimit-Reset": "1" },
      { limit: 10, windowMs: 2_000, remaining: 3, resetInMs: 1_000 },
    ],
    [
      "X-RateLimit-* with an epoch reset (GitHub)",
      { "X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": epoch(30) },
      { limit: 60, remaining: 0, resetInMs: 30_000, resetIsEpoch: true },
    ],
    [
      "an epoch reset against the response's own Date (a local clock 10 s behind)",
      {
        Date: new Date(NOW + 10_000).toUTCString(),
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": epoch(40),
      },
      { remaining: 0, resetInMs: 30_000, resetIsEpoch: true },
    ],
    [
      "X-RateLimit-* with a delta reset",
      { "x-ratelimit-limit": "10", "x-ratelimit-remaining": "4", "x-ratelimit-reset": "2" },
      { limit: 10, remaining: 4, resetInMs: 2_000 },
    ],
    [
      "X-Rate-Limit-* with an epoch reset (X/Twitter, Okta), in a WHATWG Headers",
      new Headers({
        "x-rate-limit-limit": "15",
        "x-rate-limit-remaining": "0",
        "x-rate-limit-reset": epoch(12),
      }),
      { limit: 15, remaining: 0, resetInMs: 12_000, resetIsEpoch: true },
    ],
    [
      "X-Rate-Limit-* in a record, a long-past reset named under its own spelling",
      { "X-Rate-Limit-Remaining": "3", "X-Rate-Limit-Reset": epoch(-3600) },
      { remaining: 3, ignored: [`x-rate-limit-reset: "${epoch(-3600)}"`] },
    ],
    [
      "X-RateLimit-Reset-After (Discord)",
      { "X-RateLimit-Remaining": "1", "X-RateLimit-Reset-After": "1.5" },
      { remaining: 1, resetInMs: 1_500 },
    ],
    [
      "an epoch reset that just passed as 0 (it still says the quota was spent)",
      { "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": epoch(-30) },
      { remaining: 0, resetInMs: 0, resetIsEpoch: true },
    ],
    [
      "an epoch reset long past is ignored",
      { "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": epoch(-3600) },
      { remaining: 0, ignored: [`x-ratelimit-reset: "${epoch(-3600)}"`] },
    ],
    [
      "negative and garbage values are ignored",
      { "RateLimit-Remaining": "-1", "RateLimit-Limit": "lots", "RateLimit-Reset": "5" },
      {
        resetInMs: 5_000,
        ignored: ['ratelimit-remaining: "-1"', 'ratelimit-limit: "lots"'],
      },
    ],
    [
      "a reset or window over a day is ignored",
      { RateLimit: '"d";r=0;t=90000', "RateLimit-Policy": '"d";q=5;w=90000' },
      {
        limit: 5,
        remaining: 0,
        policy: "d",
        ignored: ["window 90000000 ms: not in (0, 1 day]", "reset in 90000000 ms: over a day"],
      },
    ],
    [
      "a quota of 0 is not a limit",
      { "X-RateLimit-Limit": "0", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "5" },
      { remaining: 0, resetInMs: 5_000, ignored: ["limit 0: not a quota"] },
    ],
    ["an unreadable RateLimit field", { RateLimit: "r=" }, { ignored: ['ratelimit: "r="'] }],
  ];
  for (const [what, headers, reading] of table) {
    it(`announcedBudget() reads ${what}`, () => {
      expect(announcedBudget(headers, NOW)).toEqual(reading);
    });
  }

  it("announcedBudget() gives undefined when no rate-limit header is present", () => {
    expect(announcedBudget({}, NOW)).toBeUndefined();
    expect(announcedBudget({ "content-type": "text/html", "retry-after": "5" }, NOW))
      .toBeUndefined();
    expect(announcedBudget(new Headers({ "retry-after": "5" }), NOW)).toBeUndefined();
    expect(announcedBudget(undefined, NOW)).toBeUndefined();
  });

  it("announcedBudget() never throws on garbage, whatever the header", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(
          "ratelimit",
          "ratelimit-policy",
          "ratelimit-limit",
          "ratelimit-remaining",
          "ratelimit-reset",
          "x-ratelimit-limit",
          "x-ratelimit-remaining",
          "x-ratelimit-reset",
          "x-ratelimit-reset-after",
          "x-rate-limit-limit",
          "x-rate-limit-remaining",
          "x-rate-limit-reset",
        ),
        fc.oneof(fc.constantFrom(...GARBAGE), fc.string()),
        (name, value) => {
          const a = announcedBudget({ [name]: value }, NOW);
          for (const v of [a?.limit, a?.windowMs, a?.remaining, a?.resetInMs]) {
            if (v !== undefined) expect(Number.isFinite(v) && v >= 0).toBe(true);
          }
        },
      ),
    );
  });
});
