/**
 * The request queue's side of its job directory (`request_queue.ts` over
 * `job_dir.ts`): opening it and telling what its recovery found, reading
 * its pending requests back (with the scopes written at enqueue, so a resume
 * need not parse URLs again), the records of requests and completions with
 * the timed flush (`QueueJournal`), and the records of a compaction (the
 * live requests in enqueue order, the fingerprints no live request holds).
 *
 * @module
 */
import type { SchedulerLike, Subscription } from "rxjs";
import { hostOf, parseRequestUrl, scopesFromMeta } from "./_request_keys.ts";
import type { QueueItem } from "./_queue_order.ts";
import { JobDir, type JobDirEntry, type JobDirRecovery } from "./job_dir.ts";
import { JobDirLock } from "./job_dir_lock.ts";
import type { QueueScopes } from "./request_queue.ts";

/**
 * Opens a queue's job directory (or takes over a lock on one) and warns of a
 * stale lock taken over and of corrupt records skipped (the first 20, then
 * their count).
 */
export function openQueueJobDir(
  dir: string | JobDirLock,
  fsync: "compaction" | "always" | undefined,
  warn: (code: string, message: string) => void,
): { jobDir: JobDir; recovered: JobDirRecovery } {
  const lock = dir instanceof JobDirLock ? dir : undefined;
  const opened = JobDir.open(lock?.dir ?? (dir as string), {
    ...(lock !== undefined ? { lock } : {}),
    ...(fsync !== undefined ? { fsync } : {}),
  });
  const { jobDir, recovered } = opened;
  const takeover = jobDir.lock.tookOver;
  if (takeover !== undefined) warn("jobdir-stale-lock", takeover.message);
  for (const w of recovered.warnings.slice(0, 20)) {
    warn("jobdir-corrupt-record", w.message);
  }
  if (recovered.warnings.length > 20) {
    warn(
      "jobdir-corrupt-record",
      `Skipped ${
        recovered.warnings.length - 20
      } more corrupt records in job directory log ${jobDir.path}`,
    );
  }
  return opened;
}

/**
 * A queue's open job directory: the records of its requests (buffered and
 * written at the latest `flushIntervalMs` later), their completions, its
 * compaction and its close.
 */
export class QueueJournal<R> {
  readonly #jobDir: JobDir;
  readonly #serialize: (request: R) => unknown;
  readonly #scheduler: SchedulerLike;
  readonly #flushIntervalMs: number;
  /** Where a timed flush that fails goes (the queue's subscriber). */
  readonly #onFlushError: (error: unknown) => void;
  #flushTimer: Subscription | undefined;

  constructor(
    jobDir: JobDir,
    serialize: (request: R) => unknown,
    scheduler: SchedulerLike,
    flushIntervalMs: number,
    onFlushError: (error: unknown) => void,
  ) {
    this.#jobDir = jobDir;
    this.#serialize = serialize;
    this.#scheduler = scheduler;
    this.#flushIntervalMs = flushIntervalMs;
    this.#onFlushError = onFlushError;
  }

  /**
   * Writes a request's enqueue record (buffered); `scopes` when a resume may
   * use them as they are.
   *
   * @returns `false` when the request cannot be serialized (it stays in memory).
   */
  enqueue(
    request: R,
    seq: number,
    start: boolean,
    priority: number,
    fingerprint: string | undefined,
    scopes: string | readonly string[] | undefined,
  ): boolean {
    const data = serializeSafe(this.#serialize, request);
    if (data === undefined) return false;
    this.#jobDir.enqueue({ seq, start, priority, fingerprint, data, scopes });
    if (this.#flushTimer === undefined) {
      this.#flushTimer = this.#scheduler.schedule(() => {
        this.#flushTimer = undefined;
        try {
          this.#jobDir.flush();
        } catch (error) {
          this.#onFlushError(error);
        }
      }, this.#flushIntervalMs);
    }
    return true;
  }

  /**
   * Writes a request's completion.
   *
   * @param live Requests pending and in flight.
   * @returns Whether the log should be compacted now (completions outnumber
   * both 100,000 and the live requests).
   */
  done(item: QueueItem<R>, live: number): boolean {
    const jd = this.#jobDir;
    if (item.persisted) jd.done(item.seq);
    else jd.done(undefined, item.fp);
    return jd.completionsSinceCompaction > Math.max(100_000, live);
  }

  /** See {@link compactJobDir}. */
  compact(
    live: QueueItem<R>[],
    seen: ReadonlySet<string>,
    seenBefore: ReadonlySet<string>,
    keepScopes: boolean,
  ): void {
    compactJobDir(this.#jobDir, live, seen, seenBefore, keepScopes, this.#serialize);
  }

  /** Writes buffered records now. */
  flush(): void {
    this.#jobDir.flush();
  }

  /** Stops the timed flush and closes the job directory (releasing its lock). */
  close(): void {
    this.#flushTimer?.unsubscribe();
    this.#flushTimer = undefined;
    this.#jobDir.close();
  }
}

/**
 * Reads pending entries back: each is deserialized and its scopes found
 * (stored ones unless `scopesOf` is custom; none when `scoped` is false),
 * then handed to `place`; one that cannot be is dropped with a warning.
 */
export function resumeEntries<R>(
  pending: readonly JobDirEntry[],
  deserialize: (data: unknown) => R,
  scopesOf: ((request: R) => QueueScopes) | undefined,
  scoped: boolean,
  warn: (code: string, message: string) => void,
  place: (
    r: R,
    entry: JobDirEntry,
    key: string | undefined,
    scopes: readonly string[] | undefined,
    amounts: readonly (number | undefined)[] | undefined,
  ) => void,
): void {
  for (const e of pending) {
    let r: R;
    let key: string | undefined;
    let scopes: readonly string[] | undefined;
    let amounts: readonly (number | undefined)[] | undefined;
    try {
      r = deserialize(e.data);
      const stored = e.scopes;
      if (!scoped) {
        // no scopes
      } else if (stored !== undefined && scopesOf === undefined) {
        // Written at enqueue: no URL to parse again.
        if (typeof stored === "string") key = stored;
        else scopes = stored;
      } else {
        const rs = scopesOf !== undefined ? scopesOf(r) : scopesFromMeta(r);
        if (rs === undefined) key = hostOf(r, parseRequestUrl(r));
        else {
          scopes = rs.scopes;
          amounts = rs.amounts;
        }
      }
    } catch (err) {
      warn(
        "jobdir-unreadable-request",
        `Dropped request ${e.seq} from the job directory: ${String(err)}`,
      );
      continue;
    }
    place(r, e, key, scopes, amounts);
  }
}

/**
 * Compacts the job directory to the live requests (`live`, in any order;
 * only those `persisted` are written) and the fingerprints seen that no live
 * request holds. `keepScopes`: write each request's scopes, so a resume need
 * not work them out again (default scopes without quota amounts only).
 */
export function compactJobDir<R>(
  jd: JobDir,
  live: QueueItem<R>[],
  seen: ReadonlySet<string>,
  seenBefore: ReadonlySet<string>,
  keepScopes: boolean,
  serialize: (request: R) => unknown,
): void {
  live.sort((a, b) => a.seq - b.seq);
  const liveFps = new Set<string>();
  for (const item of live) if (item.fp !== undefined) liveFps.add(item.fp);
  const entry = (item: QueueItem<R>): JobDirEntry => ({
    seq: item.seq,
    start: item.start,
    priority: item.priority,
    fingerprint: item.fp,
    data: serializeSafe(serialize, item.r),
    scopes: keepScopes && item.amounts === undefined
      ? (item.set.scopes.length === 1 ? item.set.key : item.set.scopes)
      : undefined,
  });
  jd.compact(
    (function* () {
      for (const item of live) if (item.persisted) yield entry(item);
    })(),
    (function* () {
      // Fingerprints of requests kept only in memory are not written: a
      // crash loses those requests, and they must be fetchable again.
      for (const fp of seenBefore) if (!liveFps.has(fp)) yield fp;
      for (const fp of seen) if (!liveFps.has(fp)) yield fp;
    })(),
  );
}

/** A request as JSON for the job directory; `undefined` when it cannot be (it stays in memory). */
export function serializeSafe<R>(serialize: (request: R) => unknown, request: R): unknown {
  try {
    return serialize(request);
  } catch {
    return undefined;
  }
}
