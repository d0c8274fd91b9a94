import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runProcess } from "./_helpers/run_process.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

describe("politely demo", () => {
  it("politely demo --duration 3 crawls the five loopback sites and prints its table", async () => {
    const run = await runProcess(process.execPath, [
      join(ROOT, "bin/politely.js"),
      "demo",
      "--duration",
      "3",
    ], { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" } });
    expect(run.code).toBe(0);
    const table = run.stdout.slice(run.stdout.lastIndexOf("site    hidden limit"));
    expect(table).toMatch(/^site {4}hidden limit/);
    for (const name of ["bucket", "capped", "slow", "robots", "fine"]) {
      expect(table).toMatch(new RegExp(`\\n${name} +\\S.*\\d+\\.\\d pages/s +\\d+ +\\d+ `));
    }
    // The summary names the sites, not 127.0.0.1:PORT.
    const summary = run.stdout.slice(
      run.stdout.lastIndexOf("politely: "),
      run.stdout.length - table.length,
    );
    for (const name of ["bucket", "capped", "fine"]) {
      expect(summary).toMatch(new RegExp(`\\n  ${name} +\\d+ +\\d+ +\\d+ +\\d+\\.\\d\\d\\n`));
    }
    expect(summary).not.toContain("127.0.0.1:");
    // Not a terminal: plain lines, never the live view's cursor movements.
    expect(run.stdout).not.toContain("\x1b[");
    expect(run.stdout).toContain("politely: ");
  }, 120_000);
});
