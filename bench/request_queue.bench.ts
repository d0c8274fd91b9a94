/**
 * Request queue benchmark (issue 5): push+pop throughput and heap per queued
 * request in memory, and with a job directory: enqueue throughput, the clean
 * stop (compaction) and the time to resume 1,000,000 pending requests.
 *
 * Every figure is the best of 3 runs, as wall-clock time and as CPU time of
 * this process (`process.cpuUsage`): the machine may be shared, and then the
 * wall clock alone misleads.
 *
 * Run: `npx tsx bench/request_queue.bench.ts [requests] [scopes]`.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runInNewContext } from "node:vm";
import { setFlagsFromString } from "node:v8";
import { NEVER } from "rxjs";
import { type QueueThrottleView, RequestQueue } from "../lib/queue/request_queue.ts";

const N = Number(process.argv[2] ?? 1_000_000);
const SCOPES = Number(process.argv[3] ?? 10_000);
const RUNS = 3;

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function urls(n: number, offset = 0): string[] {
  const out: string[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = `https://s${(i + offset) % SCOPES}.example/p/${i + offset}`;
  // Flat strings, as a parser or `URL.href` gives them (a template literal
  // makes rope strings that the first hash would flatten, inside the timing).
  return JSON.parse(JSON.stringify(out)) as string[];
}

function now(): number {
  return performance.now(); // real clock: this is a benchmark
}

/** Wall and CPU ms of a step. */
interface Timing {
  wall: number;
  cpu: number;
}

function time(f: () => void): Timing {
  const c0 = process.cpuUsage();
  const t0 = now();
  f();
  const t1 = now();
  const u = process.cpuUsage(c0);
  return { wall: t1 - t0, cpu: (u.user + u.system) / 1000 };
}

function best(ts: Timing[]): Timing {
  return { wall: Math.min(...ts.map((t) => t.wall)), cpu: Math.min(...ts.map((t) => t.cpu)) };
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

function rate(count: number, t: Timing): string {
  return `${fmt(count / (t.wall / 1000))}/s wall, ${fmt(count / (t.cpu / 1000))}/s CPU`;
}

function ms(t: Timing): string {
  return `${fmt(t.wall)} ms wall, ${fmt(t.cpu)} ms CPU`;
}

/** A view that lets everything through but is not the queue's built-in one: scope sets are kept. */
const OPEN_VIEW: QueueThrottleView = {
  waitMs: () => 0,
  load: () => 0,
  quotaShare: () => 0,
  freeSlots: () => Infinity,
  changes$: NEVER,
};

function memoryRun(
  list: string[],
  view: QueueThrottleView | undefined,
): { push: Timing; all: Timing; heap: number } {
  const queue = new RequestQueue<string>(view === undefined ? {} : { view });
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const push = time(() => {
    for (const u of list) queue.enqueue(u);
  });
  gc();
  const heap1 = process.memoryUsage().heapUsed;
  let popped = 0;
  const pop = time(() => {
    const sub = queue.requests$.subscribe((u) => {
      popped++;
      queue.markDone(u);
    });
    sub.unsubscribe();
  });
  if (popped !== list.length) throw new Error(`popped ${popped} of ${list.length}`);
  return {
    push,
    all: { wall: push.wall + pop.wall, cpu: push.cpu + pop.cpu },
    heap: (heap1 - heap0) / list.length,
  };
}

function memoryBench(list: string[], view: QueueThrottleView | undefined, label: string): void {
  memoryRun(urls(20_000, N), view); // warm-up
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    gc();
    runs.push(memoryRun(list, view));
  }
  const push = best(runs.map((r) => r.push));
  const all = best(runs.map((r) => r.all));
  console.log(
    `memory (${label}): ${fmt(list.length)} requests over ${fmt(SCOPES)} scopes: ` +
      `push+pop ${rate(2 * list.length, all)} (target >= 500,000 ops/s); ` +
      `push ${rate(list.length, push)}; heap per queued request ${
        fmt(Math.min(...runs.map((r) => r.heap)))
      } B`,
  );
}

function jobDirRun(
  list: string[],
): { enqueue: Timing; close: Timing; resume: Timing; size: number } {
  const dir = mkdtempSync(join(tmpdir(), "politely-bench-"));
  try {
    let queue: RequestQueue<string> | undefined;
    const enqueue = time(() => {
      queue = new RequestQueue<string>({ jobDir: dir });
      for (const u of list) queue.enqueue(u);
      queue.flush();
    });
    const close = time(() => queue?.close());
    const size = statSync(join(dir, "requests.log")).size;
    queue = undefined;
    gc();
    let resumed: RequestQueue<string> | undefined;
    const resume = time(() => {
      resumed = new RequestQueue<string>({ jobDir: dir });
    });
    if (resumed?.size !== list.length) {
      throw new Error(`resumed ${resumed?.size} of ${list.length}`);
    }
    resumed.close();
    return { enqueue, close, resume, size };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function jobDirBench(list: string[]): void {
  const runs = [];
  for (let i = 0; i < RUNS; i++) {
    gc();
    runs.push(jobDirRun(list));
  }
  const enqueue = best(runs.map((r) => r.enqueue));
  console.log(
    `jobdir: enqueue ${fmt(list.length)}: ${rate(list.length, enqueue)} (target >= 50,000/s); ` +
      `clean stop (compaction) ${ms(best(runs.map((r) => r.close)))}, log ${
        ((runs[0]?.size ?? 0) / 1_048_576).toFixed(1)
      } MiB`,
  );
  console.log(
    `jobdir: resume ${fmt(list.length)} pending: ${
      ms(best(runs.map((r) => r.resume)))
    } (target < 5,000 ms)`,
  );
}

const list = urls(N);
memoryBench(list, undefined, "no view");
gc();
memoryBench(list, OPEN_VIEW, "open view, one scope set per scope");
gc();
jobDirBench(list);
