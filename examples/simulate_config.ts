/**
 * Know what a configuration will do before it touches a real API: the real
 * throttler, backoff and request queue against three simulated APIs, in
 * virtual time (`simulate()`, the library side of `politely simulate`).
 * 3,000 URLs over APIs with different hidden limits: how long, how many
 * 429s, and the rate each scope settles on against each limit, in well under
 * a second. Then a check a test could make: the rate-limited API refuses at
 * most 2% of the requests it sees with these settings.
 * Run with `npx tsx examples/simulate_config.ts` (or deno run -A, bun run).
 *
 * @module
 */
import process from "node:process";
import { pathToFileURL } from "node:url";
import { parseSiteSpec, simulate, type SimulateResult } from "../mod.ts";

/** Runs the example; resolves with the prediction. */
export function main(log: (line: string) => void = console.log): SimulateResult {
  const result = simulate({
    settings: { concurrentRequestsPerDomain: 4, downloadDelayMs: 50, retry: { times: 5 } },
    sites: [
      parseSiteSpec("bucket rate=10 burst=5 status=429 retry-after=seconds host=search.api.test"),
      parseSiteSpec("fixed quota=30 window=10s announce=ietf host=billing.api.test", 2),
      parseSiteSpec("conc max=2 latency=200ms status=503 host=export.api.test", 3),
    ],
    urls: 3_000,
    zipf: 1, // search gets most of the URLs, export the fewest
    seed: 1,
  });
  log(`3,000 URLs would take ${(result.durationMs / 60_000).toFixed(1)} min of crawling`);
  for (const s of result.sites) {
    log(
      `  ${s.host.padEnd(17)} ${s.limit.padEnd(20)} ${String(s.pages).padStart(5)} pages, ` +
        `${s.refused} refused, settled at ${s.settledPerSec.toFixed(2)}/s (limit ${
          s.limitPerSec?.toFixed(2) ?? "none"
        }/s)`,
    );
  }
  const search = result.sites[0]!;
  const share = search.refused / search.requests;
  log(
    `search.api.test: ${(share * 100).toFixed(1)}% refused, ${
      (search.refused / (search.durationMs / 60_000)).toFixed(1)
    } a minute`,
  );
  if (share > 0.02) throw new Error(`too many refusals: ${(share * 100).toFixed(1)}%`);
  return result;
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) main();
