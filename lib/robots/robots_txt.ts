/**
 * robots.txt per origin, fetched once and cached, with RFC 9309's rules for
 * what an unreachable or missing file means, and the reference's Crawl-delay
 * decision (SPEC "robots.txt Crawl-Delay").
 *
 * Parsing is robots-parser's (3.0.1: Google-compatible matching, longest
 * match wins, `Allow` wins ties, `*` and `$` wildcards, groups merged per
 * agent, a specific agent's group beats `*`). It imports as a CommonJS default
 * export under Node (tsx), Deno (from node_modules) and Bun alike. Two of its
 * quirks are corrected here rather than by writing another parser:
 * - an empty `Crawl-delay:` reads as 0 (it calls `Number("")`); we make it
 *   invalid, so it sets nothing;
 * - it accepts any number, so a delay that is negative or not finite is
 *   dropped here (`crawlDelayMs` is then `undefined`).
 *
 * What a fetch result means (RFC 9309 section 2.3.1):
 * - 2xx: the first `maxBytes` (500 KiB) are parsed; a line cut by the limit
 *   is dropped, so a truncated `Disallow: /private` cannot become
 *   `Disallow: /`. Garbage is whatever the parser makes of it (usually no
 *   rules, so everything is allowed); it never throws.
 * - 3xx: the `Location` is followed, up to 5 redirects (across hosts too);
 *   more, or a redirect without `Location`, counts as unavailable (the RFC's
 *   "MAY assume unavailable").
 * - 4xx (404, 401, 403, 429 too): "unavailable": everything allowed, no
 *   crawl delay.
 * - 5xx, network errors, timeouts: "unreachable": everything disallowed
 *   ("complete disallow"), except /robots.txt itself. That answer is cached
 *   only `errorTtlMs` (1 minute) so the origin is asked again soon; when an
 *   earlier copy was fetched, that copy is used instead for the same short
 *   time (the RFC allows a cached copy while the file is unreachable).
 * - Anything else (1xx, 304 without a conditional request, an opaque
 *   redirect with status 0): unreachable.
 * Successful and 4xx answers are cached for `ttlMs` (24 hours, the RFC's
 * "SHOULD NOT use a cached version for more than 24 hours").
 *
 * Size: the cache, the fetch with RFC 9309's rules for a file that is
 * unreachable or missing, the corrections to robots-parser and the Crawl-
 * delay decision are read together when a robots.txt answer surprises
 * someone; the download that uses them is `robots_download.ts`.
 *
 * @module
 */
import robotsParserModule from "robots-parser";
import { asyncScheduler, type SchedulerLike, timer } from "rxjs";
import { originScope } from "../scopes/domain_scopes.ts";
import { checkCacheOption, type Loaded, TtlCache } from "../util/_ttl_cache.ts";

/** The part of robots-parser's `Robot` we use. */
interface ParsedRobots {
  isAllowed(url: string, ua?: string): boolean | undefined;
  getCrawlDelay(ua?: string): number | undefined;
}
type RobotsParser = (url: string, contents: string) => ParsedRobots;

// robots-parser's index.d.ts declares `export default` for what is a CommonJS
// `module.exports = function`: under NodeNext, TypeScript types the default
// import as the module object, while Node (tsx), Deno and Bun all hand over the
// function itself. Take whichever is callable.
const robotsParser: RobotsParser = typeof robotsParserModule === "function"
  ? robotsParserModule as unknown as RobotsParser
  : (robotsParserModule as unknown as { default: RobotsParser }).default;

/** What the cache needs of a response: a WHATWG `Response` fits. */
export interface RobotsResponseLike {
  readonly status: number;
  /** Read for `Location` on redirects. */
  readonly headers?: { get(name: string): string | null } | undefined;
  /** When present, read only up to `maxBytes` and then cancelled. */
  readonly body?: ReadableStream<Uint8Array> | null | undefined;
  /** Used when there is no `body` stream. */
  text(): Promise<string>;
}

/**
 * Fetches one URL. `redirect: "manual"` asks a WHATWG `fetch` to hand back
 * redirects so the cache can follow them itself (and count them); a fetch
 * that follows them anyway works too. The global `fetch` fits.
 */
export type RobotsFetch = (
  url: string,
  init: { readonly signal: AbortSignal; readonly redirect: "manual" },
) => Promise<RobotsResponseLike>;

/** Options of {@link createRobotsTxtCache}. */
export interface RobotsTxtCacheOptions {
  /** Fetches robots.txt (e.g. the global `fetch`, or one that goes through the throttler). */
  readonly fetch: RobotsFetch;
  /**
   * Our user agent. Groups are matched on its product token, case-insensitively
   * (`"politely/0.1 (+https://...)"` matches `User-agent: politely`).
   */
  readonly userAgent: string;
  /** Time for TTLs and the timeout. @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
  /** Bytes of robots.txt parsed; the rest is not downloaded. @default 512_000 (500 KiB) */
  readonly maxBytes?: number;
  /** Time allowed for the whole fetch (redirects and body included), in ms. @default 180_000 (DOWNLOAD_TIMEOUT) */
  readonly timeoutMs?: number;
  /** How long a fetched (2xx) or unavailable (4xx) answer is kept, in ms. @default 86_400_000 */
  readonly ttlMs?: number;
  /** How long an unreachable answer (5xx, network error, timeout) is kept, in ms. @default 60_000 */
  readonly errorTtlMs?: number;
  /** Redirects followed before giving up (as unavailable). @default 5 */
  readonly maxRedirects?: number;
  /** Origins kept; past it the least recently used goes. `0`: no limit. @default 100_000 */
  readonly maxEntries?: number;
}

/** How a robots.txt answer came about. */
export type RobotsSource =
  /** A 2xx response was parsed. */
  | "parsed"
  /** 4xx, or too many redirects: everything is allowed. */
  | "unavailable"
  /** 5xx, network error or timeout: everything is disallowed. */
  | "unreachable";

/** The robots.txt rules of one origin, for our user agent. */
export interface RobotsRules {
  /**
   * Whether we may fetch a URL of this origin. `/robots.txt` is always
   * allowed; a URL of another origin is not this file's business (`true`).
   */
  isAllowed(url: string): boolean;
  /** The valid `Crawl-delay` of the group that applies to us, in ms, or `undefined`. */
  readonly crawlDelayMs: number | undefined;
  readonly source: RobotsSource;
  /** The robots.txt URL asked for. */
  readonly url: string;
  /** The final HTTP status, or `undefined` after a network error or timeout. */
  readonly status: number | undefined;
  /** Whether the file was longer than `maxBytes` and cut. */
  readonly truncated: boolean;
  /** Why the file was unreachable (the fetch's error, or the timeout's), else `undefined`. */
  readonly error: unknown;
  /** Scheduler time at which the answer was settled. */
  readonly fetchedAt: number;
}

/** A robots.txt cache made by {@link createRobotsTxtCache}. */
export interface RobotsTxtCache {
  /**
   * The rules for a URL's origin, fetching its robots.txt when not cached
   * (concurrent callers share one fetch). Never rejects for fetch trouble:
   * that is an "unreachable" answer.
   *
   * @throws {TypeError} (as a rejection) when the URL cannot be parsed.
   */
  get(url: string): Promise<RobotsRules>;
  /** The cached, unexpired rules for a URL's origin, or `undefined`; never fetches. */
  peek(url: string): RobotsRules | undefined;
  /** Origins cached, fetches in flight included. */
  readonly size: number;
  /** Forget everything (fetches in flight still settle for their callers). */
  clear(): void;
}

const ALLOW_ALL = (): boolean => true;

// An empty (or comment-only) Crawl-delay value; see the module doc.
const EMPTY_CRAWL_DELAY = /^([ \t]*crawl-delay[ \t]*:)[ \t]*(#.*)?$/gim;

/** Whether a URL is a robots.txt file itself (those are never checked against the rules). */
export function isRobotsTxtPath(url: string): boolean {
  if (!url.includes("/robots.txt")) return false;
  try {
    return new URL(url).pathname === "/robots.txt";
  } catch {
    return false;
  }
}

/** Reject with the signal's reason as soon as it aborts, whatever `promise` does. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function discardBody(response: RobotsResponseLike): void {
  // Frees the connection; a body that is already gone or locked is fine.
  response.body?.cancel().catch(() => {});
}

/** The first `maxBytes` of a body as text, and whether there was more. */
async function readCapped(
  response: RobotsResponseLike,
  maxBytes: number,
  signal: AbortSignal,
): Promise<{ text: string; truncated: boolean }> {
  let bytes: Uint8Array;
  let truncated = false;
  const body = response.body;
  if (body !== null && body !== undefined && typeof body.getReader === "function") {
    const reader = body.getReader();
    const chunks: Uint8Array[] = [];
    let total = 0;
    try {
      for (;;) {
        const { done, value } = await abortable(reader.read(), signal);
        if (done) break;
        if (total + value.byteLength > maxBytes) {
          chunks.push(value.subarray(0, maxBytes - total));
          total = maxBytes;
          truncated = true;
          break;
        }
        chunks.push(value);
        total += value.byteLength;
      }
    } finally {
      if (truncated || signal.aborted) reader.cancel().catch(() => {});
    }
    bytes = new Uint8Array(total);
    let at = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, at);
      at += chunk.byteLength;
    }
  } else {
    const text = await abortable(response.text(), signal);
    // A UTF-16 code unit is at least one UTF-8 byte: short texts need no encoding.
    if (text.length * 3 <= maxBytes) return { text, truncated: false };
    bytes = new TextEncoder().encode(text);
    if (bytes.byteLength > maxBytes) {
      bytes = bytes.subarray(0, maxBytes);
      truncated = true;
    }
  }
  // TextDecoder drops a UTF-8 BOM, as RFC 9309 asks; bad bytes become U+FFFD.
  let text = new TextDecoder().decode(bytes);
  if (truncated) {
    const cut = Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r"));
    text = cut === -1 ? "" : text.slice(0, cut + 1);
  }
  return { text, truncated };
}

function parseRules(
  robotsUrl: string,
  content: string,
  userAgent: string,
  status: number,
  truncated: boolean,
  fetchedAt: number,
): RobotsRules {
  let robot: ParsedRobots | undefined;
  try {
    robot = robotsParser(robotsUrl, content.replace(EMPTY_CRAWL_DELAY, "$1 invalid"));
  } catch {
    // Not seen in practice; a file the parser cannot read has no rules for us.
    robot = undefined;
  }
  const seconds = robot?.getCrawlDelay(userAgent);
  const crawlDelayMs = typeof seconds === "number" && Number.isFinite(seconds) && seconds >= 0
    ? seconds * 1000
    : undefined;
  const isAllowed = robot === undefined ? ALLOW_ALL : (url: string): boolean => {
    if (isRobotsTxtPath(url)) return true;
    return robot.isAllowed(url, userAgent) ?? true;
  };
  return {
    isAllowed,
    crawlDelayMs,
    source: "parsed",
    url: robotsUrl,
    status,
    truncated,
    error: undefined,
    fetchedAt,
  };
}

/**
 * Create a robots.txt cache. Validate options at once; fetch nothing until asked.
 *
 * @param options The fetch function, our user agent, limits and TTLs.
 * @returns The cache.
 * @throws {TypeError} when `fetch` is not a function or `userAgent` is empty.
 * @throws {RangeError} when a limit or TTL is out of range.
 * @example Asking whether a URL may be fetched
 * ```ts
 * import { createRobotsTxtCache } from "./robots_txt.ts";
 * const robots = createRobotsTxtCache({
 *   userAgent: "politely/0.1",
 *   fetch: async () => new Response("User-agent: *\nDisallow: /private\nCrawl-delay: 2\n"),
 * });
 * const rules = await robots.get("https://example.com/private/x");
 * console.assert(!rules.isAllowed("https://example.com/private/x"));
 * console.assert(rules.isAllowed("https://example.com/public") && rules.crawlDelayMs === 2000);
 * ```
 */
export function createRobotsTxtCache(options: RobotsTxtCacheOptions): RobotsTxtCache {
  const fetchFn = options.fetch;
  if (typeof fetchFn !== "function") {
    throw new TypeError(
      `Cannot create robots.txt cache as 'fetch' must be a function: current value is ${
        String(fetchFn)
      }`,
    );
  }
  const userAgent = options.userAgent;
  if (typeof userAgent !== "string" || userAgent.trim() === "") {
    throw new TypeError(
      `Cannot create robots.txt cache as 'userAgent' must be a non-empty string: current value is ${
        JSON.stringify(userAgent)
      }`,
    );
  }
  const scheduler = options.scheduler ?? asyncScheduler;
  const maxBytes = checkCacheOption(
    "robots.txt cache",
    "maxBytes",
    options.maxBytes ?? 512_000,
    1,
    true,
  );
  const timeoutMs = checkCacheOption(
    "robots.txt cache",
    "timeoutMs",
    options.timeoutMs ?? 180_000,
    0,
    false,
  );
  const ttlMs = checkCacheOption(
    "robots.txt cache",
    "ttlMs",
    options.ttlMs ?? 86_400_000,
    0,
    false,
  );
  const errorTtlMs = checkCacheOption(
    "robots.txt cache",
    "errorTtlMs",
    options.errorTtlMs ?? 60_000,
    0,
    false,
  );
  const maxRedirects = checkCacheOption(
    "robots.txt cache",
    "maxRedirects",
    options.maxRedirects ?? 5,
    0,
    true,
  );
  const maxEntries = checkCacheOption(
    "robots.txt cache",
    "maxEntries",
    options.maxEntries ?? 100_000,
    0,
    true,
  );
  // load() never rejects (fetch trouble is an "unreachable" answer): no failure TTL.
  const entries = new TtlCache<RobotsRules>({ maxEntries, scheduler });

  const answer = (
    source: "unavailable" | "unreachable",
    url: string,
    status: number | undefined,
    error: unknown,
  ): RobotsRules => ({
    isAllowed: source === "unavailable" ? ALLOW_ALL : isRobotsTxtPath,
    crawlDelayMs: undefined,
    source,
    url,
    status,
    truncated: false,
    error,
    fetchedAt: scheduler.now(),
  });

  const load = async (robotsUrl: string): Promise<RobotsRules> => {
    const controller = new AbortController();
    const timeout = timer(timeoutMs, scheduler).subscribe(() => {
      controller.abort(
        new DOMException(
          `robots.txt fetch timed out after ${timeoutMs} ms: ${robotsUrl}`,
          "TimeoutError",
        ),
      );
    });
    const { signal } = controller;
    let url = robotsUrl;
    let status: number | undefined;
    try {
      for (let redirects = 0;; redirects++) {
        const response = await abortable(
          Promise.resolve().then(() => fetchFn(url, { signal, redirect: "manual" })),
          signal,
        );
        status = response.status;
        if (status >= 200 && status < 300) {
          const { text, truncated } = await readCapped(response, maxBytes, signal);
          // Rules are matched against the origin asked about, not the redirect target.
          return parseRules(robotsUrl, text, userAgent, status, truncated, scheduler.now());
        }
        discardBody(response);
        if (status >= 300 && status < 400 && status !== 304) {
          const location = response.headers?.get("location");
          if (location === null || location === undefined || redirects >= maxRedirects) {
            return answer("unavailable", robotsUrl, status, undefined);
          }
          url = new URL(location, url).href;
          continue;
        }
        if (status >= 400 && status < 500) {
          return answer("unavailable", robotsUrl, status, undefined);
        }
        return answer("unreachable", robotsUrl, status, undefined);
      }
    } catch (error) {
      return answer("unreachable", robotsUrl, signal.aborted ? undefined : status, error);
    } finally {
      timeout.unsubscribe();
      // Aborting after the fact is harmless and stops a body nobody reads.
      controller.abort();
    }
  };

  /** An unreachable file keeps the last copy fetched, for the short error TTL (module doc). */
  const loadFor = (key: string, previous: RobotsRules | undefined): Promise<Loaded<RobotsRules>> =>
    load(`${key}/robots.txt`).then((loaded) => {
      const keepPrevious = loaded.source === "unreachable" && previous !== undefined &&
        previous.source !== "unreachable";
      return {
        value: keepPrevious ? previous : loaded,
        ttlMs: loaded.source === "unreachable" ? errorTtlMs : ttlMs,
      };
    });

  return {
    get(url: string): Promise<RobotsRules> {
      let key: string;
      try {
        key = originScope(url);
      } catch (error) {
        return Promise.reject(error);
      }
      return entries.get(key, loadFor);
    },
    peek(url: string): RobotsRules | undefined {
      let key: string;
      try {
        key = originScope(url);
      } catch {
        return undefined;
      }
      return entries.peek(key);
    },
    get size(): number {
      return entries.size;
    },
    clear(): void {
      entries.clear();
    },
  };
}

/** A scope's throttling configuration, as far as Crawl-delay is concerned. */
export interface CrawlDelayScopeConfig {
  /** The scope's concurrency limit. */
  readonly concurrency: number;
  /** The scope's configured delay, in ms. */
  readonly delayMs: number;
  /**
   * Whether the user configured this scope's concurrency or delay (an entry in
   * `THROTTLING_SCOPES`), as opposed to defaults (`CONCURRENT_REQUESTS_PER_DOMAIN`,
   * `DOWNLOAD_DELAY`).
   */
  readonly explicit: boolean;
  /** The scope's `ignoreRobotsTxt`: keep the configuration, no warning. */
  readonly ignoreRobotsTxt: boolean;
}

/** What to do with a scope given its robots.txt Crawl-delay. */
export type CrawlDelayDecision =
  | {
    readonly kind: "apply";
    readonly apply: { readonly concurrency: 1; readonly delayMs: number };
  }
  | { readonly kind: "keep"; readonly keep: true; readonly warning?: string };

/**
 * Decide how a Crawl-delay applies to a scope (SPEC "robots.txt Crawl-Delay"):
 * - no valid Crawl-delay, or `ignoreRobotsTxt`: keep the configuration;
 * - a scope on defaults: concurrency 1 and the Crawl-delay, capped at `maxDelayMs`;
 * - a configured scope more aggressive than that (concurrency above 1, or a
 *   delay below the capped Crawl-delay): keep its configuration, with a
 *   warning that says so;
 * - a configured scope at least as polite: keep it, silently (applying the
 *   Crawl-delay would make it faster).
 *
 * @param configured The scope's concurrency, delay, and whether they were configured.
 * @param crawlDelayMs The robots.txt Crawl-delay in ms (`RobotsRules.crawlDelayMs`).
 * @param maxDelayMs `THROTTLING_ROBOTSTXT_MAX_DELAY` in ms.
 * @returns `{kind: "apply", apply}` or `{kind: "keep", keep: true, warning?}`.
 * @example
 * ```ts
 * import { crawlDelayDecision } from "./robots_txt.ts";
 * const d = crawlDelayDecision({ concurrency: 8, delayMs: 0, explicit: false, ignoreRobotsTxt: false }, 90_000, 60_000);
 * console.assert(d.kind === "apply" && d.apply.delayMs === 60_000 && d.apply.concurrency === 1);
 * ```
 */
export function crawlDelayDecision(
  configured: CrawlDelayScopeConfig,
  crawlDelayMs: number | undefined,
  maxDelayMs: number,
): CrawlDelayDecision {
  if (
    crawlDelayMs === undefined || !Number.isFinite(crawlDelayMs) || crawlDelayMs < 0 ||
    configured.ignoreRobotsTxt
  ) {
    return { kind: "keep", keep: true };
  }
  const delayMs = Math.min(crawlDelayMs, Math.max(0, maxDelayMs));
  if (!configured.explicit) return { kind: "apply", apply: { concurrency: 1, delayMs } };
  if (configured.concurrency > 1 || configured.delayMs < delayMs) {
    return {
      kind: "keep",
      keep: true,
      warning:
        `configured concurrency ${configured.concurrency} and delay ${configured.delayMs} ms kept, ` +
        `although robots.txt asks for Crawl-delay ${crawlDelayMs} ms (concurrency 1, delay ${delayMs} ms); ` +
        `set 'ignoreRobotsTxt' on the scope to silence this warning`,
    };
  }
  return { kind: "keep", keep: true };
}
