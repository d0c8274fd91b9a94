/**
 * `npm run test:examples`: runs every examples/*.ts under Node (tsx), Deno and
 * Bun with no stdin and a time limit, and fails if any exits non-zero. Writes
 * pass/fail counts to the examples report for CI's closing line.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import process from "node:process";
import { type Counts, REPORTS, writeReport } from "./reports.ts";

const LIMIT_MS = 60_000;
const RUNTIMES: Readonly<Record<string, readonly string[]>> = {
  node: ["tsx"],
  deno: ["deno", "run", "-A"],
  bun: ["bun", "run"],
};

const examples = readdirSync("examples").filter((name) => name.endsWith(".ts")).sort();
const counts: Counts = { passed: 0, failed: 0 };
for (const example of examples) {
  for (const [runtime, command] of Object.entries(RUNTIMES)) {
    const [bin = "", ...args] = command;
    // node_modules/.bin is on PATH inside an npm script.
    const run = spawnSync(bin, [...args, `examples/${example}`], {
      stdio: ["ignore", "pipe", "pipe"],
      timeout: LIMIT_MS,
      encoding: "utf8",
    });
    const ok = run.status === 0;
    counts[ok ? "passed" : "failed"]++;
    const why = run.error?.message ??
      (run.signal === null ? `exit ${run.status}` : `killed by ${run.signal}`);
    console.log(
      `${ok ? "ok  " : "FAIL"} ${runtime.padEnd(5)} examples/${example}${ok ? "" : ` (${why})`}`,
    );
    if (!ok) process.stdout.write(`${run.stdout}${run.stderr}\n`);
  }
}
writeReport(REPORTS["test:examples"]!.file, counts);
console.log(
  `${examples.length} examples x ${
    Object.keys(RUNTIMES).length
  } runtimes: ${counts.passed} ok, ${counts.failed} failed`,
);
if (examples.length === 0) {
  console.error("No examples/*.ts to run");
  process.exit(1);
}
process.exit(counts.failed === 0 ? 0 : 1);
