/**
 * Rampup against a real loopback token bucket (10 requests/s, burst 3, 50 ms
 * latency, 429 without Retry-After): 200 URLs with rampup (window 2 s), then
 * the same with the AutoThrottle manager. The ideal is 20 s and no 429.
 * Prints a Markdown table. Run: `npx tsx bench/rampup.bench.ts`.
 *
 * @module
 */
import { from, lastValueFrom, toArray } from "rxjs";
import {
  backoffOn,
  createThrottler,
  type Outcome,
  throttleByScope,
  type ThrottlerSettingsInput,
} from "../mod.ts";
import { rampup } from "../operators/rampup.ts";
import { startSite } from "../lib/demo/sites.ts";

const URLS = 200;
const RATE = 10;

interface Row {
  readonly name: string;
  readonly seconds: number;
  readonly sent: number;
  readonly rejected: number;
  readonly ok: number;
}

async function crawl(
  name: string,
  settings: ThrottlerSettingsInput,
  withRampup: boolean,
): Promise<Row> {
  const site = await startSite({
    style: "token-bucket",
    ratePerSec: RATE,
    burst: 3,
    latencyMs: 50,
  });
  try {
    const throttler = createThrottler(settings);
    if (process.env["BENCH_VERBOSE"]) {
      throttler.events$.subscribe((e) => {
        if (e.type === "rampup" || e.type === "backoff" || e.type === "recovery") {
          console.error(`${Math.round(performance.now())} ${e.type} ${JSON.stringify(e)}`);
        }
      });
    }
    const urls = Array.from({ length: URLS }, (_, i) => `${site.url}/page/${i}`);
    const download = async (url: string, c: { signal: AbortSignal }) => {
      const r = await fetch(url, { signal: c.signal });
      await r.arrayBuffer();
      return { status: r.status, headers: r.headers };
    };
    const started = performance.now(); // real clock: this is a benchmark
    const outcomes: Outcome<unknown, { status: number }>[] = await lastValueFrom(
      from(urls).pipe(
        throttleByScope(throttler, download),
        backoffOn(throttler, { retry: { times: 10 } }),
        withRampup ? rampup(throttler) : (o) => o,
        toArray(),
      ),
    );
    const seconds = (performance.now() - started) / 1000;
    const stats = site.stats();
    return {
      name,
      seconds,
      sent: stats.requests,
      rejected: stats.byStatus[429] ?? 0,
      ok: outcomes.filter((o) => o.kind === "response" && o.response.status === 200).length,
    };
  } finally {
    await site.close();
  }
}

/** Runs both crawls and returns the Markdown table. */
export async function main(): Promise<string> {
  const window = { backoff: { windowMs: 2_000 } };
  const only = process.env["BENCH_ONLY"];
  const rows = [];
  if (only !== "autothrottle") rows.push(await crawl("rampup (window 2 s)", window, true));
  if (only !== "rampup") {
    rows.push(
      await crawl("autoThrottleManager (Scrapy defaults)", {
        ...window,
        autothrottle: { enabled: true },
      }, false),
    );
  }
  const lines = [
    `Loopback token bucket ${RATE}/s, burst 3, 50 ms latency, 429 without Retry-After; ${URLS} URLs (ideal ${
      URLS / RATE
    } s, no 429).`,
    "",
    "| run | time (s) | vs ideal | requests sent | 429s | 429 share | pages ok |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows.map((r) =>
      `| ${r.name} | ${r.seconds.toFixed(1)} | ${
        ((r.seconds / (URLS / RATE) - 1) * 100).toFixed(0)
      }% | ${r.sent} | ${r.rejected} | ${((r.rejected / r.sent) * 100).toFixed(1)}% | ${r.ok} |`
    ),
  ];
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(await main());
}
