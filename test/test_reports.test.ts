import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { failedTests, summarize } from "./_runtime/reports.ts";

// The summary at the end of `npm test` names each failed test, so that a CI log
// cut to its last lines still says what failed.
describe("npm test's summary names the failed tests", () => {
  const dir = mkdtempSync(join(tmpdir(), "politely-reports-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string) => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it("reads bun's and deno's junit: file, test name and the message's first lines", () => {
    const file = write(
      "bun.xml",
      `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="bun test" tests="3" failures="1" skipped="0">
  <testsuite name="test/a.test.ts" file="test/a.test.ts" tests="3" failures="1">
    <testcase name="passes" classname="group" file="test/a.test.ts" line="3" />
    <testcase name="compares &quot;x&quot; &amp; y" classname="group" file="test/a.test.ts" line="9">
      <failure type="AssertionError" message="expected 1 to be 2&#10;at line 9" />
    </testcase>
    <testcase name="also passes" classname="group" file="test/a.test.ts"></testcase>
  </testsuite>
</testsuites>`,
    );
    expect(failedTests({ file, kind: "junit" })).toEqual([
      'test/a.test.ts > compares "x" & y: expected 1 to be 2 / at line 9',
    ]);
  });

  it("reads a junit failure whose message is the element's text", () => {
    const file = write(
      "deno.xml",
      `<testsuites tests="1" failures="1"><testsuite name="./test/b.test.ts">
<testcase name="b" classname="./test/b.test.ts"><failure message="">
AssertionError: too slow
    at b.test.ts:4</failure></testcase></testsuite></testsuites>`,
    );
    expect(failedTests({ file, kind: "junit" })).toEqual([
      "./test/b.test.ts > b: AssertionError: too slow / at b.test.ts:4",
    ]);
  });

  it("reads vitest's json, including a file that failed to load", () => {
    const file = write(
      "vitest.json",
      JSON.stringify({
        numPassedTests: 1,
        numFailedTests: 1,
        testResults: [
          {
            name: "/repo/test/c.test.ts",
            status: "failed",
            assertionResults: [
              { status: "passed", fullName: "c ok" },
              {
                status: "failed",
                fullName: "c counts",
                failureMessages: ["\nexpected 3 to be 4\n  at c"],
              },
            ],
          },
          {
            name: "/repo/test/d.test.ts",
            status: "failed",
            message: "Cannot find module x",
            assertionResults: [],
          },
        ],
      }),
    );
    expect(failedTests({ file, kind: "vitest-json" })).toEqual([
      "/repo/test/c.test.ts > c counts: expected 3 to be 4 / at c",
      "/repo/test/d.test.ts: Cannot find module x",
    ]);
  });

  it("lists nothing for a missing report or one without failures", () => {
    expect(failedTests({ file: join(dir, "absent.xml"), kind: "junit" })).toEqual([]);
    const file = write(
      "ok.xml",
      `<testsuites tests="1" failures="0"><testcase name="a" /></testsuites>`,
    );
    expect(failedTests({ file, kind: "junit" })).toEqual([]);
  });

  it("puts the names under their step in the summary's lines", () => {
    const { lines, total } = summarize([{ step: "typecheck", exitCode: 1, seconds: 1 }]);
    expect(total).toEqual({ passed: 0, failed: 1 });
    expect(lines).toEqual(["  typecheck      FAILED (exit 1) 1.0s"]);
  });
});
