import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { of } from "rxjs";
import { runCrawl } from "../lib/cli/crawl.ts";
import { JsonLinesFile, JsonLinesWriteError } from "../lib/cli/json_lines_file.ts";
import { JobDirWriteError } from "../lib/queue/job_dir.ts";
import { JOB_DIR_LOG } from "../lib/queue/_job_dir_log.ts";
import type { InputLine } from "../lib/cli/input.ts";
import { fillDiskAfter } from "./_helpers/full_disk.ts";

const dirs: string[] = [];
let freeDisk: (() => void) | undefined;
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "politely-jsonl-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  freeDisk?.();
  freeDisk = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const lines = (path: string) =>
  readFileSync(path, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));

describe("JsonLinesFile on a full disk", () => {
  it("JsonLinesFile.flush() leaves whole lines only, closes the file and throws JsonLinesWriteError naming it", () => {
    const path = join(tempDir(), "out.jsonl");
    const file = new JsonLinesFile(path, "output");
    file.write({ n: 1 });
    file.flush();
    freeDisk = fillDiskAfter(5); // `{"n":2}` torn after 5 bytes
    file.write({ n: 2 });
    let error: unknown;
    try {
      file.flush();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(JsonLinesWriteError);
    expect(error).toMatchObject({ path, what: "output", code: "ENOSPC" });
    expect((error as Error).message).toBe(
      `Cannot write output '${path}': ENOSPC: no space left on device, write`,
    );
    expect(file.failed).toBe(error);
    expect(readFileSync(path, "utf8")).toBe('{"n":1}\n');
    // Closed: later writes and close() do nothing and throw nothing.
    file.write({ n: 3 });
    expect(() => file.close()).not.toThrow();
    expect(readFileSync(path, "utf8")).toBe('{"n":1}\n');
  });
});

describe("runCrawl() on a full disk", () => {
  const u = (i: number) => `http://a.test/${i}`;
  function input(n: number): InputLine[] {
    return Array.from({ length: n }, (_, i) => ({
      kind: "request" as const,
      request: { url: u(i + 1) },
    })) as unknown as InputLine[];
  }

  /** Run the same crawl again on the job directory; the URLs it sends. */
  async function resume(jobDir: string): Promise<string[]> {
    const sent: string[] = [];
    const result = await runCrawl({
      settings: { concurrentRequestsPerDomain: 1 },
      input: input(6),
      jobDir,
      view: "quiet",
      stdout: { write: () => true } as never,
      stderr: { write: () => true },
      download: ((request: { url: string }) => {
        sent.push(request.url);
        return of({ status: 200, headers: {}, url: "", body: "" });
      }) as never,
    });
    expect(result.error).toBeUndefined();
    return sent;
  }

  it("runCrawl() ends on a job directory that cannot be written: one line, output closed, resumable", async () => {
    const dir = tempDir();
    const jobDir = join(dir, "job");
    const outPath = join(dir, "out.jsonl");
    const stderr: string[] = [];
    const output = new JsonLinesFile(outPath, "output");
    let sent = 0;
    const download = () => {
      sent++;
      // The job directory's disk fills during the third download: its
      // completion cannot be written (the output is on another disk).
      if (sent === 3) freeDisk = fillDiskAfter(0, (path) => path.startsWith(jobDir));
      return of({ status: 200, headers: {}, url: "", body: "" });
    };
    const result = await runCrawl({
      settings: { concurrentRequestsPerDomain: 1 },
      input: input(6),
      jobDir,
      output,
      view: "quiet",
      stdout: { write: () => true } as never,
      stderr: { write: (t: string) => stderr.push(t) },
      download: download as never,
    });
    expect(result.error).toBeInstanceOf(JobDirWriteError);
    expect(stderr).toEqual([
      `politely: Cannot write job directory file '${
        join(jobDir, JOB_DIR_LOG)
      }': ENOSPC: no space left on device, write\n`,
    ]);
    freeDisk?.();
    freeDisk = undefined;
    // The output is closed with whole lines; the third request's line is on
    // disk but its completion is not, so it is the one a resume sends again.
    expect(lines(outPath).map((l) => l.url)).toEqual([u(1), u(2), u(3)]);
    const resumed = await resume(jobDir);
    expect(resumed).toEqual([u(3), u(4), u(5), u(6)]);
  });

  it("runCrawl() ends on an output that cannot be written: the request whose line was lost is not marked done", async () => {
    const dir = tempDir();
    const jobDir = join(dir, "job");
    const outPath = join(dir, "out.jsonl");
    const stderr: string[] = [];
    const output = new JsonLinesFile(outPath, "output");
    let sent = 0;
    const download = () => {
      if (++sent === 3) freeDisk = fillDiskAfter(0, (path) => path === outPath);
      return of({ status: 200, headers: {}, url: "", body: "" });
    };
    const result = await runCrawl({
      settings: { concurrentRequestsPerDomain: 1 },
      input: input(6),
      jobDir,
      output,
      view: "quiet",
      stdout: { write: () => true } as never,
      stderr: { write: (t: string) => stderr.push(t) },
      download: download as never,
    });
    expect(result.error).toBeInstanceOf(JsonLinesWriteError);
    expect(stderr).toEqual([
      `politely: Cannot write output '${outPath}': ENOSPC: no space left on device, write\n`,
    ]);
    freeDisk?.();
    freeDisk = undefined;
    expect(lines(outPath).map((l) => l.url)).toEqual([u(1), u(2)]);
    const resumed = await resume(jobDir);
    expect(resumed).toEqual([u(3), u(4), u(5), u(6)]);
  });
});
