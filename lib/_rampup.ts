/**
 * The arithmetic of rampup for one scope, pure and clock-free (`now` is passed
 * in). `ThrottlingScopeManager` owns the delay and the concurrency; this
 * controller tells it how to move them.
 *
 * Two phases, like TCP:
 * - **slow start** (until the scope's first trigger): the reference's steps.
 *   Each window with fewer triggers than the target's low bound multiplies
 *   the delay by `delayFactor` down to `minDelayMs` (snapping to it within
 *   1 ms), then raises concurrency by one up to `maxConcurrency`.
 * - **avoidance** (from the first trigger on; our refinement, see
 *   docs/RAMPUP.md): the scope is paced by a rate (`delay = 1000 / rate`). A
 *   trigger cuts the rate the scope was actually achieving (sends and
 *   admitted responses over the last window) by {@link CUT_FACTOR}, or halves
 *   the send rate when most sends bounced; the first trigger goes back to
 *   the last quiet window's rate when there was one. A quiet window closes
 *   half the gap to the rate of the last cut, then probes beyond it with
 *   increments that grow while windows stay quiet.
 *   Concurrency follows the rate by Little's law (rate x latency).
 *
 * @module
 */
import { parseSettings, type RampupConfig, type ResolvedRampup } from "./settings.ts";
import type { DoneInfo, ScopeStep } from "./scope_manager_protocol.ts";

/** What a step moves: the manager's delay and concurrency. */
export interface RampKnobs {
  delayMs: number;
  concurrency: number;
}

/** Limits rampup stays within (from the scope's configuration). */
export interface RampLimits {
  readonly minConcurrency: number;
  readonly maxConcurrency: number;
  /** The slowest pace a cut may reach (the backoff max delay). */
  readonly maxDelayMs: number;
  /** BACKOFF_WINDOW: the period over which triggers are counted. */
  readonly windowMs: number;
  /** Statuses that are triggers (not admitted responses). */
  readonly triggerCodes: readonly number[];
}

/** A trigger after the scope's first cuts the achieved rate to this fraction. */
export const CUT_FACTOR = 0.9;
/** The first trigger, with no quiet window to fall back to, halves the send rate (TCP's slow-start exit). */
export const SLOW_START_EXIT_FACTOR = 0.5;
/** The smallest increment of a quiet window, as a fraction of the rate after the last cut. */
export const INCREMENT_FRACTION = 0.05;
/** Below the rate of the last cut, a quiet window closes this share of the gap to it. */
export const APPROACH_SHARE = 0.5;
/** A trigger while fewer than this share of recent sends were admitted is a heavy loss: the rate is halved. */
export const HEAVY_LOSS_ADMITTED = 0.75;
/** A window only steps up when it sent at least this share of what the pace allowed (else demand, not the site, was the limit). */
export const BUSY_SHARE = 0.75;
/** Weight of the newest latency in the moving average. */
const LATENCY_WEIGHT = 0.2;

/** Times of recent events, oldest first, pruned to one window. */
class TimeRing {
  #times: number[] = [];
  #head = 0;
  push(t: number): void {
    this.#times.push(t);
  }
  prune(before: number): void {
    while (this.#head < this.#times.length && this.#times[this.#head]! < before) this.#head++;
    if (this.#head > 64 && this.#head * 2 > this.#times.length) {
      this.#times = this.#times.slice(this.#head);
      this.#head = 0;
    }
  }
  countSince(from: number): number {
    let n = 0;
    for (let i = this.#times.length - 1; i >= this.#head && this.#times[i]! >= from; i--) n++;
    return n;
  }
}

/** Rates measured over the recent past, in requests per second. */
export interface Measured {
  readonly sendRate: number;
  readonly admittedRate: number;
  readonly horizonMs: number;
}

/**
 * One scope's rampup state. Every method takes `now`; nothing reads a clock.
 * @internal
 */
export class RampupController {
  /** Rampup options; replaceable, applying from the next window. */
  config: ResolvedRampup;
  readonly limits: RampLimits;
  phase: "slow-start" | "avoidance" = "slow-start";
  /** The paced rate in avoidance (requests/s). */
  rate = Number.NaN;
  /** Requests/s added by the next quiet window (avoidance). */
  #increment = 0;
  #quietSteps = 0;
  /** The achieved rate at the last cut: the best estimate of the site's limit. */
  #lastMax = Number.NaN;
  /** The send rate of the last busy window without a trigger (slow start). */
  #knownGoodRate = Number.NaN;
  #windowStart = Number.NaN;
  #triggers = 0;
  #sends = 0;
  #firstSendAt = Number.NaN;
  #latencyMs = Number.NaN;
  /** Requests in flight when the rate was last cut: their triggers say nothing about the new rate. */
  #staleOutstanding = 0;
  readonly #sent = new TimeRing();
  readonly #admitted = new TimeRing();
  /** Steps taken on a trigger, reported by the next `advance`. */
  #pending: ScopeStep[] = [];

  constructor(config: ResolvedRampup, limits: RampLimits) {
    this.config = config;
    this.limits = limits;
  }

  /** Moving average of admitted responses' latency (NaN until one is seen). */
  get latencyMs(): number {
    return this.#latencyMs;
  }

  onSent(now: number): void {
    if (Number.isNaN(this.#windowStart)) this.#windowStart = now;
    if (Number.isNaN(this.#firstSendAt)) this.#firstSendAt = now;
    this.#sends++;
    this.#sent.push(now);
    this.#sent.prune(now - this.limits.windowMs);
  }

  onDone(now: number, result: DoneInfo | undefined): void {
    if (this.#staleOutstanding > 0) this.#staleOutstanding--;
    if (result === undefined || result.status === undefined) return;
    if (this.limits.triggerCodes.includes(result.status)) return;
    this.#admitted.push(now);
    this.#admitted.prune(now - this.limits.windowMs);
    const l = result.latencyMs;
    if (Number.isFinite(l) && l >= 0) {
      this.#latencyMs = Number.isNaN(this.#latencyMs)
        ? l
        : this.#latencyMs + LATENCY_WEIGHT * (l - this.#latencyMs);
    }
  }

  /** The send and admitted rates over the last window (or since the first send, when shorter). */
  measure(now: number): Measured {
    const window = this.limits.windowMs;
    const from = Math.max(this.#firstSendAt, now - window);
    const floor = Number.isNaN(this.#latencyMs) ? 1 : Math.max(1, this.#latencyMs);
    const horizonMs = Math.max(now - from, floor);
    return {
      sendRate: (this.#sent.countSince(from) * 1000) / horizonMs,
      admittedRate: (this.#admitted.countSince(from) * 1000) / horizonMs,
      horizonMs,
    };
  }

  /**
   * A trigger at `now`, with `active` requests in flight (the trigger's own
   * included). Moves `knobs` when the trigger cuts; returns what happened, or
   * `undefined` when the trigger was tolerated.
   */
  onTrigger(now: number, knobs: RampKnobs, active: number): string | undefined {
    if (this.limits.windowMs === 0) return undefined; // no windows: nothing to learn (instant recovery)
    if (Number.isNaN(this.#windowStart)) this.#windowStart = now;
    this.#triggers++;
    if (this.#triggers < this.config.backoffTarget[0]) return undefined; // rampup asked for this many
    if (this.#staleOutstanding > 0) return undefined; // sent before the last cut: already answered for
    const m = this.measure(now);
    let why: string;
    let next: number;
    if (this.phase === "slow-start") {
      this.phase = "avoidance";
      if (Number.isFinite(this.#knownGoodRate) && this.#knownGoodRate > 0) {
        next = this.#knownGoodRate;
        why = `first trigger: back to the last quiet window's rate ${fmt(next)}/s`;
      } else {
        const seen = `sent ${fmt(m.sendRate)}/s, admitted ${fmt(m.admittedRate)}/s`;
        if (m.admittedRate < HEAVY_LOSS_ADMITTED * m.sendRate) {
          next = SLOW_START_EXIT_FACTOR * m.sendRate;
          why = `first trigger with heavy loss: half the send rate (${seen})`;
        } else {
          const achieved = Math.min(m.sendRate, m.admittedRate);
          next = CUT_FACTOR * achieved;
          why = `first trigger: ${CUT_FACTOR} x achieved ${fmt(achieved)}/s (${seen})`;
        }
      }
    } else {
      const achieved = Math.min(this.rate, m.sendRate, m.admittedRate);
      const seen = `sent ${fmt(m.sendRate)}/s, admitted ${fmt(m.admittedRate)}/s`;
      if (m.admittedRate < HEAVY_LOSS_ADMITTED * m.sendRate) {
        // Most of what was sent bounced: far above the limit, and the admitted
        // rate of a short past is inflated by the site's burst.
        next = Math.min(CUT_FACTOR * achieved, SLOW_START_EXIT_FACTOR * this.rate);
        why = `trigger with heavy loss (${seen}): rate cut to ${fmt(next)}/s`;
      } else {
        next = CUT_FACTOR * achieved;
        why = `trigger: ${CUT_FACTOR} x achieved ${fmt(achieved)}/s (${seen})`;
      }
      this.#lastMax = achieved;
    }
    this.#setRate(next, knobs, true);
    this.#increment = Math.max(INCREMENT_FRACTION * this.rate, 1000 / this.limits.maxDelayMs);
    this.#quietSteps = 0;
    this.#staleOutstanding = active;
    this.#pending.push({
      kind: "rampup",
      delayMs: knobs.delayMs,
      concurrency: knobs.concurrency,
      why,
    });
    return why;
  }

  /** When the current window ends, or `undefined` while none is open. */
  nextWakeAt(): number | undefined {
    if (this.limits.windowMs === 0 || Number.isNaN(this.#windowStart)) return undefined;
    return this.#windowStart + this.limits.windowMs;
  }

  /** Whether a trigger-time step waits to be reported. */
  get hasPending(): boolean {
    return this.#pending.length > 0;
  }

  /**
   * Close the window if it has ended: one step up when it saw traffic and
   * fewer triggers than the target's low bound. After an idle gap the
   * skipped windows are not taken as a burst of steps.
   */
  advance(now: number, knobs: RampKnobs, steps: ScopeStep[]): void {
    if (this.#pending.length > 0) {
      for (const s of this.#pending) steps.push(s);
      this.#pending = [];
    }
    const window = this.limits.windowMs;
    if (window === 0 || Number.isNaN(this.#windowStart) || now < this.#windowStart + window) return;
    const triggers = this.#triggers;
    const sends = this.#sends;
    this.#triggers = 0;
    this.#sends = 0;
    const elapsed = Math.floor((now - this.#windowStart) / window);
    this.#windowStart = elapsed > 1 ? Number.NaN : this.#windowStart + window;
    if (sends === 0) return;
    const [lo, hi] = this.config.backoffTarget;
    if (triggers >= lo) {
      if (triggers <= hi && triggers > 0) this.#quietSteps = 0;
      return; // at or above the target: hold (backoff already cut on the triggers above it)
    }
    if (this.phase === "slow-start") {
      if (triggers === 0) this.#knownGoodRate = (sends * 1000) / window;
      steps.push(this.#slowStartStep(knobs));
      return;
    }
    // Avoidance: only a window that used its pace says the pace is safe.
    const allowed = (this.rate * window) / 1000;
    if (sends < BUSY_SHARE * allowed) return;
    const before = this.rate;
    let add: number;
    if (Number.isFinite(this.#lastMax) && before < this.#lastMax) {
      // Back toward the rate of the last cut quickly, then slowly near it.
      add = Math.max(this.#increment / 2, APPROACH_SHARE * (this.#lastMax - before));
    } else {
      // Beyond it: probe with increments that grow while windows stay quiet.
      this.#quietSteps++;
      add = this.#increment * this.#quietSteps;
    }
    this.#setRate(before + add, knobs, false);
    steps.push({
      kind: "rampup",
      delayMs: knobs.delayMs,
      concurrency: knobs.concurrency,
      why: `below target (${triggers} trigger${triggers === 1 ? "" : "s"} in window): rate ${
        fmt(before)
      }/s + ${fmt(add)} = ${fmt(this.rate)}/s`,
    });
  }

  #slowStartStep(knobs: RampKnobs): ScopeStep {
    const c = this.config;
    if (knobs.delayMs > c.minDelayMs) {
      let next = knobs.delayMs * c.delayFactor;
      if (next - c.minDelayMs < 1) next = c.minDelayMs;
      knobs.delayMs = next;
      return {
        kind: "rampup",
        delayMs: next,
        concurrency: knobs.concurrency,
        why: "below target: lower delay",
      };
    }
    if (knobs.concurrency < this.limits.maxConcurrency) {
      knobs.concurrency++;
      return {
        kind: "rampup",
        delayMs: knobs.delayMs,
        concurrency: knobs.concurrency,
        why: "below target: raise concurrency",
      };
    }
    return {
      kind: "rampup",
      delayMs: knobs.delayMs,
      concurrency: knobs.concurrency,
      why: "at maximum",
    };
  }

  #setRate(rate: number, knobs: RampKnobs, cut: boolean): void {
    const l = this.limits;
    const minRate = 1000 / l.maxDelayMs;
    const maxRate = this.config.minDelayMs > 0 ? 1000 / this.config.minDelayMs : Infinity;
    const r = Math.min(
      maxRate,
      Math.max(minRate, Number.isFinite(rate) && rate > 0 ? rate : minRate),
    );
    this.rate = r;
    knobs.delayMs = r === Infinity ? 0 : 1000 / r;
    if (Number.isNaN(this.#latencyMs)) {
      if (cut) knobs.concurrency = Math.max(l.minConcurrency, Math.floor(knobs.concurrency / 2));
      return;
    }
    // Little's law: enough in flight for the pace to bind, one spare.
    const needed = Math.ceil((r * this.#latencyMs) / 1000) + 1;
    knobs.concurrency = Math.min(l.maxConcurrency, Math.max(l.minConcurrency, needed));
  }
}

function fmt(rate: number): string {
  return rate === Infinity ? "unlimited" : String(Math.round(rate * 100) / 100);
}

/**
 * Rampup options as a user writes them (`true` or a partial object), checked
 * and filled in from `base` (the settings' `rampup`).
 *
 * @throws {TypeError | RangeError} naming the option, as settings do.
 */
export function resolveRampupOption(
  base: ResolvedRampup,
  input: RampupConfig | true,
): ResolvedRampup {
  if (input === true) return base;
  parseSettings({ rampup: input }, "rampup"); // validates; throws naming the field
  const t = input.backoffTarget;
  return {
    backoffTarget: t === undefined
      ? base.backoffTarget
      : typeof t === "number"
      ? [t, t]
      : [t[0], t[1]],
    delayFactor: input.delayFactor ?? base.delayFactor,
    minDelayMs: input.minDelayMs ?? base.minDelayMs,
  };
}
