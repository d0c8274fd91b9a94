import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type RecordingServer, startRecordingServer } from "./_helpers/loopback_server.ts";
import { politely, readLines, tempDir } from "./_helpers/politely_cli.ts";
import { connectRedis, onCleanup, REDIS_PORT, runCleanups } from "./_helpers/redis.ts";
import { waitFor } from "./_helpers/wait_for.ts";
import { parseCliArgs } from "../lib/cli/args.ts";
import { startOwnRedis, startRedisServer } from "./_helpers/own_redis.ts";

/** Hang limit of each test (real I/O; no timing is asserted). */
const HANG_MS = 180_000;

const REDIS = `redis://127.0.0.1:${REDIS_PORT}`;
const servers: RecordingServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
  await runCleanups();
});

/** One fetch as the site saw it: which page, which worker (its User-Agent), and whether it was answered. */
interface Fetch {
  readonly path: string;
  readonly worker: string;
  answered: boolean;
}

/**
 * A site of `count` linked HTML pages `/p0`... (page i links to 2i+1, 2i+2
 * and back to page 0), each answered after `latencyMs`; every fetch recorded.
 */
async function treeSite(
  count: number,
  latencyMs: number,
  /** The first page's latency (the seed): workers started with it have time to join. */
  firstMs = latencyMs,
) {
  const fetches: Fetch[] = [];
  const s = await startRecordingServer((req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? "";
    if (path === "/robots.txt") {
      res.writeHead(404, { connection: "close" });
      res.end();
      return;
    }
    const n = Number(path.slice(2));
    const fetch: Fetch = { path, worker: String(req.headers["user-agent"]), answered: false };
    fetches.push(fetch);
    const timer = setTimeout(() => {
      if (!(path.startsWith("/p") && n >= 0 && n < count)) {
        res.writeHead(404, { "content-type": "text/html", connection: "close" });
        res.end("<p>no</p>");
        return;
      }
      const links = [2 * n + 1, 2 * n + 2, 0].filter((k) => k < count)
        .map((k) => `<a href="/p${k}">p${k}</a>`).join(" ");
      res.writeHead(200, { "content-type": "text/html", connection: "close" });
      res.end(`<html><body>${links}</body></html>`, () => fetch.answered = true);
    }, path === "/p0" ? firstMs : latencyMs);
    res.on("close", () => clearTimeout(timer));
  });
  servers.push(s);
  const pages = Array.from({ length: count }, (_, i) => `/p${i}`);
  return { origin: s.origin, fetches, pages };
}

/** A fresh job prefix; its keys go at clean-up. */
async function freshJob() {
  const prefix = `test:${crypto.randomUUID()}:`;
  const admin = await connectRedis();
  onCleanup(async () => {
    const keys = [...await admin.keys(`{${prefix}}*`), ...await admin.keys(`${prefix}*`)];
    if (keys.length > 0) await admin.del(keys);
  });
  return { prefix, admin };
}

/** The arguments of a worker of the job; `input` seeds it. */
function workerArgs(
  prefix: string,
  name: string,
  dir: string,
  input?: string,
  redis = REDIS,
): string[] {
  return [
    "crawl",
    ...(input !== undefined ? [input] : []),
    "--redis",
    redis,
    "--redis-prefix",
    prefix,
    "--redis-lease",
    "3",
    "--shared-queue",
    "--follow",
    "--plain",
    "--output",
    join(dir, `${name}.jsonl`),
    "--set",
    `USER_AGENT=${name}`,
    "--set",
    "CONCURRENT_REQUESTS_PER_DOMAIN=2",
  ];
}

/** Paths fetched more than once, with their counts. */
function twice(fetches: readonly Fetch[]): Map<string, number> {
  const n = new Map<string, number>();
  for (const f of fetches) n.set(f.path, (n.get(f.path) ?? 0) + 1);
  return new Map([...n].filter(([, c]) => c > 1));
}

/** The URLs of the requests queued or leased in the job (records of its `req` hash). */
async function unfinishedUrls(admin: Awaited<ReturnType<typeof connectRedis>>, prefix: string) {
  const records = await admin.hVals(`{${prefix}}q:req`);
  return records.map((r) => (JSON.parse(r) as [string, string, ["O", { url: string }]])[2][1].url);
}

describe("politely crawl --shared-queue", () => {
  it(
    "parseCliArgs() reads --shared-queue: FILE seeds, no FILE joins; --jobdir refused, --max-pages counts the job's",
    () => {
      const seed = parseCliArgs(["crawl", "u.txt", "--redis", REDIS, "--shared-queue"]);
      expect(seed).toMatchObject({ input: "u.txt", sharedQueue: true });
      const join = parseCliArgs(["crawl", "--redis", REDIS, "--shared-queue"]);
      expect(join).toMatchObject({ input: undefined, sharedQueue: true });
      expect(parseCliArgs(["crawl"])).toMatchObject({ input: "-", sharedQueue: false });
      expect(() => parseCliArgs(["crawl", "--shared-queue"])).toThrow(
        /--shared-queue needs --redis/,
      );
      expect(() => parseCliArgs(["crawl", "--redis", REDIS, "--shared-queue", "--jobdir", "d"]))
        .toThrow(/--jobdir cannot be used with --shared-queue/);
      expect(
        parseCliArgs(["crawl", "--redis", REDIS, "--shared-queue", "--follow", "--max-pages", "3"]),
      ).toMatchObject({ sharedQueue: true, follow: { maxPages: 3 } });
      expect(() => parseCliArgs(["status"])).toThrow(/status needs --redis/);
    },
    HANG_MS,
  );

  it(
    "a seeding worker and a joining one crawl a linked site once between them, both exit 0; status says finished",
    async () => {
      // The seed page takes 3 s and the others 300 ms (7 s for one worker
      // alone): on a loaded machine the joiner's start can take seconds.
      const site = await treeSite(30, 300, 3_000);
      const { prefix } = await freshJob();
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), `${site.origin}/p0\n`);
      const [a, b] = await Promise.all([
        politely(workerArgs(prefix, "w1", dir, join(dir, "urls.txt"))),
        politely(workerArgs(prefix, "w2", dir)),
      ]);
      expect(a.code, a.stderr).toBe(0);
      expect(b.code, b.stderr).toBe(0);
      // Both took part: the joiner waited for the job rather than find it empty and leave.
      expect(readLines(join(dir, "w2.jsonl")).length).toBeGreaterThan(0);
      expect(readLines(join(dir, "w1.jsonl")).length).toBeGreaterThan(0);
      // Every page once: nobody was killed, no lease expired.
      expect(site.fetches.map((f) => f.path).sort()).toEqual([...site.pages].sort());
      const lines = [...readLines(join(dir, "w1.jsonl")), ...readLines(join(dir, "w2.jsonl"))];
      expect(lines.map((l) => new URL(String(l.url)).pathname).sort()).toEqual(
        [...site.pages].sort(),
      );
      const status = await politely(["status", "--redis", REDIS, "--redis-prefix", prefix]);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain("finished");
      expect(status.stdout).toContain("0 queued, 0 leased, 30 done, 0 failed");
      expect(status.stdout).toMatch(new RegExp(`127\\.0\\.0\\.1:\\d+ +0 +0 +30 +0`));
      const json = await politely(["status", "--redis", REDIS, "--redis-prefix", prefix, "--json"]);
      expect(JSON.parse(json.stdout)).toMatchObject({
        queued: 0,
        leased: 0,
        done: 30,
        finished: true,
      });
      // Seeding a finished job again adds nothing and exits 0 at once.
      const again = await politely(workerArgs(prefix, "w3", dir, join(dir, "urls.txt")));
      expect(again.code, again.stderr).toBe(0);
      expect(site.fetches.length).toBe(30);
    },
    HANG_MS,
  );

  it(
    "--max-pages with --shared-queue counts the whole job's requests: two workers on a linked site fetch exactly N pages between them",
    async () => {
      const site = await treeSite(30, 20);
      const { prefix } = await freshJob();
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), `${site.origin}/p0\n`);
      const max = ["--max-pages", "9"];
      const [a, b] = await Promise.all([
        politely([...workerArgs(prefix, "w1", dir, join(dir, "urls.txt")), ...max]),
        politely([...workerArgs(prefix, "w2", dir), ...max]),
      ]);
      expect(a.code, a.stderr).toBe(0);
      expect(b.code, b.stderr).toBe(0);
      // Nine distinct pages in all, each once, whoever found the links.
      const paths = site.fetches.map((f) => f.path);
      expect(paths).toHaveLength(9);
      expect(new Set(paths).size).toBe(9);
      const status = await politely(["status", "--redis", REDIS, "--redis-prefix", prefix]);
      expect(status.stdout).toContain("0 queued, 0 leased, 9 done, 0 failed");
      expect(status.stdout).toMatch(/\d+ dropped past --max-pages/);
    },
    HANG_MS,
  );

  it(
    "a worker killed with SIGKILL loses nothing: its leased pages go to the others, and only those are fetched twice",
    async () => {
      const site = await treeSite(40, 150);
      const { prefix, admin } = await freshJob();
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), `${site.origin}/p0\n`);
      let leasedAtKill: string[] | undefined;
      const killed = politely(workerArgs(prefix, "w1", dir, join(dir, "urls.txt")), {
        interruptWhen: () => site.fetches.filter((f) => f.worker === "w1").length >= 4,
        signal: "SIGKILL",
      }).then(async (run) => {
        // Right after the kill (leases last 3 s): what the job holds leased, the killed worker's among it.
        const leased = await admin.zRange(`{${prefix}}q:leases`, 0, -1);
        const records = leased.length === 0 ? [] : await admin.hmGet(`{${prefix}}q:req`, leased);
        leasedAtKill = records.flatMap((r) =>
          r === null ? [] : [
            new URL((JSON.parse(r) as [string, string, ["O", { url: string }]])[2][1].url).pathname,
          ]
        );
        return run;
      });
      const [k, b, c] = await Promise.all([
        killed,
        politely(workerArgs(prefix, "w2", dir)),
        politely(workerArgs(prefix, "w3", dir)),
      ]);
      expect(k.code).toBe(null); // killed
      expect(b.code, b.stderr).toBe(0);
      expect(c.code, c.stderr).toBe(0);
      // Every page fetched.
      expect([...new Set(site.fetches.map((f) => f.path))].sort()).toEqual([...site.pages].sort());
      // Fetched twice: only pages the killed worker fetched and held leased when it died.
      const dup = twice(site.fetches);
      for (const [path, n] of dup) {
        expect(n, path).toBe(2);
        expect(site.fetches.find((f) => f.path === path)?.worker, path).toBe("w1");
        expect(leasedAtKill, path).toContain(path);
      }
      expect(dup.size).toBeLessThanOrEqual(leasedAtKill!.length);
      console.log(
        `SIGKILL: ${site.fetches.length} fetches of ${site.pages.length} pages; ${dup.size} fetched twice; ${
          leasedAtKill!.length
        } leased at the kill`,
      );
      const status = await politely([
        "status",
        "--redis",
        REDIS,
        "--redis-prefix",
        prefix,
        "--json",
      ]);
      expect(JSON.parse(status.stdout)).toMatchObject({
        queued: 0,
        leased: 0,
        done: 40,
        finished: true,
      });
    },
    HANG_MS,
  );

  it(
    "every worker stopped, then started again: the job finishes, nothing lost, nothing finished fetched again",
    async () => {
      const site = await treeSite(40, 150);
      const { prefix, admin } = await freshJob();
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), `${site.origin}/p0\n`);
      const stopAt = 12;
      const first = await Promise.all([
        politely(workerArgs(prefix, "w1", dir, join(dir, "urls.txt")), {
          interruptWhen: () => site.fetches.length >= stopAt,
          signal: "SIGTERM",
        }),
        politely(workerArgs(prefix, "w2", dir), {
          interruptWhen: () => site.fetches.length >= stopAt,
          signal: "SIGTERM",
        }),
      ]);
      for (const run of first) {
        // Under Deno a child ended by SIGTERM may report no code (as cli_crawl's test says).
        expect("Deno" in globalThis ? [143, null] : [143], run.stderr).toContain(run.code);
        expect(run.stderr).toContain("stopping on SIGTERM");
      }
      const fetchedBefore = new Set(site.fetches.map((f) => f.path));
      const unfinished = new Set(
        (await unfinishedUrls(admin, prefix)).map((u) => new URL(u).pathname),
      );
      const status = JSON.parse(
        (await politely(["status", "--redis", REDIS, "--redis-prefix", prefix, "--json"])).stdout,
      ) as { leased: number; queued: number; done: number };
      // A clean stop gives back what was held.
      expect(status.leased).toBe(0);
      expect(status.queued).toBeGreaterThan(0);
      const finishedBefore = [...fetchedBefore].filter((p) => !unfinished.has(p));
      expect(finishedBefore.length).toBe(status.done);
      const mark = site.fetches.length;
      const second = await Promise.all([
        politely(workerArgs(prefix, "w3", dir, join(dir, "urls.txt"))),
        politely(workerArgs(prefix, "w4", dir)),
      ]);
      for (const run of second) expect(run.code, run.stderr).toBe(0);
      const fetchedAfter = site.fetches.slice(mark).map((f) => f.path);
      expect([...new Set(site.fetches.map((f) => f.path))].sort()).toEqual([...site.pages].sort());
      expect(fetchedAfter.filter((p) => finishedBefore.includes(p))).toEqual([]);
      console.log(
        `stop and restart: ${mark} fetches before the stop (${finishedBefore.length} finished), ${fetchedAfter.length} after`,
      );
    },
    HANG_MS,
  );

  it(
    "workers wait through a Redis killed and restarted with its data, say so on stderr, and finish the job: every page fetched",
    async () => {
      // The seed page takes a while, so the second worker joins before the
      // work is spread (a worker started while Redis was down exits 2 at
      // once, by design: see `openRedisOption`).
      const site = await treeSite(40, 100, 1_500);
      const data = mkdtempSync(join(tmpdir(), "politely-shared-aof-"));
      const own = await startOwnRedis(data);
      const port = own.port;
      let redis = own.server;
      onCleanup(() => redis.kill("SIGKILL"));
      const url = `redis://127.0.0.1:${port}`;
      const dir = tempDir();
      writeFileSync(join(dir, "urls.txt"), `${site.origin}/p0\n`);
      const runs = Promise.all([
        politely(workerArgs("job:", "w1", dir, join(dir, "urls.txt"), url)),
        politely(workerArgs("job:", "w2", dir, undefined, url)),
      ]);
      // Both at work before Redis goes: on a loaded machine the second
      // worker's start once came as Redis was killed ("Socket closed
      // unexpectedly", exit 2).
      await waitFor(() => {
        expect(site.fetches.length).toBeGreaterThanOrEqual(10);
        expect(new Set(site.fetches.map((f) => f.worker))).toEqual(new Set(["w1", "w2"]));
      });
      redis.kill("SIGKILL");
      await new Promise((r) => redis.once("exit", r));
      // Down for a moment; the workers go on asking.
      await new Promise((r) => setTimeout(r, 2000));
      redis = startRedisServer(port, data);
      const [a, b] = await runs;
      expect(a.code, a.stderr).toBe(0);
      expect(b.code, b.stderr).toBe(0);
      expect(a.stderr + b.stderr).toMatch(/politely: warning: Redis: /);
      expect([...new Set(site.fetches.map((f) => f.path))].sort()).toEqual([...site.pages].sort());
      const status = await politely(["status", "--redis", url, "--redis-prefix", "job:", "--json"]);
      expect(JSON.parse(status.stdout)).toMatchObject({
        queued: 0,
        leased: 0,
        done: 40,
        finished: true,
      });
      console.log(
        `Redis restart: ${site.fetches.length} fetches of ${site.pages.length} pages; ${
          twice(site.fetches).size
        } fetched twice`,
      );
    },
    HANG_MS,
  );
});
