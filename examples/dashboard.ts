/**
 * The live dashboard of your own pipeline: `serveDashboard(throttler)` serves
 * a page (plots per scope, a sortable table of scopes, the event log) while a
 * `throttleByScope` + `backoffOn` pipeline crawls two loopback sites, one of
 * which answers 429 now and then. The example reads the page and the first
 * messages of its event stream, then closes; pass a number of seconds
 * (`npx tsx examples/dashboard.ts 60`) to keep crawling that long with the
 * page open in a browser.
 * Run with `npx tsx examples/dashboard.ts` (or `npx deno run -A`, `npx bun`).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { interval, lastValueFrom, map, take, takeUntil, timer, toArray } from "rxjs";
import {
  backoffOn,
  createFetchDownload,
  createThrottler,
  serveDashboard,
  throttleByScope,
} from "../mod.ts";

/** What the example saw. */
export interface DashboardSummary {
  readonly url: string;
  readonly pageTitle: string | undefined;
  /** The SSE events read: "history", then "snapshot"s. */
  readonly messages: readonly string[];
  /** The scopes of the last snapshot read, most active first. */
  readonly scopes: readonly string[];
  readonly pages: number;
}

/**
 * Runs the example; resolves with what it saw.
 *
 * @param log Where lines go.
 * @param keepSeconds Crawl this long (a page every 50 ms) before closing; 0 crawls 30 pages.
 */
export async function main(
  log: (line: string) => void = console.log,
  keepSeconds = 0,
): Promise<DashboardSummary> {
  // Two sites (two ports, so two scopes); the "busy" one refuses every seventh request.
  const servers = [false, true].map((busy) => {
    let arrivals = 0;
    return createServer((_req, res) => {
      arrivals++;
      if (busy && arrivals % 7 === 0) {
        res.writeHead(429, { "retry-after": "1", "content-type": "text/plain" });
        return res.end("slow down\n");
      }
      setTimeout(() => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("ok\n");
      }, 10);
    });
  });
  const sites: string[] = [];
  for (const server of servers) {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    sites.push(`127.0.0.1:${(server.address() as AddressInfo).port}`);
  }
  const throttler = createThrottler<string>({
    concurrentRequestsPerDomain: 2,
    downloadDelayMs: 20,
    backoff: { minDelayMs: 100, windowMs: 300, jitter: 0 },
  });
  // A quarter-second tick, so a short run still shows a few points.
  const dashboard = await serveDashboard(throttler, {
    port: 0,
    tickMs: 250,
    title: "politely example",
    info: { sites: sites.join(", ") },
  });
  log(`dashboard at ${dashboard.url}`);
  try {
    const pages = keepSeconds > 0
      ? interval(50).pipe(takeUntil(timer(keepSeconds * 1000)))
      : interval(5).pipe(take(30));
    const crawl = lastValueFrom(
      pages.pipe(
        map((i) => `http://${sites[i % 2]}/page/${i}`),
        throttleByScope(throttler, createFetchDownload({ timeoutMs: 5_000 })),
        backoffOn(throttler),
        toArray(),
      ),
    );

    // What a browser gets: the page, then the event stream.
    const html = await (await fetch(dashboard.url)).text();
    const pageTitle = /<title>([^<]*)<\/title>/.exec(html)?.[1];
    const events = await fetch(new URL("events", dashboard.url));
    const reader = events.body!.pipeThrough(new TextDecoderStream()).getReader();
    const messages: string[] = [];
    let scopes: string[] = [];
    let buffer = "";
    while (messages.length < 3) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event === undefined || data === undefined) continue;
        messages.push(event);
        const rows: { label: string; sent: number }[] = JSON.parse(data).rows;
        scopes = rows.map((r) => r.label);
        log(
          `${event}: ${rows.map((r) => `${r.label} sent ${r.sent}`).join(", ") || "no scopes yet"}`,
        );
      }
    }
    await reader.cancel();
    const outcomes = await crawl;
    log(`${outcomes.length} pages crawled; closing the dashboard`);
    return { url: dashboard.url, pageTitle, messages, scopes, pages: outcomes.length };
  } finally {
    await dashboard.close();
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  await main(console.log, Number(process.argv[2] ?? 0) || 0);
}
