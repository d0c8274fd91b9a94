/**
 * Shared pieces of the benchmarks: a real clock, forced GC and heap readings,
 * one child process per contender (so heaps never mix), medians and
 * percentiles, and Markdown tables.
 *
 * A bench file is a plain script: `node --expose-gc --import tsx bench/<name>.bench.ts`
 * prints Markdown to stdout. `bench/run.ts` runs every such file.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { cpus, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { dirname, resolve } from "node:path";

/** The repository root (where `--import tsx` resolves). */
export const ROOT: string = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Milliseconds on a monotonic clock. */
export function now(): number {
  return performance.now(); // real clock: this is a benchmark
}

/** `globalThis.gc` when the process runs with `--expose-gc`, else a function that throws. */
export function gcOrThrow(): () => void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== "function") {
    throw new Error("run with `node --expose-gc --import tsx ...` (bench/run.ts does this)");
  }
  return gc;
}

/** V8 heap in use, in bytes. */
export function heapUsed(): number {
  return process.memoryUsage().heapUsed;
}

/** Forced full GC (twice, so weak references and finalizers settle), then heap in use. */
export function settledHeap(): number {
  const gc = gcOrThrow();
  gc();
  gc();
  return heapUsed();
}

/**
 * Run a bench file (or the same file as a child with arguments) in a fresh
 * `node --expose-gc --import tsx` process and return its stdout. Stderr is
 * passed through.
 */
export function runNode(
  file: string,
  args: readonly string[] = [],
  opts: { echo?: boolean } = {},
): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", file, ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      if (opts.echo) process.stdout.write(chunk);
    });
    child.on("error", fail);
    child.on("close", (code, signal) => {
      if (code === 0) done(out);
      else fail(new Error(`${file} ${args.join(" ")} exited with ${signal ?? code}`));
    });
  });
}

/** Prefix of the one line of JSON a child prints as its result. */
const RESULT_PREFIX = "@@result ";

/** In a child: print the result for the parent to read. */
export function reportToParent(result: unknown): void {
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`);
}

/** In the parent: run a child and read the result it printed. */
export async function runChild<T>(file: string, args: readonly string[]): Promise<T> {
  const out = await runNode(file, args);
  const line = out.split("\n").find((l) => l.startsWith(RESULT_PREFIX));
  if (line === undefined) throw new Error(`${file} ${args.join(" ")} printed no result:\n${out}`);
  return JSON.parse(line.slice(RESULT_PREFIX.length)) as T;
}

/** The value of `--name value` in argv, or `undefined`. */
export function argValue(argv: readonly string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** The median of some numbers (mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  return percentile(values, 0.5);
}

/** Linear-interpolated percentile, `p` in [0, 1]. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * p;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/** A whole number with thousands separators. */
export function fmtInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a";
}

/** Bytes as MiB with one decimal. */
export function fmtMiB(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / 1_048_576).toFixed(1)} MiB` : "n/a";
}

/** A number with fixed decimals. */
export function fmtFixed(n: number, digits = 2): string {
  return Number.isFinite(n) ? n.toFixed(digits) : "n/a";
}

/** A Markdown table, padded for reading as text; by default the first column is left-aligned, the rest right. */
export function markdownTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  align?: readonly ("l" | "r")[],
): string {
  const a = align ?? headers.map((_, i) => (i === 0 ? "l" : "r"));
  const widths = headers.map((h, i) =>
    Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? "").length))
  );
  const line = (cells: readonly string[]) =>
    `| ${
      cells.map((c, i) => (a[i] === "r" ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(
        " | ",
      )
    } |`;
  const rule = `| ${
    widths.map((w, i) => (a[i] === "r" ? `${"-".repeat(w - 1)}:` : "-".repeat(w))).join(" | ")
  } |`;
  return [line(headers), rule, ...rows.map(line)].join("\n");
}

/** One line describing the machine and runtime, for the tables. */
export function machine(): string {
  const cpu = cpus();
  return `Node ${process.versions.node} (tsx), V8 ${process.versions.v8}, ${cpu.length} × ${
    cpu[0]?.model.trim() ?? "unknown CPU"
  }, ${fmtMiB(totalmem()).replace(" MiB", "")} MiB RAM, ${process.platform}/${process.arch}`;
}

/** Whether this module is the entry point of the process. */
export function isMain(meta: ImportMeta): boolean {
  return process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(meta.url);
}
