/**
 * Broad-crawl benchmark (issue 7): 1,000,000 requests over 1,000,000 distinct
 * hosts through `throttleByScope`, instant downloads, `scopeLimit` 100,000.
 *
 * The requests are fed lazily: a source that keeps at most `--window`
 * requests open (emitted and not yet out as an outcome), and emits more from
 * the outcome handler. `from(array)` would park all million at the gate at
 * once (and hold a million request objects), which measures the parking, not
 * the scopes. The window equals the global cap (`concurrentRequests`).
 *
 * Reported: peak live scopes (sampled at every outcome) against the limit plus
 * the requests in flight, peak heap (heapUsed sampled every 10,000 outcomes,
 * garbage included, and after a forced GC every 100,000), heap per live scope
 * (N scopes retained with no limit: settled heap difference / N, scope names
 * included), and throughput (the forced GCs' time left out) against the core benchmark's 1,000-scope run
 * (200,000 requests over 1,000 scopes, 8 per scope, given with `from`),
 * measured in the same process after a warm-up.
 *
 * Run: `node --expose-gc --import tsx bench/broad.bench.ts [--requests N]
 * [--limit N] [--window N] [--retain N]` (`npx tsx bench/broad.bench.ts` works
 * without the heap figures that need `--expose-gc`).
 *
 * @module
 */
import { from, Observable } from "rxjs";
import { createThrottler, type Throttler } from "../lib/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { argValue, fmtFixed, fmtInt, fmtMiB, heapUsed, markdownTable, now } from "./_harness.ts";

interface Req {
  readonly id: number;
  readonly scope: string;
}

const download = (r: Req): Promise<number> => Promise.resolve(r.id);

function gc(): (() => void) | undefined {
  const g = (globalThis as { gc?: () => void }).gc;
  return typeof g === "function" ? g : undefined;
}

function settled(): number {
  const g = gc();
  if (g === undefined) return Number.NaN;
  g();
  g();
  return heapUsed();
}

/** Stream `n` requests, one new host each, keeping at most `window` open. */
function broad(
  n: number,
  limit: number,
  window: number,
  scopeName = (i: number) => `h${i}.example.com`,
) {
  const throttler = createThrottler<Req>(
    { concurrentRequests: window, scopeLimit: limit },
    { getScopes: (r) => r.scope },
  );
  let peakScopes = 0;
  let peakOver = 0; // live scopes minus those in flight
  let peakHeap = 0;
  let peakSettled = 0;
  const g = gc();
  return new Promise<{
    ms: number;
    throttler: Throttler<Req>;
    peakScopes: number;
    peakOver: number;
    peakHeap: number;
    peakSettled: number;
  }>((done, fail) => {
    let emitted = 0;
    let open = 0;
    let pump: () => void = () => {};
    const source = new Observable<Req>((subscriber) => {
      let pumping = false;
      pump = () => {
        if (pumping) return; // an outcome emitted while we emit: the loop goes on
        pumping = true;
        while (open < window && emitted < n) {
          open++;
          subscriber.next({ id: emitted, scope: scopeName(emitted) });
          emitted++;
        }
        pumping = false;
        if (emitted === n) subscriber.complete();
      };
      pump();
    });
    let count = 0;
    let gcMs = 0;
    const t0 = now();
    source.pipe(throttleByScope(throttler, download)).subscribe({
      next: (o) => {
        if (o.kind !== "response") fail(o.error);
        count++;
        open--;
        const s = throttler.scopeCount;
        if (s > peakScopes) peakScopes = s;
        const over = s - throttler.active;
        if (over > peakOver) peakOver = over;
        if (count % 10_000 === 0) {
          const h = heapUsed();
          if (h > peakHeap) peakHeap = h;
        }
        if (g !== undefined && count % 100_000 === 0) {
          // The forced GC is the measurement's, not the throttler's: its time
          // is left out of the throughput.
          const g0 = now();
          g();
          const h = heapUsed();
          if (h > peakSettled) peakSettled = h;
          gcMs += now() - g0;
        }
        pump();
      },
      error: fail,
      complete: () =>
        done({ ms: now() - t0 - gcMs, throttler, peakScopes, peakOver, peakHeap, peakSettled }),
    });
  });
}

/** The core benchmark's throttleByScope run: `n` requests over `scopes` scopes, given with `from`. */
function core(n: number, scopes: number, perScope: number): Promise<number> {
  const names = Array.from({ length: scopes }, (_, i) => `s${i}`);
  const requests = Array.from({ length: n }, (_, i) => ({ id: i, scope: names[i % scopes]! }));
  const throttler = createThrottler<Req>(
    { concurrentRequests: scopes * perScope, scopeConcurrency: perScope },
    { getScopes: (r) => r.scope },
  );
  return new Promise((done, fail) => {
    const t0 = now();
    from(requests).pipe(throttleByScope(throttler, download)).subscribe({
      next: (o) => {
        if (o.kind !== "response") fail(o.error);
      },
      error: fail,
      complete: () => done(now() - t0),
    });
  });
}

async function main(argv: readonly string[]): Promise<void> {
  const n = Number(argValue(argv, "requests") ?? 1_000_000);
  const limit = Number(argValue(argv, "limit") ?? 100_000);
  const window = Number(argValue(argv, "window") ?? 8_000);
  const retain = Number(argValue(argv, "retain") ?? 100_000);

  // Warm-up of both paths.
  await broad(Math.min(n, 100_000), Math.min(limit, 10_000), window, (i) => `w${i}.example.com`);
  await core(20_000, 1_000, 8);

  const base = settled();
  const b = await broad(n, limit, window);
  const coreMs = await core(200_000, 1_000, 8);

  // Heap per live scope: no limit, no idle eviction, `retain` scopes kept.
  const before = settled();
  const kept = await broad(retain, 0, window, (i) => `k${i}.example.com`);
  const after = settled();
  const perScope = (after - before) / kept.throttler.scopeCount;

  const broadRate = n / (b.ms / 1000);
  const coreRate = 200_000 / (coreMs / 1000);
  const rows = [
    ["requests / distinct hosts", `${fmtInt(n)} / ${fmtInt(n)}`, ""],
    ["scope limit / window (= global cap)", `${fmtInt(limit)} / ${fmtInt(window)}`, ""],
    ["peak live scopes", fmtInt(b.peakScopes), `<= limit + busy (${fmtInt(limit + window)})`],
    ["peak live scopes minus in flight", fmtInt(b.peakOver), `<= limit (${fmtInt(limit)})`],
    ["peak heap, sampled (garbage incl.)", fmtMiB(b.peakHeap), "< 150 MiB"],
    ["peak heap after forced GC", fmtMiB(b.peakSettled), "< 150 MiB"],
    ["heap before the run (settled)", fmtMiB(base), ""],
    [
      `heap per live scope (${fmtInt(kept.throttler.scopeCount)} kept)`,
      `${fmtInt(perScope)} B`,
      "< 500 B",
    ],
    ["broad throughput", `${fmtInt(broadRate)} req/s`, ""],
    ["core 1,000-scope throughput", `${fmtInt(coreRate)} req/s`, ""],
    ["broad / core", `${fmtFixed(broadRate / coreRate)}x`, ">= 0.7x"],
  ];
  console.log(markdownTable(["measure", "value", "target"], rows, ["l", "r", "l"]));
}

await main(process.argv.slice(2));
