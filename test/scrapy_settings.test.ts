import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  fromScrapySettings,
  IGNORED_SCRAPY_SETTINGS,
  loadSettings,
  parseSettingValue,
} from "../lib/settings/scrapy_settings.ts";
import { parseSettings } from "../lib/settings/settings.ts";

/** The error `fn` throws, or a failure when it throws none. */
function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected an error");
}

describe("fromScrapySettings() conversions", () => {
  const table: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ["CONCURRENT_REQUESTS", { CONCURRENT_REQUESTS: 32 }, { concurrentRequests: 32 }],
    [
      "CONCURRENT_REQUESTS_PER_DOMAIN",
      { CONCURRENT_REQUESTS_PER_DOMAIN: 4 },
      { concurrentRequestsPerDomain: 4 },
    ],
    ["CONCURRENT_REQUESTS_PER_IP", { CONCURRENT_REQUESTS_PER_IP: 2 }, {
      concurrentRequestsPerIp: 2,
    }],
    ["THROTTLING_SCOPE_CONCURRENCY", { THROTTLING_SCOPE_CONCURRENCY: 3 }, { scopeConcurrency: 3 }],
    ["DOWNLOAD_DELAY seconds to ms", { DOWNLOAD_DELAY: 1.1 }, { downloadDelayMs: 1100 }],
    ["RANDOMIZE_DOWNLOAD_DELAY", { RANDOMIZE_DOWNLOAD_DELAY: [-0.1, 0.3] }, {
      jitter: [-0.1, 0.3],
    }],
    ["THROTTLING_WINDOW", { THROTTLING_WINDOW: 30 }, { windowMs: 30_000 }],
    ["THROTTLING_SCOPE_LIMIT", { THROTTLING_SCOPE_LIMIT: 10 }, { scopeLimit: 10 }],
    ["THROTTLING_SCOPE_MAX_IDLE", { THROTTLING_SCOPE_MAX_IDLE: 0.5 }, { scopeMaxIdleMs: 500 }],
    ["THROTTLING_ROBOTSTXT_OBEY", { THROTTLING_ROBOTSTXT_OBEY: false }, {
      throttlingRobotsTxtObey: false,
    }],
    ["THROTTLING_ROBOTSTXT_MAX_DELAY", { THROTTLING_ROBOTSTXT_MAX_DELAY: 10 }, {
      robotsTxtMaxDelayMs: 10_000,
    }],
    ["THROTTLING_DEBUG", { THROTTLING_DEBUG: true }, { debug: true }],
    ["DELAYED_REQUESTS_WARN_THRESHOLD", { DELAYED_REQUESTS_WARN_THRESHOLD: 50 }, {
      delayedRequestsWarnThreshold: 50,
    }],
    ["BACKOFF_*", {
      BACKOFF_HTTP_CODES: [429],
      BACKOFF_DELAY_FACTOR: 1.5,
      BACKOFF_MAX_DELAY: 120,
      BACKOFF_MIN_DELAY: 0.25,
      BACKOFF_JITTER: 0,
      BACKOFF_WINDOW: 10,
    }, {
      backoff: {
        httpCodes: [429],
        delayFactor: 1.5,
        maxDelayMs: 120_000,
        minDelayMs: 250,
        jitter: 0,
        windowMs: 10_000,
      },
    }],
    ["BACKOFF_EXCEPTIONS import paths to error names", {
      BACKOFF_EXCEPTIONS: ["scrapy.exceptions.DownloadTimeoutError", "builtins.IOError", "Custom"],
    }, { backoff: { exceptions: ["DownloadTimeoutError", "IOError", "Custom"] } }],
    ["RAMPUP_BACKOFF_TARGET", { RAMPUP_BACKOFF_TARGET: [1, 3] }, {
      rampup: { backoffTarget: [1, 3] },
    }],
    ["ROBOTSTXT_OBEY", { ROBOTSTXT_OBEY: true }, { robotsTxtObey: true }],
    ["USER_AGENT", { USER_AGENT: "books (+https://example.com)" }, {
      userAgent: "books (+https://example.com)",
    }],
    ["DOWNLOAD_TIMEOUT", { DOWNLOAD_TIMEOUT: 30 }, { downloadTimeoutMs: 30_000 }],
    ["RETRY_*", { RETRY_ENABLED: false, RETRY_TIMES: 5, RETRY_HTTP_CODES: [503] }, {
      retry: { enabled: false, times: 5, httpCodes: [503] },
    }],
    ["JOBDIR and DEPTH_PRIORITY", { JOBDIR: "crawls/1", DEPTH_PRIORITY: 1 }, {
      queue: { jobDir: "crawls/1", depthPriority: 1 },
    }],
    ["Scrapy's BFO recipe", {
      DEPTH_PRIORITY: 1,
      SCHEDULER_DISK_QUEUE: "scrapy.squeues.PickleFifoDiskQueue",
      SCHEDULER_MEMORY_QUEUE: "scrapy.squeues.FifoMemoryQueue",
    }, { queue: { depthPriority: 1, fifo: true } }],
    ["LIFO memory queue", { SCHEDULER_MEMORY_QUEUE: "scrapy.squeues.LifoMemoryQueue" }, {
      queue: { fifo: false },
    }],
    ["ThrottlingAwarePriorityQueue", {
      SCHEDULER_PRIORITY_QUEUE: "scrapy.pqueues.ThrottlingAwarePriorityQueue",
    }, { queue: { order: "throttling-aware" } }],
    ["DownloaderAwarePriorityQueue", {
      SCHEDULER_PRIORITY_QUEUE: "scrapy.pqueues.DownloaderAwarePriorityQueue",
    }, { queue: { order: "downloader-aware" } }],
    ["ScrapyPriorityQueue", { SCHEDULER_PRIORITY_QUEUE: "scrapy.pqueues.ScrapyPriorityQueue" }, {
      queue: { order: "priority" },
    }],
    ["BaseDupeFilter turns dedupe off", { DUPEFILTER_CLASS: "scrapy.dupefilters.BaseDupeFilter" }, {
      queue: { dedupe: false },
    }],
    ["RFPDupeFilter keeps dedupe", { DUPEFILTER_CLASS: "scrapy.dupefilters.RFPDupeFilter" }, {
      queue: { dedupe: true },
    }],
    ["None means not set", { JOBDIR: null, USER_AGENT: null }, {}],
    ["THROTTLING_SCOPES snake_case to camelCase, seconds to ms", {
      THROTTLING_SCOPES: {
        "quotes.toscrape.com": { concurrency: 16, delay: 0.0 },
        "api.toscrape.com": {
          min_concurrency: 2,
          delay: 0.08,
          jitter: [0.01, 0.33],
          quota: 500.0,
          window: 30,
          ignore_robots_txt: true,
          rampup: { backoff_target: [1, 3], delay_factor: 0.5, min_delay: 0.05 },
        },
        "example.com": {
          rampup: true,
          backoff: {
            http_codes: [429, 503],
            exceptions: ["builtins.IOError"],
            delay_factor: 1.2,
            max_delay: 180.0,
            min_delay: 5.0,
            jitter: [0.01, 0.33],
            window: 90,
          },
        },
      },
    }, {
      scopes: {
        "quotes.toscrape.com": { concurrency: 16, delayMs: 0 },
        "api.toscrape.com": {
          minConcurrency: 2,
          delayMs: 80,
          jitter: [0.01, 0.33],
          quota: 500,
          windowMs: 30_000,
          ignoreRobotsTxt: true,
          rampup: { backoffTarget: [1, 3], delayFactor: 0.5, minDelayMs: 50 },
        },
        "example.com": {
          rampup: true,
          backoff: {
            httpCodes: [429, 503],
            exceptions: ["IOError"],
            delayFactor: 1.2,
            maxDelayMs: 180_000,
            minDelayMs: 5_000,
            jitter: [0.01, 0.33],
            windowMs: 90_000,
          },
        },
      },
    }],
  ];

  for (const [what, scrapy, ours] of table) {
    it(`fromScrapySettings() converts ${what}`, () => {
      expect(fromScrapySettings(scrapy).settings).toEqual(ours);
    });
  }

  it("fromScrapySettings() of an empty dict gives the defaults", () => {
    const s = parseSettings(fromScrapySettings({}).settings);
    expect(s.concurrentRequests).toBe(16);
    expect(s.concurrentRequestsPerDomain).toBe(8);
    expect(s.downloadDelayMs).toBe(0);
    expect(s.jitter).toEqual([-0.5, 0.5]);
    expect(s.backoff).toMatchObject({ minDelayMs: 1_000, maxDelayMs: 300_000, delayFactor: 2 });
    expect(s.backoff.windowMs).toBe(60_000);
    expect(s.windowMs).toBe(60_000);
  });

  it("fromScrapySettings() keeps an exception class or predicate as given", () => {
    class Flaky extends Error {}
    const isFlaky = (e: unknown) => e instanceof Flaky;
    expect(fromScrapySettings({ BACKOFF_EXCEPTIONS: [Flaky, isFlaky] }).settings).toEqual({
      backoff: { exceptions: [Flaky, isFlaky] },
    });
  });

  it("fromScrapySettings() turns debug on when either debug setting is on", () => {
    expect(fromScrapySettings({ THROTTLING_DEBUG: false, AUTOTHROTTLE_DEBUG: true }).settings.debug)
      .toBe(true);
    expect(fromScrapySettings({ AUTOTHROTTLE_DEBUG: false, THROTTLING_DEBUG: true }).settings.debug)
      .toBe(true);
  });
});

describe("fromScrapySettings() warnings", () => {
  it("fromScrapySettings() reports Scrapy settings it has no use for once, as ignored", () => {
    const { settings, warnings } = fromScrapySettings({
      BOT_NAME: "books",
      SPIDER_MODULES: ["books.spiders"],
      ITEM_PIPELINES: { "books.pipelines.Save": 300 },
      LOG_LEVEL: "INFO",
      DOWNLOAD_DELAY: 1,
    });
    expect(settings).toEqual({ downloadDelayMs: 1000 });
    expect(warnings).toEqual([{
      code: "ignored",
      settings: ["BOT_NAME", "SPIDER_MODULES", "ITEM_PIPELINES", "LOG_LEVEL"],
      message:
        "Ignored Scrapy settings that politely has no use for: BOT_NAME, SPIDER_MODULES, ITEM_PIPELINES, LOG_LEVEL",
    }]);
  });

  it("fromScrapySettings() knows Scrapy's common settings", () => {
    for (
      const name of ["DOWNLOADER_MIDDLEWARES", "FEEDS", "HTTPCACHE_ENABLED", "COOKIES_ENABLED"]
    ) {
      expect(IGNORED_SCRAPY_SETTINGS.has(name)).toBe(true);
    }
  });

  it("fromScrapySettings() says what to use instead of an ignored setting that has a replacement", () => {
    const { warnings } = fromScrapySettings({ DOWNLOAD_SLOTS: { "a.com": { delay: 1 } } });
    expect(warnings).toEqual([{
      code: "ignored",
      settings: ["DOWNLOAD_SLOTS"],
      message: "Ignored DOWNLOAD_SLOTS: use THROTTLING_SCOPES instead",
    }]);
  });

  it("fromScrapySettings() ignores the names it is told to, silently", () => {
    expect(fromScrapySettings({ ZYTE_API_KEY: "k" }, { ignore: ["ZYTE_API_KEY"] })).toEqual({
      settings: {},
      warnings: [],
    });
  });

  it("fromScrapySettings() ignores the settings of other Scrapy plugins with one warning that names them, not their values", () => {
    const { settings, warnings } = fromScrapySettings({
      BOT_NAME: "books",
      ITEM_PIPELINES: { "books.pipelines.Save": 300 },
      SPIDER_MIDDLEWARES: { "scrapy_poet.RetryMiddleware": 275 },
      ZYTE_API_KEY: "secret-key",
      ZYTE_API_TRANSPARENT_MODE: true,
      PLAYWRIGHT_BROWSER_TYPE: "chromium",
      DOWNLOAD_DELAY: 1,
    });
    expect(settings).toEqual({ downloadDelayMs: 1000 });
    expect(warnings).toEqual([
      {
        code: "ignored",
        settings: ["BOT_NAME", "ITEM_PIPELINES", "SPIDER_MIDDLEWARES"],
        message:
          "Ignored Scrapy settings that politely has no use for: BOT_NAME, ITEM_PIPELINES, SPIDER_MIDDLEWARES",
      },
      {
        code: "ignored",
        settings: ["ZYTE_API_KEY", "ZYTE_API_TRANSPARENT_MODE", "PLAYWRIGHT_BROWSER_TYPE"],
        message:
          "Ignored settings that neither politely nor Scrapy knows (a Scrapy plugin's?): ZYTE_API_KEY, ZYTE_API_TRANSPARENT_MODE, PLAYWRIGHT_BROWSER_TYPE",
      },
    ]);
    expect(JSON.stringify(warnings)).not.toContain("secret-key");
  });

  it("fromScrapySettings() does not take a plugin's setting that resembles one of ours for a typo", () => {
    // Real plugin settings: scrapy-useragents, scrapy-random-useragent,
    // scrapy-redis, and two a project might define for its own middleware.
    const plugins = [
      "USER_AGENTS",
      "USER_AGENT_LIST",
      "SCHEDULER_PERSIST",
      "SCHEDULER_QUEUE_CLASS",
      "DUPEFILTER_KEY",
      "REDIS_URL",
      "DOWNLOAD_DELAY_RANDOM",
      "RETRY_TIMES_PROXY",
    ];
    const { warnings } = fromScrapySettings(Object.fromEntries(plugins.map((n) => [n, 1])));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.settings).toEqual(plugins);
  });

  it("fromScrapySettings() calls onWarning with each warning, and still returns them", () => {
    const told: string[] = [];
    const { warnings } = fromScrapySettings(
      { LOG_LEVEL: "INFO", ZYTE_API_KEY: "k", AUTOTHROTTLE_ENABLED: true },
      { onWarning: (w) => told.push(w.message) },
    );
    expect(told).toEqual(warnings.map((w) => w.message));
    expect(told).toHaveLength(3);
  });

  it("fromScrapySettings() calls onWarning for nothing when the settings are invalid", () => {
    const told: unknown[] = [];
    expect(() =>
      fromScrapySettings({ LOG_LEVEL: "INFO", DOWNLOAD_DELAY: -1 }, {
        onWarning: (w) => told.push(w),
      })
    ).toThrow(RangeError);
    expect(told).toEqual([]);
  });

  it("fromScrapySettings() keeps AUTOTHROTTLE_* working, each with a deprecation warning naming its replacement", () => {
    const { settings, warnings } = fromScrapySettings({
      AUTOTHROTTLE_ENABLED: true,
      AUTOTHROTTLE_START_DELAY: 2,
      AUTOTHROTTLE_MAX_DELAY: 30,
      AUTOTHROTTLE_TARGET_CONCURRENCY: 2.5,
      AUTOTHROTTLE_DEBUG: true,
    });
    expect(settings).toEqual({
      autothrottle: {
        enabled: true,
        startDelayMs: 2000,
        maxDelayMs: 30_000,
        targetConcurrency: 2.5,
      },
      debug: true,
    });
    expect(warnings.map((w) => w.code)).toEqual(Array(5).fill("deprecated"));
    expect(warnings.map((w) => w.message)).toEqual([
      "AUTOTHROTTLE_ENABLED is deprecated: throttling and backoff are always active, so drop it (the latency-based delay still runs, as 'autothrottle.enabled')",
      "AUTOTHROTTLE_START_DELAY is deprecated: use DOWNLOAD_DELAY ('downloadDelayMs') instead",
      "AUTOTHROTTLE_MAX_DELAY is deprecated: use BACKOFF_MAX_DELAY ('backoff.maxDelayMs') instead",
      `AUTOTHROTTLE_TARGET_CONCURRENCY is deprecated: use rampup instead ("rampup": True in a THROTTLING_SCOPES entry, 'scopes[...].rampup: true')`,
      "AUTOTHROTTLE_DEBUG is deprecated: use THROTTLING_DEBUG ('debug') instead",
    ]);
  });

  it("fromScrapySettings() keeps the default order for a queue class it does not know, and says so", () => {
    const { settings, warnings } = fromScrapySettings({
      SCHEDULER_MEMORY_QUEUE: "myproject.queues.RandomQueue",
    });
    expect(settings).toEqual({});
    expect(warnings).toEqual([{
      code: "unsupported",
      settings: ["SCHEDULER_MEMORY_QUEUE"],
      message:
        `SCHEDULER_MEMORY_QUEUE = "myproject.queues.RandomQueue" is not supported by politely, so the default LIFO order is kept`,
    }]);
  });

  it("fromScrapySettings() follows the memory queue when the two queues disagree", () => {
    const { settings, warnings } = fromScrapySettings({
      SCHEDULER_MEMORY_QUEUE: "scrapy.squeues.FifoMemoryQueue",
      SCHEDULER_DISK_QUEUE: "scrapy.squeues.PickleLifoDiskQueue",
    });
    expect(settings).toEqual({ queue: { fifo: true } });
    expect(warnings[0]?.settings).toEqual(["SCHEDULER_MEMORY_QUEUE", "SCHEDULER_DISK_QUEUE"]);
  });
});

describe("fromScrapySettings() errors", () => {
  it("fromScrapySettings() reports a bad value under its Scrapy name and in seconds", () => {
    const error = errorOf(() => fromScrapySettings({ DOWNLOAD_DELAY: -1 }));
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      "Cannot create throttler as 'DOWNLOAD_DELAY' must be >= 0: current value is -1",
    );
    expect(error.cause).toBeInstanceOf(z.ZodError);
  });

  it("fromScrapySettings() reports a value of the wrong type as a TypeError", () => {
    const error = errorOf(() => fromScrapySettings({ BACKOFF_MAX_DELAY: "5m" }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      `Cannot create throttler as 'BACKOFF_MAX_DELAY' must be a number: current value is "5m"`,
    );
  });

  it("fromScrapySettings() reports a bad scope value with its Python path", () => {
    const error = errorOf(() =>
      fromScrapySettings({ THROTTLING_SCOPES: { "a.com": { backoff: { max_delay: -2 } } } })
    );
    expect(error).toBeInstanceOf(RangeError);
    expect(error.message).toBe(
      `Cannot create throttler as 'THROTTLING_SCOPES["a.com"]["backoff"]["max_delay"]' must be >= 0: current value is -2`,
    );
  });

  it("fromScrapySettings() points into a list", () => {
    expect(errorOf(() => fromScrapySettings({ BACKOFF_HTTP_CODES: [429, 99] })).message).toBe(
      "Cannot create throttler as 'BACKOFF_HTTP_CODES[1]' must be >= 100: current value is 99",
    );
  });

  it("fromScrapySettings() rejects a name that is neither ours nor Scrapy's, suggesting the closest", () => {
    const error = errorOf(() => fromScrapySettings({ DOWNLOAD_DELAYS: 1 }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      "Unknown setting 'DOWNLOAD_DELAYS' (did you mean 'DOWNLOAD_DELAY'?)",
    );
  });

  it("fromScrapySettings() rejects a near-miss of a setting it reads, even among plugin settings", () => {
    const cases: readonly (readonly [string, string])[] = [
      ["DOWNLOAD_DELAYY", "DOWNLOAD_DELAY"],
      ["DOWNLOADER_DELAY", "DOWNLOAD_DELAY"],
      ["CONCURRENT_REQUESTS_PER_DOMIAN", "CONCURRENT_REQUESTS_PER_DOMAIN"],
      ["AUTOTHROTLE_ENABLED", "AUTOTHROTTLE_ENABLED"],
      ["THROTTLING_SCOPE", "THROTTLING_SCOPES"],
      ["RETRY_HTTP_CODE", "RETRY_HTTP_CODES"],
    ];
    for (const [typo, meant] of cases) {
      const error = errorOf(() => fromScrapySettings({ ZYTE_API_KEY: "k", [typo]: 1 }));
      expect(error, typo).toBeInstanceOf(TypeError);
      expect(error.message).toBe(`Unknown setting '${typo}' (did you mean '${meant}'?)`);
    }
  });

  it("fromScrapySettings() takes a name it is told to ignore for no typo", () => {
    expect(fromScrapySettings({ DOWNLOAD_DELAYY: 1 }, { ignore: ["DOWNLOAD_DELAYY"] })).toEqual({
      settings: {},
      warnings: [],
    });
  });

  it("fromScrapySettings() never lists every valid name in an error", () => {
    const error = errorOf(() => fromScrapySettings({ somethingElse: 1 }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      "Unknown setting 'somethingElse' (Scrapy's settings are UPPER_CASE)",
    );
  });

  it("fromScrapySettings() suggests a Scrapy name for ours written the wrong way", () => {
    expect(errorOf(() => fromScrapySettings({ downloadDelay: 1 })).message).toBe(
      "Unknown setting 'downloadDelay' (did you mean 'DOWNLOAD_DELAY'?)",
    );
  });

  it("fromScrapySettings() rejects an unknown key inside a scope, suggesting the closest", () => {
    expect(
      errorOf(() => fromScrapySettings({ THROTTLING_SCOPES: { "example.com": { concurency: 3 } } }))
        .message,
    ).toBe(
      `Unknown setting 'THROTTLING_SCOPES["example.com"]["concurency"]' (did you mean 'concurrency'?)`,
    );
  });

  it("fromScrapySettings() rejects an unknown key inside a scope's backoff, suggesting the closest", () => {
    expect(
      errorOf(() =>
        fromScrapySettings({ THROTTLING_SCOPES: { "a.com": { backoff: { max_dealy: 3 } } } })
      )
        .message,
    ).toBe(
      `Unknown setting 'THROTTLING_SCOPES["a.com"]["backoff"]["max_dealy"]' (did you mean 'max_delay'?)`,
    );
  });

  it("fromScrapySettings() rejects a scope manager given as a Python import path", () => {
    const error = errorOf(() =>
      fromScrapySettings({ THROTTLING_SCOPES: { "a.com": { manager: "myproject.M" } } })
    );
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain(`'THROTTLING_SCOPES["a.com"]["manager"]' is invalid`);
  });

  it("fromScrapySettings() rejects a queue class that is not an import path", () => {
    expect(errorOf(() => fromScrapySettings({ SCHEDULER_PRIORITY_QUEUE: 3 })).message).toBe(
      "Cannot create throttler as 'SCHEDULER_PRIORITY_QUEUE' must be an import path string: current value is 3",
    );
  });
});

describe("fromScrapySettings() durations and bounds", () => {
  const cases: readonly (readonly [string, Record<string, unknown>, string])[] = [
    [
      "a download time-out past what a timer holds",
      { DOWNLOAD_TIMEOUT: 3_000_000 },
      "'DOWNLOAD_TIMEOUT' must be <= 2147483.647 (the longest a timer can wait, about 24.8 days): current value is 3000000",
    ],
    [
      "a backoff maximum past what a timer holds",
      { BACKOFF_MAX_DELAY: 10_000_000 },
      "'BACKOFF_MAX_DELAY' must be <= 2147483.647 (the longest a timer can wait, about 24.8 days): current value is 10000000",
    ],
    [
      "a scope delay past what a timer holds",
      { THROTTLING_SCOPES: { "a.com": { delay: 2_200_000 } } },
      `'THROTTLING_SCOPES["a.com"]["delay"]' must be <= 2147483.647 (the longest a timer can wait, about 24.8 days): current value is 2200000`,
    ],
    [
      "a minimum above the maximum",
      { BACKOFF_MIN_DELAY: 400, BACKOFF_MAX_DELAY: 60 },
      "'BACKOFF_MIN_DELAY' must be <= 'BACKOFF_MAX_DELAY' (60): current value is 400",
    ],
    [
      "a minimum above the default maximum",
      { BACKOFF_MIN_DELAY: 400 },
      "'BACKOFF_MIN_DELAY' must be <= 'BACKOFF_MAX_DELAY' (300, its default): current value is 400",
    ],
    [
      "a maximum below the default minimum",
      { BACKOFF_MAX_DELAY: 0.5 },
      "'BACKOFF_MAX_DELAY' must be >= 'BACKOFF_MIN_DELAY' (1, its default): current value is 0.5",
    ],
    [
      "a scope minimum above the global maximum",
      { BACKOFF_MAX_DELAY: 60, THROTTLING_SCOPES: { "a.com": { backoff: { min_delay: 100 } } } },
      `'THROTTLING_SCOPES["a.com"]["backoff"]["min_delay"]' must be <= 'BACKOFF_MAX_DELAY' (60): current value is 100`,
    ],
  ];
  for (const [what, dict, message] of cases) {
    it(`fromScrapySettings() refuses ${what}, naming the setting`, () => {
      const error = errorOf(() => fromScrapySettings(dict));
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toBe(`Cannot create throttler as ${message}`);
    });
  }

  it("fromScrapySettings() maps DOWNLOAD_MAXSIZE and DOWNLOAD_WARNSIZE (bytes) onto download.*, Scrapy's defaults", () => {
    const { settings, warnings } = fromScrapySettings({
      DOWNLOAD_MAXSIZE: 10_485_760,
      DOWNLOAD_WARNSIZE: 0,
    });
    expect(settings.download).toEqual({ maxSizeBytes: 10_485_760, warnSizeBytes: 0 });
    expect(warnings).toEqual([]);
    expect(parseSettings({}).download).toEqual({
      maxSizeBytes: 1_073_741_824,
      warnSizeBytes: 33_554_432,
    });
    expect(errorOf(() => fromScrapySettings({ DOWNLOAD_MAXSIZE: -1 })).message).toBe(
      "Cannot create throttler as 'DOWNLOAD_MAXSIZE' must be >= 0: current value is -1",
    );
  });

  it("fromScrapySettings() accepts the longest wait a timer holds and a minimum equal to the maximum", () => {
    expect(fromScrapySettings({ DOWNLOAD_TIMEOUT: 2_147_483.647 }).settings.downloadTimeoutMs)
      .toBe(2_147_483_647);
    expect(fromScrapySettings({ BACKOFF_MIN_DELAY: 5, BACKOFF_MAX_DELAY: 5 }).settings.backoff)
      .toEqual({ minDelayMs: 5000, maxDelayMs: 5000 });
  });
});

describe("loadSettings()", () => {
  it("loadSettings() reads Scrapy's names, ours, and both together", () => {
    expect(loadSettings({ DOWNLOAD_DELAY: 2 }).settings).toEqual({ downloadDelayMs: 2000 });
    expect(loadSettings({ downloadDelayMs: 5 }).settings).toEqual({ downloadDelayMs: 5 });
    expect(
      loadSettings({
        BACKOFF_MAX_DELAY: 60,
        BACKOFF_WINDOW: 30,
        backoff: { windowMs: 1000 },
        THROTTLING_SCOPES: { "a.com": { delay: 1, concurrency: 2 } },
        scopes: { "a.com": { concurrency: 4 } },
      }).settings,
    ).toEqual({
      backoff: { maxDelayMs: 60_000, windowMs: 1000 },
      scopes: { "a.com": { delayMs: 1000, concurrency: 4 } },
    });
  });

  it("loadSettings() lets a camelCase value win over the Scrapy name for the same setting", () => {
    expect(loadSettings({ DOWNLOAD_DELAY: 2, downloadDelayMs: 10 }).settings).toEqual({
      downloadDelayMs: 10,
    });
  });

  it("loadSettings() reports each bad value the way it was written", () => {
    expect(errorOf(() => loadSettings({ DOWNLOAD_DELAY: -2, downloadTimeoutMs: 5 })).message).toBe(
      "Cannot create throttler as 'DOWNLOAD_DELAY' must be >= 0: current value is -2",
    );
    expect(errorOf(() => loadSettings({ DOWNLOAD_DELAY: 2, downloadDelayMs: -3 })).message).toBe(
      "Cannot create throttler as 'downloadDelayMs' must be >= 0: current value is -3",
    );
  });

  it("loadSettings() suggests the closest name for a camelCase typo", () => {
    expect(errorOf(() => loadSettings({ LOG_LEVEL: "INFO", userAgnet: "x" })).message).toBe(
      "Unknown setting 'userAgnet' (did you mean 'userAgent'?)",
    );
  });

  it("loadSettings() ignores a plugin's setting with a warning and still rejects a camelCase typo beside it", () => {
    expect(loadSettings({ ZYTE_API_KEY: "k", downloadDelayMs: 5 })).toEqual({
      settings: { downloadDelayMs: 5 },
      warnings: [{
        code: "ignored",
        settings: ["ZYTE_API_KEY"],
        message:
          "Ignored settings that neither politely nor Scrapy knows (a Scrapy plugin's?): ZYTE_API_KEY",
      }],
    });
    const error = errorOf(() => loadSettings({ ZYTE_API_KEY: "k", downloadDelayMss: 5 }));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toBe(
      "Unknown setting 'downloadDelayMss' (did you mean 'downloadDelayMs'?)",
    );
    expect(errorOf(() => loadSettings({ concurrentRequestz: 2 })).message).toBe(
      "Unknown setting 'concurrentRequestz' (did you mean 'concurrentRequests'?)",
    );
  });

  it("loadSettings() calls onWarning as fromScrapySettings() does", () => {
    const told: string[] = [];
    loadSettings({ LOG_LEVEL: "INFO" }, { onWarning: (w) => told.push(w.message) });
    expect(told).toEqual(["Ignored Scrapy settings that politely has no use for: LOG_LEVEL"]);
  });

  it("loadSettings() passes on the converter's warnings", () => {
    expect(loadSettings({ LOG_LEVEL: "INFO", debug: true }).warnings).toEqual([{
      code: "ignored",
      settings: ["LOG_LEVEL"],
      message: "Ignored Scrapy settings that politely has no use for: LOG_LEVEL",
    }]);
  });
});

describe("parseSettingValue()", () => {
  const table: [string, string, unknown][] = [
    ["DOWNLOAD_DELAY", "0.5", 0.5],
    ["CONCURRENT_REQUESTS", "32", 32],
    ["ROBOTSTXT_OBEY", "True", true],
    ["ROBOTSTXT_OBEY", "false", false],
    ["JOBDIR", "None", null],
    ["BACKOFF_HTTP_CODES", "[429, 503]", [429, 503]],
    ["RAMPUP_BACKOFF_TARGET", "(1, 3)", [1, 3]],
    ["THROTTLING_SCOPES", `{"a.com": {"delay": 2}}`, { "a.com": { delay: 2 } }],
    ["THROTTLING_SCOPES", "{'a.com': {'rampup': True, 'jitter': [0.1, 0.2],},}", {
      "a.com": { rampup: true, jitter: [0.1, 0.2] },
    }],
    ["LOG_LEVEL", "INFO", "INFO"],
    ["USER_AGENT", "2.0", "2.0"],
    ["USER_AGENT", `"quoted bot"`, "quoted bot"],
    ["userAgent", "true", "true"],
    ["SCHEDULER_MEMORY_QUEUE", "scrapy.squeues.FifoMemoryQueue", "scrapy.squeues.FifoMemoryQueue"],
    ["downloadDelayMs", " 250 ", 250],
  ];
  for (const [name, text, value] of table) {
    it(`parseSettingValue() reads ${name}=${text}`, () => {
      expect(parseSettingValue(name, text)).toEqual(value);
    });
  }
});
