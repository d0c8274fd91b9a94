/**
 * Where each test step leaves its machine-readable report, and how to count
 * one. Shared by the step runner (`npm test`) and `.ci/run`'s closing line.
 *
 * @module
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";

/** Folder of all reports (gitignored). */
export const REPORT_DIR = ".reports";

/** Passed and failed test counts of one step. */
export interface Counts {
  passed: number;
  failed: number;
}

/** A step's report file and how to read it. */
export interface Report {
  file: string;
  kind: "vitest-json" | "junit" | "counts-json";
}

/** The report each test step writes; steps not listed (typecheck, lint) have none. */
export const REPORTS: Readonly<Record<string, Report>> = {
  "test:node": { file: `${REPORT_DIR}/vitest.json`, kind: "vitest-json" },
  "test:bun": { file: `${REPORT_DIR}/bun.xml`, kind: "junit" },
  "test:deno": { file: `${REPORT_DIR}/deno.xml`, kind: "junit" },
  // The @example blocks of lib/ and operators/, type-checked and run.
  "test:doc": { file: `${REPORT_DIR}/doc.xml`, kind: "junit" },
  "test:examples": { file: `${REPORT_DIR}/examples.json`, kind: "counts-json" },
};

/** File where the step runner records each step's exit code. */
export const STEPS_FILE = `${REPORT_DIR}/steps.json`;

/** Writes a JSON file under REPORT_DIR, creating the folder. */
export function writeReport(file: string, value: unknown): void {
  mkdirSync(REPORT_DIR, { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** The parts of vitest's JSON report read here. */
interface VitestReport {
  numPassedTests: number;
  numFailedTests: number;
  testResults: {
    name: string;
    /** "failed" also for a file that failed to load (it has no failed test). */
    status: string;
    message?: string;
    assertionResults: { status: string; fullName: string; failureMessages?: string[] }[];
  }[];
}

function attribute(tag: string, name: string): number {
  const match = new RegExp(`\\s${name}="(\\d+)"`).exec(tag);
  return match?.[1] === undefined ? 0 : Number(match[1]);
}

/**
 * Counts one report.
 *
 * @returns the counts, or undefined when the file is missing
 * @throws {SyntaxError} when the file cannot be read as its kind
 */
export function countReport(report: Report): Counts | undefined {
  if (!existsSync(report.file)) return undefined;
  const text = readFileSync(report.file, "utf8");
  switch (report.kind) {
    case "vitest-json": {
      const json = JSON.parse(text) as VitestReport;
      // A file that fails to load has no failed test, only a failed status.
      const brokenFiles =
        json.testResults.filter((file) =>
          file.status === "failed" && !file.assertionResults.some((t) => t.status === "failed")
        ).length;
      return { passed: json.numPassedTests, failed: json.numFailedTests + brokenFiles };
    }
    case "junit": {
      const tag = /<testsuites\b[^>]*>/.exec(text)?.[0];
      if (tag === undefined) throw new SyntaxError(`No <testsuites> element in ${report.file}`);
      const failed = attribute(tag, "failures") + attribute(tag, "errors");
      const passed = attribute(tag, "tests") - failed - attribute(tag, "skipped");
      return { passed, failed };
    }
    case "counts-json":
      return JSON.parse(text) as Counts;
  }
}

function unescapeXml(text: string): string {
  return text.replace(
    /&(lt|gt|quot|apos|amp|#(\d+)|#x([0-9a-f]+));/gi,
    (_m, name: string, dec?: string, hex?: string) => {
      if (dec !== undefined) return String.fromCodePoint(Number(dec));
      if (hex !== undefined) return String.fromCodePoint(parseInt(hex, 16));
      return { lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" }[name.toLowerCase()] ?? "";
    },
  );
}

/** The message's first three non-empty lines, on one line ("expect(x).toBe(y) / Expected: 2 / Received: 1"). */
function firstLine(text: string | undefined): string {
  const line = (text ?? "").split("\n").map((l) => l.trim()).filter((l) => l !== "").slice(0, 3)
    .join(" / ");
  return line.length > 200 ? `${line.slice(0, 197)}...` : line;
}

/**
 * The failed tests of one report, each as "file > test: first line of the
 * message", so that a failure is named at the end of a long log.
 *
 * @returns [] when the file is missing or nothing failed
 */
export function failedTests(report: Report): string[] {
  if (!existsSync(report.file)) return [];
  const text = readFileSync(report.file, "utf8");
  switch (report.kind) {
    case "vitest-json": {
      const json = JSON.parse(text) as VitestReport;
      return json.testResults.flatMap((file) => {
        const failed = file.assertionResults.filter((t) => t.status === "failed");
        if (failed.length === 0) {
          return file.status === "failed" ? [`${file.name}: ${firstLine(file.message)}`] : [];
        }
        return failed.map((t) =>
          `${file.name} > ${t.fullName}: ${firstLine(t.failureMessages?.[0])}`
        );
      });
    }
    case "junit": {
      const names: string[] = [];
      const testcase = /<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g;
      for (const match of text.matchAll(testcase)) {
        const body = match[3] ?? "";
        const failure = /<(failure|error)\b([^>]*?)(\/>|>([\s\S]*?)<\/\1>)/.exec(body);
        if (failure === null) continue;
        const attrs = match[1] ?? "";
        const attr = (name: string) =>
          unescapeXml(new RegExp(`\\s${name}="([^"]*)"`).exec(attrs)?.[1] ?? "");
        const message = unescapeXml(
          /\smessage="([^"]*)"/.exec(failure[2] ?? "")?.[1] || failure[4] || "",
        );
        const where = [attr("file") || attr("classname"), attr("name")].filter((s) => s !== "")
          .join(" > ");
        names.push(`${where}: ${firstLine(message)}`);
      }
      return names;
    }
    case "counts-json":
      return [];
  }
}

/** One step's result, as recorded by the step runner. */
export interface StepResult {
  step: string;
  exitCode: number;
  seconds: number;
}

/**
 * Adds up every step's report. A failed step whose report shows no failed
 * test (typecheck, lint, a runner that crashed or wrote no report) counts as
 * one failure, so the total never says 0 failed when a step failed.
 */
export function summarize(steps: readonly StepResult[]): { lines: string[]; total: Counts } {
  const total: Counts = { passed: 0, failed: 0 };
  const lines = steps.map(({ step, exitCode, seconds }) => {
    const report = REPORTS[step];
    const counts = report === undefined ? undefined : countReport(report);
    const failed = Math.max(counts?.failed ?? 0, exitCode === 0 ? 0 : 1);
    total.passed += counts?.passed ?? 0;
    total.failed += failed;
    const status = exitCode === 0 ? "ok" : `FAILED (exit ${exitCode})`;
    const detail = counts === undefined
      ? report === undefined ? "" : " (no report)"
      : ` (${counts.passed} passed / ${failed} failed)`;
    const named = report === undefined || failed === 0 ? [] : failedTests(report);
    return [
      `  ${step.padEnd(14)} ${status}${detail} ${seconds.toFixed(1)}s`,
      ...named.map((n) => `      failed: ${n}`),
    ]
      .join("\n");
  });
  return { lines, total };
}

/** Reads the step results the step runner recorded, or [] when there are none. */
export function readSteps(): StepResult[] {
  return existsSync(STEPS_FILE) ? JSON.parse(readFileSync(STEPS_FILE, "utf8")) as StepResult[] : [];
}
