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

const origin = performance.timeOrigin;

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
  now: () => origin + performance.now(), // real clock: the package's one injectable default
  schedule: asyncScheduler.schedule.bind(asyncScheduler) as SchedulerLike["schedule"],
};
