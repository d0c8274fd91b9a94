/**
 * The command line's arguments: which command, which files, which settings.
 * Parsing only; nothing is read or opened here.
 *
 * Size: the help text of every command and option is here (about a third of
 * the file), written once for the overview and each command's help; one
 * parser per command follows.
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { closestName } from "../settings/_closest_name.ts";
import { parseSimulateArgs, type SimulateArgs } from "./simulate_command.ts";

/** A mistake on the command line; the message is the one line the user sees. */
export class UsageError extends Error {
  override readonly name = "UsageError";
  /**
   * The command that tells more (`politely crawl --help`), said after the
   * message; `undefined` when the message already says what to type (a
   * did-you-mean).
   */
  readonly seeAlso: string | undefined;

  /**
   * @param message The one line.
   * @param options The command that tells more, `undefined` for none. @default { seeAlso: "politely help" }
   */
  constructor(
    message: string,
    options: { readonly seeAlso: string | undefined } = { seeAlso: "politely help" },
  ) {
    super(message);
    this.seeAlso = options.seeAlso;
  }
}

/** `politely crawl [FILE|-] [options]`. */
export interface CrawlArgs {
  readonly command: "crawl";
  /**
   * The input file, or `"-"` for stdin; `undefined` for none: a worker that
   * joins a shared job (`--shared-queue` without FILE).
   * @default "-" (none with `--shared-queue`)
   */
  readonly input: string | undefined;
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
  /** `--rampup`: every scope probes its limit upwards, past the configuration (the rampup operator). */
  readonly rampup: boolean;
  /** `--redis URL` and `--redis-prefix PREFIX`: share scope limits with other processes. */
  readonly redis: RedisArgs | undefined;
  /** `--shared-queue` (needs `--redis`): the request queue is the job's, in Redis, shared by every worker. */
  readonly sharedQueue: boolean;
  /** `--overwrite`: replace an existing `--output` / `--events` (a new crawl without `--jobdir`). */
  readonly overwrite: boolean;
  /** `--follow` and its limits: extract links from HTML pages and crawl them. */
  readonly follow: FollowArgs | undefined;
  /** `--warc FILE`: WARC request and response records of every final response (gzip when FILE ends in .gz). */
  readonly warc: string | undefined;
  /** `--save-bodies DIR`: each final response's body in a file under DIR (`bodyFile` in --output). */
  readonly saveBodies: string | undefined;
  /** `--web [HOST:]PORT`: serve a live dashboard of the crawl. */
  readonly web: WebArgs | undefined;
}

/** `--web [HOST:]PORT`: where the dashboard listens. */
export interface WebArgs {
  /** @default "127.0.0.1" */
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
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
  /**
   * `--redis-wait SECONDS`, in ms: how long a request waits for Redis to
   * answer (through an outage) before it ends unsent. @default 120000
   */
  readonly waitMs: number;
  /**
   * `--redis-lease SECONDS`, in ms: how long a crawl that stopped answering
   * (killed) keeps its shared slots and its taken requests (`--shared-queue`)
   * before the others get them. @default 60000
   */
  readonly leaseMs: number;
}

/** The default of `--redis-lease`. */
export const DEFAULT_REDIS_LEASE_MS = 60_000;
/** The default of `--redis-wait`: a Redis restart or a failover is waited for. */
export const DEFAULT_REDIS_WAIT_MS = 120_000;
/** The longest `--redis-wait` (what a timer can hold, rounded down to whole days). */
const MAX_REDIS_WAIT_SECONDS = 24 * 86_400;

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
  /** `--web [HOST:]PORT`. */
  readonly web: WebArgs | undefined;
}

/** `politely status --redis URL [--redis-prefix P] [--json]`: where a shared job stands. */
export interface StatusArgs {
  readonly command: "status";
  readonly redis: RedisArgs;
  /** `--json`: the counts as one JSON object. */
  readonly json: boolean;
}

/** The commands that have their own help. */
export type HelpTopic = "crawl" | "demo" | "simulate" | "status";

/** `politely help [COMMAND]`, `--help`, `-h` (after a command too), or no command. */
export interface HelpArgs {
  readonly command: "help";
  /** The command asked about (`politely crawl --help`); the overview when absent. */
  readonly topic?: HelpTopic;
}

/** `politely --version`. */
export interface VersionArgs {
  readonly command: "version";
}

/** What the command line asked for. */
export type CliArgs = CrawlArgs | DemoArgs | SimulateArgs | StatusArgs | HelpArgs | VersionArgs;

// The option lines are written once, for the overview and each command's help.
const CRAWL_OPTIONS =
  `  --settings FILE    settings as JSON (Scrapy's UPPER_CASE names or politely's camelCase)
  --set NAME=VALUE   one setting, repeatable (like Scrapy's -s), e.g. --set DOWNLOAD_DELAY=0.5
  --jobdir DIR       keep pending requests in DIR, so a stopped crawl resumes
  --output FILE      one JSON line per request: url, status or error, attempts, scopes, sentAt,
                     latencyMs, finalUrl, contentType, bytes, headers; with --jobdir a resumed
                     crawl appends (one line per request across stops and kills)
  --events FILE      one JSON line per throttling event
  --overwrite        replace an existing --output/--events/--warc (refused otherwise)
  --warc FILE        WARC 1.1 request and response records of every response (gzip per
                     record when FILE ends in .gz); with --jobdir a resumed crawl appends
  --save-bodies DIR  each response's body in a file DIR/HOST/NAME.EXT (bodyFile in --output)
  --follow           follow links of HTML pages (<a href>, <link rel=next>, <base>; not
                     rel=nofollow or meta robots nofollow) on the start URLs' domains
  --max-depth N      with --follow: at most N links away from a start URL
  --max-pages N      with --follow: at most N requests in all (with --shared-queue: in the
                     whole job, counted in Redis)
  --allow-domain D   with --follow: follow links to D and its subdomains too (repeatable)
  --plain            plain log lines, even on a terminal
  --quiet            no live view or log lines; only the summary
  --rampup           every site probes its limit upwards from one request at a time, past
                     CONCURRENT_REQUESTS_PER_DOMAIN and DOWNLOAD_DELAY (adaptive limits, on by
                     default, stay within them)
  --redis URL        share scope limits and backoff with other crawls through Redis,
                     e.g. --redis redis://127.0.0.1:6379 (needs: npm install redis)
  --redis-prefix P   key prefix of the shared limits (default politely:); crawls with the
                     same URL and prefix share
  --redis-wait SECS  how long requests wait through a Redis outage before they end unsent
                     (exit 3; --jobdir keeps them for a resume); default 120
  --redis-lease SECS how long a crawl that stopped answering (killed) keeps its shared slots
                     and taken requests before the others get them; default 60
  --shared-queue     with --redis: the request queue is a job in Redis under --redis-prefix,
                     worked by every crawl started on it: with FILE the crawl seeds the job
                     (again: nothing added twice), without FILE it joins as a worker;
                     --follow's links go to the job; each worker exits 0 when the job is done
  --web [HOST:]PORT  serve a live dashboard (plots, scopes, events) while crawling, on
                     127.0.0.1 unless HOST is given; PORT 0 picks a free one; read-only`;

const DEMO_OPTIONS = `  --duration SECONDS how long to crawl (default 45)
  --output FILE, --events FILE, --plain, --web [HOST:]PORT as for crawl`;

const EXIT_STATUS =
  `Exit status: 0 when every request ended (failed requests are outcomes too), 2 for bad
arguments, settings, input or output, 3 when some requests could not be sent (robots.txt or
Redis unreachable: --jobdir keeps them), 130/143/129 when stopped cleanly by SIGINT (Ctrl-C),
SIGTERM or SIGHUP, 141 when stdout's reader went away.
See docs/CLI.md.`;

/** The help text: `politely help`, `politely --help`. */
export const USAGE = `politely: crawl politely, as fast as each site allows and no faster.

Usage:
  politely crawl [FILE|-] [options]   crawl the URLs in FILE (or stdin): one URL per line,
                                      or one JSON object per line {url, priority, meta}
  politely demo [--duration SECONDS]  crawl five simulated rate-limited sites on loopback
  politely simulate --site SPEC ...   predict a crawl in virtual time (see docs/SIMULATE.md)
  politely status --redis URL [--redis-prefix P] [--json]
                                      queued, leased, done and failed requests of a shared
                                      job (crawl --shared-queue), in all and per scope
  politely help [COMMAND]             this text, or only COMMAND's (also: COMMAND --help)

Options of crawl:
${CRAWL_OPTIONS}

Options of demo:
${DEMO_OPTIONS}

${EXIT_STATUS}`;

/** The help of one command: `politely crawl --help`, `politely help demo`. */
export const COMMAND_USAGE: Readonly<Record<HelpTopic, string>> = {
  crawl: `Usage: politely crawl [FILE|-] [options]

Crawl the URLs in FILE, or stdin when FILE is - or left out: one URL per line, or one JSON
object per line {url, priority, meta}. Blank lines and lines starting with # are skipped.

Options:
${CRAWL_OPTIONS}
  -h, --help         this text

${EXIT_STATUS}`,
  demo: `Usage: politely demo [options]

Crawl five simulated rate-limited sites on loopback and show how politely finds each limit.

Options:
${DEMO_OPTIONS}
  -h, --help         this text

See docs/CLI.md.`,
  simulate: `Usage: politely simulate [FILE] --site SPEC ... [options]

Predict a crawl in virtual time: the real throttler, backoff, retries and request queue against
simulated sites, in seconds. FILE: URLs whose hosts are the sites' (instead of --urls).

Options:
  --site SPEC        a site, repeatable: a shape and key=value pairs, e.g.
                     "bucket rate=10 burst=3 status=429 latency=50ms host=api.example.com";
                     shapes bucket, spacer, fixed, sliding, conc, shed, none
  --sites FILE       sites as JSON: {"sites": [...], "urls": N, "zipf": S}
  --urls N           N URLs spread over the sites by weight (default 1000)
  --zipf S           spread them by a Zipf law of exponent S instead
  --settings FILE, --set NAME=VALUE   the crawl's settings, as for crawl
  --rampup           every scope probes its limit (the rampup operator)
  --seed N           seed of every random draw (default 1): the same seed, the same figures
  --jitter MS        requests reach the sites up to MS late (real clocks do)
  --json             the figures as one JSON object
  --svg FILE         a plot of the busiest sites' rate against their limits
  -h, --help         this text

See docs/SIMULATE.md.`,
  status: `Usage: politely status --redis URL [--redis-prefix P] [--json]

Where a shared job (politely crawl --shared-queue) stands: requests queued, leased (taken by a
worker, not finished), done and failed, in all and per scope. Reads only.

Options:
  --redis URL        the Redis of the job
  --redis-prefix P   the job's prefix (default politely:)
  --json             the counts as one JSON object
  -h, --help         this text

Exit status: 0, or 2 for bad arguments or a Redis that cannot be reached. See docs/CLI.md.`,
};

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
  if (command === undefined || command === "--help" || command === "-h") return { command: "help" };
  if (command === "help") return parseHelp(rest);
  if (command === "--version" || command === "-V") return { command: "version" };
  if (command === "crawl") return parseCrawl(rest);
  if (command === "demo") return parseDemo(rest);
  if (command === "simulate") return parseSimulateArgs(rest);
  if (command === "status") return parseStatus(rest);
  throw unknownCommand(command);
}

const COMMANDS = ["crawl", "demo", "simulate", "status", "help"] as const;

function unknownCommand(command: string): UsageError {
  const meant = closestName(command, COMMANDS);
  return meant === undefined
    ? new UsageError(
      `Unknown command '${command}': expected 'crawl', 'demo', 'simulate', 'status' or 'help'`,
    )
    : new UsageError(`Unknown command '${command}' (did you mean '${meant}'?)`, {
      seeAlso: undefined,
    });
}

function parseHelp(argv: readonly string[]): HelpArgs {
  const [topic, ...extra] = argv;
  if (topic === undefined || topic === "help") return { command: "help" };
  if (extra.length > 0) {
    throw new UsageError(`help takes one command: current value is ${argv.join(" ")}`);
  }
  if (topic === "crawl" || topic === "demo" || topic === "simulate" || topic === "status") {
    return { command: "help", topic };
  }
  throw unknownCommand(topic);
}

/**
 * Parse one command's arguments. `--help` wins over every mistake beside it
 * (a user adds it to a command line that failed), and an unknown option is
 * named with the one it was probably meant to be.
 */
function parse<T extends ParseArgsConfig>(
  command: HelpTopic,
  config: T,
): ReturnType<typeof parseArgs<T>> | HelpArgs {
  // parseArgs' own reading of the words, without its checks: data to look at,
  // where its error would have to be taken apart as text.
  const { tokens } = parseArgs({ ...config, strict: false, allowPositionals: true, tokens: true });
  const options = config.options ?? {};
  const asked = (tokens ?? []).flatMap((t) => t.kind === "option" ? [t] : []);
  if (asked.some((t) => t.name === "help")) return { command: "help", topic: command };
  const unknown = asked.find((t) => !Object.hasOwn(options, t.name));
  if (unknown !== undefined) {
    // A single letter is within two edits of every short name: no guess for -x.
    const meant = unknown.rawName.startsWith("--")
      ? closestName(unknown.name, Object.keys(options))
      : undefined;
    throw meant === undefined
      ? new UsageError(`unknown option ${unknown.rawName}`, {
        seeAlso: `politely ${command} --help`,
      })
      : new UsageError(`unknown option ${unknown.rawName} (did you mean --${meant}?)`, {
        seeAlso: undefined,
      });
  }
  try {
    return parseArgs(config);
  } catch (error) {
    // node:util's messages are one line; drop its "To specify a positional..." tail.
    const message = error instanceof Error
      ? error.message.split(". To ")[0]!.split("\n")[0]!
      : String(error);
    throw new UsageError(message, { seeAlso: `politely ${command} --help` });
  }
}

const COMMON = {
  output: { type: "string" },
  events: { type: "string" },
  plain: { type: "boolean" },
  web: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

function parseCrawl(argv: readonly string[]): CrawlArgs | HelpArgs {
  const parsed = parse("crawl", {
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      ...COMMON,
      settings: { type: "string" },
      set: { type: "string", short: "s", multiple: true },
      jobdir: { type: "string" },
      quiet: { type: "boolean", short: "q" },
      rampup: { type: "boolean" },
      redis: { type: "string" },
      "redis-prefix": { type: "string" },
      "redis-wait": { type: "string" },
      "redis-lease": { type: "string" },
      "shared-queue": { type: "boolean" },
      overwrite: { type: "boolean" },
      warc: { type: "string" },
      "save-bodies": { type: "string" },
      follow: { type: "boolean" },
      "max-depth": { type: "string" },
      "max-pages": { type: "string" },
      "allow-domain": { type: "string", multiple: true },
    },
  });
  if ("command" in parsed) return parsed;
  const { values, positionals } = parsed;
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
  const redis = parseRedis(
    values.redis,
    values["redis-prefix"],
    values["redis-wait"],
    values["redis-lease"],
  );
  const sharedQueue = values["shared-queue"] === true;
  if (sharedQueue) {
    if (redis === undefined) throw new UsageError("--shared-queue needs --redis URL");
    if (values.jobdir !== undefined) {
      throw new UsageError(
        `--jobdir cannot be used with --shared-queue (the job lives in Redis): current value is '${values.jobdir}'`,
      );
    }
  }
  return {
    command: "crawl",
    input: positionals[0] ?? (sharedQueue ? undefined : "-"),
    settingsFile: values.settings,
    set,
    jobDir: nonEmpty("--jobdir", values.jobdir),
    output: nonEmpty("--output", values.output),
    events: nonEmpty("--events", values.events),
    plain: values.plain === true,
    quiet: values.quiet === true,
    rampup: values.rampup === true,
    redis,
    sharedQueue,
    overwrite: values.overwrite === true,
    warc: nonEmpty("--warc", values.warc),
    saveBodies: nonEmpty("--save-bodies", values["save-bodies"]),
    web: parseWeb(values.web),
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

function parseRedis(
  url: string | undefined,
  prefix: string | undefined,
  wait: string | undefined,
  lease?: string,
): RedisArgs | undefined {
  if (url === undefined) {
    if (lease !== undefined) {
      throw new UsageError(`--redis-lease needs --redis URL: current value is '${lease}'`);
    }
    if (prefix !== undefined) {
      throw new UsageError(`--redis-prefix needs --redis URL: current value is '${prefix}'`);
    }
    if (wait !== undefined) {
      throw new UsageError(`--redis-wait needs --redis URL: current value is '${wait}'`);
    }
    return undefined;
  }
  const waitSec = wait === undefined ? DEFAULT_REDIS_WAIT_MS / 1000 : Number(wait);
  if (!(Number.isFinite(waitSec) && waitSec > 0 && waitSec <= MAX_REDIS_WAIT_SECONDS)) {
    throw new UsageError(
      `--redis-wait must be a number of seconds > 0 and <= ${MAX_REDIS_WAIT_SECONDS}: current value is '${wait}'`,
    );
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
  const leaseSec = lease === undefined ? DEFAULT_REDIS_LEASE_MS / 1000 : Number(lease);
  if (!(Number.isFinite(leaseSec) && leaseSec >= 1 && leaseSec <= MAX_REDIS_WAIT_SECONDS)) {
    throw new UsageError(
      `--redis-lease must be a number of seconds >= 1 and <= ${MAX_REDIS_WAIT_SECONDS}: current value is '${lease}'`,
    );
  }
  if (prefix === "") throw new UsageError(`--redis-prefix expects a prefix: current value is ''`);
  return {
    url,
    prefix: prefix ?? DEFAULT_REDIS_PREFIX,
    waitMs: waitSec * 1000,
    leaseMs: leaseSec * 1000,
  };
}

function parseStatus(argv: readonly string[]): StatusArgs | HelpArgs {
  const parsed = parse("status", {
    args: [...argv],
    allowPositionals: false,
    strict: true,
    options: {
      redis: { type: "string" },
      "redis-prefix": { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if ("command" in parsed) return parsed;
  const { values } = parsed;
  const redis = parseRedis(values.redis, values["redis-prefix"], undefined);
  if (redis === undefined) throw new UsageError("status needs --redis URL");
  return { command: "status", redis, json: values.json === true };
}

function parseDemo(argv: readonly string[]): DemoArgs | HelpArgs {
  const parsed = parse("demo", {
    args: [...argv],
    allowPositionals: false,
    strict: true,
    options: { ...COMMON, duration: { type: "string" } },
  });
  if ("command" in parsed) return parsed;
  const { values } = parsed;
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
    web: parseWeb(values.web),
  };
}

/** `--web PORT`, `--web HOST:PORT`, `--web [::1]:PORT`. */
function parseWeb(value: string | undefined): WebArgs | undefined {
  if (value === undefined) return undefined;
  const m = /^(?:(\[[^\]]+\]|[^:]+):)?(\d{1,5})$/.exec(value.trim());
  const port = Number(m?.[2]);
  if (m === null || port > 65535) {
    throw new UsageError(
      `--web expects [HOST:]PORT, e.g. 8080 or 0.0.0.0:8080 (0 picks a free port): current value is '${value}'`,
      { seeAlso: undefined },
    );
  }
  return { host: m[1]?.replace(/^\[(.*)\]$/, "$1") ?? "127.0.0.1", port };
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
