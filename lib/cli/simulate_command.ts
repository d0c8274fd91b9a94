/**
 * `politely simulate`: what a configuration will do, predicted in virtual
 * time against simulated sites (`simulate()` of lib/sim/simulate.ts), with
 * the same `--settings` / `--set` as `crawl`.
 *
 * @module
 */
import { readFileSync, writeFileSync } from "node:fs";
import { ratePlotSvg } from "../sim/rate_plot.ts";
import { parseArgs } from "node:util";
import { simulate, type SimulateResult } from "../sim/simulate.ts";
import {
  checkSite,
  parseSiteSpec,
  type SimulatedSiteSpec,
  SiteSpecError,
} from "../sim/site_spec.ts";
import { UsageError } from "./args.ts";
import { loadCliSettings } from "./cli_settings.ts";

/** `politely simulate [FILE] [options]`. */
export interface SimulateArgs {
  readonly command: "simulate";
  /** URLs (one per line) whose hosts are the sites'; instead of `--urls N`. */
  readonly input: string | undefined;
  /** `--site SPEC`, repeatable. */
  readonly sites: readonly string[];
  /** `--sites FILE`: JSON `{ "sites": [...], "urls"?: N, "zipf"?: s }`. */
  readonly sitesFile: string | undefined;
  /** `--urls N`. */
  readonly urls: number | undefined;
  /** `--zipf S`: spread the URLs over the sites by a Zipf law. */
  readonly zipf: number | undefined;
  readonly settingsFile: string | undefined;
  readonly set: readonly (readonly [name: string, value: string])[];
  /** `--rampup`: every scope probes its limit. */
  readonly rampup: boolean;
  /** `--seed N`. @default 1 */
  readonly seed: number;
  /** `--jitter MS`: requests reach the sites up to MS late. @default 0 */
  readonly jitterMs: number;
  /** `--json`: one JSON object on stdout. */
  readonly json: boolean;
  /** `--svg FILE`: a plot of the busiest sites' admitted rate over time against their limits. */
  readonly svg: string | undefined;
}

function number(flag: string, text: string | undefined, least: number, integer: boolean) {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isFinite(n) || n < least || (integer && !Number.isInteger(n))) {
    throw new UsageError(
      `${flag} expects ${
        integer ? "a whole number" : "a number"
      } >= ${least}: current value is '${text}'`,
    );
  }
  return n;
}

/**
 * Parses `politely simulate`'s arguments.
 *
 * @throws {UsageError} With one line naming the option.
 */
export function parseSimulateArgs(
  argv: readonly string[],
): SimulateArgs | { command: "help"; topic: "simulate" } {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      site: { type: "string", multiple: true },
      sites: { type: "string" },
      urls: { type: "string" },
      zipf: { type: "string" },
      settings: { type: "string" },
      set: { type: "string", short: "s", multiple: true },
      rampup: { type: "boolean" },
      seed: { type: "string" },
      jitter: { type: "string" },
      json: { type: "boolean" },
      svg: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) return { command: "help", topic: "simulate" };
  if (positionals.length > 1) {
    throw new UsageError(
      `simulate takes at most one input file: current value is ${positionals.join(" ")}`,
    );
  }
  const set = (values.set ?? []).map((item): readonly [string, string] => {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set expects NAME=VALUE: current value is '${item}'`);
    return [item.slice(0, eq).trim(), item.slice(eq + 1)];
  });
  const sites = values.site ?? [];
  if (sites.length === 0 && values.sites === undefined) {
    throw new UsageError(
      `simulate needs --site SPEC (e.g. --site "bucket rate=10 burst=3 latency=50ms") or --sites FILE`,
    );
  }
  if (values.svg === "") throw new UsageError(`--svg expects a path: current value is ''`);
  const urls = number("--urls", values.urls, 0, true);
  if (urls !== undefined && positionals[0] !== undefined) {
    throw new UsageError(`simulate takes --urls N or an input file, not both`);
  }
  return {
    command: "simulate",
    input: positionals[0],
    sites,
    sitesFile: values.sites,
    urls,
    zipf: number("--zipf", values.zipf, 0, false),
    settingsFile: values.settings,
    set,
    rampup: values.rampup === true,
    seed: number("--seed", values.seed, 0, true) ?? 1,
    jitterMs: number("--jitter", values.jitter, 0, false) ?? 0,
    json: values.json === true,
    svg: values.svg,
  };
}

interface SitesFile {
  readonly sites: readonly SimulatedSiteSpec[];
  readonly urls?: number;
  readonly zipf?: number;
}

function readSitesFile(path: string): SitesFile {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new SiteSpecError(`Cannot read --sites '${path}': ${(error as Error).message}`);
  }
  const sites = (data as { sites?: unknown } | null)?.sites;
  if (!Array.isArray(sites)) {
    throw new SiteSpecError(
      `--sites '${path}': expects {"sites": [...]} (site objects or spec strings)`,
    );
  }
  const parsed = sites.map((s, i): SimulatedSiteSpec => {
    if (typeof s === "string") return parseSiteSpec(s, i + 1);
    const site = s as SimulatedSiteSpec;
    checkSite(site);
    return { ...site, name: site.name ?? site.host };
  });
  const { urls, zipf } = data as { urls?: unknown; zipf?: unknown };
  if (urls !== undefined && (typeof urls !== "number" || !Number.isInteger(urls) || urls < 0)) {
    throw new SiteSpecError(`--sites '${path}': 'urls' must be a whole number >= 0`);
  }
  if (zipf !== undefined && (typeof zipf !== "number" || !(zipf >= 0))) {
    throw new SiteSpecError(`--sites '${path}': 'zipf' must be a number >= 0`);
  }
  return {
    sites: parsed,
    ...(urls !== undefined ? { urls } : {}),
    ...(zipf !== undefined ? { zipf } : {}),
  };
}

function fmtS(ms: number): string {
  return ms >= 100_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
}

/**
 * The figures as text: one summary block and a table per site.
 *
 * @param r What `simulate` predicted.
 * @returns Lines joined by `\n`.
 */
export function formatSimulation(r: SimulateResult): string {
  const lines = [
    `politely simulate: ${r.urls} URLs over ${r.sites.length} site${
      r.sites.length === 1 ? "" : "s"
    } would take ${fmtS(r.durationMs)}${r.cut ? " (cut: the simulation's time limit)" : ""}`,
    `  requests ${r.requests}, refused ${r.refused} (${
      r.requests > 0 ? ((r.refused / r.requests) * 100).toFixed(1) : "0.0"
    }%), ok ${r.ok}, failed ${r.failed}`,
    `  peak heap ${Math.round(r.peakHeapBytes / 1048576)} MiB`,
  ];
  const rows = [...r.sites].sort((a, b) => b.pages - a.pages).slice(0, 20);
  const head = [
    "site",
    "hidden limit",
    "pages",
    "requests",
    "refused",
    "settled/s",
    "limit/s",
    "time",
    "ideal",
  ];
  const body = rows.map((s) => [
    s.host,
    s.limit,
    String(s.pages),
    String(s.requests),
    String(s.refused),
    s.settledPerSec.toFixed(1),
    s.limitPerSec === null ? "-" : s.limitPerSec.toFixed(1),
    fmtS(s.durationMs),
    fmtS(s.idealMs),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    "  " + cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  lines.push(line(head), ...body.map(line));
  if (r.sites.length > rows.length) {
    lines.push(`  ... and ${r.sites.length - rows.length} more sites`);
  }
  return lines.join("\n");
}

/**
 * Runs `politely simulate`.
 *
 * @param args Parsed arguments.
 * @param io Where the figures, progress and errors go.
 * @returns The exit code (0, or 2 with one line on stderr).
 */
export function simulateCommand(
  args: SimulateArgs,
  io: { stdout: { write(s: string): unknown }; stderr: { write(s: string): unknown } },
): number {
  const fail = (message: string) => {
    io.stderr.write(`politely: ${message}\n`);
    return 2;
  };
  const settings = loadCliSettings(args, io.stderr);
  if (settings === undefined) return 2;
  let sites: SimulatedSiteSpec[];
  let urls: number | string[];
  let zipf = args.zipf;
  try {
    const file = args.sitesFile === undefined ? undefined : readSitesFile(args.sitesFile);
    sites = [
      ...(file?.sites ?? []),
      ...args.sites.map((s, i) => parseSiteSpec(s, (file?.sites.length ?? 0) + i + 1)),
    ];
    zipf ??= file?.zipf;
    if (args.input !== undefined) {
      urls = readFileSync(args.input, "utf8").split("\n").map((l) => l.trim()).filter((l) =>
        l !== "" && !l.startsWith("#")
      );
    } else urls = args.urls ?? file?.urls ?? 1000;
  } catch (error) {
    if (error instanceof SiteSpecError) return fail(error.message);
    if ((error as { code?: unknown }).code === "ENOENT") {
      return fail(`Cannot read input '${args.input}': no such file`);
    }
    throw error;
  }
  const total = typeof urls === "number" ? urls : urls.length;
  let result: SimulateResult;
  try {
    result = simulate({
      settings: settings.settings,
      sites,
      urls,
      ...(zipf !== undefined ? { zipf } : {}),
      rampup: args.rampup,
      seed: args.seed,
      outboundJitterMs: args.jitterMs,
      progressEvery: 100_000,
      keepTimes: args.svg !== undefined,
      ...(total >= 100_000
        ? {
          onProgress: (ended: number, all: number, virtualMs: number) =>
            io.stderr.write(
              `politely: simulated ${ended} of ${all} requests (${fmtS(virtualMs)} of crawl)\n`,
            ),
        }
        : {}),
    });
  } catch (error) {
    if (error instanceof RangeError || error instanceof SiteSpecError) return fail(error.message);
    throw error;
  }
  if (args.svg !== undefined) {
    const busiest = [...result.sites].sort((a, b) => b.pages - a.pages).slice(0, 4);
    try {
      writeFileSync(
        args.svg,
        ratePlotSvg(
          busiest.map((s) => ({
            title: `${s.host}: ${s.limit}`,
            admittedAt: s.admittedAt ?? [],
            endAt: s.lastArrivalAt,
            limit: s.limitPerSec ?? 0,
          })),
          "admitted requests per 1 s, simulated (politely simulate)",
        ),
      );
    } catch (error) {
      return fail(`Cannot write --svg '${args.svg}': ${(error as Error).message}`);
    }
  }
  if (args.json) {
    const { events: _events, ...figures } = result;
    const sites = figures.sites.map(({ admittedAt: _t, ...s }) => s);
    io.stdout.write(`${JSON.stringify({ ...figures, sites })}\n`);
  } else io.stdout.write(`${formatSimulation(result)}\n`);
  return 0;
}
