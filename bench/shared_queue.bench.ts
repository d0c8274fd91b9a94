/**
 * The request queue shared through Redis (issue 15): pages/s of 1, 2 and 4
 * workers (each its own `node --import tsx` process with its own throttler,
 * `crawl()` and `RedisRequestQueue` on one job) against `--sites` loopback
 * sites whose pages take `--latency-ms` (100) to answer, with per-site limits
 * that let every worker send (the work is bound by latency, not by this
 * machine's two cores); Redis commands and script calls per page; then Redis
 * memory per queued request and per seen URL (INFO used_memory around
 * `--memory-urls` enqueued, then all taken and acknowledged).
 *
 * Run: `npx tsx bench/shared_queue.bench.ts [--pages 2400] [--workers 1,2,4] [--sites 16] [--latency-ms 100] [--concurrency 8] [--memory-urls 200000]`.
 *
 * `--limits-only`: the same crawl with the shared limits alone (today's
 * library API before the shared queue): each worker crawls its own share of
 * the pages through `throttleByScope` with `sharedDownload` and
 * `createRedisScopes` (per-site limits counted in Redis), no shared queue;
 * Redis commands and script calls per page read from the server's own
 * counters (`INFO commandstats`), no memory part.
 *
 * @module
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { createClient } from "redis";
import { lastValueFrom, toArray } from "rxjs";
import {
  argValue,
  fmtFixed,
  fmtInt,
  isMain,
  machine,
  markdownTable,
  reportToParent,
  runChild,
} from "./_harness.ts";
import { from } from "rxjs";
import { crawl } from "../lib/crawl.ts";
import { createRedisScopes } from "../lib/redis/redis_scopes.ts";
import { sharedDownload } from "../lib/redis/shared_download.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { RedisRequestQueue } from "../lib/redis/redis_request_queue.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";

const PORT = Number(process.env.REDIS_PORT ?? 6390);
const FILE = new URL(import.meta.url).pathname;

interface ChildResult {
  readonly pages: number;
  readonly commands: number;
  readonly scripts: number;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly cpuMs: number;
}

/** What every worker process starts from: its arguments, a Redis client and its throttler. */
async function workerSetup(argv: readonly string[]) {
  const concurrency = Number(argValue(argv, "concurrency"));
  const client = createClient({ socket: { host: "127.0.0.1", port: PORT } });
  client.on("error", () => {});
  await client.connect();
  return {
    prefix: argValue(argv, "prefix")!,
    origins: argValue(argv, "origins")!.split(","),
    pages: Number(argValue(argv, "pages")),
    startAt: Number(argValue(argv, "start")),
    client,
    throttler: createThrottler<string>({
      adaptive: false,
      concurrentRequests: concurrency,
      concurrentRequestsPerDomain: concurrency,
      downloadDelayMs: 0,
    }),
  };
}

/** Waits for the common start, then times `run`, which resolves with the pages crawled (wall clock and this process's CPU). */
async function timedCrawl(
  startAt: number,
  run: () => Promise<number>,
): Promise<Pick<ChildResult, "pages" | "startedAt" | "endedAt" | "cpuMs">> {
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
  const startedAt = Date.now();
  const cpu0 = process.cpuUsage();
  const pages = await run();
  const endedAt = Date.now();
  const cpu = process.cpuUsage(cpu0);
  return { pages, startedAt, endedAt, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** `--limits-only`: this worker's share of the pages through the shared limits alone. */
async function limitsChild(argv: readonly string[]): Promise<void> {
  const { prefix, origins, pages, startAt, client, throttler } = await workerSetup(argv);
  const index = Number(argValue(argv, "index"));
  const workers = Number(argValue(argv, "workers"));
  const shared = await createRedisScopes(client, { prefix, processId: `worker-${index}` });
  const urls: string[] = [];
  for (let i = index; i < pages; i += workers) urls.push(`${origins[i % origins.length]}/p${i}`);
  const timed = await timedCrawl(startAt, async () => {
    const outcomes = await lastValueFrom(
      from(urls).pipe(
        throttleByScope(
          throttler,
          sharedDownload(
            shared,
            throttler,
            (url: string, { signal }) => fetch(url, { signal }).then((r) => r.text()),
          ),
        ),
        toArray(),
      ),
    );
    return outcomes.filter((o) => o.kind === "response").length;
  });
  await shared.close();
  reportToParent({ ...timed, commands: 0, scripts: 0 } satisfies ChildResult);
  await client.close();
}

/** Commands and script calls the Redis server has run so far (its own counters). */
async function serverCounts(
  admin: { info(section: string): Promise<string> },
): Promise<{ commands: number; scripts: number }> {
  const info = await admin.info("commandstats");
  let commands = 0;
  let scripts = 0;
  for (const m of info.matchAll(/^cmdstat_([a-z|_-]+):calls=(\d+)/gm)) {
    if (m[1] === "info") continue;
    commands += Number(m[2]);
    if (m[1] === "evalsha" || m[1] === "eval" || m[1] === "fcall") scripts += Number(m[2]);
  }
  return { commands, scripts };
}

async function child(argv: readonly string[]): Promise<void> {
  const { prefix, origins, pages, startAt, client, throttler } = await workerSetup(argv);
  const seed = argValue(argv, "seed") === "1";
  let commands = 0;
  let scripts = 0;
  const counted = {
    sendCommand: (args: readonly string[]) => {
      commands++;
      if (args[0] === "EVALSHA" || args[0] === "EVAL") scripts++;
      return client.sendCommand([...args]);
    },
  };
  const urls = Array.from({ length: pages }, (_, i) => `${origins[i % origins.length]}/p${i}`);
  const queue = new RedisRequestQueue<string>(counted, {
    prefix,
    view: throttler,
    awaitJob: true,
    ...(seed ? { start: urls } : {}),
  });
  const timed = await timedCrawl(startAt, async () => {
    const outcomes = await lastValueFrom(
      crawl({
        throttler,
        queue,
        download: (url, { signal }) => fetch(url, { signal }).then((r) => r.text()),
        backoff: false,
      }).pipe(toArray()),
    );
    return outcomes.length;
  });
  await queue.close();
  reportToParent({ ...timed, commands, scripts } satisfies ChildResult);
  await client.close();
}

/** `n` loopback sites answering every page after `latencyMs`. */
async function sites(n: number, latencyMs: number): Promise<{ origins: string[]; close(): void }> {
  const servers: Server[] = [];
  for (let i = 0; i < n; i++) {
    const server = createServer((_req, res) => {
      setTimeout(() => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("page");
      }, latencyMs);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push(server);
  }
  return {
    origins: servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`),
    close: () => {
      for (const s of servers) {
        s.close();
        s.closeAllConnections();
      }
    },
  };
}

async function usedMemory(admin: { info(section: string): Promise<string> }): Promise<number> {
  const info = await admin.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

async function parent(argv: readonly string[]): Promise<void> {
  const pages = Number(argValue(argv, "pages") ?? 2400);
  const workers = (argValue(argv, "workers") ?? "1,2,4").split(",").map(Number);
  const siteCount = Number(argValue(argv, "sites") ?? 16);
  const latencyMs = Number(argValue(argv, "latency-ms") ?? 100);
  const memoryUrls = Number(argValue(argv, "memory-urls") ?? 200_000);
  // Per worker, in all and per site: low enough that 4 workers stay under what
  // this machine's loopback HTTP carries (about 600 pages/s on 2 cores).
  const concurrency = Number(argValue(argv, "concurrency") ?? 8);
  const admin = createClient({ socket: { host: "127.0.0.1", port: PORT } });
  await admin.connect();
  const site = await sites(siteCount, latencyMs);
  const limitsOnly = argv.includes("--limits-only");
  const rows: string[][] = [];
  let onePerSecond = 0;
  for (const n of workers) {
    const prefix = `bench:${crypto.randomUUID()}:`;
    const start = Date.now() + 2_000 + 1_000 * n;
    const counted = await serverCounts(admin);
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        runChild<ChildResult>(FILE, [
          limitsOnly ? "--limits-child" : "--child",
          "--prefix",
          prefix,
          "--origins",
          site.origins.join(","),
          "--pages",
          String(pages),
          "--seed",
          i === 0 ? "1" : "0",
          "--index",
          String(i),
          "--workers",
          String(n),
          "--start",
          String(start),
          "--concurrency",
          String(concurrency),
        ])),
    );
    if (limitsOnly) {
      // The workers' commands, by the server's count (less this count's own INFO).
      const after = await serverCounts(admin);
      results[0] = {
        ...results[0]!,
        commands: after.commands - counted.commands,
        scripts: after.scripts - counted.scripts,
      };
    }
    const keys = await admin.keys(`{${prefix}}*`);
    if (keys.length > 0) await admin.del(keys);
    const total = results.reduce((s, r) => s + r.pages, 0);
    const seconds = (Math.max(...results.map((r) => r.endedAt)) -
      Math.min(...results.map((r) => r.startedAt))) / 1000;
    const perSecond = total / seconds;
    if (n === 1) onePerSecond = perSecond;
    rows.push([
      String(n),
      fmtInt(total),
      fmtInt(perSecond),
      onePerSecond > 0 ? `${fmtFixed(perSecond / onePerSecond, 1)}x` : "",
      fmtFixed(results.reduce((s, r) => s + r.commands, 0) / total),
      fmtFixed(results.reduce((s, r) => s + r.scripts, 0) / total),
      fmtInt((results.reduce((s, r) => s + r.cpuMs, 0) * 1000) / total),
      `${fmtFixed(results.reduce((s, r) => s + r.cpuMs, 0) / 1000 / seconds, 2)}`,
    ]);
    console.error(`${n} workers: ${rows.at(-1)!.join(" | ")}`);
  }
  site.close();
  if (limitsOnly) {
    console.log(
      `### Shared limits alone: ${
        fmtInt(pages)
      } pages over ${siteCount} loopback sites answering in ${latencyMs} ms, ${concurrency} at once per worker (in all and per site, the per-site limit shared), each worker its own share of the pages\n`,
    );
    console.log(markdownTable(
      [
        "workers",
        "pages",
        "pages/s",
        "vs 1",
        "Redis commands run / page (inside scripts too)",
        "script calls / page",
        "worker CPU us / page",
        "worker cores busy",
      ],
      rows,
    ));
    await admin.close();
    console.log(`\n${machine()}, Redis on 127.0.0.1:${PORT}`);
    return;
  }
  console.log(
    `### Shared request queue: ${
      fmtInt(pages)
    } pages over ${siteCount} loopback sites answering in ${latencyMs} ms, ${concurrency} at once per worker (in all and per site)\n`,
  );
  console.log(markdownTable(
    [
      "workers",
      "pages",
      "pages/s",
      "vs 1",
      "Redis commands / page",
      "script calls / page",
      "worker CPU us / page",
      "worker cores busy",
    ],
    rows,
  ));

  // Memory: URLs like a crawl's (host of 100, a path), as the command line queues them.
  const prefix = `bench:${crypto.randomUUID()}:`;
  const client = await createClient({ socket: { host: "127.0.0.1", port: PORT } }).connect();
  const queue = new RedisRequestQueue<{ url: string; meta: { depth: number } }>(client, {
    prefix,
  });
  const before = await usedMemory(admin);
  for (let i = 0; i < memoryUrls; i++) {
    queue.enqueue({
      url: `https://site${i % 100}.example.com/articles/${i}/some-title-of-the-page`,
      meta: { depth: 2 },
    });
  }
  await queue.close();
  const queued = await usedMemory(admin);
  const taker = new RedisRequestQueue<{ url: string }>(client, { prefix, maxTake: 64 });
  await new Promise<void>((resolve, reject) =>
    taker.requests$.subscribe({
      next: (r) => taker.markDone(r),
      error: reject,
      complete: resolve,
    })
  );
  await taker.close();
  const done = await usedMemory(admin);
  const keys = await admin.keys(`{${prefix}}*`);
  if (keys.length > 0) await admin.del(keys);
  console.log(
    `\n### Redis memory of the shared queue (${fmtInt(memoryUrls)} URLs of about 60 characters)\n`,
  );
  console.log(markdownTable(
    ["what", "bytes each"],
    [
      [
        "queued request (record, scope-set entry, seen fingerprint)",
        fmtInt((queued - before) / memoryUrls),
      ],
      ["seen URL once done (its fingerprint)", fmtInt((done - before) / memoryUrls)],
    ],
  ));
  await client.close();
  await admin.close();
  console.log(`\n${machine()}, Redis on 127.0.0.1:${PORT}`);
}

if (isMain(import.meta)) {
  const argv = process.argv.slice(2);
  await (argv.includes("--child")
    ? child(argv)
    : argv.includes("--limits-child")
    ? limitsChild(argv)
    : parent(argv));
}
