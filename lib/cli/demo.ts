/**
 * `politely demo`: five simulated sites on loopback, each with a limit it
 * does not reveal, crawled with rampup and backoff on, following links; it
 * ends with each site's hidden limit next to the rate politely settled on.
 * Nothing to configure, no internet.
 *
 * @module
 */
import { hostScope } from "../scopes/domain_scopes.ts";
import type { FetchedResponse } from "../http/fetch_download.ts";
import { extractLinks } from "../http/html_links.ts";
import type { Outcome } from "../outcome.ts";
import type { RequestObject } from "../request.ts";
import type { ThrottlerSettingsInput } from "../settings/settings.ts";
import type { DemoSite } from "../demo/sites.ts";
import type { Throttler } from "../throttler/throttler.ts";
import type { RampupOptions } from "../../operators/rampup.ts";
import type { InputLine } from "./input.ts";
import { fit, formatDelay } from "./live_view.ts";

/** Pages per demo site: more than the fastest site can serve in a long demo. */
export const DEMO_PAGES = 100_000;

/**
 * The demo's settings: robots.txt obeyed (the Crawl-delay site gets its delay
 * from there), every site starting 200 ms apart, a short backoff window so the
 * story fits in a minute, and jitter only upwards so a delay is never
 * undercut. Rampup comes from {@link demoRampup}.
 *
 * @returns Settings for `createThrottler` / `runCrawl`.
 */
export function demoSettings(): ThrottlerSettingsInput {
  return {
    concurrentRequests: 32,
    concurrentRequestsPerDomain: 16,
    downloadDelayMs: 200,
    jitter: [0, 0.2],
    robotsTxtObey: true,
    downloadTimeoutMs: 10_000,
    backoff: { windowMs: 2_000, minDelayMs: 100, maxDelayMs: 5_000 },
    retry: { times: 3 },
  };
}

/**
 * The demo's rampup (the `rampup` operator's options): every site that states
 * no rule probes upwards from one request at a time and backs off on 429/503;
 * the robots.txt site keeps the Crawl-delay it states.
 *
 * @param sites The running demo sites.
 * @returns Options for `rampup(throttler, options)`.
 */
export function demoRampup(sites: readonly DemoSite[]): RampupOptions {
  const ramped = new Set(
    sites.filter((site) => site.style !== "robots-delay").map((site) => hostScope(site.url)),
  );
  return { scopes: (scope) => ramped.has(scope) };
}

/**
 * How the demo shows its scopes: a site's name (`bucket`, `capped`, ...)
 * instead of `127.0.0.1:PORT`. Display only: the scopes keep their names.
 *
 * @param sites The running demo sites.
 * @returns The label of a scope (a scope of no demo site keeps its name).
 * @example
 * ```ts
 * import { demoLabel } from "./demo.ts";
 * const label = demoLabel([{ url: "http://127.0.0.1:40001", name: "bucket" }]);
 * console.assert(label("127.0.0.1:40001") === "bucket" && label("other") === "other");
 * ```
 */
export function demoLabel(
  sites: readonly Pick<DemoSite, "url" | "name">[],
): (scope: string) => string {
  const names = new Map(sites.map((site) => [hostScope(site.url), site.name]));
  return (scope) => names.get(scope) ?? scope;
}

/** The start requests: each site's home page. */
export function demoStart(sites: readonly DemoSite[]): InputLine[] {
  return sites.map((site, i) => ({
    kind: "request",
    line: i + 1,
    request: { url: `${site.url}/` },
  }));
}

/**
 * Links of a demo page to follow: same-origin links (`extractLinks`: an HTML
 * parser, `rel=nofollow` obeyed).
 *
 * @param outcome A response outcome.
 * @returns The requests to enqueue.
 */
export function demoFollow(outcome: Outcome<RequestObject, FetchedResponse>): RequestObject[] {
  if (outcome.kind !== "response" || outcome.response.status !== 200) return [];
  const base = outcome.response.url || outcome.request.url;
  const origin = new URL(base).origin;
  return extractLinks(outcome.response.body, base).links
    .filter((url) => new URL(url).origin === origin)
    .map((url) => ({ url }));
}

/** One row of the demo's closing table. */
export interface DemoRow {
  readonly site: string;
  readonly hiddenLimit: string;
  /** Pages answered 200 per second at the server over the last part of the run. */
  readonly settledPerSec: number;
  /** Answers 429 or 503. */
  readonly rejected: number;
  /** Requests the site saw. */
  readonly requests: number;
  /** Where politely's throttling ended for the site's scope. */
  readonly throttle: string;
}

/**
 * The closing table's rows, from what each site saw (its own clock) and the
 * throttler's final scope states.
 *
 * @param sites The demo sites.
 * @param throttler The crawl's throttler.
 * @param endedAt The sites' clock at the end of the crawl (ms).
 * @param windowMs How far back "settled" looks.
 * @returns One row per site.
 */
export function demoRows(
  sites: readonly DemoSite[],
  throttler: Throttler<RequestObject>,
  endedAt: number,
  windowMs: number,
): DemoRow[] {
  return sites.map((site) => {
    const stats = site.stats();
    const from = endedAt - windowMs;
    let ok = 0;
    for (const a of stats.log) if (a.atMs > from && a.atMs <= endedAt && a.status === 200) ok++;
    const state = throttler.state(hostScope(site.url));
    return {
      site: site.name,
      hiddenLimit: site.hiddenLimit,
      settledPerSec: windowMs > 0 ? (ok * 1000) / windowMs : 0,
      rejected: stats.rejected,
      requests: stats.requests,
      throttle: state === undefined
        ? "-"
        : `${state.concurrency} at once, delay ${formatDelay(state.delayMs)}`,
    };
  });
}

/**
 * The demo's closing table.
 *
 * @param rows From {@link demoRows}.
 * @param windowMs The window of the "settled" column, for its title.
 * @returns Lines joined by `\n`.
 */
export function formatDemoTable(rows: readonly DemoRow[], windowMs: number): string {
  const head = `${fit("site", 8)}${fit("hidden limit", 46)}${
    fit(`settled (last ${Math.round(windowMs / 1000)}s)`, 20, "right")
  }${fit("429/503", 9, "right")}${fit("requests", 10, "right")}  politely ended at`;
  const lines = [head];
  for (const r of rows) {
    lines.push(
      `${fit(r.site, 8)}${fit(r.hiddenLimit, 46)}${
        fit(`${r.settledPerSec.toFixed(1)} pages/s`, 20, "right")
      }${fit(String(r.rejected), 9, "right")}${
        fit(String(r.requests), 10, "right")
      }  ${r.throttle}`,
    );
  }
  return lines.join("\n");
}
