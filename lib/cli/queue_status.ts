/**
 * The text of `politely status`: a shared job's counts, in all and per scope.
 *
 * @module
 */
import type { RedisQueueStatus } from "../redis/redis_queue_status.ts";

/** Most scope rows shown (the busiest first); the rest are summed in one line. */
const MAX_ROWS = 30;

/**
 * A job's counts as lines for a terminal.
 *
 * @param status What `readRedisQueueStatus` read.
 * @param where The Redis and prefix, for the first line.
 * @returns The lines, joined (no final newline).
 * @example
 * ```ts
 * import { formatQueueStatus } from "./queue_status.ts";
 * const text = formatQueueStatus({
 *   exists: true, queued: 1, leased: 0, done: 2, failed: 0, seen: 3, reclaimed: 0,
 *   filtered: 0, limited: 0, finished: false,
 *   scopes: [{ scope: "a.test", queued: 1, leased: 0, done: 2, failed: 0 }],
 * }, "redis://127.0.0.1:6379 job1:");
 * console.assert(text.includes("1 queued"));
 * ```
 */
export function formatQueueStatus(status: RedisQueueStatus, where: string): string {
  const state = !status.exists
    ? "no such job (nothing was ever queued)"
    : status.finished
    ? "finished"
    : "running";
  const lines = [
    `job ${where}: ${state}`,
    `${status.queued} queued, ${status.leased} leased, ${status.done} done, ${status.failed} failed` +
    ` (${status.seen} seen, ${status.filtered} duplicates dropped, ${
      status.limited > 0 ? `${status.limited} dropped past --max-pages, ` : ""
    }${status.reclaimed} leases expired and handed out again)`,
  ];
  if (status.scopes.length > 0) {
    const rows = status.scopes.slice(0, MAX_ROWS);
    const width = Math.max(5, ...rows.map((r) => r.scope.length));
    const num = (n: number) => String(n).padStart(8);
    lines.push("");
    lines.push(`${"scope".padEnd(width)}   queued   leased     done   failed`);
    for (const r of rows) {
      lines.push(
        `${r.scope.padEnd(width)} ${num(r.queued)} ${num(r.leased)} ${num(r.done)} ${
          num(r.failed)
        }`,
      );
    }
    const rest = status.scopes.slice(MAX_ROWS);
    if (rest.length > 0) {
      const sum = (k: "queued" | "leased" | "done" | "failed") =>
        rest.reduce((a, r) => a + r[k], 0);
      lines.push(
        `${`(${rest.length} more)`.padEnd(width)} ${num(sum("queued"))} ${num(sum("leased"))} ${
          num(sum("done"))
        } ${num(sum("failed"))}`,
      );
    }
  }
  return lines.join("\n");
}
