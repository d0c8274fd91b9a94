/**
 * The throttler's event stream: one discriminated union, so a consumer that
 * `match(...).exhaustive()`es on `type` is told at compile time of a new kind.
 *
 * @module
 */

/** Why a request could not be sent at once. */
export type WaitReason = "delay" | "concurrency" | "hold" | "quota" | "global" | "request-delay";

/** Everything the throttler reports, in scheduler time (`at`, ms). */
export type ThrottleEvent =
  | { readonly type: "scope-created"; readonly at: number; readonly scope: string }
  | {
    readonly type: "scope-evicted";
    readonly at: number;
    readonly scope: string;
    readonly reason: "idle" | "limit";
  }
  | {
    readonly type: "request-delayed";
    readonly at: number;
    readonly scope: string | undefined;
    readonly reason: WaitReason;
    readonly waitMs: number;
  }
  | {
    readonly type: "request-sent";
    readonly at: number;
    readonly scopes: readonly string[];
    readonly attempt: number;
  }
  | {
    readonly type: "request-done";
    readonly at: number;
    readonly scopes: readonly string[];
    readonly attempt: number;
    readonly latencyMs: number;
    readonly status: number | undefined;
    /**
     * A failed attempt's error, by class and code (`DownloadFailedError ECONNREFUSED`,
     * `RangeError`): the words of the `retry` and `backoff` events of the same failure.
     * The outcome holds the error itself.
     */
    readonly error: string | undefined;
  }
  | {
    readonly type: "backoff";
    readonly at: number;
    readonly scope: string;
    readonly delayMs: number;
    readonly level: number;
    readonly concurrency: number;
    readonly holdUntil: number | undefined;
    readonly cause: string;
    /**
     * The scope took the trigger for noise and changed nothing (a lone 502,
     * 504 or failed download on an adaptive scope: `BackoffSignal.soft`);
     * its cause ends in ", taken for noise".
     */
    readonly noise?: true;
  }
  | {
    readonly type: "recovery";
    readonly at: number;
    readonly scope: string;
    readonly delayMs: number;
    readonly level: number;
  }
  | {
    readonly type: "hold";
    readonly at: number;
    readonly scope: string;
    readonly until: number;
    readonly source: "retry-after" | "ratelimit" | "delay-scope" | "robots";
  }
  | {
    /** A response announced the server's budget in rate-limit headers. */
    readonly type: "announced";
    readonly at: number;
    readonly scope: string;
    /** Requests per window, when said. */
    readonly limit: number | undefined;
    /** The window of `limit`, ms, when said. */
    readonly windowMs: number | undefined;
    /** Requests left before the reset, when said. */
    readonly remaining: number | undefined;
    /** Scheduler time of the reset, when said. */
    readonly resetAt: number | undefined;
    /** Values present but not believed (garbage, negative, past, over a day), when any. */
    readonly ignored: readonly string[] | undefined;
  }
  | {
    readonly type: "rampup";
    readonly at: number;
    readonly scope: string;
    readonly delayMs: number;
    readonly concurrency: number;
    readonly why: string;
  }
  | {
    readonly type: "retry";
    readonly at: number;
    readonly scopes: readonly string[];
    readonly attempt: number;
    /** `status 503`, or the error as `request-done` names it (`DownloadTimeoutError`). */
    readonly cause: string;
  }
  | {
    readonly type: "robots";
    readonly at: number;
    readonly scope: string;
    readonly crawlDelayMs: number | undefined;
    readonly decision: string;
  }
  | {
    readonly type: "warning";
    readonly at: number;
    readonly code: string;
    readonly message: string;
    readonly scope?: string;
  };

/** The `type` of a throttle event. */
export type ThrottleEventType = ThrottleEvent["type"];
