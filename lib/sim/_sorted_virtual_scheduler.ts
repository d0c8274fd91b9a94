/**
 * RxJS's `VirtualTimeScheduler`, with each action put in its place by a
 * binary search instead of sorting every pending action again at each
 * schedule. Same order (due time, then creation), so the same runs: only
 * faster when thousands of timers are pending (a simulation of 10,000 sites
 * keeps a delay timer per waiting scope, and `VirtualTimeScheduler` sorted
 * them all for every new timer).
 *
 * @module
 */
import { type SchedulerAction, Subscription, VirtualAction, VirtualTimeScheduler } from "rxjs";

/** A `VirtualAction` that inserts itself in order. */
class SortedVirtualAction<T> extends VirtualAction<T> {
  constructor(
    scheduler: VirtualTimeScheduler,
    work: (this: SchedulerAction<T>, state?: T) => void,
  ) {
    super(scheduler, work);
  }

  override schedule(state?: T, delay = 0): Subscription {
    if (!Number.isFinite(delay)) return Subscription.EMPTY;
    if (!this.id) return super.schedule(state, delay);
    // Rescheduled: a new action (as VirtualAction does), of this class.
    this.active = false;
    const action = new SortedVirtualAction(this.scheduler, this.work);
    this.add(action);
    return action.schedule(state, delay);
  }

  protected override requestAsyncId(
    scheduler: VirtualTimeScheduler,
    _id?: unknown,
    delay = 0,
  ): number {
    this.delay = scheduler.frame + delay;
    const actions = scheduler.actions as SortedVirtualAction<unknown>[];
    // The first action after this one: later due, or as due and created later.
    let lo = 0;
    let hi = actions.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const a = actions[mid]!;
      if (a.delay < this.delay || (a.delay === this.delay && a.index < this.index)) lo = mid + 1;
      else hi = mid;
    }
    actions.splice(lo, 0, this as SortedVirtualAction<unknown>);
    return 1;
  }
}

/**
 * A `VirtualTimeScheduler` whose actions keep their order by insertion.
 *
 * @example
 * ```ts
 * import { timer } from "rxjs";
 * import { SortedVirtualTimeScheduler } from "./_sorted_virtual_scheduler.ts";
 * const s = new SortedVirtualTimeScheduler();
 * const seen: number[] = [];
 * timer(20, s).subscribe(() => seen.push(s.now()));
 * timer(10, s).subscribe(() => seen.push(s.now()));
 * s.flush();
 * console.assert(seen.join() === "10,20");
 * ```
 * @internal
 */
export class SortedVirtualTimeScheduler extends VirtualTimeScheduler {
  /** @param maxFrames Stop flushing past this virtual time. @default Infinity */
  constructor(maxFrames = Infinity) {
    super(SortedVirtualAction as typeof VirtualAction, maxFrames);
  }
}
