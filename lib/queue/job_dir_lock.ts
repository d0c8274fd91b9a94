/**
 * The lock that keeps a job directory to one process: a `lock` file naming
 * its holder (PID, host name, when it was taken). Two crawls on one job
 * directory would each send what the other sends (597 fetches for 300 URLs),
 * so the second one is refused, naming the holder.
 *
 * A lock left by a process that died without releasing it (kill -9, a power
 * cut) is taken over, with a note: its holder ran on this host and its PID is
 * no longer alive (or the host has restarted since, or the PID is now this
 * very process's and the lock is not one it took: a restarted container). A
 * lock from another host is never taken over, as its holder cannot be asked.
 *
 * Only `node:fs`, `node:os` and `process.kill(pid, 0)` are used, which Node,
 * Deno and Bun all provide. The file is created whole and at once (written
 * under a private name, then hard-linked to `lock`, which fails when `lock`
 * exists), so a reader never sees a half-written lock.
 *
 * @module
 */
import {
  closeSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { hostname as osHostname } from "node:os";
import { join } from "node:path";
import process from "node:process";

/** The lock's file name inside the job directory. */
export const JOB_DIR_LOCK = "lock";

/** Who holds (or held) a job directory's lock, as its lock file says. */
export interface JobDirLockHolder {
  /** The holder's process id. */
  readonly pid: number;
  /** The host it runs on (`os.hostname()`). */
  readonly hostname: string;
  /** When it took the lock (ISO 8601). */
  readonly startedAt: string;
}

/** A lock left by a holder that is gone, taken over by this one. */
export interface JobDirLockTakeover {
  /** The holder that left it. */
  readonly holder: JobDirLockHolder;
  /** One line for a person: whose lock, why it was stale. */
  readonly message: string;
}

/**
 * The job directory is locked by another process (or another queue of this
 * one). Its message is one line naming the holder's PID.
 */
export class JobDirLockedError extends Error {
  override readonly name = "JobDirLockedError";
  /** The job directory. */
  readonly dir: string;
  /** Its lock file. */
  readonly path: string;
  /** The holder, or `undefined` when the lock file cannot be read. */
  readonly holder: JobDirLockHolder | undefined;

  /**
   * @param dir The job directory.
   * @param path Its lock file.
   * @param holder The holder, when the lock file could be read.
   */
  constructor(dir: string, path: string, holder: JobDirLockHolder | undefined) {
    super(lockedMessage(dir, path, holder));
    this.dir = dir;
    this.path = path;
    this.holder = holder;
  }
}

/** The lock file's content. */
interface LockRecord extends JobDirLockHolder {
  /** Unique per lock taken: tells this lock from a later one with the same PID. */
  readonly token: string;
  /** Linux's boot id, when readable: a lock from before a restart is stale whatever its PID. */
  readonly bootId?: string;
}

/**
 * The tokens of the locks this process holds. Process-wide on purpose: a lock
 * is held by a process, and a second queue of this process on the same
 * directory must be told apart from a dead process whose PID came back.
 */
const held = new Set<string>();

let bootIdCache: string | null | undefined;

function bootId(): string | undefined {
  if (bootIdCache === undefined) {
    try {
      bootIdCache = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || null;
    } catch {
      // Not Linux, or not allowed: PIDs alone decide.
      bootIdCache = null;
    }
  }
  return bootIdCache ?? undefined;
}

function newToken(): string {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * A held lock on a job directory. {@link JobDir.open} takes one itself;
 * take one first only to hold the directory before other work (the command
 * line takes it before it truncates its output files), then give it to
 * `JobDir.open` or the `RequestQueue`, which release it when they close.
 *
 * @example Refused while another process crawls
 * ```ts
 * import { JobDirLock, JobDirLockedError } from "./job_dir_lock.ts";
 * try {
 *   const lock = JobDirLock.acquire("crawls/books");
 *   // ... open the output files, then: new RequestQueue({ jobDir: lock })
 *   lock.release();
 * } catch (error) {
 *   if (!(error instanceof JobDirLockedError)) throw error;
 *   console.error(error.message); // ... in use by process 4242 (since ...)
 * }
 * ```
 */
export class JobDirLock {
  /** The job directory. */
  readonly dir: string;
  /** The lock file. */
  readonly path: string;
  /** What this lock replaced: a stale lock of a process that is gone, or `undefined`. */
  readonly tookOver: JobDirLockTakeover | undefined;
  readonly #record: LockRecord;
  #released = false;

  private constructor(
    dir: string,
    path: string,
    record: LockRecord,
    tookOver: JobDirLockTakeover | undefined,
  ) {
    this.dir = dir;
    this.path = path;
    this.#record = record;
    this.tookOver = tookOver;
  }

  /**
   * Takes the lock of a job directory (creating the directory when missing).
   *
   * @param dir The job directory.
   * @returns The held lock; `tookOver` says when it replaced a stale one.
   * @throws {JobDirLockedError} When a live process (this one included) holds
   * it, a process on another host holds it, or the lock file cannot be read.
   * @throws {Error} When the directory or the lock file cannot be written (from `node:fs`).
   */
  static acquire(dir: string): JobDirLock {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, JOB_DIR_LOCK);
    const bid = bootId();
    const record: LockRecord = {
      pid: process.pid,
      hostname: osHostname(),
      startedAt: new Date().toISOString(),
      token: newToken(),
      ...(bid !== undefined ? { bootId: bid } : {}),
    };
    const text = JSON.stringify(record) + "\n";
    let tookOver: JobDirLockTakeover | undefined;
    // Each turn either takes the lock, throws, or saw the lock change under
    // it (released, taken over by another): a few turns settle any race.
    for (let turn = 0;; turn++) {
      if (create(dir, path, text, record.token)) {
        held.add(record.token);
        return new JobDirLock(dir, path, record, tookOver);
      }
      const found = readLock(path);
      if (found === undefined) {
        if (turn < 8) continue; // released just now
        throw new JobDirLockedError(dir, path, undefined);
      }
      const why = found.record === undefined ? undefined : staleReason(found.record);
      if (why === undefined || turn >= 8) {
        throw new JobDirLockedError(dir, path, found.record && holderOf(found.record));
      }
      if (removeStale(path, found.text, record.token)) {
        const holder = holderOf(found.record!);
        tookOver = {
          holder,
          message: `Took over the lock of job directory '${dir}' from process ${holder.pid} ` +
            `(since ${holder.startedAt}), ${why}`,
        };
      }
    }
  }

  /** True until {@link release}. */
  get held(): boolean {
    return !this.#released;
  }

  /**
   * Releases the lock: removes the lock file when it is still this lock's
   * (never another process's). Safe to call twice.
   */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    held.delete(this.#record.token);
    // Left behind when it cannot be read or removed: its PID is this
    // process's, which will be gone, so the next opener takes it over.
    try {
      if (readLock(this.path)?.record?.token !== this.#record.token) return;
      rmSync(this.path, { force: true });
    } catch {
      // See above: a close never fails on its lock.
    }
  }
}

function holderOf(record: LockRecord): JobDirLockHolder {
  return { pid: record.pid, hostname: record.hostname, startedAt: record.startedAt };
}

/**
 * Creates the lock file whole: written under a private name, then linked to
 * `lock` (no-clobber). False when a lock exists.
 */
function create(dir: string, path: string, text: string, token: string): boolean {
  const tmp = join(dir, `${JOB_DIR_LOCK}.${token}.tmp`);
  writeNew(tmp, text);
  try {
    linkSync(tmp, path);
    return true;
  } catch (error) {
    if (codeOf(error) === "EEXIST") return false;
    // A file system without hard links: create it with O_EXCL, then write.
    // A reader may see it empty for a moment and call it unreadable.
    try {
      writeNew(path, text);
      return true;
    } catch (inner) {
      if (codeOf(inner) === "EEXIST") return false;
      throw inner;
    }
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Writes a file that must not exist yet (O_CREAT | O_EXCL). */
function writeNew(path: string, text: string): void {
  const fd = openSync(path, "wx");
  try {
    const bytes = new TextEncoder().encode(text);
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
  } finally {
    closeSync(fd);
  }
}

/** The lock file's text and record (`record` undefined when unreadable); undefined when there is none. */
function readLock(path: string): { text: string; record: LockRecord | undefined } | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (codeOf(error) === "ENOENT") return undefined;
    throw error;
  }
  return { text, record: parseRecord(text) };
}

function parseRecord(text: string): LockRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const r = value as Partial<Record<keyof LockRecord, unknown>>;
  if (
    typeof r.pid !== "number" || !Number.isSafeInteger(r.pid) || r.pid <= 0 ||
    typeof r.hostname !== "string" || typeof r.startedAt !== "string" ||
    typeof r.token !== "string"
  ) {
    return undefined;
  }
  return {
    pid: r.pid,
    hostname: r.hostname,
    startedAt: r.startedAt,
    token: r.token,
    ...(typeof r.bootId === "string" ? { bootId: r.bootId } : {}),
  };
}

/** Why a lock is stale ("which is no longer running"), or `undefined` when it may be live. */
function staleReason(record: LockRecord): string | undefined {
  // Another host's processes cannot be asked: its lock stands.
  if (record.hostname !== osHostname()) return undefined;
  const bid = bootId();
  if (record.bootId !== undefined && bid !== undefined && record.bootId !== bid) {
    return "which ran before this host restarted";
  }
  if (record.pid === process.pid) {
    return held.has(record.token)
      ? undefined
      : "an earlier process with this process's PID (a restarted container)";
  }
  return isAlive(record.pid) ? undefined : "which is no longer running";
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return codeOf(error) !== "ESRCH";
  }
}

/**
 * Removes the stale lock whose text is `stale`, unless another process took
 * it over first: the lock is renamed aside (atomic: one process gets it),
 * and if what was moved is not the stale lock, it is linked back.
 */
function removeStale(path: string, stale: string, token: string): boolean {
  const aside = `${path}.${token}.stale`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if (codeOf(error) === "ENOENT") return false;
    throw error;
  }
  try {
    let moved: string | undefined;
    try {
      moved = readFileSync(aside, "utf8");
    } catch {
      moved = undefined;
    }
    if (moved === stale) return true;
    try {
      linkSync(aside, path);
    } catch {
      // A third process took the lock meanwhile; the one moved is lost. Only
      // three processes racing on one stale lock get here.
    }
    return false;
  } finally {
    rmSync(aside, { force: true });
  }
}

function codeOf(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

function lockedMessage(
  dir: string,
  path: string,
  holder: JobDirLockHolder | undefined,
): string {
  const head = `Cannot open job directory '${dir}'`;
  if (holder === undefined) {
    return `${head}: its lock file ${path} cannot be read; delete it if no crawl uses the directory`;
  }
  if (holder.hostname !== osHostname()) {
    return `${head}: in use by process ${holder.pid} on host ${holder.hostname} ` +
      `(since ${holder.startedAt}); a lock from another host is never taken over: ` +
      `delete ${path} if that crawl is no longer running`;
  }
  if (holder.pid === process.pid) {
    return `${head}: already open in this process (PID ${holder.pid}, since ${holder.startedAt})`;
  }
  return `${head}: in use by process ${holder.pid} (since ${holder.startedAt}); ` +
    `stop it first, or delete ${path} if that process is not a crawl`;
}
