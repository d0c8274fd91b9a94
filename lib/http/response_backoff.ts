/**
 * What an outcome means to each of its scopes: a backoff trigger or not, a
 * server-given hold, a quota correction. The reference's
 * `get_response_backoff` and `update_scope_backoff`.
 *
 * @module
 */
import { classifyDownloadError, errorMatches } from "./download_errors.ts";
import { errorText } from "./_error_text.ts";
import { type Outcome, outcomeStatus, type ResponseLike } from "../outcome.ts";
import {
  announcedBudget,
  type AnnouncedReading,
  type HeadersLike,
  headerValue,
  parseHttpDate,
  parseRetryAfter,
  type QuotaRemaining,
  quotaRemaining,
  serverDelayMs,
} from "./rate_limit_headers.ts";
import { ThrottlingScopeManager } from "../managers/scope_manager.ts";
import { type ResolvedScopeConfig, scopeKind } from "../settings/settings.ts";
import type { Throttler } from "../throttler/throttler.ts";
import { own, setOwn } from "../settings/_own.ts";

/** What an outcome does to one scope. */
export interface ScopeBackoff {
  /** A backoff trigger: the scope slows down. */
  readonly trigger: boolean;
  /** A hard hold the server asked for (ms, capped by the scope's max delay when applied). */
  readonly holdMs?: number;
  /** Which header gave the hold. */
  readonly holdSource?: "retry-after" | "ratelimit";
  /** Why, for events and logs (`"status 429"`, `"DownloadTimeoutError"`). */
  readonly cause?: string;
  /** Add this to the scope's quota use of the current window. */
  readonly consumed?: number;
  /** The server says this much quota is left. */
  readonly remaining?: number;
  /**
   * The trigger is explained by the headers as a spent quota (remaining 0 and
   * a reset): its hold only, no backoff step.
   */
  readonly explained?: boolean;
  /** What the response announced about the server's budget (`Throttler.recordAnnounced`). */
  readonly announced?: AnnouncedReading;
}

/** What an outcome does to each of its scopes, by scope name. */
export type ResponseBackoff = Readonly<Record<string, ScopeBackoff>>;

/**
 * A copy of `backoff` with one scope's entry updated (the reference's
 * `update_scope_backoff`): e.g. report the difference between a request's
 * estimated and actual cost.
 *
 * @param backoff What the outcome does so far.
 * @param scope The scope to update (added when missing, as no trigger).
 * @param update The fields to set.
 * @returns The new record.
 * @example Cost reconciliation
 * ```ts
 * import { updateScopeBackoff } from "./response_backoff.ts";
 * const b = updateScopeBackoff({}, "cost", { consumed: 2.5 });
 * console.assert(b["cost"]?.consumed === 2.5 && b["cost"]?.trigger === false);
 * ```
 */
export function updateScopeBackoff(
  backoff: ResponseBackoff,
  scope: string,
  update: Partial<ScopeBackoff>,
): ResponseBackoff {
  const current = own(backoff, scope) ?? { trigger: false };
  // A computed key is an own property even when it is "__proto__".
  return { ...backoff, [scope]: { ...current, ...update } };
}

/** The configuration a scope runs with now (its manager's, or from the settings). */
function scopeConfigOf(
  throttler: Throttler<never> | Throttler<unknown>,
  scope: string,
): ResolvedScopeConfig {
  // peekManager, not manager: the throttler may then reuse the scope's object after eviction.
  const manager = (throttler as Throttler<unknown>).peekManager(scope);
  return manager instanceof ThrottlingScopeManager ? manager.config : throttler.scopeConfig(scope);
}

/** The headers of a response-like value, when it has any. */
export function responseHeaders(response: unknown): HeadersLike | undefined {
  if (typeof response !== "object" || response === null) return undefined;
  const headers = (response as ResponseLike).headers;
  return typeof headers === "object" && headers !== null ? headers as HeadersLike : undefined;
}

/**
 * Whether an outcome is a 403 that its headers say a rate limit refused: it
 * carries a `Retry-After`, or announces a spent budget (a remaining of 0 and a
 * reset). GitHub answers both its primary and its secondary rate limits so
 * (403 or 429); a plain 403 (forbidden) has neither. Such a 403 is a refusal
 * like a 429: a backoff trigger with its hold, and retried as a refusal
 * (docs/DECISIONS.md, "A 403 its headers call a rate limit").
 *
 * @param outcome The outcome.
 * @param nowEpochMs Wall-clock time in epoch ms (for an HTTP-date `Retry-After`).
 * @param announced What the headers announce, when already read.
 * @returns Whether it is such a refusal.
 * @example GitHub's answer to a spent primary rate limit
 * ```ts
 * import assert from "node:assert/strict";
 * import { rateLimited403 } from "./response_backoff.ts";
 * const response = {
 *   status: 403,
 *   headers: { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1700000060" },
 * };
 * const outcome = {
 *   kind: "response",
 *   request: "u",
 *   scopes: [],
 *   attempt: 1,
 *   sentAt: 0,
 *   latencyMs: 5,
 *   response,
 * } as const;
 * assert(rateLimited403(outcome, 1_700_000_000_000));
 * assert(!rateLimited403({ ...outcome, response: { status: 403, headers: {} } }, 0));
 * ```
 */
export function rateLimited403(
  outcome: Outcome<unknown, unknown>,
  nowEpochMs: number,
  announced?: AnnouncedReading,
): boolean {
  if (outcome.kind !== "response" || outcomeStatus(outcome) !== 403) return false;
  const headers = responseHeaders(outcome.response);
  if (headers === undefined) return false;
  if (parseRetryAfter(headerValue(headers, "retry-after"), nowEpochMs) !== undefined) return true;
  return spentBudget(announced ?? announcedBudget(headers, nowEpochMs));
}

/** Whether an announced budget is spent: a remaining of 0 with a reset (one that just passed too). */
function spentBudget(announced: AnnouncedReading | undefined): boolean {
  return announced !== undefined && announced.remaining === 0 && announced.resetInMs !== undefined;
}

/**
 * The default reading of an outcome, scope by scope: a trigger when the status
 * is in the scope's `backoff.httpCodes` (or a 403 a rate limit answered, see
 * {@linkcode rateLimited403}) or the error matches its
 * `backoff.exceptions`; a hold from `Retry-After` / `RateLimit-Reset` /
 * `RateLimit` on a trigger; on any response, the budget its rate-limit
 * headers announce, for domain and IP scopes and for custom scopes with a
 * quota (a trigger that the budget explains as spent is `explained`); the
 * quota left for scopes that have a quota.
 *
 * @param throttler The throttler (for each scope's configuration).
 * @param outcome The outcome.
 * @param nowEpochMs Wall-clock time in epoch ms, for HTTP-dates (the response's
 *   own `Date` header is preferred when present, so clock skew does not matter).
 * @returns What the outcome does to each scope.
 */
export function defaultResponseBackoff(
  throttler: Throttler<never> | Throttler<unknown>,
  outcome: Outcome<unknown, unknown>,
  nowEpochMs: number,
): ResponseBackoff {
  const status = outcomeStatus(outcome);
  const headers = outcome.kind === "response" ? responseHeaders(outcome.response) : undefined;
  const classified = outcome.kind === "error" ? classifyDownloadError(outcome.error) : undefined;
  const result: Record<string, ScopeBackoff> = {};
  let serverNow: number | undefined;
  let quota: QuotaRemaining | undefined | null = null;
  // The same for every scope of the outcome: read once.
  const announced = headers === undefined ? undefined : announcedBudget(headers, nowEpochMs);
  // A reset of 0 (one that just passed) still says the quota was spent.
  const spent = spentBudget(announced);
  const refused403 = status === 403 && rateLimited403(outcome, nowEpochMs, announced);
  for (const scope of outcome.scopes) {
    const config = scopeConfigOf(throttler, scope);
    let trigger = false;
    let cause: string | undefined;
    if (status !== undefined && (refused403 || config.backoff.httpCodes.includes(status))) {
      trigger = true;
      cause = `status ${status}`;
    } else if (classified !== undefined && errorMatches(classified, config.backoff.exceptions)) {
      trigger = true;
      cause = errorText(classified);
    }
    let entry: ScopeBackoff = cause === undefined ? { trigger } : { trigger, cause };
    if (trigger && headers !== undefined) {
      serverNow ??= serverClock(headers, nowEpochMs);
      const hold = serverDelayMs(headers, serverNow);
      if (hold !== undefined && hold.delayMs > 0) {
        entry = { ...entry, holdMs: hold.delayMs, holdSource: hold.source };
      }
      if (spent) entry = { ...entry, explained: true };
    }
    if (announced !== undefined && (config.quota !== undefined || scopeKind(scope) !== "custom")) {
      entry = { ...entry, announced };
    }
    if (config.quota !== undefined && headers !== undefined) {
      // The same for every scope of the outcome: read once.
      if (quota === null) quota = quotaRemaining(headers, nowEpochMs);
      if (quota !== undefined) entry = { ...entry, remaining: quota.remaining };
    }
    setOwn(result, scope, entry);
  }
  return result;
}

function serverClock(headers: HeadersLike, nowEpochMs: number): number {
  const date = headerValue(headers, "date");
  const parsed = date === undefined ? undefined : parseHttpDate(date, nowEpochMs);
  return parsed ?? nowEpochMs;
}
