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

/**
 * Creates a zoo site on `scheduler`.
 *
 * @param spec What the site hides and how it answers.
 * @param scheduler Its clock and timers (a `TestScheduler` in tests).
 * @returns The site.
 * @throws {RangeError} When the spec is out of range, naming the field.
 */
export function createZooSite(spec: ZooSiteSpec, scheduler: SchedulerLike): ZooSite {
  const limiter = createZooLimiter(spec);
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
    );
  }
  return { spec, download, stats: () => recorder.snapshot() };
}
