/**
 * The command line's arguments: which command, which files, which settings.
 * Parsing only; nothing is read or opened here.
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";

/** A mistake on the command line; the message is the one line the user sees. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** `politely crawl [FILE|-] [options]`. */
export interface CrawlArgs {
  readonly command: "crawl";
  /** The input file, or `"-"` for stdin. @default "-" */
  readonly input: string;
  /** `--settings FILE` (JSON, Scrapy's names or ours). */
  readonly settingsFile: string | undefined;
  /** `--set NAME=VALUE`, in order (later ones win). */
  readonly set: readonly (readonly [name: string, value: string])[];
  /** `--jobdir DIR`. */
  readonly jobDir: string | undefined;
  /** `--output FILE`: one JSON line per request. */
  readonly output: string | undefined;
  /** `--events FILE`: one JSON line per throttling event. */
  readonly events: string | undefined;
  /** `--plain`: plain log lines even on a terminal. */
  readonly plain: boolean;
  /** `--quiet`: no live view and no log lines, only the summary. */
  readonly quiet: boolean;
  /** `--redis URL` and `--redis-prefix PREFIX`: share scope limits with other processes. */
  readonly redis: RedisArgs | undefined;
}

/** `--redis URL --redis-prefix PREFIX`: where the limits shared between processes live. */
export interface RedisArgs {
  /** A `redis://` or `rediss://` URL, e.g. `redis://127.0.0.1:6379`. */
  readonly url: string;
  /** Put before every key; processes with the same prefix share limits. @default "politely:" */
  readonly prefix: string;
}

/** The default of `--redis-prefix` (the store's own default). */
export const DEFAULT_REDIS_PREFIX = "politely:";

/** `politely demo [options]`. */
export interface DemoArgs {
  readonly command: "demo";
  /** `--duration SECONDS`. @default 45 */
  readonly durationSec: number;
  readonly output: string | undefined;
  readonly events: string | undefined;
  readonly plain: boolean;
}

/** `politely help`, `--help`, `-h`, or no command. */
export interface HelpArgs {
  readonly command: "help";
}

/** `politely --version`. */
export interface VersionArgs {
  readonly command: "version";
}

/** What the command line asked for. */
export type CliArgs = CrawlArgs | DemoArgs | HelpArgs | VersionArgs;

/** The help text. */
export const USAGE = `politely: crawl politely, as fast as each site allows and no faster.

Usage:
  politely crawl [FILE|-] [options]   crawl the URLs in FILE (or stdin): one URL per line,
                                      or one JSON object per line {url, priority, meta}
  politely demo [--duration SECONDS]  crawl five simulated rate-limited sites on loopback
  politely help                       this text

Options of crawl:
  --settings FILE    settings as JSON (Scrapy's UPPER_CASE names or politely's camelCase)
  --set NAME=VALUE   one setting, repeatable (like Scrapy's -s), e.g. --set DOWNLOAD_DELAY=0.5
  --jobdir DIR       keep pending requests in DIR, so a stopped crawl resumes
  --output FILE      one JSON line per request: url, status or error, attempts, scopes, sentAt, latencyMs
  --events FILE      one JSON line per throttling event
  --plain            plain log lines, even on a terminal
  --quiet            no live view or log lines; only the summary
  --redis URL        share scope limits and backoff with other crawls through Redis,
                     e.g. --redis redis://127.0.0.1:6379 (needs: npm install redis)
  --redis-prefix P   key prefix of the shared limits (default politely:); crawls with the
                     same URL and prefix share

Options of demo:
  --duration SECONDS how long to crawl (default 45)
  --output FILE, --events FILE, --plain as for crawl

Exit status: 0 when every request ended (failed requests are outcomes too), 2 for bad
arguments, settings, input or output, 3 when some requests could not be sent (robots.txt or
Redis unreachable: --jobdir keeps them), 130/143/129 when stopped cleanly by SIGINT (Ctrl-C),
SIGTERM or SIGHUP, 141 when stdout's reader went away.
See docs/CLI.md.`;

const DEFAULT_DEMO_SECONDS = 45;

/**
 * Parse the arguments after the program name.
 *
 * @param argv E.g. `["crawl", "urls.txt", "--set", "DOWNLOAD_DELAY=1"]`.
 * @returns The command and its options.
 * @throws {UsageError} With a one-line message for anything the command line cannot mean.
 * @example
 * ```ts
 * import { parseCliArgs } from "./args.ts";
 * const args = parseCliArgs(["crawl", "urls.txt", "--set", "DOWNLOAD_DELAY=1"]);
 * console.assert(args.command === "crawl" && args.set[0]?.[0] === "DOWNLOAD_DELAY");
 * ```
 */
export function parseCliArgs(argv: readonly string[]): CliArgs {
  const [command, ...rest] = argv;
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    return { command: "help" };
  }
  if (command === "--version" || command === "-V") return { command: "version" };
  if (command === "crawl") return parseCrawl(rest);
  if (command === "demo") return parseDemo(rest);
  throw new UsageError(`Unknown command '${command}': expected 'crawl', 'demo' or 'help'`);
}

function parse<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (error) {
    // node:util's messages are one line; drop its "To specify a positional..." tail.
    const message = error instanceof Error
      ? error.message.split(". To ")[0]!.split("\n")[0]!
      : String(error);
    throw new UsageError(message);
  }
}

const COMMON = {
  output: { type: "string" },
  events: { type: "string" },
  plain: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function parseCrawl(argv: readonly string[]): CrawlArgs | HelpArgs {
  const { values, positionals } = parse({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      ...COMMON,
      settings: { type: "string" },
      set: { type: "string", short: "s", multiple: true },
      jobdir: { type: "string" },
      quiet: { type: "boolean", short: "q" },
      redis: { type: "string" },
      "redis-prefix": { type: "string" },
    },
  });
  if (values.help === true) return { command: "help" };
  if (positionals.length > 1) {
    throw new UsageError(
      `crawl takes one input (a file or -): current value is ${positionals.join(" ")}`,
    );
  }
  const set = (values.set ?? []).map((item): readonly [string, string] => {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set expects NAME=VALUE: current value is '${item}'`);
    return [item.slice(0, eq).trim(), item.slice(eq + 1)];
  });
  return {
    command: "crawl",
    input: positionals[0] ?? "-",
    settingsFile: values.settings,
    set,
    jobDir: nonEmpty("--jobdir", values.jobdir),
    output: nonEmpty("--output", values.output),
    events: nonEmpty("--events", values.events),
    plain: values.plain === true,
    quiet: values.quiet === true,
    redis: parseRedis(values.redis, values["redis-prefix"]),
  };
}

function parseRedis(url: string | undefined, prefix: string | undefined): RedisArgs | undefined {
  if (url === undefined) {
    if (prefix !== undefined) {
      throw new UsageError(`--redis-prefix needs --redis URL: current value is '${prefix}'`);
    }
    return undefined;
  }
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch { /* reported below */ }
  if (parsed === undefined || (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:")) {
    throw new UsageError(
      `--redis expects a URL like redis://127.0.0.1:6379: current value is '${maskRedisUrl(url)}'`,
    );
  }
  if (prefix === "") throw new UsageError(`--redis-prefix expects a prefix: current value is ''`);
  return { url, prefix: prefix ?? DEFAULT_REDIS_PREFIX };
}

function parseDemo(argv: readonly string[]): DemoArgs | HelpArgs {
  const { values } = parse({
    args: [...argv],
    allowPositionals: false,
    strict: true,
    options: { ...COMMON, duration: { type: "string" } },
  });
  if (values.help === true) return { command: "help" };
  let durationSec = DEFAULT_DEMO_SECONDS;
  if (values.duration !== undefined) {
    durationSec = Number(values.duration);
    if (!Number.isFinite(durationSec) || durationSec <= 0) {
      throw new UsageError(
        `--duration must be a number of seconds > 0: current value is '${values.duration}'`,
      );
    }
  }
  return {
    command: "demo",
    durationSec,
    output: nonEmpty("--output", values.output),
    events: nonEmpty("--events", values.events),
    plain: values.plain === true,
  };
}

function nonEmpty(flag: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "") {
    throw new UsageError(`${flag} expects a path: current value is ''`);
  }
  return value;
}

/**
 * The URL with its password (if any) masked, for messages.
 *
 * @param url A `redis://` URL (or what was given as one).
 * @returns The same URL with `***` for the password.
 */
export function maskRedisUrl(url: string): string {
  // On the text as given (a parsed URL would be normalised, and a bad one not parsed at all).
  return url.replace(/^([^/]*\/\/[^:@/]*):[^@/]*@/, "$1:***@");
}
