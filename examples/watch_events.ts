/**
 * Watching throttling live: `throttler.events$` (what happened: a backoff, a
 * hold, a retry, an adaptive step with its reason) and `throttler.scope$(name)`
 * (how a scope stands after every change: delay, concurrency, hold) printed
 * as a compact log while a loopback site answers 429 with `Retry-After: 1`
 * now and then.
 * Run with `npx tsx examples/watch_events.ts` (or `npx deno run -A`, `npx bun`).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { from, lastValueFrom, toArray } from "rxjs";
import {
  backoffOn,
  createFetchDownload,
  createThrottler,
  type ScopeState,
  throttleByScope,
  type ThrottleEventType,
} from "../mod.ts";

/** What the example saw: events by type, and the final status of each page. */
export interface WatchSummary {
  readonly events: Partial<Record<ThrottleEventType, number>>;
  readonly statuses: readonly (number | undefined)[];
  /** The sources of the holds (`"retry-after"` for every hold here). */
  readonly holdSources: readonly string[];
}

/** The requests (1-based, in arrival order) that the site refuses with 429. */
const REFUSED = new Set([6, 14]);

/** Runs the example; resolves with what it saw. */
export async function main(log: (line: string) => void = console.log): Promise<WatchSummary> {
  let arrivals = 0;
  const server = createServer((_req, res) => {
    arrivals++;
    if (REFUSED.has(arrivals)) {
      res.writeHead(429, { "retry-after": "1", "content-type": "text/plain" });
      res.end("slow down\n");
      return;
    }
    // A little latency, so that two requests are in flight at once.
    const answer = () => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok\n");
    };
    setTimeout(answer, 20);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const site = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const throttler = createThrottler<string>({
      concurrentRequestsPerDomain: 2,
      downloadDelayMs: 50,
      jitter: 0,
      // A short window so a few seconds show the scope adapt and climb back
      // (domain scopes are adaptive by default; `adaptive: false` would show
      // Scrapy's exponential steps and their recovery instead).
      backoff: { minDelayMs: 200, windowMs: 400, jitter: 0 },
    });
    const started = throttler.scheduler.now();
    const at = (t: number) => `+${((t - started) / 1000).toFixed(3)}s`;
    const name = (scope: string) => (scope === site ? "site" : scope);

    const events: Partial<Record<ThrottleEventType, number>> = {};
    const holdSources: string[] = [];
    // Statuses are gathered into one line, printed before the next other line.
    let statuses: string[] = [];
    let statusesAt = 0;
    const flush = () => {
      if (statuses.length > 0) log(`${at(statusesAt)} answers  ${statuses.join(" ")}`);
      statuses = [];
    };
    const line = (t: number, text: string) => {
      flush();
      log(`${at(t)} ${text}`);
    };
    const eventLog = throttler.events$.subscribe((e) => {
      events[e.type] = (events[e.type] ?? 0) + 1;
      switch (e.type) {
        case "request-done":
          statuses.push(String(e.status ?? e.error));
          statusesAt = e.at;
          break;
        case "backoff":
          line(e.at, `BACKOFF  ${name(e.scope)}: ${e.cause}`);
          break;
        case "rampup":
          // The adaptive scope's steps: what it learned from the refusal, and its climb back.
          line(e.at, `ADAPT    ${name(e.scope)}: ${e.why}`);
          break;
        case "hold":
          holdSources.push(e.source);
          line(e.at, `HOLD     ${name(e.scope)}: ${e.until - e.at}ms (${e.source})`);
          break;
        case "retry":
          line(e.at, `RETRY    attempt ${e.attempt} after ${e.cause}`);
          break;
        case "recovery":
          line(e.at, `RECOVERY ${name(e.scope)}: delay ${e.delayMs}ms, level ${e.level}`);
          break;
        default:
          // request-sent, request-delayed, scope-created: the lines above say enough.
          break;
      }
    });
    // A line whenever the scope's delay, concurrency or hold changes (not on
    // every send and completion, which `answers` already shows).
    let last = "";
    const scopeLog = throttler.scope$(site).subscribe((s: ScopeState) => {
      const now = throttler.scheduler.now();
      const held = s.holdUntil > now;
      const key = `${s.delayMs} ${s.concurrency} ${held}`;
      if (key === last) return;
      last = key;
      line(
        now,
        `  scope  site: delay ${Math.round(s.delayMs)}ms, concurrency ${s.concurrency}` +
          (held ? `, held for ${Math.round(s.holdUntil - now)}ms more` : ", not held"),
      );
    });

    const urls = Array.from({ length: 20 }, (_, i) => `http://${site}/item/${i + 1}`);
    const outcomes = await lastValueFrom(
      from(urls).pipe(
        throttleByScope(throttler, createFetchDownload({ timeoutMs: 5_000 })),
        backoffOn(throttler),
        toArray(),
      ),
    );
    flush();
    eventLog.unsubscribe();
    scopeLog.unsubscribe();
    const final = outcomes.map((o) => (o.kind === "response" ? o.response.status : undefined));
    const ok = final.filter((s) => s === 200).length;
    log(
      `${outcomes.length} pages, ${ok} answered 200 in the end; ` +
        Object.entries(events).map(([type, n]) => `${type} ${n}`).join(", "),
    );
    return { events, statuses: final, holdSources };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
