/**
 * The default clock of the throttler: RxJS's `asyncScheduler` for timers, with
 * a sub-millisecond `now()`.
 *
 * `asyncScheduler.now()` reads `Date.now`, whole milliseconds: a send at
 * 1000.9 ms reads as 1000, so the next one, 100 ms later by that clock, could
 * go out 99.1 ms after it. With a fractional clock the gate's "not before"
 * times are exact, and a timer that fires a little early (timers count from
 * the event loop's cached time) finds the scope not yet ready and waits the
 * rest, so no two sends of a scope are ever closer than its delay.
 *
 * @module
 */
import { asyncScheduler, type SchedulerLike } from "rxjs";
// The clock RxJS's own schedulers read, which `TestScheduler.run()` redirects
// (the same build of rxjs as the main entry under every runtime: one export map).
import { dateTimestampProvider } from "rxjs/internal/scheduler/dateTimestampProvider";

const origin = performance.timeOrigin;
/**
 * `performance.now`, bound once: in Node 20 the global `performance` is a
 * lazy getter, and the gate reads the clock twice per request
 * (bench/core.bench.ts: 5-8% of a request's cost).
 */
const monotonicNow: () => number = performance.now.bind(performance);

/**
 * `asyncScheduler` with a fractional epoch-millisecond clock.
 *
 * @example
 * ```ts
 * import { preciseScheduler } from "./precise_scheduler.ts";
 * const t = preciseScheduler.now();
 * console.assert(t > 1.6e12); // epoch milliseconds, with a fraction
 * ```
 */
export const preciseScheduler: SchedulerLike = {
  now: () => {
    // Inside `TestScheduler.run()` RxJS points the clock of `asyncScheduler`
    // (and its timers) at the test's virtual frames: then this clock is the
    // test's too, so a user's marble test of a throttler made with the
    // defaults runs in virtual time. One property read otherwise.
    const virtual = dateTimestampProvider.delegate;
    return virtual === undefined ? origin + monotonicNow() : virtual.now(); // single injectable default (pass a scheduler)
  },
  schedule: asyncScheduler.schedule.bind(asyncScheduler) as SchedulerLike["schedule"],
};
