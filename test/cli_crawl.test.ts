import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type RecordingServer, startRecordingServer } from "./_helpers/loopback_server.ts";
import { politely, readLines, tempDir } from "./_helpers/politely_cli.ts";

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

let server: RecordingServer | undefined;

/**
 * A crawl of /1 to /8, one at a time, with a job directory, against a server
 * that holds every request after /3 unanswered; stopped with `signal` once one
 * is held. `release()` lets the server answer again (for the resume).
 */
async function stoppedJobCrawl(signal: "SIGINT" | "SIGTERM") {
  let hang = true;
  const held: import("node:http").ServerResponse[] = [];
  const s = await startRecordingServer((req, res) => {
    const n = Number(req.url?.slice(1));
    if (hang && n > 3) {
      held.push(res); // never answered: the crawl is stopped while it waits
      return;
    }
    res.writeHead(200, { connection: "close" });
    res.end("ok");
  });
  server = s;
  const dir = tempDir();
  writeFileSync(
    join(dir, "urls.txt"),
    Array.from({ length: 8 }, (_, i) => `${s.origin}/${i + 1}`).join("\n"),
  );
  const args = [
    "crawl",
    join(dir, "urls.txt"),
    "--jobdir",
    join(dir, "job"),
    "--set",
    "CONCURRENT_REQUESTS_PER_DOMAIN=1",
    "--plain",
  ];
  const first = await politely([...args, "--output", join(dir, "first.jsonl")], {
    interruptWhen: () => held.length > 0,
    signal,
  });
  const release = () => {
    hang = false;
    for (const res of held) res.destroy();
  };
  return { s, dir, args, first, release };
}
const agents: string[] = [];
afterEach(async () => {
  await server?.close();
  server = undefined;
  agents.length = 0;
});

async function okServer(): Promise<RecordingServer> {
  server = await startRecordingServer((req, res) => {
    agents.push(String(req.headers["user-agent"]));
    res.writeHead(200, { "content-type": "text/plain", connection: "close" });
    res.end("ok");
  });
  return server;
}

describe("politely crawl", () => {
  it("politely crawl reads a URL file and writes one outcome line per request", async () => {
    const s = await okServer();
    const dir = tempDir();
    writeFileSync(
      join(dir, "urls.txt"),
      `${s.origin}/a\n\n# a comment\n${s.origin}/b\n${s.origin}/c\n`,
    );
    const run = await politely([
      "crawl",
      join(dir, "urls.txt"),
      "--output",
      join(dir, "out.jsonl"),
      "--plain",
    ]);
    expect(run.code).toBe(0);
    const lines = readLines(join(dir, "out.jsonl"));
    expect(lines.map((l) => l.url).sort()).toEqual([
      `${s.origin}/a`,
      `${s.origin}/b`,
      `${s.origin}/c`,
    ]);
    const host = new URL(s.origin).host;
    for (const l of lines) {
      expect(l).toMatchObject({ status: 200, attempts: 1, scopes: [host] });
      expect(typeof l.latencyMs).toBe("number");
      expect(new Date(l.sentAt as string).toISOString()).toBe(l.sentAt);
    }
    expect(s.arrivals.map((a) => a.path).sort()).toEqual(["/a", "/b", "/c"]);
    expect(agents.every((a) => a.startsWith("politely/"))).toBe(true);
    expect(run.stdout).toContain("politely: 3 requests ended");
    expect(run.stdout).toContain("2xx 3");
  }, 120_000);

  it("politely crawl - reads stdin and counts statuses and failures in the summary", async () => {
    server = await startRecordingServer((req, res) => {
      res.writeHead(req.url === "/missing" ? 404 : 200, { connection: "close" });
      res.end();
    });
    const input = `${server.origin}/here\n${server.origin}/missing\nhttp://127.0.0.1:9/refused\n`;
    const run = await politely(["crawl", "-", "--set", "RETRY_ENABLED=False", "--quiet"], {
      stdin: input,
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("politely: 3 requests ended");
    expect(run.stdout).toContain("2xx 1, 3xx 0, 4xx 1, 5xx 0; errors 1");
    expect(run.stdout).toContain("failures 1");
  }, 120_000);

  it(
    "politely crawl reads JSON Lines with Scrapy meta names, dedupes, and reports a malformed line as a failed outcome",
    async () => {
      const s = await okServer();
      const dir = tempDir();
      const lines = [
        JSON.stringify({
          url: `${s.origin}/api`,
          priority: 5,
          meta: { throttling_scopes: ["api"], throttling_delay: 0.05 },
        }),
        JSON.stringify({ url: `${s.origin}/same` }),
        JSON.stringify({ url: `${s.origin}/same` }),
        JSON.stringify({ url: `${s.origin}/again`, meta: { dont_filter: true } }),
        JSON.stringify({
          url: `${s.origin}/again`,
          meta: { dont_filter: true, throttling_dont_track: true },
        }),
        `{"url": "${s.origin}/broken"`,
      ];
      writeFileSync(join(dir, "in.jsonl"), lines.join("\n") + "\n");
      const run = await politely([
        "crawl",
        join(dir, "in.jsonl"),
        "--output",
        join(dir, "out.jsonl"),
        "--plain",
      ]);
      expect(run.code).toBe(0);
      const out = readLines(join(dir, "out.jsonl"));
      expect(out.find((l) => l.url === `${s.origin}/api`)).toMatchObject({
        status: 200,
        scopes: ["api"],
      });
      expect(out.filter((l) => l.url === `${s.origin}/same`)).toHaveLength(1);
      expect(out.filter((l) => l.url === `${s.origin}/again`)).toHaveLength(2);
      const broken = out.find((l) => l.line === 6);
      expect(broken).toMatchObject({ url: null, attempts: 0 });
      expect(String(broken?.error)).toMatch(/^InputLineError: line 6: malformed JSON/);
      expect(s.arrivals.map((a) => a.path).sort()).toEqual(["/again", "/again", "/api", "/same"]);
      expect(run.stderr).toContain("line 6");
      expect(run.stdout).toContain("duplicates dropped 1");
    },
    120_000,
  );

  it(
    "politely crawl --settings takes Scrapy's names: DOWNLOAD_DELAY in seconds spaces the requests",
    async () => {
      const s = await okServer();
      const dir = tempDir();
      writeFileSync(
        join(dir, "settings.json"),
        JSON.stringify({
          DOWNLOAD_DELAY: 0.2,
          RANDOMIZE_DOWNLOAD_DELAY: false,
          CONCURRENT_REQUESTS_PER_DOMAIN: 1,
          LOG_LEVEL: "INFO",
        }),
      );
      writeFileSync(join(dir, "urls.txt"), [1, 2, 3, 4].map((i) => `${s.origin}/${i}`).join("\n"));
      const run = await politely([
        "crawl",
        join(dir, "urls.txt"),
        "--settings",
        join(dir, "settings.json"),
        "--output",
        join(dir, "out.jsonl"),
        "--quiet",
      ]);
      expect(run.code).toBe(0);
      expect(run.stderr).toContain("LOG_LEVEL");
      expect(s.arrivals).toHaveLength(4);
      // The send times politely recorded: a lower bound only (the upper side is the machine's).
      const sent = readLines(join(dir, "out.jsonl")).map((l) => Date.parse(l.sentAt as string))
        .sort((a, b) => a - b);
      for (let i = 1; i < sent.length; i++) {
        expect(sent[i]! - sent[i - 1]!).toBeGreaterThanOrEqual(199);
      }
    },
    120_000,
  );

  it(
    "politely crawl with ROBOTSTXT_OBEY applies the Crawl-delay and ends a disallowed URL as RobotsTxtDisallowedError",
    async () => {
      server = await startRecordingServer((req, res) => {
        res.writeHead(200, { "content-type": "text/plain", connection: "close" });
        res.end(
          req.url === "/robots.txt"
            ? "User-agent: *\nDisallow: /private\nCrawl-delay: 0.2\n"
            : "ok",
        );
      });
      const s = server;
      const dir = tempDir();
      writeFileSync(
        join(dir, "urls.txt"),
        [`${s.origin}/a`, `${s.origin}/private`, `${s.origin}/b`, `${s.origin}/c`].join("\n"),
      );
      const run = await politely([
        "crawl",
        join(dir, "urls.txt"),
        "--set",
        "ROBOTSTXT_OBEY=True",
        "--set",
        "CONCURRENT_REQUESTS_PER_DOMAIN=8",
        // The default jitter (0.5x-1.5x, as Scrapy's) would randomise the Crawl-delay too.
        "--set",
        "RANDOMIZE_DOWNLOAD_DELAY=False",
        "--output",
        join(dir, "out.jsonl"),
        "--plain",
      ]);
      expect(run.code).toBe(0);
      const out = readLines(join(dir, "out.jsonl"));
      const denied = out.find((l) => l.url === `${s.origin}/private`);
      expect(String(denied?.error)).toMatch(/^RobotsTxtDisallowedError: /);
      expect(s.arrivals.map((a) => a.path).sort()).toEqual(["/a", "/b", "/c", "/robots.txt"]);
      expect(s.arrivals.filter((a) => a.path === "/robots.txt")).toHaveLength(1);
      expect(run.stdout).toMatch(/robots\.txt: apply: concurrency 1, delay 200 ms/);
      // Crawl-delay 0.2 s: one request at a time, sent at least 200 ms apart (as politely
      // recorded the sends: a lower bound only, the upper side is the machine's).
      const sent = out.filter((l) => l.status === 200).map((l) => Date.parse(l.sentAt as string))
        .sort((x, y) => x - y);
      expect(sent).toHaveLength(3);
      for (let i = 1; i < sent.length; i++) {
        expect(sent[i]! - sent[i - 1]!).toBeGreaterThanOrEqual(199);
      }
    },
    120_000,
  );

  it(
    "politely crawl names a connection error's cause in --output and in the log, not only 'fetch failed'",
    async () => {
      const dir = tempDir();
      const refused = `http://127.0.0.1:${await closedPort()}/`;
      const unknownHost = "http://politely-test.invalid/";
      const run = await politely([
        "crawl",
        "-",
        "--set",
        "RETRY_ENABLED=False",
        "--output",
        join(dir, "out.jsonl"),
        "--plain",
      ], { stdin: `${refused}\n${unknownHost}\n` });
      expect(run.code).toBe(0);
      const errors = Object.fromEntries(
        readLines(join(dir, "out.jsonl")).map((l) => [l.url, l.error]),
      );
      expect(errors[refused]).toMatch(
        /^DownloadFailedError: Download of \S+ failed: .*ECONNREFUSED/,
      );
      // A resolver that cannot be reached says EAI_AGAIN.
      expect(errors[unknownHost]).toMatch(
        /^DownloadFailedError: Download of \S+ failed: .*(ENOTFOUND|EAI_AGAIN)/,
      );
      expect(JSON.stringify(errors)).not.toContain("fetch failed");
      expect(run.stdout).toMatch(/backoff: DownloadFailedError ECONNREFUSED,/);
      expect(run.stdout).toMatch(/backoff: DownloadFailedError (ENOTFOUND|EAI_AGAIN),/);
    },
    120_000,
  );

  it("politely crawl --events writes the throttling events as JSON Lines", async () => {
    const s = await okServer();
    const dir = tempDir();
    writeFileSync(join(dir, "urls.txt"), `${s.origin}/e\n`);
    const run = await politely([
      "crawl",
      join(dir, "urls.txt"),
      "--events",
      join(dir, "ev.jsonl"),
      "--quiet",
    ]);
    expect(run.code).toBe(0);
    const types = readLines(join(dir, "ev.jsonl")).map((e) => e.type);
    expect(types).toContain("request-sent");
    expect(types).toContain("request-done");
  }, 120_000);

  it(
    "politely crawl exits 2 with one line naming an unknown setting and suggesting the right one",
    async () => {
      const run = await politely(["crawl", "-", "--set", "DOWNLOAD_DELAYY=1"]);
      expect(run.code).toBe(2);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
      expect(run.stderr).toContain("'DOWNLOAD_DELAYY'");
      expect(run.stderr).toContain("did you mean 'DOWNLOAD_DELAY'");
    },
    120_000,
  );

  it(
    "politely crawl runs a Scrapy settings file with plugin settings, saying once which it ignored",
    async () => {
      const s = await okServer();
      const dir = tempDir();
      writeFileSync(
        join(dir, "settings.json"),
        JSON.stringify({
          BOT_NAME: "books",
          ITEM_PIPELINES: { "books.pipelines.Save": 300 },
          SPIDER_MIDDLEWARES: { "scrapy_poet.RetryMiddleware": 275 },
          ZYTE_API_KEY: "secret-key",
          ZYTE_API_TRANSPARENT_MODE: true,
          DOWNLOAD_DELAY: 0,
        }),
      );
      const run = await politely(
        ["crawl", "-", "--settings", join(dir, "settings.json"), "--quiet"],
        { stdin: `${s.origin}/a\n` },
      );
      expect(run.code).toBe(0);
      expect(run.stdout).toContain("politely: 1 request ended");
      expect(run.stderr.trim().split("\n")).toEqual([
        "politely: warning: Ignored Scrapy settings that politely has no use for: BOT_NAME, ITEM_PIPELINES, SPIDER_MIDDLEWARES",
        "politely: warning: Ignored settings that neither politely nor Scrapy knows (a Scrapy plugin's?): ZYTE_API_KEY, ZYTE_API_TRANSPARENT_MODE",
      ]);
    },
    120_000,
  );

  it("politely crawl exits 2 with one line for a negative delay in a settings file", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "s.json"), JSON.stringify({ DOWNLOAD_DELAY: -1 }));
    const run = await politely(["crawl", "-", "--settings", join(dir, "s.json")]);
    expect(run.code).toBe(2);
    expect(run.stderr.trim()).toBe(
      "politely: Cannot create throttler as 'DOWNLOAD_DELAY' must be >= 0: current value is -1",
    );
  }, 120_000);

  it("politely crawl exits 2 with one line for a missing input file", async () => {
    const dir = tempDir();
    const missing = await politely(["crawl", join(dir, "nope.txt")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim()).toBe(
      `politely: Cannot read input '${join(dir, "nope.txt")}': no such file or directory`,
    );
  }, 120_000);

  it(
    "politely --help, -h, crawl --help and demo -h print usage on stdout and exit 0",
    async () => {
      const runs = await Promise.all([
        politely(["--help"]),
        politely(["-h"]),
        politely(["crawl", "--help"]),
        politely(["demo", "-h"]),
      ]);
      for (const run of runs) {
        expect(run.code).toBe(0);
        expect(run.stderr).toBe("");
      }
      const [overview, short, crawl, demo] = runs.map((r) => r.stdout);
      expect(overview).toContain("Options of crawl:");
      expect(overview).toContain("Options of demo:");
      expect(short).toBe(overview);
      expect(crawl).toMatch(/^Usage: politely crawl \[FILE\|-\] \[options\]\n/);
      expect(crawl).toContain("--jobdir DIR");
      expect(crawl).not.toContain("--duration");
      expect(demo).toMatch(/^Usage: politely demo \[options\]\n/);
      expect(demo).toContain("--duration SECONDS");
      expect(demo).not.toContain("--jobdir");
    },
    60_000,
  );

  it("politely crawl exits 2 naming the flag a misspelled one was meant to be", async () => {
    const run = await politely(["crawl", "-", "--outptu", "out.jsonl"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("politely: unknown option --outptu (did you mean --output?)\n");
  }, 120_000);

  it(
    "politely crawl exits 2 with one line for an unwritable output and for a bad flag",
    async () => {
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), "http://127.0.0.1:9/\n");
      const unwritable = await politely([
        "crawl",
        join(dir, "urls.txt"),
        "--output",
        join(dir, "no/such/dir/out.jsonl"),
      ]);
      expect(unwritable.code).toBe(2);
      expect(unwritable.stderr.trim().split("\n")).toHaveLength(1);
      expect(unwritable.stderr).toContain("Cannot write output");
      const flag = await politely(["crawl", "--nope"]);
      expect(flag.code).toBe(2);
      expect(flag.stderr.trim().split("\n")).toHaveLength(1);
      expect(flag.stderr).toContain("--nope");
    },
    120_000,
  );

  it(
    "politely crawl stops cleanly on SIGINT and a second run resumes from the job directory",
    async () => {
      const { s, dir, args, first, release } = await stoppedJobCrawl("SIGINT");
      // Deno's child_process reports a child that handled SIGINT and exited
      // 130 as ended by the signal (code null); the output below shows it
      // stopped cleanly all the same.
      expect("Deno" in globalThis ? [130, null] : [130]).toContain(first.code);
      expect(first.stderr).toContain("resume");
      // One request at a time: the one the server holds is the download Ctrl-C aborts.
      expect(first.stdout).toMatch(
        /stopped by Ctrl-C: 1 download in flight aborted, [1-7] requests? not ended \(they stay pending in .*job: run again to resume\)/,
      );
      const done = readLines(join(dir, "first.jsonl"));
      expect(done.every((l) => l.status === 200)).toBe(true);
      const firstPaths = new Set(done.map((l) => new URL(l.url as string).pathname));
      expect(firstPaths.size).toBeGreaterThan(0);
      release();
      const before = s.arrivals.length;
      const second = await politely([...args, "--output", join(dir, "second.jsonl")]);
      expect(second.code).toBe(0);
      const resumed = readLines(join(dir, "second.jsonl")).map((l) =>
        new URL(l.url as string).pathname
      );
      // Every request ended exactly once across the two runs; nothing completed was sent again.
      expect([...firstPaths, ...resumed].sort()).toEqual([
        "/1",
        "/2",
        "/3",
        "/4",
        "/5",
        "/6",
        "/7",
        "/8",
      ]);
      const again = s.arrivals.slice(before).map((a) => a.path);
      for (const p of firstPaths) expect(again).not.toContain(p);
    },
    120_000,
  );
  it(
    "politely crawl stops cleanly on SIGTERM: output flushed, job directory compacted, exit 143, a resume sends the rest",
    async () => {
      const { s, dir, args, first, release } = await stoppedJobCrawl("SIGTERM");
      // Deno reports a child that handled the signal and exited as ended by it (code null).
      expect("Deno" in globalThis ? [143, null] : [143], first.stderr).toContain(first.code);
      expect(first.stderr).toContain("stopping on SIGTERM");
      expect(first.stderr).toContain("resume");
      expect(first.stderr).not.toMatch(/\n\s+at /);
      expect(first.stdout).toMatch(/stopped by SIGTERM: 1 download in flight aborted/);
      // Flushed: the three answered requests are on disk.
      const done = readLines(join(dir, "first.jsonl"));
      expect(done.map((l) => new URL(l.url as string).pathname)).toEqual(["/1", "/2", "/3"]);
      // Compacted at the stop: the log holds the 5 pending requests and no completion records.
      const records = readFileSync(join(dir, "job", "requests.log"), "utf8").split("\n")
        .filter((l) => l !== "").map((l) => JSON.parse(l.slice(9)) as unknown[]);
      expect(existsSync(join(dir, "job", "requests.log.tmp"))).toBe(false);
      expect(records.filter((r) => r[0] === "E")).toHaveLength(5);
      expect(records.filter((r) => r[0] === "C")).toHaveLength(0);
      release();
      const before = s.arrivals.length;
      const second = await politely([...args, "--output", join(dir, "second.jsonl")]);
      expect(second.code).toBe(0);
      expect(s.arrivals.slice(before).map((a) => a.path).filter((p) => p !== "/robots.txt").sort())
        .toEqual(["/4", "/5", "/6", "/7", "/8"]);
    },
    60_000,
  );

  it(
    "politely crawl ends quietly with exit 141 when its stdout is closed (| head -2)",
    async () => {
      // Every answer a 503: each is a backoff line in the plain log, so the
      // crawl keeps writing to stdout after the reader has gone.
      server = await startRecordingServer((_req, res) => {
        res.writeHead(503, { connection: "close" });
        res.end("busy");
      });
      const s = server;
      const dir = tempDir();
      writeFileSync(
        join(dir, "urls.txt"),
        Array.from({ length: 300 }, (_, i) => `${s.origin}/${i + 1}`).join("\n"),
      );
      const run = await politely([
        "crawl",
        join(dir, "urls.txt"),
        "--plain",
        "--output",
        join(dir, "out.jsonl"),
        "--jobdir",
        join(dir, "job"),
        "--set",
        "BACKOFF_MIN_DELAY=0.02",
        "--set",
        "BACKOFF_MAX_DELAY=0.05",
        "--set",
        "RETRY_TIMES=0",
      ], { closeStdoutAfterLines: 2 });
      expect(run.stdout.split("\n")).toHaveLength(2);
      expect("Deno" in globalThis ? [141, null] : [141], run.stderr).toContain(run.code);
      // Quiet: no stack trace, no EPIPE, nothing at all.
      expect(run.stderr).toBe("");
      // Stopped before the end, and what ended is on disk, whole.
      const done = readLines(join(dir, "out.jsonl"));
      expect(done.length).toBeLessThan(300);
      expect(existsSync(join(dir, "job", "requests.log.tmp"))).toBe(false);
    },
    60_000,
  );
  it.skipIf(!existsSync("/dev/full"))(
    "politely crawl --output on a full disk (/dev/full) exits 2 with one line naming the file, and a resume sends every request",
    async () => {
      const s = await okServer();
      const dir = tempDir();
      writeFileSync(
        join(dir, "urls.txt"),
        Array.from({ length: 5 }, (_, i) => `${s.origin}/${i + 1}`).join("\n"),
      );
      const args = ["crawl", join(dir, "urls.txt"), "--jobdir", join(dir, "job"), "--quiet"];
      const full = await politely([...args, "--output", "/dev/full"]);
      expect(full.code).toBe(2);
      // One line naming the file and the error (Node says ENOSPC, Deno "os error 28").
      expect(full.stderr).toMatch(
        /^politely: Cannot write output '\/dev\/full': .*(ENOSPC|No space left on device).*\n$/,
      );
      expect(full.stderr.trim().split("\n")).toHaveLength(1);
      expect(existsSync(join(dir, "job", "requests.log.tmp"))).toBe(false);
      const again = await politely([...args, "--output", join(dir, "out.jsonl")]);
      expect(again.code).toBe(0);
      // The first line never reached the disk, so no request was marked done.
      expect(readLines(join(dir, "out.jsonl")).map((l) => new URL(l.url as string).pathname).sort())
        .toEqual(["/1", "/2", "/3", "/4", "/5"]);
    },
    60_000,
  );
  it(
    "politely crawl ends a body over DOWNLOAD_MAXSIZE as a ResponseTooLargeError outcome and warns past DOWNLOAD_WARNSIZE",
    async () => {
      server = await startRecordingServer((req, res) => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("x".repeat(req.url === "/big" ? 50_000 : 5_000));
      });
      const s = server;
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), `${s.origin}/big\n${s.origin}/small\n`);
      const run = await politely([
        "crawl",
        join(dir, "urls.txt"),
        "--plain",
        "--output",
        join(dir, "out.jsonl"),
        "--set",
        "DOWNLOAD_MAXSIZE=20000",
        "--set",
        "DOWNLOAD_WARNSIZE=1000",
      ]);
      expect(run.code).toBe(0);
      const out = readLines(join(dir, "out.jsonl"));
      const big = out.find((l) => (l.url as string).endsWith("/big"));
      const small = out.find((l) => (l.url as string).endsWith("/small"));
      expect(big?.error).toMatch(
        /^ResponseTooLargeError: Response body of .*\/big .* over the limit of 20000 bytes/,
      );
      expect(big?.attempts).toBe(1); // not retried: the same body would come again
      expect(small?.status).toBe(200);
      expect(run.stdout).toContain("over the warning size of 1000 bytes (DOWNLOAD_WARNSIZE)");
    },
    120_000,
  );
  it(
    "politely crawl does not mark URLs done when robots.txt is unreachable: exit 3, and a resume sends them",
    async () => {
      let robotsDown = true;
      server = await startRecordingServer((req, res) => {
        if (req.url === "/robots.txt") {
          res.writeHead(robotsDown ? 503 : 200, { connection: "close" });
          res.end(robotsDown ? "busy" : "User-agent: *\nDisallow: /private\n");
          return;
        }
        res.writeHead(200, { connection: "close" });
        res.end("ok");
      });
      const s = server;
      const dir = tempDir();
      writeFileSync(
        join(dir, "urls.txt"),
        ["/a", "/b", "/private/c"].map((p) => `${s.origin}${p}`).join("\n"),
      );
      const args = [
        "crawl",
        join(dir, "urls.txt"),
        "--jobdir",
        join(dir, "job"),
        "--quiet",
        "--set",
        "ROBOTSTXT_OBEY=True",
        "--set",
        "robotsTxtRetries=1",
        "--set",
        "robotsTxtRetryMs=200",
      ];
      const first = await politely([...args, "--output", join(dir, "first.jsonl")]);
      expect(first.code).toBe(3);
      expect(first.stderr).toContain("3 requests were not sent");
      expect(first.stderr).toContain("run the same command again");
      // robots.txt asked again (at least once more after 200 ms); no page was sent.
      const asked = s.arrivals.map((a) => a.path);
      expect(asked.length).toBeGreaterThanOrEqual(2);
      expect(new Set(asked)).toEqual(new Set(["/robots.txt"]));
      for (const line of readLines(join(dir, "first.jsonl"))) {
        expect(line.error).toMatch(/^RobotsTxtDisallowedError: .*unreachable \(status 503\)/);
      }
      robotsDown = false;
      const second = await politely([...args, "--output", join(dir, "second.jsonl")]);
      expect(second.code).toBe(0);
      const byPath = Object.fromEntries(
        readLines(join(dir, "second.jsonl")).map((l) => [
          new URL(l.url as string).pathname,
          l.status ?? l.error,
        ]),
      );
      expect(byPath["/a"]).toBe(200);
      expect(byPath["/b"]).toBe(200);
      expect(byPath["/private/c"]).toMatch(/^RobotsTxtDisallowedError: .*robots.txt disallows it/);
    },
    60_000,
  );
});
