/**
 * The summary printed at the end of every crawl: requests, responses by
 * status class, retries, failures, duration and each scope's rate.
 *
 * @module
 */
import type { CrawlStats } from "./crawl_stats.ts";
import { fit, formatDuration } from "./live_view.ts";

/** Options of {@link formatSummary}. */
export interface SummaryOptions {
  /** The crawl was stopped (Ctrl-C) before every request ended. */
  readonly interrupted?: boolean;
  /** What stopped it, as shown: `"Ctrl-C"`, `"SIGTERM"`. @default "Ctrl-C" */
  readonly stoppedBy?: string;
  /** Requests not ended (with a job directory, left for a resumed crawl). */
  readonly pending?: number;
  /**
   * Downloads in flight when the crawl was stopped, aborted. Given, it makes
   * the summary say how the crawl was stopped and what was left.
   */
  readonly aborted?: number;
  /** The job directory that keeps the requests not ended. */
  readonly jobDir?: string;
  /** Duplicates dropped by the queue. */
  readonly filtered?: number;
  /** Requests of the input that an earlier run (the job directory's) already had: a resume's re-read lines. */
  readonly known?: number;
  /** Scopes listed at most. @default 20 */
  readonly maxScopes?: number;
  /** How a scope is shown (the demo names its sites). @default the scope's name */
  readonly label?: (scope: string) => string;
}

/**
 * The end-of-crawl summary.
 *
 * @param stats The crawl's tally.
 * @param now Scheduler time at the end.
 * @param options Interrupted, pending, filtered, rows.
 * @returns Lines joined by `\n`, no trailing newline.
 * @example
 * ```ts
 * import { CrawlStats } from "./crawl_stats.ts";
 * import { formatSummary } from "./summary.ts";
 * const stats = new CrawlStats(0);
 * stats.recordFinal(200, false);
 * console.assert(formatSummary(stats, 2000).startsWith("politely: 1 request ended in 2.0s"));
 * ```
 */
export function formatSummary(
  stats: CrawlStats,
  now: number,
  options: SummaryOptions = {},
): string {
  const durationMs = Math.max(0, now - stats.startedAt);
  const label = options.label ?? String;
  const r = stats.requests;
  const a = stats.attempts;
  const attempts = a["2xx"] + a["3xx"] + a["4xx"] + a["5xx"] + a.error;
  const lines = [
    `politely: ${stats.finished} request${stats.finished === 1 ? "" : "s"} ended in ${
      formatDuration(durationMs)
    }` +
    (options.interrupted === true ? " (interrupted)" : ""),
    `  responses: 2xx ${r["2xx"]}, 3xx ${r["3xx"]}, 4xx ${r["4xx"]}, 5xx ${
      r["5xx"]
    }; errors ${r.error}`,
    `  attempts: ${attempts}, retries ${stats.retries}, failures ${stats.failures}`,
  ];
  if (options.aborted !== undefined) {
    const left = options.pending === undefined
      ? ""
      : `, ${plural(options.pending, "request")} not ended` +
        (options.jobDir !== undefined && options.pending > 0
          ? ` (they stay pending in ${options.jobDir}: run again to resume)`
          : "");
    lines.push(
      `  stopped${options.interrupted === true ? ` by ${options.stoppedBy ?? "Ctrl-C"}` : ""}: ${
        plural(options.aborted, "download")
      } in flight aborted${left}`,
    );
  }
  const extra: string[] = [];
  if (options.filtered !== undefined && options.filtered > 0) {
    extra.push(`duplicates dropped ${options.filtered}`);
  }
  if (options.known !== undefined && options.known > 0) {
    extra.push(`already in the job directory ${options.known}`);
  }
  if (options.aborted === undefined && options.pending !== undefined && options.pending > 0) {
    extra.push(`requests not ended ${options.pending}`);
  }
  if (stats.evicted > 0) extra.push(`scopes evicted ${stats.evicted}`);
  if (extra.length > 0) lines.push(`  ${extra.join(", ")}`);
  const scopes = [...stats.scopes.values()];
  if (scopes.length > 0) {
    const max = options.maxScopes ?? 20;
    lines.push(
      `  ${fit("scope", 32)}${fit("attempts", 10, "right")}${fit("2xx", 8, "right")}${
        fit("429/503", 9, "right")
      }${fit("req/s", 8, "right")}`,
    );
    const sorted = scopes.sort((x, y) => total(y) - total(x) || (x.scope < y.scope ? -1 : 1));
    for (const s of sorted.slice(0, max)) {
      const rate = durationMs > 0 ? (total(s) * 1000) / durationMs : 0;
      lines.push(
        `  ${fit(label(s.scope), 32)}${fit(String(total(s)), 10, "right")}${
          fit(String(s.counts["2xx"]), 8, "right")
        }${fit(String(s.rejected), 9, "right")}${fit(rate.toFixed(2), 8, "right")}`,
      );
    }
    if (sorted.length > max) lines.push(`  ... and ${sorted.length - max} more scopes`);
  }
  return lines.join("\n");
}

function total(
  s: {
    readonly counts: { "2xx": number; "3xx": number; "4xx": number; "5xx": number; error: number };
  },
): number {
  const c = s.counts;
  return c["2xx"] + c["3xx"] + c["4xx"] + c["5xx"] + c.error;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
