/**
 * One crawl of a zoo site in virtual time: `pages` URLs through the real
 * gate, backoff, retries and (optionally) rampup, against a site whose limit
 * the crawler is not told. Measures what the adaptive-limits issue judges:
 * ideal time over measured time, requests, refusals.
 *
 * @module
 */
import { from, VirtualTimeScheduler } from "rxjs";
import type { SiteStats } from "../demo/_limiters.ts";
import type { ThrottleEvent } from "../events.ts";
import type { ThrottlerSettingsInput } from "../settings/settings.ts";
import { createThrottler } from "../throttler/throttler.ts";
import { backoffOn } from "../../operators/backoff_on.ts";
import { rampup } from "../../operators/rampup.ts";
import { throttleByScope } from "../../operators/throttle_by_scope.ts";
import { idealMs, ZOO_EPOCH_MS, type ZooSiteSpec } from "./zoo.ts";
import { createZooSite } from "./zoo_site.ts";
import { seededRandom } from "./zoo_random.ts";

/** Options of {@linkcode runZooCrawl}. */
export interface ZooCrawlOptions {
  readonly site: ZooSiteSpec;
  /** URLs to crawl. @default 200 */
  readonly pages?: number;
  /** The crawler's settings (the defaults when empty). */
  readonly settings?: ThrottlerSettingsInput;
  /** Put the `rampup` operator in the pipeline. @default false */
  readonly rampup?: boolean;
  /** Seed of the jitter's random source. @default 1 */
  readonly seed?: number;
  /** Give up after this much virtual time. @default 3_600_000 */
  readonly limitMs?: number;
  /** Collect the throttler's events. @default false */
  readonly events?: boolean;
  /**
   * Real-world timing noise: each request reaches the site `u⁴ × J` ms after
   * it was sent (`u` uniform, seeded): a mean of J/5, one in twenty later
   * than about J/2, none later than J. Loopback `fetch` on this machine
   * measured about 0.6-1.5 ms, spikes to 5 ms: J = 6 models it. @default 0
   */
  readonly outboundJitterMs?: number;
  /**
   * The same noise on the way back: each answer is read `u⁴ × J` ms after
   * the site sent it and freed its slot (a busy event loop reads a burst of
   * answers one by one), so the client counts in flight requests the site
   * is done with. @default 0
   */
  readonly inboundJitterMs?: number;
  /**
   * The site frees a request's slot `u⁴ × L` ms after it answered (a server
   * that counts a request until its answer is flushed; the loopback zoo
   * server frees it at the response's `close`): a next request sent as the
   * answer is read can find the slot still taken. @default 0
   */
  readonly releaseLagMs?: number;
}

/** What one crawl measured. */
export interface ZooCrawlResult {
  readonly site: ZooSiteSpec;
  readonly pages: number;
  /** A perfect client's time (`idealMs` of zoo.ts). */
  readonly idealMs: number;
  /** From the first send to the last answer. */
  readonly measuredMs: number;
  /** idealMs / measuredMs. */
  readonly efficiency: number;
  /**
   * Cut at `limitMs` before every page ended: `idealMs` is then the ideal
   * time of the pages admitted, and `measuredMs` the time up to the limit
   * (the adaptive benchmark's reckoning), so the efficiency stays a share.
   */
  readonly cut: boolean;
  /** Requests the site saw. */
  readonly requests: number;
  /** Requests it refused (429 or 503). */
  readonly refused: number;
  /** Pages that ended admitted. */
  readonly ok: number;
  /** Pages that ended refused or failed after their retries. */
  readonly failed: number;
  readonly stats: SiteStats;
  readonly events: readonly ThrottleEvent[];
}

/**
 * Crawls `pages` URLs of one zoo site in virtual time and measures it.
 *
 * @param options The site, the crawler's settings, rampup on or off.
 * @returns The figures.
 * @example
 * ```ts
 * import { runZooCrawl } from "./zoo_crawl.ts";
 * const r = runZooCrawl({
 *   site: { name: "b", limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 }, latencyMs: 50 },
 *   pages: 50,
 * });
 * console.log(r.efficiency, r.refused);
 * ```
 */
export function runZooCrawl(options: ZooCrawlOptions): ZooCrawlResult {
  const pages = options.pages ?? 200;
  const limitMs = options.limitMs ?? 3_600_000;
  const scheduler = new VirtualTimeScheduler(undefined, limitMs);
  const jitter = options.outboundJitterMs ?? 0;
  const noise = seededRandom((options.seed ?? 1) + 7919);
  const back = options.inboundJitterMs ?? 0;
  const backNoise = seededRandom((options.seed ?? 1) + 15_485_863);
  const lagMs = options.releaseLagMs ?? 0;
  const lagNoise = seededRandom((options.seed ?? 1) + 32_452_843);
  const site = createZooSite(options.site, scheduler, {
    random: seededRandom((options.seed ?? 1) + 104_729),
    ...(jitter > 0 ? { outboundMs: () => noise() ** 4 * jitter } : {}),
    ...(back > 0 ? { inboundMs: () => backNoise() ** 4 * back } : {}),
    ...(lagMs > 0 ? { releaseLagMs: () => lagNoise() ** 4 * lagMs } : {}),
  });
  const throttler = createThrottler(options.settings ?? {}, {
    scheduler,
    random: seededRandom(options.seed ?? 1),
  });
  const events: ThrottleEvent[] = [];
  if (options.events === true) throttler.events$.subscribe((e) => events.push(e));
  const urls = Array.from({ length: pages }, (_, i) => `http://zoo.test/page/${i}`);
  let ok = 0;
  let failed = 0;
  let lastAt = 0;
  const sub = from(urls).pipe(
    throttleByScope(throttler, (url: string, c) => site.download(url, { signal: c.signal })),
    backoffOn(throttler, { nowEpochMs: () => ZOO_EPOCH_MS + scheduler.now() }),
    options.rampup === true ? rampup(throttler) : (o) => o,
  ).subscribe((o) => {
    lastAt = scheduler.now();
    if (o.kind === "response" && o.response.status === 200) ok++;
    else failed++;
  });
  scheduler.flush();
  sub.unsubscribe();
  const stats = site.stats();
  const first = stats.arrivals[0] ?? 0;
  const cut = ok + failed < pages;
  const measuredMs = Math.max(1, (cut ? limitMs : lastAt) - first);
  const concurrency = throttler.settings.concurrentRequests;
  const ideal = idealMs(options.site, cut ? ok : pages, concurrency);
  return {
    site: options.site,
    pages,
    idealMs: ideal,
    measuredMs,
    efficiency: ideal / measuredMs,
    cut,
    requests: stats.requests,
    refused: stats.rejected,
    ok,
    failed,
    stats,
    events,
  };
}
