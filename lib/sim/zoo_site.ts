/**
 * A zoo site (`zoo.ts`) answering in virtual time: the same model as the
 * loopback server, without sockets, on an RxJS scheduler.
 *
 * @module
 */
import { Observable, type SchedulerLike, timer } from "rxjs";
import { createStatsRecorder, type SiteStats } from "../demo/_limiters.ts";
import { requestUrl } from "../request.ts";
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

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
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
    return new Observable<SimulatedResponse>((subscriber) => {
      const signal = options.signal;
      if (signal?.aborted) {
        subscriber.error(abortReason(signal));
        return;
      }
      const now = scheduler.now();
      const url = requestUrl(request) ?? "";
      recorder.enter();
      const d = limiter.arrive(now);
      recorder.arrive(now, url, d.status);
      let over = false;
      const finish = (aborted: boolean) => {
        if (over) return;
        over = true;
        signal?.removeEventListener("abort", onAbort);
        d.release?.();
        recorder.depart(aborted);
      };
      const onAbort = () => {
        finish(true);
        subscriber.error(abortReason(signal!));
      };
      signal?.addEventListener("abort", onAbort);
      const answer = timer(d.latencyMs, scheduler).subscribe(() => {
        // Free the slot first: the client may send its next request from this `next`.
        finish(false);
        subscriber.next({ status: d.status, headers: d.headers, url });
        subscriber.complete();
      });
      return () => {
        answer.unsubscribe();
        finish(true);
      };
    });
  }
  return { spec, download, stats: () => recorder.snapshot() };
}
