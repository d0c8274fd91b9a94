/**
 * Backoff against a rate-limited site: a loopback token bucket of 10
 * requests/s (burst 3, no Retry-After, 429 beyond that), 200 URLs, per-domain
 * concurrency 8, no download delay, 50 retries per URL (Scrapy's run of this
 * scenario: 6,314 requests for 113 successes, 87 URLs given up).
 *
 * Scenarios: backoff off (`backoff.httpCodes: []`, retries on), backoff with
 * the defaults, and backoff tuned for a site of about 10 requests/s. Each runs
 * on a fresh loopback site with real `fetch`, except "defaults", which takes
 * about ten minutes on the real clock: it runs on the virtual-time simulated
 * site (the same token bucket, 10 ms latency) unless `--full` is given.
 *
 * Run: `npx tsx bench/backoff.bench.ts [--full]`. Prints Markdown.
 *
 * @module
 */
import { from, lastValueFrom, type Observable, type SchedulerLike, toArray } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { startSite } from "../lib/demo/sites.ts";
import { createFetchDownload } from "../lib/http/fetch_download.ts";
import type { Outcome } from "../lib/outcome.ts";
import { createSimulatedSite } from "../lib/sim/simulated_site.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { backoffOn } from "../operators/backoff_on.ts";
import { type DownloadFn, throttleByScope } from "../operators/throttle_by_scope.ts";
import { now } from "./_harness.ts";

const URLS = 200;
const RETRY_TIMES = 50;
const SITE = { ratePerSec: 10, burst: 3, latencyMs: 10 } as const;
const BASE: ThrottlerSettingsInput = {
  concurrentRequestsPerDomain: 8,
  downloadDelayMs: 0,
  retry: { times: RETRY_TIMES },
};

interface Scenario {
  readonly name: string;
  readonly settings: ThrottlerSettingsInput;
}

const SCENARIOS: readonly Scenario[] = [
  { name: "backoff off (no triggers)", settings: { ...BASE, backoff: { httpCodes: [] } } },
  { name: "backoff on, defaults", settings: BASE },
  {
    name: "backoff on, minDelayMs 100, delayFactor 1.2, windowMs 5000",
    settings: { ...BASE, backoff: { minDelayMs: 100, delayFactor: 1.2, windowMs: 5_000 } },
  },
];

interface Result {
  readonly where: "loopback" | "virtual time";
  readonly seconds: number;
  readonly requests: number;
  readonly rejected: number;
  readonly ok: number;
  readonly exhausted: number;
  readonly maxLevel: number;
}

type Status = { readonly status: number };

async function crawl(
  settings: ThrottlerSettingsInput,
  scheduler: SchedulerLike | undefined,
  origin: string,
  download: DownloadFn<string, Status>,
  run: <T>(work: Observable<T>) => Promise<T>,
): Promise<{ outcomes: Outcome<string, Status>[]; maxLevel: number }> {
  const throttler = createThrottler<string>(settings, scheduler === undefined ? {} : { scheduler });
  let maxLevel = 0;
  const sub = throttler.events$.subscribe((e) => {
    if (e.type === "backoff" && e.level > maxLevel) maxLevel = e.level;
  });
  const urls = Array.from({ length: URLS }, (_, i) => `${origin}/page/${i}`);
  const outcomes = await run(
    from(urls).pipe(throttleByScope(throttler, download), backoffOn(throttler), toArray()),
  );
  sub.unsubscribe();
  return { outcomes, maxLevel };
}

function tally(outcomes: readonly Outcome<string, Status>[]) {
  const ok = outcomes.filter((o) => o.kind === "response" && o.response.status === 200).length;
  return { ok, exhausted: outcomes.filter((o) => o.exhausted === true).length };
}

async function onLoopback(settings: ThrottlerSettingsInput): Promise<Result> {
  const site = await startSite({ style: "token-bucket", ...SITE });
  try {
    const fetchDownload = createFetchDownload({ timeoutMs: 10_000, readBody: false });
    const start = now();
    const { outcomes, maxLevel } = await crawl(
      settings,
      undefined,
      site.url,
      fetchDownload,
      lastValueFrom,
    );
    const seconds = (now() - start) / 1000;
    const stats = site.stats();
    return {
      where: "loopback",
      seconds,
      requests: stats.requests,
      rejected: stats.byStatus[429] ?? 0,
      ...tally(outcomes),
      maxLevel,
    };
  } finally {
    await site.close();
  }
}

async function inVirtualTime(settings: ThrottlerSettingsInput): Promise<Result> {
  const scheduler = new TestScheduler(() => {});
  scheduler.maxFrames = Number.POSITIVE_INFINITY;
  const site = createSimulatedSite({ ...SITE, rejectLatencyMs: 1, scheduler });
  let end = 0;
  const run = <T>(work: Observable<T>) =>
    new Promise<T>((resolve, reject) => {
      let value: T | undefined;
      work.subscribe({
        next: (v) => (value = v),
        error: reject,
        complete: () => {
          end = scheduler.now();
          resolve(value as T);
        },
      });
      scheduler.flush();
    });
  const { outcomes, maxLevel } = await crawl(
    settings,
    scheduler,
    "http://site.test",
    (url, context) => site.download(url, { signal: context.signal }),
    run,
  );
  const stats = site.stats();
  return {
    where: "virtual time",
    seconds: end / 1000,
    requests: stats.requests,
    rejected: stats.byStatus[429] ?? 0,
    ...tally(outcomes),
    maxLevel,
  };
}

async function main(): Promise<void> {
  const full = process.argv.includes("--full");
  console.log(
    `Site: token bucket ${SITE.ratePerSec} req/s, burst ${SITE.burst}, ${SITE.latencyMs} ms latency, 429 without ` +
      `Retry-After. Crawl: ${URLS} URLs, concurrency 8, no delay, ${RETRY_TIMES} retries per URL.\n`,
  );
  console.log(
    "| scenario | clock | time (s) | requests sent | 429s | succeeded | gave up | max backoff level |",
  );
  console.log("|---|---|---:|---:|---:|---:|---:|---:|");
  for (const s of SCENARIOS) {
    const real = full || s.name !== "backoff on, defaults";
    const r = real ? await onLoopback(s.settings) : await inVirtualTime(s.settings);
    console.log(
      `| ${s.name} | ${r.where} | ${
        r.seconds.toFixed(1)
      } | ${r.requests} | ${r.rejected} | ${r.ok} | ` +
        `${r.exhausted} | ${r.maxLevel} |`,
    );
  }
  console.log(
    "\nScrapy 2.8, same scenario (its defaults, 50 retries): 6,314 requests, 113 succeeded, 87 gave up.",
  );
}

await main();
