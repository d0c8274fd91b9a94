/**
 * The default scope manager: the reference's `ThrottlingScopeManager`, a pure
 * state machine over one scope's concurrency, delay, jitter, holds, backoff,
 * recovery, rampup and quota. Time is always passed in (`now`, ms); the only
 * randomness is the injected `random` used for jitter.
 *
 * @module
 */
import type { ResolvedRampup, ResolvedScopeConfig } from "./settings.ts";
import { RampupController } from "./_rampup.ts";
import type {
  BackoffSignal,
  BaseDelayOptions,
  DoneInfo,
  QuotaReconciliation,
  ScopeState,
  ScopeStep,
  ThrottlingScopeManagerProtocol,
} from "./scope_manager_protocol.ts";

/** What the default manager is built from. */
export interface ScopeManagerOptions {
  readonly scope: string;
  readonly config: ResolvedScopeConfig;
  /** Uniform random numbers in [0, 1), for jitter. */
  readonly random: () => number;
}

/**
 * The default per-scope throttling arithmetic.
 *
 * @example Delay between sends
 * ```ts
 * import { ThrottlingScopeManager } from "./scope_manager.ts";
 * import { parseSettings, resolveScopeConfig } from "./settings.ts";
 * const config = resolveScopeConfig(parseSettings({ downloadDelayMs: 100, jitter: 0 }), "example.com");
 * const m = new ThrottlingScopeManager({ scope: "example.com", config, random: () => 0.5 });
 * m.recordSent(0);
 * console.assert(m.canSend(40) === 60);
 * ```
 */
export class ThrottlingScopeManager implements ThrottlingScopeManagerProtocol {
  readonly scope: string;
  readonly config: ResolvedScopeConfig;
  readonly #random: () => number;

  /** Configured delay; recovery goes back to it. */
  #baseDelayMs: number;
  #delayMs: number;
  #concurrency: number;
  #active = 0;
  #level = 0;
  /** Start of the quiet window that recovery is counting. */
  #quietSince = 0;
  #holdUntil = 0;
  /** When the last exponential backoff step was taken. */
  #lastStepAt = -Infinity;
  #nextSendAt = 0;
  /** A gap jitter may not shorten (a robots.txt Crawl-delay), or 0. */
  #floorMs = 0;
  #lastActivity = 0;
  // Quota of the current fixed window (NaN: no window open).
  #quotaUsed = 0;
  #quotaResetsAt = Number.NaN;
  #quotaAmountSeen = false;
  /** Rampup's arithmetic (lib/_rampup.ts), when the scope ramps up. */
  #ramp: RampupController | undefined;

  constructor(options: ScopeManagerOptions) {
    this.scope = options.scope;
    this.config = options.config;
    this.#random = options.random;
    this.#baseDelayMs = options.config.delayMs;
    this.#delayMs = options.config.delayMs;
    this.#concurrency = options.config.concurrency;
    if (options.config.rampup !== undefined) this.enableRampup(options.config.rampup);
  }

  /**
   * Turn rampup on (the `rampup` operator does this for scopes it sees). The
   * scope then starts over from `minConcurrency`; requests in flight finish.
   * Already ramping: the new options apply from the next window, and what was
   * learned is kept.
   *
   * @param rampup Rampup options with defaults filled in.
   */
  enableRampup(rampup: ResolvedRampup): void {
    const c = this.config;
    const limits = {
      minConcurrency: c.minConcurrency,
      maxConcurrency: c.maxConcurrency,
      maxDelayMs: c.backoff.maxDelayMs,
      windowMs: c.backoff.windowMs,
      triggerCodes: c.backoff.httpCodes,
    };
    if (this.#ramp !== undefined) {
      this.#ramp.config = rampup;
      return;
    }
    this.#ramp = new RampupController(rampup, limits);
    this.#concurrency = c.minConcurrency;
  }

  /** Whether any request sent so far gave an amount for this scope (quota scopes warn when none does). */
  get quotaAmountSeen(): boolean {
    return this.#quotaAmountSeen;
  }

  /** Whether rampup is probing this scope. */
  get rampup(): boolean {
    return this.#ramp !== undefined;
  }

  canSend(now: number, amount?: number): number {
    if (this.#active >= this.#concurrency) return Infinity;
    let wait = this.#holdUntil - now;
    const delayWait = this.#nextSendAt - now;
    if (delayWait > wait) wait = delayWait;
    if (amount !== undefined && amount > 0 && this.config.quota !== undefined) {
      const quotaWait = this.#quotaWait(now, amount, this.config.quota);
      if (quotaWait > wait) wait = quotaWait;
    }
    return wait > 0 ? wait : 0;
  }

  recordSent(now: number, amount?: number): void {
    this.#active++;
    this.#lastActivity = now;
    this.#ramp?.onSent(now);
    const delay = this.#delayMs;
    if (delay > 0) {
      const gap = this.#jittered(delay);
      this.#nextSendAt = now + (gap < this.#floorMs ? this.#floorMs : gap);
    } else {
      this.#nextSendAt = now + this.#floorMs;
    }
    if (amount !== undefined) this.#quotaAmountSeen = true;
    if (amount !== undefined && amount > 0 && this.config.quota !== undefined) {
      if (Number.isNaN(this.#quotaResetsAt) || now >= this.#quotaResetsAt) {
        this.#quotaResetsAt = now + this.config.windowMs;
        this.#quotaUsed = 0;
      }
      this.#quotaUsed += amount;
    }
  }

  recordDone(now: number, result?: DoneInfo): void {
    if (this.#active > 0) this.#active--;
    this.#lastActivity = now;
    this.#ramp?.onDone(now, result);
  }

  recordBackoff(now: number, signal: BackoffSignal = {}): void {
    const b = this.config.backoff;
    this.#lastActivity = now;
    if (signal.holdMs !== undefined && signal.holdMs > 0) {
      const hold = signal.uncapped === true ? signal.holdMs : Math.min(signal.holdMs, b.maxDelayMs);
      if (now + hold > this.#holdUntil) this.#holdUntil = now + hold;
    }
    if (this.#ramp !== undefined && this.#level === 0) {
      // Rampup's cut of the achieved rate replaces the exponential step
      // (lib/_rampup.ts); a tolerated trigger only holds.
      const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
      if (this.#ramp.onTrigger(now, knobs, this.#active) !== undefined) {
        this.#delayMs = knobs.delayMs;
        this.#concurrency = knobs.concurrency;
        const next = now + this.#jittered(this.#delayMs);
        if (next > this.#nextSendAt) this.#nextSendAt = next;
      }
      return;
    }
    if (b.windowMs === 0) return; // instant recovery: only the hold remains
    // A request sent before the last step was already on its way when the
    // scope slowed down: its 429 reports the same overload, not a new one (as
    // TCP cuts its window once per loss event, not once per lost segment).
    if (signal.sentAt !== undefined && signal.sentAt < this.#lastStepAt) return;
    this.#delayMs = Math.min(b.maxDelayMs, Math.max(b.minDelayMs, this.#delayMs * b.delayFactor));
    this.#level++;
    this.#quietSince = now;
    this.#lastStepAt = now;
    // The next send was timed with the old delay when the last request went
    // out; without this a request slips through right after a 429.
    const next = now + this.#jittered(this.#delayMs);
    if (next > this.#nextSendAt) this.#nextSendAt = next;
  }

  reconcileQuota(now: number, r: QuotaReconciliation): void {
    const quota = this.config.quota;
    if (quota === undefined) return;
    if (Number.isNaN(this.#quotaResetsAt) || now >= this.#quotaResetsAt) {
      this.#quotaResetsAt = now + this.config.windowMs;
      this.#quotaUsed = 0;
    }
    if (r.remaining !== undefined && Number.isFinite(r.remaining)) {
      this.#quotaUsed = Math.max(0, quota - r.remaining);
    } else if (r.consumed !== undefined && Number.isFinite(r.consumed)) {
      this.#quotaUsed = Math.max(0, this.#quotaUsed + r.consumed);
    }
  }

  setBaseDelay(delayMs: number, options?: BaseDelayOptions): void {
    const wasAtBase = this.#level === 0;
    this.#baseDelayMs = delayMs;
    this.#floorMs = options?.floor === true ? delayMs : 0;
    if (wasAtBase || this.#delayMs < delayMs) this.#delayMs = delayMs;
  }

  setConcurrency(concurrency: number): void {
    this.#concurrency = Math.max(1, concurrency);
  }

  isIdle(now: number, maxIdleMs: number): boolean {
    return this.#active === 0 && this.#level === 0 && this.#holdUntil <= now &&
      now - this.#lastActivity >= maxIdleMs;
  }

  nextWakeAt(now: number): number | undefined {
    let at = Infinity;
    if (this.#level > 0) at = this.#quietSince + this.config.backoff.windowMs;
    const ramp = this.#ramp;
    if (ramp !== undefined) {
      if (ramp.hasPending) return now;
      const end = ramp.nextWakeAt();
      if (end !== undefined && end < at) at = end;
    }
    if (this.#holdUntil > now && this.#holdUntil < at) at = this.#holdUntil;
    return at === Infinity ? undefined : Math.max(at, now);
  }

  advance(now: number): readonly ScopeStep[] {
    const window = this.config.backoff.windowMs;
    if (this.#level === 0 && this.#ramp === undefined) return NO_STEPS;
    const steps: ScopeStep[] = [];
    while (this.#level > 0 && window > 0 && now >= this.#quietSince + window) {
      this.#quietSince += window;
      this.#level--;
      this.#delayMs = this.#level === 0
        ? this.#baseDelayMs
        : Math.max(this.#baseDelayMs, this.#delayMs / this.config.backoff.delayFactor);
      steps.push({ kind: "recovery", delayMs: this.#delayMs, level: this.#level });
    }
    if (this.#ramp !== undefined && this.#level === 0) {
      const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
      this.#ramp.advance(now, knobs, steps);
      this.#delayMs = knobs.delayMs;
      this.#concurrency = knobs.concurrency;
    }
    return steps.length === 0 ? NO_STEPS : steps;
  }

  state(now: number): ScopeState {
    const quota = this.config.quota;
    const windowOpen = !Number.isNaN(this.#quotaResetsAt) && now < this.#quotaResetsAt;
    return {
      scope: this.scope,
      delayMs: this.#delayMs,
      baseDelayMs: this.#baseDelayMs,
      concurrency: this.#concurrency,
      active: this.#active,
      backoffLevel: this.#level,
      holdUntil: this.#holdUntil > now ? this.#holdUntil : 0,
      nextSendAt: this.#nextSendAt > now ? this.#nextSendAt : 0,
      quota: quota === undefined ? undefined : {
        limit: quota,
        used: windowOpen ? this.#quotaUsed : 0,
        resetsAt: windowOpen ? this.#quotaResetsAt : 0,
      },
      rampup: this.#ramp !== undefined,
    };
  }

  #quotaWait(now: number, amount: number, quota: number): number {
    if (Number.isNaN(this.#quotaResetsAt) || now >= this.#quotaResetsAt) return 0;
    // An oversized request still goes through an empty window, or it would wait forever.
    if (this.#quotaUsed > 0 && this.#quotaUsed + amount > quota) return this.#quotaResetsAt - now;
    return 0;
  }

  #jittered(delay: number): number {
    const [lo, hi] = this.#level > 0 ? this.config.backoff.jitter : this.config.jitter;
    if (lo === 0 && hi === 0) return delay;
    return delay * (1 + lo + (hi - lo) * this.#random());
  }
}

const NO_STEPS: readonly ScopeStep[] = [];
