/**
 * The reference's `ThrottlingScopeManagerProtocol`, in TypeScript and in
 * milliseconds: the pure arithmetic of one scope. Every method takes `now`
 * (scheduler time, ms) instead of reading a clock, so a manager can be checked
 * with tables of numbers and driven by any store.
 *
 * @module
 */

/** What a backoff trigger carries besides "slow down". */
export interface BackoffSignal {
  /**
   * A hard hold asked for by the server (Retry-After, RateLimit-Reset) or by
   * `delayScope`: nothing is sent for the scope until it ends.
   */
  readonly holdMs?: number;
  /** Do not cap `holdMs` at the backoff max delay (`delayScope`). @default false */
  readonly uncapped?: boolean;
  /** Why the trigger happened, for events and logs (e.g. `"status 429"`). */
  readonly cause?: string;
  /**
   * When the request whose outcome is the trigger was sent. A request sent
   * before the scope's last backoff step reports the overload that step
   * answered: the default manager takes no further step for it.
   */
  readonly sentAt?: number;
  /**
   * The response's rate-limit headers explain the refusal as a spent quota
   * (remaining 0 and a reset): the trigger is its hold only, no backoff step
   * and no rampup cut, since sending slower would not have avoided it.
   * @default false
   */
  readonly explained?: boolean;
  /**
   * The trigger says nothing of a limit by itself: a server error other than
   * 503 (a gateway's 502 or 504, a CDN's 52x) or a failed download, with no
   * hold asked for. A flaky backend answers some requests so whatever the
   * load. An adaptive scope takes it for a limit's refusal only among others
   * (`NOISE_CLUSTER` of its last `NOISE_ANSWERS` answers); alone it is
   * retried and changes nothing. @default false
   */
  readonly soft?: boolean;
}

/**
 * What a server announced about its budget in rate-limit headers
 * (`RateLimit`/`RateLimit-Policy`, `RateLimit-*`, `X-RateLimit-*`), on any
 * response. Every field is optional: a server may say only part of it.
 */
export interface AnnouncedBudget {
  /** Requests allowed per window (`q`, `RateLimit-Limit`, `X-RateLimit-Limit`). */
  readonly limit?: number;
  /** The window of `limit`, ms (`RateLimit-Policy`'s `w`). */
  readonly windowMs?: number;
  /** Requests left before the reset. */
  readonly remaining?: number;
  /** Time until the window resets (remaining back to the limit), ms. */
  readonly resetInMs?: number;
  /**
   * The reset came as an epoch time in whole seconds (`X-RateLimit-Reset:
   * 1700000060`): up to a second late however often it is read, so a
   * window read from it is tried shorter. @default false
   */
  readonly resetIsEpoch?: boolean;
  /**
   * When the announcing request was sent (scheduler time): the server
   * counted it between then and the answer, which bounds when a window
   * began (see `ThrottlingScopeManager.recordAnnounced`).
   */
  readonly sentAt?: number;
  /**
   * The announcing answer was a refusal (a trigger). A budget told only by
   * refusals is not confirmed by any admitted answer: the scope tries above
   * it (see `AnnouncedWindow.toldOnRefusals`). @default false
   */
  readonly refused?: boolean;
}

/** How a request settled, for managers that learn from latency. */
export interface DoneInfo {
  readonly latencyMs: number;
  /** HTTP status, when the download produced a response that has one. */
  readonly status: number | undefined;
  /** The download failed (an error outcome, no response). @default false */
  readonly failed?: boolean;
  /**
   * When the request was sent (scheduler time). `recordDone` may come a
   * little after the answer, so `now - latencyMs` is not exactly it.
   * @default now - latencyMs
   */
  readonly sentAt?: number;
}

/** How a new configured delay is to be kept. */
export interface BaseDelayOptions {
  /**
   * The delay is a minimum the server asked for (robots.txt `Crawl-delay`):
   * jitter may lengthen a gap but never make it shorter than this.
   * @default false
   */
  readonly floor?: boolean;
}

/** How a new concurrency limit is to be kept. */
export interface ConcurrencyOptions {
  /**
   * A limit for a while (robots.txt's one at a time while it is unknown, and
   * putting the old limit back): an adaptive scope's slow start goes on from
   * it instead of ending there.
   * @default false
   */
  readonly temporary?: boolean;
}

/** A correction to a scope's quota use, from the response. */
export interface QuotaReconciliation {
  /** Add this much to what the window has used (may be negative). */
  readonly consumed?: number;
  /** The server says this much is left: `used = quota - remaining`. Wins over `consumed`. */
  readonly remaining?: number;
}

/** A scope's state as the stores and the live view show it. */
export interface ScopeState {
  readonly scope: string;
  /** The stored delay between sends (before jitter), in ms. */
  readonly delayMs: number;
  /** The configured delay that recovery returns to, in ms. */
  readonly baseDelayMs: number;
  /** The current concurrency limit. */
  readonly concurrency: number;
  /** Requests in flight. */
  readonly active: number;
  /** Unrecovered backoff triggers (0 = not in backoff). */
  readonly backoffLevel: number;
  /** Scheduler time until which nothing is sent (hard hold), or 0. */
  readonly holdUntil: number;
  /** Scheduler time before which the next request may not go (delay + jitter), or 0. */
  readonly nextSendAt: number;
  /**
   * Quota of the current window: the configured one, else one the server
   * announced (a limit and a window from its rate-limit headers).
   */
  readonly quota:
    | { readonly limit: number; readonly used: number; readonly resetsAt: number }
    | undefined;
  /** Whether rampup is probing this scope. */
  readonly rampup: boolean;
}

/**
 * One scope's throttling arithmetic. `canSend` answers how long to wait; the
 * `record*` methods move the state on. Implementations must not read a clock.
 */
export interface ThrottlingScopeManagerProtocol {
  /**
   * How long, in ms, before a request consuming `amount` may be sent: `0`
   * now, a positive number to wait, `Infinity` to wait for `recordDone`
   * (concurrency full).
   */
  canSend(now: number, amount?: number): number;
  /** A request consuming `amount` was sent now. */
  recordSent(now: number, amount?: number): void;
  /**
   * A request of this scope settled now; `result` tells how (latency-based
   * managers such as AutoThrottle read it).
   */
  recordDone(now: number, result?: DoneInfo): void;
  /**
   * A backoff trigger was seen now. Returns `false` when the manager took it
   * for noise and changed nothing (a lone soft trigger, `BackoffSignal.soft`):
   * the throttler's `backoff` event then says so (`noise: true`).
   */
  recordBackoff(now: number, signal?: BackoffSignal): void | boolean;
  /** Correct the quota use of the current window. */
  reconcileQuota(now: number, reconciliation: QuotaReconciliation): void;
  /**
   * A response announced the server's budget (optional: managers without it
   * ignore announcements). Called while the announcing request still counts
   * as in flight, as `backoffOn` does; values that are not finite and >= 0
   * are ignored.
   */
  recordAnnounced?(now: number, budget: AnnouncedBudget): void;
  /**
   * Pace no faster than `delayMs` (a pace another process learned; optional:
   * managers that do not adapt leave it out).
   */
  adoptDelay?(now: number, delayMs: number, why: string): void;
  /**
   * The request recorded as sent at `sentAt` reached the network `lateMs`
   * later than requests usually do: space the next send from then (optional:
   * managers without it space from `sentAt`).
   */
  recordWentOut?(sentAt: number, lateMs: number): void;
  /** Replace the configured delay (e.g. from robots.txt Crawl-delay). */
  setBaseDelay(delayMs: number, options?: BaseDelayOptions): void;
  /** Replace the concurrency limit. */
  setConcurrency(concurrency: number, options?: ConcurrencyOptions): void;
  /**
   * Whether the scope may be forgotten: nothing in flight, no hold, no backoff, no send still to
   * wait for, no quota use to remember, idle long enough. A forgotten scope comes back from its
   * configuration, so anything it would forget must keep it.
   */
  isIdle(now: number, maxIdleMs: number): boolean;
  /** The state to show (optional for custom managers). */
  state?(now: number): ScopeState;
  /**
   * The next time at which the state changes by itself (a recovery step, a
   * rampup step, a quota window reset), so a store can wake up and emit it.
   */
  nextWakeAt?(now: number): number | undefined;
  /** Take the steps that are due at `now` (recovery, rampup); returns what happened. */
  advance?(now: number): readonly ScopeStep[];
}

/** A change a manager made by itself as time passed or on a trigger. */
export type ScopeStep =
  | {
    readonly kind: "backoff";
    readonly delayMs: number;
    readonly level: number;
    readonly concurrency: number;
    readonly holdUntil: number | undefined;
    readonly cause: string;
  }
  | { readonly kind: "recovery"; readonly delayMs: number; readonly level: number }
  | {
    readonly kind: "rampup";
    readonly delayMs: number;
    readonly concurrency: number;
    readonly why: string;
  }
  | { readonly kind: "hold"; readonly until: number };
