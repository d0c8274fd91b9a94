/**
 * Web-scraping-API throttling (the reference's worked example): requests go
 * to an API (`/?url=<target>`), which may fetch the target fine and still
 * answer 200 with the target's own status in `X-Upstream-Status-Code`. The
 * target's domain is a second scope of each request, and the upstream status
 * is what backoff reads, so a target that says 429 slows down that target
 * only, not the API. Runs against its own loopback API.
 * Run with `npx tsx examples/scraping_api.ts` (or deno run -A, bun run).
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
} from "../mod.ts";

interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
}

/** Runs the example; resolves with the scopes that backed off. */
export async function main(log: (line: string) => void = console.log): Promise<string[]> {
  // The API: every other request to shy.example comes back "429" upstream.
  let shy = 0;
  const server = createServer((req, res) => {
    const target = new URL(req.url ?? "/", "http://127.0.0.1").searchParams.get("url") ?? "";
    const upstream = target.includes("shy.example") && shy++ % 2 === 1 ? 429 : 200;
    res.writeHead(200, {
      "content-type": "text/plain",
      "x-upstream-status-code": String(upstream),
    });
    res.end("ok\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const apiScope = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const api = `http://${apiScope}`;
  try {
    const throttler = createThrottler<string>(
      {
        scopes: { [apiScope]: { concurrency: 1000, delayMs: 80 } },
        backoff: { minDelayMs: 300 },
        retry: { enabled: false },
        jitter: 0,
      },
      {
        // The API's own scope, plus the target's domain as a second scope.
        getScopes: scopeCache((url: string) => {
          const scopes = hostScope(url);
          const target = new URL(url).searchParams.get("url");
          return target === null ? scopes : addScope(scopes, hostScope(target));
        }),
      },
    );
    const backedOff = new Set<string>();
    throttler.events$.subscribe((e) => {
      if (e.type === "backoff") backedOff.add(e.scope);
    });
    const targets = [
      "https://shy.example/1",
      "https://books.example/1",
      "https://shy.example/2",
      "https://books.example/2",
      "https://shy.example/3",
    ];
    const download = async (url: string, c: { signal: AbortSignal }): Promise<ApiResponse> => {
      const r = await fetch(url, { signal: c.signal });
      await r.arrayBuffer();
      return { status: r.status, headers: r.headers };
    };
    const started = throttler.scheduler.now();
    const outcomes: Outcome<string, ApiResponse>[] = await lastValueFrom(
      from(targets.map((t) => `${api}/?url=${encodeURIComponent(t)}`)).pipe(
        throttleByScope(throttler, download),
        backoffOn(throttler, {
          // Read the API's 200 as the target's own status, for the target's
          // scope only: the API itself answered fine.
          getResponseBackoff: (outcome, base) => {
            const own = base(outcome);
            if (outcome.kind !== "response" || outcome.response.status !== 200) return own;
            const upstream = Number(
              outcome.response.headers.get("x-upstream-status-code") ?? "200",
            );
            const target = base({
              ...outcome,
              response: { ...outcome.response, status: upstream },
            });
            return { ...target, [apiScope]: own[apiScope] ?? { trigger: false } };
          },
        }),
        toArray(),
      ),
    );
    for (const o of outcomes) {
      const upstream = o.kind === "response"
        ? o.response.headers.get("x-upstream-status-code")
        : "error";
      log(`${Math.round(o.sentAt - started)} ms  ${o.scopes.join(" + ")}  upstream ${upstream}`);
    }
    log(`backed off: ${[...backedOff].join(", ") || "nothing"}`);
    return [...backedOff];
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
