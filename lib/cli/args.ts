/**
 * The command line's arguments: which command, which files, which settings.
 * Parsing only; nothing is read or opened here.
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { parseSimulateArgs, type SimulateArgs } from "./simulate_command.ts";

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
  /** `--overwrite`: replace an existing `--output` / `--events` (a new crawl without `--jobdir`). */
  readonly overwrite: boolean;
  /** `--follow` and its limits: extract links from HTML pages and crawl them. */
  readonly follow: FollowArgs | undefined;
}

/** Link following (`--follow`, `--max-depth`, `--max-pages`, `--allow-domain`). */
export interface FollowArgs {
  /** `--max-depth N`: links N clicks from a start URL at most. @default unlimited */
  readonly maxDepth: number | undefined;
  /** `--max-pages N`: requests in all (start URLs included) at most. @default unlimited */
  readonly maxPages: number | undefined;
  /** `--allow-domain D` (repeatable): domains followed besides the start URLs' own. */
  readonly allowDomains: readonly string[];
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
export type CliArgs = CrawlArgs | DemoArgs | SimulateArgs | HelpArgs | VersionArgs;

/** The help text. */
export const USAGE = `politely: crawl politely, as fast as each site allows and no faster.

Usage:
  politely crawl [FILE|-] [options]   crawl the URLs in FILE (or stdin): one URL per line,
                                      or one JSON object per line {url, priority, meta}
  politely demo [--duration SECONDS]  crawl five simulated rate-limited sites on loopback
  politely simulate --site SPEC ...   predict a crawl in virtual time (see docs/SIMULATE.md)
  politely help                       this text

Options of crawl:
  --settings FILE    settings as JSON (Scrapy's UPPER_CASE names or politely's camelCase)
  --set NAME=VALUE   one setting, repeatable (like Scrapy's -s), e.g. --set DOWNLOAD_DELAY=0.5
  --jobdir DIR       keep pending requests in DIR, so a stopped crawl resumes
  --output FILE      one JSON line per request: url, status or error, attempts, scopes, sentAt,
                     latencyMs, finalUrl, contentType, bytes, headers; with --jobdir a resumed
                     crawl appends (one line per request across stops and kills)
  --events FILE      one JSON line per throttling event
  --overwrite        replace an existing --output/--events (refused otherwise)
  --follow           follow links of HTML pages (<a href>, <link rel=next>, <base>; not
                     rel=nofollow or meta robots nofollow) on the start URLs' domains
  --max-depth N      with --follow: at most N links away from a start URL
  --max-pages N      with --follow: at most N requests in all
  --allow-domain D   with --follow: follow links to D and its subdomains too (repeatable)
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
  if (command === "simulate") return parseSimulateArgs(rest);
  throw new UsageError(
    `Unknown command '${command}': expected 'crawl', 'demo', 'simulate' or 'help'`,
  );
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
      overwrite: { type: "boolean" },
      follow: { type: "boolean" },
      "max-depth": { type: "string" },
      "max-pages": { type: "string" },
      "allow-domain": { type: "string", multiple: true },
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
    overwrite: values.overwrite === true,
    follow: parseFollow(
      values.follow === true,
      values["max-depth"],
      values["max-pages"],
      values["allow-domain"] ?? [],
    ),
  };
}

function parseFollow(
  follow: boolean,
  maxDepth: string | undefined,
  maxPages: string | undefined,
  allowDomains: readonly string[],
): FollowArgs | undefined {
  if (!follow) {
    const stray = maxDepth !== undefined
      ? "--max-depth"
      : maxPages !== undefined
      ? "--max-pages"
      : allowDomains.length > 0
      ? "--allow-domain"
      : undefined;
    if (stray !== undefined) throw new UsageError(`${stray} needs --follow`);
    return undefined;
  }
  const count = (flag: string, value: string | undefined, least: number) => {
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isInteger(n) || n < least) {
      throw new UsageError(
        `${flag} expects a whole number >= ${least}: current value is '${value}'`,
      );
    }
    return n;
  };
  const domains = allowDomains.map((d) => {
    const host = d.trim().toLowerCase().replace(/^\*?\./, "");
    if (host === "" || /[\s/:@]/.test(host)) {
      throw new UsageError(
        `--allow-domain expects a domain like example.com: current value is '${d}'`,
      );
    }
    return host;
  });
  return {
    maxDepth: count("--max-depth", maxDepth, 0),
    maxPages: count("--max-pages", maxPages, 1),
    allowDomains: domains,
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
