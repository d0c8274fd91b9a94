/**
 * The gate of the throttler: requests come in (`submit`), go when every
 * scope and the global cap allow, wait in their scope's list when not (a
 * `TicketQueue`: no object per waiting request), and free their slots when
 * they settle (`release`). Owns the dispatch loop
 * (`#drain`), the per-scope timers that look at waiting requests again and
 * the wakes that let managers change by themselves, and the batching of
 * `changes$`. The façade (`./throttler.ts`) builds on it.
 *
 * The hot path of every request is here: `submit` -> `#tryStart` ->
 * `#start`, then `release` -> `#drain` -> `#pumpScope`. It takes the entry
 * objects from the scope store and passes them down; add no lookup, closure
 * or allocation per request (bench/core.bench.ts measures it).
 *
 * Size: about 630 lines, on purpose: the whole hot path stays on one object
 * (issue 14), where a call into another layer would cost every request.
 *
 * @module
 */
import { type Observable, Subject } from "rxjs";
import type { WaitReason } from "../events.ts";
import { ThrottlingScopeManager } from "../managers/scope_manager.ts";
import type { DoneInfo } from "../managers/scope_manager_protocol.ts";
import type { RequestScopes } from "../scopes/scopes.ts";
import { scheduleAfter } from "../util/_timer.ts";
import {
  clearTimer,
  clearWake,
  type DefaultScopeEntry,
  newTimers,
  type ScopeEntry,
} from "./_scope_entry.ts";
import { ScopeStore } from "./_scope_store.ts";
import { type GateOwner, TicketQueue } from "./_ticket_queue.ts";
import { TrafficCounter } from "./_traffic.ts";

const NO_AMOUNTS: readonly (number | undefined)[] = [];

/** When an answered request was sent and how long it took (an outcome has both). */
interface Timing {
  readonly sentAt: number;
  readonly latencyMs: number;
}

/**
 * Dispatches requests over the scope store. Abstract: only `Throttler` is
 * made.
 */
export abstract class Gate extends ScopeStore {
  readonly #global = new TicketQueue();
  #active = 0;
  #held = 0;
  /** Scopes whose waiting requests must be looked at again. */
  readonly #dirty: string[] = [];
  /**
   * The entry of each scope of `#dirty` when it was pushed, if known: while
   * it is still that scope's entry, it spares hashing the name again.
   */
  readonly #dirtyEntries: (ScopeEntry | undefined)[] = [];
  /**
   * What a default manager is told of an answer (see `#release`): it reads
   * the fields during `recordDone` and keeps none of them (its adaptive parts
   * included, lib/managers/_rampup.ts), so one object serves every request.
   * The numbers start as doubles, so V8 writes them in place.
   */
  readonly #answer: {
    latencyMs: number;
    status: number | undefined;
    failed: boolean;
    sentAt: number;
  } = { latencyMs: Number.NaN, status: undefined, failed: false, sentAt: Number.NaN };
  /** Scopes whose head could go but for the global cap. */
  readonly #stalled = new Set<string>();
  #draining = false;
  #warnedHeld = false;
  #attached = 0;
  /** Requests sent and done while a traffic meter is open (see `meterTraffic`). */
  protected readonly traffic: TrafficCounter = new TrafficCounter();

  readonly #changes = new Subject<readonly string[]>();
  /** Scopes changed since the last `changes$` emission; only kept while observed. */
  #changedScopes: Set<string> | undefined;

  /**
   * The names of the scopes whose state changed (a send, a completion,
   * backoff, recovery, a setting), batched: one array per pass of the
   * throttler's dispatch loop, emitted when the loop is done, so a listener
   * may submit requests from there. Costs nothing while nobody listens. The
   * request queue wakes on it (a `Throttler` is a `QueueThrottleView`).
   */
  readonly changes$: Observable<readonly string[]> = this.#changes.asObservable();

  /** Requests in flight across all scopes. */
  get active(): number {
    return this.#active;
  }

  /** Requests waiting at the gate. */
  get held(): number {
    return this.#held;
  }

  /** How many more requests could start now before the global cap (`concurrentRequests`) is hit. */
  freeSlots(): number {
    return Math.max(0, this.settings.concurrentRequests - this.#active - this.#held);
  }

  /**
   * How long before a request with these scopes could go: 0 now, a positive
   * number of ms, or `Infinity` until something completes. Counts nothing.
   */
  waitMs(scopes: readonly string[], amounts?: readonly (number | undefined)[]): number {
    if (this.#active >= this.settings.concurrentRequests) return Infinity;
    const now = this.scheduler.now();
    let wait = 0;
    for (let i = 0; i < scopes.length; i++) {
      const scope = scopes[i]!;
      const entry = this.lookup(scope);
      if (entry === undefined) continue;
      if (entry.waiting !== undefined && entry.waiting.size > 0) return Infinity;
      this.advance(scope, entry, now);
      const w = entry.manager.canSend(now, amounts?.[i]);
      if (w > wait) wait = w;
    }
    return wait;
  }

  /**
   * The share (0..1) of its scopes' remaining quota a request with these
   * amounts would use, the largest over its scopes; 0 when no scope has a
   * quota (the request queue prefers larger shares on ties).
   */
  quotaShare(scopes: readonly string[], amounts?: readonly (number | undefined)[]): number {
    let share = 0;
    const now = this.scheduler.now();
    for (let i = 0; i < scopes.length; i++) {
      const entry = this.lookup(scopes[i]!);
      const quota = entry?.manager.state?.(now).quota;
      if (quota === undefined) continue;
      const left = quota.limit - quota.used;
      const s = left > 0 ? Math.min(1, (amounts?.[i] ?? 1) / left) : 1;
      if (s > share) share = s;
    }
    return share;
  }

  /** Requests in flight across these scopes (for least-loaded ordering). */
  load(scopes: readonly string[]): number {
    let n = 0;
    const now = this.scheduler.now();
    for (const scope of scopes) {
      const entry = this.lookup(scope);
      if (entry !== undefined) n += entry.manager.state?.(now).active ?? 0;
    }
    return n;
  }

  /** @internal Queue a request; `owner.start` runs when every scope and the global cap allow. */
  submit(owner: GateOwner, request: unknown, attempt: number, claims: RequestScopes): void {
    this.clockStale();
    this.depth++;
    try {
      // Sweep here, between decisions, never while a ticket's scopes are being looked up.
      if (this.sweepDue()) this.sweep();
      if (!this.#tryStart(owner, request, attempt, claims, false)) {
        this.#held++;
        if (!this.#warnedHeld && this.#held > this.settings.delayedRequestsWarnThreshold) {
          this.#warnedHeld = true;
          this.warnOnce(
            "held",
            "many-delayed",
            `More than ${this.settings.delayedRequestsWarnThreshold} requests are held back by throttling ` +
              `(DELAYED_REQUESTS_WARN_THRESHOLD); check the throttling configuration`,
          );
        }
      }
    } finally {
      this.depth--;
    }
    this.flushChanges();
  }

  /**
   * @internal A started request settled: free its slot in every scope.
   * `slot` is what `GateOwner.start` was given, if kept.
   */
  release(scopes: RequestScopes, result?: DoneInfo, slot?: object): void {
    if (result === undefined) this.#release(scopes, slot, undefined, undefined, false, undefined);
    else this.#release(scopes, slot, result, result.status, result.failed === true, result);
  }

  /**
   * @internal A started request settled (`failed`: as an error outcome):
   * `release`, with what its managers are told read from its outcome
   * (`sentAt`, `latencyMs`), so that no object is made per request for a
   * default manager.
   */
  answered(
    scopes: RequestScopes,
    slot: object | undefined,
    outcome: Timing,
    status: number | undefined,
    failed: boolean,
  ): void {
    this.#release(scopes, slot, outcome, status, failed, undefined);
  }

  /**
   * `told`: the timing of the answer the managers hear of (else they are
   * told `recordDone(now)` alone); `given`: the caller's own object for it,
   * if it made one (then every manager gets that object, as the caller meant).
   */
  #release(
    scopes: RequestScopes,
    slot: object | undefined,
    told: Timing | DoneInfo | undefined,
    status: number | undefined,
    failed: boolean,
    given: DoneInfo | undefined,
  ): void {
    this.clockStale();
    const now = this.clock();
    this.#active--;
    const names = scopes.names;
    const traffic = this.traffic;
    const metered = traffic.meters > 0;
    const bad = metered && told !== undefined &&
      (failed || (status !== undefined && status >= 400));
    if (metered) {
      traffic.totals.done++;
      if (bad) traffic.totals.failed++;
    }
    let made: DoneInfo | undefined;
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      const held = slot as ScopeEntry | undefined;
      const entry = held !== undefined && names.length === 1 && held.scope === scope &&
          held.slot >= 0
        ? held
        : this.entry(scope);
      const manager = entry.manager;
      if (told === undefined || given !== undefined) manager.recordDone(now, given);
      else if ((manager as unknown) === entry && !(entry as DefaultScopeEntry).exposed) {
        // The default manager keeps nothing of what it is told: one object
        // per throttler, filled right before the call (a listener called
        // below may release another request, which fills it again).
        const a = this.#answer;
        a.latencyMs = told.latencyMs;
        a.status = status;
        a.failed = failed;
        a.sentAt = (told as Timing).sentAt;
        manager.recordDone(now, a);
      } else {
        // Any other manager may keep it: its own object, as before.
        made ??= { latencyMs: told.latencyMs, status, failed, sentAt: (told as Timing).sentAt };
        manager.recordDone(now, made);
      }
      if (metered) {
        const t = traffic.count(scope, entry);
        t.done++;
        if (bad) t.failed++;
      }
      this.changed(scope, entry, now);
      // A scope that never queued a request has nothing to pump (#pumpScope returns at once).
      if (entry.waiting !== undefined) this.#markDirty(scope, entry);
    }
    this.countUse();
    this.#drain();
  }

  /** @internal Drop every waiting request of an owner (its subscription ended). */
  cancelOwner(owner: GateOwner): void {
    let dropped = this.#global.dropOwner(owner);
    for (const entry of this.allEntries()) {
      if (entry.waiting === undefined || entry.waiting.size === 0) continue;
      dropped += entry.waiting.dropOwner(owner);
      if (entry.waiting.size === 0) clearTimer(entry);
    }
    this.#held -= dropped;
  }

  /** @internal A gate subscription or an observer started; timers may run. */
  attach(): void {
    this.#attached++;
  }

  /** @internal A gate subscription or an observer ended; with none left, no timer stays. */
  detach(): void {
    this.#attached--;
    if (this.#attached > 0) return;
    for (const entry of this.allEntries()) {
      if (entry.timers === undefined) continue;
      clearWake(entry);
      if (entry.waiting === undefined || entry.waiting.size === 0) clearTimer(entry);
    }
  }

  protected evicted(scope: string): void {
    if (this.#stalled.size > 0) this.#stalled.delete(scope);
  }

  /** Let a scope's manager catch up with the time (recovery, rampup), emitting its steps. */
  protected advance(scope: string, entry: ScopeEntry, now: number): void {
    const advance = entry.manager.advance;
    if (advance === undefined) return;
    const steps = advance.call(entry.manager, now);
    if (steps.length === 0) return;
    for (const step of steps) this.emitStep(scope, step, now);
  }

  /**
   * Tell watchers; keep a wake-up timer for changes the manager makes by itself.
   * Called twice per request (its send and its answer): the common case, no
   * listener and no wake wanted or armed, is a few checks and one call of
   * `nextWakeAt`; the rest is in the methods it calls.
   */
  protected changed(scope: string, entry: ScopeEntry, now: number): void {
    if (this.#changes.observed) (this.#changedScopes ??= new Set()).add(scope);
    if (this.allWatchers.size > 0 || this.watchers.size > 0) this.#tellWatchers(scope, entry);
    if (this.#attached > 0) {
      const manager = entry.manager;
      if (manager.nextWakeAt === undefined) return;
      const at = manager.nextWakeAt(now);
      const timers = entry.timers;
      // No wake wanted and none armed: nothing to do.
      if (at === undefined && (timers === undefined || timers.wake === undefined)) return;
      this.#armWake(scope, entry, now, at);
    }
  }

  #tellWatchers(scope: string, entry: ScopeEntry): void {
    const set = this.watchers.get(scope);
    if (set === undefined && this.allWatchers.size === 0) return;
    const s = this.stateOf(scope, entry);
    if (set !== undefined) { for (const fn of set) fn(s); }
    for (const fn of this.allWatchers) fn(s);
    this.clockStale();
  }

  /** Emit the scopes changed since the last time, unless the dispatch loop is still running. */
  protected flushChanges(): void {
    const changed = this.#changedScopes;
    if (changed === undefined || this.#draining) return;
    this.#changedScopes = undefined;
    this.#changes.next([...changed]);
    this.clockStale();
  }

  #tryStart(
    owner: GateOwner,
    request: unknown,
    attempt: number,
    claims: RequestScopes,
    fromGlobal: boolean,
  ): boolean {
    if (
      this.#active >= this.settings.concurrentRequests || (!fromGlobal && this.#global.size > 0)
    ) {
      this.#global.push(owner, request, attempt, claims);
      if (this.observed) this.#delayed(undefined, "global", Infinity);
      return false;
    }
    // Read when first needed: a request queued behind others (most of a backlog) reads no clock.
    let now = Number.NaN;
    const names = claims.names;
    const amounts = claims.amounts ?? NO_AMOUNTS;
    let entry: ScopeEntry | undefined;
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      entry = this.entry(scope);
      if (entry.waiting !== undefined && entry.waiting.size > 0) {
        // Keep the order of the scope: behind those already waiting.
        entry.waiting.push(owner, request, attempt, claims);
        return false;
      }
      if (now !== now) now = this.clock();
      this.advance(scope, entry, now);
      const wait = entry.manager.canSend(now, amounts[i]);
      if (wait > 0) {
        (entry.waiting ??= new TicketQueue()).push(owner, request, attempt, claims);
        if (wait !== Infinity) this.#armTimer(scope, entry, now + wait);
        if (this.observed) this.#delayed(scope, this.#reason(entry, now, wait), wait);
        return false;
      }
    }
    this.#start(owner, request, attempt, claims, now, entry);
    return true;
  }

  /** `decidedAt`: NaN when no clock was read; `only`: a single-scope ticket's entry, if known. */
  #start(
    owner: GateOwner,
    request: unknown,
    attempt: number,
    claims: RequestScopes,
    decidedAt: number,
    only: ScopeEntry | undefined,
  ): void {
    // The send is recorded as close as possible to the download's start, so
    // "not before" times are measured from the real send: the decision's
    // reading if nothing outside the throttler ran since, else a new one.
    const clock = this.clock();
    const now = decidedAt > clock ? decidedAt : clock; // NaN: the clock
    const names = claims.names;
    const amounts = claims.amounts ?? NO_AMOUNTS;
    const traffic = this.traffic;
    this.#active++;
    if (traffic.meters > 0) traffic.totals.sent++;
    let entry: ScopeEntry | undefined;
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      entry = only !== undefined && names.length === 1 ? only : this.lookup(scope)!;
      this.touch(entry);
      entry.manager.recordSent(now, amounts[i]);
      if (traffic.meters > 0) traffic.count(scope, entry).sent++;
      if (amounts[i] === undefined) this.#checkQuotaAmounts(scope, entry);
      this.changed(scope, entry, now);
    }
    owner.start(request, attempt, claims, now, names.length === 1 ? entry : undefined);
    this.clockStale(); // the download ran
  }

  /** Start waiting tickets of a scope while its head can go. */
  #pumpScope(scope: string, entry: ScopeEntry): void {
    const waiting = entry.waiting;
    if (waiting === undefined) return;
    while (waiting.size > 0) {
      if (this.#active >= this.settings.concurrentRequests) {
        this.#stalled.add(scope);
        return;
      }
      const now = this.clock();
      const claims = waiting.headClaims();
      const names = claims.names;
      const amounts = claims.amounts ?? NO_AMOUNTS;
      let blockedBy: string | undefined;
      let blockedEntry: ScopeEntry | undefined;
      let blockedWait = 0;
      for (let i = 0; i < names.length; i++) {
        const other = names[i]!;
        const e = other === scope ? entry : this.entry(other);
        if (e !== entry && e.waiting !== undefined && e.waiting.size > 0) {
          blockedBy = other;
          blockedEntry = e;
          blockedWait = Infinity;
          break;
        }
        this.advance(other, e, now);
        const wait = e.manager.canSend(now, amounts[i]);
        if (wait > 0) {
          blockedBy = other;
          blockedEntry = e;
          blockedWait = wait;
          break;
        }
      }
      if (blockedEntry === entry) {
        if (blockedWait !== Infinity) this.#armTimer(scope, entry, now + blockedWait);
        return;
      }
      const owner = waiting.headOwner();
      const request = waiting.headRequest();
      const attempt = waiting.headAttempt();
      waiting.shift();
      if (blockedEntry === undefined) {
        this.#held--;
        this.#start(owner, request, attempt, claims, now, entry);
        continue;
      }
      // Blocked by another scope: wait there instead, so this scope's other
      // requests are not held up behind it (no partial holds either).
      (blockedEntry.waiting ??= new TicketQueue()).push(owner, request, attempt, claims);
      if (blockedWait !== Infinity) this.#armTimer(blockedBy!, blockedEntry, now + blockedWait);
    }
    // A request started above can settle synchronously and lead to a submit
    // whose sweep evicts this scope (now idle) and gives its entry to a new
    // scope, which may have armed a timer on it: only clear the timer while
    // the entry still has the queue this pump emptied.
    if (entry.waiting === waiting) clearTimer(entry);
  }

  /** The scope's waiting requests must be looked at again (`entry`: its entry, if at hand). */
  #markDirty(scope: string, entry: ScopeEntry | undefined): void {
    this.#dirty.push(scope);
    this.#dirtyEntries.push(entry);
  }

  #pumpGlobal(): void {
    const global = this.#global;
    while (global.size > 0 && this.#active < this.settings.concurrentRequests) {
      // A single-scope ticket whose scope has requests waiting already goes
      // behind them, as `#tryStart` would put it: moved there as it is. A
      // backlog met by the global cap (bench/core.bench.ts) all goes this way
      // once a slot frees.
      const head = global.headClaims().names;
      if (head.length === 1) {
        const waiting = this.lookup(head[0]!)?.waiting;
        if (waiting !== undefined && waiting.size > 0) {
          global.moveHeadTo(waiting);
          continue;
        }
      }
      const owner = global.headOwner();
      const request = global.headRequest();
      const attempt = global.headAttempt();
      const claims = global.headClaims();
      global.shift();
      this.#held--;
      if (!this.#tryStart(owner, request, attempt, claims, true)) this.#held++;
    }
  }

  /**
   * Look again at every scope that may have a request ready. Starting a
   * request can settle it synchronously (a download that answers at once) and
   * call `release` from inside this loop: the flag turns that nested call into
   * more work for this loop instead of a deeper stack.
   */
  #drain(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.depth++;
    try {
      const cap = this.settings.concurrentRequests;
      for (;;) {
        // Requests queued behind the global cap create their scopes here, not
        // in submit: sweep here too, or a batch given all at once would never
        // evict. Between tickets, so no ticket's scopes go while looked at.
        if (this.sweepDue()) this.sweep();
        this.#pumpGlobal();
        if (this.#dirty.length > 0) {
          const scope = this.#dirty.pop()!;
          const held = this.#dirtyEntries.pop();
          // An entry may have been evicted (and reused) since it was pushed.
          const entry = held !== undefined && held.slot >= 0 && held.scope === scope
            ? held
            : this.lookup(scope);
          if (entry !== undefined) this.#pumpScope(scope, entry);
          continue;
        }
        if (this.#stalled.size > 0 && this.#active < cap) {
          for (const scope of this.#stalled) {
            this.#stalled.delete(scope);
            this.#markDirty(scope, undefined);
            if (this.#dirty.length >= cap - this.#active) break;
          }
          continue;
        }
        break;
      }
    } finally {
      this.#draining = false;
      this.depth--;
    }
    this.flushChanges();
  }

  #armTimer(scope: string, entry: ScopeEntry, at: number): void {
    const t = entry.timers ??= newTimers();
    if (t.timer !== undefined) {
      if (t.timerAt <= at) return;
      t.timer.unsubscribe();
    }
    t.timerAt = at;
    t.timer = scheduleAfter(this.scheduler, at - this.clock(), () => {
      t.timer = undefined;
      t.timerAt = 0;
      if (this.lookup(scope) !== entry) return;
      this.clockStale();
      this.#markDirty(scope, entry);
      this.#drain();
    });
  }

  /** `at`: what the manager's `nextWakeAt(now)` answered. */
  #armWake(scope: string, entry: ScopeEntry, now: number, at: number | undefined): void {
    if (at === undefined) {
      clearWake(entry);
      return;
    }
    const w = entry.timers ??= newTimers();
    if (w.wake !== undefined && w.wakeAt === at) return;
    w.wake?.unsubscribe();
    w.wakeAt = at;
    w.wake = scheduleAfter(this.scheduler, at - now, () => {
      w.wake = undefined;
      w.wakeAt = 0;
      if (this.lookup(scope) !== entry) return;
      this.clockStale();
      const t = this.clock();
      this.advance(scope, entry, t);
      this.changed(scope, entry, t);
      this.#markDirty(scope, entry);
      this.#drain();
    });
  }

  #reason(entry: ScopeEntry, now: number, wait: number): WaitReason {
    if (wait === Infinity) return "concurrency";
    const s = entry.manager.state?.(now);
    if (s === undefined) return "delay";
    if (s.holdUntil > now && s.holdUntil - now >= wait) return "hold";
    if (s.nextSendAt > now && s.nextSendAt - now >= wait) return "delay";
    return "quota";
  }

  #delayed(scope: string | undefined, reason: WaitReason, waitMs: number): void {
    this.emit({ type: "request-delayed", at: this.clock(), scope, reason, waitMs });
  }

  /** A quota scope whose requests carry no amounts never uses its quota: say so once. */
  #checkQuotaAmounts(scope: string, entry: ScopeEntry): void {
    const m = entry.manager;
    // A default entry is its own manager (no type check per send).
    if ((m as unknown) !== entry && !(m instanceof ThrottlingScopeManager)) return;
    const manager = m as ThrottlingScopeManager;
    const quota = manager.config.quota;
    if (quota === undefined || manager.quotaAmountSeen) return;
    this.warnOnce(
      `quota-without-amounts:${scope}`,
      "quota-without-amounts",
      `Scope '${scope}' has a quota of ${quota} but its requests carry no amount for it, so the quota ` +
        `never fills: give amounts as meta.throttlingScopes {'${scope}': amount} or from getScopes`,
      scope,
    );
  }
}
