/**
 * One crawl job, three workers (three throttlers, three Redis connections,
 * here in one process for the demo) sharing one request queue through Redis:
 * the first seeds the job with a start page, links found by any worker go
 * into the job, every page is fetched once, and every worker ends when the
 * job is finished. Runs against its own loopback site and the Redis on
 * 127.0.0.1:$REDIS_PORT (6390).
 * Run with `npx tsx examples/redis_shared_queue.ts` (or deno run -A, bun run).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { createClient } from "redis";
import { lastValueFrom, merge, toArray } from "rxjs";
import { crawl, createThrottler, readRedisQueueStatus, RedisRequestQueue } from "../mod.ts";

/** What the run saw. */
export interface SharedQueueRun {
  /** Pages the site served (each page once: 31). */
  readonly served: number;
  /** Distinct pages among them. */
  readonly distinct: number;
  /** Pages each worker fetched. */
  readonly perWorker: readonly number[];
  /** The job's counts at the end. */
  readonly done: number;
}

/** Runs the example. */
export async function main(log: (line: string) => void = console.log): Promise<SharedQueueRun> {
  // A binary tree of 31 pages: /p0 links to /p1 and /p2, and so on.
  const paths: string[] = [];
  const server = createServer((req, res) => {
    const n = Number(req.url?.slice(2));
    paths.push(req.url ?? "");
    setTimeout(() => {
      const links = [2 * n + 1, 2 * n + 2].filter((k) => k < 31).map((k) => `/p${k}`);
      res.writeHead(200, { "content-type": "text/plain" }).end(links.join("\n"));
    }, 50);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const port = Number(process.env.REDIS_PORT ?? 6390);
  const prefix = `example:${crypto.randomUUID()}:`;
  const clients = [0, 1, 2].map(() =>
    createClient({ socket: { host: "127.0.0.1", port, reconnectStrategy: false } })
  );
  try {
    for (const client of clients) {
      client.on("error", () => {});
      await client.connect();
    }
    const perWorker = [0, 0, 0];
    const workers = clients.map((client, i) => {
      const throttler = createThrottler<string>({ concurrentRequestsPerDomain: 2 });
      const queue = new RedisRequestQueue<string>(client, {
        prefix,
        view: throttler, // a site this worker holds back is left to the others
        awaitJob: true, // the workers without start requests wait for the job
        ...(i === 0 ? { start: [`${origin}/p0`] } : {}),
      });
      const run = crawl({
        throttler,
        queue,
        download: async (url: string) => {
          perWorker[i]!++;
          return await (await fetch(url)).text();
        },
        // The links of a page go into the job, before the page is acknowledged.
        discover: (o) =>
          o.kind === "response"
            ? o.response.split("\n").filter((p) => p !== "").map((p) => `${origin}${p}`)
            : [],
      });
      return { queue, run };
    });
    await lastValueFrom(merge(...workers.map((w) => w.run)).pipe(toArray()));
    for (const w of workers) await w.queue.close();
    const status = await readRedisQueueStatus(clients[0]!, prefix);
    log(`${paths.length} pages served (${new Set(paths).size} distinct), per worker: ${perWorker}`);
    log(`the job: ${status.done} done, ${status.queued} queued, ${status.leased} leased`);
    const keys = await clients[0]!.keys(`{${prefix}}*`);
    if (keys.length > 0) await clients[0]!.del(keys);
    return {
      served: paths.length,
      distinct: new Set(paths).size,
      perWorker,
      done: status.done,
    };
  } finally {
    for (const client of clients) if (client.isOpen) await client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  const run = await main();
  if (run.served !== 31 || run.distinct !== 31 || run.done !== 31) {
    console.error("the workers did not crawl every page once");
    process.exit(1);
  }
}
