/**
 * Endpoint-specific throttling (the reference's worked example): the
 * endpoints of one API host get scopes of their own (`host/path`), each with
 * its own settings and no common limit. Runs against its own loopback API.
 * Run with `npx tsx examples/endpoint_scopes.ts` (or deno run -A, bun run).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { from, lastValueFrom, toArray } from "rxjs";
import { createThrottler, hostScope, scopeCache, throttleByScope } from "../mod.ts";

/** Runs the example; resolves with the send times (ms from start) per scope. */
export async function main(
  log: (line: string) => void = console.log,
): Promise<Record<string, number[]>> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const throttler = createThrottler<string>(
      {
        scopes: {
          [`${host}/fast-endpoint`]: { concurrency: 1000, delayMs: 80 },
          [`${host}/slow-endpoint`]: { delayMs: 500 },
        },
        jitter: 0,
      },
      {
        // Endpoints of this host are scopes of their own; anything else keeps its host scope.
        getScopes: scopeCache((url: string) => {
          const u = new URL(url);
          return u.host !== host ? hostScope(url) : `${u.host}${u.pathname}`;
        }),
      },
    );
    const urls = [
      ...Array.from({ length: 4 }, (_, i) => `http://${host}/fast-endpoint?i=${i}`),
      ...Array.from({ length: 3 }, (_, i) => `http://${host}/slow-endpoint?i=${i}`),
    ];
    const download = async (url: string, c: { signal: AbortSignal }) => {
      const r = await fetch(url, { signal: c.signal });
      await r.arrayBuffer();
      return { status: r.status };
    };
    const started = throttler.scheduler.now();
    const outcomes = await lastValueFrom(
      from(urls).pipe(throttleByScope(throttler, download), toArray()),
    );
    const times: Record<string, number[]> = {};
    for (const o of outcomes) {
      const scope = o.scopes[0]!.slice(host.length);
      (times[scope] ??= []).push(Math.round(o.sentAt - started));
    }
    for (const [scope, at] of Object.entries(times)) {
      log(`${scope}: sent at ${at.sort((a, b) => a - b).join(", ")} ms`);
    }
    return times;
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
