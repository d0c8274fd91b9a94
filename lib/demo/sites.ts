/**
 * Real HTTP sites on the loopback interface with rate limits they do not
 * reveal, for the `politely demo` command, the examples and the tests. Each
 * site is a `node:http` server on 127.0.0.1 and a free port, so it runs under
 * Node, Deno and Bun alike. These are the *servers*: nothing here uses
 * politely's throttling.
 *
 * @module
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { listenOnLoopback } from "./_loopback.ts";
import { asyncScheduler, type SchedulerLike, type Subscription, timer } from "rxjs";
import {
  CONCURRENCY_IDLE,
  concurrencyAcquire,
  concurrencyRelease,
  type ConcurrencyState,
  createStatsRecorder,
  FIXED_WINDOW_UNUSED,
  type FixedWindowState,
  fixedWindowTake,
  type MinIntervalState,
  minIntervalTake,
  rateLimitFields,
  retryAfterDate,
  retryAfterSeconds,
  type SiteStats,
  tokenBucketStart,
  type TokenBucketState,
  tokenBucketTake,
} from "./_limiters.ts";

export type { Arrival, SiteStats } from "./_limiters.ts";

/**
 * How a site limits its clients.
 * - `"token-bucket"`: `ratePerSec` sustained, `burst` at once; beyond that 429.
 * - `"concurrency-cap"`: at most `maxConcurrency` in flight; beyond that 503
 *   with `Retry-After` as an HTTP-date.
 * - `"slow"`: no limit, but every answer takes `slowLatencyMs`.
 * - `"robots-delay"`: `/robots.txt` says `Crawl-delay`; arrivals closer than
 *   that get 429.
 * - `"fixed-window"`: `quota` requests per `windowMs` (an API-style quota); beyond that 429.
 * - `"fine"`: no limit.
 */
export type SiteStyle =
  | "token-bucket"
  | "concurrency-cap"
  | "slow"
  | "robots-delay"
  | "fixed-window"
  | "fine";

/** Options of {@linkcode startSite}. Options that do not apply to the chosen style are ignored. */
export interface SiteOptions {
  /** How the site limits its clients. */
  readonly style: SiteStyle;
  /** `"token-bucket"`: sustained rate. @default 10 */
  readonly ratePerSec?: number;
  /** `"token-bucket"`: requests admitted at once after a quiet spell. @default 3 */
  readonly burst?: number;
  /** `"concurrency-cap"`: requests served at once. @default 4 */
  readonly maxConcurrency?: number;
  /** `"concurrency-cap"`: how far ahead the 503's `Retry-After` date lies. @default 1000 */
  readonly retryAfterMs?: number;
  /** `"robots-delay"`: the `Crawl-delay` announced and enforced. @default 500 */
  readonly crawlDelayMs?: number;
  /**
   * `"robots-delay"`: an arrival this much early still counts as on time
   * (loopback scheduling jitter; a client honouring the delay is not punished).
   * @default 10
   */
  readonly crawlDelayToleranceMs?: number;
  /** `"fixed-window"`: requests per window. @default 20 */
  readonly quota?: number;
  /** `"fixed-window"`: window length; windows start at the first request. @default 2000 */
  readonly windowMs?: number;
  /**
   * `"token-bucket"`, `"robots-delay"`, `"fixed-window"`: add `Retry-After`
   * (delta-seconds, rounded up) to a 429. Without it a client must find the
   * rate by itself.
   * @default false
   */
  readonly retryAfter?: boolean;
  /**
   * `"token-bucket"`, `"fixed-window"`: add IETF `RateLimit-Policy` and
   * `RateLimit` fields to every answer, as an API would. For a token bucket
   * the policy is `q` = burst per the time to refill it, `t` the time until
   * the bucket is full again.
   * @default false
   */
  readonly rateLimitHeaders?: boolean;
  /** Latency of an admitted request (every style but `"slow"`). Rejections are answered at once. @default 10 */
  readonly latencyMs?: number;
  /** `"slow"`: latency range `[min, max]`. @default [300, 800] */
  readonly slowLatencyMs?: readonly [number, number];
  /**
   * `"slow"`: picks the latency within `slowLatencyMs`. By default the latency
   * is a hash of the path: deterministic, different across pages.
   * @default undefined
   */
  readonly random?: () => number;
  /** Pages in the link tree: `/page/N` links to `/page/2N` and `/page/2N+1` up to this. @default 63 */
  readonly pages?: number;
  /**
   * The site's clock and timers: arrival times come from `scheduler.now()`,
   * latencies from `timer(ms, scheduler)`. A `VirtualTimeScheduler` freezes
   * the clock and holds answers until it is flushed.
   * @default asyncScheduler
   */
  readonly scheduler?: SchedulerLike;
}

/** A running site. */
export interface Site {
  /** `http://127.0.0.1:PORT` (no trailing slash). */
  readonly url: string;
  readonly port: number;
  readonly style: SiteStyle;
  /** What the site has seen so far (a copy). */
  stats(): SiteStats;
  /** Stops the server, drops its connections and pending answers; resolves when the port is free. */
  close(): Promise<void>;
}

interface Decision {
  readonly status: number;
  readonly headers: Record<string, string>;
  /** The request holds a concurrency slot until it is over. */
  readonly holdsSlot: boolean;
}

const ADMIT: Decision = { status: 200, headers: {}, holdsSlot: false };

function invalid(name: string, expected: string, value: unknown): RangeError {
  return new RangeError(
    `Cannot start site as '${name}' must be ${expected}: current value is ${String(value)}`,
  );
}

function positiveFinite(name: string, value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) throw invalid(name, "a finite number > 0", value);
  return value;
}

function atLeastOne(name: string, value: number): number {
  if (!(value >= 1) || !Number.isFinite(value)) throw invalid(name, "a finite number >= 1", value);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!(value >= 0) || !Number.isFinite(value)) throw invalid(name, "a finite number >= 0", value);
  return value;
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw invalid(name, "an integer >= 1", value);
  return value;
}

const STYLES: readonly SiteStyle[] = [
  "token-bucket",
  "concurrency-cap",
  "slow",
  "robots-delay",
  "fixed-window",
  "fine",
];

/** FNV-1a of the path, as a fraction in [0, 1): a latency that differs by page but never by run. */
function pathFraction(path: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) {
    h ^= path.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h / 2 ** 32;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The page at `path`: `/` links to `/page/1`, `/page/N` to its two children, anything else to `/`. */
function pageHtml(path: string, pages: number): string {
  let title: string;
  let links: string[];
  const match = /^\/page\/(\d+)$/.exec(path);
  if (path === "/") {
    title = "Home";
    links = ["/page/1"];
  } else if (match) {
    const n = Number(match[1]);
    title = `Page ${n}`;
    links = [2 * n, 2 * n + 1].filter((k) => k <= pages).map((k) => `/page/${k}`);
  } else {
    title = escapeHtml(path);
    links = ["/"];
  }
  const items = links.map((href) => `<li><a href="${href}">${href}</a></li>`).join("");
  return `<!doctype html><html><head><title>${title}</title></head>` +
    `<body><h1>${title}</h1><ul>${items}</ul></body></html>\n`;
}

/**
 * Starts one site on 127.0.0.1 and a free port.
 *
 * Every style serves `/robots.txt` (404 unless `"robots-delay"`; never
 * limited) and an HTML page at any other path (`/page/N` links to
 * `/page/2N` and `/page/2N+1` up to `pages`). The limit is hidden: no header
 * tells it, unless `rateLimitHeaders` is set. The status is decided when the
 * request arrives; an admitted request is answered after its latency, a
 * rejected one at once.
 *
 * @param options The style and its hidden limit.
 * @returns The running site, once it listens.
 * @throws {RangeError} When an option is out of range (before anything listens).
 *
 * @example Hammer a token bucket
 * ```ts
 * const site = await startSite({ style: "token-bucket", ratePerSec: 10, burst: 3 });
 * const statuses = await Promise.all(
 *   Array.from({ length: 10 }, () => fetch(`${site.url}/`).then((r) => r.status)),
 * );
 * console.log(statuses.filter((s) => s === 429).length, site.stats().rejected);
 * await site.close();
 * ```
 */
export function startSite(options: SiteOptions): Promise<Site> {
  const style = options.style;
  if (!STYLES.includes(style)) throw invalid("style", `one of ${STYLES.join(", ")}`, style);
  const bucket = {
    ratePerSec: positiveFinite("ratePerSec", options.ratePerSec ?? 10),
    burst: atLeastOne("burst", options.burst ?? 3),
  };
  const maxConcurrency = positiveInteger("maxConcurrency", options.maxConcurrency ?? 4);
  const retryAfterMs = nonNegative("retryAfterMs", options.retryAfterMs ?? 1000);
  const interval = {
    intervalMs: nonNegative("crawlDelayMs", options.crawlDelayMs ?? 500),
    toleranceMs: nonNegative("crawlDelayToleranceMs", options.crawlDelayToleranceMs ?? 10),
  };
  const window = {
    quota: positiveInteger("quota", options.quota ?? 20),
    windowMs: positiveFinite("windowMs", options.windowMs ?? 2000),
  };
  const latencyMs = nonNegative("latencyMs", options.latencyMs ?? 10);
  const [slowMin, slowMax] = options.slowLatencyMs ?? [300, 800];
  nonNegative("slowLatencyMs[0]", slowMin);
  nonNegative("slowLatencyMs[1]", slowMax);
  if (slowMax < slowMin) throw invalid("slowLatencyMs[1]", `>= ${slowMin}`, slowMax);
  const pages = positiveInteger("pages", options.pages ?? 63);
  const retryAfter = options.retryAfter ?? false;
  const rateLimitHeaders = options.rateLimitHeaders ?? false;
  const random = options.random;
  // injectable default: the real clock, read through asyncScheduler.
  const scheduler = options.scheduler ?? asyncScheduler;

  let tokens: TokenBucketState | undefined;
  let slots: ConcurrencyState = CONCURRENCY_IDLE;
  let lastAdmitted: MinIntervalState = { lastAdmittedMs: undefined };
  let quotaWindow: FixedWindowState = FIXED_WINDOW_UNUSED;
  const recorder = createStatsRecorder();
  const pending = new Set<Subscription>();

  function tooMany(waitMs: number, extra: Record<string, string> = {}): Decision {
    const headers = retryAfter ? { ...extra, "retry-after": retryAfterSeconds(waitMs) } : extra;
    return { status: 429, headers, holdsSlot: false };
  }

  function decide(path: string, now: number): Decision {
    if (path === "/robots.txt") {
      return style === "robots-delay" ? ADMIT : { status: 404, headers: {}, holdsSlot: false };
    }
    switch (style) {
      case "token-bucket": {
        const d = tokenBucketTake(bucket, tokens ?? tokenBucketStart(bucket, now), now);
        tokens = d.state;
        const extra = rateLimitHeaders
          ? rateLimitFields(
            bucket.burst,
            (bucket.burst * 1000) / bucket.ratePerSec,
            d.remaining,
            d.fullInMs,
          )
          : {};
        return d.allowed
          ? { status: 200, headers: extra, holdsSlot: false }
          : tooMany(d.nextTokenInMs, extra);
      }
      case "concurrency-cap": {
        const d = concurrencyAcquire(maxConcurrency, slots);
        slots = d.state;
        if (d.allowed) return { status: 200, headers: {}, holdsSlot: true };
        return {
          status: 503,
          headers: { "retry-after": retryAfterDate(now, retryAfterMs) },
          holdsSlot: false,
        };
      }
      case "robots-delay": {
        const d = minIntervalTake(interval, lastAdmitted, now);
        lastAdmitted = d.state;
        return d.allowed ? ADMIT : tooMany(d.waitMs);
      }
      case "fixed-window": {
        const d = fixedWindowTake(window, quotaWindow, now);
        quotaWindow = d.state;
        const extra = rateLimitHeaders
          ? rateLimitFields(window.quota, window.windowMs, d.remaining, d.resetInMs)
          : {};
        return d.allowed
          ? { status: 200, headers: extra, holdsSlot: false }
          : tooMany(d.resetInMs, extra);
      }
      case "slow":
      case "fine":
        return ADMIT;
    }
  }

  function latencyOf(path: string): number {
    if (style !== "slow") return latencyMs;
    const u = random ? random() : pathFraction(path);
    return slowMin + (slowMax - slowMin) * Math.min(1, Math.max(0, u));
  }

  function body(path: string, status: number): string {
    if (path === "/robots.txt") {
      return status === 200
        ? `User-agent: *\nCrawl-delay: ${interval.intervalMs / 1000}\n`
        : "Not found\n";
    }
    if (status === 429) return "Too Many Requests\n";
    if (status === 503) return "Service Unavailable\n";
    return pageHtml(path, pages);
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const now = scheduler.now();
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    req.resume(); // a request body is never read; drain it so the connection can be reused
    recorder.enter();
    const decision = decide(path, now);
    recorder.arrive(now, path, decision.status);

    let latency: Subscription | undefined;
    res.once("close", () => {
      if (latency) pending.delete(latency);
      latency?.unsubscribe();
      if (decision.holdsSlot) slots = concurrencyRelease(slots);
      recorder.depart(!res.writableFinished);
    });

    const send = () => {
      const text = body(path, decision.status);
      const type = path === "/robots.txt" || decision.status !== 200
        ? "text/plain; charset=utf-8"
        : "text/html; charset=utf-8";
      res.writeHead(decision.status, {
        "content-type": type,
        "content-length": String(Buffer.byteLength(text)),
        "cache-control": "no-store",
        ...decision.headers,
      });
      res.end(req.method === "HEAD" ? undefined : text);
    };

    if (decision.status !== 200) {
      send();
      return;
    }
    let fired = false;
    const sub = timer(latencyOf(path), scheduler).subscribe(() => {
      fired = true;
      if (latency) pending.delete(latency);
      send();
    });
    // A synchronous scheduler (queueScheduler, zero delay) has already answered.
    if (!fired) {
      latency = sub;
      pending.add(sub);
    }
  }

  const server: Server = createServer(handle);
  return listenOnLoopback(server, pending).then(({ port, close }) => ({
    url: `http://127.0.0.1:${port}`,
    port,
    style,
    stats: () => recorder.snapshot(),
    close,
  }));
}

/** One of the demo's sites, with its hidden limit in words. */
export interface DemoSite extends Site {
  /** A short name for tables: `"bucket"`, `"capped"`, `"slow"`, `"robots"`, `"fine"`. */
  readonly name: string;
  /** The limit the site hides, for the demo's final table. */
  readonly hiddenLimit: string;
}

/** The demo's five sites. */
export interface DemoSites {
  readonly sites: readonly DemoSite[];
  /** Closes every site. */
  close(): Promise<void>;
}

/** Options of {@linkcode startDemoSites}. */
export interface DemoSitesOptions {
  /** Clock and timers of every site. @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
  /** Pages in each site's link tree. @default 63 */
  readonly pages?: number;
}

/**
 * Starts five sites, one per kind of hidden limit a crawler meets:
 * a token bucket (10 req/s, burst 3, 429), a concurrency cap (4 at once, 503
 * with an HTTP-date `Retry-After`), a slow site (300-800 ms), a robots.txt
 * `Crawl-delay: 0.5` (429 when faster) and a fine one.
 *
 * @param options Clock and page count shared by the sites.
 * @returns The running sites; close them all with `close()`.
 *
 * @example List the sites
 * ```ts
 * const demo = await startDemoSites();
 * for (const site of demo.sites) console.log(site.name, site.url, site.hiddenLimit);
 * await demo.close();
 * ```
 */
export async function startDemoSites(options: DemoSitesOptions = {}): Promise<DemoSites> {
  const shared = {
    ...(options.scheduler ? { scheduler: options.scheduler } : {}),
    ...(options.pages !== undefined ? { pages: options.pages } : {}),
  };
  const plan: { name: string; hiddenLimit: string; options: SiteOptions }[] = [
    {
      name: "bucket",
      hiddenLimit: "10 req/s, burst 3 (429)",
      options: { ...shared, style: "token-bucket", ratePerSec: 10, burst: 3 },
    },
    {
      name: "capped",
      hiddenLimit: "4 concurrent (503 + Retry-After date)",
      options: { ...shared, style: "concurrency-cap", maxConcurrency: 4, latencyMs: 100 },
    },
    {
      name: "slow",
      hiddenLimit: "none; 300-800 ms per page",
      options: { ...shared, style: "slow", slowLatencyMs: [300, 800] },
    },
    {
      name: "robots",
      hiddenLimit: "robots.txt Crawl-delay 0.5 s (429 if faster)",
      options: { ...shared, style: "robots-delay", crawlDelayMs: 500 },
    },
    { name: "fine", hiddenLimit: "none", options: { ...shared, style: "fine" } },
  ];
  const started = await Promise.allSettled(plan.map((p) => startSite(p.options)));
  const failed = started.find((s) => s.status === "rejected");
  if (failed) {
    await Promise.all(started.map((s) => s.status === "fulfilled" ? s.value.close() : undefined));
    throw failed.reason;
  }
  const sites = started.map((s, i): DemoSite => {
    const site = (s as PromiseFulfilledResult<Site>).value;
    const { name, hiddenLimit } = plan[i]!;
    return {
      url: site.url,
      port: site.port,
      style: site.style,
      stats: site.stats,
      close: site.close,
      name,
      hiddenLimit,
    };
  });
  return {
    sites,
    close: async () => {
      await Promise.all(sites.map((s) => s.close()));
    },
  };
}
