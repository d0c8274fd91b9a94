/**
 * The request queue's job directory (Scrapy's `JOBDIR`): an append-only log
 * of enqueued requests, completions and seen fingerprints, so that a crawl
 * survives a clean stop and a crash (kill -9). The format and its guarantees
 * are in docs/JOBDIR.md.
 *
 * Only `node:fs` synchronous calls are used, which Node, Deno and Bun all
 * provide; appends are batched in memory and written with one `write(2)`.
 *
 * Size: the log's writer, its reader and its recovery (torn lines, checksums,
 * the format version) are one format, kept together so they stay in step
 * (docs/JOBDIR.md).
 *
 * @module
 */
import { closeSync, existsSync, mkdirSync, openSync, readSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fsCalls, fsErrorText, writeAll } from "../util/_fs.ts";
import { JOB_DIR_LOG } from "./_job_dir_log.ts";
import { JobDirLock } from "./job_dir_lock.ts";

const FORMAT_VERSION = 1;

/** A pending request as the log stores it. */
export interface JobDirEntry {
  /** Queue sequence number: unique within the job, increasing in enqueue order. */
  readonly seq: number;
  /** A start request. */
  readonly start: boolean;
  /** Effective priority (after DEPTH_PRIORITY). */
  readonly priority: number;
  /** Fingerprint, or `undefined` for a `dontFilter` request. */
  readonly fingerprint: string | undefined;
  /** The serialised request (any JSON value). */
  readonly data: unknown;
  /**
   * The request's scopes (one name, or several sorted), so a resume need not
   * work them out again (parse URLs). Optional.
   */
  readonly scopes?: string | readonly string[] | undefined;
}

/** A corrupt or torn record, skipped on open. */
export interface JobDirWarning {
  readonly code: "jobdir-corrupt-record";
  /** The file the record is in. */
  readonly path: string;
  /** 1-based line number of the record. */
  readonly line: number;
  readonly message: string;
}

/** What a job directory held when it was opened. */
export interface JobDirRecovery {
  /** Requests enqueued and never completed, in enqueue order. */
  readonly pending: JobDirEntry[];
  /** Every fingerprint seen (pending, completed or filtered). */
  readonly seen: Set<string>;
  /** The next free sequence number. */
  readonly nextSeq: number;
  /** Records that could not be read (each names the path and line). */
  readonly warnings: JobDirWarning[];
}

/**
 * A job directory file could not be written (a full disk, an I/O error). The
 * log is left as it was before the failed write (a part-written record is cut
 * off again), so a resume reads whole records only.
 */
export class JobDirWriteError extends Error {
  override readonly name = "JobDirWriteError";
  /** The file that could not be written. */
  readonly path: string;
  /** The system error code (`ENOSPC`, `EIO`), when there is one. */
  readonly code: string | undefined;

  /**
   * @param path The file.
   * @param cause The error of the failed call.
   */
  constructor(path: string, cause: unknown) {
    super(`Cannot write job directory file '${path}': ${fsErrorText(cause)}`, { cause });
    this.path = path;
    const code = (cause as { code?: unknown } | null)?.code;
    this.code = typeof code === "string" ? code : undefined;
  }
}

/** Options of {@link JobDir.open}. */
export interface JobDirOptions {
  /**
   * When to `fsync`: `"compaction"` only when a compacted log replaces the old
   * one and at close (a process crash loses nothing that was written; a power
   * loss may lose the last writes); `"always"` after every write (survives a
   * power loss, much slower).
   * @default "compaction"
   */
  readonly fsync?: "compaction" | "always";
  /** Buffered bytes (UTF-16 units) that trigger a write. @default 1_048_576 */
  readonly flushBytes?: number;
  /**
   * A lock already taken on this directory ({@link JobDirLock.acquire}), to
   * hold it before other work; the job directory owns it from here and
   * releases it at close, or at once when opening fails.
   * @default a lock taken by `open`
   */
  readonly lock?: JobDirLock;
}

/**
 * An open job directory. It holds the directory's lock ({@link JobDirLock})
 * from open to close, so a second process (or a second queue of this one)
 * cannot open it meanwhile.
 *
 * @example Resume a crawl
 * ```ts
 * const { jobDir, recovered } = JobDir.open("crawls/books");
 * for (const entry of recovered.pending) console.log(entry.seq, entry.data);
 * jobDir.close();
 * ```
 */
export class JobDir {
  /** The log file's path. */
  readonly path: string;
  /** The directory's lock, held until {@link close}. */
  readonly lock: JobDirLock;
  readonly #dir: string;
  readonly #fsyncAlways: boolean;
  readonly #flushBytes: number;
  #fd: number;
  #buffer: string[] = [];
  #bufferedBytes = 0;
  #completionsSinceCompaction = 0;
  #closed = false;
  /** The log's length in bytes: a failed write is cut back to it. */
  #size: number;
  /**
   * Set when a write failed: records were lost, so no more are appended
   * (a later one could refer to a lost one) until a compaction rewrites the
   * whole state.
   */
  #failed: JobDirWriteError | undefined;

  private constructor(dir: string, fd: number, lock: JobDirLock, options: JobDirOptions) {
    this.#dir = dir;
    this.lock = lock;
    this.path = join(dir, JOB_DIR_LOG);
    this.#fd = fd;
    this.#size = fsCalls.fstatSize(fd);
    this.#fsyncAlways = options.fsync === "always";
    this.#flushBytes = options.flushBytes ?? 1_048_576;
  }

  /**
   * Opens (creating when missing) a job directory and reads back its log.
   * Corrupt or torn records are skipped and reported; the log is then
   * rewritten without them, so new records never follow a torn line.
   *
   * @param dir The job directory.
   * @param options Durability and batching.
   * @returns The open job directory and what it held.
   * @throws {JobDirLockedError} When another process (or another open job
   * directory of this one) holds the directory's lock; the message names its PID.
   * @throws {Error} When the directory cannot be created or the log not opened (from `node:fs`).
   */
  static open(
    dir: string,
    options: JobDirOptions = {},
  ): { jobDir: JobDir; recovered: JobDirRecovery } {
    const given = options.lock;
    const bad = badOption(dir, options);
    if (bad !== undefined) {
      // The lock was handed over with the options: not left held by a failed open.
      given?.release();
      throw bad;
    }
    const lock = given ?? JobDirLock.acquire(dir);
    try {
      return JobDir.#openLocked(dir, lock, options);
    } catch (error) {
      lock.release();
      throw error;
    }
  }

  static #openLocked(
    dir: string,
    lock: JobDirLock,
    options: JobDirOptions,
  ): { jobDir: JobDir; recovered: JobDirRecovery } {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, JOB_DIR_LOG);
    // Left by a compaction that failed or crashed before its rename: never
    // the log, and in the way of the next compaction.
    fsCalls.rmSync(path + ".tmp");
    const recovered = existsSync(path) ? readLog(path) : undefined;
    const fd = fsCalls.openSync(path, "a");
    const jobDir = new JobDir(dir, fd, lock, options);
    if (recovered === undefined) {
      jobDir.#append(["H", FORMAT_VERSION]);
      jobDir.flush();
      return { jobDir, recovered: { pending: [], seen: new Set(), nextSeq: 1, warnings: [] } };
    }
    if (recovered.warnings.length > 0 || !recovered.cleanEnd) {
      jobDir.compact(recovered.pending, recovered.seen);
    }
    return { jobDir, recovered };
  }

  /** Records an enqueued request (buffered). */
  enqueue(entry: JobDirEntry): void {
    this.#push(enqueueLine(entry));
  }

  /**
   * Records a completion and writes it at once (with every record buffered
   * before it, so the requests a response led to are on file before the
   * response counts as done).
   *
   * @param seq The completed request's sequence number, or `undefined` for a request never logged.
   * @param fingerprint A fingerprint to remember although its request was never logged (unserialisable).
   */
  done(seq: number | undefined, fingerprint?: string): void {
    if (seq !== undefined) {
      this.#append(fingerprint === undefined ? ["C", seq] : ["C", seq, fingerprint]);
    } else if (fingerprint !== undefined) this.#append(["F", fingerprint]);
    this.#completionsSinceCompaction++;
    this.flush();
  }

  /** Completions logged since the last compaction (what a compaction would reclaim). */
  get completionsSinceCompaction(): number {
    return this.#completionsSinceCompaction;
  }

  /**
   * Writes the buffered records (one `write(2)`; `fsync` too when so configured).
   *
   * @throws {JobDirWriteError} When the write fails; the log is cut back to
   * its last whole record, and every later flush throws the same error until
   * a {@link compact} succeeds.
   */
  flush(): void {
    if (this.#closed) return;
    if (this.#failed !== undefined) throw this.#failed;
    if (this.#buffer.length === 0) return;
    const bytes = Buffer.from(this.#buffer.join(""), "utf8");
    this.#buffer = [];
    this.#bufferedBytes = 0;
    try {
      writeAll(this.#fd, bytes);
      if (this.#fsyncAlways) fsCalls.fsyncSync(this.#fd);
    } catch (error) {
      try {
        fsCalls.ftruncateSync(this.#fd, this.#size);
      } catch {
        // The file may stay longer than its last whole record; reading it
        // back skips a torn last record and compacts it away (see open).
      }
      throw (this.#failed = new JobDirWriteError(this.path, error));
    }
    this.#size += bytes.length;
  }

  /**
   * Replaces the log with one that holds only `pending` and `seen`: written
   * to a temporary file, fsync'ed, renamed over the log, directory fsync'ed.
   * A crash at any point leaves either the old log or the new one.
   *
   * @param pending Every request not yet completed (in flight included), in enqueue order.
   * @param seen Every fingerprint to remember (those of `pending` may be included).
   */
  compact(pending: Iterable<JobDirEntry>, seen: Iterable<string>): void {
    if (this.#closed) return;
    // The old log as complete as it can be, should the compaction fail. A
    // failed flush is no reason not to try: the new log replaces it whole.
    try {
      this.flush();
    } catch {
      // Reported by the flush that failed first; the compaction decides now.
    }
    const tmp = this.path + ".tmp";
    let fd: number;
    try {
      fd = fsCalls.openSync(tmp, "w");
    } catch (error) {
      throw new JobDirWriteError(tmp, error);
    }
    try {
      const chunk: string[] = [line(["H", FORMAT_VERSION])];
      let size = 0;
      const live = new Set<string>();
      const putLine = (l: string): void => {
        chunk.push(l);
        size += l.length;
        if (size >= 1_048_576) {
          writeAll(fd, Buffer.from(chunk.join(""), "utf8"));
          chunk.length = 0;
          size = 0;
        }
      };
      for (const e of pending) {
        if (e.fingerprint !== undefined) live.add(e.fingerprint);
        putLine(enqueueLine(e));
      }
      for (const fp of seen) if (!live.has(fp)) putLine(line(["F", fp]));
      writeAll(fd, Buffer.from(chunk.join(""), "utf8"));
      fsCalls.fsyncSync(fd);
      fsCalls.closeSync(fd);
    } catch (error) {
      // The old log stays the log; no half-written file is left behind.
      try {
        fsCalls.closeSync(fd);
      } catch {
        // Already closed, or unclosable: either way it is removed next.
      }
      fsCalls.rmSync(tmp);
      throw new JobDirWriteError(tmp, error);
    }
    try {
      fsCalls.renameSync(tmp, this.path);
    } catch (error) {
      fsCalls.rmSync(tmp);
      throw new JobDirWriteError(this.path, error);
    }
    fsyncDir(this.#dir);
    closeSync(this.#fd);
    this.#fd = fsCalls.openSync(this.path, "a");
    this.#size = fsCalls.fstatSize(this.#fd);
    this.#failed = undefined;
    this.#completionsSinceCompaction = 0;
  }

  /**
   * Writes what is buffered, fsyncs and closes the log, and releases the
   * lock. The log is closed and the lock released even when the last write fails.
   *
   * @throws {JobDirWriteError} When what was buffered could not be written
   * (not again after an earlier failure, which was already thrown).
   */
  close(): void {
    if (this.#closed) return;
    try {
      if (this.#failed === undefined) {
        this.flush();
        fsCalls.fsyncSync(this.#fd);
      }
    } finally {
      this.#closed = true;
      try {
        closeSync(this.#fd);
      } finally {
        this.lock.release();
      }
    }
  }

  #append(record: unknown[]): void {
    this.#push(line(record));
  }

  /** Buffer one log line; write the buffer out once it is large enough. */
  #push(l: string): void {
    this.#buffer.push(l);
    this.#bufferedBytes += l.length;
    if (this.#bufferedBytes >= this.#flushBytes) this.flush();
  }
}

/**
 * An `E` record, built as text (no array per request): a fingerprint equal to
 * a string `data` (a GET's canonical URL) is written as `1`.
 */
function enqueueLine(e: JobDirEntry): string {
  const data = e.data;
  const dataJson = JSON.stringify(data);
  const fp = e.fingerprint === undefined
    ? "0"
    : e.fingerprint === data
    ? "1"
    : JSON.stringify(e.fingerprint);
  const scopes = e.scopes === undefined ? "" : "," + JSON.stringify(e.scopes);
  const json = '["E",' + e.seq + "," + (e.start ? "1," : "0,") + JSON.stringify(e.priority) + "," +
    fp + "," + dataJson + scopes + "]";
  return checksum(json) + " " + json + "\n";
}

/** One record: 8 hex digits of FNV-1a over the JSON, a space, the JSON, a newline. */
function line(record: unknown[]): string {
  const json = JSON.stringify(record);
  return checksum(json) + " " + json + "\n";
}

function checksum(text: string): string {
  return checksumFrom(text, 0).toString(16).padStart(8, "0");
}

/** FNV-1a of `text` from index `from` (the checksum of a line's JSON, without slicing it). */
function checksumFrom(text: string, from: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The 8 lower-case hex digits at the start of a line, or -1. */
function parseHex8(text: string): number {
  let v = 0;
  for (let i = 0; i < 8; i++) {
    const c = text.charCodeAt(i);
    const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/** The first bad option of {@link JobDir.open}, as the error to throw. */
function badOption(dir: string, options: JobDirOptions): Error | undefined {
  const fsync = options.fsync;
  if (fsync !== undefined && fsync !== "compaction" && fsync !== "always") {
    return new RangeError(
      `Cannot open job directory as 'fsync' must be "compaction" or "always": current value is ${
        JSON.stringify(fsync)
      }`,
    );
  }
  const lock = options.lock;
  if (lock !== undefined && (!lock.held || resolve(lock.dir) !== resolve(dir))) {
    return new TypeError(
      `Cannot open job directory '${dir}' as 'lock' must be held on it: current value is ${
        lock.held ? `a lock on '${lock.dir}'` : "a released lock"
      }`,
    );
  }
  return undefined;
}

function fsyncDir(dir: string): void {
  // Makes the rename durable on Linux; some platforms cannot open a directory.
  try {
    const fd = openSync(dir, "r");
    try {
      fsCalls.fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Best effort: the rename itself is atomic either way.
  }
}

interface ReadResult extends JobDirRecovery {
  /** The file ended with a complete record and a newline. */
  readonly cleanEnd: boolean;
}

function readLog(path: string): ReadResult {
  const pending = new Map<number, JobDirEntry>();
  const seen = new Set<string>();
  const warnings: JobDirWarning[] = [];
  let nextSeq = 1;
  let lineNo = 0;
  const bad = (message: string): void => {
    warnings.push({
      code: "jobdir-corrupt-record",
      path,
      line: lineNo,
      message:
        `Skipped a corrupt record in job directory log ${path} at line ${lineNo}: ${message}`,
    });
  };
  const take = (text: string): void => {
    lineNo++;
    if (text === "") return;
    if (text.charCodeAt(8) !== 32 || checksumFrom(text, 9) !== parseHex8(text)) {
      return bad("checksum mismatch or torn write");
    }
    const json = text.slice(9);
    let r: unknown;
    try {
      r = JSON.parse(json);
    } catch {
      return bad("not JSON");
    }
    if (!Array.isArray(r)) return bad("not a record");
    switch (r[0]) {
      case "H":
        if (r[1] !== FORMAT_VERSION) return bad(`unknown format version ${String(r[1])}`);
        return;
      case "E": {
        const [, seq, start, priority, fp, data, scopes] = r as [
          string,
          number,
          number,
          number,
          string | 0 | 1,
          unknown,
          string | string[] | undefined,
        ];
        if (typeof seq !== "number" || typeof priority !== "number") {
          return bad("bad enqueue record");
        }
        const fingerprint = typeof fp === "string"
          ? fp
          : fp === 1 && typeof data === "string"
          ? data
          : undefined;
        if (fingerprint !== undefined) seen.add(fingerprint);
        const okScopes = typeof scopes === "string" ||
          (Array.isArray(scopes) && scopes.length > 0 &&
            scopes.every((x) => typeof x === "string"));
        pending.set(
          seq,
          okScopes
            ? { seq, start: start === 1, priority, fingerprint, data, scopes }
            : { seq, start: start === 1, priority, fingerprint, data },
        );
        if (seq >= nextSeq) nextSeq = seq + 1;
        return;
      }
      case "C": {
        pending.delete(r[1] as number);
        if (typeof r[2] === "string") seen.add(r[2]);
        return;
      }
      case "F":
        if (typeof r[1] === "string") seen.add(r[1]);
        return;
      default:
        return bad(`unknown record type ${JSON.stringify(r[0])}`);
    }
  };

  const fd = openSync(path, "r");
  let cleanEnd = true;
  try {
    const size = statSync(path).size;
    const buf = Buffer.allocUnsafe(Math.min(Math.max(size, 1), 16 * 1_048_576));
    let carry = Buffer.alloc(0);
    let pos = 0;
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, pos);
      if (n === 0) break;
      pos += n;
      const data = carry.length > 0
        ? Buffer.concat([carry, buf.subarray(0, n)])
        : buf.subarray(0, n);
      const lastNl = data.lastIndexOf(0x0a);
      if (lastNl < 0) {
        carry = Buffer.from(data);
        continue;
      }
      const lines = data.toString("utf8", 0, lastNl).split("\n");
      for (const l of lines) take(l);
      carry = Buffer.from(data.subarray(lastNl + 1));
    }
    if (carry.length > 0) {
      // A last record without its newline: torn unless its checksum holds.
      take(carry.toString("utf8"));
      cleanEnd = false;
    }
  } finally {
    closeSync(fd);
  }
  return { pending: [...pending.values()], seen, nextSeq, warnings, cleanEnd };
}
