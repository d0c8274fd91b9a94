import fc from "fast-check";
import { interval, take, timer, VirtualTimeScheduler } from "rxjs";
import { describe, expect, it } from "vitest";
import { SortedVirtualTimeScheduler } from "../lib/sim/_sorted_virtual_scheduler.ts";

/** Runs timers and intervals (some cancelled midway) and returns what fired, when. */
function run(
  scheduler: VirtualTimeScheduler,
  plan: readonly (readonly [kind: "timer" | "interval", delay: number, cancelAt: number])[],
): string[] {
  const fired: string[] = [];
  plan.forEach(([kind, delay, cancelAt], i) => {
    const source = kind === "timer" ? timer(delay, scheduler) : interval(delay, scheduler).pipe(
      take(4),
    );
    const sub = source.subscribe((v) => fired.push(`${i}:${v}@${scheduler.now()}`));
    if (cancelAt >= 0) scheduler.schedule(() => sub.unsubscribe(), cancelAt);
  });
  scheduler.flush();
  return fired;
}

describe("SortedVirtualTimeScheduler", () => {
  it("SortedVirtualTimeScheduler runs actions in exactly VirtualTimeScheduler's order", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom("timer" as const, "interval" as const),
            fc.integer({ min: 0, max: 30 }),
            fc.integer({ min: -1, max: 60 }),
          ),
          { maxLength: 25 },
        ),
        (plan) => {
          expect(run(new SortedVirtualTimeScheduler(), plan)).toEqual(
            run(new VirtualTimeScheduler(), plan),
          );
        },
      ),
    );
  });

  it("SortedVirtualTimeScheduler stops at maxFrames", () => {
    const s = new SortedVirtualTimeScheduler(15);
    const fired: number[] = [];
    timer(10, s).subscribe(() => fired.push(s.now()));
    timer(20, s).subscribe(() => fired.push(s.now()));
    s.flush();
    expect(fired).toEqual([10]);
  });
});
