/**
 * What the throttler keeps per scope: the entry (the scope's manager and the
 * gate's bookkeeping for it, its waiting requests) and its timers. Shared by
 * the scope store (`_scope_store.ts`), which creates, pools and evicts
 * entries, and the gate (`_gate.ts`), which queues requests on them and arms
 * their timers.
 *
 * @module
 */
import type { Subscription } from "rxjs";
import type { Slotted } from "./_scope_table.ts";
import { ThrottlingScopeManager } from "../managers/scope_manager.ts";
import type { ThrottlingScopeManagerProtocol } from "../managers/scope_manager_protocol.ts";
import type { TicketQueue } from "./_ticket_queue.ts";
import type { TrafficCount } from "./_traffic.ts";

/** A scope in memory: its manager and the throttler's bookkeeping for it. */
export interface ScopeEntry extends Slotted {
  readonly scope: string;
  readonly manager: ThrottlingScopeManagerProtocol;
  /** Requests counted while a traffic meter is open (see `meterTraffic`). */
  traffic: TrafficCount | undefined;
  waiting: TicketQueue | undefined;
  /** Made when a timer is first armed: most scopes of a broad crawl never need one. */
  timers: EntryTimers | undefined;
  /** Neighbours in the least-recently-used list (older, newer). */
  older: ScopeEntry | undefined;
  newer: ScopeEntry | undefined;
}

/**
 * The entry of a scope with the default manager: the manager and the
 * throttler's bookkeeping in one object (one object fewer per scope, which a
 * broad crawl keeps by the hundred thousand).
 */
export class DefaultScopeEntry extends ThrottlingScopeManager implements ScopeEntry {
  slot = -1;
  /** Handed out by `Throttler.manager`: someone may keep it, so it is never reused. */
  exposed = false;
  waiting: TicketQueue | undefined = undefined;
  timers: EntryTimers | undefined = undefined;
  traffic: TrafficCount | undefined = undefined;
  older: ScopeEntry | undefined = undefined;
  newer: ScopeEntry | undefined = undefined;

  get manager(): ThrottlingScopeManagerProtocol {
    return this;
  }
}

/** A scope's timers. */
export interface EntryTimers {
  /** Looks at the waiting requests again. */
  timer: Subscription | undefined;
  /** When `timer` fires; read only while it is set. */
  timerAt: number;
  /** Lets the manager change by itself (recovery, rampup, end of a hold). */
  wake: Subscription | undefined;
  /** When `wake` fires; read only while it is set. */
  wakeAt: number;
}

/** A scope's timers, none armed (made when the first is). */
export function newTimers(): EntryTimers {
  return { timer: undefined, timerAt: 0, wake: undefined, wakeAt: 0 };
}

/** Stop the timer that looks at a scope's waiting requests again. */
export function clearTimer(entry: ScopeEntry): void {
  const t = entry.timers;
  if (t !== undefined && t.timer !== undefined) {
    t.timer.unsubscribe();
    t.timer = undefined;
    t.timerAt = 0;
  }
}

/** Stop the timer that lets a scope's manager change by itself. */
export function clearWake(entry: ScopeEntry): void {
  const t = entry.timers;
  if (t !== undefined && t.wake !== undefined) {
    t.wake.unsubscribe();
    t.wake = undefined;
    t.wakeAt = 0;
  }
}
