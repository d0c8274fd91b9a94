/**
 * Core benchmark (issue 2): the same work through `throttleByScope` and its
 * peers. 200,000 requests over 1,000 scopes, at most 8 in flight per scope,
 * no delay, a download that resolves at once.
 *
 * Every contender runs in its own `node --expose-gc` child process, once per
 * repetition, contenders interleaved, so heaps never mix and drift of the
 * machine hits all of them alike. In each child: a warm-up run (a tenth of
 * the work), the timed run, five steady-state runs right after it with no
 * forced GC between (fewer once they took 3 s of CPU), then a memory run
 * (the same work with a forced GC at the first result and every 10,000
 * results).
 *
 * Run: `npm run bench -- core` or `node --expose-gc --import tsx bench/core.bench.ts
 * [--requests N] [--scopes N] [--reps N]`.
 *
 * @module
 */
import Bottleneck from "bottleneck";
import pLimit from "p-limit";
import PQueue from "p-queue";
import { from, groupBy, mergeMap, Observable, type OperatorFunction } from "rxjs";
import { createThrottler, preciseScheduler, throttleByScope } from "../mod.ts";
import {
  argValue,
  fmtFixed,
  fmtInt,
  fmtMiB,
  gcOrThrow,
  heapUsed,
  isMain,
  machine,
  markdownTable,
  median,
  now,
  reportToParent,
  runChild,
  settledHeap,
} from "./_harness.ts";

/** One unit of work: an id and its scope key (the same key for every contender). */
export interface BenchRequest {
  readonly id: number;
  readonly scope: string;
}

/** Runs all requests, calls `sink` once per result, resolves when all are done. */
type Contender = (
  requests: readonly BenchRequest[],
  sink: (value: number) => void,
  perScope: number,
) => Promise<void>;

/** The download every contender calls: resolves at once. */
function download(request: BenchRequest): Promise<number> {
  return Promise.resolve(request.id);
}

/** One key of the semaphore: in flight, waiting, and the scope list an outcome names. */
interface SemaphoreKey {
  active: number;
  readonly waiting: BenchRequest[];
  head: number;
  readonly scopes: readonly string[];
}

/** What the timed floor emits: the fields every outcome of the gate carries. */
interface BareOutcome {
  readonly kind: "response";
  readonly request: BenchRequest;
  readonly response: number;
  readonly scopes: readonly string[];
  readonly attempt: number;
  readonly sentAt: number;
  readonly latencyMs: number;
}

/**
 * The floor of issue 14: `download` per request, at most `perKey` at once per
 * scope. `timed`: each answer comes out as an outcome with the send time and
 * the latency read from the gate's default clock, the least any outcome of
 * the gate carries (two clock readings and an object per request).
 */
function semaphoreByKey(perKey: number, timed: true): OperatorFunction<BenchRequest, BareOutcome>;
function semaphoreByKey(perKey: number, timed?: false): OperatorFunction<BenchRequest, number>;
function semaphoreByKey(
  perKey: number,
  timed = false,
): OperatorFunction<BenchRequest, number | BareOutcome> {
  return (source) =>
    new Observable<number | BareOutcome>((subscriber) => {
      const keys = new Map<string, SemaphoreKey>();
      let open = 0;
      let sourceDone = false;
      const start = (r: BenchRequest, key: SemaphoreKey) => {
        key.active++;
        const sentAt = timed ? preciseScheduler.now() : 0;
        download(r).then((v) => {
          subscriber.next(
            timed
              ? {
                kind: "response",
                request: r,
                response: v,
                scopes: key.scopes,
                attempt: 1,
                sentAt,
                latencyMs: preciseScheduler.now() - sentAt,
              }
              : v,
          );
          key.active--;
          open--;
          if (key.head < key.waiting.length) start(key.waiting[key.head++]!, key);
          if (sourceDone && open === 0) subscriber.complete();
        }, (e) => subscriber.error(e));
      };
      return source.subscribe({
        next: (r) => {
          open++;
          let key = keys.get(r.scope);
          if (key === undefined) {
            keys.set(r.scope, key = { active: 0, waiting: [], head: 0, scopes: [r.scope] });
          }
          if (key.active < perKey) start(r, key);
          else key.waiting.push(r);
        },
        error: (e) => subscriber.error(e),
        complete: () => {
          sourceDone = true;
          if (open === 0) subscriber.complete();
        },
      });
    });
}

const CONTENDERS: Record<string, { run: Contender; scale: number; label: string }> = {
  throttleByScope: {
    label: "politely throttleByScope",
    scale: 1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        const scopes = new Set(requests.map((r) => r.scope)).size;
        const throttler = createThrottler<BenchRequest>(
          // The global cap is set high enough never to be the limit.
          { concurrentRequests: scopes * perScope, scopeConcurrency: perScope },
          { getScopes: (r) => r.scope },
        );
        from(requests).pipe(throttleByScope(throttler, download)).subscribe({
          next: (outcome) => {
            if (outcome.kind !== "response") fail(outcome.error);
            else sink(outcome.response);
          },
          error: fail,
          complete: () => done(),
        });
      }),
  },
  rxjs: {
    label: "bare RxJS groupBy + mergeMap (floor)",
    scale: 1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        from(requests).pipe(
          groupBy((r) => r.scope),
          mergeMap((group) => group.pipe(mergeMap(download, perScope))),
        ).subscribe({ next: sink, error: fail, complete: () => done() });
      }),
  },
  semaphore: {
    // Issue 14's floor: what the gate does at its simplest, as an RxJS
    // operator over the same source: a counter and a FIFO of waiters per key,
    // no throttling features at all.
    label: "per-key semaphore operator, 20 lines (floor)",
    scale: 1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        from(requests).pipe(semaphoreByKey(perScope)).subscribe({
          next: sink,
          error: fail,
          complete: () => done(),
        });
      }),
  },
  "semaphore-timed": {
    // The same semaphore emitting what every outcome of the gate carries
    // (sentAt and latencyMs from the gate's default clock): the most a gate
    // with those outcomes could reach, throttling features aside.
    label: "the same semaphore, emitting outcomes with send time and latency (floor)",
    scale: 1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        from(requests).pipe(semaphoreByKey(perScope, true)).subscribe({
          next: (outcome) => sink(outcome.response),
          error: fail,
          complete: () => done(),
        });
      }),
  },
  "p-queue": {
    label: "p-queue, one per scope",
    scale: 1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        const queues = new Map<string, PQueue>();
        let left = requests.length;
        for (const r of requests) {
          let queue = queues.get(r.scope);
          if (queue === undefined) {
            queues.set(r.scope, queue = new PQueue({ concurrency: perScope }));
          }
          queue.add(() => download(r)).then((v) => {
            sink(v);
            if (--left === 0) done();
          }, fail);
        }
      }),
  },
  "p-limit": {
    label: "p-limit, one per scope",
    scale: 1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        const limits = new Map<string, ReturnType<typeof pLimit>>();
        let left = requests.length;
        for (const r of requests) {
          let limit = limits.get(r.scope);
          if (limit === undefined) limits.set(r.scope, limit = pLimit(perScope));
          limit(download, r).then((v) => {
            sink(v);
            if (--left === 0) done();
          }, fail);
        }
      }),
  },
  bottleneck: {
    label: "Bottleneck.Group",
    // It runs for minutes on the whole work: a tenth, figures scaled per second.
    scale: 0.1,
    run: (requests, sink, perScope) =>
      new Promise((done, fail) => {
        const group = new Bottleneck.Group({ maxConcurrent: perScope });
        let left = requests.length;
        for (const r of requests) {
          group.key(r.scope).schedule(download, r).then((v) => {
            sink(v);
            if (--left === 0) {
              void group.disconnect();
              done();
            }
          }, fail);
        }
      }),
  },
};

function makeRequests(n: number, scopes: number): BenchRequest[] {
  const names = Array.from({ length: scopes }, (_, i) => `s${i}`);
  return Array.from({ length: n }, (_, i) => ({ id: i, scope: names[i % scopes]! }));
}

/** What one child measures. */
interface ChildResult {
  readonly name: string;
  readonly requests: number;
  /** Timed run: wall-clock ms and requests/s. */
  readonly ms: number;
  readonly perSecond: number;
  /**
   * Timed run: requests per second of CPU time (the process's user and system
   * time, its GC threads included): steadier than wall-clock time on a
   * machine other work shares.
   */
  readonly perCpuSecond: number;
  /** Timed run: highest heapUsed sampled every 1,000 results, minus the settled baseline (garbage included). */
  readonly peakSampled: number;
  /** Memory run: highest heapUsed right after a forced GC (first result, then every 10,000), minus the baseline. */
  readonly peakLive: number;
  /**
   * Steady state: requests per CPU second, median of five runs back to back
   * with no forced GC before them (fewer for a slow contender: 3 s of CPU).
   * The timed run comes right after forced GCs, which free the objects of the
   * warm-up's pipeline that optimised code refers to, so V8 throws that code
   * away ("weak objects"): the timed run of a contender with much code (the
   * gate: about 60 functions compiled again, 9 deoptimisations) includes
   * compiling it again (docs/BENCHMARKS.md). A long crawl keeps its pipeline
   * and its code.
   */
  readonly perCpuSecondSteady: number;
}

async function timed(
  run: Contender,
  requests: readonly BenchRequest[],
  perScope: number,
  forceGc: boolean,
) {
  const gc = gcOrThrow();
  const every = forceGc ? 10_000 : 1_000;
  const base = settledHeap();
  let count = 0;
  let peak = 0;
  const sink = (_value: number) => {
    count++;
    if (count === 1 || count % every === 0) {
      if (forceGc) gc();
      const h = heapUsed();
      if (h > peak) peak = h;
    }
  };
  const t0 = now();
  const cpu0 = process.cpuUsage();
  await run(requests, sink, perScope);
  const ms = now() - t0;
  const cpu = process.cpuUsage(cpu0);
  if (count !== requests.length) {
    throw new Error(`got ${count} results for ${requests.length} requests`);
  }
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000, peak: peak - base };
}

/** CPU ms of one run, with no forced GC and no heap reading (see `ChildResult.perCpuSecondSteady`). */
async function steadyRun(
  run: Contender,
  requests: readonly BenchRequest[],
  perScope: number,
): Promise<number> {
  let count = 0;
  const cpu0 = process.cpuUsage();
  await run(requests, () => count++, perScope);
  const cpu = process.cpuUsage(cpu0);
  if (count !== requests.length) {
    throw new Error(`got ${count} results for ${requests.length} requests`);
  }
  return (cpu.user + cpu.system) / 1000;
}

async function child(argv: readonly string[]): Promise<void> {
  const name = argValue(argv, "child")!;
  const entry = CONTENDERS[name];
  if (entry === undefined) throw new Error(`unknown contender ${name}`);
  const n = Math.round(Number(argValue(argv, "requests") ?? 200_000) * entry.scale);
  const scopes = Number(argValue(argv, "scopes") ?? 1_000);
  const perScope = Number(argValue(argv, "per-scope") ?? 8);
  const requests = makeRequests(n, scopes);
  await timed(entry.run, requests.slice(0, Math.max(1_000, Math.round(n / 10))), perScope, false);
  const t = await timed(entry.run, requests, perScope, false);
  // Right after the timed run, before the memory run's forced GCs: five
  // runs, or fewer once they took 3 s of CPU (the slow contenders).
  const steadyMs: number[] = [];
  let steadyTotal = 0;
  while (steadyMs.length < 5 && steadyTotal < 3_000) {
    const ms = await steadyRun(entry.run, requests, perScope);
    steadyMs.push(ms);
    steadyTotal += ms;
  }
  const m = await timed(entry.run, requests, perScope, true);
  const result: ChildResult = {
    name,
    requests: n,
    ms: t.ms,
    perSecond: n / (t.ms / 1000),
    perCpuSecond: n / (t.cpuMs / 1000),
    peakSampled: t.peak,
    peakLive: m.peak,
    perCpuSecondSteady: n / (median(steadyMs) / 1000),
  };
  reportToParent(result);
}

async function parent(argv: readonly string[]): Promise<void> {
  const requests = Number(argValue(argv, "requests") ?? 200_000);
  const scopes = Number(argValue(argv, "scopes") ?? 1_000);
  const reps = Number(argValue(argv, "reps") ?? 5);
  const only = argValue(argv, "only")?.split(",");
  const names = Object.keys(CONTENDERS).filter((n) => only === undefined || only.includes(n));
  const file = new URL(import.meta.url).pathname;
  const results = new Map<string, ChildResult[]>(names.map((n) => [n, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const name of names) {
      const r = await runChild<ChildResult>(file, [
        "--child",
        name,
        "--requests",
        String(requests),
        "--scopes",
        String(scopes),
      ]);
      results.get(name)!.push(r);
      process.stderr.write(
        `core rep ${rep + 1}/${reps} ${name}: ${fmtInt(r.perSecond)} req/s, ${
          fmtInt(r.perCpuSecond)
        } req/CPU s (steady ${fmtInt(r.perCpuSecondSteady)}), live peak ${fmtMiB(r.peakLive)}\n`,
      );
    }
  }
  const summary = new Map(
    names.map((name) => {
      const rs = results.get(name)!;
      return [name, {
        requests: rs[0]!.requests,
        perSecond: median(rs.map((r) => r.perSecond)),
        perCpuSecond: median(rs.map((r) => r.perCpuSecond)),
        perCpuSecondSteady: median(rs.map((r) => r.perCpuSecondSteady)),
        min: Math.min(...rs.map((r) => r.perSecond)),
        max: Math.max(...rs.map((r) => r.perSecond)),
        peakLive: median(rs.map((r) => r.peakLive)),
        peakSampled: median(rs.map((r) => r.peakSampled)),
      }];
    }),
  );
  const rows = names.map((name) => {
    const s = summary.get(name)!;
    const scaled = s.requests !== requests;
    return [
      CONTENDERS[name]!.label,
      `${fmtInt(s.requests)}${scaled ? " (scaled)" : ""}`,
      fmtInt(s.perSecond),
      fmtInt(s.perCpuSecond),
      fmtInt(s.perCpuSecondSteady),
      `${fmtInt(s.min)}–${fmtInt(s.max)}`,
      fmtMiB(s.peakLive),
      `${fmtInt(s.peakLive / s.requests)} B`,
      fmtMiB(s.peakSampled),
    ];
  });
  const out: string[] = [];
  out.push(
    `### Core: ${fmtInt(requests)} requests over ${
      fmtInt(scopes)
    } scopes, 8 per scope, instant download`,
  );
  out.push("");
  out.push(markdownTable(
    [
      "Contender",
      "Requests",
      "Requests/s (median)",
      "Requests/CPU s (median)",
      "Steady state, requests/CPU s",
      "Range (requests/s)",
      "Peak live heap",
      "Live heap / request",
      "Peak heap, garbage incl.",
    ],
    rows,
  ));
  out.push("");
  out.push(
    `Median of ${reps} runs, each contender in its own process after a warm-up run. ` +
      "Peak live heap: heap used after a forced GC at the first result (all requests queued) and every " +
      "10,000 results, minus the heap before the run (the request objects themselves excluded). " +
      "Peak heap, garbage incl.: heap used sampled every 1,000 results in the timed run, no forced GC. " +
      "Requests/CPU s: per second of the process's CPU time in the timed run (GC threads included). " +
      "Steady state: the same, median of five runs right after the timed run (fewer for a slow " +
      "contender: 3 s of CPU), no forced GC before them " +
      "(the timed run follows forced GCs, after which V8 compiles the optimised code of the run before again). " +
      (names.includes("bottleneck")
        ? `Bottleneck gets a tenth of the work (${
          fmtInt(summary.get("bottleneck")!.requests)
        } requests); ` +
          "its requests/s are comparable, its heap is not. "
        : "") +
      machine() + ".",
  );
  const tbs = results.get("throttleByScope");
  const rx = results.get("rxjs");
  const pq = results.get("p-queue");
  const sem = results.get("semaphore");
  const semTimed = results.get("semaphore-timed");
  if (tbs !== undefined && rx !== undefined && pq !== undefined) {
    // Ratios are paired per repetition (the contenders of one repetition ran
    // back to back), then the median is taken: steadier on a shared machine.
    const paired = (
      a: readonly ChildResult[],
      b: readonly ChildResult[],
      f: (r: ChildResult) => number,
    ) => median(a.map((r, i) => f(r) / f(b[i]!)));
    const speedRx = paired(tbs, rx, (r) => r.perSecond);
    const speedPq = paired(tbs, pq, (r) => r.perSecond);
    const speedSem = sem === undefined ? undefined : paired(tbs, sem, (r) => r.perSecond);
    const cpuSem = sem === undefined ? undefined : paired(tbs, sem, (r) => r.perCpuSecond);
    const steadySem = sem === undefined ? undefined : paired(tbs, sem, (r) => r.perCpuSecondSteady);
    const timedSem = semTimed === undefined ? undefined : paired(tbs, semTimed, (r) => r.perSecond);
    const floorSem = sem === undefined || semTimed === undefined
      ? undefined
      : paired(semTimed, sem, (r) => r.perSecond);
    const heapRx = paired(tbs, rx, (r) => r.peakLive);
    const heapRxSampled = paired(tbs, rx, (r) => r.peakSampled);
    const ok = (b: boolean) => (b ? "met" : "**missed**");
    out.push("");
    out.push(markdownTable(["Target (issue 2)", "Measured", "Result"], [
      ["throttleByScope ≥ 0.8x bare RxJS requests/s", `${fmtFixed(speedRx)}x`, ok(speedRx >= 0.8)],
      ["throttleByScope ≥ 3x p-queue requests/s", `${fmtFixed(speedPq)}x`, ok(speedPq >= 3)],
      ...(speedSem === undefined ? [] : [[
        "throttleByScope ≥ 0.6x a per-key semaphore's requests/s (issue 14)",
        `${fmtFixed(speedSem)}x`,
        ok(speedSem >= 0.6),
      ], [
        "the same by requests per CPU second",
        `${fmtFixed(cpuSem!)}x`,
        ok(cpuSem! >= 0.6),
      ], [
        "the same in steady state (per CPU second)",
        `${fmtFixed(steadySem!)}x`,
        ok(steadySem! >= 0.6),
      ]]),
      ...(timedSem === undefined ? [] : [[
        "(no target) throttleByScope against the semaphore emitting timed outcomes",
        `${fmtFixed(timedSem)}x`,
        "-",
      ]]),
      ...(floorSem === undefined ? [] : [[
        "(no target) the semaphore emitting timed outcomes against the bare semaphore",
        `${fmtFixed(floorSem)}x`,
        "-",
      ]]),
      [
        "throttleByScope peak live heap ≤ 1.5x bare RxJS",
        `${fmtFixed(heapRx)}x`,
        ok(heapRx <= 1.5),
      ],
      [
        "throttleByScope peak heap (garbage incl.) ≤ 1.5x bare RxJS",
        `${fmtFixed(heapRxSampled)}x`,
        ok(heapRxSampled <= 1.5),
      ],
    ], ["l", "r", "l"]));
    out.push("");
    out.push("Ratios: median over the repetitions of the ratio within each repetition.");
  }
  console.log(out.join("\n"));
}

if (isMain(import.meta)) {
  const argv = process.argv.slice(2);
  await (argValue(argv, "child") !== undefined ? child(argv) : parent(argv));
}
