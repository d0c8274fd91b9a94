/**
 * The limiter zoo: the shapes of rate limit that real servers run
 * (`../../docs/ZOO.md`), as pure models with time passed in. One
 * {@linkcode ZooSiteSpec} says what a site hides (the limiter), how it
 * refuses (429 or 503, with or without `Retry-After`) and what it announces
 * (IETF `RateLimit`, the older `RateLimit-*`, GitHub-style `X-RateLimit-*`, or
 * nothing). The same model answers in virtual time (`zoo_site.ts`) and over
 * real loopback HTTP (`zoo_server.ts`), so a convergence test and a benchmark
 * judge the client against the same server.
 *
 * These are the *servers'* limits: nothing here uses politely's throttling.
 *
 * Size: a site's spec, its checks, its limiters and the fields it announces
 * change together (a new shape touches all four).
 *
 * @module
 */
import {
  FIXED_WINDOW_UNUSED,
  type FixedWindowState,
  fixedWindowTake,
  rateLimitFields,
  retryAfterDate,
  retryAfterSeconds,
  tokenBucketStart,
  type TokenBucketState,
  tokenBucketTake,
} from "../demo/_limiters.ts";
import { seededRandom } from "./zoo_random.ts";

/** What a site limits. */
export type LimiterSpec =
  /** `ratePerSec` sustained, `burst` at once (a burst of 1 is a GCRA: strict spacing). */
  | { readonly shape: "token-bucket"; readonly ratePerSec: number; readonly burst: number }
  /**
   * `quota` requests per `windowMs`, windows back to back from the first
   * request; with `anchor: "request"` each window begins at the first
   * request after the last one ended (a counter with a time-to-live).
   */
  | {
    readonly shape: "fixed-window";
    readonly quota: number;
    readonly windowMs: number;
    readonly anchor?: "first-use" | "request";
  }
  /** At most `quota` requests in any span of `windowMs` (a sliding log). */
  | { readonly shape: "sliding-window"; readonly quota: number; readonly windowMs: number }
  /**
   * A sliding-window counter (Cloudflare's, and many Redis limiters'):
   * windows of `windowMs` back to back, the first ending `phaseMs` after
   * time 0 (where in its window a crawl starts); a request is admitted
   * while the current window's count plus the previous window's count,
   * weighted by the share of it the sliding span still covers, is below
   * `quota`. A burst at the end of one window weighs on the next.
   */
  | {
    readonly shape: "sliding-counter";
    readonly quota: number;
    readonly windowMs: number;
    readonly phaseMs?: number;
  }
  /**
   * nginx's `limit_req` without `nodelay`: requests go out at `ratePerSec`,
   * one every `1 / ratePerSec`; a request that comes early waits its turn
   * (its answer is late by the wait) unless `burst` are already waiting,
   * then it is refused.
   */
  | { readonly shape: "leaky-queue"; readonly ratePerSec: number; readonly burst: number }
  /** At most `maxConcurrency` requests served at once. */
  | { readonly shape: "concurrency"; readonly maxConcurrency: number }
  /**
   * A shared backend: `workers` serve one request each for the site's latency,
   * requests beyond them queue (their latency grows), and a request that
   * finds `maxQueue` already waiting is shed (503). Its capacity is
   * `workers / latency`.
   */
  | { readonly shape: "load-shed"; readonly workers: number; readonly maxQueue: number }
  /**
   * A server that never refuses but slows down: each request in flight
   * beyond `workers` (counted at arrival) adds `extraMs` to the latency. Past
   * the knee more at once serves fewer per second (a backend that thrashes).
   */
  | { readonly shape: "slowdown"; readonly workers: number; readonly extraMs: number }
  /** No limit. */
  | { readonly shape: "none" };

/** Which rate-limit fields a site sends with every answer. */
export type Announce = "none" | "ietf" | "legacy" | "x-epoch" | "x-delta";

/** A simulated site: what it hides and how it talks. */
export interface ZooSiteSpec {
  /** A short name for tables. */
  readonly name: string;
  readonly limiter: LimiterSpec;
  /** Time from arrival to the answer of an admitted request (queueing of `load-shed` comes on top). */
  readonly latencyMs: number;
  /**
   * How much the latency of each answer varies: a latency drawn uniformly
   * from `latencyMs * (1 ± latencyJitter)` (refusals and a backend's queue
   * too). Drawn from `ZooLimiterOptions.random`. @default 0
   */
  readonly latencyJitter?: number;
  /** Time from arrival to a refusal. @default latencyMs */
  readonly rejectLatencyMs?: number;
  /** The status of a refusal. @default 429 */
  readonly status?: 429 | 503;
  /**
   * `Retry-After` on a refusal: none, delta-seconds or an HTTP-date (with a
   * `Date` header) of the limiter's own wait, or a number: the same delta-seconds on
   * every refusal, whatever the wait (servers that always say `Retry-After: 60`). @default "none"
   */
  readonly retryAfter?: "none" | "seconds" | "date" | number;
  /** Rate-limit fields on every answer (window shapes and token buckets only). @default "none" */
  readonly announce?: Announce;
  /**
   * Which answers carry the `announce` fields: all of them, or refusals only
   * (an API that explains a 429 but says nothing while it admits). @default "all"
   */
  readonly announceOn?: "all" | "refusals";
  /**
   * The share of admitted requests that fail anyway with `errorStatus`,
   * drawn per request whatever the load (a flaky backend behind a gateway):
   * no limit speaks through them, and a client that slows down for each
   * one crawls below the limit for nothing. Drawn from
   * `ZooLimiterOptions.random`. @default 0
   */
  readonly errorRate?: number;
  /** The status of those failures (a gateway's or the backend's own). @default 502 */
  readonly errorStatus?: 500 | 502 | 503 | 504;
}

/** Epoch ms of the sites' clock at scheduler time 0 (2026-01-01), so epoch resets look real. */
export const ZOO_EPOCH_MS = 1_767_225_600_000;

/** What a limiter says to one arrival. */
export interface ZooDecision {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Time from arrival to the answer. */
  readonly latencyMs: number;
  /** Call when the answer has gone (or the client gave up), for limiters that count requests in flight. */
  readonly release: (() => void) | undefined;
  /**
   * The budget this answer announces (only when the site announces one):
   * requests left and the time from this arrival to the reset. A server
   * counts refusals inside a hold it has announced from it.
   */
  readonly announced?: { readonly remaining: number; readonly resetInMs: number };
}

/** Options of {@linkcode createZooLimiter}. */
export interface ZooLimiterOptions {
  /**
   * Epoch ms at scheduler time 0: the base of `X-RateLimit-Reset` epochs,
   * `Date` and `Retry-After` dates. A server on the real clock passes the
   * offset of its scheduler from the wall clock (0 for `asyncScheduler`).
   * @default ZOO_EPOCH_MS
   */
  readonly epochMs?: number;
  /** Uniform in [0, 1): draws the latencies of a site with `latencyJitter`. @default a fixed seed */
  readonly random?: () => number;
}

/** One site's limiter with its state. */
export interface ZooLimiter {
  /** One arrival at scheduler time `now`. */
  arrive(now: number): ZooDecision;
}

interface Verdict {
  readonly allowed: boolean;
  /** When a refused client could next be admitted. */
  readonly waitMs: number;
  /** For the announced fields. */
  readonly quota?: number;
  readonly windowMs?: number;
  readonly remaining?: number;
  readonly resetInMs?: number;
  /** Extra latency (queueing). */
  readonly queueMs?: number;
  readonly release?: () => void;
}

const RETRY_AFTERS = ["none", "seconds", "date"] as const;
const ANNOUNCES: readonly Announce[] = ["none", "ietf", "legacy", "x-epoch", "x-delta"];

/** Whether an optional field is absent or one of `values` (a JavaScript caller's typo is caught). */
function oneOf(value: unknown, values: readonly unknown[]): boolean {
  return value === undefined || values.includes(value);
}

function invalid(name: string, expected: string, value: unknown): RangeError {
  return new RangeError(
    `Cannot create zoo site as '${name}' must be ${expected}: current value is ${String(value)}`,
  );
}

function positive(name: string, value: number): void {
  if (!(value > 0) || !Number.isFinite(value)) throw invalid(name, "a finite number > 0", value);
}

function count(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw invalid(name, "an integer >= 1", value);
}

/**
 * Checks a spec, naming the first field that is wrong.
 *
 * @throws {RangeError} naming the field.
 */
export function validateZooSpec(spec: ZooSiteSpec): void {
  const l = spec.limiter;
  if (!(spec.latencyMs >= 0) || !Number.isFinite(spec.latencyMs)) {
    throw invalid("latencyMs", "a finite number >= 0", spec.latencyMs);
  }
  const j = spec.latencyJitter ?? 0;
  if (!(j >= 0 && j <= 1)) throw invalid("latencyJitter", "a number from 0 to 1", j);
  const e = spec.errorRate ?? 0;
  if (!(e >= 0 && e < 1)) throw invalid("errorRate", "a number from 0 to below 1", e);
  const ra = spec.retryAfter;
  if (typeof ra === "number" ? !(Number.isInteger(ra) && ra >= 0) : !oneOf(ra, RETRY_AFTERS)) {
    throw invalid(
      "retryAfter",
      'a whole number of seconds >= 0, "none", "seconds" or "date"',
      ra,
    );
  }
  if (!oneOf(spec.announce, ANNOUNCES)) {
    throw invalid("announce", '"none", "ietf", "legacy", "x-epoch" or "x-delta"', spec.announce);
  }
  if (!oneOf(spec.announceOn, ["all", "refusals"])) {
    throw invalid("announceOn", '"all" or "refusals"', spec.announceOn);
  }
  if (!oneOf(spec.status, [429, 503])) throw invalid("status", "429 or 503", spec.status);
  switch (l.shape) {
    case "token-bucket":
      positive("limiter.ratePerSec", l.ratePerSec);
      if (!(l.burst >= 1) || !Number.isFinite(l.burst)) {
        throw invalid("limiter.burst", "a finite number >= 1", l.burst);
      }
      return;
    case "leaky-queue":
      positive("limiter.ratePerSec", l.ratePerSec);
      if (!(l.burst >= 0) || !Number.isInteger(l.burst)) {
        throw invalid("limiter.burst", "an integer >= 0", l.burst);
      }
      return;
    case "fixed-window":
      if (l.anchor !== undefined && l.anchor !== "first-use" && l.anchor !== "request") {
        throw invalid("limiter.anchor", '"first-use" or "request"', l.anchor);
      }
    // falls through
    case "sliding-window":
      count("limiter.quota", l.quota);
      positive("limiter.windowMs", l.windowMs);
      return;
    case "sliding-counter": {
      count("limiter.quota", l.quota);
      positive("limiter.windowMs", l.windowMs);
      const phase = l.phaseMs ?? l.windowMs;
      if (!(phase > 0 && phase <= l.windowMs)) {
        throw invalid("limiter.phaseMs", "a number > 0 and at most limiter.windowMs", phase);
      }
      return;
    }
    case "concurrency":
      count("limiter.maxConcurrency", l.maxConcurrency);
      return;
    case "slowdown":
      count("limiter.workers", l.workers);
      if (!(l.extraMs >= 0) || !Number.isFinite(l.extraMs)) {
        throw invalid("limiter.extraMs", "a finite number >= 0", l.extraMs);
      }
      return;
    case "load-shed":
      count("limiter.workers", l.workers);
      if (!Number.isInteger(l.maxQueue) || l.maxQueue < 0) {
        throw invalid("limiter.maxQueue", "an integer >= 0", l.maxQueue);
      }
      return;
    case "none":
      return;
    default:
      throw invalid("limiter.shape", "a known shape", (l as { shape: unknown }).shape);
  }
}

/** The limiter's verdict function and its private state. */
function verdictOf(spec: ZooSiteSpec): (now: number, latencyMs: number) => Verdict {
  const l = spec.limiter;
  switch (l.shape) {
    case "token-bucket": {
      let state: TokenBucketState | undefined;
      const windowMs = (l.burst * 1000) / l.ratePerSec;
      return (now) => {
        const d = tokenBucketTake(l, state ?? tokenBucketStart(l, now), now);
        state = d.state;
        return {
          allowed: d.allowed,
          waitMs: d.nextTokenInMs,
          quota: l.burst,
          windowMs,
          remaining: d.remaining,
          resetInMs: d.fullInMs,
        };
      };
    }
    case "fixed-window": {
      let state: FixedWindowState = FIXED_WINDOW_UNUSED;
      return (now) => {
        const d = fixedWindowTake(l, state, now);
        state = d.state;
        return {
          allowed: d.allowed,
          waitMs: d.allowed ? 0 : d.resetInMs,
          quota: l.quota,
          windowMs: l.windowMs,
          remaining: d.remaining,
          resetInMs: d.resetInMs,
        };
      };
    }
    case "sliding-counter": {
      const W = l.windowMs;
      // Time 0 lies `W - phase` into its window.
      const shift = W - (l.phaseMs ?? W);
      let index = 0;
      let current = 0;
      let previous = 0;
      return (now) => {
        const at = now + shift;
        const i = Math.floor(at / W);
        if (i !== index) {
          previous = i === index + 1 ? current : 0;
          current = 0;
          index = i;
        }
        const into = at - i * W;
        const weighted = previous * (1 - into / W) + current;
        const allowed = weighted < l.quota;
        if (allowed) current++;
        let waitMs = 0;
        if (!allowed) {
          // Within this window, the previous one's weight falls below what is left...
          const inWindow = current < l.quota && previous > 0
            ? W * (1 - (l.quota - current) / previous) - into
            : Infinity;
          // ...or in the next, this window's count weighs until its share is below the quota.
          waitMs = inWindow < W - into
            ? Math.max(0, inWindow) + 1e-3
            : W - into + (current > l.quota ? W * (1 - l.quota / current) : 0) + 1e-3;
        }
        return {
          allowed,
          waitMs,
          quota: l.quota,
          windowMs: W,
          remaining: Math.max(0, Math.floor(l.quota - weighted - (allowed ? 1 : 0))),
          resetInMs: W - into,
        };
      };
    }
    case "sliding-window": {
      const log: number[] = [];
      return (now) => {
        while (log.length > 0 && log[0]! <= now - l.windowMs) log.shift();
        const allowed = log.length < l.quota;
        if (allowed) log.push(now);
        const oldest = log[0];
        const resetInMs = oldest === undefined ? 0 : oldest + l.windowMs - now;
        return {
          allowed,
          waitMs: allowed ? 0 : resetInMs,
          quota: l.quota,
          windowMs: l.windowMs,
          remaining: l.quota - log.length,
          resetInMs,
        };
      };
    }
    case "leaky-queue": {
      const gap = 1000 / l.ratePerSec;
      // When the last admitted request goes out (is served).
      let last = -Infinity;
      return (now) => {
        const at = Math.max(now, last + gap);
        // Waiting ahead of it: the turns between now and its own.
        if (at - now > l.burst * gap + 1e-9) {
          return { allowed: false, waitMs: at - l.burst * gap - now };
        }
        last = at;
        return { allowed: true, waitMs: 0, queueMs: at - now };
      };
    }
    case "concurrency": {
      let inFlight = 0;
      const release = () => {
        inFlight = Math.max(0, inFlight - 1);
      };
      return () => {
        if (inFlight >= l.maxConcurrency) {
          return { allowed: false, waitMs: Math.max(1000, spec.latencyMs) };
        }
        inFlight++;
        return { allowed: true, waitMs: 0, release };
      };
    }
    case "load-shed": {
      // When each worker is next free; a request starts on the earliest one.
      const freeAt: number[] = Array.from({ length: l.workers }, () => 0);
      const starts: number[] = [];
      return (now, latencyMs) => {
        while (starts.length > 0 && starts[0]! <= now) starts.shift();
        if (starts.length >= l.maxQueue && Math.min(...freeAt) > now) {
          return { allowed: false, waitMs: Math.min(...freeAt) - now };
        }
        let i = 0;
        for (let k = 1; k < freeAt.length; k++) if (freeAt[k]! < freeAt[i]!) i = k;
        const start = Math.max(now, freeAt[i]!);
        freeAt[i] = start + latencyMs;
        if (start > now) {
          // Kept sorted: starts only grow for a FIFO queue.
          starts.push(start);
        }
        return { allowed: true, waitMs: 0, queueMs: start - now };
      };
    }
    case "slowdown": {
      let inFlight = 0;
      const release = () => {
        inFlight = Math.max(0, inFlight - 1);
      };
      return () => {
        inFlight++;
        return {
          allowed: true,
          waitMs: 0,
          queueMs: l.extraMs * Math.max(0, inFlight - l.workers),
          release,
        };
      };
    }
    case "none":
      return () => ({ allowed: true, waitMs: 0 });
  }
}

function announced(
  spec: ZooSiteSpec,
  v: Verdict,
  now: number,
  epochMs: number,
): Record<string, string> {
  const a = spec.announce ?? "none";
  if (a === "none" || v.quota === undefined || v.windowMs === undefined) return {};
  const remaining = v.remaining ?? 0;
  const resetInMs = v.resetInMs ?? 0;
  const resetS = Math.max(0, Math.ceil(resetInMs / 1000 - 1e-9));
  switch (a) {
    case "ietf":
      return rateLimitFields(v.quota, v.windowMs, remaining, resetInMs);
    case "legacy":
      return {
        "ratelimit-limit": String(v.quota),
        "ratelimit-remaining": String(remaining),
        "ratelimit-reset": String(resetS),
      };
    case "x-epoch":
      return {
        "x-ratelimit-limit": String(v.quota),
        "x-ratelimit-remaining": String(remaining),
        "x-ratelimit-reset": String(Math.ceil((epochMs + now + resetInMs) / 1000)),
      };
    case "x-delta":
      return {
        "x-ratelimit-limit": String(v.quota),
        "x-ratelimit-remaining": String(remaining),
        "x-ratelimit-reset": String(resetS),
      };
  }
}

/**
 * A fresh limiter for `spec`, at rest.
 *
 * @param spec The site.
 * @param options The epoch of its dates.
 * @returns Its limiter.
 * @throws {RangeError} When the spec is out of range, naming the field.
 * @example Five at once against a burst of 3
 * ```ts
 * import { createZooLimiter } from "./zoo.ts";
 * const l = createZooLimiter({
 *   name: "b",
 *   limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 },
 *   latencyMs: 50,
 * });
 * const statuses = [0, 0, 0, 0, 0].map((t) => l.arrive(t).status);
 * console.assert(statuses.join() === "200,200,200,429,429");
 * ```
 */
export function createZooLimiter(
  spec: ZooSiteSpec,
  options: ZooLimiterOptions = {},
): ZooLimiter {
  validateZooSpec(spec);
  const epochMs = options.epochMs ?? ZOO_EPOCH_MS;
  const announces = (spec.announce ?? "none") !== "none";
  const verdict = verdictOf(spec);
  const status = spec.status ?? 429;
  const retryAfter = spec.retryAfter ?? "none";
  const jitter = spec.latencyJitter ?? 0;
  const errorRate = spec.errorRate ?? 0;
  const errorStatus = spec.errorStatus ?? 502;
  const random = options.random ?? seededRandom(1);
  // Each answer's latency, drawn around the site's.
  const vary = (ms: number) => jitter > 0 ? ms * (1 - jitter + 2 * jitter * random()) : ms;
  return {
    arrive(now) {
      const latencyMs = vary(spec.latencyMs);
      const v = verdict(now, latencyMs);
      const silent = v.allowed && spec.announceOn === "refusals";
      const headers = silent ? {} : announced(spec, v, now, epochMs);
      if (retryAfter === "date") {
        headers["date"] = new Date(epochMs + now).toUTCString();
      }
      const budget = announces && !silent && v.quota !== undefined
        ? { announced: { remaining: v.remaining ?? 0, resetInMs: v.resetInMs ?? 0 } }
        : {};
      if (errorRate > 0 && v.allowed && random() < errorRate) {
        // Served and failed: the slot was taken and frees as usual.
        return { status: errorStatus, headers, latencyMs, release: v.release };
      }
      if (v.allowed) {
        return {
          status: 200,
          headers,
          latencyMs: latencyMs + (v.queueMs ?? 0),
          release: v.release,
          ...budget,
        };
      }
      if (retryAfter === "seconds") headers["retry-after"] = retryAfterSeconds(v.waitMs);
      if (typeof retryAfter === "number") headers["retry-after"] = String(retryAfter);
      if (retryAfter === "date") {
        headers["retry-after"] = retryAfterDate(epochMs + now, v.waitMs);
      }
      const rejectLatencyMs = spec.rejectLatencyMs === undefined
        ? latencyMs
        : vary(spec.rejectLatencyMs);
      return { status, headers, latencyMs: rejectLatencyMs, release: undefined, ...budget };
    },
  };
}

/**
 * The shortest time a perfect client needs for `pages` admitted requests
 * (from its first send to its last answer), when it knows the limit: the
 * yardstick of efficiency (ideal time / measured time).
 *
 * @param spec The site.
 * @param pages Requests to get admitted.
 * @param maxConcurrency The client's own cap on requests in flight.
 * @returns The ideal time in ms.
 */
export function idealMs(spec: ZooSiteSpec, pages: number, maxConcurrency = 16): number {
  const l = spec.limiter;
  const L = spec.latencyMs;
  // The client's own cap: at most maxConcurrency per latency.
  const clientBound = Math.ceil(pages / maxConcurrency) * L;
  let limit: number;
  switch (l.shape) {
    case "token-bucket":
      limit = (Math.max(0, pages - l.burst) * 1000) / l.ratePerSec + L;
      break;
    case "leaky-queue":
      limit = ((pages - 1) * 1000) / l.ratePerSec + L;
      break;
    case "fixed-window":
    case "sliding-window":
      limit = (Math.ceil(pages / l.quota) - 1) * l.windowMs + L;
      break;
    case "sliding-counter":
      // Its quota at once; from the end of the first window on, the window
      // before weighs a full quota, and the counter frees one request per
      // `windowMs / quota` for good: it never takes a second burst (a
      // greedy client, which is the best one, replayed against it).
      limit = pages <= l.quota
        ? L
        : (l.phaseMs ?? l.windowMs) + ((pages - l.quota - 1) * l.windowMs) / l.quota + L;
      break;
    case "concurrency":
      limit = Math.ceil(pages / Math.min(l.maxConcurrency, maxConcurrency)) * L;
      break;
    case "load-shed":
      limit = Math.ceil(pages / Math.min(l.workers, maxConcurrency)) * L;
      break;
    case "slowdown":
      limit = (pages * 1000) / (slowdownBest(l, L, maxConcurrency) ?? Infinity);
      break;
    case "none":
      limit = 0;
      break;
  }
  return Math.max(limit, clientBound);
}

/**
 * The hidden limit as requests per second: a bucket's rate, a window's quota
 * over its length, a cap (or a backend's workers) over the latency; `null`
 * for none (or a cap with no latency).
 */
export function limitPerSec(spec: ZooSiteSpec): number | null {
  const l = spec.limiter;
  switch (l.shape) {
    case "token-bucket":
    case "leaky-queue":
      return l.ratePerSec;
    case "fixed-window":
    case "sliding-window":
    case "sliding-counter":
      return (l.quota * 1000) / l.windowMs;
    case "concurrency":
      return spec.latencyMs > 0 ? (l.maxConcurrency * 1000) / spec.latencyMs : null;
    case "load-shed":
      return spec.latencyMs > 0 ? (l.workers * 1000) / spec.latencyMs : null;
    case "slowdown":
      return slowdownBest(l, spec.latencyMs, Infinity);
    case "none":
      return null;
  }
}

/** The most a slowdown server serves per second, at its best count in flight (up to `most`). */
function slowdownBest(
  l: { readonly workers: number; readonly extraMs: number },
  latencyMs: number,
  most: number,
): number | null {
  let best = 0;
  for (let n = 1; n <= Math.min(most, 1_000); n++) {
    const ms = latencyMs + l.extraMs * Math.max(0, n - l.workers);
    if (ms <= 0) return null;
    best = Math.max(best, (n * 1000) / ms);
  }
  return best;
}

/** The limit in words, for tables ("10/s burst 3", "20 per 2 s", "3 at once"). */
export function describeLimiter(l: LimiterSpec): string {
  switch (l.shape) {
    case "token-bucket":
      return l.burst === 1 ? `${l.ratePerSec}/s, no burst` : `${l.ratePerSec}/s burst ${l.burst}`;
    case "fixed-window":
      return `${l.quota} per ${l.windowMs / 1000} s (fixed${
        l.anchor === "request" ? ", from a request" : ""
      })`;
    case "sliding-window":
      return `${l.quota} per ${l.windowMs / 1000} s (sliding)`;
    case "sliding-counter":
      return `${l.quota} per ${l.windowMs / 1000} s (sliding counter)`;
    case "leaky-queue":
      return `${l.ratePerSec}/s, ${l.burst} queued`;
    case "concurrency":
      return `${l.maxConcurrency} at once`;
    case "load-shed":
      return `${l.workers} workers, queue ${l.maxQueue}`;
    case "slowdown":
      return `slower by ${l.extraMs} ms per request beyond ${l.workers} at once`;
    case "none":
      return "none";
  }
}
