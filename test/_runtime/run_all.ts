/**
 * `npm test`: runs each named npm script in turn, carries on past a failure so
 * one run shows every runtime's result, prints a table and exits non-zero if
 * any step failed. Test steps get a Redis server first (see redis.ts), and the
 * browser the dashboard test drives (see chromium.ts).
 *
 * Usage: tsx test/_runtime/run_all.ts typecheck lint test:node ...
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import process from "node:process";
import { ensureChromium } from "./chromium.ts";
import { ensureRedis, type TestRedis } from "./redis.ts";
import { REPORT_DIR, type StepResult, STEPS_FILE, summarize, writeReport } from "./reports.ts";

const steps = process.argv.slice(2);
if (steps.length === 0) {
  console.error("Usage: tsx test/_runtime/run_all.ts <npm script>...");
  process.exit(2);
}

// Stale reports from an earlier run must not be counted.
rmSync(REPORT_DIR, { recursive: true, force: true });

// The dashboard's page test needs Debian's chromium (test/_runtime/chromium.ts);
// the Redis tests and examples need a server: the one on $REDIS_PORT, or one
// started here for the run (test/_runtime/redis.ts).
let redis: TestRedis | undefined;
if (steps.some((s) => s.startsWith("test:"))) {
  try {
    ensureChromium();
    redis = await ensureRedis();
  } catch (error) {
    console.error(`npm test: ${(error as Error).message}`);
    process.exit(1);
  }
}

const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const results: StepResult[] = [];
for (const step of steps) {
  console.log(`\n=== npm run ${step}`);
  const started = process.hrtime.bigint();
  const run = spawnSync(npm, ["run", "--silent", step], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  results.push({ step, exitCode: run.status ?? 1, seconds });
  writeReport(STEPS_FILE, results);
}

redis?.stop();

const { lines, total } = summarize(results);
console.log(`\n=== summary\n${lines.join("\n")}`);
console.log(`  total          ${total.passed} passed / ${total.failed} failed`);
process.exit(results.every((r) => r.exitCode === 0) ? 0 : 1);
