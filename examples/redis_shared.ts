/**
 * Two crawler "processes" (two throttlers, two Redis connections, here in one
 * process for the demo) keep one set of limits for a site through Redis: at
 * most 2 requests in flight and 50 ms between sends across both, and a 429
 * with Retry-After that one of them gets holds the other too. Runs against
 * its own loopback server and the Redis on 127.0.0.1:$REDIS_PORT (6390).
 * Run with `npx tsx examples/redis_shared.ts` (or deno run -A, bun run).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { createClient } from "redis";
import { from, lastValueFrom, merge, toArray } from "rxjs";
import {
  backoffOn,
  createRedisScopes,
  createThrottler,
  shareBackoff,
  sharedDownload,
  throttleByScope,
} from "../mod.ts";

/** What the run saw. */
export interface SharedRun {
  /** The most requests the server had in flight at once (the limit is 2). */
  readonly mostInFlight: number;
  /** Responses per status. */
  readonly statuses: Record<number, number>;
  /** Whether the crawler that never got the 429 backed off too. */
  readonly otherBackedOff: boolean;
}

/** Runs the example. */
export async function main(log: (line: string) => void = console.log): Promise<SharedRun> {
  let inFlight = 0;
  let mostInFlight = 0;
  let served = 0;
  const server = createServer((_req, res) => {
    mostInFlight = Math.max(mostInFlight, ++inFlight);
    const n = ++served;
    setTimeout(() => {
      inFlight--;
      // The fifth request is refused: "come back in a second".
      if (n === 5) res.writeHead(429, { "retry-after": "1" }).end("slow down\n");
      else res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    }, 150);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const port = Number(process.env.REDIS_PORT ?? 6390);
  const prefix = `example:${crypto.randomUUID()}:`;
  const clients = [0, 1].map(() =>
    createClient({ socket: { host: "127.0.0.1", port, reconnectStrategy: false } })
  );
  try {
    for (const client of clients) {
      client.on("error", () => {});
      await client.connect();
    }
    const crawlers = await Promise.all(clients.map(async (client, i) => {
      const shared = await createRedisScopes(client, { prefix, processId: `crawler-${i}` });
      // Each alone would allow 2 in flight and a 50 ms gap: together they keep to that.
      const throttler = createThrottler<string>({
        concurrentRequestsPerDomain: 2,
        downloadDelayMs: 50,
        retry: { times: 3 },
        backoff: { minDelayMs: 100 }, // a short demo: the first step is 100 ms, not 1 s
      });
      return { shared, throttler, sharing: shareBackoff(shared, throttler) };
    }));
    const download = async (url: string, ctx: { signal: AbortSignal }) => {
      const response = await fetch(url, { signal: ctx.signal });
      await response.text();
      return { status: response.status, headers: response.headers };
    };
    const outcomes = await lastValueFrom(
      merge(
        ...crawlers.map(({ shared, throttler }, i) =>
          from(Array.from({ length: 8 }, (_, n) => `${origin}/crawler-${i}/${n}`)).pipe(
            throttleByScope(throttler, sharedDownload(shared, throttler, download)),
            backoffOn(throttler),
          )
        ),
      ).pipe(toArray()),
    );
    const statuses: Record<number, number> = {};
    for (const o of outcomes) {
      if (o.kind === "response") {
        statuses[o.response.status] = (statuses[o.response.status] ?? 0) + 1;
      }
    }
    const scope = outcomes[0]!.scopes[0]!;
    // Both slowed down: the one that got the 429 cut its pace, and the other
    // adopted it through shareBackoff (domain scopes are adaptive by default).
    const delays = crawlers.map(({ throttler }) => throttler.state(scope)?.delayMs ?? 0);
    const otherBackedOff = delays.every((delay) => delay > 50);
    log(`${outcomes.length} responses ${JSON.stringify(statuses)} from ${served} requests`);
    log(`most in flight at the server: ${mostInFlight} (limit 2 across both crawlers)`);
    log(`delay per crawler after the 429: ${delays.map((d) => `${Math.round(d)} ms`).join(", ")}`);
    for (const { shared, sharing } of crawlers) {
      sharing.unsubscribe();
      await shared.close();
    }
    const keys = await clients[0]!.keys(`${prefix}*`);
    if (keys.length > 0) await clients[0]!.del(keys);
    return { mostInFlight, statuses, otherBackedOff };
  } finally {
    for (const client of clients) if (client.isOpen) await client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  const run = await main();
  if (run.mostInFlight > 2 || !run.otherBackedOff) {
    console.error("the crawlers did not keep the shared limits");
    process.exit(1);
  }
}
