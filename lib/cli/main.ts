/**
 * The `politely` command: `crawl`, `demo`, `help`. This file is the entry
 * point (`node --import tsx lib/cli/main.ts`, `deno run -A lib/cli/main.ts`,
 * `bun lib/cli/main.ts`, or the npm `bin`); it parses the arguments,
 * dispatches, and exits with the code the command chose.
 *
 * Exit codes: 0 every request ended (failures included); 2 bad arguments,
 * settings, input or output (one line on stderr); 130 stopped by Ctrl-C.
 *
 * @module
 */
import { firstLine } from "./_first_line.ts";
import process from "node:process";
import { asyncScheduler } from "rxjs";
import { startDemoSites } from "../demo/sites.ts";
import { type CrawlArgs, type DemoArgs, parseCliArgs, USAGE, UsageError } from "./args.ts";
import { resolveCliSettings, SettingsError } from "./cli_settings.ts";
import { runCrawl, type ViewMode } from "./crawl.ts";
import {
  DEMO_PAGES,
  demoFollow,
  demoLabel,
  demoRampup,
  demoRows,
  demoSettings,
  demoStart,
  formatDemoTable,
} from "./demo.ts";
import { type InputLine, openInput, parseInputLine } from "./input.ts";
import { JsonLinesFile } from "./json_lines_file.ts";
import { openRedisOption, type RedisOption, RedisOptionError } from "./redis_option.ts";
import { formatSummary } from "./summary.ts";

/** Exit code: every request ended. */
export const EXIT_OK = 0;
/** Exit code: bad arguments, settings, input or output. */
export const EXIT_USAGE = 2;
/** Exit code: stopped by SIGINT (128 + 2, as shells report it). */
export const EXIT_INTERRUPTED = 130;

const VERSION = "0.1.0";

function say(text: string): void {
  process.stdout.write(`${text}\n`);
}

function fail(message: string): number {
  process.stderr.write(`politely: ${message}\n`);
  return EXIT_USAGE;
}

async function* numbered(lines: AsyncIterable<string>): AsyncIterable<InputLine> {
  let n = 0;
  for await (const line of lines) yield parseInputLine(line, ++n);
}

function viewMode(plain: boolean, quiet: boolean): ViewMode {
  if (quiet) return "quiet";
  return plain || process.stdout.isTTY !== true ? "plain" : "live";
}

/**
 * Ctrl-C: the first stops the crawl cleanly (in-flight downloads aborted,
 * files flushed, the job directory left resumable); a second one exits at once.
 */
function interruptSignal(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onSigint = () => {
    if (controller.signal.aborted) process.exit(EXIT_INTERRUPTED);
    process.stderr.write("\npolitely: stopping (Ctrl-C again to quit at once)\n");
    controller.abort();
  };
  process.on("SIGINT", onSigint);
  return { signal: controller.signal, dispose: () => process.off("SIGINT", onSigint) };
}

function openFiles(
  output: string | undefined,
  events: string | undefined,
): [JsonLinesFile | undefined, JsonLinesFile | undefined] {
  const out = output === undefined ? undefined : new JsonLinesFile(output, "output");
  try {
    return [out, events === undefined ? undefined : new JsonLinesFile(events, "events")];
  } catch (error) {
    out?.close();
    throw error;
  }
}

async function crawlCommand(args: CrawlArgs): Promise<number> {
  let settings;
  try {
    settings = resolveCliSettings(args.settingsFile, args.set);
  } catch (error) {
    if (error instanceof SettingsError) return fail(error.message);
    throw error;
  }
  for (const w of settings.warnings) process.stderr.write(`politely: warning: ${w.message}\n`);
  // Before the input is opened: its lines start flowing once it is.
  let redis: RedisOption | undefined;
  if (args.redis !== undefined) {
    try {
      redis = await openRedisOption(args.redis, {
        onError: (message) => process.stderr.write(`politely: warning: Redis: ${message}\n`),
      });
    } catch (error) {
      if (error instanceof RedisOptionError) return fail(error.message);
      throw error;
    }
  }
  let lines: AsyncIterable<string>;
  let files: [JsonLinesFile | undefined, JsonLinesFile | undefined];
  try {
    lines = await openInput(args.input);
    files = openFiles(args.output, args.events);
  } catch (error) {
    await redis?.close();
    return fail(error instanceof Error ? error.message : String(error));
  }
  const interrupt = interruptSignal();
  try {
    const result = await runCrawl({
      shared: redis?.scopes,
      settings: settings.settings,
      input: numbered(lines),
      jobDir: args.jobDir,
      output: files[0],
      events: files[1],
      view: viewMode(args.plain, args.quiet),
      stdout: process.stdout,
      stderr: process.stderr,
      stop: interrupt.signal,
      ...(args.jobDir !== undefined
        ? { note: `Ctrl-C stops; ${args.jobDir} keeps what is left` }
        : {}),
    });
    const stopped = result.stoppedBy === "signal";
    say(formatSummary(result.stats, result.endedAt, {
      interrupted: stopped,
      pending: result.pending,
      filtered: result.filtered,
      ...(stopped ? { aborted: result.aborted } : {}),
      ...(args.jobDir !== undefined ? { jobDir: args.jobDir } : {}),
    }));
    if (result.stoppedBy === "signal") {
      process.stderr.write(
        args.jobDir !== undefined
          ? `politely: stopped; run the same command again to resume from ${args.jobDir}\n`
          : "politely: stopped\n",
      );
      return EXIT_INTERRUPTED;
    }
    return EXIT_OK;
  } catch (error) {
    files[0]?.close();
    files[1]?.close();
    return fail(firstLine(error));
  } finally {
    // Still listening for Ctrl-C: a second one quits at once if closing stalls.
    await redis?.close();
    interrupt.dispose();
  }
}

async function demoCommand(args: DemoArgs): Promise<number> {
  let files: [JsonLinesFile | undefined, JsonLinesFile | undefined];
  try {
    files = openFiles(args.output, args.events);
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
  const demo = await startDemoSites({ pages: DEMO_PAGES });
  const interrupt = interruptSignal();
  try {
    say(
      `politely demo: crawling ${demo.sites.length} simulated sites on loopback for ${args.durationSec}s`,
    );
    for (const site of demo.sites) {
      say(`  ${site.name.padEnd(7)} ${site.url}  (hidden limit: ${site.hiddenLimit})`);
    }
    const durationMs = args.durationSec * 1000;
    const label = demoLabel(demo.sites);
    const result = await runCrawl({
      settings: demoSettings(),
      rampup: demoRampup(demo.sites),
      input: demoStart(demo.sites),
      follow: demoFollow,
      output: files[0],
      events: files[1],
      view: viewMode(args.plain, false),
      stdout: process.stdout,
      stderr: process.stderr,
      stop: interrupt.signal,
      durationMs,
      title: "politely demo",
      label,
      note: "rampup probes each site upwards; 429/503 make it back off. Ctrl-C stops.",
    });
    say(
      formatSummary(result.stats, result.endedAt, {
        interrupted: result.stoppedBy === "signal",
        label,
        ...(result.stoppedBy === "signal"
          ? { aborted: result.aborted, pending: result.pending }
          : {}),
      }),
    );
    const windowMs = Math.min(
      10_000,
      Math.max(1000, (result.endedAt - result.stats.startedAt) / 2),
    );
    say("");
    say(
      formatDemoTable(
        demoRows(demo.sites, result.throttler, asyncScheduler.now(), windowMs),
        windowMs,
      ),
    );
    return result.stoppedBy === "signal" ? EXIT_INTERRUPTED : EXIT_OK;
  } finally {
    interrupt.dispose();
    await demo.close();
  }
}

/**
 * Run the command line.
 *
 * @param argv The arguments after the program name.
 * @returns The exit code.
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  let args;
  try {
    args = parseCliArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) return fail(`${error.message} (see 'politely help')`);
    throw error;
  }
  switch (args.command) {
    case "help":
      say(USAGE);
      return EXIT_OK;
    case "version":
      say(VERSION);
      return EXIT_OK;
    case "crawl":
      return await crawlCommand(args);
    case "demo":
      return await demoCommand(args);
  }
}

const code = await runCli(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(
    `politely: ${firstLine(error)}\n`,
  );
  return 1;
});
// Let stdout drain before exiting: sockets kept alive by fetch would otherwise hold the process.
process.stdout.write("", () => process.exit(code));
