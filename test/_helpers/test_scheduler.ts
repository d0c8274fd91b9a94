/**
 * Virtual-time helpers for the gate's tests: a `TestScheduler` that asserts
 * with vitest, and a download that takes `latencyMs` of scheduler time (a
 * `timer`, so no promise escapes virtual time) while it records what it saw.
 *
 * @module
 */
import { Observable, type SchedulerLike, timer } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { expect } from "vitest";
import type { DownloadContext } from "../../operators/throttle_by_scope.ts";

/**
 * A `TestScheduler` whose marble assertions are vitest's `toEqual`, with no
 * frame limit for `flush()` outside `run()` (the default stops at 750 ms).
 */
export function testScheduler(): TestScheduler {
  const scheduler = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
  scheduler.maxFrames = Number.POSITIVE_INFINITY;
  return scheduler;
}

/** One download as a recording download saw it. */
export interface SendRecord<R> {
  readonly request: R;
  readonly scopes: readonly string[];
  readonly attempt: number;
  /** Scheduler time at which the download started. */
  readonly at: number;
  /** Scheduler time at which it settled, or undefined while in flight / when aborted. */
  endedAt: number | undefined;
  readonly signal: AbortSignal;
}

/** A download in virtual time, with everything it saw. */
export interface RecordingDownload<R> {
  readonly download: (
    request: R,
    context: DownloadContext,
  ) => Observable<{ status: number; request: R }>;
  readonly sends: SendRecord<R>[];
  /** Requests in flight now, per scope and in all. */
  readonly inFlight: Map<string, number>;
  /** The largest number in flight at once, per scope. */
  readonly maxInFlight: Map<string, number>;
  /** The largest number in flight at once across all scopes. */
  maxTotal: number;
  total: number;
}

/**
 * A download that answers `{ status: 200, request }` after `latency(request)`
 * ms of `scheduler` time and records starts, ends and in-flight counts.
 */
export function recordingDownload<R>(
  scheduler: SchedulerLike,
  latency: (request: R, attempt: number) => number,
): RecordingDownload<R> {
  const rec: RecordingDownload<R> = {
    download: (request, context) =>
      new Observable<{ status: number; request: R }>((subscriber) => {
        const record: SendRecord<R> = {
          request,
          scopes: context.scopes,
          attempt: context.attempt,
          at: scheduler.now(),
          endedAt: undefined,
          signal: context.signal,
        };
        rec.sends.push(record);
        rec.total++;
        if (rec.total > rec.maxTotal) rec.maxTotal = rec.total;
        for (const scope of context.scopes) {
          const n = (rec.inFlight.get(scope) ?? 0) + 1;
          rec.inFlight.set(scope, n);
          if (n > (rec.maxInFlight.get(scope) ?? 0)) rec.maxInFlight.set(scope, n);
        }
        let done = false;
        const end = () => {
          if (done) return;
          done = true;
          rec.total--;
          for (const scope of context.scopes) rec.inFlight.set(scope, rec.inFlight.get(scope)! - 1);
        };
        const sub = timer(latency(request, context.attempt), scheduler).subscribe(() => {
          record.endedAt = scheduler.now();
          end();
          subscriber.next({ status: 200, request });
          subscriber.complete();
        });
        return () => {
          end();
          sub.unsubscribe();
        };
      }),
    sends: [],
    inFlight: new Map(),
    maxInFlight: new Map(),
    maxTotal: 0,
    total: 0,
  };
  return rec;
}

/** A seeded uniform random source in [0, 1) (mulberry32), for jitter. */
export { seededRandom } from "../../lib/sim/zoo_random.ts";
