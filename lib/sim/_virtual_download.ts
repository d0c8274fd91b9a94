/**
 * One request to a simulated site in virtual time, shared by the simulated
 * token bucket (`simulated_site.ts`) and the zoo's sites (`zoo_site.ts`): the
 * arrival is decided when subscribed, answered after its latency on the
 * scheduler, and abandoned (slot freed, counted as aborted) on unsubscribe or
 * abort.
 *
 * @module
 */
import { Observable, type SchedulerLike, Subscription, timer } from "rxjs";
import type { StatsRecorder } from "../demo/_limiters.ts";
import { requestUrl } from "../request.ts";

/** What a simulated site decided for one arrival. */
export interface VirtualAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** Time from arrival to the answer. */
  readonly latencyMs: number;
  /** Frees what the request held (a concurrency slot) when it is over. */
  readonly release?: (() => void) | undefined;
}

/** The answer of one simulated download. Header names are lower-case. */
export interface VirtualResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly url: string;
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/**
 * A cold observable of one request: `decide(now, url)` at subscription (or
 * `outboundMs` later: the time the request takes to reach the site), the
 * answer after its latency (and `inboundMs` more before the client reads it;
 * the site freed what it held when it answered). An already aborted `signal` errors at once and
 * nothing arrives; an abort in flight errors with `signal.reason`, as
 * `fetch` rejects.
 *
 * @internal
 */
export function virtualDownload(
  scheduler: SchedulerLike,
  recorder: StatsRecorder,
  request: unknown,
  signal: AbortSignal | undefined,
  decide: (now: number, url: string) => VirtualAnswer,
  label: (url: string) => string = (url) => url,
  outboundMs = 0,
  inboundMs = 0,
  releaseLagMs = 0,
): Observable<VirtualResponse> {
  if (outboundMs > 0) {
    // The request reaches the site `outboundMs` after it was sent (a real
    // client's event loop, connection pool and network); the answer's
    // latency counts from the arrival.
    return new Observable<VirtualResponse>((subscriber) => {
      if (signal?.aborted) {
        subscriber.error(abortReason(signal));
        return;
      }
      const onAbort = () => {
        trip.unsubscribe();
        subscriber.error(abortReason(signal!));
      };
      signal?.addEventListener("abort", onAbort);
      const inner = new Subscription();
      const trip = timer(outboundMs, scheduler).subscribe(() => {
        signal?.removeEventListener("abort", onAbort);
        inner.add(
          virtualDownload(
            scheduler,
            recorder,
            request,
            signal,
            decide,
            label,
            0,
            inboundMs,
            releaseLagMs,
          )
            .subscribe(subscriber),
        );
      });
      return () => {
        signal?.removeEventListener("abort", onAbort);
        trip.unsubscribe();
        inner.unsubscribe();
      };
    });
  }
  return new Observable<VirtualResponse>((subscriber) => {
    if (signal?.aborted) {
      subscriber.error(abortReason(signal));
      return;
    }
    const now = scheduler.now();
    const url = requestUrl(request) ?? "";
    recorder.enter();
    const d = decide(now, url);
    recorder.arrive(now, label(url), d.status);
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
    const emit = () => {
      subscriber.next({ status: d.status, headers: d.headers, url });
      subscriber.complete();
    };
    let read: Subscription | undefined;
    let lag: Subscription | undefined;
    const answer = timer(d.latencyMs, scheduler).subscribe(() => {
      // Free the slot before emitting: a client may send its next request
      // synchronously from this `next`, and that arrival must see the slot
      // free. Unless the site frees it `releaseLagMs` later (it counts a
      // request until its answer is flushed), and a next request can find it
      // still taken.
      if (releaseLagMs > 0) lag = timer(releaseLagMs, scheduler).subscribe(() => finish(false));
      else finish(false);
      // The client reads the answer `inboundMs` after the site sent it (and
      // freed the slot): a busy event loop reads a burst of answers one by one.
      if (inboundMs > 0) read = timer(inboundMs, scheduler).subscribe(emit);
      else emit();
    });
    return () => {
      answer.unsubscribe();
      read?.unsubscribe();
      // Answered, with the slot still held: it is freed at its time.
      if (lag === undefined) finish(true);
    };
  });
}
