/**
 * `backoffOn`: reads every outcome of `throttleByScope`, slows down the scopes
 * a server is unhappy with, honours Retry-After / RateLimit holds, reconciles
 * quotas, and sends failed attempts through the gate again.
 *
 * @module
 */
import { Observable, type OperatorFunction } from "rxjs";
import { classifyDownloadError, errorMatches } from "../lib/http/download_errors.ts";
import type { Outcome } from "../lib/outcome.ts";
import { outcomeStatus } from "../lib/outcome.ts";
import { requestMeta } from "../lib/request.ts";
import {
  defaultResponseBackoff,
  rateLimited403,
  type ResponseBackoff,
} from "../lib/http/response_backoff.ts";
import type { Throttler } from "../lib/throttler/throttler.ts";
import { resubmitOf } from "../lib/_resubmit.ts";
import { errorText } from "../lib/http/_error_text.ts";
import { attemptsLeft, resolveRetry, type RetryOptions } from "./_retry.ts";

export type { RetryOptions };

/** Options of {@link backoffOn}. */
export interface BackoffOnOptions<R, T> {
  /** Retrying; `false` turns it off. @default from the throttler's settings */
  readonly retry?: boolean | RetryOptions;
  /**
   * What an outcome does to each scope (the reference's
   * `get_response_backoff`). `base` is the default reading, to call as
   * "super": wrap it to read an upstream status header, or to report actual
   * costs with `updateScopeBackoff`.
   * @default the default reading
   */
  readonly getResponseBackoff?: (
    outcome: Outcome<R, T>,
    base: (outcome: Outcome<R, T>) => ResponseBackoff,
  ) => ResponseBackoff;
  /**
   * Wall-clock time in epoch ms, for HTTP-dates in Retry-After when the
   * response has no `Date` header.
   * @default the throttler's scheduler `now()` (epoch ms with asyncScheduler)
   */
  readonly nowEpochMs?: () => number;
}

/**
 * Backoff and retries for a `throttleByScope` pipeline. Put it **right after**
 * `throttleByScope`: the gate emits each outcome before it frees the request's
 * slot, so the backoff recorded here is in place before the scope's next
 * request can go, even at high concurrency.
 *
 * For each outcome (unless `meta.throttlingDontTrack`): each scope whose
 * `backoff.httpCodes` contain the status, or whose `backoff.exceptions` match
 * the error, takes a backoff step (so does a 403 that a `Retry-After` or a
 * spent budget calls a rate limit, retried as a refusal: `rateLimited403`
 * of lib/http/response_backoff.ts); a Retry-After / RateLimit delay on such a
 * trigger becomes a hold capped at the scope's max delay; the budget a
 * response announces in rate-limit headers (any status) is obeyed: a spent
 * budget holds the scope until its reset (a refusal it explains takes no
 * backoff step), a remaining one is paced until the reset; quota scopes are
 * reconciled from rate-limit headers. Then an attempt that failed in a
 * retryable way is sent through the gate again (each attempt is seen here),
 * until the retries run out: the last attempt comes out with `exhausted:
 * true`. Nothing is dropped.
 *
 * @param throttler The throttler the gate uses.
 * @param options Retry options, a custom reading of outcomes, the wall clock.
 * @returns An operator from outcomes to outcomes.
 * @example
 * ```ts
 * import { from } from "rxjs";
 * import { backoffOn, createThrottler, throttleByScope } from "../mod.ts";
 * const throttler = createThrottler({ retry: { times: 3 } });
 * from(["https://example.com/"]).pipe(
 *   throttleByScope(throttler, (url) => Promise.resolve({ status: 200, url })),
 *   backoffOn(throttler),
 * ).subscribe((o) => console.log(o.kind, o.attempt));
 * ```
 */
export function backoffOn<R, T>(
  throttler: Throttler<R>,
  options: BackoffOnOptions<R, T> = {},
): OperatorFunction<Outcome<R, T>, Outcome<R, T>> {
  const settings = throttler.settings;
  const retry = resolveRetry(settings, options.retry);
  for (const name of ["times", "refusedTimes"] as const) {
    if (!Number.isInteger(retry[name]) || retry[name] < 0) {
      throw new RangeError(
        `Cannot create backoffOn as 'retry.${name}' must be an integer >= 0: current value is ${
          retry[name]
        }`,
      );
    }
  }
  const clock = options.nowEpochMs ?? (() => throttler.scheduler.now());
  const custom = options.getResponseBackoff;
  const base = (outcome: Outcome<R, T>) =>
    defaultResponseBackoff(
      throttler as Throttler<unknown>,
      outcome as Outcome<unknown, unknown>,
      clock(),
    );

  return (source) =>
    new Observable<Outcome<R, T>>((subscriber) => {
      let warned = false;
      return source.subscribe({
        next: (outcome) => {
          if (requestMeta(outcome.request)?.throttlingDontTrack !== true) apply(outcome);
          const status = outcomeStatus(outcome);
          // A 403 a rate limit answered is a refusal (`rateLimited403`).
          const refused403 = retry.enabled && status === 403 &&
            rateLimited403(outcome as Outcome<unknown, unknown>, clock());
          const retryable = retry.enabled && isRetryable(outcome, status, refused403);
          if (retryable && attemptsLeft(retry, outcome.attempt, status, refused403)) {
            const resubmit = resubmitOf(outcome as Outcome<unknown, unknown>);
            if (resubmit !== undefined) {
              // Told before the resubmit, so the log reads "retry" then what the gate does with it.
              if (throttler.noticed) {
                throttler.emit({
                  type: "retry",
                  at: throttler.scheduler.now(),
                  scopes: outcome.scopes,
                  attempt: outcome.attempt + 1,
                  cause: retryCause(outcome, status),
                });
              }
              if (resubmit(outcome as Outcome<unknown, unknown>)) return;
            } else if (!warned) {
              // Retries would stop silently: say why, once.
              warned = true;
              throttler.emit({
                type: "warning",
                at: throttler.scheduler.now(),
                code: "backoff-cannot-retry",
                message:
                  "backoffOn() cannot retry: an outcome came without the link to the gate that " +
                  "sent it (an operator between throttleByScope() and backoffOn() built a new " +
                  "outcome object). Keep the outcome (spread it: { ...outcome, extra }) or put " +
                  "backoffOn() right after throttleByScope(); these outcomes end exhausted",
              });
            }
          }
          subscriber.next(retryable ? { ...outcome, exhausted: true } : outcome);
        },
        error: (error) => subscriber.error(error),
        complete: () => subscriber.complete(),
      });
    });

  function apply(outcome: Outcome<R, T>): void {
    const backoff = custom === undefined ? base(outcome) : custom(outcome, base);
    for (const scope of Object.keys(backoff)) {
      const b = backoff[scope]!;
      if (b.trigger) {
        const cause = b.cause ?? "trigger";
        const sentAt = outcome.sentAt;
        // A hold or an explained refusal speaks of a limit; else a failure may be noise.
        const signal = b.holdMs !== undefined
          ? { holdMs: b.holdMs, cause, sentAt }
          : b.explained !== true && softTrigger(outcome)
          ? { cause, sentAt, soft: true }
          : { cause, sentAt };
        throttler.recordBackoff(
          scope,
          b.explained === true ? { ...signal, explained: true } : signal,
          b.holdSource ?? "retry-after",
        );
      }
      if (b.announced !== undefined) {
        const told = b.trigger ? { ...b.announced, refused: true } : b.announced;
        throttler.recordAnnounced(
          scope,
          outcome.sentAt === undefined ? told : { ...told, sentAt: outcome.sentAt },
        );
      }
      if (b.remaining !== undefined || b.consumed !== undefined) {
        throttler.reconcileQuota(
          scope,
          b.remaining !== undefined ? { remaining: b.remaining } : { consumed: b.consumed! },
        );
      }
    }
  }

  function isRetryable(
    outcome: Outcome<R, T>,
    status: number | undefined,
    refused403: boolean,
  ): boolean {
    const verdict = retry.when?.(outcome as Outcome<unknown, unknown>);
    if (verdict !== undefined) return verdict;
    if (outcome.kind === "response") {
      return refused403 || (status !== undefined && retry.httpCodes.includes(status));
    }
    return errorMatches(classifyDownloadError(outcome.error), retry.exceptions);
  }
}

/**
 * A trigger that says nothing of a limit by itself (`BackoffSignal.soft`):
 * a failed download, or a server error other than 503.
 */
function softTrigger(outcome: Outcome<unknown, unknown>): boolean {
  if (outcome.kind === "error") return true;
  const status = outcomeStatus(outcome);
  return status !== undefined && status >= 500 && status !== 503;
}

/**
 * What a retry event names: the status, or the error in the words of its
 * backoff and of its request-done event (lib/http/_error_text.ts).
 */
function retryCause(outcome: Outcome<unknown, unknown>, status: number | undefined): string {
  if (status !== undefined) return `status ${status}`;
  return outcome.kind === "error" ? errorText(outcome.error) : "retry";
}
