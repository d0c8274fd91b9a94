/**
 * politely in a Deno script: the site is a `Deno.serve` server on loopback
 * that wants at least 100 ms between requests and answers 429 with a
 * `RateLimit` field (`"default";r=0;t=…`) when a client comes sooner. The
 * crawl starts at 40 ms between requests, backs off on the 429s (each held
 * until the reset the field gives), and writes one JSON line per outcome
 * with `Deno.writeTextFile` into a `Deno.makeTempDir` directory.
 *
 * Run with `npx deno run -A examples/deno_crawl.ts`. Under Node or Bun it
 * prints a one-line note and exits 0.
 *
 * @module
 */
import process from "node:process";
import { pathToFileURL } from "node:url";
import { concatMap, from, lastValueFrom, toArray } from "rxjs";
import { backoffOn, createFetchDownload, createThrottler, throttleByScope } from "../mod.ts";

/** The few `Deno` APIs used here (the project is type-checked with Node's types). */
interface DenoApi {
  serve(
    options: { hostname: string; port: number; onListen?: (addr: { port: number }) => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { readonly addr: { readonly port: number }; shutdown(): Promise<void> };
  makeTempDir(options?: { prefix?: string }): Promise<string>;
  writeTextFile(path: string, data: string, options?: { append?: boolean }): Promise<void>;
  readTextFile(path: string): Promise<string>;
  remove(path: string, options?: { recursive?: boolean }): Promise<void>;
}

const Deno = (globalThis as { Deno?: DenoApi }).Deno;

/** What the crawl saw. */
export interface DenoCrawlSummary {
  /** Final status of each page. */
  readonly statuses: readonly number[];
  /** 429s the server answered. */
  readonly refused: number;
  /** Lines written to the outcomes file. */
  readonly lines: number;
}

/** Runs the example (under Deno only); resolves with what it saw. */
export async function main(
  log: (line: string) => void = console.log,
): Promise<DenoCrawlSummary | undefined> {
  if (Deno === undefined) {
    log("examples/deno_crawl.ts needs Deno: npx deno run -A examples/deno_crawl.ts (skipped)");
    return undefined;
  }
  const MIN_INTERVAL_MS = 100;
  let lastArrival = -Infinity;
  let refused = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request) => {
    const now = performance.now();
    const wait = lastArrival + MIN_INTERVAL_MS - now;
    if (wait > 0) {
      refused++;
      return new Response("too soon\n", {
        status: 429,
        headers: { ratelimit: `"default";r=0;t=${(wait / 1000).toFixed(3)}` },
      });
    }
    lastArrival = now;
    return new Response(`page ${new URL(request.url).pathname}\n`);
  });
  const site = `127.0.0.1:${server.addr.port}`;
  const dir = await Deno.makeTempDir({ prefix: "politely-deno-" });
  const file = `${dir}/outcomes.jsonl`;
  try {
    const throttler = createThrottler<string>({
      downloadDelayMs: 40,
      jitter: 0,
      backoff: { minDelayMs: 80, windowMs: 1_000, jitter: 0 },
      retry: { times: 8 }, // a page may meet a few 429s in a row: let it try again
    });
    const started = throttler.scheduler.now();
    const outcomes = await lastValueFrom(
      from(Array.from({ length: 16 }, (_, i) => `http://${site}/item/${i + 1}`)).pipe(
        throttleByScope(throttler, createFetchDownload({ timeoutMs: 5_000 })),
        backoffOn(throttler),
        // One JSON line per page as it ends (retries happen inside backoffOn).
        concatMap(async (o) => {
          const line = o.kind === "response"
            ? { url: o.request, status: o.response.status, attempts: o.attempt }
            : { url: o.request, error: String(o.error), attempts: o.attempt };
          await Deno.writeTextFile(file, `${JSON.stringify(line)}\n`, { append: true });
          const status = "status" in line ? line.status : line.error;
          log(
            `+${((o.sentAt - started) / 1000).toFixed(3)}s ${status} ${
              new URL(o.request).pathname
            }` +
              ` (attempt ${o.attempt}; delay now ${throttler.state(site)?.delayMs} ms)`,
          );
          return o;
        }),
        toArray(),
      ),
    );
    const lines = (await Deno.readTextFile(file)).trim().split("\n").length;
    const statuses = outcomes.map((o) => (o.kind === "response" ? o.response.status : 0));
    log(
      `${statuses.filter((s) => s === 200).length} of ${outcomes.length} pages answered 200; ` +
        `the server refused ${refused} requests; ${lines} lines written to ${file} (removed now)`,
    );
    return { statuses, refused, lines };
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
