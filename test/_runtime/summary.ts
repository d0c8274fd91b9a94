/**
 * Prints the closing line of a test run, "N passed, N failed", added up from
 * the reports of the last `npm test` (see reports.ts). Used by `.ci/run`.
 *
 * @module
 */
import process from "node:process";
import { readSteps, summarize } from "./reports.ts";

const steps = readSteps();
const { total } = summarize(steps);
if (steps.length === 0) total.failed++;
console.log(`${total.passed} passed, ${total.failed} failed`);
process.exit(total.failed === 0 ? 0 : 1);
