import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { z } from "zod";
import {
  DEFAULTS,
  parseSettings,
  resolveScopeConfig,
  settingsSchema,
} from "../lib/settings/settings.ts";
import { formatSettingsError } from "../lib/settings/_format_settings_error.ts";
import { closestName, editDistance } from "../lib/settings/_closest_name.ts";

/** The error parseSettings throws for `input`, or a failure when it throws none. */
function errorOf(input: unknown): Error {
  try {
    parseSettings(input);
  } catch (error) {
    return error as Error;
  }
  throw new Error(`parseSettings accepted ${JSON.stringify(input)}`);
}

describe("parseSettings() defaults", () => {
  it("parseSettings() fills in Scrapy's defaults from its code", () => {
    const s = parseSettings({});
    expect(s.concurrentRequests).toBe(16);
    expect(s.concurrentRequestsPerDomain).toBe(8);
    expect(s.concurrentRequestsPerIp).toBe(0);
    expect(s.scopeConcurrency).toBe(1);
    expect(s.downloadDelayMs).toBe(0);
    expect(s.jitter).toEqual([-0.5, 0.5]);
    expect(s.windowMs).toBe(60_000);
    expect(s.scopes).toEqual({});
  });

  it("parseSettings() defaults backoff to 1 s minimum, 300 s maximum, factor 2, 60 s window", () => {
    const { backoff } = parseSettings();
    expect(backoff.minDelayMs).toBe(1_000);
    expect(backoff.maxDelayMs).toBe(300_000);
    expect(backoff.delayFactor).toBe(2);
    expect(backoff.windowMs).toBe(60_000);
    expect(backoff.jitter).toEqual([-0.1, 0.1]);
    expect(backoff.httpCodes).toEqual([429, 502, 503, 504, 520, 521, 522, 523, 524]);
  });

  it("parseSettings() of nothing equals DEFAULTS", () => {
    expect(parseSettings(undefined)).toEqual(DEFAULTS);
  });

  it("parseSettings() reads jitter in every accepted form", () => {
    const table: [unknown, readonly [number, number]][] = [
      [true, [-0.5, 0.5]],
      [false, [0, 0]],
      [0.2, [-0.2, 0.2]],
      [[-0.1, 0.3], [-0.1, 0.3]],
    ];
    for (const [jitter, expected] of table) {
      expect(parseSettings({ jitter }).jitter).toEqual(expected);
    }
  });

  it("resolveScopeConfig() gives a domain scope the per-domain concurrency and the download delay", () => {
    const s = parseSettings({ downloadDelayMs: 250, scopes: { "a.com": { concurrency: 2 } } });
    expect(resolveScopeConfig(s, "b.com")).toMatchObject({ concurrency: 8, delayMs: 250 });
    expect(resolveScopeConfig(s, "a.com")).toMatchObject({ concurrency: 2, delayMs: 250 });
    expect(resolveScopeConfig(s, "api")).toMatchObject({ concurrency: 1, delayMs: 0 });
  });
});

describe("formatSettingsError()", () => {
  it("formatSettingsError() words an out-of-range value as a RangeError in std's style", () => {
    const error = errorOf({ backoff: { maxDelayMs: -5 } });
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      "Cannot create throttler as 'backoff.maxDelayMs' must be >= 0: current value is -5",
    );
  });

  it("formatSettingsError() words a value of the wrong type as a TypeError", () => {
    const error = errorOf({ scopes: { "example.com": { concurrency: "8" } } });
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      `Cannot create throttler as 'scopes["example.com"].concurrency' must be a number: current value is "8"`,
    );
  });

  it("formatSettingsError() names the full path of a scope's nested setting", () => {
    const error = errorOf({ scopes: { api: { backoff: { httpCodes: [429, 99] } } } });
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      `Cannot create throttler as 'scopes["api"].backoff.httpCodes[1]' must be >= 100: current value is 99`,
    );
  });

  it("formatSettingsError() treats a non-integer or non-finite number as out of range", () => {
    expect(errorOf({ concurrentRequests: 1.5 })).toBeInstanceOf(RangeError);
    expect(errorOf({ concurrentRequests: 1.5 }).message).toBe(
      "Cannot create throttler as 'concurrentRequests' must be an integer: current value is 1.5",
    );
    expect(errorOf({ downloadDelayMs: Infinity }).message).toBe(
      "Cannot create throttler as 'downloadDelayMs' must be a finite number: current value is Infinity",
    );
  });

  it("formatSettingsError() lists what a union accepts when no branch fits", () => {
    const error = errorOf({ jitter: "lots" });
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      `Cannot create throttler as 'jitter' must be a boolean, a number or a [low, high] pair: current value is "lots"`,
    );
  });

  it("formatSettingsError() follows a union into the branch of the right type", () => {
    expect(errorOf({ jitter: 2 }).message).toBe(
      "Cannot create throttler as 'jitter' must be <= 1: current value is 2",
    );
    const reversed = errorOf({ rampup: { backoffTarget: [3, 1] } });
    expect(reversed).toBeInstanceOf(RangeError);
    expect(reversed.message).toBe(
      "Cannot create throttler as 'rampup.backoffTarget' is invalid (expected [low, high] with low <= high): current value is [3,1]",
    );
  });

  it("formatSettingsError() lists an enum's values", () => {
    expect(errorOf({ queue: { order: "fastest" } }).message).toBe(
      `Cannot create throttler as 'queue.order' must be "throttling-aware", "downloader-aware" or "priority": current value is "fastest"`,
    );
  });

  it("formatSettingsError() describes an empty scope name through its record", () => {
    const error = errorOf({ scopes: { "": {} } });
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      `Cannot create throttler as a key of 'scopes' must not be empty: current value is ""`,
    );
  });

  it("formatSettingsError() rejects settings that are not an object", () => {
    expect(errorOf("fast").message).toBe(
      `Cannot create throttler as its settings must be an object: current value is "fast"`,
    );
  });

  it("formatSettingsError() names what was being created", () => {
    expect(() => parseSettings({ windowMs: 0 }, "crawler")).toThrow(
      "Cannot create crawler as 'windowMs' must be > 0: current value is 0",
    );
  });

  it("formatSettingsError() keeps the zod error as cause", () => {
    const error = errorOf({ downloadDelayMs: -1 });
    expect(error.cause).toBeInstanceOf(z.ZodError);
    expect((error.cause as z.ZodError).issues[0]?.path).toEqual(["downloadDelayMs"]);
  });

  it("formatSettingsError() can be called on a zod error directly", () => {
    const input = { scopeLimit: -1 };
    const result = settingsSchema.safeParse(input);
    expect(result.success).toBe(false);
    if (result.success) return;
    const error = formatSettingsError(result.error, input, "pool", { schema: settingsSchema });
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      "Cannot create pool as 'scopeLimit' must be >= 0: current value is -1",
    );
  });
});

describe("parseSettings() durations and bounds", () => {
  const tooLong = "(the longest a timer can wait, about 24.8 days)";
  const cases: readonly (readonly [unknown, string])[] = [
    [
      { downloadTimeoutMs: 3e9 },
      `'downloadTimeoutMs' must be <= 2147483647 ${tooLong}: current value is 3000000000`,
    ],
    [
      { downloadDelayMs: 2 ** 31 },
      `'downloadDelayMs' must be <= 2147483647 ${tooLong}: current value is 2147483648`,
    ],
    [
      { windowMs: 1e10 },
      `'windowMs' must be <= 2147483647 ${tooLong}: current value is 10000000000`,
    ],
    [
      { backoff: { maxDelayMs: 1e10 } },
      `'backoff.maxDelayMs' must be <= 2147483647 ${tooLong}: current value is 10000000000`,
    ],
    [
      { autothrottle: { startDelayMs: 1e10 } },
      `'autothrottle.startDelayMs' must be <= 2147483647 ${tooLong}: current value is 10000000000`,
    ],
    [
      { robotsTxtMaxDelayMs: 1e10 },
      `'robotsTxtMaxDelayMs' must be <= 2147483647 ${tooLong}: current value is 10000000000`,
    ],
    [
      { scopes: { "a.com": { delayMs: 1e10 } } },
      `'scopes["a.com"].delayMs' must be <= 2147483647 ${tooLong}: current value is 10000000000`,
    ],
    [
      { rampup: { minDelayMs: 1e10 } },
      `'rampup.minDelayMs' must be <= 2147483647 ${tooLong}: current value is 10000000000`,
    ],
    [
      { backoff: { minDelayMs: 400_000 } },
      "'backoff.minDelayMs' must be <= 'backoff.maxDelayMs' (300000, its default): current value is 400000",
    ],
    [
      { backoff: { minDelayMs: 5_000, maxDelayMs: 2_000 } },
      "'backoff.minDelayMs' must be <= 'backoff.maxDelayMs' (2000): current value is 5000",
    ],
    [
      { backoff: { maxDelayMs: 500 } },
      "'backoff.maxDelayMs' must be >= 'backoff.minDelayMs' (1000, its default): current value is 500",
    ],
    [
      { backoff: { maxDelayMs: 10_000 }, scopes: { "a.com": { backoff: { minDelayMs: 20_000 } } } },
      `'scopes["a.com"].backoff.minDelayMs' must be <= 'backoff.maxDelayMs' (10000): current value is 20000`,
    ],
    [
      { backoff: { minDelayMs: 5_000 }, scopes: { "a.com": { backoff: { maxDelayMs: 2_000 } } } },
      `'scopes["a.com"].backoff.maxDelayMs' must be >= 'backoff.minDelayMs' (5000): current value is 2000`,
    ],
  ];
  for (const [input, message] of cases) {
    it(`parseSettings() refuses ${JSON.stringify(input)}`, () => {
      const error = errorOf(input);
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toBe(`Cannot create throttler as ${message}`);
      expect(error.cause).toBeInstanceOf(z.ZodError);
    });
  }

  it("parseSettings() takes a scope's own backoff bounds over the global ones", () => {
    const s = parseSettings({
      backoff: { maxDelayMs: 10_000 },
      scopes: { "a.com": { backoff: { minDelayMs: 20_000, maxDelayMs: 30_000 } } },
    });
    expect(resolveScopeConfig(s, "a.com").backoff).toMatchObject({
      minDelayMs: 20_000,
      maxDelayMs: 30_000,
    });
  });
});

describe("formatSettingsError() unknown settings", () => {
  it("formatSettingsError() suggests the closest name at the top level", () => {
    const error = errorOf({ downloadDelay: 5 });
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe("Unknown setting 'downloadDelay' (did you mean 'downloadDelayMs'?)");
  });

  it("formatSettingsError() suggests the closest name inside a scope", () => {
    expect(errorOf({ scopes: { "example.com": { concurency: 2 } } }).message).toBe(
      `Unknown setting 'scopes["example.com"].concurency' (did you mean 'concurrency'?)`,
    );
  });

  it("formatSettingsError() suggests the closest name inside a scope's backoff", () => {
    expect(errorOf({ scopes: { "example.com": { backoff: { maxDelay: 10 } } } }).message).toBe(
      `Unknown setting 'scopes["example.com"].backoff.maxDelay' (did you mean 'maxDelayMs'?)`,
    );
  });

  it("formatSettingsError() suggests across naming conventions", () => {
    expect(errorOf({ scopes: { a: { min_concurrency: 2 } } }).message).toBe(
      `Unknown setting 'scopes["a"].min_concurrency' (did you mean 'minConcurrency'?)`,
    );
  });

  it("formatSettingsError() lists the valid names of a small object when nothing is close", () => {
    expect(errorOf({ rampup: { speed: 2 } }).message).toBe(
      "Unknown setting 'rampup.speed' (valid here: backoffTarget, delayFactor, minDelayMs)",
    );
  });

  it("formatSettingsError() reports an unknown name before other problems", () => {
    const error = errorOf({ downloadDelayMs: -1, concurentRequests: 2 });
    expect(error.message).toBe(
      "Unknown setting 'concurentRequests' (did you mean 'concurrentRequests'?)",
    );
  });
});

describe("closestName()", () => {
  it("closestName() counts a swapped pair of letters as one edit", () => {
    expect(editDistance("concurrnecy", "concurrency")).toBe(1);
    expect(editDistance("", "abc")).toBe(3);
  });

  it("closestName() ignores case and separators", () => {
    expect(closestName("DOWNLOAD_DELAY", ["downloadDelayMs", "download"])).toBe("downloadDelayMs");
  });

  it("closestName() suggests nothing for a name that is not a plausible typo", () => {
    expect(closestName("xyzzy", ["concurrency", "delayMs"])).toBeUndefined();
  });

  it("closestName() finds any name within one edit of a valid one", () => {
    const names = Object.keys(settingsSchema.shape);
    fc.assert(
      fc.property(fc.constantFrom(...names), fc.nat(), (name, at) => {
        const i = at % name.length;
        const typo = name.slice(0, i) + name.slice(i + 1);
        expect(closestName(typo, names)).toBeDefined();
        expect(editDistance(typo, closestName(typo, names)!)).toBeLessThanOrEqual(1);
      }),
    );
  });
});
