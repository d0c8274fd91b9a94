/**
 * politely's settings: camelCase, durations in milliseconds, validated with
 * zod the moment they are given. Scrapy's UPPER_CASE settings (in seconds) come
 * in through `fromScrapySettings`.
 *
 * Size: the zod schema of every setting with its `@default` and doc comment
 * (most of the file), and the resolution of a scope's configuration from it.
 *
 * @module
 */
import { z } from "zod";
import type { ThrottlingScopeManagerProtocol } from "../managers/scope_manager_protocol.ts";
import { formatSettingsError } from "./_format_settings_error.ts";
import { MAX_TIMER_MS } from "../util/_timer.ts";
import { own } from "./_own.ts";

/** Jitter: `0`/`false` off, `j` for `uniform(1 - j, 1 + j)`, `[lo, hi]` for `1 + uniform(lo, hi)`, `true` = 0.5. */
export type JitterInput = boolean | number | readonly [number, number];

/** Something that says whether a download error is a backoff trigger. */
export type ErrorMatcher =
  | string
  | (abstract new (...args: never[]) => unknown)
  | ((error: unknown) => boolean);

/** What a custom scope manager factory is given. */
export interface ScopeManagerContext {
  readonly scope: string;
  readonly config: ResolvedScopeConfig;
  readonly random: () => number;
}

/** Makes the manager of one scope (the reference's `manager` key). */
export type ScopeManagerFactory = (context: ScopeManagerContext) => ThrottlingScopeManagerProtocol;

const nonNegative = z.number().finite().nonnegative();
const positiveInt = z.number().int().positive();
/**
 * A wait in ms: a timer holds at most 2^31 - 1 ms (24.8 days); past that Node
 * fires it after 1 ms, so a longer setting would turn into no wait at all.
 */
const duration = nonNegative.max(MAX_TIMER_MS);
const positiveDuration = z.number().finite().positive().max(MAX_TIMER_MS);

const jitterSchema = z.union([
  z.boolean(),
  z.number().finite().min(0).max(1),
  z.tuple([z.number().finite().min(-1), z.number().finite()]).refine(
    ([lo, hi]) => lo <= hi,
    { message: "expected [low, high] with low <= high" },
  ),
]);

const errorMatcherSchema = z.union([
  z.string().min(1),
  z.custom<(error: unknown) => boolean>((v) => typeof v === "function", {
    message: "expected an error class, an error name or a predicate",
  }),
]);

const backoffSchema = z.object({
  /**
   * Response statuses that trigger backoff.
   * @default [429, 502, 503, 504, 520, 521, 522, 523, 524]
   */
  httpCodes: z.array(z.number().int().min(100).max(599)).optional(),
  /**
   * Download errors that trigger backoff: error classes, error `name`s or predicates. Scrapy
   * import paths become names (`"builtins.IOError"` → `"IOError"`).
   * @default ["DownloadFailedError", "DownloadTimeoutError", "ResponseDataLossError"]
   */
  exceptions: z.array(errorMatcherSchema).optional(),
  /**
   * Each trigger multiplies the delay by this; each quiet window divides it.
   * @default 2
   */
  delayFactor: z.number().finite().min(1).optional(),
  /**
   * First backoff step, and the least delay while backing off.
   * @default 1_000
   */
  minDelayMs: duration.optional(),
  /**
   * Most delay backoff reaches; also caps `Retry-After` and `RateLimit-Reset`.
   * @default 300_000
   */
  maxDelayMs: duration.optional(),
  /**
   * Jitter of backoff delays (same forms as `jitter`).
   * @default 0.1 (±10%)
   */
  jitter: jitterSchema.optional(),
  /**
   * A scope that goes this long without a trigger undoes one step; rampup's window too. `0`:
   * instant recovery.
   * @default 60_000
   */
  windowMs: duration.optional(),
}).strict();

const backoffTargetSchema = z.union([
  nonNegative,
  z.tuple([nonNegative, nonNegative]).refine(([lo, hi]) => lo <= hi, {
    message: "expected [low, high] with low <= high",
  }),
]);

const rampupSchema = z.object({
  /**
   * Triggers per window rampup aims for: `t` or `[lo, hi]`.
   * @default 1
   */
  backoffTarget: backoffTargetSchema.optional(),
  /**
   * A rampup step multiplies the delay by this.
   * @default 0.5
   */
  delayFactor: z.number().finite().gt(0).lt(1).optional(),
  /**
   * Rampup does not lower the delay below this.
   * @default 0
   */
  minDelayMs: duration.optional(),
}).strict();

const scopeConfigSchema = z.object({
  concurrency: positiveInt.optional(),
  minConcurrency: positiveInt.optional(),
  delayMs: duration.optional(),
  jitter: jitterSchema.optional(),
  quota: z.number().finite().positive().optional(),
  windowMs: positiveDuration.optional(),
  rampup: z.union([z.boolean(), rampupSchema]).optional(),
  adaptive: z.boolean().optional(),
  backoff: backoffSchema.optional(),
  manager: z.custom<ScopeManagerFactory>((v) => typeof v === "function", {
    message: "expected a function (context) => ThrottlingScopeManagerProtocol",
  }).optional(),
  ignoreRobotsTxt: z.boolean().optional(),
}).strict();

const scopeRecordSchema = z.record(z.string().min(1), scopeConfigSchema);

/**
 * `scopes`, a record of scope names. A scope named `__proto__` is refused by
 * name: zod leaves that key out of a record's output (an assignment would set
 * the prototype), so it would otherwise be dropped without a word
 * (docs/DECISIONS.md). Other names, `constructor` and `toString` included, are
 * names like any other.
 */
const scopesSchema = z.custom<z.input<typeof scopeRecordSchema>>(
  (value) => !(typeof value === "object" && value !== null && Object.hasOwn(value, "__proto__")),
  {
    message: 'a scope cannot be named "__proto__", which JavaScript reserves',
    path: ["__proto__"],
  },
).pipe(scopeRecordSchema);

const retrySchema = z.object({
  /**
   * Retry failed requests.
   * @default true
   */
  enabled: z.boolean().optional(),
  /**
   * Retries after the first attempt.
   * @default 2
   */
  times: z.number().int().nonnegative().optional(),
  /**
   * More retries for a refusal (a 429 or 503 among `httpCodes`): the site's "not now", each
   * attempt paced by backoff. A refusal is retried up to `times + refusedTimes` attempts after the
   * first; any other failure up to `times`. 0 is Scrapy's rule.
   * @default 10
   */
  refusedTimes: z.number().int().nonnegative().optional(),
  /**
   * Statuses that are retried.
   * @default [500, 502, 503, 504, 522, 524, 408, 429]
   */
  httpCodes: z.array(z.number().int().min(100).max(599)).optional(),
}).strict();

const queueSchema = z.object({
  /**
   * First in, first out (breadth-first) instead of depth-first. A Scrapy class with `Fifo` in its
   * name means `true`, `Lifo` `false`.
   * @default false (LIFO)
   */
  fifo: z.boolean().optional(),
  /**
   * `priority -= depth × depthPriority`; `1` with `fifo` crawls breadth-first.
   * @default 0
   */
  depthPriority: z.number().finite().optional(),
  /**
   * Drop duplicate requests unless `dontFilter`. `BaseDupeFilter` means `false`.
   * @default true
   */
  dedupe: z.boolean().optional(),
  /**
   * How ready requests are chosen: `"throttling-aware"` (`ThrottlingAwarePriorityQueue`),
   * `"downloader-aware"` (`DownloaderAwarePriorityQueue`), `"priority"` (`ScrapyPriorityQueue`).
   * @default "throttling-aware"
   */
  order: z.enum(["throttling-aware", "downloader-aware", "priority"]).optional(),
  /**
   * Directory that makes the crawl resumable.
   * @default none
   */
  jobDir: z.string().min(1).optional(),
}).strict();

const downloadSchema = z.object({
  /**
   * A response body larger than this (announced by `Content-Length` or received) is aborted as a
   * `ResponseTooLargeError` outcome; bodies are streamed, so no more than this is ever held. `0`:
   * no limit.
   * @default 1_073_741_824 (1 GiB)
   */
  maxSizeBytes: z.number().int().nonnegative().optional(),
  /**
   * A body larger than this is reported once (a `warning` event, `download-warnsize`). `0`: never.
   * @default 33_554_432 (32 MiB)
   */
  warnSizeBytes: z.number().int().nonnegative().optional(),
}).strict();

const autothrottleSchema = z.object({
  /**
   * Latency-based delay (Scrapy's AutoThrottle).
   * @default false
   */
  enabled: z.boolean().optional(),
  /**
   * Its starting delay: `max(downloadDelayMs, this)`.
   * @default 5_000
   */
  startDelayMs: duration.optional(),
  /**
   * Its largest delay.
   * @default 60_000
   */
  maxDelayMs: duration.optional(),
  /**
   * Requests it aims to have in flight per scope.
   * @default 1
   */
  targetConcurrency: z.number().finite().positive().optional(),
}).strict();

/** The zod schema of {@link ThrottlerSettingsInput}. */
export const settingsSchema = z.object({
  /**
   * Most requests in flight in the whole pipeline; also the ceiling rampup can raise a scope's
   * concurrency to.
   * @default 16
   */
  concurrentRequests: positiveInt.optional(),
  /**
   * Concurrency of a domain scope whose `concurrency` is not set.
   * @default 8
   */
  concurrentRequestsPerDomain: positiveInt.optional(),
  /**
   * When positive, each request also gets its IP as a scope, with this concurrency.
   * @default 0 (off)
   */
  concurrentRequestsPerIp: z.number().int().nonnegative().optional(),
  /**
   * Concurrency of a scope that is neither a domain nor an IP (`"api"`).
   * @default 1
   */
  scopeConcurrency: positiveInt.optional(),
  /**
   * Least time between two requests of one domain scope. `60_000 / RPM` for a rate per minute.
   * @default 0
   */
  downloadDelayMs: duration.optional(),
  /**
   * Randomises each use of a delay: `0`/`false` off, `j` for `delay × uniform(1 − j, 1 + j)`,
   * `[lo, hi]` for `delay × (1 + uniform(lo, hi))`.
   * @default true (±50%)
   */
  jitter: jitterSchema.optional(),
  /**
   * Quota window of scopes that do not set `windowMs`.
   * @default 60_000
   */
  windowMs: positiveDuration.optional(),
  /**
   * Configuration per scope name; see docs/SETTINGS.md, Scope keys.
   * @default {}
   */
  scopes: scopesSchema.optional(),
  /** Backoff on 429, 5xx and download errors: each key has its default. */
  backoff: backoffSchema.optional(),
  /** Rampup's options for the scopes that ramp up: each key has its default. */
  rampup: rampupSchema.optional(),
  /**
   * Learn the site's limit from refusals (lib/managers/_rampup.ts, docs/DECISIONS.md) instead of
   * exponential backoff steps.
   * @default true (domain and IP scopes)
   */
  adaptive: z.boolean().optional(),
  retry: retrySchema.optional(),
  autothrottle: autothrottleSchema.optional(),
  queue: queueSchema.optional(),
  /**
   * Most scope states kept in memory; least recently used idle ones are evicted, down to 1/256
   * below the limit at once (docs/DECISIONS.md). `0`: no limit.
   * @default 100_000
   */
  scopeLimit: z.number().int().nonnegative().optional(),
  /**
   * An idle scope is evicted after this long. `0`: never.
   * @default 3_600_000
   */
  scopeMaxIdleMs: duration.optional(),
  /**
   * Warn once when this many requests are held back.
   * @default 500
   */
  delayedRequestsWarnThreshold: z.number().int().nonnegative().optional(),
  /**
   * Fetch and obey robots.txt.
   * @default false
   */
  robotsTxtObey: z.boolean().optional(),
  /**
   * When obeying robots.txt, a `Crawl-delay` sets the scope's delay (and concurrency 1).
   * @default true
   */
  throttlingRobotsTxtObey: z.boolean().optional(),
  /**
   * Cap on a `Crawl-delay`.
   * @default 60_000
   */
  robotsTxtMaxDelayMs: duration.optional(),
  /**
   * While a site's robots.txt is unreachable (5xx, network error, time-out), its URLs are held and
   * robots.txt is asked again after this long.
   * @default 60_000
   */
  robotsTxtRetryMs: positiveDuration.optional(),
  /**
   * How many more times an unreachable robots.txt is asked; then the site's URLs end unsent
   * (`RobotsTxtDisallowedError`, `source: "unreachable"`), kept by a job directory for a resume.
   * @default 4
   */
  robotsTxtRetries: z.number().int().nonnegative().optional(),
  /**
   * A download taking longer fails with `DownloadTimeoutError`.
   * @default 180_000
   */
  downloadTimeoutMs: positiveDuration.optional(),
  download: downloadSchema.optional(),
  /**
   * User agent sent, and matched in robots.txt.
   * @default "politely/0.1 (+https://www.npmjs.com/package/politely)"
   */
  userAgent: z.string().min(1).optional(),
  /**
   * Log throttling decisions.
   * @default false
   */
  debug: z.boolean().optional(),
}).strict().superRefine(checkBackoffBounds);

/**
 * A rule between two settings, carried by a zod `custom` issue as data
 * (`params`) so the error names both settings in the user's own words and
 * units (`'BACKOFF_MIN_DELAY' must be <= 'BACKOFF_MAX_DELAY' (300, its default)`).
 */
export interface SettingsRelation {
  readonly relation: "<=" | ">=";
  /** Path of the other setting. */
  readonly other: readonly string[];
  /** Its value in our units. */
  readonly otherValue: number;
  /** The other value is the default, not something the user set. */
  readonly otherIsDefault: boolean;
}

interface BackoffBounds {
  readonly minDelayMs?: number | undefined;
  readonly maxDelayMs?: number | undefined;
}

interface BackoffBoundsInput {
  readonly backoff?: BackoffBounds | undefined;
  readonly scopes?:
    | Readonly<Record<string, { readonly backoff?: BackoffBounds | undefined }>>
    | undefined;
}

/**
 * `backoff.minDelayMs <= backoff.maxDelayMs`, globally and in every scope,
 * with unset values taken from where they would come from (the scope's own,
 * the global one, the default). Reported at a value the user set.
 */
function checkBackoffBounds(s: BackoffBoundsInput, ctx: z.RefinementCtx): void {
  type Bound = { value: number; path: readonly string[]; set: boolean };
  const bound = (
    key: "minDelayMs" | "maxDelayMs",
    global: Bound | undefined,
    own: number | undefined,
    path: readonly string[],
  ): Bound =>
    own !== undefined
      ? { value: own, path, set: true }
      : global ?? { value: DEFAULTS.backoff[key], path, set: false };
  const check = (min: Bound, max: Bound): void => {
    if (min.value <= max.value || (!min.set && !max.set)) return;
    // At the more specific of the two (a scope's own over the global one).
    const atMin = min.set && (!max.set || min.path.length >= max.path.length);
    const [at, other, relation] = atMin ? [min, max, "<=" as const] : [max, min, ">=" as const];
    const params: SettingsRelation = {
      relation,
      other: other.path,
      otherValue: other.value,
      otherIsDefault: !other.set,
    };
    ctx.addIssue({
      code: "custom",
      path: [...at.path],
      message: `must be ${relation} '${other.path.join(".")}' (${other.value})`,
      input: at.value,
      params,
    });
  };
  const g = s.backoff;
  const gMin = bound("minDelayMs", undefined, g?.minDelayMs, ["backoff", "minDelayMs"]);
  const gMax = bound("maxDelayMs", undefined, g?.maxDelayMs, ["backoff", "maxDelayMs"]);
  check(gMin, gMax);
  for (const [scope, config] of Object.entries(s.scopes ?? {})) {
    const b = config.backoff;
    if (b === undefined || (b.minDelayMs === undefined && b.maxDelayMs === undefined)) continue;
    const path = ["scopes", scope, "backoff"];
    check(
      bound("minDelayMs", gMin, b.minDelayMs, [...path, "minDelayMs"]),
      bound("maxDelayMs", gMax, b.maxDelayMs, [...path, "maxDelayMs"]),
    );
  }
}

/** Per-scope configuration as a user writes it (the reference's `ThrottlingScopeConfig`). */
export type ThrottlingScopeConfig = z.input<typeof scopeConfigSchema>;
/** Backoff overrides as a user writes them (the reference's `BackoffConfig`). */
export type BackoffConfig = z.input<typeof backoffSchema>;
/** Rampup options as a user writes them. */
export type RampupConfig = z.input<typeof rampupSchema>;
/** Settings as a user writes them: every key optional. */
export type ThrottlerSettingsInput = z.input<typeof settingsSchema>;

/** Backoff settings with every default filled in. */
export interface ResolvedBackoff {
  readonly httpCodes: readonly number[];
  readonly exceptions: readonly ErrorMatcher[];
  readonly delayFactor: number;
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
  readonly jitter: readonly [number, number];
  readonly windowMs: number;
}

/** Rampup settings with every default filled in. */
export interface ResolvedRampup {
  readonly backoffTarget: readonly [number, number];
  readonly delayFactor: number;
  readonly minDelayMs: number;
}

/** One scope's configuration with every default filled in. */
export interface ResolvedScopeConfig {
  readonly concurrency: number;
  readonly minConcurrency: number;
  readonly maxConcurrency: number;
  readonly delayMs: number;
  /** Jitter as `[lo, hi]`: the delay is multiplied by `1 + uniform(lo, hi)`. */
  readonly jitter: readonly [number, number];
  readonly quota: number | undefined;
  readonly windowMs: number;
  readonly rampup: ResolvedRampup | undefined;
  /**
   * Learn the site's limit from refusals (lib/managers/_rampup.ts) instead of
   * exponential backoff steps: on by default for domain and IP scopes.
   */
  readonly adaptive: boolean;
  readonly backoff: ResolvedBackoff;
  readonly manager: ScopeManagerFactory | undefined;
  readonly ignoreRobotsTxt: boolean;
}

/** Settings with every default filled in. */
export interface ThrottlerSettings {
  readonly concurrentRequests: number;
  readonly concurrentRequestsPerDomain: number;
  readonly concurrentRequestsPerIp: number;
  readonly scopeConcurrency: number;
  readonly downloadDelayMs: number;
  readonly jitter: readonly [number, number];
  readonly windowMs: number;
  readonly scopes: Readonly<Record<string, ThrottlingScopeConfig>>;
  readonly backoff: ResolvedBackoff;
  readonly rampup: ResolvedRampup;
  readonly adaptive: boolean;
  readonly retry: {
    readonly enabled: boolean;
    readonly times: number;
    readonly refusedTimes: number;
    readonly httpCodes: readonly number[];
  };
  readonly autothrottle: {
    readonly enabled: boolean;
    readonly startDelayMs: number;
    readonly maxDelayMs: number;
    readonly targetConcurrency: number;
  };
  readonly queue: {
    readonly fifo: boolean;
    readonly depthPriority: number;
    readonly dedupe: boolean;
    readonly order: "throttling-aware" | "downloader-aware" | "priority";
    readonly jobDir: string | undefined;
  };
  readonly scopeLimit: number;
  readonly scopeMaxIdleMs: number;
  readonly delayedRequestsWarnThreshold: number;
  readonly robotsTxtObey: boolean;
  readonly throttlingRobotsTxtObey: boolean;
  readonly robotsTxtMaxDelayMs: number;
  readonly robotsTxtRetryMs: number;
  readonly robotsTxtRetries: number;
  readonly downloadTimeoutMs: number;
  readonly download: {
    readonly maxSizeBytes: number;
    readonly warnSizeBytes: number;
  };
  readonly userAgent: string;
  readonly debug: boolean;
}

/** Error names that trigger backoff by default (see `lib/http/download_errors.ts`). */
export const DEFAULT_BACKOFF_EXCEPTIONS: readonly string[] = [
  "DownloadFailedError",
  "DownloadTimeoutError",
  "ResponseDataLossError",
];

/** The defaults, from Scrapy's code (not its tutorial) and SPEC.md. */
export const DEFAULTS: ThrottlerSettings = {
  concurrentRequests: 16,
  concurrentRequestsPerDomain: 8,
  concurrentRequestsPerIp: 0,
  scopeConcurrency: 1,
  downloadDelayMs: 0,
  jitter: [-0.5, 0.5],
  windowMs: 60_000,
  scopes: {},
  backoff: {
    httpCodes: [429, 502, 503, 504, 520, 521, 522, 523, 524],
    exceptions: DEFAULT_BACKOFF_EXCEPTIONS,
    delayFactor: 2,
    minDelayMs: 1_000,
    maxDelayMs: 300_000,
    jitter: [-0.1, 0.1],
    windowMs: 60_000,
  },
  rampup: { backoffTarget: [1, 1], delayFactor: 0.5, minDelayMs: 0 },
  adaptive: true,
  retry: {
    enabled: true,
    times: 2,
    refusedTimes: 10,
    httpCodes: [500, 502, 503, 504, 522, 524, 408, 429],
  },
  autothrottle: { enabled: false, startDelayMs: 5_000, maxDelayMs: 60_000, targetConcurrency: 1 },
  queue: {
    fifo: false,
    depthPriority: 0,
    dedupe: true,
    order: "throttling-aware",
    jobDir: undefined,
  },
  scopeLimit: 100_000,
  scopeMaxIdleMs: 3_600_000,
  delayedRequestsWarnThreshold: 500,
  robotsTxtObey: false,
  throttlingRobotsTxtObey: true,
  robotsTxtMaxDelayMs: 60_000,
  robotsTxtRetryMs: 60_000,
  robotsTxtRetries: 4,
  downloadTimeoutMs: 180_000,
  // Scrapy's: 1 GiB and 32 MiB.
  download: { maxSizeBytes: 1_073_741_824, warnSizeBytes: 33_554_432 },
  userAgent: "politely/0.1 (+https://www.npmjs.com/package/politely)",
  debug: false,
};

/** Jitter in any accepted form, as `[lo, hi]`. */
export function normalizeJitter(jitter: JitterInput): readonly [number, number] {
  if (jitter === true) return [-0.5, 0.5];
  if (jitter === false) return [0, 0];
  if (typeof jitter === "number") return [-jitter, jitter];
  return [jitter[0], jitter[1]];
}

function resolveBackoff(
  base: ResolvedBackoff,
  input: z.output<typeof backoffSchema> | undefined,
): ResolvedBackoff {
  if (input === undefined) return base;
  return {
    httpCodes: input.httpCodes ?? base.httpCodes,
    exceptions: (input.exceptions as ErrorMatcher[] | undefined) ?? base.exceptions,
    delayFactor: input.delayFactor ?? base.delayFactor,
    minDelayMs: input.minDelayMs ?? base.minDelayMs,
    maxDelayMs: input.maxDelayMs ?? base.maxDelayMs,
    jitter: input.jitter === undefined ? base.jitter : normalizeJitter(input.jitter),
    windowMs: input.windowMs ?? base.windowMs,
  };
}

/**
 * Rampup options filled in from `base` (the settings' `rampup`); `input`
 * already checked against the schema.
 * @internal
 */
export function resolveRampup(
  base: ResolvedRampup,
  input: z.output<typeof rampupSchema> | undefined,
): ResolvedRampup {
  if (input === undefined) return base;
  const target = input.backoffTarget;
  return {
    backoffTarget: target === undefined
      ? base.backoffTarget
      : typeof target === "number"
      ? [target, target]
      : [target[0], target[1]],
    delayFactor: input.delayFactor ?? base.delayFactor,
    minDelayMs: input.minDelayMs ?? base.minDelayMs,
  };
}

/**
 * Validate settings and fill in every default.
 *
 * @param input Settings as a user writes them (camelCase, ms).
 * @param what What is being created, for the error message. @default "throttler"
 * @returns The settings with defaults.
 * @throws {TypeError | RangeError} naming the setting, its value and what was expected.
 * @example Defaults
 * ```ts
 * import { parseSettings } from "./settings.ts";
 * const s = parseSettings({ concurrentRequestsPerDomain: 4 });
 * console.assert(s.concurrentRequests === 16);
 * ```
 */
export function parseSettings(input: unknown = {}, what = "throttler"): ThrottlerSettings {
  const parsed = settingsSchema.safeParse(input ?? {});
  if (!parsed.success) {
    throw formatSettingsError(parsed.error, input, what, { schema: settingsSchema });
  }
  const s = parsed.data;
  const d = DEFAULTS;
  const backoff = resolveBackoff(d.backoff, s.backoff);
  const downloadDelayMs = s.downloadDelayMs ?? d.downloadDelayMs;
  const autothrottle = {
    enabled: s.autothrottle?.enabled ?? d.autothrottle.enabled,
    startDelayMs: s.autothrottle?.startDelayMs ?? d.autothrottle.startDelayMs,
    maxDelayMs: s.autothrottle?.maxDelayMs ?? d.autothrottle.maxDelayMs,
    targetConcurrency: s.autothrottle?.targetConcurrency ?? d.autothrottle.targetConcurrency,
  };
  return {
    concurrentRequests: s.concurrentRequests ?? d.concurrentRequests,
    concurrentRequestsPerDomain: s.concurrentRequestsPerDomain ?? d.concurrentRequestsPerDomain,
    concurrentRequestsPerIp: s.concurrentRequestsPerIp ?? d.concurrentRequestsPerIp,
    scopeConcurrency: s.scopeConcurrency ?? d.scopeConcurrency,
    downloadDelayMs,
    jitter: s.jitter === undefined ? d.jitter : normalizeJitter(s.jitter),
    windowMs: s.windowMs ?? d.windowMs,
    scopes: (s.scopes ?? {}) as Record<string, ThrottlingScopeConfig>,
    backoff,
    rampup: resolveRampup(d.rampup, s.rampup),
    adaptive: s.adaptive ?? d.adaptive,
    retry: {
      enabled: s.retry?.enabled ?? d.retry.enabled,
      times: s.retry?.times ?? d.retry.times,
      refusedTimes: s.retry?.refusedTimes ?? d.retry.refusedTimes,
      httpCodes: s.retry?.httpCodes ?? d.retry.httpCodes,
    },
    autothrottle,
    queue: {
      fifo: s.queue?.fifo ?? d.queue.fifo,
      depthPriority: s.queue?.depthPriority ?? d.queue.depthPriority,
      dedupe: s.queue?.dedupe ?? d.queue.dedupe,
      order: s.queue?.order ?? d.queue.order,
      jobDir: s.queue?.jobDir ?? d.queue.jobDir,
    },
    scopeLimit: s.scopeLimit ?? d.scopeLimit,
    scopeMaxIdleMs: s.scopeMaxIdleMs ?? d.scopeMaxIdleMs,
    delayedRequestsWarnThreshold: s.delayedRequestsWarnThreshold ??
      d.delayedRequestsWarnThreshold,
    robotsTxtObey: s.robotsTxtObey ?? d.robotsTxtObey,
    throttlingRobotsTxtObey: s.throttlingRobotsTxtObey ?? d.throttlingRobotsTxtObey,
    robotsTxtMaxDelayMs: s.robotsTxtMaxDelayMs ?? d.robotsTxtMaxDelayMs,
    robotsTxtRetryMs: s.robotsTxtRetryMs ?? d.robotsTxtRetryMs,
    robotsTxtRetries: s.robotsTxtRetries ?? d.robotsTxtRetries,
    downloadTimeoutMs: s.downloadTimeoutMs ?? d.downloadTimeoutMs,
    download: {
      maxSizeBytes: s.download?.maxSizeBytes ?? d.download.maxSizeBytes,
      warnSizeBytes: s.download?.warnSizeBytes ?? d.download.warnSizeBytes,
    },
    userAgent: s.userAgent ?? d.userAgent,
    debug: s.debug ?? d.debug,
  };
}

/** What kind of scope a name is: decides its default concurrency. */
export type ScopeKind = "domain" | "ip" | "custom";

/**
 * Classify a scope name: an IP literal is an IP scope, a host name (with an
 * optional port) a domain scope, anything else (`"api"`, `"example.com/search"`)
 * a custom scope. Decision written in docs/DECISIONS.md. The same as
 * `/^\d{1,3}(\.\d{1,3}){3}$/`, a leading `[` or two colons or more for an IP;
 * `/^[a-z0-9-]+(\.[a-z0-9-]+)*\.?(:\d{1,5})?$/i` with a dot or a leading
 * `localhost` for a domain.
 */
export function scopeKind(scope: string): ScopeKind {
  // One pass instead of two regular expressions (a broad crawl classifies
  // every new host). The host part is labels of [A-Za-z0-9-] joined by single
  // dots with an optional final dot; then an optional ":" and 1 to 5 digits.
  const n = scope.length;
  if (n > 0 && scope.charCodeAt(0) === 91 /* [ */) return "ip";
  let label = 0; // length of the current label
  let dots = 0;
  let hostlike = n > 0;
  let numeric = true; // only digits and dots, labels of at most 3 digits
  let i = 0;
  for (; i < n; i++) {
    const c = scope.charCodeAt(i);
    if (c === 46 /* . */) {
      if (label === 0) hostlike = false;
      label = 0;
      dots++;
    } else if (c >= 48 && c <= 57) {
      if (++label > 3) numeric = false;
    } else if (c === 58 /* : */) {
      break;
    } else {
      const l = c | 32;
      if ((l >= 97 && l <= 122) || c === 45 /* - */) label++;
      else hostlike = false;
      numeric = false;
    }
  }
  if (i === n) {
    if (numeric && hostlike && dots === 3 && label > 0) return "ip";
  } else {
    if (i === 0) hostlike = false;
    let digits = 0;
    for (let j = i + 1; j < n; j++) {
      const c = scope.charCodeAt(j);
      if (c === 58 /* : */) return "ip"; // two colons or more: IPv6
      if (c >= 48 && c <= 57) digits++;
      else hostlike = false;
    }
    if (digits === 0 || digits > 5) hostlike = false;
  }
  return hostlike && (dots > 0 || scope.startsWith("localhost")) ? "domain" : "custom";
}

/**
 * The configuration of one scope: its own entry, else (for `host:port`) the
 * entry of its host name, over the global defaults for its kind.
 *
 * @param settings Resolved settings.
 * @param scope The scope name.
 * @param kind Its kind (by default from its name).
 * @returns The scope's configuration with defaults.
 */
export function resolveScopeConfig(
  settings: ThrottlerSettings,
  scope: string,
  kind: ScopeKind = scopeKind(scope),
): ResolvedScopeConfig {
  // Own entries only: a scope named "constructor" has no configuration unless given one.
  let configured = own(settings.scopes, scope);
  if (configured === undefined && kind === "domain") {
    const colon = scope.lastIndexOf(":");
    if (colon > 0) configured = own(settings.scopes, scope.slice(0, colon));
  }
  const o = (configured ?? {}) as z.output<typeof scopeConfigSchema>;
  const concurrency = o.concurrency ??
    (kind === "domain"
      ? settings.concurrentRequestsPerDomain
      : kind === "ip"
      ? settings.concurrentRequestsPerIp || settings.concurrentRequestsPerDomain
      : settings.scopeConcurrency);
  const rampup = o.rampup === undefined || o.rampup === false
    ? undefined
    : resolveRampup(settings.rampup, o.rampup === true ? undefined : o.rampup);
  return {
    concurrency,
    minConcurrency: Math.min(o.minConcurrency ?? 1, concurrency),
    maxConcurrency: settings.concurrentRequests,
    delayMs: o.delayMs ?? (kind === "custom" ? 0 : settings.downloadDelayMs),
    jitter: o.jitter === undefined ? settings.jitter : normalizeJitter(o.jitter),
    quota: o.quota,
    windowMs: o.windowMs ?? settings.windowMs,
    rampup,
    adaptive: o.adaptive ?? (settings.adaptive && kind !== "custom"),
    backoff: resolveBackoff(settings.backoff, o.backoff),
    manager: o.manager,
    ignoreRobotsTxt: o.ignoreRobotsTxt ?? false,
  };
}
