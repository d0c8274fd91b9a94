/**
 * An outside check of "as fast as a site allows, and no faster": 28 loopback
 * sites (`bench/outside/sites.ts`), each a real `node:http` server limiting
 * the way a real server or common middleware does (token bucket, GCRA,
 * fixed / sliding windows, concurrency caps, nginx `limit_req`, load that
 * slows down, announced budgets, two limits at once), none of them told to
 * the crawler. Each is crawled by the command line as a user would run it,
 * `politely crawl urls.txt` with the defaults (and `--rampup`), one site at a
 * time. Written apart from politely's simulator (lib/sim/) on purpose.
 *
 * Measured at the server: wall = first arrival to the last answer's finish;
 * efficiency = ideal / wall, where the ideal is a client that knows the rules
 * replayed in virtual time (`bench/outside/ideal.ts`, at most 8 in flight:
 * politely's default per-site concurrency); refused = refusals / arrivals;
 * failed = pages without a 2xx in `--output`; viol = for spacing limits,
 * arrivals sooner than the interval after the previous admitted one; load =
 * the machine's 1-minute load average at the crawl's end (the machine is
 * shared: on 2 cores a load above 2 delays sends and arrivals by tens of ms).
 *
 * `npx tsx bench/outside.bench.ts [--mode default|rampup|both] [--only NAME[,NAME]] [--keep DIR]`
 * (also `npm run bench -- outside --mode both`). Output files (`--plain` log,
 * `--output`, `--events`) of each crawl are kept in DIR (a temp dir unless
 * given).
 *
 * `--drawn A-B [--slow] [--only d5-3,...]` (without `--virtual`): instead of the 28
 * sites, the twelve drawn sites of each seed (`bench/outside/drawn.ts`), over
 * real loopback, each row beside the same site's virtual crawl (column
 * `virtual`): the gap between virtual time and a real clock on sites no
 * tuning saw.
 *
 * `--virtual [--seeds 1,2,3]`: the same sites crawled by the same pipeline in
 * virtual time (`bench/outside/virtual.ts`), once per seed, in seconds: a
 * table of efficiency / refused share per seed and a summary line per mode.
 *
 * `--virtual --drawn 1-40 [--list | --list-all]`: instead, twelve sites per seed drawn
 * with random parameters from the same limiters (`bench/outside/drawn.ts`),
 * in virtual time: a summary per limiter kind and mode (`--list`: each crawl
 * under the target or over 5% refused; `--list-all`: every crawl). With `--slow`, slow sites
 * (0.2-2/s, 20-80 pages; `drawnSites(seed, true)`). With `--round`, instead, the 46
 * round-number sites of each seed (`bench/outside/round.ts`: "10 per second", "100 per
 * minute", "3 at once").
 *
 * @module
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { argValue, fmtFixed, machine, markdownTable, median, ROOT } from "./_harness.ts";
import { idealMs } from "./outside/ideal.ts";
import { type SiteSpec, startSite } from "./outside/site.ts";
import { DRAWN_KINDS, type DrawnSite, drawnSites } from "./outside/drawn.ts";
import { roundSites } from "./outside/round.ts";
import { SITES } from "./outside/sites.ts";
import { crawlVirtual } from "./outside/virtual.ts";

type Mode = "default" | "rampup";

/** One crawl's figures. */
interface Result {
  readonly site: string;
  readonly shape: string;
  readonly mode: Mode;
  readonly pages: number;
  readonly idealS: number;
  readonly wallS: number;
  readonly efficiency: number;
  readonly arrivals: number;
  readonly refused: number;
  readonly failed: number;
  readonly violations: number | undefined;
  readonly maxActive: number;
  readonly exit: string;
  readonly events: Record<string, number>;
  readonly holdS: number;
  /** The machine's 1-minute load average when the crawl ended (2 cores: above 2 is a busy machine). */
  readonly load: number;
  /** With `--drawn`: the same site and seed crawled in virtual time, for the gap between the two. */
  readonly virtual?: number;
}

function crawl(
  urlsFile: string,
  dir: string,
  rampup: boolean,
  timeoutMs: number,
): Promise<string> {
  const args = [
    "--import",
    "tsx",
    join(ROOT, "lib/cli/main.ts"),
    "crawl",
    urlsFile,
    "--plain",
    "--overwrite",
    "--output",
    join(dir, "out.jsonl"),
    "--events",
    join(dir, "events.jsonl"),
    ...(rampup ? ["--rampup"] : []),
  ];
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (log += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => (log += c));
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    child.on("error", fail);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      writeFileSync(join(dir, "log.txt"), log);
      done(signal ?? String(code));
    });
  });
}

function readJsonLines(file: string): Record<string, unknown>[] {
  try {
    return readFileSync(file, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) =>
      JSON.parse(l) as Record<string, unknown>
    );
  } catch {
    return [];
  }
}

async function runSite(spec: SiteSpec, mode: Mode, seed: number, root: string): Promise<Result> {
  const dir = join(root, `${spec.name.replace(/[^a-z0-9.-]/gi, "_")}.${mode}`);
  mkdirSync(dir, { recursive: true });
  const site = await startSite(spec, seed);
  const urlsFile = join(dir, "urls.txt");
  writeFileSync(
    urlsFile,
    Array.from({ length: spec.pages }, (_, i) => `${site.origin}/p/${i}\n`).join(""),
  );
  const guess = idealMs(spec, Date.now());
  const timeoutMs = Math.min(300_000, 8 * guess + 30_000);
  let exit: string;
  try {
    exit = await crawl(urlsFile, dir, mode === "rampup", timeoutMs);
  } finally {
    await site.close();
  }
  const rec = site.record;
  const first = rec.arrivals[0]?.t ?? Number.NaN;
  // What the server saw, for reading refusals against arrival gaps afterwards.
  writeFileSync(
    join(dir, "arrivals.json"),
    JSON.stringify(rec.arrivals.map((a) => [Math.round((a.t - first) * 10) / 10, a.ok ? 1 : 0])),
  );
  const wall = rec.lastFinish - first;
  const ideal = idealMs(spec, first);
  const out = readJsonLines(join(dir, "out.jsonl"));
  const ok = new Set(
    out.filter((o) => typeof o.status === "number" && o.status >= 200 && o.status < 300)
      .map((o) => o.url),
  );
  let violations: number | undefined;
  if (spec.spacingMs !== undefined) {
    violations = 0;
    let lastOk = -Infinity;
    for (const a of rec.arrivals) {
      if (a.t - lastOk < spec.spacingMs) violations++;
      if (a.ok) lastOk = a.t;
    }
  }
  const events: Record<string, number> = {};
  let holdS = 0;
  for (const e of readJsonLines(join(dir, "events.jsonl"))) {
    const type = String(e.type);
    events[type] = (events[type] ?? 0) + 1;
    if (type === "hold" && typeof e.until === "number" && typeof e.at === "number") {
      holdS += Math.max(0, e.until - e.at) / 1000;
    }
  }
  const refused = Object.values(rec.refused).reduce((a, b) => a + b, 0);
  const result: Result = {
    site: spec.name,
    shape: spec.shape,
    mode,
    pages: spec.pages,
    idealS: ideal / 1000,
    wallS: wall / 1000,
    efficiency: ideal / wall,
    arrivals: rec.arrivals.length,
    refused,
    failed: spec.pages - ok.size,
    violations,
    maxActive: rec.maxActive,
    exit,
    events,
    holdS,
    load: loadavg()[0] ?? Number.NaN,
  };
  writeFileSync(join(dir, "result.json"), JSON.stringify(result, null, 2));
  return result;
}

function table(results: readonly Result[], mode: Mode): string {
  const rows = results.filter((r) => r.mode === mode);
  const withVirtual = rows.some((r) => r.virtual !== undefined);
  const body = rows.map((r) => [
    r.site,
    r.shape,
    fmtFixed(r.idealS, 1),
    fmtFixed(r.wallS, 1),
    fmtFixed(r.efficiency),
    `${fmtFixed((100 * r.refused) / Math.max(1, r.arrivals), 1)}% (${r.refused})`,
    String(r.failed),
    r.violations === undefined ? "-" : String(r.violations),
    String(r.maxActive),
    `${r.events.backoff ?? 0}/${r.events.hold ?? 0}/${r.events.rampup ?? 0}`,
    fmtFixed(r.load, 1),
    ...(withVirtual ? [r.virtual === undefined ? "-" : fmtFixed(r.virtual)] : []),
    r.exit === "0" ? "" : `exit ${r.exit}`,
  ]);
  const eff = rows.map((r) => r.efficiency);
  const worst = rows.reduce<Result | undefined>(
    (w, r) => (w === undefined || r.efficiency < w.efficiency ? r : w),
    undefined,
  );
  return [
    `### politely crawl, ${mode === "rampup" ? "--rampup" : "defaults"}`,
    "",
    markdownTable(
      [
        "site",
        "hidden limit",
        "ideal s",
        "wall s",
        "efficiency",
        "refused",
        "failed",
        "viol",
        "max in service",
        "backoff/hold/rampup events",
        "load",
        ...(withVirtual ? ["virtual"] : []),
        "",
      ],
      body,
      [
        ...(["l", "l", "r", "r", "r", "r", "r", "r", "r", "r", "r"] as const),
        ...(withVirtual ? (["r"] as const) : []),
        "l",
      ],
    ),
    "",
    `Median efficiency ${fmtFixed(median(eff))}, lowest ${
      fmtFixed(Math.min(...eff))
    } (${worst?.site}); ${rows.reduce((a, r) => a + r.failed, 0)} pages failed; mean refused ${
      fmtFixed(
        (100 * rows.reduce((a, r) => a + r.refused / Math.max(1, r.arrivals), 0)) /
          Math.max(1, rows.length),
        1,
      )
    }%.`,
    "",
  ].join("\n");
}

/** `--virtual`: every site once per seed and mode in virtual time; Markdown. */
function virtualTables(
  sites: readonly SiteSpec[],
  modes: readonly Mode[],
  seeds: number[],
): string {
  const out: string[] = [];
  for (const mode of modes) {
    const target = mode === "rampup" ? 0.9 : 0.8;
    const effs: number[] = [];
    const shares: number[] = [];
    let missed = 0;
    const body = sites.map((spec) => {
      const cells = seeds.map((seed) => {
        const r = crawlVirtual(spec, { seed, rampup: mode === "rampup" });
        const share = r.refused / Math.max(1, r.requests);
        effs.push(r.efficiency);
        shares.push(share);
        if (r.efficiency < target || share > 0.05) missed++;
        return `${fmtFixed(r.efficiency)} / ${fmtFixed(100 * share, 1)}%${
          r.ok < spec.pages ? ` (${spec.pages - r.ok} failed)` : ""
        }`;
      });
      return [spec.name, spec.shape, ...cells];
    });
    out.push(
      `### politely, ${
        mode === "rampup" ? "rampup" : "defaults"
      }, virtual time (efficiency / refused)`,
      "",
      markdownTable(
        ["site", "hidden limit", ...seeds.map((s) => `seed ${s}`)],
        body,
        ["l", "l", ...seeds.map(() => "r" as const)],
      ),
      "",
      `Median efficiency ${fmtFixed(median(effs))}, mean ${
        fmtFixed(effs.reduce((a, b) => a + b, 0) / effs.length)
      }, lowest ${fmtFixed(Math.min(...effs))}; mean refused ${
        fmtFixed((100 * shares.reduce((a, b) => a + b, 0)) / shares.length, 1)
      }%; ${missed} of ${effs.length} crawls under ${target} or over 5% refused.`,
      "",
    );
  }
  return out.join("\n");
}

/** `--virtual --drawn A-B`: drawn sites per limiter kind; Markdown. */
function drawnTables(
  modes: readonly Mode[],
  from: number,
  to: number,
  list: boolean,
  listAll = false,
  set: "drawn" | "slow" | "round" = "drawn",
): string {
  const sites: DrawnSite[] = [];
  for (let seed = from; seed <= to; seed++) {
    sites.push(...(set === "round" ? roundSites(seed) : drawnSites(seed, set === "slow")));
  }
  const out: string[] = [];
  for (const mode of modes) {
    const target = mode === "rampup" ? 0.9 : 0.8;
    const byKind = new Map<string, { effs: number[]; short: number; refused: number }>();
    const all: number[] = [];
    const shares: number[] = [];
    const misses: string[][] = [];
    for (const spec of sites) {
      const seed = Number(spec.name.slice(1, spec.name.indexOf("-")));
      const r = crawlVirtual(spec, { seed, rampup: mode === "rampup" });
      const share = r.refused / Math.max(1, r.requests);
      const k = byKind.get(spec.kind) ?? { effs: [], short: 0, refused: 0 };
      byKind.set(spec.kind, k);
      k.effs.push(r.efficiency);
      k.short += Math.max(0, target - r.efficiency);
      if (share > 0.05) k.refused++;
      all.push(r.efficiency);
      shares.push(share);
      if (listAll || r.efficiency < target || share > 0.05) {
        misses.push([
          spec.name,
          spec.shape,
          String(spec.pages),
          fmtFixed(r.idealMs / 1000, 1),
          fmtFixed(r.efficiency),
          `${fmtFixed(100 * share, 1)}%`,
        ]);
      }
    }
    const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const rows = DRAWN_KINDS.flatMap((kind) => {
      const k = byKind.get(kind);
      return k === undefined ? [] : [[
        kind,
        String(k.effs.length),
        fmtFixed(mean(k.effs)),
        fmtFixed(median(k.effs)),
        fmtFixed(k.short),
        String(k.refused),
      ]];
    });
    out.push(
      `### politely, ${mode === "rampup" ? "rampup" : "defaults"}, ${
        set === "round" ? "round-number" : set === "slow" ? "drawn slow" : "drawn"
      } sites (seeds ${from}-${to}), virtual time`,
      "",
      markdownTable(
        [
          "limiter",
          "crawls",
          "mean efficiency",
          "median",
          `shortfall under ${target}`,
          "over 5% refused",
        ],
        rows,
        ["l", "r", "r", "r", "r", "r"],
      ),
      "",
      `Mean efficiency ${fmtFixed(mean(all))}, median ${fmtFixed(median(all))}; mean refused ${
        fmtFixed(100 * mean(shares), 2)
      }%; ${misses.length} of ${all.length} crawls under ${target} or over 5% refused; shortfall ${
        fmtFixed(all.reduce((a, e) => a + Math.max(0, target - e), 0))
      }.`,
      "",
    );
    if (list) {
      out.push(
        markdownTable(
          ["site", "hidden limit", "pages", "ideal s", "efficiency", "refused"],
          misses,
          [
            "l",
            "l",
            "r",
            "r",
            "r",
            "r",
          ],
        ),
        "",
      );
    }
  }
  return out.join("\n");
}

async function main(argv: readonly string[]): Promise<number> {
  const modeArg = argValue(argv, "mode") ?? "default";
  if (!["default", "rampup", "both"].includes(modeArg)) {
    console.error(`--mode must be default, rampup or both: current value is ${modeArg}`);
    return 2;
  }
  const modes: Mode[] = modeArg === "both" ? ["default", "rampup"] : [modeArg as Mode];
  const only = argValue(argv, "only")?.split(",");
  const sites = only === undefined ? SITES : SITES.filter((s) => only.includes(s.name));
  // `--drawn A-B` (or one seed): the drawn sites of those seeds, in virtual
  // time with `--virtual`, else over real loopback.
  const drawnArg = argValue(argv, "drawn");
  const [from, to] = drawnArg?.split("-").map(Number) ?? [];
  if (
    drawnArg !== undefined &&
    !(Number.isInteger(from) && (to === undefined || Number.isInteger(to)))
  ) {
    console.error(`--drawn takes seeds as A-B (or one seed): current value is ${drawnArg}`);
    return 2;
  }
  const drawn = drawnArg === undefined ? undefined : { from: from!, to: to ?? from! };
  if (sites.length === 0 && drawn === undefined) {
    console.error(
      `--only matches no site: expected some of ${SITES.map((s) => s.name).join(", ")}`,
    );
    return 2;
  }
  if (argv.includes("--virtual")) {
    if (drawn !== undefined) {
      console.log(
        drawnTables(
          modes,
          drawn.from,
          drawn.to,
          argv.includes("--list") || argv.includes("--list-all"),
          argv.includes("--list-all"),
          argv.includes("--round") ? "round" : argv.includes("--slow") ? "slow" : "drawn",
        ),
      );
      return 0;
    }
    const seeds = (argValue(argv, "seeds") ?? "1,2,3").split(",").map(Number);
    console.log(virtualTables(sites, modes, seeds));
    return 0;
  }
  // Real loopback against drawn sites (`--drawn A-B` without `--virtual`):
  // sites none of the tuning saw, each beside its own virtual crawl.
  let plan: { spec: SiteSpec; seed: number }[] = sites.map((spec) => ({
    spec,
    seed: SITES.indexOf(spec) + 1,
  }));
  if (drawn !== undefined) {
    plan = [];
    for (let seed = drawn.from; seed <= drawn.to; seed++) {
      for (const spec of drawnSites(seed, argv.includes("--slow"))) {
        if (only === undefined || only.includes(spec.name)) plan.push({ spec, seed });
      }
    }
    if (plan.length === 0) {
      console.error(
        `--only matches no drawn site of seeds ${drawnArg}: expected names like d${drawn.from}-0`,
      );
      return 2;
    }
  }
  const keep = argValue(argv, "keep");
  const root = keep ?? mkdtempSync(join(tmpdir(), "politely-outside-"));
  mkdirSync(root, { recursive: true });
  console.log(
    `## outside: politely crawl against ${plan.length} loopback sites it was not told about\n\n${machine()}. One site at a time; files in ${root}.\n`,
  );
  const results: Result[] = [];
  for (const mode of modes) {
    for (const { spec, seed } of plan) {
      process.stderr.write(`outside ${mode} ${spec.name}... `);
      const real = await runSite(spec, mode, seed, root);
      const r = drawn === undefined ? real : {
        ...real,
        virtual: crawlVirtual(spec, { seed, rampup: mode === "rampup" }).efficiency,
      };
      results.push(r);
      process.stderr.write(
        `efficiency ${fmtFixed(r.efficiency)} (ideal ${fmtFixed(r.idealS, 1)} s, wall ${
          fmtFixed(r.wallS, 1)
        } s), refused ${r.refused}/${r.arrivals}, failed ${r.failed}${
          r.violations === undefined ? "" : `, viol ${r.violations}`
        }, load ${fmtFixed(r.load, 1)}, exit ${r.exit}\n`,
      );
    }
    console.log(table(results, mode));
  }
  writeFileSync(join(root, "results.json"), JSON.stringify(results, null, 2));
  return results.some((r) => r.failed > 0) ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
