import { type SchedulerLike, VirtualTimeScheduler } from "rxjs";
import { describe, expect, it } from "vitest";
import { MAX_TIMER_MS, scheduleAfter, timerDelay } from "../lib/util/_timer.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { from, of } from "rxjs";

/**
 * A virtual-time scheduler that records every delay asked of it, as a real
 * timer would be asked: a delay past MAX_TIMER_MS is what overflows in Node.
 */
function recordingScheduler(): { scheduler: VirtualTimeScheduler; delays: number[] } {
  const scheduler = new VirtualTimeScheduler();
  const delays: number[] = [];
  const schedule = scheduler.schedule.bind(scheduler) as SchedulerLike["schedule"];
  scheduler.schedule = ((work: () => void, delay?: number, state?: unknown) => {
    delays.push(delay ?? 0);
    return schedule(work as never, delay, state);
  }) as typeof scheduler.schedule;
  return { scheduler, delays };
}

describe("scheduleAfter()", () => {
  it("scheduleAfter() waits the whole time in chunks no timer overflows", () => {
    const { scheduler, delays } = recordingScheduler();
    let ranAt: number | undefined;
    scheduleAfter(scheduler, 10_000_000_000, () => (ranAt = scheduler.now()));
    scheduler.flush();
    expect(ranAt).toBe(10_000_000_000);
    expect(Math.max(...delays)).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(delays.length).toBe(Math.ceil(10_000_000_000 / MAX_TIMER_MS));
  });

  it("scheduleAfter() is one plain schedule for a short wait, and cancels a long one", () => {
    const { scheduler, delays } = recordingScheduler();
    let ran = 0;
    scheduleAfter(scheduler, 250, () => ran++);
    const long = scheduleAfter(scheduler, 3 * MAX_TIMER_MS, () => ran++);
    scheduler.schedule(() => long.unsubscribe(), MAX_TIMER_MS + 1);
    scheduler.flush();
    expect(ran).toBe(1);
    expect(delays).toEqual([250, MAX_TIMER_MS, MAX_TIMER_MS + 1, MAX_TIMER_MS]);
  });

  it("timerDelay() cuts a wait to what one timer holds", () => {
    expect([-5, 0, 10, MAX_TIMER_MS, 1e12, Infinity].map(timerDelay)).toEqual([
      0,
      0,
      10,
      MAX_TIMER_MS,
      MAX_TIMER_MS,
      MAX_TIMER_MS,
    ]);
  });
});

describe("Throttler timers past 24.8 days", () => {
  it("Throttler.delayScope() holds past 24.8 days without a timer that overflows", () => {
    const { scheduler, delays } = recordingScheduler();
    const throttler = createThrottler({}, { scheduler, random: () => 0.5 });
    const hold = 10_000_000_000; // BACKOFF_MAX_DELAY=10000000 s, as the issue ran it
    throttler.delayScope("a.test", hold);
    const sentAt: number[] = [];
    from(["http://a.test/1"]).pipe(
      throttleByScope(throttler, () => {
        sentAt.push(scheduler.now());
        return of({ status: 200 });
      }),
    ).subscribe();
    scheduler.flush();
    expect(sentAt).toEqual([hold]);
    expect(Math.max(...delays)).toBeLessThanOrEqual(MAX_TIMER_MS);
    // A handful of chunks, not a wake-up every millisecond.
    expect(delays.length).toBeLessThan(20);
  });

  it("throttleByScope() waits a per-request delay past 24.8 days in chunks", () => {
    const { scheduler, delays } = recordingScheduler();
    const throttler = createThrottler({}, { scheduler, random: () => 0.5 });
    const sentAt: number[] = [];
    of({ url: "http://a.test/", meta: { throttlingDelayMs: 5e9 } }).pipe(
      throttleByScope(throttler, () => {
        sentAt.push(scheduler.now());
        return of({ status: 200 });
      }),
    ).subscribe();
    scheduler.flush();
    expect(sentAt).toEqual([5e9]);
    expect(Math.max(...delays)).toBeLessThanOrEqual(MAX_TIMER_MS);
  });

  it("Throttler.delayScope() past 24.8 days raises no TimeoutOverflowWarning on real timers", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    const throttler = createThrottler({});
    throttler.delayScope("a.test", 10_000_000_000);
    let sends = 0;
    const sub = of("http://a.test/").pipe(
      throttleByScope(throttler, () => {
        sends++;
        return of({ status: 200 });
      }),
    ).subscribe();
    // Real time on purpose: the overflow is a property of real timers. Before
    // the fix the 1 ms re-arm produced a warning within the first few ms.
    await new Promise((resolve) => setTimeout(resolve, 200));
    sub.unsubscribe();
    process.off("warning", onWarning);
    expect(warnings.filter((n) => n === "TimeoutOverflowWarning")).toEqual([]);
    expect(sends).toBe(0);
  });
});
