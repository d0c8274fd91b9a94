/**
 * Delay accuracy (issues 2 and 11): a real loopback `node:http` server, in a
 * child process, records when each request arrives (its own
 * `performance.now()`); one scope with `delayMs: 100` and no jitter sends
 * requests through `throttleByScope` with `createFetchDownload` (real
 * `fetch`). Reports the gaps between arrivals: the smallest, and the excess
 * over 100 ms (median, p95, max). Beside them, the client's side: the
 * `download()` calls, the times undici wrote each request to the socket
 * (`undici:client:sendHeaders`, which `createFetchDownload` reports to the gate
 * as `wentOut`) and the send times (`outcome.sentAt`, the scheduler's clock),
 * to tell the gate's timing from the network's.
 *
 * Run: `npm run bench -- delay_accuracy` or `node --import tsx bench/delay_accuracy.bench.ts
 * [--requests N] [--delay MS]`.
 *
 * @module
 */
import { spawn } from "node:child_process";
import diagnostics from "node:diagnostics_channel";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { from, lastValueFrom, toArray } from "rxjs";
import { createFetchDownload, createThrottler, hostScope, throttleByScope } from "../mod.ts";
import {
  argValue,
  fmtFixed,
  isMain,
  machine,
  markdownTable,
  median,
  now,
  percentile,
  ROOT,
} from "./_harness.ts";

interface GapStats {
  readonly gaps: number;
  readonly min: number;
  readonly medianExcess: number;
  readonly p95Excess: number;
  readonly maxExcess: number;
  readonly below: number;
}

function gapStats(times: readonly number[], delayMs: number): GapStats {
  const sorted = [...times].sort((a, b) => a - b);
  const gaps = sorted.slice(1).map((t, i) => t - sorted[i]!);
  const excess = gaps.map((g) => g - delayMs);
  return {
    gaps: gaps.length,
    min: Math.min(...gaps),
    medianExcess: median(excess),
    p95Excess: percentile(excess, 0.95),
    maxExcess: Math.max(...excess),
    // A hair of float noise aside, a gap under the delay is a miss.
    below: gaps.filter((g) => g < delayMs - 1e-6).length,
  };
}

/** The server, in its own process so that its clock and event loop are not the client's. */
function serve(): void {
  const arrivals: number[] = [];
  const server = createServer((req, res) => {
    if (req.url === "/arrivals") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(arrivals));
      return;
    }
    if (req.url !== "/warm-up") arrivals.push(now());
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok");
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
  });
  // The parent closes stdin when done.
  process.stdin.resume();
  process.stdin.on("end", () => {
    server.closeAllConnections();
    server.close();
  });
}

async function main(argv: readonly string[]): Promise<void> {
  const n = Number(argValue(argv, "requests") ?? 40);
  const delayMs = Number(argValue(argv, "delay") ?? 100);
  const child = spawn(process.execPath, [
    "--import",
    "tsx",
    fileURLToPath(import.meta.url),
    "--serve",
  ], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const port = await new Promise<number>((done, fail) => {
    child.once("error", fail);
    child.stdout.setEncoding("utf8");
    child.stdout.once("data", (line: string) => done(Number(line.trim())));
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    // One request outside the gate first, so the measured ones all ride a
    // warm keep-alive connection (connection setup is not the gate's doing).
    await (await fetch(`${base}/warm-up`)).text();
    const scope = hostScope(base);
    const throttler = createThrottler({ scopes: { [scope]: { delayMs, jitter: 0 } } });
    const calls: number[] = [];
    const written: number[] = [];
    const onWrite = (message: unknown) => {
      const path = (message as { request: { path: string } }).request.path;
      if (path.startsWith("/p/")) written.push(now());
    };
    diagnostics.subscribe("undici:client:sendHeaders", onWrite);
    const download = createFetchDownload();
    const urls = Array.from({ length: n }, (_, i) => `${base}/p/${i}`);
    const outcomes = await lastValueFrom(
      from(urls).pipe(
        throttleByScope(throttler, async (url: string, context) => {
          calls.push(now());
          return (await download(url, context)).status;
        }),
        toArray(),
      ),
    );
    diagnostics.unsubscribe("undici:client:sendHeaders", onWrite);
    const failed = outcomes.filter((o) => o.kind !== "response" || o.response !== 200).length;
    const arrivals = await (await fetch(`${base}/arrivals`)).json() as number[];
    if (failed > 0 || arrivals.length !== n) {
      throw new Error(`${failed} failed outcomes, ${arrivals.length} arrivals for ${n} requests`);
    }
    const server$ = gapStats(arrivals, delayMs);
    const client = gapStats(outcomes.map((o) => o.sentAt), delayMs);
    const row = (what: string, s: GapStats) => [
      what,
      String(s.gaps),
      `${fmtFixed(s.min)} ms`,
      String(s.below),
      `${fmtFixed(s.medianExcess)} ms`,
      `${fmtFixed(s.p95Excess)} ms`,
      `${fmtFixed(s.maxExcess)} ms`,
    ];
    const ok = (b: boolean) => (b ? "met" : "**missed**");
    console.log([
      `### Delay accuracy: ${n} requests, one scope, delayMs ${delayMs}, jitter 0, real fetch over loopback`,
      "",
      markdownTable(
        [
          "Gaps measured at",
          "Gaps",
          "Min gap",
          `Gaps < ${delayMs} ms`,
          "Median excess",
          "p95 excess",
          "Max excess",
        ],
        [
          row("server arrival (performance.now)", server$),
          row("client request written (undici sendHeaders)", gapStats(written, delayMs)),
          row("client download() call (performance.now)", gapStats(calls, delayMs)),
          row("client send (outcome.sentAt, scheduler clock)", client),
        ],
      ),
      "",
      markdownTable(["Target (issues 2, 11)", "Measured at the server", "Result"], [
        [`no gap below ${delayMs} ms`, `min ${fmtFixed(server$.min)} ms`, ok(server$.below === 0)],
        [
          `no gap below ${delayMs - 1} ms (issue 11)`,
          `min ${fmtFixed(server$.min)} ms`,
          ok(server$.min >= delayMs - 1),
        ],
        [
          "median excess < 2 ms",
          `${fmtFixed(server$.medianExcess)} ms`,
          ok(server$.medianExcess < 2),
        ],
      ], ["l", "r", "l"]),
      "",
      `The scope's concurrency stays at its default (${throttler.settings.concurrentRequestsPerDomain}): the delay alone spaces the requests. ` +
      "The server runs in its own process. A warm-up request outside the gate opens the keep-alive connection first. " +
      "A request written later than usual moves the next send back by as much (DownloadContext.wentOut). " +
      "outcome.sentAt comes from the default scheduler (preciseScheduler: performance.now, sub-millisecond). " +
      `${machine()}.`,
    ].join("\n"));
  } finally {
    child.stdin.end();
    await new Promise((done) => child.once("close", done));
  }
}

if (isMain(import.meta)) {
  if (process.argv.includes("--serve")) serve();
  else await main(process.argv.slice(2));
}
