/**
 * Request queue benchmark (issue 5): push+pop throughput and heap per queued
 * request in memory, and with a job directory: enqueue throughput and the
 * time to resume 1,000,000 pending requests.
 *
 * Run: `npx tsx bench/request_queue.bench.ts [requests] [scopes]`.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runInNewContext } from "node:vm";
import { setFlagsFromString } from "node:v8";
import { RequestQueue } from "../lib/request_queue.ts";

const N = Number(process.argv[2] ?? 1_000_000);
const SCOPES = Number(process.argv[3] ?? 10_000);

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function urls(n: number, offset = 0): string[] {
  const out: string[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = `https://s${(i + offset) % SCOPES}.example/p/${i + offset}`;
  return out;
}

function now(): number {
  return performance.now(); // real clock: this is a benchmark
}

/** CPU ms of this process since `from` (the machine may be shared: wall time alone misleads). */
function cpuMs(from: NodeJS.CpuUsage): number {
  const u = process.cpuUsage(from);
  return (u.user + u.system) / 1000;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

function memoryRun(list: string[]): void {
  const queue = new RequestQueue<string>();
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const c0 = process.cpuUsage();
  const t0 = now();
  for (const u of list) queue.enqueue(u);
  const t1 = now();
  const cpuPush = cpuMs(c0);
  gc();
  const heap1 = process.memoryUsage().heapUsed;
  let popped = 0;
  const sub = queue.requests$.subscribe((u) => {
    popped++;
    queue.markDone(u);
  });
  const t2 = now();
  const cpuAll = cpuMs(c0);
  sub.unsubscribe();
  if (popped !== list.length) throw new Error(`popped ${popped} of ${list.length}`);
  const ops = 2 * list.length;
  console.log(
    `memory: ${fmt(list.length)} requests over ${fmt(SCOPES)} scopes: push ${
      fmt(list.length / ((t1 - t0) / 1000))
    }/s, pop+markDone ${fmt(list.length / ((t2 - t1) / 1000))}/s, push+pop ${
      fmt(ops / ((t2 - t0) / 1000))
    } ops/s (target >= 500,000; ${fmt(ops / (cpuAll / 1000))} ops per CPU-second, push ${
      fmt(cpuPush)
    } CPU ms); heap per queued request ${fmt((heap1 - heap0) / list.length)} B`,
  );
}

function jobDirRun(list: string[]): void {
  const dir = mkdtempSync(join(tmpdir(), "politely-bench-"));
  try {
    const queue = new RequestQueue<string>({ jobDir: dir });
    const c0 = process.cpuUsage();
    const t0 = now();
    for (const u of list) queue.enqueue(u);
    queue.flush();
    const t1 = now();
    const cpuEnqueue = cpuMs(c0);
    queue.close();
    const t2 = now();
    const size = statSync(join(dir, "requests.log")).size;
    console.log(
      `jobdir: enqueue ${fmt(list.length)} ${
        fmt(list.length / ((t1 - t0) / 1000))
      }/s (target >= 50,000), ` +
        `clean stop (compaction) ${fmt(t2 - t1)} ms, log ${(size / 1_048_576).toFixed(1)} MiB`,
    );
    gc();
    const c3 = process.cpuUsage();
    const t3 = now();
    const resumed = new RequestQueue<string>({ jobDir: dir });
    const t4 = now();
    const cpuResume = cpuMs(c3);
    if (resumed.size !== list.length) throw new Error(`resumed ${resumed.size} of ${list.length}`);
    console.log(
      `jobdir: resume ${fmt(resumed.size)} pending in ${fmt(t4 - t3)} ms (target < 5,000)`,
    );
    resumed.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const list = urls(N);
memoryRun(urls(20_000, N)); // warm-up
memoryRun(list);
gc();
jobDirRun(list);
