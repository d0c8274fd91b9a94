/**
 * A zoo site (`zoo.ts`) answering in virtual time: the same model as the
 * loopback server, without sockets, on an RxJS scheduler.
 *
 * @module
 */
import type { Observable, SchedulerLike } from "rxjs";
import { createStatsRecorder, type SiteStats } from "../demo/_limiters.ts";
import { virtualDownload } from "./_virtual_download.ts";
import { createZooLimiter, type ZooSiteSpec } from "./zoo.ts";
import type { SimulatedDownloadOptions, SimulatedResponse } from "./simulated_site.ts";

/** A zoo site in virtual time. */
export interface ZooSite {
  readonly spec: ZooSiteSpec;
  /** One request: cold, decided when subscribed, answered after its latency; unsubscribing abandons it. */
  download(request: unknown, options?: SimulatedDownloadOptions): Observable<SimulatedResponse>;
  /** What the site has seen so far (a copy). */
  stats(): SiteStats;
}

/** Options of {@linkcode createZooSite}. */
export interface ZooSiteOptions {
  /**
   * Time each request takes to reach the site, drawn per request (a real
   * client's event loop, connection pool and network: the gaps the site sees
   * are not the gaps the client sent). None when absent.
   */
  readonly outboundMs?: () => number;
  /**
   * Time each answer takes to be read by the client after the site sent it
   * (and freed the request's slot), drawn per request. None when absent.
   */
  readonly inboundMs?: () => number;
  /**
   * Time the site keeps a request's slot after it answered, drawn per
   * request (a server that counts a request until its answer is flushed).
   * None when absent.
   */
  readonly releaseLagMs?: () => number;
  /** Draws the latencies of a site with `latencyJitter`. @default a fixed seed */
  readonly random?: () => number;
}

/**
 * Creates a zoo site on `scheduler`.
 *
 * @param spec What the site hides and how it answers.
 * @param scheduler Its clock and timers (a `TestScheduler` in tests).
 * @param options How late requests reach it.
 * @returns The site.
 * @throws {RangeError} When the spec is out of range, naming the field.
 */
export function createZooSite(
  spec: ZooSiteSpec,
  scheduler: SchedulerLike,
  options: ZooSiteOptions = {},
): ZooSite {
  const limiter = createZooLimiter(spec, options.random ? { random: options.random } : {});
  const outbound = options.outboundMs;
  const inbound = options.inboundMs;
  const lag = options.releaseLagMs;
  const recorder = createStatsRecorder();
  function download(
    request: unknown,
    options: SimulatedDownloadOptions = {},
  ): Observable<SimulatedResponse> {
    return virtualDownload(
      scheduler,
      recorder,
      request,
      options.signal,
      (now) => limiter.arrive(now),
      undefined,
      outbound?.() ?? 0,
      inbound?.() ?? 0,
      lag?.() ?? 0,
    );
  }
  return { spec, download, stats: () => recorder.snapshot() };
}
