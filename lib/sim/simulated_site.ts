/**
 * A rate-limited site in virtual time: the token bucket (and optional
 * concurrency cap) of the demo's real sites, without sockets, driven by an
 * RxJS scheduler. Under `TestScheduler` a whole crawl of ten virtual minutes
 * runs in milliseconds and every status lands at an exact frame. This is the
 * *server*: nothing here uses politely's throttling.
 *
 * @module
 */

import type { Observable, SchedulerLike } from "rxjs";
import {
  CONCURRENCY_IDLE,
  concurrencyAcquire,
  concurrencyRelease,
  type ConcurrencyState,
  createStatsRecorder,
  rateLimitFields,
  retryAfterDate,
  retryAfterSeconds,
  type SiteStats,
  type TokenBucketConfig,
  tokenBucketStart,
  type TokenBucketState,
  tokenBucketTake,
} from "../demo/_limiters.ts";
import { type VirtualAnswer, virtualDownload, type VirtualResponse } from "./_virtual_download.ts";

export type { Arrival, SiteStats } from "../demo/_limiters.ts";

/** Options of {@linkcode createSimulatedSite}. */
export interface SimulatedSiteOptions {
  /** The hidden sustained rate (token bucket refill); `Infinity` for no rate limit. */
  readonly ratePerSec: number;
  /** The hidden burst (bucket capacity; the bucket starts full). Finite, >= 1. */
  readonly burst: number;
  /** Time from arrival to the answer of an admitted request. */
  readonly latencyMs: number;
  /** The site's clock (`now()` at arrival) and its timers. Pass the `TestScheduler` in tests. */
  readonly scheduler: SchedulerLike;
  /** Time from arrival to a 429 or 503. @default latencyMs */
  readonly rejectLatencyMs?: number;
  /** Add `Retry-After` (delta-seconds, rounded up) to a 429. @default false */
  readonly retryAfter?: boolean;
  /**
   * Requests served at once; beyond that 503 with `Retry-After` as an
   * HTTP-date on the scheduler's clock (virtual time 0 is 1970-01-01).
   * @default Infinity
   */
  readonly maxConcurrency?: number;
  /** How far ahead a 503's `Retry-After` date lies. @default 1000 */
  readonly concurrencyRetryAfterMs?: number;
  /**
   * Add IETF `RateLimit-Policy` (`q` = burst per the time to refill it) and
   * `RateLimit` (`r` whole tokens left, `t` seconds until the bucket is full) to every answer.
   * @default false
   */
  readonly rateLimitHeaders?: boolean;
}

/** What a simulated download answers. Header names are lower-case. */
export type SimulatedResponse = VirtualResponse;

/** Options of one simulated download. */
export interface SimulatedDownloadOptions {
  /** Aborting it abandons the request; see {@linkcode SimulatedSite.download}. */
  readonly signal?: AbortSignal;
}

/** A simulated site. */
export interface SimulatedSite {
  /**
   * One request. The observable is cold: each subscription is one arrival,
   * decided at `scheduler.now()` when subscribed, answered with one response
   * after the latency, then complete. Unsubscribing before the answer
   * abandons the request (its concurrency slot is freed; it counts as aborted).
   *
   * Abort: when `signal` is already aborted at subscription the request never
   * arrives and the observable errors at once; when it aborts in flight the
   * observable errors. Either way the error is `signal.reason` (a
   * `DOMException` named `"AbortError"` unless the caller gave another), as
   * `fetch` rejects.
   */
  download(request: unknown, options?: SimulatedDownloadOptions): Observable<SimulatedResponse>;
  /** What the site has seen so far (a copy). */
  stats(): SiteStats;
}

function invalid(name: string, expected: string, value: unknown): RangeError {
  return new RangeError(
    `Cannot create simulated site as '${name}' must be ${expected}: current value is ${
      String(value)
    }`,
  );
}

function nonNegativeFinite(name: string, value: number): number {
  if (!(value >= 0) || !Number.isFinite(value)) throw invalid(name, "a finite number >= 0", value);
  return value;
}

function pathOf(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

interface Decision {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly holdsSlot: boolean;
}

/**
 * Creates a simulated site with a hidden token bucket and, optionally, a
 * concurrency cap. The cap is checked first, so a 503 never spends a token;
 * a 429 never holds a slot.
 *
 * @param options The hidden limits, the latency and the scheduler.
 * @returns The site: `download` to send requests, `stats` to see what arrived.
 * @throws {RangeError} When an option is out of range.
 *
 * @example Three requests at once against a burst of 2, in virtual time
 * ```ts
 * import { TestScheduler } from "rxjs/testing";
 * import { merge } from "rxjs";
 *
 * const scheduler = new TestScheduler((a, b) => console.assert(JSON.stringify(a) === JSON.stringify(b)));
 * const site = createSimulatedSite({ ratePerSec: 10, burst: 2, latencyMs: 50, scheduler });
 * merge(site.download("http://a.test/1"), site.download("http://a.test/2"), site.download("http://a.test/3"))
 *   .subscribe((r) => console.log(scheduler.now(), r.status)); // 50 200, 50 200, 50 429
 * scheduler.flush();
 * ```
 */
export function createSimulatedSite(options: SimulatedSiteOptions): SimulatedSite {
  const ratePerSec = options.ratePerSec;
  if (!(ratePerSec > 0)) throw invalid("ratePerSec", "> 0", ratePerSec);
  const burst = options.burst;
  if (!(burst >= 1) || !Number.isFinite(burst)) {
    throw invalid("burst", "a finite number >= 1", burst);
  }
  const latencyMs = nonNegativeFinite("latencyMs", options.latencyMs);
  const rejectLatencyMs = nonNegativeFinite(
    "rejectLatencyMs",
    options.rejectLatencyMs ?? latencyMs,
  );
  const maxConcurrency = options.maxConcurrency ?? Infinity;
  if (
    !(maxConcurrency >= 1) || (Number.isFinite(maxConcurrency) && !Number.isInteger(maxConcurrency))
  ) {
    throw invalid("maxConcurrency", "an integer >= 1 or Infinity", maxConcurrency);
  }
  const concurrencyRetryAfterMs = nonNegativeFinite(
    "concurrencyRetryAfterMs",
    options.concurrencyRetryAfterMs ?? 1000,
  );
  const scheduler = options.scheduler;
  if (typeof scheduler?.now !== "function" || typeof scheduler.schedule !== "function") {
    throw new TypeError(
      `Cannot create simulated site as 'scheduler' must be a SchedulerLike: current value is ${
        String(scheduler)
      }`,
    );
  }
  const retryAfter = options.retryAfter ?? false;
  const rateLimitHeaders = options.rateLimitHeaders ?? false;
  const bucket: TokenBucketConfig = { ratePerSec, burst };

  let tokens: TokenBucketState | undefined;
  let slots: ConcurrencyState = CONCURRENCY_IDLE;
  const recorder = createStatsRecorder();

  function decide(now: number): Decision {
    const slot = concurrencyAcquire(maxConcurrency, slots);
    if (!slot.allowed) {
      return {
        status: 503,
        headers: { "retry-after": retryAfterDate(now, concurrencyRetryAfterMs) },
        holdsSlot: false,
      };
    }
    const d = tokenBucketTake(bucket, tokens ?? tokenBucketStart(bucket, now), now);
    tokens = d.state;
    const headers: Record<string, string> = rateLimitHeaders && Number.isFinite(ratePerSec)
      ? rateLimitFields(burst, (burst * 1000) / ratePerSec, d.remaining, d.fullInMs)
      : {};
    if (!d.allowed) {
      if (retryAfter) headers["retry-after"] = retryAfterSeconds(d.nextTokenInMs);
      return { status: 429, headers, holdsSlot: false };
    }
    slots = slot.state;
    return { status: 200, headers, holdsSlot: true };
  }

  function answer(now: number): VirtualAnswer {
    const d = decide(now);
    return {
      status: d.status,
      headers: d.headers,
      latencyMs: d.status === 200 ? latencyMs : rejectLatencyMs,
      release: d.holdsSlot ? () => (slots = concurrencyRelease(slots)) : undefined,
    };
  }

  function download(
    request: unknown,
    downloadOptions: SimulatedDownloadOptions = {},
  ): Observable<SimulatedResponse> {
    return virtualDownload(scheduler, recorder, request, downloadOptions.signal, answer, pathOf);
  }

  return { download, stats: () => recorder.snapshot() };
}
