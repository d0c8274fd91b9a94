/**
 * A crawler that follows links: `crawl()` runs the feedback loop
 * request queue → `throttleByScope` → `backoffOn` → `discover` → queue, and
 * completes when no page is left. Two loopback sites with hidden limits
 * (from lib/demo/sites.ts, the demo's own servers): "bucket" allows 10
 * requests a second after a burst of 3 and answers 429 with `Retry-After`
 * beyond that; "capped" serves 2 requests at a time and answers 503 with an
 * HTTP-date `Retry-After` beyond that. Each site is its own scope: one backing
 * off does not slow the other down. `rampup` probes each site's limit from
 * one request at a time upwards.
 * Run with `npx tsx examples/follow_links.ts` (or `npx deno run -A`, `npx bun`).
 *
 * @module
 */
import process from "node:process";
import { pathToFileURL } from "node:url";
import { lastValueFrom, toArray } from "rxjs";
import {
  crawl,
  createFetchDownload,
  createThrottler,
  type FetchedResponse,
  hostScope,
  rampup,
  RequestQueue,
} from "../mod.ts";
import { type Site, startSite } from "../lib/demo/sites.ts";

/** What the crawl found, per site name. */
export interface SiteReport {
  /** Distinct pages that ended with a 200. */
  readonly pages: number;
  /** Answers the site gave, by status (retries included). */
  readonly byStatus: Readonly<Record<number, number>>;
  /** The most requests the site had in flight at once. */
  readonly maxInFlight: number;
}

/** The same-site links of a page (a real crawler would use an HTML parser). */
function links(page: FetchedResponse): string[] {
  const origin = new URL(page.url).origin;
  return [...page.body.matchAll(/href="([^"]+)"/g)]
    .map((m) => new URL(m[1]!, page.url))
    .filter((u) => u.origin === origin)
    .map((u) => u.href);
}

/** Runs the example; resolves with what each site saw. */
export async function main(
  log: (line: string) => void = console.log,
): Promise<Record<string, SiteReport>> {
  const sites: Record<string, Site> = {
    bucket: await startSite({
      style: "token-bucket",
      ratePerSec: 10,
      burst: 3,
      retryAfter: true,
      pages: 15,
    }),
    capped: await startSite({
      style: "concurrency-cap",
      maxConcurrency: 2,
      latencyMs: 100,
      pages: 15,
    }),
  };
  const nameOf = new Map(Object.entries(sites).map(([name, s]) => [`127.0.0.1:${s.port}`, name]));
  try {
    const throttler = createThrottler<string>({
      concurrentRequestsPerDomain: 4,
      // A first backoff step of 100 ms (not 1 s), recovering after 1 s without trouble.
      backoff: { minDelayMs: 100, windowMs: 500 },
      retry: { times: 8 }, // a page may meet a few refusals in a row: let it try again
    });
    const queue = new RequestQueue<string>({
      view: throttler,
      fifo: true, // breadth-first
      start: Object.values(sites).map((s) => `${s.url}/`),
    });
    const started = throttler.scheduler.now();
    const outcomes = await lastValueFrom(
      crawl({
        throttler,
        queue,
        download: createFetchDownload({ timeoutMs: 5_000, userAgent: "politely-example/0.1" }),
        discover: (o) => {
          const site = nameOf.get(hostScope(o.request)) ?? "?";
          const t = `+${((throttler.scheduler.now() - started) / 1000).toFixed(3)}s`;
          if (o.kind === "error") {
            log(`${t} ${site.padEnd(6)} error ${String(o.error)} ${new URL(o.request).pathname}`);
            return [];
          }
          const found = o.response.status === 200 ? links(o.response) : [];
          log(
            `${t} ${site.padEnd(6)} ${o.response.status} ${
              new URL(o.request).pathname.padEnd(9)
            } ${found.length} links` + (o.attempt > 1 ? `  (attempt ${o.attempt})` : ""),
          );
          return found;
        },
      }).pipe(
        // Probe each site's unknown limit: start at 1 request at a time, step up while it stays quiet.
        rampup(throttler),
        toArray(),
      ),
    );
    const seconds = ((throttler.scheduler.now() - started) / 1000).toFixed(1);
    const report: Record<string, SiteReport> = {};
    for (const [name, site] of Object.entries(sites)) {
      const stats = site.stats();
      const pages = outcomes.filter((o) =>
        o.kind === "response" && o.response.status === 200 && o.request.startsWith(site.url)
      ).length;
      report[name] = { pages, byStatus: stats.byStatus, maxInFlight: stats.maxInFlight };
      const statuses = Object.entries(stats.byStatus).map(([s, n]) =>
        `${n} x ${s}`
      );
      const scope = throttler.state(`127.0.0.1:${site.port}`);
      log(
        `${name}: ${pages} pages; the site answered ${statuses.join(", ")}, had at most ` +
          `${stats.maxInFlight} in flight; politely ended at concurrency ${scope?.concurrency}, ` +
          `delay ${Math.round(scope?.delayMs ?? 0)} ms`,
      );
    }
    log(`${outcomes.length} pages in ${seconds} s`);
    return report;
  } finally {
    await Promise.all(Object.values(sites).map((s) => s.close()));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
