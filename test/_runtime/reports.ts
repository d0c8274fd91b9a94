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
      const json = JSON.parse(text) as {
        numPassedTests: number;
        numFailedTests: number;
        testResults: { status: string; assertionResults: { status: string }[] }[];
      };
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
    return `  ${step.padEnd(14)} ${status}${detail} ${seconds.toFixed(1)}s`;
  });
  return { lines, total };
}

/** Reads the step results the step runner recorded, or [] when there are none. */
export function readSteps(): StepResult[] {
  return existsSync(STEPS_FILE) ? JSON.parse(readFileSync(STEPS_FILE, "utf8")) as StepResult[] : [];
}
