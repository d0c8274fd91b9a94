import { afterEach, describe, expect, it } from "vitest";
import {
  appendFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import process from "node:process";
import { JobDir, JobDirWriteError } from "../lib/queue/job_dir.ts";
import { JOB_DIR_LOG } from "../lib/queue/_job_dir_log.ts";
import { JOB_DIR_LOCK } from "../lib/queue/job_dir_lock.ts";
import { fillDiskAfter } from "./_helpers/full_disk.ts";
import { type QueueWarning, RequestQueue } from "../lib/queue/request_queue.ts";
import type { RequestObject } from "../lib/request.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "politely-jobdir-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const u = (p: string) => `https://a.example/${p}`;

let exitedPid: number | undefined;
/**
 * The process holding `dir` dies here, as far as the job directory can tell:
 * its lock now names a process that has exited. (Its queue is not used again;
 * test/job_dir_lock.test.ts kills real processes.)
 */
function dies(dir: string): void {
  exitedPid ??= spawnSync(process.execPath, ["--version"]).pid;
  const path = join(dir, JOB_DIR_LOCK);
  const lock = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  writeFileSync(path, JSON.stringify({ ...lock, pid: exitedPid, token: "dead" }) + "\n");
}

function drainAll<R>(q: RequestQueue<R>): R[] {
  const out: R[] = [];
  q.requests$.subscribe((r) => {
    out.push(r);
    q.markDone(r);
  });
  return out;
}

function warningsOf(q: RequestQueue<unknown>): QueueWarning[] {
  const w: QueueWarning[] = [];
  q.warnings$.subscribe((x) => w.push(x)).unsubscribe();
  return w;
}

describe("JobDir", () => {
  it("RequestQueue resumes pending requests in order after a clean stop and remembers seen fingerprints", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<string>({ jobDir: dir });
    for (const p of ["1", "2", "3"]) q1.enqueue(u(p));
    q1.enqueue({ url: u("s"), priority: 2 } as unknown as string, { start: true });
    expect(q1.stats()).toMatchObject({ enqueuedDisk: 4, enqueuedMemory: 0 });
    q1.close();
    const q2 = new RequestQueue<string | RequestObject>({ jobDir: dir });
    expect(q2.stats().resumed).toBe(4);
    expect(q2.enqueue(u("2"))).toBe(false);
    // Known from the earlier run (a resume re-reading its input), not a duplicate of this one.
    expect(q2.stats()).toMatchObject({ known: 1, filtered: 0 });
    expect(q2.enqueue(u("new"))).toBe(true);
    expect(q2.enqueue(u("new"))).toBe(false);
    expect(q2.stats()).toMatchObject({ known: 1, filtered: 1 });
    expect(drainAll(q2)).toEqual([
      { url: u("s"), priority: 2 },
      u("new"),
      u("3"),
      u("2"),
      u("1"),
    ]);
    q2.close();
    const q3 = new RequestQueue<string>({ jobDir: dir });
    expect(q3.size).toBe(0);
    expect(q3.enqueue(u("1"))).toBe(false);
    expect(q3.enqueue(u("new"))).toBe(false);
    expect(q3.stats()).toMatchObject({ known: 2, filtered: 0 });
    q3.close();
  });

  it("RequestQueue after a crash resumes pending and in-flight requests, not completed ones", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<string>({
      jobDir: dir,
      fifo: true,
      start: [u("1"), u("2"), u("3")],
    });
    const sent: string[] = [];
    q1.requests$.subscribe((r) => sent.push(r));
    expect(sent).toEqual([u("1"), u("2"), u("3")]);
    q1.enqueue(u("4")); // discovered from 1's response...
    q1.markDone(u("1")); // ...which then completes: both on file now
    // No close(): the process dies here.
    dies(dir);
    const q2 = new RequestQueue<string>({ jobDir: dir, fifo: true });
    expect(q2.size).toBe(3);
    expect(q2.enqueue(u("1"))).toBe(false);
    expect(drainAll(q2).sort()).toEqual([u("2"), u("3"), u("4")]);
    q2.close();
  });

  it("RequestQueue recovers a job directory whose last record is torn and names the file", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<string>({ jobDir: dir });
    q1.enqueue(u("1"));
    q1.enqueue(u("2"));
    q1.flush();
    appendFileSync(join(dir, JOB_DIR_LOG), '1234abcd ["E",3,0,0,"https://a.exa');
    dies(dir);
    const q2 = new RequestQueue<string>({ jobDir: dir });
    const w = warningsOf(q2 as RequestQueue<unknown>);
    expect(w.map((x) => x.code)).toEqual(["jobdir-stale-lock", "jobdir-corrupt-record"]);
    expect(w[1]?.message).toContain(join(dir, JOB_DIR_LOG));
    expect(w[1]?.message).toMatch(/line 4/);
    expect(q2.size).toBe(2);
    q2.enqueue(u("3"));
    q2.flush();
    // The torn line is gone, so the new record is readable after it.
    dies(dir);
    const q3 = new RequestQueue<string>({ jobDir: dir });
    expect(warningsOf(q3 as RequestQueue<unknown>).map((x) => x.code)).toEqual([
      "jobdir-stale-lock",
    ]);
    expect(q3.size).toBe(3);
  });

  it("RequestQueue skips a corrupt record in the middle of the log and keeps the rest", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<string>({ jobDir: dir });
    for (const p of ["1", "2", "3"]) q1.enqueue(u(p));
    q1.flush();
    const path = join(dir, JOB_DIR_LOG);
    const lines = readFileSync(path, "utf8").split("\n");
    lines[2] = (lines[2] as string).replace("/2", "/X");
    writeFileSync(path, lines.join("\n"));
    dies(dir);
    const q2 = new RequestQueue<string>({ jobDir: dir });
    const w = warningsOf(q2 as RequestQueue<unknown>).filter((x) => x.code !== "jobdir-stale-lock");
    expect(w.length).toBe(1);
    expect(w[0]?.message).toMatch(/line 3: checksum/);
    expect(drainAll(q2)).toEqual([u("3"), u("1")]);
  });

  it("RequestQueue keeps unserializable requests in memory, counts them, and does not remember them after a crash", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<RequestObject>({ jobDir: dir });
    const bad = { url: u("fn"), meta: { callback: () => 1 } };
    q1.enqueue(bad);
    q1.enqueue({ url: u("ok") });
    expect(q1.stats()).toMatchObject({ unserializable: 1, enqueuedMemory: 1, enqueuedDisk: 1 });
    q1.close();
    const q2 = new RequestQueue<RequestObject>({ jobDir: dir });
    expect(q2.size).toBe(1);
    expect(q2.enqueue(bad)).toBe(true);
  });

  it("RequestQueue remembers an unserializable request's fingerprint once it completed", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<RequestObject>({ jobDir: dir });
    const bad = { url: u("fn"), meta: { callback: () => 1 } };
    q1.enqueue(bad);
    expect(drainAll(q1)).toEqual([bad]);
    dies(dir);
    const q2 = new RequestQueue<RequestObject>({ jobDir: dir });
    expect(q2.enqueue(bad)).toBe(false);
  });

  it("RequestQueue round-trips a body-less WHATWG Request through the job directory", () => {
    const dir = tempDir();
    const q1 = new RequestQueue<Request>({ jobDir: dir });
    q1.enqueue(new Request(u("r"), { method: "HEAD", headers: { "x-a": "1" } }));
    q1.close();
    const q2 = new RequestQueue<Request>({ jobDir: dir });
    const [r] = drainAll(q2);
    expect([r?.url, r?.method, r?.headers.get("x-a")]).toEqual([u("r"), "HEAD", "1"]);
  });

  it("RequestQueue compacts the log once completions outnumber what is live", () => {
    const dir = tempDir();
    const q = new RequestQueue<string>({ jobDir: dir, dedupe: false });
    const path = join(dir, JOB_DIR_LOG);
    q.enqueue(u("x"));
    let n = 0;
    q.requests$.subscribe((r) => {
      if (++n < 100_005) q.enqueue(r);
      q.markDone(r);
    });
    // 100k enqueue + 100k done records were reclaimed: only a few lines remain.
    expect(readFileSync(path, "utf8").split("\n").length).toBeLessThan(20);
    q.close();
  }, 60_000);

  it("JobDir.open() rejects an unknown fsync policy, naming the option", () => {
    expect(() => JobDir.open(tempDir(), { fsync: "sometimes" as "always" })).toThrow(/'fsync'/);
  });

  it("JobDir with fsync always writes every record through", () => {
    const dir = tempDir();
    const { jobDir } = JobDir.open(dir, { fsync: "always" });
    jobDir.enqueue({
      seq: 1,
      start: false,
      priority: 0,
      fingerprint: "f",
      data: "https://a.example/",
    });
    jobDir.flush();
    dies(dir);
    const { recovered } = JobDir.open(dir);
    expect(recovered.pending.map((e) => e.seq)).toEqual([1]);
    expect([...recovered.seen]).toEqual(["f"]);
  });
});

describe("JobDir on a full disk", () => {
  const entry = (seq: number) => ({
    seq,
    start: true,
    priority: 0,
    fingerprint: u(String(seq)),
    data: u(String(seq)),
  });
  let freeDisk: (() => void) | undefined;
  afterEach(() => {
    freeDisk?.();
    freeDisk = undefined;
  });

  it("JobDir.flush() cuts a part-written record off again and throws JobDirWriteError naming the log", () => {
    const dir = tempDir();
    const { jobDir } = JobDir.open(dir);
    jobDir.enqueue(entry(1));
    jobDir.flush();
    const before = readFileSync(join(dir, JOB_DIR_LOG), "utf8");
    freeDisk = fillDiskAfter(20); // the next record is torn after 20 bytes
    jobDir.enqueue(entry(2));
    let error: unknown;
    try {
      jobDir.flush();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(JobDirWriteError);
    expect(error).toMatchObject({ path: join(dir, JOB_DIR_LOG), code: "ENOSPC" });
    expect((error as Error).message).toBe(
      `Cannot write job directory file '${
        join(dir, JOB_DIR_LOG)
      }': ENOSPC: no space left on device, write`,
    );
    // No torn record: the log is what it was before the failed write.
    expect(readFileSync(join(dir, JOB_DIR_LOG), "utf8")).toBe(before);
    // Records were lost: nothing more is appended after them.
    freeDisk();
    freeDisk = undefined;
    expect(() => jobDir.done(1)).toThrow(JobDirWriteError);
    expect(readFileSync(join(dir, JOB_DIR_LOG), "utf8")).toBe(before);
    // A compaction rewrites the whole state and clears the failure.
    jobDir.compact([entry(2)], [u("1"), u("2")]);
    jobDir.done(2);
    jobDir.close();
    const { recovered } = JobDir.open(dir);
    expect(recovered.warnings).toEqual([]);
    expect(recovered.pending).toEqual([]);
    expect([...recovered.seen].sort()).toEqual([u("1"), u("2")]);
  });

  it("JobDir.compact() on a full disk leaves the old log and no requests.log.tmp", () => {
    const dir = tempDir();
    const { jobDir } = JobDir.open(dir);
    for (let i = 1; i <= 3; i++) jobDir.enqueue(entry(i));
    jobDir.done(1);
    const before = readFileSync(join(dir, JOB_DIR_LOG), "utf8");
    freeDisk = fillDiskAfter(30);
    expect(() => jobDir.compact([entry(2), entry(3)], [u("1")])).toThrow(
      expect.objectContaining({ name: "JobDirWriteError", path: join(dir, `${JOB_DIR_LOG}.tmp`) }),
    );
    expect(existsSync(join(dir, `${JOB_DIR_LOG}.tmp`))).toBe(false);
    expect(readFileSync(join(dir, JOB_DIR_LOG), "utf8")).toBe(before);
    expect(() => jobDir.close()).not.toThrow();
    freeDisk();
    freeDisk = undefined;
    const { recovered } = JobDir.open(dir);
    expect(recovered.warnings).toEqual([]);
    expect(recovered.pending.map((e) => e.seq)).toEqual([2, 3]);
  });

  it("JobDir.open() removes a requests.log.tmp left by a compaction that did not finish", () => {
    const dir = tempDir();
    JobDir.open(dir).jobDir.close();
    writeFileSync(join(dir, `${JOB_DIR_LOG}.tmp`), "half a comp");
    JobDir.open(dir).jobDir.close();
    expect(existsSync(join(dir, `${JOB_DIR_LOG}.tmp`))).toBe(false);
  });

  it("RequestQueue on a full disk ends requests$ with JobDirWriteError; close() keeps the log resumable", () => {
    const dir = tempDir();
    const q = new RequestQueue<string>({ jobDir: dir });
    for (const p of ["1", "2", "3"]) q.enqueue(u(p));
    q.flush();
    freeDisk = fillDiskAfter(10);
    const errors: unknown[] = [];
    const done: string[] = [];
    q.requests$.subscribe({
      next: (r) => {
        if (done.length === 0) {
          done.push(r);
          try {
            q.markDone(r);
          } catch (e) {
            errors.push(e);
          }
        }
      },
      error: (e) => errors.push(e),
    });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(JobDirWriteError);
    // Still full at the stop: the compaction fails, the log is closed whole.
    expect(() => q.close()).toThrow(JobDirWriteError);
    expect(existsSync(join(dir, `${JOB_DIR_LOG}.tmp`))).toBe(false);
    freeDisk();
    freeDisk = undefined;
    const again = new RequestQueue<unknown>({ jobDir: dir });
    expect(warningsOf(again)).toEqual([]);
    // The completion never reached the disk: the request is sent again, nothing is lost.
    expect(drainAll(again).sort()).toEqual([u("1"), u("2"), u("3")]);
    again.close();
  });
});
