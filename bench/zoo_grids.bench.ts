/**
 * Three grids of zoo sites in virtual time, for what the drawn sets (100-300
 * pages, latencies drawn per site) hardly reach:
 *
 * - `caps`: servers that serve 2-8 at once, answering 503 (without and with
 *   `Retry-After: 1`), at 2-80 ms ± 0 or 30%, 1,000 pages, 3 ms of arrival
 *   jitter (336 crawls with both modes).
 * - `long`: 1,500 pages of every common shape (caps; token buckets and strict
 *   spacers of 5-40/s; fixed windows, sliding logs and sliding-window counters
 *   of 10-100 per 1-10 s) at 20, 60 and 150 ms ± 30%, 429 or 503, with and
 *   without `Retry-After` in seconds (297 crawls a mode).
 * - `high-latency`: token buckets of 5-40/s with a burst of 1 or 4 at 100-500
 *   ms ± 30%, 300 and 1,000 pages, two seeds (320 crawls a mode).
 *
 * Five more (tenth session), run with `--grids all` or by name, for shapes
 * the drawn sets meet seldom or never:
 *
 * - `anchored`: fixed windows that begin at the first request after the last
 *   one ended (a counter with a time-to-live, Redis `INCR` + `EXPIRE`) of
 *   5-30 per 1-10 s, at 50 and 200 ms, without and with `Retry-After` in
 *   seconds, 20 windows' worth of pages (100 at least).
 * - `constant-retry-after`: token buckets of 2-20/s with a burst of 1 or 5
 *   that answer every refusal with the same `Retry-After` (1, 2 or 5 s),
 *   300 pages: each refusal costs the whole hold.
 * - `told-on-refusals`: fixed windows, sliding logs and sliding-window
 *   counters of 10 per 1 s to 60 per 60 s announcing IETF `RateLimit` or
 *   `X-RateLimit-*` with epoch resets, on refusals only and on every answer,
 *   at 30 and 150 ms, four and a half windows' worth of pages.
 * - `minute`: fixed windows, sliding logs and sliding-window counters of 60,
 *   120 and 300 per minute, at 100 ms, without `Retry-After`, with it in
 *   seconds and as a date, four windows' worth of pages.
 * - `slow-api`: token buckets of 1-5/s with a burst of 1, 5 or 10 at 100,
 *   300 and 600 ms, without and with `Retry-After` in seconds, 200 pages.
 *
 * Each of the five runs seeds 1 and 2 (latencies vary ± 30%, arrivals up to
 * 3 ms late).
 *
 * And `ten-line` (eleventh session): the README's ten-line pipeline (4 at
 * once per site, a 100 ms floor) against issue 11's "5/s limit that answers
 * 429 with Retry-After": a strict spacer, a bucket of 5, fixed and sliding
 * windows of 5 per second, at 5, 20 and 100 ms, `Retry-After: 2` on every
 * refusal or the limiter's own wait, 100 and 200 pages, seeds 1-3.
 *
 * And `windows` (twelfth session): fixed windows, sliding logs and
 * sliding-window counters of 2-20/s over windows of 1, 2, 5, 10, 30 and 60 s
 * (the counters met at four points of their window: a quarter, half, four
 * fifths in, or at its start), at 20 and 150 ms ± 30%, 429 without
 * `Retry-After`, four windows' worth of pages (200-1,500), seed 1: windows
 * without headers, found only by probing their blocks of refusals.
 *
 * And `clock-seconds` (thirteenth session): fixed windows of 5, 12, 20 and
 * 40 per clock second (a counter per epoch second, the limiter sites most
 * often write themselves) at 10, 60 and 150 ms ± 30%, answering 503 with
 * `Retry-After: 1` or 429 with the wait in seconds (1 s as well), 20
 * windows' worth of pages, seeds 1-3: each refusal holds a second.
 *
 * Per grid and mode: mean efficiency, crawls that miss the issue's targets
 * (efficiency under 0.8, at most 5% refused: the defaults' targets, used for
 * both modes here) and the mean refused share; `--list` prints the misses.
 * The ideal lets the client have 16 in flight (`runZooCrawl`): where a rate
 * times the latency is more than 8, the default of 8 at once per site bounds
 * politely below it.
 *
 * `npx tsx bench/zoo_grids.bench.ts [--grids caps,long,high-latency|all|NAME,...] [--rampup] [--list]`
 *
 * @module
 */
import { describeLimiter, type ZooSiteSpec } from "../lib/sim/zoo.ts";
import { runZooCrawl } from "../lib/sim/zoo_crawl.ts";
import { argValue, isMain, markdownTable } from "./_harness.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";

/** One crawl of a grid. */
interface Cell {
  readonly site: ZooSiteSpec;
  readonly pages: number;
  readonly seed: number;
  readonly jitterMs: number;
  /** Throttler settings besides `retry` (a grid of one configuration). */
  readonly settings?: ThrottlerSettingsInput;
}

type Limiter = ZooSiteSpec["limiter"];

function site(
  limiter: Limiter,
  latencyMs: number,
  latencyJitter: number,
  status: 429 | 503,
  retryAfter: ZooSiteSpec["retryAfter"],
  announced: Pick<ZooSiteSpec, "announce" | "announceOn"> = {},
): ZooSiteSpec {
  const told = announced.announce === undefined
    ? ""
    : `, ${announced.announce} on ${announced.announceOn ?? "all"}`;
  return {
    name: `${describeLimiter(limiter)}, ${latencyMs} ms ±${latencyJitter * 100}%, ${status}, ` +
      `Retry-After ${retryAfter ?? "none"}${told}`,
    limiter,
    latencyMs,
    latencyJitter,
    status,
    ...(retryAfter === undefined ? {} : { retryAfter }),
    ...announced,
  };
}

/** The five grids of the tenth session crawl each site with seeds 1 and 2. */
function twoSeeds(site: ZooSiteSpec, pages: number): Cell[] {
  return [1, 2].map((seed) => ({ site, pages, seed, jitterMs: 3 }));
}

function anchoredGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const quota of [5, 10, 30]) {
    for (const windowMs of [1000, 5000, 10000]) {
      for (const latency of [50, 200]) {
        for (const retryAfter of [undefined, "seconds"] as const) {
          const limiter: Limiter = { shape: "fixed-window", quota, windowMs, anchor: "request" };
          const pages = Math.max(100, Math.round((quota * 20000) / windowMs));
          cells.push(...twoSeeds(site(limiter, latency, 0.3, 429, retryAfter), pages));
        }
      }
    }
  }
  return cells;
}

function constantRetryAfterGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const ratePerSec of [2, 5, 10, 20]) {
    for (const burst of [1, 5]) {
      for (const retryAfter of [1, 2, 5]) {
        const limiter: Limiter = { shape: "token-bucket", ratePerSec, burst };
        cells.push(...twoSeeds(site(limiter, 100, 0.3, 429, retryAfter), 300));
      }
    }
  }
  return cells;
}

function toldOnRefusalsGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const announce of ["ietf", "x-epoch"] as const) {
    for (const shape of ["fixed-window", "sliding-window", "sliding-counter"] as const) {
      for (const [quota, windowMs] of [[10, 1000], [30, 5000], [100, 10000], [60, 60000]]) {
        for (const announceOn of ["all", "refusals"] as const) {
          for (const latency of [30, 150]) {
            const limiter = { shape, quota: quota!, windowMs: windowMs! } as Limiter;
            const s = site(limiter, latency, 0.3, 429, "seconds", { announce, announceOn });
            cells.push(...twoSeeds(s, Math.round(quota! * 4.5)));
          }
        }
      }
    }
  }
  return cells;
}

function minuteGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const quota of [60, 120, 300]) {
    for (const shape of ["fixed-window", "sliding-window", "sliding-counter"] as const) {
      for (const retryAfter of [undefined, "seconds", "date"] as const) {
        const limiter = { shape, quota, windowMs: 60000 } as Limiter;
        cells.push(...twoSeeds(site(limiter, 100, 0.3, 429, retryAfter), quota * 4));
      }
    }
  }
  return cells;
}

function slowApiGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const ratePerSec of [1, 2, 3, 5]) {
    for (const burst of [1, 5, 10]) {
      for (const latency of [100, 300, 600]) {
        for (const retryAfter of [undefined, "seconds"] as const) {
          const limiter: Limiter = { shape: "token-bucket", ratePerSec, burst };
          cells.push(...twoSeeds(site(limiter, latency, 0.3, 429, retryAfter), 200));
        }
      }
    }
  }
  return cells;
}

function capsGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const maxConcurrency of [2, 3, 4, 5, 6, 7, 8]) {
    for (const latency of [2, 5, 10, 20, 40, 80]) {
      for (const jitter of [0, 0.3]) {
        for (const retryAfter of [undefined, 1] as const) {
          cells.push({
            site: site({ shape: "concurrency", maxConcurrency }, latency, jitter, 503, retryAfter),
            pages: 1000,
            seed: 1,
            jitterMs: 3,
          });
        }
      }
    }
  }
  return cells;
}

function longGrid(): Cell[] {
  const limiters: Limiter[] = [];
  for (const c of [2, 3, 4, 5, 6, 8]) limiters.push({ shape: "concurrency", maxConcurrency: c });
  for (const ratePerSec of [5, 10, 20, 40]) {
    for (const burst of [1, 5, 20]) limiters.push({ shape: "token-bucket", ratePerSec, burst });
  }
  for (const [quota, windowMs] of [[10, 1000], [20, 1000], [50, 5000], [100, 10000], [30, 2000]]) {
    limiters.push({ shape: "fixed-window", quota: quota!, windowMs: windowMs! });
    limiters.push({ shape: "sliding-window", quota: quota!, windowMs: windowMs! });
    limiters.push({ shape: "sliding-counter", quota: quota!, windowMs: windowMs! });
  }
  const cells: Cell[] = [];
  for (const limiter of limiters) {
    for (const latency of [20, 60, 150]) {
      for (
        const [status, retryAfter] of [[429, undefined], [503, undefined], [
          429,
          "seconds",
        ]] as const
      ) {
        cells.push({
          site: site(limiter, latency, 0.3, status, retryAfter),
          pages: 1500,
          seed: 1,
          jitterMs: 3,
        });
      }
    }
  }
  return cells;
}

function highLatencyGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const pages of [300, 1000]) {
    for (const ratePerSec of [5, 10, 16, 25, 40]) {
      for (const burst of [1, 4]) {
        for (const latency of [100, 200, 350, 500]) {
          for (const retryAfter of [undefined, "seconds"] as const) {
            for (const seed of [1, 2]) {
              cells.push({
                site: site(
                  { shape: "token-bucket", ratePerSec, burst },
                  latency,
                  0.3,
                  429,
                  retryAfter,
                ),
                pages,
                seed,
                jitterMs: 3,
              });
            }
          }
        }
      }
    }
  }
  return cells;
}

/** The README's ten-line pipeline: 4 at once per site, a 100 ms floor. */
const TEN_LINE: ThrottlerSettingsInput = { concurrentRequestsPerDomain: 4, downloadDelayMs: 100 };

/**
 * Issue 11's "README's ten-line pipeline at 0.8 of a 5/s limit that answers
 * 429 with Retry-After": 5/s as a strict spacer, a bucket of 5, fixed and
 * sliding windows of 5 per second, at 5, 20 and 100 ms ± 30%, `Retry-After`
 * of 2 s on every refusal or the limiter's own wait in seconds, 100 and 200
 * pages, seeds 1-3, with the pipeline's settings.
 */
function tenLineGrid(): Cell[] {
  const limiters: Limiter[] = [
    { shape: "token-bucket", ratePerSec: 5, burst: 1 },
    { shape: "token-bucket", ratePerSec: 5, burst: 5 },
    { shape: "fixed-window", quota: 5, windowMs: 1000 },
    { shape: "sliding-window", quota: 5, windowMs: 1000 },
  ];
  const cells: Cell[] = [];
  for (const limiter of limiters) {
    for (const latency of [5, 20, 100]) {
      for (const retryAfter of [2, "seconds"] as const) {
        for (const pages of [100, 200]) {
          for (const seed of [1, 2, 3]) {
            const s = site(limiter, latency, 0.3, 429, retryAfter);
            cells.push({ site: s, pages, seed, jitterMs: 3, settings: TEN_LINE });
          }
        }
      }
    }
  }
  return cells;
}

/** See `windows` in the module doc: 288 crawls. */
function windowsGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const shape of ["fixed-window", "sliding-window", "sliding-counter"] as const) {
    for (const windowMs of [1000, 2000, 5000, 10000, 30000, 60000]) {
      for (const perSec of [2, 5, 10, 20]) {
        const quota = Math.max(3, Math.round((perSec * windowMs) / 1000));
        const pages = Math.min(1500, Math.max(200, quota * 4));
        const phases = shape === "sliding-counter" ? [1, 0.25, 0.5, 0.8] : [1];
        for (const phase of phases) {
          const limiter = (shape === "sliding-counter"
            ? { shape, quota, windowMs, phaseMs: phase * windowMs }
            : { shape, quota, windowMs }) as Limiter;
          for (const latency of [20, 150]) {
            cells.push({
              site: site(limiter, latency, 0.3, 429, undefined),
              pages,
              seed: 1,
              jitterMs: 3,
            });
          }
        }
      }
    }
  }
  return cells;
}

/** See `clock-seconds` in the module doc: 72 crawls. */
function clockSecondsGrid(): Cell[] {
  const cells: Cell[] = [];
  for (const quota of [5, 12, 20, 40]) {
    for (const latency of [10, 60, 150]) {
      for (const [status, retryAfter] of [[503, 1], [429, "seconds"]] as const) {
        for (const seed of [1, 2, 3]) {
          const limiter: Limiter = { shape: "fixed-window", quota, windowMs: 1000 };
          cells.push({
            site: site(limiter, latency, 0.3, status, retryAfter),
            pages: 20 * quota,
            seed,
            jitterMs: 3,
          });
        }
      }
    }
  }
  return cells;
}

const GRIDS: Record<string, () => Cell[]> = {
  caps: capsGrid,
  long: longGrid,
  "high-latency": highLatencyGrid,
  anchored: anchoredGrid,
  "constant-retry-after": constantRetryAfterGrid,
  "told-on-refusals": toldOnRefusalsGrid,
  minute: minuteGrid,
  "slow-api": slowApiGrid,
  "ten-line": tenLineGrid,
  windows: windowsGrid,
  "clock-seconds": clockSecondsGrid,
};

/** The grids run when `--grids` is not given. */
const DEFAULT_GRIDS = ["caps", "long", "high-latency"];

/** Runs the grids and returns their Markdown. */
export function main(argv: readonly string[]): string {
  const asked = argValue(argv, "grids");
  const names = asked === "all"
    ? Object.keys(GRIDS)
    : asked === undefined
    ? DEFAULT_GRIDS
    : asked.split(",");
  const modes = argv.includes("--rampup") ? [false, true] : [false];
  const list = argv.includes("--list");
  const rows: string[][] = [];
  const misses: string[] = [];
  for (const name of names) {
    const grid = GRIDS[name];
    if (grid === undefined) {
      throw new Error(`--grids: unknown grid '${name}' (${Object.keys(GRIDS).join(", ")})`);
    }
    const cells = grid();
    for (const rampup of modes) {
      let sum = 0;
      let refused = 0;
      let missed = 0;
      for (const cell of cells) {
        const r = runZooCrawl({
          site: cell.site,
          pages: cell.pages,
          seed: cell.seed,
          rampup,
          outboundJitterMs: cell.jitterMs,
          settings: { ...cell.settings, retry: { times: 10 } },
        });
        const share = r.refused / r.requests;
        sum += r.efficiency;
        refused += share;
        if (r.efficiency < 0.8 || share > 0.05) {
          missed++;
          misses.push(
            `- ${name}, ${
              rampup ? "rampup" : "defaults"
            }: ${cell.site.name}, ${cell.pages} pages, ` +
              `seed ${cell.seed}: efficiency ${
                r.efficiency.toFixed(2)
              }, refused ${r.refused} of ${r.requests}`,
          );
        }
      }
      rows.push([
        name,
        rampup ? "rampup" : "defaults",
        String(cells.length),
        (sum / cells.length).toFixed(3),
        `${missed}`,
        `${((100 * refused) / cells.length).toFixed(2)}%`,
      ]);
    }
  }
  const table = markdownTable(
    ["grid", "mode", "crawls", "mean efficiency", "under 0.8 or over 5% refused", "mean refused"],
    rows,
    ["l", "l", "r", "r", "r", "r"],
  );
  return `### Zoo grids (virtual time)\n\n${table}\n${list ? `\n${misses.join("\n")}\n` : ""}`;
}

if (isMain(import.meta)) console.log(main(process.argv.slice(2)));
