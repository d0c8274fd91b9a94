import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { maskRedisUrl, parseCliArgs, UsageError } from "../lib/cli/args.ts";
import { openRedisOption, RedisOptionError } from "../lib/cli/redis_option.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";
import { connectRedis, onCleanup, REDIS_PORT, runCleanups } from "./_helpers/redis.ts";
import { startOwnRedis, startRedisServer, waitForRedis } from "./_helpers/own_redis.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MAIN = join(ROOT, "lib/cli/main.ts");
const REDIS_URL = `redis://127.0.0.1:${REDIS_PORT}`;

afterEach(runCleanups);

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run `politely` as a child process on the runtime running the tests, optionally interrupting it. */
function politely(
  args: readonly string[],
  interruptWhen?: () => boolean,
  options: { signal?: NodeJS.Signals; closeStdoutAfterLines?: number } = {},
): Promise<Run> {
  const runtime = "Deno" in globalThis
    ? ["run", "-A", MAIN]
    : "Bun" in globalThis
    ? [MAIN]
    : ["--import", "tsx", MAIN];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...runtime, ...args], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
      const keep = options.closeStdoutAfterLines;
      if (keep !== undefined && stdout.split("\n").length > keep) child.stdout.destroy();
    });
    child.stderr.on("data", (d) => (stderr += d));
    let poll: ReturnType<typeof setInterval> | undefined;
    if (interruptWhen !== undefined) {
      poll = setInterval(() => {
        if (!interruptWhen()) return;
        clearInterval(poll);
        child.kill(options.signal ?? "SIGINT");
      }, 20);
    }
    child.on("error", reject);
    child.on("close", (code) => {
      clearInterval(poll);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A fresh key prefix, its keys deleted at clean-up. */
async function freshPrefix(): Promise<string> {
  const prefix = `test:cli:${crypto.randomUUID()}:`;
  const admin = await connectRedis();
  onCleanup(async () => {
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(keys);
  });
  return prefix;
}

/** A loopback server that answers after `ms` (robots.txt: 404) and counts the most requests in flight at once. */
async function slowServer(ms: number) {
  let inFlight = 0;
  let most = 0;
  const server = await startRecordingServer((req, res) => {
    most = Math.max(most, ++inFlight);
    setTimeout(() => {
      inFlight--;
      res.writeHead(req.url === "/robots.txt" ? 404 : 200, { connection: "close" }).end("ok");
    }, ms);
  });
  onCleanup(() => server.close());
  return { ...server, most: () => most };
}

/**
 * A crawl against a Redis of the test's own: a free port (the test starts
 * redis-server on it with {@link startRedisServer}), a loopback site of `n`
 * pages answering in 20 ms, their list in a file, and where --output goes.
 */
async function ownRedisCrawl(n: number) {
  const { port, server: redis } = await startOwnRedis();
  onCleanup(() => redis.kill("SIGKILL"));
  const server = await slowServer(20);
  const dir = tempDir();
  const urls = join(dir, "urls.txt");
  writeFileSync(urls, Array.from({ length: n }, (_, i) => `${server.origin}/${i + 1}`).join("\n"));
  const output = join(dir, "out.jsonl");
  /** `politely crawl` of the pages through this Redis, one at a time, 50 ms apart, and `extra`. */
  const crawlArgs = (...extra: string[]) => [
    "crawl",
    urls,
    "--redis",
    `redis://127.0.0.1:${port}`,
    "--plain",
    "--output",
    output,
    "--set",
    "CONCURRENT_REQUESTS_PER_DOMAIN=1",
    "--set",
    "DOWNLOAD_DELAY=0.05",
    ...extra,
  ];
  return { port, redis, server, dir, output, crawlArgs };
}

/** Lines written to `path` so far (0 before it exists). */
function writtenLines(path: string): number {
  try {
    return readFileSync(path, "utf8").split("\n").length - 1;
  } catch {
    return 0;
  }
}

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "politely-cli-redis-"));
}

function readLines(path: string): Record<string, unknown>[] {
  return readFileSync(path, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
}

describe("politely crawl --redis", () => {
  it("politely crawl --redis keeps two crawl processes within one shared concurrency", async () => {
    const server = await slowServer(120);
    const prefix = await freshPrefix();
    const dir = tempDir();
    const crawls = ["a", "b"].map((name) => {
      const urls = Array.from({ length: 10 }, (_, i) => `${server.origin}/${name}/${i}`);
      writeFileSync(join(dir, `${name}.txt`), `${urls.join("\n")}\n`);
      return { name, urls };
    });
    const runs = await Promise.all(crawls.map(({ name }) =>
      politely([
        "crawl",
        join(dir, `${name}.txt`),
        "--redis",
        REDIS_URL,
        "--redis-prefix",
        prefix,
        "--set",
        "CONCURRENT_REQUESTS_PER_DOMAIN=2",
        // robots.txt is fetched inside a lease: it counts against the limit too.
        "--set",
        "ROBOTSTXT_OBEY=True",
        "--output",
        join(dir, `${name}.jsonl`),
        "--plain",
      ])
    ));
    for (const [i, run] of runs.entries()) {
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout.split("\n")[0]).toBe(`politely crawl (shared via Redis ${prefix})`);
      const lines = readLines(join(dir, `${crawls[i]!.name}.jsonl`));
      expect(lines.map((l) => l.url).sort()).toEqual([...crawls[i]!.urls].sort());
      expect(lines.every((l) => l.status === 200)).toBe(true);
    }
    const pages = server.arrivals.filter((a) => a.path !== "/robots.txt");
    expect(pages).toHaveLength(20);
    // Each alone allows 2: together, without Redis, up to 4.
    expect(server.most()).toBeLessThanOrEqual(2);
  }, 120_000);

  it("politely crawl --redis releases its leases and exits 130 on Ctrl-C", async () => {
    // Answers only when closed: the crawl is stopped with downloads in flight.
    const server = await startRecordingServer(() => {});
    onCleanup(() => server.close());
    const prefix = await freshPrefix();
    const dir = tempDir();
    writeFileSync(join(dir, "urls.txt"), `${server.origin}/1\n${server.origin}/2\n`);
    const run = await politely(
      ["crawl", join(dir, "urls.txt"), "--redis", REDIS_URL, "--redis-prefix", prefix, "--quiet"],
      () => server.arrivals.length === 2,
    );
    // Deno's child_process reports a child that handled SIGINT and exited 130
    // as ended by the signal (code null), as test/cli_crawl.test.ts notes; the
    // output shows the clean stop all the same.
    expect("Deno" in globalThis ? [130, null] : [130], run.stderr).toContain(run.code);
    expect(run.stderr).toContain("politely: stopped");
    expect(run.stdout).toContain("2 downloads in flight aborted");
    const admin = await connectRedis();
    // Released at teardown, not left to expire (a lease lives 60 s).
    expect(await admin.zCard(`${prefix}lease:${new URL(server.origin).host}`)).toBe(0);
  }, 120_000);

  it("politely crawl --redis releases its leases and exits 143 on SIGTERM", async () => {
    const server = await startRecordingServer(() => {});
    onCleanup(() => server.close());
    const prefix = await freshPrefix();
    const dir = tempDir();
    writeFileSync(join(dir, "urls.txt"), `${server.origin}/1\n${server.origin}/2\n`);
    const run = await politely(
      ["crawl", join(dir, "urls.txt"), "--redis", REDIS_URL, "--redis-prefix", prefix, "--quiet"],
      () => server.arrivals.length === 2,
      { signal: "SIGTERM" },
    );
    expect("Deno" in globalThis ? [143, null] : [143], run.stderr).toContain(run.code);
    expect(run.stdout).toContain("stopped by SIGTERM: 2 downloads in flight aborted");
    const admin = await connectRedis();
    expect(await admin.zCard(`${prefix}lease:${new URL(server.origin).host}`)).toBe(0);
  }, 120_000);

  it(
    "politely crawl --redis releases its leases when its stdout is closed (| head -2)",
    async () => {
      // Two requests held open (leases taken), the rest answered 503: backoff
      // lines keep the plain log writing after the reader has gone.
      const held: import("node:http").ServerResponse[] = [];
      const server = await startRecordingServer((req, res) => {
        if (req.url === "/1" || req.url === "/2") {
          held.push(res);
          return;
        }
        res.writeHead(req.url === "/robots.txt" ? 404 : 503, { connection: "close" }).end("busy");
      });
      onCleanup(() => {
        for (const res of held) res.destroy();
        return server.close();
      });
      const prefix = await freshPrefix();
      const dir = tempDir();
      writeFileSync(
        join(dir, "urls.txt"),
        Array.from({ length: 300 }, (_, i) => `${server.origin}/${i + 1}`).join("\n"),
      );
      const run = await politely(
        [
          "crawl",
          join(dir, "urls.txt"),
          "--redis",
          REDIS_URL,
          "--redis-prefix",
          prefix,
          "--plain",
          "--set",
          "BACKOFF_MIN_DELAY=0.02",
          "--set",
          "BACKOFF_MAX_DELAY=0.05",
          "--set",
          "RETRY_TIMES=0",
        ],
        undefined,
        { closeStdoutAfterLines: 2 },
      );
      expect("Deno" in globalThis ? [141, null] : [141], run.stderr).toContain(run.code);
      expect(run.stderr).toBe("");
      const admin = await connectRedis();
      expect(await admin.zCard(`${prefix}lease:${new URL(server.origin).host}`)).toBe(0);
    },
    120_000,
  );

  it(
    "politely crawl --redis holds its requests through a Redis outage and sends every one when Redis is back",
    async () => {
      // A Redis of this test's own on a free port, killed mid-crawl and
      // started again (empty: --save ''), while the crawl waits.
      const n = 60;
      const started = await ownRedisCrawl(n);
      const { port, output, crawlArgs } = started;
      let redis = started.redis;
      onCleanup(() => redis.kill("SIGKILL"));
      let restarted = false;
      const run = politely(
        crawlArgs(),
      );
      // Kill Redis once a third of the pages are written, restart it 12 s
      // later: longer than the 10 s a request used to wait before it ended
      // unsent, well within --redis-wait's 120 s default.
      for (let i = 0; i < 600 && !restarted; i++) {
        await new Promise((r) => setTimeout(r, 50));
        if (writtenLines(output) >= n / 3) {
          redis.kill("SIGKILL");
          await new Promise((r) => setTimeout(r, 12_000));
          redis = startRedisServer(port);
          restarted = true;
        }
      }
      expect(restarted).toBe(true);
      const done = await run;
      expect(done.code, done.stderr).toBe(0);
      const records = readLines(output);
      expect(records.map((r) => r.status)).toEqual(Array.from({ length: n }, () => 200));
      expect(new Set(records.map((r) => r.url)).size).toBe(n);
    },
    120_000,
  );

  it(
    "politely crawl --redis-wait: requests a Redis that stays away cannot serve end unsent, exit 3, and the job directory keeps them",
    async () => {
      const { port, redis, dir, output, crawlArgs } = await ownRedisCrawl(24);
      const args = crawlArgs("--redis-wait", "1", "--jobdir", join(dir, "job"));
      let killed = false;
      const first = await politely(args, () => {
        if (writtenLines(output) >= 8 && !killed) {
          killed = true;
          redis.kill("SIGKILL");
        }
        return false;
      });
      expect(killed).toBe(true);
      expect(first.code, first.stderr).toBe(3);
      expect(first.stderr).toMatch(/requests? (was|were) not sent/);
      const ok = (records: Record<string, unknown>[]) =>
        records.filter((r) => r.status === 200).map((r) => r.url);
      const sent = ok(readLines(output)).length;
      expect(sent).toBeGreaterThanOrEqual(8);
      expect(sent).toBeLessThan(24);
      // Redis back: the resume sends what was left, each URL once in all.
      const again = startRedisServer(port);
      onCleanup(() => again.kill("SIGKILL"));
      await waitForRedis(port);
      const second = await politely(args);
      expect(second.code, second.stderr).toBe(0);
      const recorded = ok(readLines(output));
      expect(recorded).toHaveLength(24);
      expect(new Set(recorded).size).toBe(24);
    },
    120_000,
  );

  it(
    "politely crawl --redis with an unreachable Redis exits 2 with one line naming --redis and the URL",
    async () => {
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), "http://127.0.0.1:9/x\n");
      const run = await politely([
        "crawl",
        join(dir, "urls.txt"),
        "--redis",
        "redis://127.0.0.1:1",
      ]);
      expect(run.code).toBe(2);
      expect(run.stdout).toBe("");
      const lines = run.stderr.trimEnd().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^politely: --redis redis:\/\/127\.0\.0\.1:1: cannot connect to Redis: .+/,
      );
    },
    120_000,
  );
});

describe("parseCliArgs() --redis", () => {
  it("parseCliArgs() reads --redis and --redis-prefix, with politely: as the default prefix", () => {
    const crawl = (argv: string[]) => {
      const args = parseCliArgs(["crawl", "urls.txt", ...argv]);
      if (args.command !== "crawl") throw new Error(`not a crawl: ${args.command}`);
      return args.redis;
    };
    expect(crawl([])).toBeUndefined();
    expect(crawl(["--redis", "redis://127.0.0.1:6390"])).toEqual({
      url: "redis://127.0.0.1:6390",
      prefix: "politely:",
      waitMs: 120_000,
      leaseMs: 60_000,
    });
    expect(
      crawl([
        "--redis",
        "rediss://h:6380/2",
        "--redis-prefix",
        "{crawl-42}:",
        "--redis-wait",
        "5",
        "--redis-lease",
        "7",
      ]),
    ).toEqual({ url: "rediss://h:6380/2", prefix: "{crawl-42}:", waitMs: 5_000, leaseMs: 7_000 });
    expect(() => crawl(["--redis-lease", "3"])).toThrow("--redis-lease needs --redis URL");
    expect(() => crawl(["--redis", "redis://h", "--redis-lease", "0.5"])).toThrow(
      "--redis-lease must be a number of seconds >= 1",
    );
  });

  it("parseCliArgs() rejects a --redis-wait that is not seconds > 0 a timer can hold, or without --redis", () => {
    for (const wait of ["0", "-1", "x", "", "1e9"]) {
      expect(() => parseCliArgs(["crawl", "--redis", REDIS_URL, `--redis-wait=${wait}`])).toThrow(
        `--redis-wait must be a number of seconds > 0 and <= 2073600: current value is '${wait}'`,
      );
    }
    expect(() => parseCliArgs(["crawl", "--redis-wait", "5"])).toThrow(
      "--redis-wait needs --redis URL: current value is '5'",
    );
  });

  it("parseCliArgs() rejects a bad --redis URL, naming --redis", () => {
    for (const url of ["127.0.0.1:6390", "http://127.0.0.1:6390", "", "redis//x"]) {
      expect(() => parseCliArgs(["crawl", "--redis", url])).toThrow(UsageError);
      expect(() => parseCliArgs(["crawl", "--redis", url])).toThrow(
        `--redis expects a URL like redis://127.0.0.1:6379: current value is '${url}'`,
      );
    }
  });
  it("parseCliArgs() shows no password of a bad --redis URL", () => {
    expect(() => parseCliArgs(["crawl", "--redis", "http://me:hunter2@h:6379"])).toThrow(
      "--redis expects a URL like redis://127.0.0.1:6379: current value is 'http://me:***@h:6379'",
    );
  });

  it("parseCliArgs() rejects --redis-prefix without --redis, or empty", () => {
    expect(() => parseCliArgs(["crawl", "--redis-prefix", "p:"])).toThrow(
      "--redis-prefix needs --redis URL: current value is 'p:'",
    );
    expect(() => parseCliArgs(["crawl", "--redis", REDIS_URL, "--redis-prefix", ""])).toThrow(
      "--redis-prefix expects a prefix",
    );
  });
});

describe("openRedisOption()", () => {
  it("openRedisOption() without the redis package says npm install redis", async () => {
    const missing = "politely-no-such-package";
    const error = await openRedisOption({ url: REDIS_URL, prefix: "p:" }, {
      importRedis: () => import(missing),
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisOptionError);
    expect((error as Error).message).toMatch(
      /^--redis needs the 'redis' package: npm install redis/,
    );
    expect((error as Error).message).not.toContain("\n");
  });

  it("openRedisOption() opens the store on the prefix, and close() closes it once", async () => {
    const prefix = await freshPrefix();
    const redis = await openRedisOption({ url: REDIS_URL, prefix });
    expect(redis.scopes.prefix).toBe(prefix);
    const got = await redis.scopes.acquire(["s"], [{ concurrency: 1, delayMs: 0 }]);
    expect(got.ok).toBe(true);
    if (got.ok) await redis.scopes.release(got.lease);
    const closing = redis.close();
    expect(redis.close()).toBe(closing);
    await closing;
    // The connection is closed: a command fails at once.
    await expect(redis.scopes.acquire(["s"], [{ concurrency: 1, delayMs: 0 }])).rejects.toThrow();
  });

  it("maskRedisUrl() masks a password", () => {
    expect(maskRedisUrl("redis://user:secret@h:6379/0")).toBe("redis://user:***@h:6379/0");
    expect(maskRedisUrl("redis://h:6379")).toBe("redis://h:6379");
    // Not a redis:// URL, still no password in the message.
    expect(maskRedisUrl("http://user:secret@h:6379")).toBe("http://user:***@h:6379");
    expect(maskRedisUrl("://user:secret@h")).toBe("://user:***@h");
  });
});
