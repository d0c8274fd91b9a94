/**
 * `readRedisQueueStatus`: where a shared crawl job stands (`politely status`):
 * requests queued, leased, done and failed, in all and per scope set, read
 * from Redis without taking part in the job.
 *
 * @module
 */
import { parseScopeSetKey, queueKeyBase, queueKeys } from "./_redis_queue_scripts.ts";
import type { RedisQueueClient } from "./redis_request_queue.ts";

/** One scope set's counts (scopes of a set joined by `+`). */
export interface RedisQueueScopeStatus {
  readonly scope: string;
  readonly queued: number;
  readonly leased: number;
  readonly done: number;
  readonly failed: number;
}

/** A job's counts. */
export interface RedisQueueStatus {
  /** Whether anything was ever enqueued under the prefix. */
  readonly exists: boolean;
  readonly queued: number;
  readonly leased: number;
  readonly done: number;
  readonly failed: number;
  /** Fingerprints seen (requests ever enqueued with dedupe). */
  readonly seen: number;
  /** Requests given to another worker after their lease expired. */
  readonly reclaimed: number;
  /** Duplicates dropped at enqueue. */
  readonly filtered: number;
  /** Requests dropped at enqueue past the job's `maxRequests` (`--max-pages`). */
  readonly limited: number;
  /** Nothing queued, nothing leased, and the job exists. */
  readonly finished: boolean;
  /** Per scope set, most queued first. */
  readonly scopes: readonly RedisQueueScopeStatus[];
}

/** Most leased requests looked at for the per-scope counts (a status stays cheap). */
const MAX_LEASES_READ = 10_000;

/**
 * Reads a job's counts. Not atomic across its few commands: a job in motion
 * may show a request in two places for a moment.
 *
 * @param client A connected Redis client.
 * @param prefix The job's prefix (`--redis-prefix`).
 * @returns The counts.
 * @throws {Error} (as a rejection) When Redis fails.
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import { readRedisQueueStatus } from "./redis_queue_status.ts";
 * const client = await createClient({ url: "redis://127.0.0.1:6390" }).connect();
 * const s = await readRedisQueueStatus(client, "job1:");
 * console.log(`${s.queued} queued, ${s.leased} leased, ${s.done} done, ${s.failed} failed`);
 * await client.close();
 * ```
 */
export async function readRedisQueueStatus(
  client: RedisQueueClient,
  prefix: string,
): Promise<RedisQueueStatus> {
  const base = queueKeyBase(prefix);
  const [seq, req, ready, leases, , seen, counts, scopes] = queueKeys(base) as [
    string,
    string,
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  const num = (v: unknown): number => Number(v ?? 0) || 0;
  const pairs = (reply: unknown): Map<string, string> => {
    const out = new Map<string, string>();
    if (Array.isArray(reply)) {
      for (let i = 0; i + 1 < reply.length; i += 2) out.set(String(reply[i]), String(reply[i + 1]));
    } else if (reply !== null && typeof reply === "object") {
      for (const [k, v] of Object.entries(reply)) out.set(k, String(v));
    }
    return out;
  };
  const c = pairs(await client.sendCommand(["HGETALL", counts]));
  const exists = num(await client.sendCommand(["EXISTS", seq])) === 1;
  const leased = num(await client.sendCommand(["ZCARD", leases]));
  const seenCount = num(await client.sendCommand(["SCARD", seen]));
  const per = new Map<string, { queued: number; leased: number; done: number; failed: number }>();
  const row = (set: string) => {
    let r = per.get(set);
    if (r === undefined) per.set(set, r = { queued: 0, leased: 0, done: 0, failed: 0 });
    return r;
  };
  const sets = await client.sendCommand(["ZRANGE", ready, "0", "-1"]) as string[];
  for (const set of sets) {
    row(set).queued = num(await client.sendCommand(["ZCARD", `${base}set:${set}`]));
  }
  const ids = await client.sendCommand([
    "ZRANGE",
    leases,
    "0",
    String(MAX_LEASES_READ - 1),
  ]) as string[];
  if (ids.length > 0) {
    const records = await client.sendCommand(["HMGET", req, ...ids]) as (string | null)[];
    for (const rec of records) {
      if (rec === null) continue;
      try {
        row(String((JSON.parse(rec) as unknown[])[0])).leased++;
      } catch {
        // not a record of ours
      }
    }
  }
  for (const [field, value] of pairs(await client.sendCommand(["HGETALL", scopes]))) {
    const set = field.slice(2);
    if (field.startsWith("d:")) row(set).done += num(value);
    else if (field.startsWith("f:")) row(set).failed += num(value);
  }
  const queued = num(c.get("queued"));
  return {
    exists,
    queued,
    leased,
    done: num(c.get("done")),
    failed: num(c.get("failed")),
    seen: seenCount,
    reclaimed: num(c.get("reclaimed")),
    filtered: num(c.get("filtered")),
    limited: num(c.get("limited")),
    finished: exists && queued === 0 && leased === 0,
    scopes: byScopes(per).sort((a, b) => b.queued - a.queued || (a.scope < b.scope ? -1 : 1)),
  };
}

/** Rows per scope set, the sets that differ by their quota amounts only added up (one row per scopes). */
function byScopes(
  per: ReadonlyMap<string, { queued: number; leased: number; done: number; failed: number }>,
): { scope: string; queued: number; leased: number; done: number; failed: number }[] {
  const rows = new Map<
    string,
    { scope: string; queued: number; leased: number; done: number; failed: number }
  >();
  for (const [set, r] of per) {
    const scope = parseScopeSetKey(set).scopes.join("+");
    const row = rows.get(scope);
    if (row === undefined) rows.set(scope, { scope, ...r });
    else {
      row.queued += r.queued;
      row.leased += r.leased;
      row.done += r.done;
      row.failed += r.failed;
    }
  }
  return [...rows.values()];
}
