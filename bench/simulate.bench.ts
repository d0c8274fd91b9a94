/**
 * `politely simulate` (issue 17): how fast and how big a large simulation is,
 * and how close a prediction comes to reality.
 *
 * 1. Scale: `--urls` requests (default 1,000,000) over `--sites` sites
 *    (default 10,000; token buckets of 5-24/s, bursts 1-5, 20-69 ms), in
 *    virtual time: wall time, peak heap and RSS.
 * 2. Prediction against reality: each zoo shape of `generateZooSites(seed)`
 *    (every shape, random parameters; `--pages` each, default 150) is
 *    simulated, then crawled for real over loopback (`startZooServer`, the
 *    same queue, gate, backoff and retries, `fetch`); predicted and real
 *    duration and refusals side by side. `--no-reality` skips it.
 *
 * `npm run bench -- simulate [--urls N] [--sites N] [--pages N] [--seed N] [--no-reality]`
 *
 * @module
 */
import { lastValueFrom, toArray } from "rxjs";
import { crawl } from "../lib/crawl.ts";
import { createFetchDownload } from "../lib/http/fetch_download.ts";
import type { RequestObject } from "../lib/request.ts";
import { RequestQueue } from "../lib/queue/request_queue.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { simulate } from "../lib/sim/simulate.ts";
import type { SimulatedSiteSpec } from "../lib/sim/site_spec.ts";
import { describeLimiter } from "../lib/sim/zoo.ts";
import { generateZooSites } from "../lib/sim/zoo_random.ts";
import { startZooServer } from "../lib/sim/zoo_server.ts";
import { argValue, fmtFixed, isMain, markdownTable, median } from "./_harness.ts";

function scale(urls: number, siteCount: number): string {
  const sites: SimulatedSiteSpec[] = Array.from({ length: siteCount }, (_, i) => ({
    name: `s${i}`,
    host: `s${i}.test`,
    limiter: { shape: "token-bucket", ratePerSec: 5 + (i % 20), burst: 1 + (i % 5) },
    latencyMs: 20 + (i % 50),
  }));
  let peakRss = 0;
  const t0 = performance.now();
  const r = simulate({
    sites,
    urls,
    progressEvery: 50_000,
    onProgress: (ended, total) => {
      const rss = process.memoryUsage().rss;
      if (rss > peakRss) peakRss = rss;
      process.stderr.write(`  simulated ${ended} of ${total}\n`);
    },
  });
  const wall = performance.now() - t0;
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  return [
    `### Scale: ${urls.toLocaleString("en")} requests over ${siteCount.toLocaleString("en")} sites`,
    "",
    markdownTable(
      [
        "wall time",
        "requests/s (wall)",
        "simulated crawl",
        "requests",
        "refused",
        "peak heap",
        "peak RSS",
      ],
      [[
        `${fmtFixed(wall / 1000, 1)} s`,
        Math.round(r.requests / (wall / 1000)).toLocaleString("en"),
        `${fmtFixed(r.durationMs / 3_600_000, 2)} h`,
        r.requests.toLocaleString("en"),
        r.refused.toLocaleString("en"),
        `${Math.round(r.peakHeapBytes / 1048576)} MiB`,
        `${Math.round(peakRss / 1048576)} MiB`,
      ]],
      ["r", "r", "r", "r", "r", "r", "r"],
    ),
    "",
  ].join("\n");
}

async function reality(seed: number, pages: number): Promise<string> {
  const rows: string[][] = [];
  const errors: number[] = [];
  for (const spec of generateZooSites(seed)) {
    process.stderr.write(`  ${spec.name}\n`);
    const server = await startZooServer(spec);
    try {
      const host = new URL(server.url).host;
      const urls = Array.from({ length: pages }, (_, i) => `${server.url}/p/${i}`);
      const settings = { retry: { times: 10 } };
      const predicted = simulate({ sites: [{ ...spec, host }], urls, settings });
      const noisy = simulate({ sites: [{ ...spec, host }], urls, settings, outboundJitterMs: 6 });
      const throttler = createThrottler<RequestObject>(settings);
      const queue = new RequestQueue<RequestObject>({
        view: throttler,
        start: urls.map((url) => ({ url })),
      });
      const outcomes = await lastValueFrom(
        crawl({ throttler, queue, download: createFetchDownload({ timeoutMs: 60_000 }) }).pipe(
          toArray(),
        ),
      );
      const first = Math.min(...outcomes.map((o) => o.sentAt));
      const last = Math.max(...outcomes.map((o) => o.sentAt + o.latencyMs));
      const real = last - first;
      const st = server.stats();
      const err = (predicted.durationMs - real) / real;
      errors.push(Math.abs(err));
      rows.push([
        spec.name,
        `${describeLimiter(spec.limiter)}, ${spec.latencyMs} ms, ${spec.status ?? 429}, RA ${
          spec.retryAfter ?? "none"
        }, ${spec.announce ?? "none"}`,
        `${fmtFixed(real / 1000, 1)} s`,
        `${fmtFixed(predicted.durationMs / 1000, 1)} s`,
        `${err >= 0 ? "+" : ""}${fmtFixed(err * 100, 0)}%`,
        `${fmtFixed(noisy.durationMs / 1000, 1)} s`,
        String(st.rejected),
        String(predicted.refused),
        String(noisy.refused),
      ]);
    } finally {
      await server.close();
    }
  }
  const within = errors.filter((e) => e <= 0.1).length;
  return [
    `### Prediction against reality: the zoo sites of seed ${seed}, ${pages} pages each`,
    "",
    markdownTable(
      [
        "site",
        "hidden limit",
        "real",
        "predicted",
        "error",
        "predicted, 6 ms noise",
        "refused (real)",
        "refused (predicted)",
        "refused (6 ms noise)",
      ],
      rows,
      ["l", "l", "r", "r", "r", "r", "r", "r", "r"],
    ),
    "",
    `Duration within 10% on ${within} of ${errors.length} sites; median error ${
      fmtFixed(median(errors) * 100, 0)
    }%. Real runs vary too: refusals above all (timing on a real clock decides which probe is one too many).`,
    "",
  ].join("\n");
}

/** Runs the benchmark and returns its Markdown. */
export async function main(argv: readonly string[]): Promise<string> {
  const urls = Number(argValue(argv, "urls") ?? 1_000_000);
  const sites = Number(argValue(argv, "sites") ?? 10_000);
  const pages = Number(argValue(argv, "pages") ?? 150);
  const seed = Number(argValue(argv, "seed") ?? 1);
  const out = [scale(urls, sites)];
  if (!argv.includes("--no-reality")) out.push(await reality(seed, pages));
  return out.join("\n");
}

if (isMain(import.meta)) console.log(await main(process.argv.slice(2)));
