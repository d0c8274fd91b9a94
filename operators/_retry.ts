/**
 * The retry rule `backoffOn` applies: its `retry` option over the settings'
 * `retry` (and the backoff exceptions). One reading, used by `backoffOn` and
 * by `crawl()` (which gives up a request others tried as often as it allows).
 *
 * @module
 */
import type { Outcome } from "../lib/outcome.ts";
import type { ErrorMatcher, ThrottlerSettings } from "../lib/settings/settings.ts";

/** When and how often failed attempts are sent again. */
export interface RetryOptions {
  /** Retry at all. @default settings.retry.enabled (RETRY_ENABLED, true) */
  readonly enabled?: boolean;
  /** Retries after the first attempt. @default settings.retry.times (RETRY_TIMES, 2) */
  readonly times?: number;
  /**
   * More retries for a refusal (429, 503): retried up to `times + refusedTimes`.
   * @default settings.retry.refusedTimes (10)
   */
  readonly refusedTimes?: number;
  /** Statuses worth another attempt. @default settings.retry.httpCodes (RETRY_HTTP_CODES) */
  readonly httpCodes?: readonly number[];
  /** Download errors worth another attempt. @default the backoff exceptions of the settings */
  readonly exceptions?: readonly ErrorMatcher[];
  /** Decide yourself (overrides the two above when it returns a boolean). */
  readonly when?: (outcome: Outcome<unknown, unknown>) => boolean | undefined;
}

/** A retry option read against the settings. */
export interface ResolvedRetry {
  readonly enabled: boolean;
  readonly times: number;
  readonly refusedTimes: number;
  readonly httpCodes: readonly number[];
  readonly exceptions: readonly ErrorMatcher[];
  readonly when: RetryOptions["when"];
}

/** `retry: false` (or `backoff: false` in `crawl()`): no retries. */
const NO_RETRY: ResolvedRetry = {
  enabled: false,
  times: 0,
  refusedTimes: 0,
  httpCodes: [],
  exceptions: [],
  when: undefined,
};

/**
 * Reads a `retry` option against the settings.
 *
 * @param settings The throttler's settings.
 * @param option `backoffOn`'s `retry`: `false` for none, options, or `true`/`undefined` for the settings'.
 * @returns The rule.
 */
export function resolveRetry(
  settings: ThrottlerSettings,
  option: boolean | RetryOptions | undefined,
): ResolvedRetry {
  if (option === false) return NO_RETRY;
  const o = typeof option === "object" ? option : {};
  return {
    enabled: o.enabled ?? settings.retry.enabled,
    times: o.times ?? settings.retry.times,
    refusedTimes: o.refusedTimes ?? settings.retry.refusedTimes,
    httpCodes: o.httpCodes ?? settings.retry.httpCodes,
    exceptions: o.exceptions ?? settings.backoff.exceptions,
    when: o.when,
  };
}

/** Statuses that say "not now" (too many requests, unavailable): refusals, retried longer. */
const REFUSALS: ReadonlySet<number> = new Set([429, 503]);

/**
 * Whether an attempt that ended with `status` and was `attempt` may be sent
 * again under `retry` (its retryability decided apart): a refusal up to
 * `times + refusedTimes` retries, anything else up to `times`.
 *
 * @param retry The rule.
 * @param attempt The attempt that ended (1 for the first).
 * @param status Its status, for a response.
 * @param refused A refusal whatever its status (a 403 a rate limit answered).
 * @returns Whether another attempt is allowed.
 */
export function attemptsLeft(
  retry: ResolvedRetry,
  attempt: number,
  status: number | undefined,
  refused = false,
): boolean {
  const extra = refused || (status !== undefined && REFUSALS.has(status)) ? retry.refusedTimes : 0;
  return attempt <= retry.times + extra;
}

/**
 * Attempts a rule allows one request at most: 1 and its retries, a
 * refusal's included (1 when retrying is off).
 *
 * @param retry The rule.
 * @returns The count.
 */
export function attemptsAllowed(retry: ResolvedRetry): number {
  return retry.enabled ? 1 + retry.times + retry.refusedTimes : 1;
}
