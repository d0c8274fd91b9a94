/**
 * What the live dashboard costs (issue 16): the core benchmark's work
 * (`--requests` requests over `--scopes` scopes, 8 in flight per scope,
 * downloads that resolve at once, so the throttler's own work is all there
 * is) without a listener, with a no-op listener on `events$` (what any
 * per-request event costs), and with `serveDashboard` and a browser's event
 * stream connected. Interleaved repetitions, medians.
 *
 * `npm run bench -- dashboard [--requests 200000] [--scopes 1000] [--reps 9]`
 *
 * @module
 */
import { request } from "node:http";
import { from, type SchedulerLike, Subject } from "rxjs";
import { DashboardAggregator } from "../lib/dashboard/dashboard_aggregator.ts";
import type { ThrottleEvent } from "../lib/events.ts";
import { serveDashboard } from "../lib/dashboard/serve_dashboard.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import {
  argValue,
  fmtFixed,
  fmtInt,
  isMain,
  markdownTable,
  median,
  settledHeap,
} from "./_harness.ts";

type Mode = "none" | "events$ listener" | "dashboard";

interface Work {
  readonly id: number;
  readonly scope: string;
}

async function run(mode: Mode, work: readonly Work[], scopes: number): Promise<number> {
  const throttler = createThrottler<Work>(
    { concurrentRequests: scopes * 8, scopeConcurrency: 8 },
    { getScopes: (w) => w.scope },
  );
  const listener = mode === "events$ listener" ? throttler.events$.subscribe(() => {}) : undefined;
  const dashboard = mode === "dashboard" ? await serveDashboard(throttler) : undefined;
  let stream: ReturnType<typeof request> | undefined;
  if (dashboard !== undefined) {
    // A page open on it: its event stream connected.
    await new Promise<void>((resolve, reject) => {
      stream = request(`${dashboard.url}events`, (res) => {
        res.on("data", () => {});
        resolve();
      });
      stream.on("error", reject);
      stream.end();
    });
  }
  const t0 = performance.now();
  await new Promise<void>((done, fail) =>
    from(work).pipe(throttleByScope(throttler, (w) => Promise.resolve(w.id))).subscribe({
      error: fail,
      complete: () => done(),
    })
  );
  const ms = performance.now() - t0;
  listener?.unsubscribe();
  stream?.destroy();
  await dashboard?.close();
  return ms;
}

/**
 * The aggregator's heap after an hour of a broad crawl in virtual time
 * (`scopes` sites, 20 requests a second over them, a backoff a second),
 * ticked by hand at the defaults (1 s ticks, 300 points, 200 scopes, 500
 * log entries): MiB held, and scopes tracked at the end.
 */
function hourOfScopes(scopes: number): { mib: number; tracked: number; series: number } {
  let now = 0;
  const source = {
    events$: new Subject<ThrottleEvent>(),
    scheduler: { now: () => now } as SchedulerLike,
    state: () => undefined,
    active: 0,
    held: 0,
    scopeCount: scopes,
  };
  const before = settledHeap();
  const agg = new DashboardAggregator(source);
  for (let i = 0; i < 3600; i++) {
    now = i * 1000 + 1;
    for (let k = 0; k < 20; k++) {
      const scope = `site${(i * 20 + k) % scopes}.test`;
      agg.record({ type: "request-sent", at: now, scopes: [scope], attempt: 1 });
      agg.record({
        type: "request-done",
        at: now,
        scopes: [scope],
        attempt: 1,
        latencyMs: 5,
        status: 200,
        error: undefined,
      });
      if (k === 0) {
        agg.record({
          type: "backoff",
          at: now,
          scope,
          delayMs: 1000,
          level: 1,
          concurrency: 1,
          holdUntil: undefined,
          cause: "status 429",
        });
      }
    }
    now = (i + 1) * 1000;
    agg.tick();
  }
  const after = settledHeap();
  const h = agg.history();
  return { mib: (after - before) / 1_048_576, tracked: h.totals.tracked, series: h.series.length };
}

/** Runs the benchmark and returns its Markdown. */
export async function main(argv: readonly string[]): Promise<string> {
  const n = Number(argValue(argv, "requests") ?? 200_000);
  const scopes = Number(argValue(argv, "scopes") ?? 1_000);
  const reps = Number(argValue(argv, "reps") ?? 9);
  const work = Array.from({ length: n }, (_, i) => ({ id: i, scope: `s${i % scopes}` }));
  const modes: Mode[] = ["none", "events$ listener", "dashboard"];
  const times = new Map<Mode, number[]>(modes.map((m) => [m, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const mode of modes) times.get(mode)!.push(await run(mode, work, scopes));
  }
  const base = median(times.get("none")!);
  const rows = modes.map((mode) => {
    const ms = median(times.get(mode)!);
    return [
      mode,
      fmtFixed(ms, 0),
      fmtInt(Math.round((n / ms) * 1000)),
      mode === "none" ? "—" : `${fmtFixed(((ms - base) / base) * 100, 1)} %`,
    ];
  });
  const hour = hourOfScopes(10_000);
  return [
    `### The dashboard's cost: ${fmtInt(n)} requests over ${
      fmtInt(scopes)
    } scopes, instant downloads\n`,
    markdownTable(["listener", "median ms", "requests/s", "cost"], rows),
    `\nMedians of ${reps} interleaved repetitions. The dashboard listens to \`notices$\` and counts ` +
    `requests with \`meterTraffic()\`, so no event is built per request for it.\n`,
    `An hour of a broad crawl over 10,000 scopes in virtual time (20 requests and a backoff a ` +
    `second), the aggregator at its defaults: **${fmtFixed(hour.mib, 1)} MiB** of heap held at ` +
    `the end, ${hour.tracked} scopes tracked, ${hour.series} series sent to a page.`,
  ].join("\n");
}

if (isMain(import.meta)) {
  console.log(await main(process.argv.slice(2)));
}
