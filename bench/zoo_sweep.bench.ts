/**
 * Adaptive limits on sites they were not tuned on, in virtual time: for each
 * seed, the 17 zoo sites `generateZooSites` draws (every shape, random
 * parameters), 200 pages each, with the defaults and with rampup. Prints one
 * row per seed and mode (median and lowest efficiency, mean refused share,
 * sites that miss the issue's targets: efficiency 0.8 with the defaults, 0.9
 * with rampup, at most 5% refused) and the misses. Seconds to run, no sockets.
 *
 * `npx tsx bench/zoo_sweep.bench.ts [--seeds 1,2,3,4,5] [--pages 200] [--jitter 6] [--latency 5] [--set issue|retry-after|flaky|sliding-headers|sliding-headers-drawn|headerless] [--fast-refusals]`
 *
 * `--set issue`: instead of drawn sites, the 162 sites of the shapes issue 11
 * measured (`lib/sim/zoo_issue_sites.ts`; use one seed). `--set retry-after`:
 * 144 sites of 2-10/s that answer every refusal with a hold of 1-5 s
 * (`retryAfterSites` there). `--set flaky`: 36 sites whose backend fails
 * 2-10% of requests at random with 502 or 504 (`flakySites`; their
 * efficiency against the same sites without failures: test/zoo_crawl.test.ts).
 * `--set sliding-headers-drawn`: 30 sliding logs and counters per seed
 * announcing with every header family, drawn (`drawnSlidingHeaderSites`).
 * `--set headerless`: 396 sites in a grid of every shape announcing nothing
 * (`headerlessGridSites`; one seed, `--jitter 3`).
 * `--set sliding-headers`: 60 sliding logs and sliding-window counters that
 * announce their budgets (`slidingHeaderSites`; `--pages 500` for the table
 * of docs/DECISIONS.md).
 *
 * `--latency MS`: every site answers in MS (a loopback server's few ms),
 * instead of its drawn latency (its variation stays).
 *
 * `--jitter J`: each request reaches the site up to J ms late (`u⁴ × J`, see
 * `runZooCrawl`'s `outboundJitterMs`), as over real loopback `fetch`: the
 * gaps the site sees are shorter or longer than those sent.
 *
 * `--fast-refusals`: every site answers a refusal in 1 ms and a page in its
 * latency, as most rate limiters do (they sit in front of the work): the
 * client's answers then come back out of the order it sent them in, and one
 * in flight after a cut waits a page's latency between sends.
 *
 * @module
 */
import { describeLimiter } from "../lib/sim/zoo.ts";
import { runZooCrawl } from "../lib/sim/zoo_crawl.ts";
import {
  flakySites,
  headerlessGridSites,
  issueShapeSites,
  retryAfterSites,
  slidingHeaderSites,
} from "../lib/sim/zoo_issue_sites.ts";
import { drawnSlidingHeaderSites, generateZooSites } from "../lib/sim/zoo_random.ts";
import { argValue, isMain, markdownTable, median } from "./_harness.ts";

/** Runs the sweep and returns its Markdown. */
export function main(argv: readonly string[]): string {
  const seeds = (argValue(argv, "seeds") ?? "1,2,3,4,5").split(",").map(Number);
  const pages = Number(argValue(argv, "pages") ?? 200);
  const jitter = Number(argValue(argv, "jitter") ?? 0);
  const latency = argValue(argv, "latency");
  const fastRefusals = argv.includes("--fast-refusals");
  // `--set issue`: the shapes issue 11 measured, the same for every seed.
  const set = argValue(argv, "set") ?? "drawn";
  const rows: string[][] = [];
  const misses: string[] = [];
  for (const seed of seeds) {
    for (const ramp of [false, true]) {
      const effs: number[] = [];
      const refused: number[] = [];
      let missed = 0;
      const chosen = set === "issue"
        ? issueShapeSites()
        : set === "retry-after"
        ? retryAfterSites()
        : set === "flaky"
        ? flakySites()
        : set === "sliding-headers"
        ? slidingHeaderSites()
        : set === "sliding-headers-drawn"
        ? drawnSlidingHeaderSites(seed)
        : set === "headerless"
        ? headerlessGridSites()
        : generateZooSites(seed);
      const sites = chosen.map((site) => ({
        ...site,
        ...(latency === undefined ? {} : { latencyMs: Number(latency) }),
        ...(fastRefusals ? { rejectLatencyMs: 1 } : {}),
      }));
      for (const site of sites) {
        const r = runZooCrawl({
          site,
          pages,
          rampup: ramp,
          outboundJitterMs: jitter,
          settings: { retry: { times: 10 } },
        });
        const share = r.refused / r.requests;
        effs.push(r.efficiency);
        refused.push(share);
        if (r.efficiency < (ramp ? 0.9 : 0.8) || share > 0.05) {
          missed++;
          misses.push(
            `seed ${seed} ${ramp ? "rampup" : "defaults"}: ${site.name} (${
              describeLimiter(site.limiter)
            }, ${site.latencyMs} ms, ${
              site.status ?? 429
            }, Retry-After ${site.retryAfter}, ${site.announce}): efficiency ${
              r.efficiency.toFixed(2)
            }, refused ${(share * 100).toFixed(1)}%`,
          );
        }
      }
      rows.push([
        String(seed),
        ramp ? "rampup" : "defaults",
        median(effs).toFixed(2),
        Math.min(...effs).toFixed(2),
        `${((refused.reduce((a, b) => a + b, 0) / refused.length) * 100).toFixed(1)}%`,
        `${missed}/${sites.length}`,
      ]);
    }
  }
  return [
    `### Adaptive limits on drawn zoo sites (virtual time, ${pages} pages each${
      jitter > 0 ? `, arrivals up to ${jitter} ms late` : ""
    }${fastRefusals ? ", refusals answered in 1 ms" : ""})`,
    "",
    markdownTable(
      ["seed", "mode", "median efficiency", "lowest", "mean refused", "misses"],
      rows,
      ["r", "l", "r", "r", "r", "r"],
    ),
    "",
    "Misses (efficiency under 0.8 with the defaults or 0.9 with rampup, or over 5% refused):",
    "",
    ...misses.map((m) => `- ${m}`),
  ].join("\n");
}

if (isMain(import.meta)) console.log(main(process.argv.slice(2)));
