/**
 * Cost-capped throttling (the reference's worked example): an API charges each
 * request by the features it uses; a `cost` scope with a quota caps spending
 * per window, each request's estimate is its amount, and the response's
 * `X-Actual-Cost` corrects the estimate. Runs against its own loopback API.
 * Run with `npx tsx examples/cost_capped.ts` (or deno run -A, bun run).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { from, lastValueFrom, toArray } from "rxjs";
import {
  addScope,
  backoffOn,
  createThrottler,
  hostScope,
  type Outcome,
  scopeCache,
  throttleByScope,
  updateScopeBackoff,
} from "../mod.ts";

/** What we think a request costs: one unit per feature asked for. */
function estimateRequestCost(url: string): number {
  return Number(new URL(url).searchParams.get("features") ?? "1");
}

/** Runs the example; resolves with the spending per 1 s window. */
export async function main(log: (line: string) => void = console.log): Promise<number[]> {
  // The API: screenshots cost one unit more than asked for.
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const features = Number(url.searchParams.get("features") ?? "1");
    const actual = features + (url.searchParams.has("screenshot") ? 1 : 0);
    res.writeHead(200, { "content-type": "text/plain", "x-actual-cost": String(actual) });
    res.end("ok\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const throttler = createThrottler<string>(
      { scopes: { cost: { quota: 6, windowMs: 1_000, concurrency: 10 } }, jitter: 0 },
      // Every API request is in its host's scope and in `cost`, by its estimate.
      {
        getScopes: scopeCache((url: string) =>
          addScope(hostScope(url), "cost", estimateRequestCost(url))
        ),
      },
    );
    const urls = [
      `${api}/?features=2`,
      `${api}/?features=1&screenshot`,
      `${api}/?features=3`,
      `${api}/?features=1`,
      `${api}/?features=2&screenshot`,
      `${api}/?features=1`,
    ];
    const started = throttler.scheduler.now();
    const spent: number[] = [];
    const download = async (url: string, c: { signal: AbortSignal }) => {
      const r = await fetch(url, { signal: c.signal });
      await r.arrayBuffer();
      return { status: r.status, headers: r.headers };
    };
    const outcomes: Outcome<string, { status: number; headers: Headers }>[] = await lastValueFrom(
      from(urls).pipe(
        throttleByScope(throttler, download),
        backoffOn(throttler, {
          getResponseBackoff: (outcome, base) => {
            const backoff = base(outcome);
            if (outcome.kind !== "response") return backoff;
            const actualHeader = outcome.response.headers.get("x-actual-cost");
            if (actualHeader === null) return backoff;
            const actual = Number(actualHeader);
            const window = Math.floor((outcome.sentAt - started) / 1_000);
            spent[window] = (spent[window] ?? 0) + actual;
            // Report the difference between actual and estimated cost.
            return updateScopeBackoff(backoff, "cost", {
              consumed: actual - estimateRequestCost(outcome.request),
            });
          },
        }),
        toArray(),
      ),
    );
    for (const o of outcomes) {
      log(`${Math.round(o.sentAt - started)} ms  ${o.request.slice(api.length)}`);
    }
    log(`spent per 1 s window (quota 6): ${spent.map((s) => s ?? 0).join(", ")}`);
    return spent.map((s) => s ?? 0);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
