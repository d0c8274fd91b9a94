import { afterEach, describe, expect, it } from "vitest";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { JobDir } from "../lib/queue/job_dir.ts";
import { JOB_DIR_LOCK, JobDirLock, JobDirLockedError } from "../lib/queue/job_dir_lock.ts";
import { type QueueWarning, RequestQueue } from "../lib/queue/request_queue.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const HOLDER = join(ROOT, "test/fixtures/hold_job_dir.ts");
const MAIN = join(ROOT, "lib/cli/main.ts");
/** Child processes start slowly on a loaded machine: a bound for a hang, not a speed test. */
const CHILDREN_MS = 120_000;

const dirs: string[] = [];
const children: ChildProcess[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "politely-lock-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A child process on the runtime running the tests, its stdout read line by line. */
interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  /** Resolves with the first stdout line that starts with `prefix` (rejects if it ends first). */
  line(prefix: string): Promise<string>;
  /** Resolves with the exit code (null when killed) once it has ended. */
  readonly ended: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

function start(file: string, args: readonly string[]): Child {
  // Deno does not take Node's `--import`; Node (and Bun) run the .ts through tsx.
  const runtime = "Deno" in globalThis ? ["run", "-A", file] : ["--import", "tsx", file];
  const child = spawn(process.execPath, [...runtime, ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  const waiters: { prefix: string; resolve: (l: string) => void; reject: (e: Error) => void }[] =
    [];
  const check = () => {
    const lines = stdout.split("\n").slice(0, -1);
    for (const w of waiters.splice(0)) {
      const found = lines.find((l) => l.startsWith(w.prefix));
      if (found !== undefined) w.resolve(found);
      else waiters.push(w);
    }
  };
  child.stdout.on("data", (d) => {
    stdout += d;
    check();
  });
  child.stderr.on("data", (d) => (stderr += d));
  const ended = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code) => {
      for (const w of waiters.splice(0)) {
        w.reject(new Error(`ended without '${w.prefix}': ${stdout}${stderr}`));
      }
      resolve({ code, stdout, stderr });
    })
  );
  return {
    process: child,
    pid: child.pid!,
    line: (prefix) =>
      new Promise((resolve, reject) => {
        waiters.push({ prefix, resolve, reject });
        check();
      }),
    ended,
  };
}

function holder(dir: string, ...urls: string[]): Child {
  return start(HOLDER, [dir, ...urls]);
}

function politely(...args: string[]): Child {
  return start(MAIN, args);
}

async function killed(child: Child): Promise<void> {
  child.process.kill("SIGKILL");
  await child.ended;
}

function warningsOf(q: RequestQueue<unknown>): QueueWarning[] {
  const w: QueueWarning[] = [];
  q.warnings$.subscribe((x) => w.push(x)).unsubscribe();
  return w;
}

function writeLock(dir: string, record: Record<string, unknown>): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, JOB_DIR_LOCK), JSON.stringify(record) + "\n");
}

describe("JobDirLock between processes", () => {
  it(
    "JobDirLock.acquire() refuses a job directory another live process holds, naming its PID",
    async () => {
      const dir = tempDir();
      const first = holder(dir);
      await first.line("locked");
      let error: unknown;
      try {
        JobDirLock.acquire(dir);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(JobDirLockedError);
      expect(error).toMatchObject({ dir, holder: { pid: first.pid, hostname: hostname() } });
      expect((error as Error).message).toMatch(
        new RegExp(`^Cannot open job directory '.*': in use by process ${first.pid} \\(since `),
      );
      expect(() => new RequestQueue({ jobDir: dir })).toThrow(JobDirLockedError);
      // Released when its holder closes.
      first.process.stdin!.end();
      expect((await first.ended).code).toBe(0);
      expect(existsSync(join(dir, JOB_DIR_LOCK))).toBe(false);
      const lock = JobDirLock.acquire(dir);
      expect(lock.tookOver).toBeUndefined();
      lock.release();
    },
    CHILDREN_MS,
  );

  it(
    "RequestQueue takes over the lock of a holder killed with SIGKILL, warning with its PID, and resumes its requests",
    async () => {
      const dir = tempDir();
      const first = holder(dir, "https://a.example/1", "https://a.example/2");
      await first.line("locked");
      await killed(first);
      const q = new RequestQueue<string>({ jobDir: dir });
      const w = warningsOf(q as RequestQueue<unknown>);
      expect(w.map((x) => x.code)).toEqual(["jobdir-stale-lock"]);
      expect(w[0]?.message).toMatch(
        new RegExp(
          `^Took over the lock of job directory '.*' from process ${first.pid} \\(since .*\\), which is no longer running$`,
        ),
      );
      expect(q.size).toBe(2);
      // This process's lock now: another one is refused, naming this PID.
      const second = holder(dir);
      expect(await second.line("refused")).toContain(`in use by process ${process.pid}`);
      expect((await second.ended).code).toBe(2);
      q.close();
      expect(existsSync(join(dir, JOB_DIR_LOCK))).toBe(false);
    },
    CHILDREN_MS,
  );

  it(
    "JobDirLock: of two processes taking over one stale lock at once, exactly one gets it",
    async () => {
      const dir = tempDir();
      const dead = holder(dir);
      await dead.line("locked");
      await killed(dead);
      const racers = [holder(dir), holder(dir)];
      const firstWords = await Promise.all(
        racers.map((r) => Promise.race([r.line("locked"), r.line("refused")])),
      );
      expect(firstWords.map((l) => l.split(" ")[0]).sort()).toEqual(["locked", "refused"]);
      const winner = racers[firstWords.findIndex((l) => l.startsWith("locked"))]!;
      expect(firstWords.find((l) => l.startsWith("refused"))).toContain(
        `in use by process ${winner.pid}`,
      );
      winner.process.stdin!.end();
      expect((await winner.ended).code).toBe(0);
    },
    CHILDREN_MS,
  );
});

describe("politely crawl --jobdir on a directory in use", () => {
  it(
    "exits 2 with one line naming the holder's PID and leaves its own --output untouched; once the holder is killed, takes its lock over with a warning",
    async () => {
      const dir = tempDir();
      const job = join(dir, "job");
      const out = join(dir, "out.jsonl");
      writeFileSync(out, '{"kept":true}\n');
      // A crawl that reads its input from stdin holds the directory while it waits.
      const first = politely("crawl", "-", "--jobdir", job, "--quiet");
      const firstPid = first.pid;
      // Its lock names it once it holds the directory.
      await new Promise<void>((resolve) => {
        const poll = setInterval(() => {
          const path = join(job, JOB_DIR_LOCK);
          if (existsSync(path) && readFileSync(path, "utf8").includes(`"pid":${firstPid},`)) {
            clearInterval(poll);
            resolve();
          }
        }, 20);
      });
      const second = await politely("crawl", "-", "--jobdir", job, "--output", out, "--quiet")
        .ended;
      expect(second.code).toBe(2);
      expect(second.stderr).toBe(
        `politely: Cannot open job directory '${job}': in use by process ${firstPid} (since ${
          JSON.parse(readFileSync(join(job, JOB_DIR_LOCK), "utf8")).startedAt
        }); stop it first, or delete ${join(job, JOB_DIR_LOCK)} if that process is not a crawl\n`,
      );
      expect(readFileSync(out, "utf8")).toBe('{"kept":true}\n');
      await killed(first);
      const third = politely("crawl", "-", "--jobdir", job, "--output", out, "--quiet");
      third.process.stdin!.end();
      const ended = await third.ended;
      expect(ended.code).toBe(0);
      expect(ended.stderr).toMatch(
        new RegExp(
          `^politely: warning: Took over the lock of job directory '.*' from process ${firstPid} `,
        ),
      );
      expect(existsSync(join(job, JOB_DIR_LOCK))).toBe(false);
    },
    CHILDREN_MS,
  );
});

describe("JobDirLock in one process", () => {
  it("JobDir.open() refuses a job directory already open in this process, and close() releases it", () => {
    const dir = tempDir();
    const { jobDir } = JobDir.open(dir);
    expect(() => JobDir.open(dir)).toThrow(
      new RegExp(`already open in this process \\(PID ${process.pid}, since `),
    );
    jobDir.close();
    expect(existsSync(join(dir, JOB_DIR_LOCK))).toBe(false);
    JobDir.open(dir).jobDir.close();
  });

  it("JobDirLock.acquire() never takes over a lock from another host, even one whose PID is not running here", () => {
    const dir = tempDir();
    writeLock(dir, {
      pid: 2 ** 30,
      hostname: "elsewhere.example",
      startedAt: "2026-01-02T03:04:05.000Z",
      token: "t",
    });
    expect(() => JobDirLock.acquire(dir)).toThrow(
      `Cannot open job directory '${dir}': in use by process ${
        2 ** 30
      } on host elsewhere.example (since 2026-01-02T03:04:05.000Z); a lock from another host is never taken over: delete ${
        join(dir, JOB_DIR_LOCK)
      } if that crawl is no longer running`,
    );
  });

  it("JobDirLock.acquire() takes over a lock naming this process's PID that this process never took (a restarted container)", () => {
    const dir = tempDir();
    writeLock(dir, {
      pid: process.pid,
      hostname: hostname(),
      startedAt: "2026-01-02T03:04:05.000Z",
      token: "from-an-earlier-run",
    });
    const lock = JobDirLock.acquire(dir);
    expect(lock.tookOver?.holder).toEqual({
      pid: process.pid,
      hostname: hostname(),
      startedAt: "2026-01-02T03:04:05.000Z",
    });
    expect(lock.tookOver?.message).toContain("an earlier process with this process's PID");
    lock.release();
  });

  it("JobDirLock.acquire() refuses a lock file it cannot read, naming the file", () => {
    const dir = tempDir();
    writeFileSync(join(dir, JOB_DIR_LOCK), "not a lock");
    expect(() => JobDirLock.acquire(dir)).toThrow(
      `Cannot open job directory '${dir}': its lock file ${
        join(dir, JOB_DIR_LOCK)
      } cannot be read; delete it if no crawl uses the directory`,
    );
  });

  it("JobDirLock.release() leaves a lock that is no longer its own", () => {
    const dir = tempDir();
    const lock = JobDirLock.acquire(dir);
    const other = { pid: 1, hostname: hostname(), startedAt: "x", token: "someone else" };
    writeLock(dir, other);
    lock.release();
    expect(lock.held).toBe(false);
    expect(JSON.parse(readFileSync(join(dir, JOB_DIR_LOCK), "utf8"))).toEqual(other);
  });

  it("JobDir.open() given a lock on another directory throws a TypeError and releases that lock", () => {
    const a = tempDir();
    const b = tempDir();
    const lock = JobDirLock.acquire(a);
    expect(() => JobDir.open(b, { lock })).toThrow(
      new TypeError(
        `Cannot open job directory '${b}' as 'lock' must be held on it: current value is a lock on '${a}'`,
      ),
    );
    expect(lock.held).toBe(false);
    expect(existsSync(join(a, JOB_DIR_LOCK))).toBe(false);
    expect(existsSync(join(b, JOB_DIR_LOCK))).toBe(false);
  });

  it("RequestQueue given a held JobDirLock opens its directory and releases the lock at close", () => {
    const dir = tempDir();
    const lock = JobDirLock.acquire(dir);
    const q = new RequestQueue<string>({ jobDir: lock });
    q.enqueue("https://a.example/1");
    expect(lock.held).toBe(true);
    q.close();
    expect(lock.held).toBe(false);
    const again = new RequestQueue<string>({ jobDir: dir });
    expect(again.size).toBe(1);
    again.close();
  });
});
