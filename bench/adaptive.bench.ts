/**
 * How close each crawler gets to limits it is not told, over real loopback
 * HTTP: the limiter zoo (`lib/sim/zoo.ts`) served by `startZooServer`, sites
 * drawn from a seeded generator (no hand-picked values), 200 pages each,
 * crawled with `fetch` by four contenders side by side, each on a fresh
 * server of the same site:
 *
 * - politely defaults: `createThrottler({ retry: { times: 10 } })`,
 *   `throttleByScope` and `backoffOn`, downloading with `createFetchDownload`
 *   (as `politely crawl` does);
 * - politely rampup: the same plus the `rampup` operator;
 * - Scrapy AutoThrottle (modelled): politely's AutoThrottle manager with
 *   Scrapy's defaults, no adaptive limits;
 * - Scrapy 2.8 backoff (modelled): the reference's exponential backoff, no
 *   adaptive limits.
 *
 * The same sites are crawled in virtual time (`runZooCrawl`, defaults and
 * rampup) so the simulation can be set against reality. Prints Markdown
 * tables and writes an SVG plot of admitted requests per second against the
 * hidden limit. Run: `npm run bench -- adaptive` or
 * `npx tsx bench/adaptive.bench.ts [--pages 200] [--seed 1] [--cap 120]
 * [--parallel 0] [--svg docs/figures/adaptive.svg | --svg none]`.
 *
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { from, type Subscription } from "rxjs";
import {
  backoffOn,
  createFetchDownload,
  createThrottler,
  throttleByScope,
  type ThrottlerSettingsInput,
} from "../mod.ts";
import { rampup } from "../operators/rampup.ts";
import type { Arrival } from "../lib/demo/_limiters.ts";
import { ratePlotSvg } from "../lib/sim/rate_plot.ts";
import { describeLimiter, idealMs, limitPerSec, type ZooSiteSpec } from "../lib/sim/zoo.ts";
import { runZooCrawl } from "../lib/sim/zoo_crawl.ts";
import { generateZooSites } from "../lib/sim/zoo_random.ts";
import { startZooServer } from "../lib/sim/zoo_server.ts";
import { argValue, fmtFixed, isMain, markdownTable, median, now, ROOT } from "./_harness.ts";

// ---------------------------------------------------------------------------
// Sites

/** The site in one cell: its limit, latency and how it refuses. */
function describeSite(s: ZooSiteSpec): string {
  const ra = s.retryAfter === "seconds"
    ? ", RA s"
    : s.retryAfter === "date"
    ? ", RA date"
    : typeof s.retryAfter === "number"
    ? `, RA always ${s.retryAfter} s`
    : "";
  const ann = s.announce !== undefined && s.announce !== "none" ? `, ${s.announce}` : "";
  return `${describeLimiter(s.limiter)}, ${s.latencyMs} ms, ${s.status ?? 429}${ra}${ann}`;
}

// ---------------------------------------------------------------------------
// Crawls

interface Contender {
  readonly name: string;
  readonly settings: ThrottlerSettingsInput;
  readonly rampup: boolean;
}

const CONTENDERS: readonly Contender[] = [
  { name: "politely defaults", settings: { retry: { times: 10 } }, rampup: false },
  { name: "politely rampup", settings: { retry: { times: 10 } }, rampup: true },
  {
    name: "Scrapy AutoThrottle (modelled)",
    settings: { autothrottle: { enabled: true }, adaptive: false, retry: { times: 10 } },
    rampup: false,
  },
  {
    name: "Scrapy 2.8 backoff (modelled)",
    settings: { adaptive: false, retry: { times: 10 } },
    rampup: false,
  },
];

/** One crawl's figures. */
interface Run {
  readonly pages: number;
  /** Pages that ended admitted. */
  readonly ok: number;
  /** Stopped at the cap before every page had its outcome. */
  readonly capped: boolean;
  /** The ideal for the pages admitted. */
  readonly idealMs: number;
  /** First arrival to last outcome, or to the cap. */
  readonly measuredMs: number;
  readonly requests: number;
  readonly refused: number;
  /** Refusals inside an announced hold; undefined when the site announces nothing. */
  readonly inHold: number | undefined;
  /** The server's log (loopback runs). */
  readonly log: readonly Arrival[];
}

function efficiency(r: Run): number {
  return r.ok === 0 ? 0 : r.idealMs / r.measuredMs;
}

async function crawlLoopback(
  spec: ZooSiteSpec,
  contender: Contender,
  pages: number,
  capMs: number,
): Promise<Run> {
  const server = await startZooServer(spec);
  const throttler = createThrottler(contender.settings);
  const urls = Array.from({ length: pages }, (_, i) => `${server.url}/page/${i}`);
  // The command line's download: fetch, the body read and dropped, and the
  // time each request is written reported to the gate (wentOut).
  const download = createFetchDownload({ readBody: false });
  let ok = 0;
  let done = 0;
  let lastAt = 0;
  let capped = false;
  let sub: Subscription | undefined;
  let cap: ReturnType<typeof setTimeout> | undefined;
  try {
    await new Promise<void>((finish) => {
      cap = setTimeout(() => {
        capped = true;
        sub?.unsubscribe();
        finish();
      }, capMs);
      sub = from(urls).pipe(
        throttleByScope(throttler, download),
        backoffOn(throttler),
        contender.rampup ? rampup(throttler) : (o) => o,
      ).subscribe({
        next: (o) => {
          lastAt = Date.now(); // the server's clock (asyncScheduler) is Date.now() too
          done++;
          if (o.kind === "response" && o.response.status === 200) ok++;
        },
        error: () => finish(),
        complete: () => finish(),
      });
    });
  } finally {
    clearTimeout(cap);
    sub?.unsubscribe();
  }
  const stats = server.stats();
  await server.close();
  const first = stats.arrivals[0] ?? 0;
  const concurrency = throttler.settings.concurrentRequests;
  return {
    pages,
    ok,
    capped: capped && done < pages,
    idealMs: idealMs(spec, ok, concurrency),
    measuredMs: capped && done < pages
      ? Math.max(1, Date.now() - first)
      : Math.max(1, lastAt - first),
    requests: stats.requests,
    refused: stats.rejected,
    inHold: spec.announce !== undefined && spec.announce !== "none"
      ? stats.refusedInHold
      : undefined,
    log: stats.log,
  };
}

function crawlVirtual(spec: ZooSiteSpec, contender: Contender, pages: number, capMs: number): Run {
  const r = runZooCrawl({
    site: spec,
    pages,
    settings: contender.settings,
    rampup: contender.rampup,
    limitMs: capMs,
  });
  const concurrency = createThrottler(contender.settings).settings.concurrentRequests;
  return {
    pages,
    ok: r.ok,
    // runZooCrawl reckons a crawl cut at capMs up to the cap (`cut`).
    capped: r.cut,
    idealMs: idealMs(spec, r.ok, concurrency),
    measuredMs: r.measuredMs,
    requests: r.requests,
    refused: r.refused,
    inHold: undefined,
    log: [],
  };
}

// ---------------------------------------------------------------------------
// Output

const pct = (part: number, whole: number) =>
  whole === 0 ? "n/a" : `${((part / whole) * 100).toFixed(1)}%`;

function measuredCell(r: Run, capS: number): string {
  return r.capped ? `> ${capS} (${r.ok}/${r.pages} pages)` : fmtFixed(r.measuredMs / 1000, 1);
}

function summary(name: string, runs: readonly Run[]): string {
  const effs = runs.map(efficiency);
  const refusedPct = runs.map((r) => (r.requests === 0 ? 0 : (r.refused / r.requests) * 100));
  const mean = refusedPct.reduce((a, b) => a + b, 0) / Math.max(1, refusedPct.length);
  const capped = runs.filter((r) => r.capped).length;
  // Virtual runs carry no server log and count no holds.
  const counted = runs.filter((r) => r.inHold !== undefined);
  const inHold = counted.reduce((a, r) => a + (r.inHold ?? 0), 0);
  const holds = counted.length === 0
    ? ""
    : `, ${inHold} refusals inside announced holds (${counted.length} announcing sites)`;
  return `**${name}**: median efficiency ${fmtFixed(median(effs))}, min ${
    fmtFixed(Math.min(...effs))
  }, mean refused ${
    mean.toFixed(1)
  }% of requests, ${capped} of ${runs.length} crawls cut at the cap${holds}.`;
}

// ---------------------------------------------------------------------------
// Main

async function pool<T>(tasks: readonly (() => Promise<T>)[], width: number): Promise<T[]> {
  const out: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(width, tasks.length)) }, worker));
  return out;
}

/** Runs the bench and returns its Markdown. */
export async function main(argv: readonly string[]): Promise<string> {
  const pages = Number(argValue(argv, "pages") ?? 200);
  const seed = Number(argValue(argv, "seed") ?? 1);
  const capS = Number(argValue(argv, "cap") ?? 120);
  const parallelArg = Number(argValue(argv, "parallel") ?? 0);
  const svgArg = argValue(argv, "svg") ?? "docs/figures/adaptive.svg";
  const capMs = capS * 1000;
  const sites = generateZooSites(seed);
  const parallel = parallelArg > 0 ? parallelArg : sites.length;

  // Virtual time first: it is CPU-bound and must not share the event loop with the loopback crawls.
  const virtual = sites.map((s) => {
    process.stderr.write(`virtual ${s.name}\n`);
    return CONTENDERS.slice(0, 2).map((c) => crawlVirtual(s, c, pages, capMs));
  });

  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const started = now();
  const loopback = await pool(
    sites.map((s) => async () => {
      process.stderr.write(`loopback ${s.name}: ${describeSite(s)}\n`);
      // The four contenders at once, each on its own server of the same site.
      const runs = await Promise.all(CONTENDERS.map((c) => crawlLoopback(s, c, pages, capMs)));
      process.stderr.write(
        `  ${s.name}: ${runs.map((r) => fmtFixed(efficiency(r))).join(" / ")}\n`,
      );
      return runs;
    }),
    parallel,
  );
  lag.disable();
  const wallS = (now() - started) / 1000;

  const out: string[] = [
    `### adaptive: the limiter zoo over real loopback HTTP`,
    "",
    `${sites.length} sites drawn from seed ${seed} (\`--seed\`), ${pages} pages each (\`--pages\`), ` +
    `crawled with \`fetch\` over 127.0.0.1, each contender on a fresh server of the same site, ` +
    `${parallel === sites.length ? "every site" : `${parallel} sites`} at once ` +
    `(the four contenders of a site side by side). A crawl is cut at ${capS} s (\`--cap\`); ` +
    `a cut crawl's efficiency is the ideal time of the pages it got over ${capS} s. ` +
    `Efficiency = ideal time (a client that knows the limit, \`idealMs\`) / measured time ` +
    `(first arrival to last outcome). "in hold" = refusals of requests that arrived while the ` +
    `last answer had announced a remaining budget of 0 and the reset had not passed (server-side; ` +
    `"n/a" where the site announces nothing). "sim" = the same site and settings in virtual time ` +
    `(\`runZooCrawl\`, same cap). The two Scrapy rows are models built from politely's own ` +
    `managers (AutoThrottle with Scrapy's defaults; the reference's exponential backoff), ` +
    `not Scrapy itself. Loopback phase: ${wallS.toFixed(0)} s wall, event-loop delay p99 ` +
    `${(lag.percentile(99) / 1e6).toFixed(1)} ms, max ${(lag.max / 1e6).toFixed(1)} ms.`,
    "",
  ];

  // One wide table of efficiencies.
  out.push("#### Efficiency side by side", "");
  out.push(
    markdownTable(
      [
        "site",
        "hidden limit",
        "ideal s",
        ...CONTENDERS.map((c) => c.name.replace(" (modelled)", "*")),
        "sim defaults",
        "sim rampup",
      ],
      sites.map((s, i) => [
        s.name,
        describeSite(s),
        fmtFixed(idealMs(s, pages) / 1000, 1),
        ...loopback[i]!.map((r) => fmtFixed(efficiency(r)) + (r.capped ? " (cut)" : "")),
        ...virtual[i]!.map((r) => fmtFixed(efficiency(r)) + (r.capped ? " (cut)" : "")),
      ]),
      ["l", "l", "r", "r", "r", "r", "r", "r", "r"],
    ),
    "",
    "\\* modelled with politely's managers, not Scrapy itself.",
    "",
  );

  CONTENDERS.forEach((c, k) => {
    const runs = loopback.map((rs) => rs[k]!);
    const sim = k < 2 ? virtual.map((rs) => rs[k]!) : undefined;
    out.push(`#### ${c.name}${c.name.includes("modelled") ? " — a model, not Scrapy" : ""}`, "");
    out.push(
      markdownTable(
        [
          "site",
          "hidden limit",
          "ideal s",
          "measured s",
          "efficiency",
          "requests",
          "refused",
          "refused %",
          "in hold",
          ...(sim ? ["sim eff", "sim refused %"] : []),
        ],
        sites.map((s, i) => {
          const r = runs[i]!;
          return [
            s.name,
            describeSite(s),
            fmtFixed(idealMs(s, pages) / 1000, 1),
            measuredCell(r, capS),
            fmtFixed(efficiency(r)),
            String(r.requests),
            String(r.refused),
            pct(r.refused, r.requests),
            r.inHold === undefined ? "n/a" : String(r.inHold),
            ...(sim
              ? [
                fmtFixed(efficiency(sim[i]!)) + (sim[i]!.capped ? " (cut)" : ""),
                pct(sim[i]!.refused, sim[i]!.requests),
              ]
              : []),
          ];
        }),
        ["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
      ),
      "",
      summary(c.name, runs),
      ...(sim ? ["", summary(`${c.name}, virtual time`, sim)] : []),
      "",
    );
  });

  if (svgArg !== "none") {
    const bucket = sites.findIndex((s) => s.name.startsWith("bucket"));
    const conc = sites.findIndex((s) => s.limiter.shape === "concurrency");
    const panels = [bucket, conc].filter((i) => i >= 0).map((i) => ({
      title: `${sites[i]!.name}: ${describeLimiter(sites[i]!.limiter)}, ${sites[i]!.latencyMs} ms`,
      admittedAt: loopback[i]![0]!.log.filter((a) => a.status === 200).map((a) => a.atMs),
      endAt: loopback[i]![0]!.log.at(-1)?.atMs ?? 0,
      limit: limitPerSec(sites[i]!) ?? 0,
    }));
    const file = resolve(ROOT, svgArg);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(
      file,
      ratePlotSvg(panels, "admitted requests per 1 s, politely defaults, real loopback"),
    );
    out.push(`Plot written to \`${svgArg}\` (\`--svg none\` skips it).`, "");
  }
  return out.join("\n");
}

if (isMain(import.meta)) {
  console.log(await main(process.argv.slice(2)));
  // Keep-alive sockets of fetch's pool may outlive the servers by a moment; the figures are out.
  process.exit(0);
}
