/**
 * A streaming ETL job against a metered API. Records (no URL) are read as a
 * stream, sent to the API one by one and loaded as they come back. The API
 * allows 20 cost units per 1 s window; each operation has a price that is
 * only known for sure afterwards (`X-Actual-Cost`), and every answer says
 * where the window stands (`RateLimit: "units";r=…;t=…` and
 * `RateLimit-Policy: "units";q=20;w=1`).
 *
 * - `getScopes` puts every record into one quota scope, `api`, with its
 *   *estimated* cost as the amount: `{ api: 2 }`.
 * - `backoffOn(throttler, { getResponseBackoff })` corrects the estimate with
 *   `updateScopeBackoff(…, "api", { consumed: actual - estimate })`.
 * - The estimates can still let a window overspend (the actual costs are
 *   only known once the requests are in flight): the API answers 429 with
 *   `RateLimit: "units";r=0;t=…`, the scope is held until that reset, the
 *   refused estimate is refunded, and the record is retried.
 *
 * "we count" includes the requests in flight, so it runs ahead of what the
 * server has charged so far.
 *
 * Run with `npx tsx examples/etl_quota.ts` (or `npx deno run -A`, `npx bun`).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { from, lastValueFrom, map, toArray } from "rxjs";
import {
  backoffOn,
  createThrottler,
  type DownloadContext,
  parseRateLimit,
  parseRateLimitPolicy,
  throttleByScope,
  updateScopeBackoff,
} from "../mod.ts";

/** One record of the extract: no URL, just data. */
export interface SourceRecord {
  readonly id: number;
  readonly op: "lookup" | "enrich" | "summarize";
  readonly text: string;
}

/** What the API answers. */
interface ApiAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: { readonly result?: string };
}

/** What the job saw. */
export interface EtlSummary {
  /** Ids of the records loaded, in load order. */
  readonly loaded: readonly number[];
  /** Units the API charged in each of its windows (its quota is 20). */
  readonly windows: readonly number[];
  /** 429s the API answered. */
  readonly refused: number;
}

const QUOTA = 20;
const WINDOW_MS = 1_000;
/**
 * Our window is a little longer than the server's: our window starts when we
 * send, the server's when the request arrives, and without the margin our
 * next window would open a moment before the server's.
 */
const CLIENT_WINDOW_MS = 1_050;

/** What we think an operation costs (the API's price list, roughly). */
function estimate(record: SourceRecord): number {
  return { lookup: 1, enrich: 2, summarize: 4 }[record.op];
}

/** What the API really charges: it depends on the text, which we do not model. */
function actualCost(op: string, text: string): number {
  if (op === "enrich") return text.length > 30 ? 3 : 2;
  if (op === "summarize") return Math.min(6, Math.max(2, Math.ceil(text.length / 12)));
  return 1;
}

/** The extract, as a stream (it could be a file read line by line, or a database cursor). */
async function* extract(): AsyncGenerator<SourceRecord> {
  const ops = ["lookup", "enrich", "summarize", "enrich"] as const;
  for (let id = 1; id <= 24; id++) {
    yield { id, op: ops[id % ops.length]!, text: "lorem ipsum ".repeat(1 + (id * 7) % 5) };
  }
}

/** Runs the example; resolves with what it loaded and what the API charged. */
export async function main(log: (line: string) => void = console.log): Promise<EtlSummary> {
  // The API: fixed windows that start at the first request after the last one
  // ended; a request that does not fit in what is left is refused (429).
  const windows: number[] = [];
  let windowEnds = 0;
  let refused = 0;
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const now = performance.now();
      if (now >= windowEnds) {
        windowEnds = now + WINDOW_MS;
        windows.push(0);
      }
      const op = (req.url ?? "").slice("/v1/".length);
      const { text } = JSON.parse(body) as { text: string };
      const cost = actualCost(op, text);
      const used = windows[windows.length - 1]!;
      const resetS = Math.max(0.001, (windowEnds - now) / 1000).toFixed(3);
      const headers = (left: number) => ({
        "content-type": "application/json",
        "ratelimit-policy": `"units";q=${QUOTA};w=${WINDOW_MS / 1000}`,
        "ratelimit": `"units";r=${left};t=${resetS}`,
      });
      if (used + cost > QUOTA) {
        refused++;
        res.writeHead(429, headers(0));
        res.end("{}");
        return;
      }
      windows[windows.length - 1] = used + cost;
      // Answered after 30 ms, so that several requests are in flight.
      setTimeout(() => {
        res.writeHead(200, { ...headers(QUOTA - used - cost), "x-actual-cost": String(cost) });
        res.end(JSON.stringify({ result: `${op}(${text.trim().split(" ").length} words)` }));
      }, 30);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  try {
    const throttler = createThrottler<SourceRecord>(
      {
        scopes: {
          // The quota the API documents; a 429 slows the scope down only a
          // little (the quota does the pacing), and it recovers in 0.5 s.
          api: {
            quota: QUOTA,
            windowMs: CLIENT_WINDOW_MS,
            concurrency: 4,
            backoff: { minDelayMs: 50 },
          },
        },
        backoff: { windowMs: 500 },
        jitter: 0,
      },
      // No URL: the scope function is the only way to a scope. The amount is our estimate.
      { getScopes: (record) => ({ api: estimate(record) }) },
    );
    const download = async (record: SourceRecord, c: DownloadContext): Promise<ApiAnswer> => {
      const r = await fetch(`${api}/v1/${record.op}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: record.text }),
        signal: c.signal,
      });
      return { status: r.status, headers: r.headers, body: await r.json() };
    };
    const firstId = 1;
    const started = throttler.scheduler.now();
    const at = (t: number) => `+${((t - started) / 1000).toFixed(3)}s`;

    const loaded = await lastValueFrom(
      from(extract()).pipe(
        throttleByScope(throttler, download),
        backoffOn(throttler, {
          getResponseBackoff: (outcome, base) => {
            // base: a 429 triggers backoff with a hold until the reset the
            // RateLimit field gives; every answer also carries the server's
            // `remaining` for the quota scope.
            const backoff = base(outcome);
            // We keep our own count instead (it already includes the requests
            // in flight, which the server's `remaining` does not) and correct
            // it by the bill: the actual cost on a success, nothing on a 429.
            const { remaining: _serverLeft, ...api } = backoff["api"] ?? { trigger: false };
            if (outcome.kind !== "response") return { ...backoff, api };
            const charged = outcome.response.status === 200
              ? Number(outcome.response.headers.get("x-actual-cost"))
              : 0;
            return updateScopeBackoff({ ...backoff, api }, "api", {
              consumed: charged - estimate(outcome.request),
            });
          },
        }),
        // Transform and load: here the "warehouse" is the log.
        map((outcome) => {
          const { id, op } = outcome.request;
          const now = throttler.scheduler.now();
          if (outcome.kind === "error" || outcome.response.status !== 200) {
            log(`${at(now)} #${id} FAILED after ${outcome.attempt} attempts`);
            return undefined;
          }
          const h = outcome.response.headers;
          if (outcome.request.id === firstId) {
            const [policy] = parseRateLimitPolicy(h.get("ratelimit-policy"));
            log(
              `API policy (RateLimit-Policy): ${policy?.quota} units per ` +
                `${policy?.windowMs} ms; we count ${QUOTA} per ${CLIENT_WINDOW_MS} ms`,
            );
          }
          const q = throttler.state("api")?.quota;
          const [rl] = parseRateLimit(h.get("ratelimit"));
          log(
            `${at(now)} #${String(id).padStart(2)} ${op.padEnd(9)} ` +
              `estimated ${estimate(outcome.request)}, cost ${h.get("x-actual-cost")} | ` +
              `server: ${String(rl?.remaining).padStart(2)} left | ` +
              `we count ${
                String(q?.used ?? 0).padStart(2)
              } used | ${outcome.response.body.result}` +
              (outcome.attempt > 1 ? ` (attempt ${outcome.attempt})` : ""),
          );
          return id;
        }),
        toArray(),
      ),
    );
    const ids = loaded.filter((id): id is number => id !== undefined);
    log(
      `${ids.length} records loaded; units charged per ${WINDOW_MS} ms window ` +
        `(quota ${QUOTA}): ${windows.join(", ")}; ${refused} refused with 429`,
    );
    return { loaded: ids, windows, refused };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
