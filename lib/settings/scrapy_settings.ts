/**
 * Scrapy's settings, brought over unchanged: UPPER_CASE names, durations in
 * seconds, `THROTTLING_SCOPES` entries with snake_case keys. They are converted
 * into politely's settings (camelCase, milliseconds) and validated at once, and
 * a bad value is reported under the name and in the unit the user wrote.
 *
 * Size: the table of Scrapy's settings (read, converted, ignored, or a
 * plugin's) is half the file; the conversion and its messages are the rest.
 *
 * @module
 */
import { closestName } from "./_closest_name.ts";
import { formatSettingsError, formatValue, valueAt } from "./_format_settings_error.ts";
import type { SettingOrigin } from "./_format_settings_error.ts";
import { parseSettings, settingsSchema } from "./settings.ts";
import { own, setOwn } from "./_own.ts";
import type { ThrottlerSettingsInput } from "./settings.ts";

type Path = readonly PropertyKey[];

/** Something worth telling the user about a settings dict that still loaded. */
export interface ScrapySettingsWarning {
  /**
   * `ignored`: real Scrapy settings that politely has no use for;
   * `deprecated`: `AUTOTHROTTLE_*`, with the replacement named;
   * `unsupported`: a value politely cannot honour (a custom queue class), so
   * the default is kept.
   */
  readonly code: "ignored" | "deprecated" | "unsupported";
  /** The Scrapy settings concerned. */
  readonly settings: readonly string[];
  /** One line for a person. */
  readonly message: string;
}

/** What {@link fromScrapySettings} and {@link loadSettings} return. */
export interface ConvertedSettings {
  /** politely's settings, already validated. */
  readonly settings: ThrottlerSettingsInput;
  /** Each concern reported once. */
  readonly warnings: readonly ScrapySettingsWarning[];
}

/** Options of {@link fromScrapySettings} and {@link loadSettings}. */
export interface FromScrapySettingsOptions {
  /**
   * More names to ignore quietly, e.g. the settings of Scrapy plugins
   * (`ZYTE_API_KEY`). Other UPPER_CASE names that are neither politely's nor
   * Scrapy's are ignored with one warning, unless they are a near-miss of a
   * setting politely reads (`DOWNLOAD_DELAYY`): that is an error. A name
   * listed here is never taken for a typo.
   * @default []
   */
  readonly ignore?: Iterable<string>;
  /** What is being created, for error messages. @default "throttler" */
  readonly what?: string;
  /**
   * Told each warning, in order, once the settings are valid; they are
   * returned as `warnings` all the same. For the one-call form
   * `createThrottler(fromScrapySettings(dict, { onWarning }))`, which passes
   * on only the settings.
   * @default nothing is told
   */
  readonly onWarning?: (warning: ScrapySettingsWarning) => void;
}

/** A Scrapy setting that maps onto one of ours, possibly scaled (seconds to ms). */
interface Mapping {
  readonly path: readonly string[];
  readonly scale?: number;
}

const SECONDS = 1000;

/** The Scrapy settings politely honours directly. */
const DIRECT: Readonly<Record<string, Mapping>> = {
  CONCURRENT_REQUESTS: { path: ["concurrentRequests"] },
  CONCURRENT_REQUESTS_PER_DOMAIN: { path: ["concurrentRequestsPerDomain"] },
  CONCURRENT_REQUESTS_PER_IP: { path: ["concurrentRequestsPerIp"] },
  THROTTLING_SCOPE_CONCURRENCY: { path: ["scopeConcurrency"] },
  DOWNLOAD_DELAY: { path: ["downloadDelayMs"], scale: SECONDS },
  RANDOMIZE_DOWNLOAD_DELAY: { path: ["jitter"] },
  THROTTLING_WINDOW: { path: ["windowMs"], scale: SECONDS },
  THROTTLING_SCOPE_LIMIT: { path: ["scopeLimit"] },
  THROTTLING_SCOPE_MAX_IDLE: { path: ["scopeMaxIdleMs"], scale: SECONDS },
  THROTTLING_ROBOTSTXT_OBEY: { path: ["throttlingRobotsTxtObey"] },
  THROTTLING_ROBOTSTXT_MAX_DELAY: { path: ["robotsTxtMaxDelayMs"], scale: SECONDS },
  DELAYED_REQUESTS_WARN_THRESHOLD: { path: ["delayedRequestsWarnThreshold"] },
  BACKOFF_HTTP_CODES: { path: ["backoff", "httpCodes"] },
  BACKOFF_DELAY_FACTOR: { path: ["backoff", "delayFactor"] },
  BACKOFF_MAX_DELAY: { path: ["backoff", "maxDelayMs"], scale: SECONDS },
  BACKOFF_MIN_DELAY: { path: ["backoff", "minDelayMs"], scale: SECONDS },
  BACKOFF_JITTER: { path: ["backoff", "jitter"] },
  BACKOFF_WINDOW: { path: ["backoff", "windowMs"], scale: SECONDS },
  RAMPUP_BACKOFF_TARGET: { path: ["rampup", "backoffTarget"] },
  ROBOTSTXT_OBEY: { path: ["robotsTxtObey"] },
  USER_AGENT: { path: ["userAgent"] },
  DOWNLOAD_TIMEOUT: { path: ["downloadTimeoutMs"], scale: SECONDS },
  DOWNLOAD_MAXSIZE: { path: ["download", "maxSizeBytes"] },
  DOWNLOAD_WARNSIZE: { path: ["download", "warnSizeBytes"] },
  RETRY_ENABLED: { path: ["retry", "enabled"] },
  RETRY_TIMES: { path: ["retry", "times"] },
  RETRY_HTTP_CODES: { path: ["retry", "httpCodes"] },
  JOBDIR: { path: ["queue", "jobDir"] },
  DEPTH_PRIORITY: { path: ["queue", "depthPriority"] },
  AUTOTHROTTLE_ENABLED: { path: ["autothrottle", "enabled"] },
  AUTOTHROTTLE_START_DELAY: { path: ["autothrottle", "startDelayMs"], scale: SECONDS },
  AUTOTHROTTLE_MAX_DELAY: { path: ["autothrottle", "maxDelayMs"], scale: SECONDS },
  AUTOTHROTTLE_TARGET_CONCURRENCY: { path: ["autothrottle", "targetConcurrency"] },
};

/** Settings that need more than a rename. */
const SPECIAL = [
  "THROTTLING_SCOPES",
  "BACKOFF_EXCEPTIONS",
  "THROTTLING_DEBUG",
  "AUTOTHROTTLE_DEBUG",
  "SCHEDULER_MEMORY_QUEUE",
  "SCHEDULER_DISK_QUEUE",
  "SCHEDULER_PRIORITY_QUEUE",
  "DUPEFILTER_CLASS",
] as const;

/** The reference's migration table, as the warning each deprecated name gets. */
const AUTOTHROTTLE_REPLACEMENTS: Readonly<Record<string, string>> = {
  AUTOTHROTTLE_ENABLED:
    "throttling and backoff are always active, so drop it (the latency-based delay still runs, as 'autothrottle.enabled')",
  AUTOTHROTTLE_START_DELAY: "use DOWNLOAD_DELAY ('downloadDelayMs') instead",
  AUTOTHROTTLE_MAX_DELAY: "use BACKOFF_MAX_DELAY ('backoff.maxDelayMs') instead",
  AUTOTHROTTLE_TARGET_CONCURRENCY:
    "use rampup instead (\"rampup\": True in a THROTTLING_SCOPES entry, 'scopes[...].rampup: true')",
  AUTOTHROTTLE_DEBUG: "use THROTTLING_DEBUG ('debug') instead",
};

/** Real Scrapy settings politely cannot honour, with what to do instead. */
const IGNORED_WITH_HINT: Readonly<Record<string, string>> = {
  THROTTLING_MANAGER:
    "pass a throttling manager in code instead (its getScopes decides the scopes)",
  THROTTLING_SCOPE_MANAGER: "give a scope a 'manager' function in code instead",
  DOWNLOAD_SLOTS: "use THROTTLING_SCOPES instead",
  SCHEDULER: "the scheduler is always politely's; SCHEDULER_PRIORITY_QUEUE chooses its order",
  SCHEDULER_START_MEMORY_QUEUE: "start requests always go in the order given",
  SCHEDULER_START_DISK_QUEUE: "start requests always go in the order given",
  RETRY_EXCEPTIONS: "retries follow RETRY_HTTP_CODES and BACKOFF_EXCEPTIONS",
};

/**
 * Scrapy's documented settings that have nothing to do with throttling or
 * scheduling. A settings dict that has them still loads; they are reported
 * once, as ignored.
 */
export const IGNORED_SCRAPY_SETTINGS: ReadonlySet<string> = new Set([
  "ADDONS",
  "AJAXCRAWL_ENABLED",
  "AJAXCRAWL_MAXSIZE",
  "ASYNCIO_EVENT_LOOP",
  "AWS_ACCESS_KEY_ID",
  "AWS_ENDPOINT_URL",
  "AWS_REGION_NAME",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_USE_SSL",
  "AWS_VERIFY",
  "BOT_NAME",
  "CLOSESPIDER_ERRORCOUNT",
  "CLOSESPIDER_ITEMCOUNT",
  "CLOSESPIDER_PAGECOUNT",
  "CLOSESPIDER_PAGECOUNT_NO_ITEM",
  "CLOSESPIDER_TIMEOUT",
  "CLOSESPIDER_TIMEOUT_NO_ITEM",
  "COMMANDS_MODULE",
  "COMPRESSION_ENABLED",
  "CONCURRENT_ITEMS",
  "COOKIES_DEBUG",
  "COOKIES_ENABLED",
  "DEFAULT_ITEM_CLASS",
  "DEFAULT_REQUEST_HEADERS",
  "DEPTH_LIMIT",
  "DEPTH_STATS_VERBOSE",
  "DNSCACHE_ENABLED",
  "DNSCACHE_SIZE",
  "DNS_RESOLVER",
  "DNS_TIMEOUT",
  "DOWNLOADER",
  "DOWNLOADER_CLIENTCONTEXTFACTORY",
  "DOWNLOADER_CLIENT_TLS_CIPHERS",
  "DOWNLOADER_CLIENT_TLS_METHOD",
  "DOWNLOADER_CLIENT_TLS_VERBOSE_LOGGING",
  "DOWNLOADER_HTTPCLIENTFACTORY",
  "DOWNLOADER_MIDDLEWARES",
  "DOWNLOADER_MIDDLEWARES_BASE",
  "DOWNLOADER_STATS",
  "DOWNLOAD_FAIL_ON_DATALOSS",
  "DOWNLOAD_HANDLERS",
  "DOWNLOAD_HANDLERS_BASE",
  "DUPEFILTER_DEBUG",
  "EDITOR",
  "EXTENSIONS",
  "EXTENSIONS_BASE",
  "FEEDS",
  "FEED_EXPORTERS",
  "FEED_EXPORTERS_BASE",
  "FEED_EXPORT_BATCH_ITEM_COUNT",
  "FEED_EXPORT_ENCODING",
  "FEED_EXPORT_FIELDS",
  "FEED_EXPORT_INDENT",
  "FEED_STORAGES",
  "FEED_STORAGES_BASE",
  "FEED_STORAGE_FTP_ACTIVE",
  "FEED_STORAGE_GCS_ACL",
  "FEED_STORAGE_S3_ACL",
  "FEED_STORE_EMPTY",
  "FEED_TEMPDIR",
  "FEED_URI_PARAMS",
  "FILES_EXPIRES",
  "FILES_RESULT_FIELD",
  "FILES_STORE",
  "FILES_STORE_GCS_ACL",
  "FILES_STORE_S3_ACL",
  "FILES_URLS_FIELD",
  "FORCE_CRAWLER_PROCESS",
  "GCS_PROJECT_ID",
  "HTTPCACHE_ALWAYS_STORE",
  "HTTPCACHE_DBM_MODULE",
  "HTTPCACHE_DIR",
  "HTTPCACHE_ENABLED",
  "HTTPCACHE_EXPIRATION_SECS",
  "HTTPCACHE_GZIP",
  "HTTPCACHE_IGNORE_HTTP_CODES",
  "HTTPCACHE_IGNORE_MISSING",
  "HTTPCACHE_IGNORE_RESPONSE_CACHE_CONTROLS",
  "HTTPCACHE_IGNORE_SCHEMES",
  "HTTPCACHE_POLICY",
  "HTTPCACHE_STORAGE",
  "HTTPERROR_ALLOWED_CODES",
  "HTTPERROR_ALLOW_ALL",
  "HTTPPROXY_AUTH_ENCODING",
  "HTTPPROXY_ENABLED",
  "IMAGES_EXPIRES",
  "IMAGES_MIN_HEIGHT",
  "IMAGES_MIN_WIDTH",
  "IMAGES_RESULT_FIELD",
  "IMAGES_STORE",
  "IMAGES_STORE_GCS_ACL",
  "IMAGES_STORE_S3_ACL",
  "IMAGES_THUMBS",
  "IMAGES_URLS_FIELD",
  "ITEM_PIPELINES",
  "ITEM_PIPELINES_BASE",
  "JSON_ENCODER",
  "LOGSTATS_INTERVAL",
  "LOG_DATEFORMAT",
  "LOG_ENABLED",
  "LOG_ENCODING",
  "LOG_FILE",
  "LOG_FILE_APPEND",
  "LOG_FORMAT",
  "LOG_FORMATTER",
  "LOG_LEVEL",
  "LOG_SHORT_NAMES",
  "LOG_STDOUT",
  "LOG_VERSIONS",
  "MAIL_FROM",
  "MAIL_HOST",
  "MAIL_PASS",
  "MAIL_PORT",
  "MAIL_SSL",
  "MAIL_TLS",
  "MAIL_USER",
  "MEDIA_ALLOW_REDIRECTS",
  "MEMDEBUG_ENABLED",
  "MEMDEBUG_NOTIFY",
  "MEMUSAGE_CHECK_INTERVAL_SECONDS",
  "MEMUSAGE_ENABLED",
  "MEMUSAGE_LIMIT_MB",
  "MEMUSAGE_NOTIFY_MAIL",
  "MEMUSAGE_WARNING_MB",
  "METAREFRESH_ENABLED",
  "METAREFRESH_IGNORE_TAGS",
  "METAREFRESH_MAXDELAY",
  "NEWSPIDER_MODULE",
  "PERIODIC_LOG_DELTA",
  "PERIODIC_LOG_STATS",
  "PERIODIC_LOG_TIMING_ENABLED",
  "REACTOR_THREADPOOL_MAXSIZE",
  "REDIRECT_ENABLED",
  "REDIRECT_MAX_DELAY",
  "REDIRECT_MAX_TIMES",
  "REDIRECT_PRIORITY_ADJUST",
  "REFERER_ENABLED",
  "REFERRER_POLICIES",
  "REFERRER_POLICY",
  "REQUEST_FINGERPRINTER_CLASS",
  "REQUEST_FINGERPRINTER_IMPLEMENTATION",
  "RETRY_PRIORITY_ADJUST",
  "ROBOTSTXT_PARSER",
  "ROBOTSTXT_USER_AGENT",
  "SCHEDULER_DEBUG",
  "SCRAPER_SLOT_MAX_ACTIVE_SIZE",
  "SPIDER_CONTRACTS",
  "SPIDER_CONTRACTS_BASE",
  "SPIDER_LOADER_CLASS",
  "SPIDER_LOADER_WARN_ONLY",
  "SPIDER_MIDDLEWARES",
  "SPIDER_MIDDLEWARES_BASE",
  "SPIDER_MODULES",
  "STATSMAILER_RCPTS",
  "STATS_CLASS",
  "STATS_DUMP",
  "TELNETCONSOLE_ENABLED",
  "TELNETCONSOLE_HOST",
  "TELNETCONSOLE_PASSWORD",
  "TELNETCONSOLE_PORT",
  "TELNETCONSOLE_USERNAME",
  "TEMPLATES_DIR",
  "TWISTED_REACTOR",
  "URLLENGTH_LIMIT",
  "WARN_ON_GENERATOR_RETURN_VALUE",
]);

/** `THROTTLING_SCOPES` entry keys, snake_case, with ours. */
const SCOPE_KEYS: Readonly<Record<string, Mapping>> = {
  concurrency: { path: ["concurrency"] },
  min_concurrency: { path: ["minConcurrency"] },
  delay: { path: ["delayMs"], scale: SECONDS },
  jitter: { path: ["jitter"] },
  quota: { path: ["quota"] },
  window: { path: ["windowMs"], scale: SECONDS },
  rampup: { path: ["rampup"] },
  backoff: { path: ["backoff"] },
  manager: { path: ["manager"] },
  ignore_robots_txt: { path: ["ignoreRobotsTxt"] },
};

/** `BackoffConfig` keys. */
const BACKOFF_KEYS: Readonly<Record<string, Mapping>> = {
  http_codes: { path: ["httpCodes"] },
  exceptions: { path: ["exceptions"] },
  delay_factor: { path: ["delayFactor"] },
  max_delay: { path: ["maxDelayMs"], scale: SECONDS },
  min_delay: { path: ["minDelayMs"], scale: SECONDS },
  jitter: { path: ["jitter"] },
  window: { path: ["windowMs"], scale: SECONDS },
};

/** Rampup dict keys. */
const RAMPUP_KEYS: Readonly<Record<string, Mapping>> = {
  backoff_target: { path: ["backoffTarget"] },
  delay_factor: { path: ["delayFactor"] },
  min_delay: { path: ["minDelayMs"], scale: SECONDS },
};

const KNOWN_SCRAPY_NAMES: readonly string[] = [
  ...Object.keys(DIRECT),
  ...SPECIAL,
  ...Object.keys(IGNORED_WITH_HINT),
  ...IGNORED_SCRAPY_SETTINGS,
];

/**
 * The names an unknown UPPER_CASE name is checked against for a typo: the
 * settings that change what politely does, or that get a hint. A name within
 * {@link NEAR_MISS_EDITS} of one is an error; anything further is taken for
 * another Scrapy plugin's setting and ignored with a warning, since a plugin's
 * name that merely resembles one of Scrapy's (`DOWNLOAD_DELAY_RANDOM`,
 * `RETRY_TIMES_PROXY`) must not stop a crawl.
 */
const NEAR_MISS_CANDIDATES: readonly string[] = [
  ...Object.keys(DIRECT),
  ...SPECIAL,
  ...Object.keys(IGNORED_WITH_HINT),
];

/** A typo of a setting we read is one or two edits away (`DOWNLOAD_DELAYY`, `DOWNLOADER_DELAY`). */
const NEAR_MISS_EDITS = 2;

/**
 * Settings of well-known Scrapy plugins that are near-misses of ours, so they
 * are ignored like any other plugin's: scrapy-useragents reads `USER_AGENTS`.
 */
const PLUGIN_NEAR_MISSES: ReadonlySet<string> = new Set(["USER_AGENTS"]);

/** How Scrapy's settings (and its plugins') are named; camelCase names are ours. */
const SCRAPY_NAME = /^[A-Z][A-Z0-9_]*$/;

/** The valid names are listed after an unknown one only when they are few enough to read. */
const MAX_LISTED_NAMES = 10;

/** Where one of our values came from in the Scrapy dict. */
interface Origin {
  readonly ours: Path;
  readonly theirs: Path;
  readonly scale: number;
}

/** A conversion before validation. */
interface Draft {
  readonly out: Record<string, unknown>;
  readonly origins: Origin[];
  readonly warnings: ScrapySettingsWarning[];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Seconds to ms without float noise (1.1 s is 1100 ms, not 1100.0000000000002). */
function scaled(value: unknown, scale: number): unknown {
  if (scale === 1 || typeof value !== "number" || !Number.isFinite(value)) return value;
  return Number((value * scale).toPrecision(15));
}

function setAt(root: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = root;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (isPlainObject(next)) node = next;
    else node = node[key] = {};
  }
  node[path[path.length - 1]!] = value;
}

/** A Scrapy path as Python would index it: `THROTTLING_SCOPES["a.com"]["delay"]`. */
function formatScrapyPath(path: Path): string {
  return path.map((key, i) =>
    i === 0
      ? String(key)
      : typeof key === "number"
      ? `[${key}]`
      : `[${JSON.stringify(String(key))}]`
  ).join("");
}

/** `"scrapy.exceptions.DownloadTimeoutError"` → `"DownloadTimeoutError"`; anything else unchanged. */
function errorName(matcher: unknown): unknown {
  return typeof matcher === "string" ? matcher.slice(matcher.lastIndexOf(".") + 1) : matcher;
}

function unknownKey(shown: string, key: string, valid: readonly string[]): string {
  const suggestion = closestName(key, valid);
  if (suggestion !== undefined) return `Unknown setting '${shown}' (did you mean '${suggestion}'?)`;
  return valid.length <= MAX_LISTED_NAMES
    ? `Unknown setting '${shown}' (valid here: ${valid.join(", ")})`
    : `Unknown setting '${shown}'`;
}

/**
 * Convert a snake_case dict (a scope, its backoff, its rampup) key by key,
 * recording where each value came from. Unknown keys are collected as errors.
 */
function convertDict(
  dict: Record<string, unknown>,
  keys: Readonly<Record<string, Mapping>>,
  ours: Path,
  theirs: Path,
  draft: Draft,
  errors: string[],
  nested: (key: string, value: unknown, ours: Path, theirs: Path) => unknown = (_k, v) => v,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(dict)) {
    const mapping = own(keys, key);
    if (mapping === undefined) {
      errors.push(unknownKey(formatScrapyPath([...theirs, key]), key, Object.keys(keys)));
      continue;
    }
    if (value === null || value === undefined) continue;
    const ourPath = [...ours, ...mapping.path];
    const theirPath = [...theirs, key];
    const scale = mapping.scale ?? 1;
    draft.origins.push({ ours: ourPath, theirs: theirPath, scale });
    setAt(out, mapping.path, nested(key, scaled(value, scale), ourPath, theirPath));
  }
  return out;
}

function convertBackoff(
  value: unknown,
  ours: Path,
  theirs: Path,
  draft: Draft,
  errors: string[],
): unknown {
  if (!isPlainObject(value)) return value;
  return convertDict(
    value,
    BACKOFF_KEYS,
    ours,
    theirs,
    draft,
    errors,
    (key, v) => key === "exceptions" && Array.isArray(v) ? v.map(errorName) : v,
  );
}

function convertScopes(scopes: unknown, draft: Draft, errors: string[]): unknown {
  if (!isPlainObject(scopes)) return scopes;
  const out: Record<string, unknown> = {};
  for (const [scope, config] of Object.entries(scopes)) {
    const ours = ["scopes", scope];
    const theirs = ["THROTTLING_SCOPES", scope];
    draft.origins.push({ ours, theirs, scale: 1 });
    if (!isPlainObject(config)) {
      setOwn(out, scope, config);
      continue;
    }
    const entry = convertDict(config, SCOPE_KEYS, ours, theirs, draft, errors, (key, v, o, t) => {
      if (key === "backoff") return convertBackoff(v, o, t, draft, errors);
      if (key === "rampup" && isPlainObject(v)) {
        return convertDict(v, RAMPUP_KEYS, o, t, draft, errors);
      }
      return v;
    });
    setOwn(out, scope, entry);
  }
  return out;
}

/** The last segment of a Scrapy import path, or a TypeError naming the setting. */
function className(name: string, value: unknown, what: string): string {
  if (typeof value !== "string") {
    throw new TypeError(
      `Cannot create ${what} as '${name}' must be an import path string: current value is ${
        formatValue(value)
      }`,
    );
  }
  return value.slice(value.lastIndexOf(".") + 1);
}

function unsupported(draft: Draft, name: string, value: unknown, keeps: string): void {
  draft.warnings.push({
    code: "unsupported",
    settings: [name],
    message: `${name} = ${formatValue(value)} is not supported by politely, so ${keeps}`,
  });
}

/** Convert without validating: shared by fromScrapySettings and loadSettings. */
function convert(
  dict: Readonly<Record<string, unknown>>,
  options: FromScrapySettingsOptions,
): Draft {
  const what = options.what ?? "throttler";
  const draft: Draft = { out: {}, origins: [], warnings: [] };
  const quietlyIgnored = new Set(options.ignore ?? []);
  const errors: string[] = [];
  const ignored: string[] = [];
  const unknown: string[] = [];
  const set = (name: string, path: readonly string[], value: unknown, scale = 1) => {
    draft.origins.push({ ours: path, theirs: [name], scale });
    setAt(draft.out, path, scaled(value, scale));
  };
  const queueOrder: Record<string, "fifo" | "lifo"> = {};

  for (const [name, value] of Object.entries(dict)) {
    if (quietlyIgnored.has(name)) continue;
    const direct = own(DIRECT, name);
    const isSpecial = (SPECIAL as readonly string[]).includes(name);
    if (direct === undefined && !isSpecial) {
      if (IGNORED_SCRAPY_SETTINGS.has(name)) ignored.push(name);
      else if (own(IGNORED_WITH_HINT, name) !== undefined) {
        draft.warnings.push({
          code: "ignored",
          settings: [name],
          message: `Ignored ${name}: ${IGNORED_WITH_HINT[name]}`,
        });
      } else if (!SCRAPY_NAME.test(name)) {
        const suggestion = closestName(name, KNOWN_SCRAPY_NAMES);
        errors.push(
          suggestion === undefined
            ? `Unknown setting '${name}' (Scrapy's settings are UPPER_CASE)`
            : `Unknown setting '${name}' (did you mean '${suggestion}'?)`,
        );
      } else {
        const typo = PLUGIN_NEAR_MISSES.has(name)
          ? undefined
          : closestName(name, NEAR_MISS_CANDIDATES, NEAR_MISS_EDITS);
        if (typo === undefined) unknown.push(name);
        else errors.push(`Unknown setting '${name}' (did you mean '${typo}'?)`);
      }
      continue;
    }
    if (own(AUTOTHROTTLE_REPLACEMENTS, name) !== undefined) {
      draft.warnings.push({
        code: "deprecated",
        settings: [name],
        message: `${name} is deprecated: ${AUTOTHROTTLE_REPLACEMENTS[name]}`,
      });
    }
    // Python's None is Scrapy's "not set" (JOBDIR = None).
    if (value === null || value === undefined) continue;
    if (direct !== undefined) {
      set(name, direct.path, value, direct.scale);
      continue;
    }
    switch (name) {
      case "THROTTLING_SCOPES":
        draft.origins.push({ ours: ["scopes"], theirs: [name], scale: 1 });
        draft.out["scopes"] = convertScopes(value, draft, errors);
        break;
      case "BACKOFF_EXCEPTIONS":
        set(name, ["backoff", "exceptions"], Array.isArray(value) ? value.map(errorName) : value);
        break;
      case "THROTTLING_DEBUG":
      case "AUTOTHROTTLE_DEBUG": {
        // Either asks for the same log; one that is on wins.
        const other = name === "THROTTLING_DEBUG"
          ? dict["AUTOTHROTTLE_DEBUG"]
          : dict["THROTTLING_DEBUG"];
        if (value === false && other === true) break;
        set(name, ["debug"], value);
        break;
      }
      case "SCHEDULER_MEMORY_QUEUE":
      case "SCHEDULER_DISK_QUEUE": {
        const cls = className(name, value, what);
        if (cls.includes("Fifo")) queueOrder[name] = "fifo";
        else if (cls.includes("Lifo")) queueOrder[name] = "lifo";
        else unsupported(draft, name, value, "the default LIFO order is kept");
        break;
      }
      case "SCHEDULER_PRIORITY_QUEUE": {
        const cls = className(name, value, what);
        const order = cls === "ThrottlingAwarePriorityQueue"
          ? "throttling-aware"
          : cls === "DownloaderAwarePriorityQueue"
          ? "downloader-aware"
          : cls === "ScrapyPriorityQueue"
          ? "priority"
          : undefined;
        if (order === undefined) {
          unsupported(draft, name, value, "the throttling-aware order is kept");
        } else set(name, ["queue", "order"], order);
        break;
      }
      case "DUPEFILTER_CLASS": {
        const cls = className(name, value, what);
        if (cls === "BaseDupeFilter") set(name, ["queue", "dedupe"], false);
        else if (cls === "RFPDupeFilter") set(name, ["queue", "dedupe"], true);
        else unsupported(draft, name, value, "duplicates are filtered by fingerprint");
        break;
      }
    }
  }

  const memory = queueOrder["SCHEDULER_MEMORY_QUEUE"];
  const disk = queueOrder["SCHEDULER_DISK_QUEUE"];
  if (memory !== undefined && disk !== undefined && memory !== disk) {
    draft.warnings.push({
      code: "unsupported",
      settings: ["SCHEDULER_MEMORY_QUEUE", "SCHEDULER_DISK_QUEUE"],
      message:
        `SCHEDULER_MEMORY_QUEUE is ${memory.toUpperCase()} but SCHEDULER_DISK_QUEUE is ${disk.toUpperCase()}: ` +
        `politely keeps one order for both and follows SCHEDULER_MEMORY_QUEUE`,
    });
  }
  const order = memory ?? disk;
  if (order !== undefined) {
    set(
      memory !== undefined ? "SCHEDULER_MEMORY_QUEUE" : "SCHEDULER_DISK_QUEUE",
      ["queue", "fifo"],
      order === "fifo",
    );
  }

  if (errors.length > 0) throw new TypeError(errors.join("; "));
  if (unknown.length > 0) {
    // Names only: a plugin's settings hold keys and passwords (ZYTE_API_KEY).
    draft.warnings.unshift({
      code: "ignored",
      settings: unknown,
      message: `Ignored settings that neither politely nor Scrapy knows (a Scrapy plugin's?): ${
        unknown.join(", ")
      }`,
    });
  }
  if (ignored.length > 0) {
    draft.warnings.unshift({
      code: "ignored",
      settings: ignored,
      message: `Ignored Scrapy settings that politely has no use for: ${ignored.join(", ")}`,
    });
  }
  return draft;
}

/**
 * The Scrapy name of a setting the user did not write (a default another
 * setting is checked against), so the message keeps to Scrapy's names and units.
 */
function unsetScrapyName(path: Path): SettingOrigin | undefined {
  for (const [name, mapping] of Object.entries(DIRECT)) {
    if (mapping.path.length === path.length && mapping.path.every((key, i) => key === path[i])) {
      return { name, value: undefined, scale: mapping.scale ?? 1 };
    }
  }
  return undefined;
}

/** Map a path of our settings back to the Scrapy name and value it came from. */
function locator(
  dict: Readonly<Record<string, unknown>>,
  origins: readonly Origin[],
  nameUnset = true,
): (path: Path) => SettingOrigin | undefined {
  return (path) => {
    let best: Origin | undefined;
    for (const origin of origins) {
      const o = origin.ours;
      if (o.length > path.length || (best && o.length <= best.ours.length)) continue;
      if (o.every((key, i) => key === path[i])) best = origin;
    }
    if (best === undefined) return nameUnset ? unsetScrapyName(path) : undefined;
    const rest = path.slice(best.ours.length);
    const theirs = [...best.theirs, ...rest];
    return {
      name: formatScrapyPath(theirs),
      value: valueAt(dict, theirs),
      scale: rest.length === 0 ? best.scale : 1,
    };
  };
}

function validate(
  out: Record<string, unknown>,
  locate: (path: Path) => SettingOrigin | undefined,
  what: string,
): ThrottlerSettingsInput {
  const result = settingsSchema.safeParse(out);
  if (!result.success) {
    throw formatSettingsError(result.error, out, what, { schema: settingsSchema, locate });
  }
  // parseSettings may check more than the schema (relations between values).
  parseSettings(out, what);
  return out as ThrottlerSettingsInput;
}

/**
 * Convert a Scrapy settings dict (UPPER_CASE names, seconds, snake_case scope
 * keys) into politely's settings (camelCase, milliseconds), and validate them.
 *
 * `AUTOTHROTTLE_*` settings still work, each with a deprecation warning naming
 * its replacement. Scrapy settings that politely has no use for
 * (`ITEM_PIPELINES`, `LOG_LEVEL`) are reported once, as ignored, and so are
 * UPPER_CASE names that neither politely nor Scrapy knows (a plugin's, such
 * as `ZYTE_API_KEY`), in a warning of their own. Python's `None` means "not
 * set". Exception import paths become error names (`"builtins.IOError"` →
 * `"IOError"`).
 *
 * What it returns can be given to `createThrottler` as it is:
 * `createThrottler(fromScrapySettings(dict))`.
 *
 * @param dict The Scrapy settings.
 * @param options Names to ignore quietly, what is being created, a warning callback.
 * @returns politely's settings and the warnings.
 * @throws {TypeError} on a near-miss of a setting politely reads
 * (`DOWNLOAD_DELAYY`, with the name it was meant to be), a name that is not
 * UPPER_CASE, or a value of the wrong type; messages use the Scrapy name and
 * unit.
 * @throws {RangeError} on a value out of range, e.g.
 * `Cannot create throttler as 'DOWNLOAD_DELAY' must be >= 0: current value is -1`.
 * @example A Scrapy settings.py, as a dict
 * ```ts
 * import { fromScrapySettings } from "./scrapy_settings.ts";
 * const { settings, warnings } = fromScrapySettings({
 *   BOT_NAME: "books",
 *   DOWNLOAD_DELAY: 0.5,
 *   THROTTLING_SCOPES: { "api.example.com": { delay: 0.08, min_concurrency: 2 } },
 * });
 * console.assert(settings.downloadDelayMs === 500);
 * console.assert(warnings[0]?.code === "ignored");
 * ```
 */
export function fromScrapySettings(
  dict: Readonly<Record<string, unknown>>,
  options: FromScrapySettingsOptions = {},
): ConvertedSettings {
  if (!isPlainObject(dict)) {
    throw new TypeError(
      `Cannot create ${
        options.what ?? "throttler"
      } as the Scrapy settings must be an object: current value is ${formatValue(dict)}`,
    );
  }
  const draft = convert(dict, options);
  const settings = validate(draft.out, locator(dict, draft.origins), options.what ?? "throttler");
  return converted(settings, draft.warnings, options);
}

function converted(
  settings: ThrottlerSettingsInput,
  warnings: readonly ScrapySettingsWarning[],
  options: FromScrapySettingsOptions,
): ConvertedSettings {
  if (options.onWarning !== undefined) { for (const w of warnings) options.onWarning(w); }
  return { settings, warnings };
}

/** Plain objects merge key by key; anything else (arrays, functions) replaces. */
function deepMerge(
  base: Record<string, unknown>,
  over: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const below = own(out, key);
    const merged = isPlainObject(below) && isPlainObject(value) ? deepMerge(below, value) : value;
    setOwn(out, key, merged);
  }
  return out;
}

/**
 * Load a settings dict written with politely's camelCase names, Scrapy's
 * UPPER_CASE names, or both: UPPER_CASE names go through
 * {@link fromScrapySettings}, then camelCase ones are merged over them (nested
 * objects key by key). This is what the command line's `--settings FILE` reads.
 *
 * @param dict The settings.
 * @param options As for {@link fromScrapySettings}.
 * @returns politely's settings, validated, and the warnings.
 * @throws {TypeError | RangeError} as {@link fromScrapySettings}; a bad
 * camelCase value is reported under its camelCase path.
 * @example Scrapy's names and ours together
 * ```ts
 * import { loadSettings } from "./scrapy_settings.ts";
 * const { settings } = loadSettings({ DOWNLOAD_DELAY: 1, backoff: { maxDelayMs: 60_000 } });
 * console.assert(settings.downloadDelayMs === 1000);
 * ```
 */
export function loadSettings(
  dict: Readonly<Record<string, unknown>>,
  options: FromScrapySettingsOptions = {},
): ConvertedSettings {
  const what = options.what ?? "throttler";
  if (!isPlainObject(dict)) {
    throw new TypeError(
      `Cannot create ${what} as its settings must be an object: current value is ${
        formatValue(dict)
      }`,
    );
  }
  const scrapy: Record<string, unknown> = {};
  const ours: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(dict)) {
    if (SCRAPY_NAME.test(name)) scrapy[name] = value;
    else setOwn(ours, name, value);
  }
  const draft = convert(scrapy, options);
  const merged = deepMerge(draft.out, ours);
  // A defaulted setting is named Scrapy's way only to a user who wrote Scrapy's names.
  const fromScrapy = locator(scrapy, draft.origins, Object.keys(scrapy).length > 0);
  // A value written our way is reported our way, even where Scrapy's name also set it.
  const locate = (path: Path): SettingOrigin | undefined => {
    let node: unknown = ours;
    for (const key of path) {
      if (!isPlainObject(node)) return undefined;
      node = own(node, key as string);
      if (node === undefined) return fromScrapy(path);
    }
    return undefined;
  };
  const settings = validate(merged, locate, what);
  return converted(settings, draft.warnings, options);
}

/** Settings whose value is text: `--set USER_AGENT=1.0` means the string "1.0". */
const TEXT_SETTINGS =
  /(^|_)(USER_AGENT|JOBDIR|CLASS|QUEUE|SCHEDULER|MANAGER|BOT_NAME)$|^(userAgent|jobDir)$/;

/**
 * Read the text of `--set NAME=VALUE`: JSON when it parses (`5`, `[429, 503]`,
 * `{"a.com": {"delay": 2}}`), Python literals too (`True`, `None`,
 * `{'a.com': {'rampup': True}}`, `(1, 3)`), else the text itself. For settings
 * whose value is text (`USER_AGENT`, `JOBDIR`, class paths) the text is kept
 * as written unless it is a quoted string or `None`.
 *
 * @param name The setting's name (Scrapy's or ours).
 * @param text What followed `=`.
 * @returns The value.
 * @example Text, numbers, JSON and Python literals
 * ```ts
 * import { parseSettingValue } from "./scrapy_settings.ts";
 * console.assert(parseSettingValue("DOWNLOAD_DELAY", "0.5") === 0.5);
 * console.assert(parseSettingValue("ROBOTSTXT_OBEY", "True") === true);
 * console.assert(parseSettingValue("USER_AGENT", "2.0") === "2.0");
 * ```
 */
export function parseSettingValue(name: string, text: string): unknown {
  const trimmed = text.trim();
  const parsed = parseLiteral(trimmed);
  const lastSegment = name.slice(name.lastIndexOf(".") + 1);
  if (TEXT_SETTINGS.test(lastSegment)) {
    return parsed.ok && (typeof parsed.value === "string" || parsed.value === null)
      ? parsed.value
      : text;
  }
  return parsed.ok ? parsed.value : text;
}

function parseLiteral(text: string): { ok: true; value: unknown } | { ok: false } {
  for (const candidate of [text, pythonToJson(text)]) {
    if (candidate === undefined) continue;
    try {
      return { ok: true, value: JSON.parse(candidate) };
    } catch {
      // Not this form; try the next.
    }
  }
  return { ok: false };
}

const PYTHON_WORDS: Readonly<Record<string, string>> = {
  True: "true",
  False: "false",
  None: "null",
};
const PYTHON_ESCAPES: Readonly<Record<string, string>> = {
  n: "\n",
  t: "\t",
  r: "\r",
  "\\": "\\",
  "'": "'",
  '"': '"',
};

/**
 * A Python literal (the way a Scrapy user writes settings) as JSON text:
 * single-quoted strings, True/False/None, tuples, trailing commas. `undefined`
 * when it is not one.
 */
function pythonToJson(text: string): string | undefined {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      let value = "";
      i++;
      while (i < text.length && text[i] !== c) {
        if (text[i] === "\\" && i + 1 < text.length) {
          const escaped = text[i + 1]!;
          value += PYTHON_ESCAPES[escaped] ?? `\\${escaped}`;
          i += 2;
        } else value += text[i++];
      }
      if (i >= text.length) return undefined;
      i++;
      out += JSON.stringify(value);
    } else if (/[A-Za-z_]/.test(c)) {
      const word = /^[A-Za-z_]\w*/.exec(text.slice(i))![0];
      const json = own(PYTHON_WORDS, word);
      if (json === undefined) return undefined;
      out += json;
      i += word.length;
    } else if (c === "]" || c === "}" || c === ")") {
      out = out.replace(/,\s*$/, "");
      out += c === ")" ? "]" : c;
      i++;
    } else {
      out += c === "(" ? "[" : c;
      i++;
    }
  }
  return out;
}
