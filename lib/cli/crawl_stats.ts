/**
 * The counts a crawl keeps for its live view, its log and its summary: what
 * was answered with which status class, per scope and in all, and recent
 * rates. Plain arithmetic with time passed in, so the views are pure.
 *
 * @module
 */
import type { ThrottleEvent } from "../events.ts";

/** Responses by status class, and attempts that ended in an error. */
export interface StatusCounts {
  "2xx": number;
  "3xx": number;
  "4xx": number;
  "5xx": number;
  /** Attempts with no HTTP response (network error, timeout, abort). */
  error: number;
}

/** What the crawl knows of one scope. */
export interface ScopeStats {
  readonly scope: string;
  /** Order of first appearance (0 for the first scope seen). */
  readonly index: number;
  /** Every attempt, by status class (retried 429s included). */
  readonly counts: StatusCounts;
  /** Attempts answered 429 or 503. */
  rejected: number;
  /** Times (ms) of the recent completed attempts, oldest first. */
  readonly recent: number[];
}

/** The status class of an HTTP status, or `"error"` without one. */
export function statusClass(status: number | undefined): keyof StatusCounts {
  if (status === undefined) return "error";
  if (status >= 500) return "5xx";
  if (status >= 400) return "4xx";
  if (status >= 300) return "3xx";
  return "2xx";
}

/** Zeroed counts. */
export function emptyCounts(): StatusCounts {
  return { "2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0, error: 0 };
}

/** How far back recent times are kept, in ms. */
const KEEP_MS = 30_000;

/**
 * The running tally of a crawl. Feed it every throttling event (attempts, evictions) and
 * every final outcome (requests).
 */
export class CrawlStats {
  /** Scheduler time at which the crawl started. */
  readonly startedAt: number;
  /** Requests that ended (final outcomes, failures included). */
  finished = 0;
  /** Requests that ended without a usable response (error, or retries exhausted). */
  failures = 0;
  /** Attempts sent again. */
  retries = 0;
  /** Attempts completed, by status class. */
  readonly attempts: StatusCounts = emptyCounts();
  /** Final outcomes, by status class. */
  readonly requests: StatusCounts = emptyCounts();
  /** Per scope, in order of first appearance. */
  readonly scopes = new Map<string, ScopeStats>();
  /** Scopes the throttler evicted (`scope-evicted` events: idle, or over the scope limit). */
  evicted = 0;

  constructor(startedAt: number) {
    this.startedAt = startedAt;
  }

  /** Count a throttling event (completed attempts, retries, evictions). */
  recordEvent(event: ThrottleEvent): void {
    if (event.type === "request-done") {
      const cls = statusClass(event.status);
      this.attempts[cls]++;
      for (const scope of event.scopes) {
        const s = this.scope(scope);
        s.counts[cls]++;
        if (event.status === 429 || event.status === 503) s.rejected++;
        s.recent.push(event.at);
        prune(s.recent, event.at);
      }
    } else if (event.type === "retry") {
      this.retries++;
    } else if (event.type === "scope-evicted") {
      this.evicted++;
    }
  }

  /** Count a request that ended: its final status (undefined for an error) and whether it failed. */
  recordFinal(status: number | undefined, failed: boolean): void {
    this.finished++;
    this.requests[statusClass(status)]++;
    if (failed) this.failures++;
  }

  /** The stats of a scope, created empty when first asked. */
  scope(name: string): ScopeStats {
    let s = this.scopes.get(name);
    if (s === undefined) {
      s = {
        scope: name,
        index: this.scopes.size,
        counts: emptyCounts(),
        rejected: 0,
        recent: [],
      };
      this.scopes.set(name, s);
    }
    return s;
  }

  /**
   * Completed attempts per second of a scope over the last `windowMs` before
   * `now` (shorter at the start of the crawl).
   */
  rate(scope: string, now: number, windowMs = 5_000): number {
    const s = this.scopes.get(scope);
    if (s === undefined) return 0;
    const span = Math.min(windowMs, now - this.startedAt);
    if (span <= 0) return 0;
    const times = s.recent;
    let n = 0;
    for (let i = times.length - 1; i >= 0 && times[i]! > now - span; i--) n++;
    return (n * 1000) / span;
  }
}

function prune(times: number[], now: number): void {
  let drop = 0;
  while (drop < times.length && times[drop]! < now - KEEP_MS) drop++;
  if (drop > 64) times.splice(0, drop);
}
