/**
 * Waits longer than a timer can hold. Node (and Bun, and Deno in Node mode)
 * store a timer's delay in a signed 32-bit integer: past 2^31 - 1 ms (24.8
 * days) the delay becomes 1 ms with a `TimeoutOverflowWarning`. RxJS's async
 * scheduler uses `setInterval`, so an overflowing wait fires every
 * millisecond, and code that re-arms after an early wake busy-loops.
 *
 * @module
 */
import { type SchedulerLike, Subscription } from "rxjs";

/** The longest delay a timer holds: 2^31 - 1 ms, about 24.8 days. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Run `work` after `delayMs` of `scheduler` time, in chunks of at most
 * {@link MAX_TIMER_MS}: a short wait is one plain `schedule` (nothing added
 * on the hot path), a longer one re-arms at each chunk's end until the whole
 * wait has passed.
 *
 * @param scheduler The scheduler to wait on.
 * @param delayMs How long to wait; negative and NaN mean now.
 * @param work What to run once, at the end.
 * @returns The subscription that cancels the wait.
 */
export function scheduleAfter(
  scheduler: SchedulerLike,
  delayMs: number,
  work: () => void,
): Subscription {
  const ms = delayMs > 0 ? delayMs : 0;
  if (ms <= MAX_TIMER_MS) return scheduler.schedule(work, ms);
  const at = scheduler.now() + ms;
  const outer = new Subscription();
  const arm = (wait: number): void => {
    const inner = scheduler.schedule(() => {
      outer.remove(inner);
      const left = at - scheduler.now();
      if (left > 0) arm(left);
      else work();
    }, Math.min(wait, MAX_TIMER_MS));
    outer.add(inner);
  };
  arm(ms);
  return outer;
}

/** `ms` cut to what one timer can hold, for a wait that re-checks when it ends early. */
export function timerDelay(ms: number): number {
  return ms > MAX_TIMER_MS ? MAX_TIMER_MS : ms > 0 ? ms : 0;
}

/** A promise of `scheduleAfter`: resolves after `delayMs` on `scheduler`. */
export function sleepOn(scheduler: SchedulerLike, delayMs: number): Promise<void> {
  return new Promise((resolve) => scheduleAfter(scheduler, delayMs, resolve));
}

/**
 * The pause before the `tries`-th new try through a Redis outage: 100 ms,
 * doubling, at most 2 s (the shared queue and the shared start domains).
 */
export function outagePauseMs(tries: number): number {
  return Math.min(2000, 50 * 2 ** Math.min(6, tries));
}
