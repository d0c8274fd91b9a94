/**
 * The `politely` command: `crawl`, `demo`, `help [COMMAND]`. This file is the entry
 * point (`node --import tsx lib/cli/main.ts`, `deno run -A lib/cli/main.ts`,
 * `bun lib/cli/main.ts`, or the npm `bin`); it parses the arguments,
 * dispatches, and exits with the code the command chose.
 *
 * Exit codes: 0 every request ended (failures included); 2 bad arguments,
 * settings, input or output (one line on stderr); 3 some requests were never
 * sent (robots.txt or the shared store unreachable); 128 + the signal's number
 * after a clean stop on a signal (130 SIGINT, 143 SIGTERM, 129 SIGHUP); 141
 * when the reader of stdout went away (what a process killed by SIGPIPE
 * reports). See docs/CLI.md.
 *
 * Size: one function per command and the exit codes, signals and files they
 * share; each command's work lives in its own module (`crawl.ts`, `demo.ts`,
 * `queue_status.ts`, `simulate_command.ts`).
 *
 * @module
 */
import { firstLine } from "./_first_line.ts";
import process from "node:process";
import { rmSync, statSync } from "node:fs";
import { openWarcWriter, type WarcWriter } from "../http/warc_writer.ts";
import { join } from "node:path";
import { JOB_DIR_LOG } from "../queue/_job_dir_log.ts";
import type { RequestObject } from "../request.ts";
import { asyncScheduler } from "rxjs";
import { startDemoSites } from "../demo/sites.ts";
import {
  COMMAND_USAGE,
  type CrawlArgs,
  type DemoArgs,
  parseCliArgs,
  type StatusArgs,
  USAGE,
  UsageError,
} from "./args.ts";
import { loadCliSettings } from "./cli_settings.ts";
import { isWriteError, runCrawl, type ViewMode } from "./crawl.ts";
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
import { JsonLinesFile, recentOutputUrls } from "./json_lines_file.ts";
import { LinkFollower } from "./follow.ts";
import { SharedStartDomains } from "./shared_domains.ts";
import { readRedisQueueStatus } from "../redis/redis_queue_status.ts";
import { RedisRequestQueueError } from "../redis/redis_request_queue.ts";
import { formatQueueStatus } from "./queue_status.ts";
import { simulateCommand } from "./simulate_command.ts";
import { JobDirLock, JobDirLockedError } from "../queue/job_dir_lock.ts";
import { openRedisOption, type RedisOption, RedisOptionError } from "./redis_option.ts";
import { formatSummary } from "./summary.ts";
import { webOption } from "./web_option.ts";

/** Exit code: every request ended. */
export const EXIT_OK = 0;
/** Exit code: bad arguments, settings, input or output. */
export const EXIT_USAGE = 2;
/** Exit code: stopped by SIGINT (128 + 2, as shells report it). */
export const EXIT_INTERRUPTED = 130;
/**
 * Exit code: the crawl ended, but some requests were never sent (robots.txt
 * or the shared store unreachable); a job directory keeps them for a resume.
 */
export const EXIT_UNSENT = 3;
/** Exit code: stopped by SIGHUP (128 + 1). */
export const EXIT_HANGUP = 129;
/** Exit code: stopped by SIGTERM (128 + 15): `timeout`, systemd, Docker, Kubernetes. */
export const EXIT_TERMINATED = 143;
/** Exit code: stdout's reader went away (`| head`): 128 + SIGPIPE's 13, as if killed by it. */
export const EXIT_STDOUT_CLOSED = 141;

/** What stopped a crawl from outside. */
type StopCause = "SIGINT" | "SIGTERM" | "SIGHUP" | "stdout-closed";

const STOP_EXIT: Readonly<Record<StopCause, number>> = {
  SIGINT: EXIT_INTERRUPTED,
  SIGTERM: EXIT_TERMINATED,
  SIGHUP: EXIT_HANGUP,
  "stdout-closed": EXIT_STDOUT_CLOSED,
};

/** How the summary and the messages name a stop. */
const STOP_NAME: Readonly<Record<StopCause, string>> = {
  SIGINT: "Ctrl-C",
  SIGTERM: "SIGTERM",
  SIGHUP: "SIGHUP",
  "stdout-closed": "closed stdout",
};

/** Set once stdout fails (EPIPE): nothing more is written to it, and the exit does not wait on it. */
let stdoutBroken = false;
/** The running crawl's reaction to a stdout failure, if one runs. */
let onStdoutError: ((error: unknown) => void) | undefined;

// Installed at once: without a listener, a write to a closed pipe
// (`politely crawl ... | head -2`) is an unhandled 'error' with a stack trace.
process.stdout.on("error", (error: unknown) => {
  stdoutBroken = true;
  onStdoutError?.(error);
});

const VERSION = "0.1.0";

function say(text: string): void {
  if (!stdoutBroken) process.stdout.write(`${text}\n`);
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
 * SIGINT (Ctrl-C), SIGTERM and SIGHUP: the first stops the crawl cleanly
 * (in-flight downloads aborted, files flushed and closed, the job directory
 * compacted and left resumable, Redis leases given back); a second signal
 * exits at once. A failing stdout (its reader went away) stops it the same
 * way, quietly.
 */
function stopSignals(): {
  signal: AbortSignal;
  cause: () => StopCause | undefined;
  dispose: () => void;
} {
  const controller = new AbortController();
  let cause: StopCause | undefined;
  const stop = (why: StopCause) => {
    if (cause === undefined) cause = why;
    controller.abort();
  };
  const handlers = (["SIGINT", "SIGTERM", "SIGHUP"] as const).map((name) => {
    const handler = () => {
      if (controller.signal.aborted) process.exit(STOP_EXIT[name]);
      process.stderr.write(
        name === "SIGINT"
          ? "\npolitely: stopping (Ctrl-C again to quit at once)\n"
          : `politely: stopping on ${name} (send it again to quit at once)\n`,
      );
      stop(name);
    };
    process.on(name, handler);
    return [name, handler] as const;
  });
  onStdoutError = (error) => {
    const code = (error as { code?: unknown } | null)?.code;
    if (code !== "EPIPE") {
      process.stderr.write(`politely: cannot write to stdout: ${firstLine(error)}\n`);
    }
    stop("stdout-closed");
  };
  if (stdoutBroken) stop("stdout-closed");
  return {
    signal: controller.signal,
    cause: () => cause,
    dispose: () => {
      for (const [name, handler] of handlers) process.off(name, handler);
      onStdoutError = undefined;
    },
  };
}

function openFiles(
  output: string | undefined,
  events: string | undefined,
  mode: "truncate" | "append" = "truncate",
): [JsonLinesFile | undefined, JsonLinesFile | undefined] {
  const out = output === undefined ? undefined : new JsonLinesFile(output, "output", mode);
  try {
    return [out, events === undefined ? undefined : new JsonLinesFile(events, "events", mode)];
  } catch (error) {
    out?.close();
    throw error;
  }
}

/** Whether a file exists with something in it. */
function hasContent(path: string): boolean {
  try {
    return statSync(path).size > 0;
  } catch {
    return false;
  }
}

/**
 * How `--output` and `--events` open: appended to when the job directory has
 * a crawl to resume (its lines are that crawl's); otherwise a file that
 * already holds something is replaced only with `--overwrite` (a new crawl
 * never silently destroys an earlier one's records).
 *
 * @throws {Error} Naming the file and the two ways out.
 */
function outputMode(args: CrawlArgs, jobDir: string | undefined): "truncate" | "append" {
  if (jobDir !== undefined && hasContent(join(jobDir, JOB_DIR_LOG))) return "append";
  if (args.overwrite) return "truncate";
  for (
    const [flag, path] of [
      ["--output", args.output],
      ["--events", args.events],
      ["--warc", args.warc],
    ] as const
  ) {
    if (path !== undefined && hasContent(path)) {
      throw new Error(
        `${flag} '${path}' already exists: pass --overwrite to replace it` +
          (jobDir === undefined ? ", or --jobdir DIR to keep a crawl that can resume" : ""),
      );
    }
  }
  return "truncate";
}

async function crawlCommand(args: CrawlArgs): Promise<number> {
  const settings = loadCliSettings(args, process.stderr);
  if (settings === undefined) return EXIT_USAGE;
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
  // The job directory's lock first: a second crawl on a directory in use
  // must not touch the first one's --output, --events or --warc.
  const jobDirPath = args.jobDir ?? settings.settings.queue?.jobDir;
  let lock: JobDirLock | undefined;
  // Decided before any file is opened (the WARC writer creates its file).
  let mode: "truncate" | "append";
  try {
    lock = openJobDirLock(jobDirPath);
    mode = outputMode(args, jobDirPath);
  } catch (error) {
    lock?.release();
    await redis?.close();
    return fail(firstLine(error));
  }
  let warc: WarcWriter | undefined;
  if (args.warc !== undefined) {
    try {
      // Before the input is opened (its lines start flowing once it is).
      // Appends (a torn last record cut first); replaced only with --overwrite.
      if (args.overwrite && mode === "truncate") rmSync(args.warc, { force: true });
      warc = await openWarcWriter(args.warc);
    } catch (error) {
      lock?.release();
      await redis?.close();
      return fail(firstLine(error));
    }
  }
  let lines: AsyncIterable<string>;
  let files: [JsonLinesFile | undefined, JsonLinesFile | undefined];
  let alreadyWritten: Map<string, number> | undefined;
  try {
    if (mode === "append" && args.output !== undefined) {
      alreadyWritten = recentOutputUrls(args.output);
    }
    // A worker joining a shared job reads no input.
    lines = args.input === undefined ? noLines() : await openInput(args.input);
    files = openFiles(args.output, args.events, mode);
  } catch (error) {
    await warc?.close().catch(() => {});
    lock?.release();
    await redis?.close();
    return fail(error instanceof Error ? error.message : String(error));
  }
  const sharedQueue = args.sharedQueue && redis !== undefined && args.redis !== undefined
    ? {
      client: redis.client,
      prefix: args.redis.prefix,
      join: args.input === undefined,
      leaseMs: args.redis.leaseMs,
      waitMs: args.redis.waitMs,
      // --max-pages counts the whole job's requests, in Redis.
      maxRequests: args.follow?.maxPages,
    }
    : undefined;
  const follower = args.follow === undefined ? undefined : new LinkFollower(
    sharedQueue === undefined ? args.follow : { ...args.follow, maxPages: undefined },
  );
  // In a shared job the start domains are the job's, in Redis.
  const domains = follower !== undefined && sharedQueue !== undefined
    ? new SharedStartDomains(
      sharedQueue.client,
      sharedQueue.prefix,
      follower,
      sharedQueue.waitMs,
    )
    : undefined;
  const web = args.web === undefined ? undefined : webOption(args.web, {
    title: "politely crawl",
    info: {
      input: args.input ?? "(none: a worker of the shared job)",
      ...(args.redis !== undefined ? { redis: args.redis.url } : {}),
    },
    stderr: process.stderr,
  });
  const interrupt = stopSignals();
  try {
    const result = await runCrawl({
      shared: redis?.scopes,
      ...(args.redis !== undefined ? { sharedWaitMs: args.redis.waitMs } : {}),
      ...(sharedQueue !== undefined ? { sharedQueue } : {}),
      settings: settings.settings,
      input: numbered(lines),
      jobDir: lock,
      output: files[0],
      events: files[1],
      ...(alreadyWritten !== undefined ? { alreadyWritten } : {}),
      ...(warc !== undefined ? { warc } : {}),
      ...(args.saveBodies !== undefined ? { saveBodies: args.saveBodies } : {}),
      ...(domains !== undefined
        ? {
          follow: (o: Parameters<LinkFollower["follow"]>[0]) => domains.follow(o),
          onStart: (r: RequestObject) => domains.addStart(r),
        }
        : follower !== undefined
        ? {
          follow: (o: Parameters<LinkFollower["follow"]>[0]) => follower.follow(o),
          onStart: (r: RequestObject) => void follower.addStart(r),
        }
        : {}),
      view: viewMode(args.plain, args.quiet),
      ...(args.rampup ? { rampup: {} } : {}),
      ...(web !== undefined ? { onThrottler: web.onThrottler } : {}),
      stdout: process.stdout,
      stderr: process.stderr,
      stop: interrupt.signal,
      ...(args.jobDir !== undefined
        ? { note: `Ctrl-C stops; ${args.jobDir} keeps what is left` }
        : {}),
    });
    // Said on stderr by the crawl, in one line naming the file.
    if (isWriteError(result.error)) return EXIT_USAGE;
    // Said on stderr by the crawl; the job in Redis keeps every request.
    if (result.error instanceof RedisRequestQueueError) return EXIT_UNSENT;
    try {
      await warc?.close();
    } catch (error) {
      process.stderr.write(`politely: ${firstLine(error)}\n`);
      return EXIT_USAGE;
    }
    const cause = result.stoppedBy === "signal" ? interrupt.cause() ?? "SIGINT" : undefined;
    say(formatSummary(result.stats, result.endedAt, {
      interrupted: cause !== undefined,
      pending: result.pending,
      filtered: result.filtered,
      known: result.known,
      ...(cause !== undefined ? { aborted: result.aborted, stoppedBy: STOP_NAME[cause] } : {}),
      ...(args.jobDir !== undefined ? { jobDir: args.jobDir } : {}),
    }));
    if (cause === undefined) {
      if (result.unsent === 0) return EXIT_OK;
      process.stderr.write(
        `politely: ${result.unsent} request${
          result.unsent === 1 ? " was" : "s were"
        } not sent (robots.txt or the shared store unreachable); ` +
          (args.jobDir !== undefined
            ? `run the same command again to send them from ${args.jobDir}\n`
            : "with --jobdir a second run would send them\n"),
      );
      return EXIT_UNSENT;
    }
    // A reader that went away wants nothing more; like `yes | head`, say nothing.
    if (cause !== "stdout-closed") {
      process.stderr.write(
        args.jobDir !== undefined
          ? `politely: stopped; run the same command again to resume from ${args.jobDir}\n`
          : "politely: stopped\n",
      );
    }
    return STOP_EXIT[cause];
  } catch (error) {
    files[0]?.close();
    files[1]?.close();
    return fail(firstLine(error));
  } finally {
    // Released by the crawl's queue when it closed; this covers a crawl that
    // never got as far as its queue.
    lock?.release();
    // Still listening for Ctrl-C: a second one quits at once if closing stalls.
    await warc?.close().catch(() => {}); // a failure was reported above
    await redis?.close();
    await web?.close();
    interrupt.dispose();
  }
}

/**
 * The job directory's lock, taken before anything is written; a lock left by
 * a process that is gone is taken over with a warning.
 *
 * @throws {Error} One line: the directory is in use (naming the holder's PID) or cannot be created.
 */
function openJobDirLock(dir: string | undefined): JobDirLock | undefined {
  if (dir === undefined) return undefined;
  let lock: JobDirLock;
  try {
    lock = JobDirLock.acquire(dir);
  } catch (error) {
    if (error instanceof JobDirLockedError) throw error;
    throw new Error(`Cannot open job directory '${dir}': ${firstLine(error)}`);
  }
  if (lock.tookOver !== undefined) {
    process.stderr.write(`politely: warning: ${lock.tookOver.message}\n`);
  }
  return lock;
}

/** An input with no lines: a worker that joins a shared job. */
async function* noLines(): AsyncIterable<string> {}

/** `politely status`: a shared job's counts, read from Redis. */
async function statusCommand(args: StatusArgs): Promise<number> {
  let redis: RedisOption;
  try {
    redis = await openRedisOption(args.redis, { subscribe: false });
  } catch (error) {
    if (error instanceof RedisOptionError) return fail(error.message);
    throw error;
  }
  try {
    const status = await readRedisQueueStatus(redis.client, args.redis.prefix);
    say(
      args.json
        ? JSON.stringify(status)
        : formatQueueStatus(status, `${redis.where} ${args.redis.prefix}`),
    );
    return EXIT_OK;
  } catch (error) {
    return fail(`--redis ${redis.where}: cannot read the job: ${firstLine(error)}`);
  } finally {
    await redis.close();
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
  const interrupt = stopSignals();
  let web: ReturnType<typeof webOption> | undefined;
  try {
    say(
      `politely demo: crawling ${demo.sites.length} simulated sites on loopback for ${args.durationSec}s`,
    );
    for (const site of demo.sites) {
      say(`  ${site.name.padEnd(7)} ${site.url}  (hidden limit: ${site.hiddenLimit})`);
    }
    const durationMs = args.durationSec * 1000;
    const label = demoLabel(demo.sites);
    web = args.web === undefined
      ? undefined
      : webOption(args.web, { title: "politely demo", label, stderr: process.stderr });
    const result = await runCrawl({
      settings: demoSettings(),
      rampup: demoRampup(demo.sites),
      input: demoStart(demo.sites),
      follow: demoFollow,
      output: files[0],
      events: files[1],
      view: viewMode(args.plain, false),
      ...(web !== undefined ? { onThrottler: web.onThrottler } : {}),
      stdout: process.stdout,
      stderr: process.stderr,
      stop: interrupt.signal,
      durationMs,
      title: "politely demo",
      label,
      note: "rampup probes each site upwards; 429/503 make it back off. Ctrl-C stops.",
    });
    const cause = result.stoppedBy === "signal" ? interrupt.cause() ?? "SIGINT" : undefined;
    say(
      formatSummary(result.stats, result.endedAt, {
        interrupted: cause !== undefined,
        label,
        ...(cause !== undefined
          ? { aborted: result.aborted, pending: result.pending, stoppedBy: STOP_NAME[cause] }
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
    return cause === undefined ? EXIT_OK : STOP_EXIT[cause];
  } finally {
    await web?.close();
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
    if (error instanceof UsageError) {
      return fail(
        error.seeAlso === undefined ? error.message : `${error.message} (see '${error.seeAlso}')`,
      );
    }
    throw error;
  }
  switch (args.command) {
    case "help":
      say(args.topic === undefined ? USAGE : COMMAND_USAGE[args.topic]);
      return EXIT_OK;
    case "version":
      say(VERSION);
      return EXIT_OK;
    case "crawl":
      return await crawlCommand(args);
    case "demo":
      return await demoCommand(args);
    case "simulate":
      return simulateCommand(args, { stdout: process.stdout, stderr: process.stderr });
    case "status":
      return await statusCommand(args);
  }
}

const code = await runCli(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(
    `politely: ${firstLine(error)}\n`,
  );
  return 1;
});
// Let stdout drain before exiting: sockets kept alive by fetch would otherwise hold the process.
// A broken stdout never drains, and its write callback must not be waited on.
if (stdoutBroken) process.exit(code);
else process.stdout.write("", () => process.exit(code));
