/**
 * The arithmetic of the rate limits that the demo sites (real loopback HTTP,
 * `sites.ts`) and the simulated site (virtual time, `../sim/simulated_site.ts`)
 * hide from their clients. Every function is pure: state in, `nowMs` in, new
 * state and a decision out. No timers, no clock. These are the *servers'*
 * limits; nothing here is politely's throttling.
 *
 * @module
 */

/**
 * Token counts are fractions that accumulate in floating point (`1000 / 3` ms
 * per token); a bucket that holds 0.9999999999 of a token after exactly one
 * token's worth of time must still admit the request.
 */
const EPSILON = 1e-9;

// ---------------------------------------------------------------------------
// Token bucket

/** A token bucket's fixed parameters. */
export interface TokenBucketConfig {
  /** Tokens added per second (the sustained rate the bucket admits); `Infinity` for no limit. */
  readonly ratePerSec: number;
  /** Capacity of the bucket: how many requests may arrive at once after a quiet spell (finite, >= 1). */
  readonly burst: number;
}

/** A token bucket's state at `updatedAtMs`. */
export interface TokenBucketState {
  readonly tokens: number;
  readonly updatedAtMs: number;
}

/** What a token bucket says to one arrival. */
export interface TokenBucketDecision {
  readonly allowed: boolean;
  readonly state: TokenBucketState;
  /** Whole tokens left after this arrival. */
  readonly remaining: number;
  /** Time until one token is available (0 when one already is, after this arrival). */
  readonly nextTokenInMs: number;
  /** Time until the bucket is full again. */
  readonly fullInMs: number;
}

/** A full bucket at `nowMs`. */
export function tokenBucketStart(config: TokenBucketConfig, nowMs: number): TokenBucketState {
  return { tokens: config.burst, updatedAtMs: nowMs };
}

/**
 * The bucket refilled up to `nowMs`. A clock that steps back adds nothing (and
 * keeps the later `updatedAtMs`), so a wall clock's adjustment cannot mint tokens.
 */
export function tokenBucketRefill(
  config: TokenBucketConfig,
  state: TokenBucketState,
  nowMs: number,
): TokenBucketState {
  const elapsed = Math.max(0, nowMs - state.updatedAtMs);
  // An infinite rate refills at once; guarded because 0 * Infinity is NaN.
  const added = elapsed === 0 ? 0 : (elapsed * config.ratePerSec) / 1000;
  const tokens = config.ratePerSec === Infinity
    ? config.burst
    : Math.min(config.burst, state.tokens + added);
  return { tokens, updatedAtMs: Math.max(nowMs, state.updatedAtMs) };
}

/** One arrival at `nowMs`: takes a token when there is one. */
export function tokenBucketTake(
  config: TokenBucketConfig,
  state: TokenBucketState,
  nowMs: number,
): TokenBucketDecision {
  const refilled = tokenBucketRefill(config, state, nowMs);
  const allowed = refilled.tokens >= 1 - EPSILON;
  const tokens = allowed ? Math.max(0, refilled.tokens - 1) : refilled.tokens;
  const next: TokenBucketState = { tokens, updatedAtMs: refilled.updatedAtMs };
  const msPerToken = 1000 / config.ratePerSec;
  return {
    allowed,
    state: next,
    remaining: Math.floor(tokens + EPSILON),
    nextTokenInMs: tokens >= 1 - EPSILON ? 0 : (1 - tokens) * msPerToken,
    fullInMs: Math.max(0, (config.burst - tokens) * msPerToken),
  };
}

// ---------------------------------------------------------------------------
// Concurrency cap

/** How many requests a concurrency cap is serving. */
export interface ConcurrencyState {
  readonly inFlight: number;
}

/** What a concurrency cap says to one arrival. */
export interface ConcurrencyDecision {
  readonly allowed: boolean;
  readonly state: ConcurrencyState;
}

/** An idle concurrency cap. */
export const CONCURRENCY_IDLE: ConcurrencyState = { inFlight: 0 };

/** One arrival: takes a slot when fewer than `limit` are in flight. */
export function concurrencyAcquire(limit: number, state: ConcurrencyState): ConcurrencyDecision {
  if (state.inFlight >= limit) return { allowed: false, state };
  return { allowed: true, state: { inFlight: state.inFlight + 1 } };
}

/** One admitted request finished (or was abandoned): frees its slot, never below zero. */
export function concurrencyRelease(state: ConcurrencyState): ConcurrencyState {
  return { inFlight: Math.max(0, state.inFlight - 1) };
}

// ---------------------------------------------------------------------------
// Fixed window

/** A fixed window's parameters: `quota` requests per `windowMs`. */
export interface FixedWindowConfig {
  readonly quota: number;
  readonly windowMs: number;
  /**
   * Where windows begin: back to back from the first use ("first-use"), or
   * each at the first request after the last one ended ("request": a counter
   * with a time-to-live, as Redis INCR + EXPIRE and most per-client limiters
   * keep it), so a window begins later each time the client pauses.
   * @default "first-use"
   */
  readonly anchor?: "first-use" | "request";
}

/** A fixed window's state: the current window's start (unset before first use) and its count. */
export interface FixedWindowState {
  readonly windowStartMs: number | undefined;
  readonly used: number;
}

/** What a fixed window says to one arrival. */
export interface FixedWindowDecision {
  readonly allowed: boolean;
  readonly state: FixedWindowState;
  /** Requests left in the current window after this arrival. */
  readonly remaining: number;
  /** Time until the current window ends and the count resets. */
  readonly resetInMs: number;
}

/** A fixed window before its first use. */
export const FIXED_WINDOW_UNUSED: FixedWindowState = { windowStartMs: undefined, used: 0 };

/**
 * One arrival at `nowMs`. Windows start at first use and follow each other
 * back to back (`start + k * windowMs`), so a quiet spell does not shift them;
 * with `anchor: "request"` each begins at the first arrival after the last.
 */
export function fixedWindowTake(
  config: FixedWindowConfig,
  state: FixedWindowState,
  nowMs: number,
): FixedWindowDecision {
  let start = state.windowStartMs ?? nowMs;
  let used = state.used;
  if (nowMs >= start + config.windowMs) {
    start = config.anchor === "request"
      ? nowMs
      : start + Math.floor((nowMs - start) / config.windowMs) * config.windowMs;
    used = 0;
  }
  const allowed = used < config.quota;
  if (allowed) used += 1;
  return {
    allowed,
    state: { windowStartMs: start, used },
    remaining: Math.max(0, config.quota - used),
    resetInMs: Math.max(0, start + config.windowMs - nowMs),
  };
}

// ---------------------------------------------------------------------------
// Minimum interval (robots.txt Crawl-delay)

/** A minimum interval between admitted requests, with some slack for network jitter. */
export interface MinIntervalConfig {
  readonly intervalMs: number;
  /** An arrival this much early still counts as on time. */
  readonly toleranceMs: number;
}

/** When the last admitted request arrived (unset before the first). */
export interface MinIntervalState {
  readonly lastAdmittedMs: number | undefined;
}

/** What a minimum interval says to one arrival. */
export interface MinIntervalDecision {
  readonly allowed: boolean;
  readonly state: MinIntervalState;
  /** Time until an arrival would be admitted (0 when admitted now). */
  readonly waitMs: number;
}

/**
 * One arrival at `nowMs`: admitted when at least `intervalMs - toleranceMs`
 * has passed since the last admitted one. Rejected arrivals do not restart the
 * interval (a client that was told off and waits the full delay gets in).
 */
export function minIntervalTake(
  config: MinIntervalConfig,
  state: MinIntervalState,
  nowMs: number,
): MinIntervalDecision {
  const last = state.lastAdmittedMs;
  const earliest = last === undefined ? -Infinity : last + config.intervalMs - config.toleranceMs;
  if (nowMs >= earliest) return { allowed: true, state: { lastAdmittedMs: nowMs }, waitMs: 0 };
  return { allowed: false, state, waitMs: earliest - nowMs };
}

// ---------------------------------------------------------------------------
// Headers

/**
 * IETF `RateLimit-Policy` and `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers,
 * structured-field form) for one policy named "default": quota `q` per `w`
 * seconds, `r` left, `t` seconds until the quota resets. Seconds are rounded up
 * so a client that waits `t` is never early.
 */
export function rateLimitFields(
  quota: number,
  windowMs: number,
  remaining: number,
  resetInMs: number,
): { "ratelimit-policy": string; ratelimit: string } {
  const w = Math.max(1, Math.ceil(windowMs / 1000));
  const t = Math.max(0, Math.ceil(resetInMs / 1000 - EPSILON));
  return {
    "ratelimit-policy": `"default";q=${quota};w=${w}`,
    ratelimit: `"default";r=${remaining};t=${t}`,
  };
}

/** `Retry-After` as delta-seconds, rounded up and at least 1. */
export function retryAfterSeconds(waitMs: number): string {
  return String(Math.max(1, Math.ceil(waitMs / 1000 - EPSILON)));
}

/**
 * `Retry-After` as an HTTP-date (IMF-fixdate) at least `waitMs` after `nowMs`:
 * the date has one-second resolution, so it is rounded up to the next second.
 */
export function retryAfterDate(nowMs: number, waitMs: number): string {
  return new Date(Math.ceil((nowMs + waitMs) / 1000) * 1000).toUTCString();
}

// ---------------------------------------------------------------------------
// Stats

/** One request as a site saw it. */
export interface Arrival {
  /** Server clock (scheduler time) at arrival, ms. */
  readonly atMs: number;
  readonly path: string;
  /** The status the site decided on at arrival. */
  readonly status: number;
}

/** What a site has seen so far. */
export interface SiteStats {
  /** Every request, `/robots.txt` included. */
  readonly requests: number;
  /** Requests by response status. */
  readonly byStatus: Readonly<Record<number, number>>;
  /** Arrival times (server clock, ms), in order. */
  readonly arrivals: readonly number[];
  /** Every request with its path and status, in order of arrival. */
  readonly log: readonly Arrival[];
  /** Requests being handled right now. */
  readonly inFlight: number;
  /** The most requests handled at once (counted at arrival, rejected ones included). */
  readonly maxInFlight: number;
  /** Requests answered 429 or 503. */
  readonly rejected: number;
  /** Requests the client gave up on before the answer (aborted, connection closed). */
  readonly aborted: number;
}

/** Mutable tally behind `stats()`; private to the sites. */
export interface StatsRecorder {
  /** Count an arrival with the status decided for it. */
  arrive(atMs: number, path: string, status: number): void;
  /** One request is over (answered or abandoned). */
  depart(aborted: boolean): void;
  /** One request started being handled (before its status is decided). */
  enter(): void;
  snapshot(): SiteStats;
}

/** A fresh tally. */
export function createStatsRecorder(): StatsRecorder {
  let requests = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let rejected = 0;
  let aborted = 0;
  const byStatus: Record<number, number> = {};
  const log: Arrival[] = [];
  return {
    enter() {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
    },
    arrive(atMs, path, status) {
      requests += 1;
      byStatus[status] = (byStatus[status] ?? 0) + 1;
      if (status === 429 || status === 503) rejected += 1;
      log.push({ atMs, path, status });
    },
    depart(wasAborted) {
      inFlight = Math.max(0, inFlight - 1);
      if (wasAborted) aborted += 1;
    },
    snapshot() {
      return {
        requests,
        byStatus: { ...byStatus },
        arrivals: log.map((a) => a.atMs),
        log: [...log],
        inFlight,
        maxInFlight,
        rejected,
        aborted,
      };
    },
  };
}
