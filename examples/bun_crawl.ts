/**
 * politely in a Bun script: the site is a `Bun.serve` server on loopback
 * that serves 2 requests at a time (80 ms each, `Bun.sleep`) and answers 503
 * with `Retry-After` as an HTTP-date beyond that. The crawl asks for 4 at a
 * time, backs off on the 503s (each held until the date), and streams one
 * JSON line per outcome into a file through `Bun.file(path).writer()`.
 *
 * Run with `npx bun examples/bun_crawl.ts`. Under Node or Deno it prints a
 * one-line note and exits 0.
 *
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { from, lastValueFrom, tap, toArray } from "rxjs";
import { backoffOn, createFetchDownload, createThrottler, throttleByScope } from "../mod.ts";

/** The few `Bun` APIs used here (the project is type-checked with Node's types). */
interface BunApi {
  serve(options: {
    hostname: string;
    port: number;
    fetch: (request: Request) => Response | Promise<Response>;
  }): { readonly port: number; stop(closeActiveConnections?: boolean): Promise<void> | void };
  sleep(ms: number): Promise<void>;
  file(path: string): {
    writer(): { write(chunk: string): number; end(): number | Promise<number> };
    text(): Promise<string>;
  };
}

const Bun = (globalThis as { Bun?: BunApi }).Bun;

/** What the crawl saw. */
export interface BunCrawlSummary {
  /** Final status of each page. */
  readonly statuses: readonly number[];
  /** 503s the server answered. */
  readonly refused: number;
  /** The most requests the server had in flight at once (refused ones included). */
  readonly maxInFlight: number;
  /** Lines written to the outcomes file. */
  readonly lines: number;
}

/** Runs the example (under Bun only); resolves with what it saw. */
export async function main(
  log: (line: string) => void = console.log,
): Promise<BunCrawlSummary | undefined> {
  if (Bun === undefined) {
    log("examples/bun_crawl.ts needs Bun: npx bun examples/bun_crawl.ts (skipped)");
    return undefined;
  }
  const bun = Bun;
  const CAP = 2;
  let inFlight = 0;
  let maxInFlight = 0;
  let refused = 0;
  const server = bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (request) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        if (inFlight > CAP) {
          refused++;
          // HTTP-dates have whole seconds: "in one second" is 1 to 2 s away.
          const retryAt = new Date(Date.now() + 1_000).toUTCString();
          return new Response("busy\n", { status: 503, headers: { "retry-after": retryAt } });
        }
        await bun.sleep(80);
        return new Response(`page ${new URL(request.url).pathname}\n`);
      } finally {
        inFlight--;
      }
    },
  });
  const site = `127.0.0.1:${server.port}`;
  const dir = await mkdtemp(join(tmpdir(), "politely-bun-"));
  const file = join(dir, "outcomes.jsonl");
  const sink = bun.file(file).writer();
  try {
    const throttler = createThrottler<string>({
      concurrentRequestsPerDomain: 4,
      backoff: { minDelayMs: 100, windowMs: 2_000 },
      // Four at a time against a cap of two: a page can meet several 503s in a
      // row before backoff has slowed the scope enough; give it room to retry.
      retry: { times: 8 },
    });
    const started = throttler.scheduler.now();
    const outcomes = await lastValueFrom(
      from(Array.from({ length: 16 }, (_, i) => `http://${site}/item/${i + 1}`)).pipe(
        throttleByScope(throttler, createFetchDownload({ timeoutMs: 5_000 })),
        backoffOn(throttler),
        // One JSON line per page as it ends (retries happen inside backoffOn).
        tap((o) => {
          const status = o.kind === "response" ? o.response.status : String(o.error);
          sink.write(`${JSON.stringify({ url: o.request, status, attempts: o.attempt })}\n`);
          const s = throttler.state(site);
          log(
            `+${((o.sentAt - started) / 1000).toFixed(3)}s ${status} ${
              new URL(o.request).pathname
            }` +
              ` (attempt ${o.attempt}; delay now ${s?.delayMs} ms, backoff level ${s?.backoffLevel})`,
          );
        }),
        toArray(),
      ),
    );
    await sink.end();
    const lines = (await bun.file(file).text()).trim().split("\n").length;
    const statuses = outcomes.map((o) => (o.kind === "response" ? o.response.status : 0));
    log(
      `${statuses.filter((s) => s === 200).length} of ${outcomes.length} pages answered 200; ` +
        `the server refused ${refused} (at most ${maxInFlight} arrived at once); ` +
        `${lines} lines written to ${file} (removed now)`,
    );
    return { statuses, refused, maxInFlight, lines };
  } finally {
    await server.stop(true);
    await rm(dir, { recursive: true, force: true });
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
