/**
 * The arithmetic of adaptive limits for one scope, pure and clock-free (`now`
 * is passed in). `ThrottlingScopeManager` owns the delay and the concurrency;
 * this controller tells it how to move them. It serves two modes:
 *
 * - **rampup** (the reference's Rampup, opted into): the scope starts at
 *   `minConcurrency` and probes upwards, past its configuration, up to
 *   `rampup.minDelayMs` and `CONCURRENT_REQUESTS`.
 * - **adaptive** (the default for domain and IP scopes): the scope starts at
 *   its configuration and only ever slows below it; the controller is made at
 *   the scope's first trigger and finds the site's limit instead of taking
 *   exponential steps with a minute per recovery step.
 *
 * What it learns, from each refusal and each admitted answer (docs/RAMPUP.md):
 * - a **concurrency cap**: refusals only of requests sent with more than `k`
 *   in flight, and admits below, mean "k at once": concurrency `k`, no delay;
 *   a refusal with `k` or fewer in flight refutes it;
 * - a **rate**: bounds `lo` (a rate held for a round without a refusal) and
 *   `hi` (a rate that was refused), bisected until they meet, with a direct
 *   estimate of the rate the site admitted while the scope pressed against it;
 * - a **window** (refusals in a block, whatever the pace): probes spaced
 *   further and further apart until one is admitted, then the pace of one
 *   window's admits over the window's length;
 * - a **quota told by holds**: a server that holds the scope (Retry-After
 *   longer than a second) for most of the time between one hold's end and
 *   the next has a window; what it admitted in between is its quota per that
 *   time (`quota`, which the manager keeps as the scope's learned quota),
 *   and the pace is not cut.
 * Rounds are short (a few round trips or a few sends) while learning; once
 * `lo` and `hi` meet the scope probes above its rate once per
 * `BACKOFF_WINDOW`, so about the target number of refusals per window.
 *
 * Size: one controller whose rules (slow start, caps, rates, blocks, windows,
 * quotas told by holds, probing) read and write the same state; split, that
 * state would be spread over files. docs/RAMPUP.md walks through it.
 *
 * @module
 */
import {
  parseSettings,
  type RampupConfig,
  type ResolvedRampup,
  resolveRampup,
} from "../settings/settings.ts";
import type { DoneInfo, ScopeStep } from "./scope_manager_protocol.ts";
import { admitted } from "./_admitted.ts";
import { SAME_INSTANT_MS, SendLog } from "./_send_log.ts";
import { ANNOUNCED_SPREAD, EARLY_IN_ROW, type ToldQuota } from "./_announced_window.ts";

/** What a step moves: the manager's delay and concurrency. */
export interface RampKnobs {
  delayMs: number;
  concurrency: number;
}

/** Limits the controller stays within (from the scope's configuration). */
export interface RampLimits {
  /** `"rampup"` probes past the configuration; `"adaptive"` never goes faster than it. */
  readonly mode: "rampup" | "adaptive";
  readonly minConcurrency: number;
  readonly maxConcurrency: number;
  /** The shortest delay (the configured delay, or rampup's `minDelayMs`). */
  readonly minDelayMs: number;
  /** The slowest pace a cut may reach (the backoff max delay). */
  readonly maxDelayMs: number;
  /** BACKOFF_WINDOW: the period of probing once the limit is found. */
  readonly windowMs: number;
  /** Statuses that are triggers (not admitted responses). */
  readonly triggerCodes: readonly number[];
  /** An ordinary step for a trigger with nothing to measure (`delayScope`): the backoff's. */
  readonly stepMinDelayMs: number;
  readonly stepFactor: number;
}

/** What an adaptive scope saw before its first trigger. */
export interface ScopeHistory {
  readonly admittedUpTo: number;
  readonly admits: number;
  readonly firstSentAt: number;
  /** The last sends with their in-flight counts. */
  readonly sends?: SendLog | undefined;
}

/** Cut below a refused rate when nothing better is known. */
export const CUT_FACTOR = 0.5;
/** Pace at this share of a measured admitted rate (a little under the limit). */
export const ESTIMATE_SHARE = 0.95;
/** `lo` and `hi` this close (relative) are the limit found. */
export const CONVERGED = 0.03;
/** `lo` and `hi` this close are the limit found when a refusal costs a long hold. */
const CONVERGED_COSTLY = 0.1;
/**
 * A `Retry-After` of one whole second: a hold this long makes a refusal
 * costly, and one no longer is what a spacer or a bucket says as often as a
 * window (so it tells no quota).
 */
const SECOND_HOLD_MS = 1_000;
/** Holds this close to SECOND_HOLD_MS are one second long (a real clock's reading of it). */
const HOLD_FUZZ_MS = 50;
/**
 * A refusal budget: where more than this share of a scope's answers were
 * refusals, the last steps of a search toward a refused pace wait (see
 * `#overRefusalBudget`), as the issue's bound on refusals is 5%.
 */
const REFUSED_BUDGET = 0.04;
/**
 * The last steps of a search: from this share of a refused pace up (the
 * defaults; `FINE_STEPS_RAMPUP` with rampup, whose target is 0.9 of a site's
 * rate, not 0.8).
 */
const FINE_STEPS = 0.9;
const FINE_STEPS_RAMPUP = 0.95;
/** Once converged, a probe above the rate is this much higher. */
export const PROBE_STEP = 0.03;
/**
 * Probes that no refusal answered double their step, up to this; up to half
 * of it when a refusal costs a long hold (see `#probeDue`).
 */
const MAX_PROBE_STEP = 0.5;
/**
 * A quiet round at a rate that only a first refusal said was too fast (its
 * pace, read from a few sends, said little) climbs by this factor; by
 * CLIMB_COSTLY when a refusal costs a long hold. (Climbing so after a quota
 * told by holds was left: README pipeline against a constant `Retry-After`
 * 0.78 → 0.74, zoo misses 547 → 555.)
 */
const CLIMB = 1.5;
const CLIMB_COSTLY = 1.25;
/**
 * A guessed upper bound reached quietly bisects on toward the pace the
 * refusal behind the guess was sent at when that pace is less than this
 * many times the rate reached (a climb past it on a bucket's saved burst was
 * refused there every cycle); a pace further off said little (a first,
 * unpaced one), and the climb goes on.
 */
const GUESS_NEAR_REFUSED = 2;
/** Probing above a limit that holds backs off to once per this many windows at most. */
const MAX_PROBE_WINDOWS = 32;
/** The shortest round while learning. */
export const MIN_ROUND_MS = 200;
/** Sends per round at the current pace. */
const ROUND_SENDS = 4;
/**
 * A paced scope refused this often with two requests in flight, never with
 * one, and never admitted with two, after at least `CAP_ONE_ADMITS` admits
 * alone (and slower than one at a time would go), reads as a concurrency cap
 * of one. Two admits are enough: where refusals bring holds, each one more
 * asked for cost a hold (a cap of one at 80-110 ms with 1-2 s holds was
 * found at its third refusal, 0.54-0.68 of its rate; 0.65-0.79 at its
 * second). A strict spacer slower than its round trips read so is refuted
 * by its next refusal with one in flight (a 9.5/s spacer at 86 ms, 2 s
 * holds: 0.85 -> 0.79).
 */
const CAP_ONE_REFUSALS = 2;
const CAP_ONE_ADMITS = 2;
/** Round trips per round. */
export const ROUND_TRIPS = 3;
/** The first probe in a block of refusals waits this long (or two round trips). */
const FIRST_PROBE_MS = 250;
/** Each further probe in the block waits this much longer. */
const PROBE_GROWTH = 1.5;
/** Window lengths people configure, in ms: a block's probes go just after their resets. */
const ROUND_WINDOWS_MS = [1, 2, 3, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600].map((s) =>
  s * 1000
);
/** How far after a round reset its probe goes (the site's clock and the way there). */
const RESET_MARGIN_MS = 20;
/** A window per clock second (see `#clockWindow`): its length, ms. */
const CLOCK_WINDOW_MS = 1_000;
/** Clock seconds in a row whose first refusal came after as many admits. */
const CLOCK_ROW = 3;
/** The fewest admits per second read as such a window. */
const CLOCK_MIN_ADMITS = 3;
/** A round reset is waited for when it comes within this many of the probe's own wait. */
const ROUND_RESET_REACH = 3;
/**
 * A block this long that ended at a round reset, then one admit and a
 * refusal: a sliding-window counter (paced at the window's rate), not a slow
 * bucket's refill, which a block of a second or a few tells just as well.
 */
const COUNTER_MIN_WINDOW_MS = 2_000;
/** Weight of the newest latency in the moving average. */
export const LATENCY_WEIGHT = 0.2;
/**
 * A refusal within this many sends of a new pace is a strict spacer's (a
 * bucket's saved burst hides a pace above its rate for longer).
 */
const STRICT_SENDS = 4;
/**
 * A refusal at the first sends of a pace with no quiet pace known cuts to a
 * quarter while the pace is this far above the rate admitted since the first
 * send, held time left out (see `onTrigger`).
 */
const QUARTER_ABOVE = 2;
/**
 * Sends on their way at a bucket's first cut that say what it refills (see
 * `#checkInFlight`; 3: zoo misses 445, 4: 444, 6: 451, none: 466).
 */
const IN_FLIGHT_MIN_SENDS = 4;
/** Their rate lowers the cut when under this share of it (0.65 to 0.9: the same misses). */
const IN_FLIGHT_BELOW = 0.8;
/**
 * Where a first refusal costs a hold of a second or more and the cut would
 * pace it above twice this (its pace was read from a few sends: two at one
 * instant over a short round trip read as hundreds a second), the search
 * starts at this pace and climbs from below: most limits a crawler meets
 * allow it, and a search from above costs a hold per halving (a 10/s
 * spacer at 5 ms answering `Retry-After: 2`: seven holds, 0.62; four and
 * 0.75 now). Virtual time, 200 pages, 2-10/s sites answering `Retry-After`
 * of 1, 2 or 5 s or their wait, four shapes, three latencies: mean
 * efficiency 0.758 → 0.778 (defaults), 0.764 → 0.776 (rampup); the drawn
 * zoo the same or up to +0.005, issue 11's shapes 0.874 → 0.881. (4/s:
 * 0.782 on those sites but worse elsewhere; 16/s: 0.772; from below at any
 * cut above it, not only above twice it: the same sweep, a 16/s spacer at
 * 80 ms 0.79 → 0.74.)
 */
const FROM_BELOW_RATE = 8;
/**
 * Climbing from below, each quiet round goes this much faster (2: the same
 * sweep, one more hold at a 12/s spacer).
 */
const FROM_BELOW_CLIMB = 1.5;
/**
 * A cut to an episode's estimate goes no lower than this share of the last
 * pace a round passed quiet at (see `onTrigger`).
 */
const QUIET_FLOOR = 0.7;
/** A climb from a long block quiet at this many times the rate it began at begins a new episode. */
const CLIMB_NEW_EPISODE = 4;
/** Admits a period needs before its block is read as a window. */
const WINDOW_MIN_ADMITS = 3;
/** A window's estimated rate may be this much too low: bisection may climb that far above it. */
const WINDOW_HEADROOM = 1.15;
/** Admits a cycle between two server holds needs before it says a rate. */
const CYCLE_MIN_ADMITS = 3;
/** A cycle whose hold is at least this share of it is a window's (or a burst's) pattern. */
const HELD_SHARE = 0.65;
/** A first run of admits this far above the estimated rate's share was a saved burst. */
const BURST_MIN = 4;
/**
 * The longest round a saved burst's refill time makes (see `#burstMs`): 180
 * zoo sliding-window counters without Retry-After, mean 0.43 -> 0.49 with 5 s
 * (none worse); 2 s gained more there and refused more on issue 11's shapes.
 */
const BURST_ROUND_MAX_MS = 5_000;
/**
 * Sends this close together went out at one instant (one dispatch: on a real
 * clock a loaded event loop spreads them over a millisecond or two, read as
 * hundreds a second).
 */
const BURST_INSTANT_MS = 3;
/** Sends this close after a refused one may have reached the site before it. */
const REORDER_MS = 3;
/** A send this close after a refused one may have overtaken it (see `#sentPace`). */
const OVERTAKE_MS = 8;
/**
 * Refused at the first sends of a pace this far above the last quiet one:
 * the quiet one is the limit found (see `onTrigger`). (0.06: zoo misses 476
 * → 474; 0.08: 469; 0.1: 466; 0.15: 466, 0.2: 467. Quarter steps from the
 * quiet pace instead of stopping: 473.)
 */
const FOUND_NEAR_QUIET = 0.1;
/**
 * An admitted estimate from this share of one request per round trip up to
 * one is what one in flight carries, not the site's rate (see
 * `#oneInFlightBound`; 0.5 and 0.4 with the top at 1.05 and 1.1: the same
 * sweep).
 */
const ONE_IN_FLIGHT_SHARE = 0.6;
/** A refused send on its way at a cut refutes the cut's pace when its gap is at most this much shorter (see `#refusedOnTheWay`). */
const ON_THE_WAY_MARGIN = 0.05;
/**
 * Refused near a quiet pace where a refusal costs a hold of a second or more:
 * the pace goes this far under it (2 × CONVERGED otherwise; 4 × CONVERGED:
 * the same sweep, one miss more).
 */
const NEAR_QUIET_MARGIN_COSTLY = 3 * CONVERGED;
/** A refused pace this far above a quiet one is near it (see `onTrigger`). */
const NEAR_QUIET = 0.1;
/**
 * A refused pace this far under the last quiet one is not near it: the cut
 * near a quiet pace already went under it, so a second refusal before
 * another quiet round says the quiet round was a burst's (a 2/s bucket of 2
 * with 1 s holds passed a short round at 11/s on the burst each hold
 * refilled, and every refusal after it cut 9%: seventeen refusals to 2/s).
 */
const NEAR_QUIET_BELOW = 0.08;
/** In-flight counts are tallied up to this. */
const MAX_F = 64;
/** Sends remembered for their in-flight count. */
const RING = 128;

function fmt(rate: number): string {
  return rate === Infinity ? "unlimited" : String(Math.round(rate * 100) / 100);
}

/** Admits from the first send after a server hold to the end of the next hold, that hold included. */
interface HoldCycle {
  from: number;
  admits: number;
  ms: number;
  heldMs: number;
  at: number;
  /** Whether a server hold came before the cycle (else it began at the first send). */
  afterHold: boolean;
}

/**
 * One scope's adaptive state. Every method takes `now`; nothing reads a clock.
 * @internal
 */
export class RampupController {
  /** Rampup options; replaceable, applying from the next round. */
  config: ResolvedRampup;
  readonly limits: RampLimits;
  /** `start`: no trigger yet (rampup's slow start); `learn`: from the first trigger on. */
  #phase: "start" | "learn" = "start";
  /** The paced rate (requests/s); Infinity while unpaced. */
  rate = Infinity;
  #hi = Infinity;
  #capLimit = Infinity;
  #capRefuted = false;
  /**
   * A cap read low at its refused send `#capSentAt` may be up to this (one
   * less than was in flight): the first quiet round reads it again.
   */
  #capUpTo = 0;
  #capSentAt = 0;
  /** Admits and refusals by in-flight count at send (capped at MAX_F). */
  readonly #admitAtF = new Uint32Array(MAX_F + 1);
  #minRefusedF = Infinity;
  /** Refusals of sends with exactly two in flight (see `CAP_ONE_REFUSALS`). */
  #refusedAtTwo = 0;
  /** The fewest in flight of a refusal on its way at a cap's cut (see `#capOnTheWay`). */
  #capWayF = Infinity;
  /** Whether a cap of one was read (then a refused probe at two goes back to one). */
  #capOne = false;
  /**
   * A first refusal that read as a cap but came with a hold long enough to
   * read as a window's (see `onTrigger`): the cap it pointed to, tried when
   * the holds turn out to tell no window (`leaveQuota`).
   */
  #capHeld:
    | { limit: number; upTo: number; sentAt: number; ms: number; from: number; at: number }
    | undefined;
  /**
   * The pace a cap tried in `leaveQuota` replaced, until the cap was full
   * in quiet rounds for as long as the holds' cycle (`ms`, from `since`).
   */
  #capTrial:
    | { rate: number; climb: boolean; ms: number; since: number; from: number }
    | undefined;
  // Sends: time and in-flight count, for the outcome's lookup.
  readonly #sends = new SendLog(RING);
  /** When the last admitted answers came. */
  readonly #admitTimes = new Float64Array(RING);
  readonly #admitStarts = new Float64Array(RING);
  /** Their in-flight counts at send (0: unknown), as `#admitAtF` counts them. */
  readonly #admitF = new Uint8Array(RING);
  #admitCount = 0;
  /** Rampup's slow start: the concurrency this round grows to, one more per admitted answer. */
  #growTo = 0;
  /** Admitted answers since the last growth step. */
  #growBy = 0;
  /** Admits before this controller was made (at the scope's first trigger). */
  #admitsBefore = 0;
  /** Refusals (triggers) this controller was told of, those in flight at a cut included. */
  #refusals = 0;
  /** Time the server held the scope since its first send (its holds told, overlaps counted once). */
  #allHeldMs = 0;
  #firstSendAt = Number.NaN;
  /** The first send this controller saw (it may be made at a scope's first trigger). */
  #firstOwnSendAt = Infinity;
  #latencyMs = Number.NaN;
  /** Sends from before this time were answered for by the last cut. */
  #lastCutAt = -Infinity;
  #lastCutWasRate = false;
  /** Refusals since the last cut with no admit of a later send: a block. */
  #blockStart = Number.NaN;
  #probeMs = 0;
  /** Since when admits count toward the window estimate. */
  #periodStart = Number.NaN;
  #periodAdmits = 0;
  /** The first refusal of the current run of rounds with refusals. */
  #episodeStart = Number.NaN;
  #episodeAdmits = 0;
  #heldMs = 0;
  // The current round.
  #roundStart = Number.NaN;
  #roundMs = MIN_ROUND_MS;
  #roundSends = 0;
  #roundTriggers = 0;
  #roundMaxActive = 0;
  /** Last time a converged scope probed above its rate. */
  #lastProbeAt = Number.NaN;
  /** Quiet time before the next probe above a found limit (see #probeDue). */
  #probeEveryMs = 0;
  /** Probes in a row that no refusal answered (see #probeDue): each goes further, sooner. */
  #probesPassed = 0;
  #targetWindowStart = -Infinity;
  #targetTriggers = 0;
  /** Sends since the rate last changed. */
  #sendsAtRate = 0;
  /** The pace of the last quiet round. */
  #lastQuiet = 0;
  /** Climbing by CLIMB per quiet round: no refused rate above is known. */
  #climb = false;
  /**
   * `#hi` came from the first refusal alone, unpaced with few admits before
   * (with rampup, sends at one instant, or a refusal that costs no hold of
   * a second or more): the pace read from a few sends over a real network
   * says little (two sends a few ms apart at the site though far apart when
   * sent), so reaching it quiet means climbing on.
   */
  #hiSoft = false;
  /**
   * An upper bound guessed from what was admitted (twice it), not a rate the
   * site refused: reached without a refusal, the climb goes on (as `#hiSoft`).
   */
  #hiGuess = Number.NaN;
  /**
   * The pace the refusal that guessed `#hiGuess` was sent at: reaching the
   * guess quietly bisects on toward it rather than climbing past it (a 10/s
   * bucket with 1 s holds climbed from a guessed 9/s to 15/s and was
   * refused there every cycle: 53 refusals where 3 sufficed).
   */
  #guessRefused = Infinity;
  /** The pace the last refusal was sent at (Infinity for a burst's). */
  #refusedPace = Infinity;
  /** Climbing from FROM_BELOW_RATE by FROM_BELOW_CLIMB: no pace was refused but a burst's. */
  #fromBelow = false;
  /** The sends on their way at a bucket's first cut, and what they got (see `#checkInFlight`). */
  #inFlightAtCut:
    | { from: number; to: number; sends: number; answered: number; admits: number }
    | undefined = undefined;
  /** The pace the last climb step went up from (quiet long enough to climb). */
  #climbedFrom = 0;
  /**
   * Rounds of one send while climbing from a rate read across a long block
   * (see `#fromBlock`): until the next cut.
   */
  #oneSendRounds = false;
  /** The rate a climb from a long block began at (0: none, or its episode already restarted). */
  #climbBase = 0;
  /**
   * The most the site admitted before its first refusal: a bucket's saved
   * burst hides a pace above its rate until it is spent, so a climb step
   * waits for sends that would spend it.
   */
  #climbBurst = 0;
  /**
   * A window quota told by the server's holds (see `onTrigger`), read and
   * cleared by the manager; a quota announced in headers or configured wins.
   */
  quota: ToldQuota | undefined;
  /** A hold the controller asks for (a probe in a block), read by the manager. */
  holdUntil = 0;
  /** Steps taken on a trigger or an answer, reported by the next `advance`. */
  #pending: Extract<ScopeStep, { kind: "rampup" }>[] = [];

  /**
   * @param config Rampup options.
   * @param limits Bounds from the scope's configuration.
   * @param before Made at a scope's first trigger: what the scope saw
   *   before it (the most in flight it had answers admitted with, its admits,
   *   its first send), so a concurrency cap and a window can be told.
   */
  constructor(config: ResolvedRampup, limits: RampLimits, before?: ScopeHistory) {
    this.config = config;
    this.limits = limits;
    if (before !== undefined) {
      if (before.admittedUpTo > 0) this.#admitAtF[Math.min(before.admittedUpTo, MAX_F)] = 1;
      if (before.admits > 0 && Number.isFinite(before.firstSentAt)) {
        this.#firstSendAt = before.firstSentAt;
        this.#periodStart = before.firstSentAt;
        this.#periodAnchor = before.firstSentAt;
        this.#periodAdmits = before.admits;
        this.#admitsBefore = before.admits;
      }
      if (before.sends !== undefined) this.#sends.copyFrom(before.sends);
      if (before.admits > 0) this.#cycleAdmits = before.admits;
      if (Number.isFinite(before.firstSentAt)) this.#cycleFirstSend = before.firstSentAt;
    }
  }

  /**
   * Whether the controller cut the scope's pace or concurrency less than a
   * window ago: like a backoff level, what it learned must not be forgotten
   * (evicted) yet.
   */
  cutRecently(now: number): boolean {
    return now - this.#lastCutAt < this.limits.windowMs;
  }

  /**
   * Still in slow start, nothing learned: no refusal, no pace, no cap (an
   * announced budget may open concurrency up to what it needs).
   */
  get starting(): boolean {
    return this.#phase === "start" && this.rate === Infinity && this.#capLimit === Infinity;
  }

  /** Whether the delay is a rate learned from the site (jitter may not shorten it). */
  get paced(): boolean {
    return this.rate !== Infinity;
  }

  /** A send at `now` with `active` requests in flight, itself included. */
  onSent(now: number, active: number): void {
    if (Number.isNaN(this.#firstSendAt)) {
      this.#firstSendAt = now;
      this.#periodStart = now;
      this.#periodAnchor = now;
      // Holds before the first send (the first refusal's, when it came
      // before any admit) are not time since it.
      this.#heldBeforeFirstSend = this.#allHeldMs;
    }
    if (Number.isNaN(this.#roundStart)) this.#openRound(now);
    if (this.#firstOwnSendAt === Infinity) this.#firstOwnSendAt = now;
    if (Number.isNaN(this.#cycleFirstSend) && now >= this.#cycleStart) this.#cycleFirstSend = now;
    this.#sends.push(now, active);
    this.#roundSends++;
    this.#sendsAtRate++;
    if (active > this.#roundMaxActive) this.#roundMaxActive = active;
  }

  /**
   * An answer to a send made between the first refused send of a bucket's
   * spent burst and the cut: once all are in, what they admitted over that
   * span is what the empty bucket refilled (its rate). Well below the cut
   * (which halves from the pace that spent the burst), the scope goes there
   * at once instead of after another round trip's worth of refusals (a 10/s
   * bucket of 25 cut from 55/s to 27.5/s: 12 refused, 9 now).
   */
  #checkInFlight(sentAt: number | undefined, admit: boolean): void {
    const c = this.#inFlightAtCut;
    if (c === undefined || sentAt === undefined || !(sentAt > c.from && sentAt <= c.to)) return;
    c.answered++;
    if (admit) c.admits++;
    if (c.answered < c.sends) return;
    this.#inFlightAtCut = undefined;
    // None admitted: a window that ran out (its block tells the rest).
    if (c.admits === 0) return;
    const r = (c.admits * 1000) / Math.max(1, c.to - c.from);
    const next = this.#clampRate(ESTIMATE_SHARE * r);
    if (!(r < this.rate * IN_FLIGHT_BELOW && next < this.rate)) return;
    this.#guessHi(2 * r);
    this.#paceLater(next, `in flight at the cut: admitted ${fmt(r)}/s: rate ${fmt(next)}/s`);
  }

  /**
   * Pace at `rate` from the next `advance`, which reports `why` and applies
   * it: read from an answer (or an answered-for refusal), not at a cut.
   */
  #paceLater(rate: number, why: string): void {
    this.rate = rate;
    this.#pending.push({
      kind: "rampup",
      delayMs: rate === Infinity ? 0 : 1000 / rate,
      concurrency: Number.NaN,
      why,
    });
    this.#needsApply = true;
  }

  /**
   * A refusal of a request sent before the last cut (answered for by it, no
   * new cut of its own), at a site that admitted no burst before its first
   * refusal (a strict spacer): sent a gap after the one before it that is no
   * shorter than the cut's pace (give or take ON_THE_WAY_MARGIN), it refutes
   * that pace, at no cost (its hold overlaps the cut's). The pace halves
   * from that gap at once instead of after another refusal and its hold (a
   * 12/s spacer with a 1 s Retry-After cut from 66/s to 33/s while a send
   * 30 ms after an admitted one was on its way and refused: four holds to
   * find its rate, three now).
   */
  #refusedOnTheWay(sentAt: number): void {
    if (!this.#lastCutWasRate || this.rate === Infinity || this.#firstAdmits > BURST_MIN) return;
    if (this.#windowRate > 0) return;
    // Sent at one instant with another: the site refused a burst, which the
    // cut already answered; the gap to an earlier send says nothing (a
    // strict spacer of 30/s at 259 ms: two sent at once at the first answer,
    // the second refused, read as "too fast at 3.86/s": 0.12 of its rate;
    // 0.28 now).
    if (this.#sends.atInstant(sentAt, BURST_INSTANT_MS) >= 2) return;
    const g = this.#gapRate(sentAt);
    // A pace that went a round without a refusal is refuted only by a gap
    // no shorter than its own: one sent at the refused pace above it, on its
    // way at the cut back to it, is the same refusal (a 16/s spacer, back
    // from 16.1/s to a quiet 15.47/s, was halved to 8.05/s by the next one).
    const margin = this.#lastQuiet > 0 && this.rate >= this.#lastQuiet ? 0 : ON_THE_WAY_MARGIN;
    if (!(g > 0 && g <= this.rate * (1 + margin))) return;
    const next = this.#clampRate(g * CUT_FACTOR);
    if (!(next < this.rate)) return;
    this.#hi = Math.min(this.#hi, g);
    this.#paceLater(next, `refused on its way at ${fmt(g)}/s: rate ${fmt(next)}/s`);
  }

  /**
   * A refusal on its way at a cap's cut, sent at `sentAt` with `f` in
   * flight, no more than the cap: the site served fewer at once than the cap
   * read. Refusals come back together, and the cap was read from the one
   * with most in flight; the others, sent with fewer, were answered for by
   * that cut. Two of four refused at a cap of 2 read as a cap of 3, and the
   * next send after the hold found it, at the cost of another hold (a cap
   * of 4 at 79 ms with 1 s holds: 0.55 of its rate; 0.78 now). Not where a
   * send a moment later, with more in flight, may have reached the site
   * first (see `REORDER_MS`).
   */
  #capOnTheWay(sentAt: number, f: number): void {
    if (this.#capRefuted || this.rate !== Infinity || this.#capLimit === Infinity) return;
    if (f < 3 || f > this.#capLimit || !(f < this.#capWayF)) return;
    if (this.#sends.pendingWithin(sentAt, sentAt + REORDER_MS) > 0) return;
    if (this.#sends.admittedWithin(sentAt, sentAt + REORDER_MS) >= f) return;
    this.#capWayF = f;
  }

  /**
   * A send in flight at the cut admitted: the site served some of them, so
   * a refusal on the way below the cap (`#capOnTheWay`) lowers it. (A
   * bucket or a window that ran out refuses all that was in flight.)
   */
  #capWayAdmitted(now: number): void {
    const f = this.#capWayF;
    this.#capWayF = Infinity;
    if (this.#capRefuted || this.rate !== Infinity || !(f - 1 < this.#capLimit)) return;
    this.#capLimit = f - 1;
    this.#capUpTo = 0;
    // A cut like any other: what was sent up to now, before the lower cap
    // applies (sends at this very instant among them), is answered for by
    // it. (Read as a refusal under the cap, one such send refuted it: a cap
    // of 5 at 20 ms was then paced at 70/s, 0.53 of its rate; 0.92 now.)
    this.#lastCutAt = now;
    this.#paceLater(Infinity, `refused on its way with ${f} in flight: concurrency cap ${f - 1}`);
  }

  /**
   * Whether the send at `sentAt`, refused now, went at the instant every free
   * slot sends when a server hold ended (see `HoldCycle`); whether others
   * went with it (a burst) is the caller's to check.
   */
  #sentAtHoldEnd(now: number, sentAt: number): boolean {
    const cyc = this.#cycle;
    return cyc !== undefined && cyc.at === now && cyc.afterHold &&
      sentAt - cyc.from <= BURST_INSTANT_MS;
  }

  /** The in-flight count of a send at `sentAt` (see `SendLog.take`). */
  #fOf(sentAt: number | undefined, refused: boolean): number | undefined {
    return sentAt === undefined ? undefined : this.#sends.take(sentAt, refused);
  }

  /** A request settled at `now` (after any trigger for it). */
  onDone(now: number, result: DoneInfo | undefined): void {
    if (!admitted(result, this.limits.triggerCodes)) return;
    const l = result.latencyMs;
    const sentAt = result.sentAt ?? (Number.isFinite(l) && l >= 0 ? now - l : undefined);
    if (sentAt !== undefined) {
      this.#latencyMs = Number.isNaN(this.#latencyMs)
        ? l
        : this.#latencyMs + LATENCY_WEIGHT * (l - this.#latencyMs);
    }
    const f = this.#fOf(sentAt, false);
    if (f !== undefined) this.#admitAtF[Math.min(f, MAX_F)]!++;
    this.#periodAdmits++;
    if (sentAt !== undefined && sentAt < this.#firstRefusedSentAt - SAME_INSTANT_MS) {
      this.#earlyAdmits++;
    }
    if (this.#phase === "start" && this.#growTo > 0) {
      this.#growBy++;
      this.#needsApply = true;
    }
    if ((sentAt ?? now) >= this.#cycleStart) this.#cycleAdmits++;
    this.#admitF[this.#admitCount % RING] = f === undefined ? 0 : Math.min(f, MAX_F);
    this.#admitStarts[this.#admitCount % RING] = sentAt ?? now;
    this.#admitTimes[this.#admitCount++ % RING] = now;
    // Counted by send: requests in flight at the first refusal were sent
    // before it (a slow start's burst), they say nothing of the rate.
    if (sentAt === undefined || sentAt > this.#episodeStart) this.#episodeAdmits++;
    this.#checkInFlight(sentAt, true);
    if (this.#capWayF !== Infinity && sentAt !== undefined && sentAt <= this.#lastCutAt) {
      this.#capWayAdmitted(now);
    }
    if (sentAt !== undefined && sentAt > this.#lastCutAt && !Number.isNaN(this.#blockStart)) {
      this.#endBlock(now, sentAt);
    }
    if (
      this.#oneInFlight &&
      (this.#oneUntilAnyAdmit || sentAt === undefined || sentAt > this.#lastCutAt)
    ) {
      this.#oneInFlight = false;
      this.#needsApply = true;
    }
  }

  /**
   * One in flight until a send after the cut is admitted (or, with
   * `anyAdmit`, any request), after a refusal under a supposed cap: a site
   * whose window ran out refuses everything the cap lets through, and a real
   * cap admits the one at once (a round trip's cost).
   */
  #oneUntilAdmit(knobs: RampKnobs, anyAdmit = false): void {
    knobs.concurrency = Math.max(1, this.limits.minConcurrency);
    this.#oneInFlight = true;
    this.#oneUntilAnyAdmit = anyAdmit;
  }

  #oneInFlight = false;
  /** Whether an admit of a request already in flight at the cut ends `#oneInFlight` too. */
  #oneUntilAnyAdmit = false;

  /**
   * A server that slows down showed its knee at `inFlight` (see
   * `_knee.ts`): while no pace was learned, that many in flight, as a
   * concurrency cap found (probed one more once per window, as caps are).
   * Returns whether the knobs changed.
   */
  kneeAt(knobs: RampKnobs, inFlight: number): boolean {
    if (this.rate !== Infinity || !(inFlight < knobs.concurrency)) return false;
    this.#phase = "learn";
    this.#capLimit = Math.max(this.limits.minConcurrency, inFlight);
    this.#apply(knobs);
    this.#report(
      knobs,
      `slower with more in flight, no more served: concurrency ${knobs.concurrency}`,
    );
    return true;
  }

  /**
   * Pace no faster than `delayMs` apart (learned elsewhere: another process
   * of a shared crawl). Returns whether the knobs changed.
   */
  adopt(knobs: RampKnobs, delayMs: number, why: string): boolean {
    const rate = this.#clampRate(1000 / delayMs);
    if (!(rate < this.rate)) return false;
    this.#phase = "learn";
    this.rate = rate;
    this.#fromBelow = false;
    if (rate < this.#hi) this.#hi = rate / (1 - CONVERGED);
    this.#apply(knobs);
    this.#report(knobs, `${why}: pace ${fmt(rate)}/s`);
    return true;
  }

  /**
   * A quota told by holds (see `onTrigger`) stayed quiet at `rate`, twice
   * the rate it was told, or (`climb`) its probe admitted half a quota more
   * half way through a window: the holds were far longer than the site's
   * window (a Retry-After that is the same whatever the time to the reset),
   * so they say nothing of it. The controller paces from `rate`, known good.
   * After a probe it climbs from there (CLIMB_COSTLY per quiet stretch long
   * enough to spend a burst as large as the first run of admits): such a
   * site's rate may be far above twice the told one (a 14/s bucket told 5
   * per 2 s). After quiet windows at half the told window it does not (each
   * climb step cost a real window a hold). Or (`reopensNone`) windows
   * begun at the holds' end were refused early, EARLY_IN_ROW in a row: the
   * site frees a slot at a time (a sliding window), and `rate` is what it
   * admitted since the quota's first window. What the scope admitted under
   * the quota was its own pace, not the site's, and starts no episode.
   * `now`: sends made from then on can refute a cap tried here. `early`:
   * the probe went as soon as the quota was spent (the refusal that told it
   * read as a cap as well).
   */
  leaveQuota(
    knobs: RampKnobs,
    rate: number,
    climb: boolean,
    reopensNone: boolean,
    now: number,
    early = false,
  ): void {
    const held = this.#capHeld;
    this.#capHeld = undefined;
    const why = reopensNone
      ? `refused early in ${EARLY_IN_ROW} windows in a row, each begun at a hold's end`
      : climb && early
      ? "more than a quota told by holds was admitted as soon as it was spent"
      : climb
      ? "half a quota more half way through a window told by holds was admitted"
      : "a quota told by holds stayed quiet at twice its rate";
    if (
      held !== undefined && !reopensNone && !this.#capRefuted && this.#capLimit === Infinity &&
      // Nothing learned since the quota's cut (a later cut supersedes it).
      this.#lastCutAt === held.at
    ) {
      // The quota came from a first refusal that read as a cap: the holds
      // may be a cap's Retry-After (a cap of 4 at 56 ms with 2 s holds was
      // paced from 18/s and climbed for the rest of the crawl: 0.35 of the
      // site's rate; 0.62 now). Unpaced at the cap, on trial: a refusal
      // under it of a send made from here on, before the cap has been full
      // in quiet rounds for a hold cycle's time, goes back to the pace
      // (`#capTrial`; a bucket's burst read so costs one hold).
      this.rate = Infinity;
      // Read again now that the answers of the run it cut are in: the most
      // the site was seen serving at once since (see `onTrigger`).
      this.#capLimit = Math.max(held.limit, Math.min(held.upTo, this.#mostServed(held.from)));
      this.#capUpTo = held.upTo;
      this.#capSentAt = held.sentAt;
      this.#capTrial = { rate, climb, ms: held.ms, since: Number.NaN, from: now };
      this.#episodeStart = Number.NaN;
      this.#apply(knobs);
      this.#report(knobs, `${why}, the holds tell no window: concurrency cap ${this.#capLimit}`);
      return;
    }
    // A sliding-window counter after its first burst admits next to nothing
    // until its window rolls, then its rate: what it admitted since the
    // quota's first window is that dead time's. What it admitted since the
    // first send, the burst included, is nearer its rate (a counter of 50
    // per 10 s met 100 ms before its window ended, held by Retry-After, was
    // paced at 0.55/s, then refused in the dead time and cut to 0.27/s:
    // 0.13 of its rate; 0.69 now).
    if (reopensNone) rate = Math.max(rate, ESTIMATE_SHARE * this.#rateSinceFirstSend(now));
    this.#paceFrom(knobs, rate, climb);
    this.#report(knobs, `${why}, the holds tell no window: pacing ${fmt(this.rate)}/s`);
  }

  /** See `leaveQuota`: paces from `rate`, known good, climbing after a probe. */
  #paceFrom(knobs: RampKnobs, rate: number, climb: boolean): void {
    this.rate = this.#clampRate(rate);
    this.#lastQuiet = this.rate;
    if (!(this.#hi > this.rate)) this.#hi = Infinity;
    this.#fromBelow = false;
    if (climb && this.#hi === Infinity) {
      this.#climb = true;
      this.#climbBurst = this.#firstAdmits;
    }
    this.#episodeStart = Number.NaN;
    this.#apply(knobs);
  }

  /** A server hold from `now` to `until` (Retry-After, an announced reset): not slow sending. */
  onHold(now: number, until: number): void {
    // A new hold after the last one ended: the end of that one, for a
    // probe refused after it (see the block branch of `onTrigger`).
    if (until > now && now >= this.#heldUntil) this.#prevHoldEnd = this.#heldUntil;
    if (until > now && !Number.isNaN(this.#blockStart)) this.#blockHeld = true;
    // Only what this hold adds to the holds already counted (they overlap:
    // every refused request in flight brings the same Retry-After).
    const from = Math.max(now, this.#heldUntil);
    if (until > from) this.#allHeldMs += until - from;
    if (until > from && !Number.isNaN(this.#episodeStart)) this.#heldMs += until - from;
    if (until > now && now >= this.#heldUntil) {
      if (!Number.isNaN(this.#episodeStart)) this.#episodeHolds++;
      // A new hold after the last one ended: a cycle from the first send
      // after that end to this hold's end, its hold included.
      this.#cycle = Number.isNaN(this.#cycleFirstSend) ? undefined : {
        from: this.#cycleFirstSend,
        admits: this.#cycleAdmits,
        ms: until - this.#cycleFirstSend,
        heldMs: until - now,
        at: now,
        afterHold: this.#cycleStart !== -Infinity,
      };
      this.#cycleAdmits = 0;
      this.#cycleFirstSend = Number.NaN;
    }
    if (until > this.#heldUntil) {
      this.#heldUntil = until;
      this.#cycleStart = until;
    }
  }

  /** How long a saved burst takes to refill at the estimated rate: rounds last as long. */
  #burstMs = 0;
  /** Server holds in the current episode (their time is `#heldMs`). */
  #episodeHolds = 0;
  /** Whether the last refusal brought a server hold of SECOND_HOLD_MS or more (within HOLD_FUZZ_MS). */
  #costlyRefusal = false;
  /** Admits before the first refusal, and the time they took. */
  #firstAdmits = 0;
  #firstSpanMs = 0;
  /**
   * Admits of sends before the first refused one (by more than an instant),
   * answered before or after it: `#firstAdmits` and the answers still on
   * their way then.
   */
  #earlyAdmits = 0;
  /** When the first refused send went (NaN: none yet). */
  #firstRefusedSentAt = Number.NaN;
  /** Admits sent since the last server hold ended. */
  #cycleAdmits = 0;
  /** The end of the last server hold: the current cycle's start. */
  #cycleStart = -Infinity;
  /** The first send of the current cycle. */
  #cycleFirstSend = Number.NaN;
  /** The length of the last window read from a block: rounds last as long. */
  #windowPeriodMs = 0;
  /** The last finished cycle: admits between two server holds, over their time, the hold included. */
  #cycle: HoldCycle | undefined;

  /**
   * A trigger at `now` for a request sent at `sentAt` (undefined for
   * `delayScope` or a direct call). Moves `knobs` when it cuts; returns what
   * happened, or `undefined` when the trigger was answered for already.
   */
  onTrigger(
    now: number,
    knobs: RampKnobs,
    sentAt: number | undefined,
    activeNow: number,
  ): string | undefined {
    const lim = this.limits;
    this.#refusals++;
    if (lim.windowMs === 0) return undefined; // instant recovery: nothing to learn, only holds
    if (Number.isNaN(this.#roundStart)) this.#openRound(now);
    // A send from before the controller existed: in flight now is the best guess.
    const f = sentAt === undefined ? undefined : this.#fOf(sentAt, true) ??
      (sentAt < this.#firstOwnSendAt ? Math.min(activeNow, MAX_F) : undefined);
    if (sentAt !== undefined) this.#discount(sentAt);
    if (sentAt !== undefined && this.#clockWindow(now, sentAt)) {
      return this.#report(
        knobs,
        `refused after ${this.#clockCount} admitted in ${CLOCK_ROW} clock seconds in a row: ` +
          `a quota of ${this.#clockCount} per second`,
      );
    }
    // Sent before (or at the instant of) the last cut: answered for by it.
    if (sentAt !== undefined && sentAt <= this.#lastCutAt) {
      this.#checkInFlight(sentAt, false);
      if (f !== undefined) this.#capOnTheWay(sentAt, f);
      this.#refusedOnTheWay(sentAt);
      return undefined;
    }
    if (sentAt !== undefined) this.#lastRefusedAt = sentAt;
    if (this.#phase === "start" && !Number.isNaN(this.#firstSendAt)) {
      // What the site admitted before its first refusal: a saved burst shows.
      this.#firstAdmits = this.#periodAdmits;
      this.#firstSpanMs = Math.max(0, (sentAt ?? now) - this.#firstSendAt);
      this.#earlyAdmits = this.#firstAdmits;
      this.#firstRefusedSentAt = sentAt ?? now;
    }
    this.#phase = "learn";
    this.#roundTriggers++;
    // (Within a real clock's fuzz: 1112.31 - 112.31 is 999.9999999999999.)
    this.#costlyRefusal = this.#heldUntil - now >= SECOND_HOLD_MS - HOLD_FUZZ_MS;
    // A target [lo, hi]: the first lo - 1 triggers of a window are tolerated (rampup asked for them).
    if (!(now < this.#targetWindowStart + lim.windowMs)) {
      this.#targetWindowStart = now;
      this.#targetTriggers = 0;
    }
    if (++this.#targetTriggers < this.config.backoffTarget[0]) return undefined;
    if (Number.isNaN(this.#episodeStart)) {
      this.#startEpisode(sentAt ?? now, 0);
    }
    if (sentAt === undefined || f === undefined) return this.#ordinaryStep(now, knobs);
    if (f < this.#minRefusedF) this.#minRefusedF = f;
    if (f === 2) this.#refusedAtTwo++;

    // A concurrency cap: refused only above k in flight.
    const trial = this.#capTrial;
    // A trial ends with the cap: once the scope is paced or the cap gone.
    if (trial !== undefined && (this.rate !== Infinity || this.#capLimit === Infinity)) {
      this.#capTrial = undefined;
    } else if (trial !== undefined && f <= this.#capLimit && !(sentAt < trial.from)) {
      // Refused under a cap tried for holds that told no window, a send
      // made since: it was the pace that kept the site quiet (a bucket's
      // burst and its refill's Retry-After read as a cap, see
      // `leaveQuota`). (Above the cap, a probe: the cap logic's.)
      this.#capTrial = undefined;
      this.#capRefuted = true;
      this.#capLimit = Infinity;
      this.#capUpTo = 0;
      this.#cut(now, false);
      this.#paceFrom(knobs, trial.rate, trial.climb);
      return this.#report(
        knobs,
        `refused with ${f} in flight under a cap tried after holds: pacing ${fmt(this.rate)}/s`,
      );
    }
    if (!this.#capRefuted) {
      if (this.#capOne && f === 2 && this.#capLimit === 2 && !this.#admitsFrom(2)) {
        // The probe of a second slot under a cap of one refused: one it is.
        this.#capLimit = 1;
        this.#cut(now, false);
        this.#apply(knobs);
        return this.#report(knobs, `refused with 2 in flight: concurrency cap 1`);
      }
      if (
        f === 2 && this.#capLimit === Infinity && this.rate !== Infinity &&
        this.#refusedAtTwo >= CAP_ONE_REFUSALS && this.#admitAtF[1]! >= CAP_ONE_ADMITS &&
        this.#minRefusedF === 2 && !this.#admitsFrom(2) &&
        // One at a time goes faster than the pace: a strict spacer paced
        // near its rate, slower than its round trips, also refuses the
        // second of two in flight (a spacer of 10/s at 120 ms: 0.88 -> 0.83).
        this.#latencyMs * this.rate < 1000
      ) {
        // Paced, yet every refusal came with a second request in flight and
        // every admit alone: a site that serves one at a time (a pace
        // emulates that only where latencies never vary: a cap of one at
        // 93 ms ± 50% was paced at 7.3/s and refused whenever an answer took
        // longer than the gap, 0.50 of its rate; 0.52 now, found late). One
        // in flight, unpaced; a refusal with one in flight refutes it (a
        // rate then, below).
        this.#capOne = true;
        this.#capLimit = 1;
        this.rate = Infinity;
        this.#cut(now, false);
        this.#apply(knobs);
        return this.#report(
          knobs,
          `refused ${this.#refusedAtTwo} times with 2 in flight, ${
            this.#admitAtF[1]
          } admitted alone: concurrency cap 1`,
        );
      }
      // Refused with one or two in flight: no cap worth keeping (a cap of one
      // is a rate's job, see below), the site limits a rate.
      if (
        f <= this.#capLimit && this.#capLimit !== Infinity &&
        (f < 3 || !this.#admitsBelow(f) || this.#servedAtOnce(now) >= this.#capLimit)
      ) {
        this.#capRefuted = true;
        this.#capLimit = Infinity;
        if (
          this.#oneInFlight && sentAt > this.#lastCutAt && this.rate === Infinity &&
          this.#firstAdmits > BURST_MIN && this.#firstSpanMs > 0
        ) {
          // The lone send after the cap's cut refused: a cap admits it at
          // once, a window or a bucket that ran out does not. Its pace (one
          // in flight over a round trip) is the scope's own, not the site's
          // (a 20 per second window at 120 ms read as 8.33/s: 0.38): a block,
          // probed until a send is admitted, at the pace of the first run.
          return this.#loneRefused(now, knobs);
        }
      } else if (
        f <= this.#capLimit && this.#capLimit !== Infinity && this.#sentAtHoldEnd(now, sentAt) &&
        this.#sends.atInstant(sentAt, BURST_INSTANT_MS) >= 2
      ) {
        // Refused under a supposed cap in the burst every free slot sent at
        // one instant when a server hold ended: a site that takes no such
        // burst (a GCRA, a small bucket) does that with any cap, so it says
        // nothing of one; it is a rate, and the burst path below paces it (a
        // bucket of 2 at 15/s, 200 ms, 1 s holds: read as a cap of 3, then 2,
        // 7.5/s, 0.63 of its rate; 0.81 now).
        this.#capRefuted = true;
        this.#capLimit = Infinity;
      } else if (f <= this.#capLimit && this.#capLimit !== Infinity) {
        // Refused again under a supposed cap: the scope has pressed on the
        // site for a round trip, so what the site served says where it is.
        let served = this.#capBelow(now, f, sentAt);
        if (served < this.#capLimit / 2) {
          // Sent in a burst at one instant (every slot free after a hold):
          // the burst's sends before it, not refused, were being served too.
          // (A bucket that ran dry in such a burst reads as a smaller cap
          // now, a step per hold before its rate: one of 4 at 16/s, 196 ms
          // ± 50%, 1 s holds, 0.57 → 0.46; counted once only, the rate it
          // then read counted the holds: 0.33.)
          const burst = this.#capBelow(now, f, sentAt, true);
          if (burst >= this.#capLimit / 2) served = burst;
        }
        if (served < this.#capLimit / 2) {
          // Less than half of it: a cap does not shrink, a bucket that ran
          // dry refuses whatever is in flight (a bucket of 4 at 16/s after a
          // 1 s Retry-After, 196 ms: the cap went 6, then 1, and the scope
          // ran at 0.32 of the site's rate). A rate, below.
          this.#capRefuted = true;
          this.#capLimit = Infinity;
        } else {
          this.#capLimit = served;
          this.#capUpTo = 0;
          this.#cut(now, false);
          this.#apply(knobs);
          this.#oneUntilAdmit(knobs);
          return this.#report(
            knobs,
            `concurrency cap: refused with ${f} in flight, lowered to ${this.#capLimit}`,
          );
        }
      } else if (
        f >= 2 && this.#minRefusedF === f && this.#admitsBelow(f) && !this.#admitsFrom(f) &&
        // The second of two in flight refused: a strict spacer does that
        // too (a short gap), and a cap of one would pin it to one in flight;
        // a site that serves one at a time is found as a rate.
        f >= 3 &&
        this.rate === Infinity &&
        // A site that admitted more than twice what was in flight, then held
        // the scope for a second or more for most of the time since the
        // first send, ran out of a window: a cap refuses a request as soon
        // as too many are in flight, and those were admitted one run after
        // another (a window of 100 per 10 s refused at 14 in flight with a
        // 7 s hold, read as a cap of 8: rampup then lowered it to 6 after the
        // hold and paced from 1.76/s, 0.27 of the site's rate; 0.98 now).
        // A cap that answers with a Retry-After of seconds reads so too:
        // the cap is kept for when the holds tell no window (`leaveQuota`).
        !this.#heldLikeWindow(now, f, sentAt)
      ) {
        // A first refusal: the in-flight count may have just grown past the
        // cap, and what was served shows the old count, not the cap. Rampup's
        // slow start grows by answers that come back together, refusals in
        // flight among them (they hold no slot at the site): the most it saw
        // admitted at once bounds the cap (a cap of 8 read as 11 otherwise).
        // Sends a moment after the refused one may have reached the site
        // first (a real network reorders them): one of them admitted with
        // more in flight was counted before the refused one.
        const fr = this.#reorderedF(f, sentAt);
        this.#capLimit = this.limits.mode === "rampup" ? this.#capBelow(now, fr, sentAt) : fr - 1;
        // What the site was seen serving at once counts only answers already
        // in: the ones in flight at the refusal (most of a cap just reached)
        // are not, so the cap may be up to f - 1. The first quiet round, when
        // they are in, reads what the site was serving at the refused send
        // (a cap of 7 read as 4 ran at 0.56 of the site's rate; 0.84 now).
        // Sends a moment after it still out may have reached the site first
        // and been served then (a loopback client's sends arrive up to a few
        // ms late: a cap of 3 at 120 ms read as 2 and kept: 0.61).
        this.#capUpTo = this.#capUpToFor(fr, sentAt);
        this.#capSentAt = sentAt;
        this.#cut(now, false);
        this.#apply(knobs);
        // Nothing new until one is admitted: a cap admits the others in
        // flight at once (and the cap is back), a window or a bucket that ran
        // out refuses them, and new sends would only be refused as well.
        this.#oneUntilAdmit(knobs, true);
        return this.#report(
          knobs,
          `concurrency cap: refused with ${fr} in flight, admitted with ${fr - 1}${
            this.#capLimit < fr - 1 ? `, seen serving ${this.#capLimit}` : ""
          }`,
        );
      } else if (f === 1) {
        this.#capRefuted = true;
        this.#capLimit = Infinity;
      }
    }

    // A block: refused again before any later send was admitted.
    if (this.#lastCutWasRate && !Number.isNaN(this.#blockStart)) {
      // A probe refused at or after the end of the server's hold before it:
      // the hold ended before the site re-opened (a constant Retry-After
      // shorter than a window), and the block's end tells the window as an
      // unheld block's does (see `#endBlock`).
      if (
        sentAt !== undefined && sentAt >= this.#prevHoldEnd && this.#prevHoldEnd > this.#blockStart
      ) {
        this.#refusedAfterHold = true;
      }
      const wait = this.#probeWait(now);
      if (!Number.isNaN(this.#episodeStart)) this.#episodeHolds++;
      this.#lastCutAt = now;
      // One probe at a time: a burst at the end of each wait is refused whole.
      knobs.concurrency = 1;
      return this.#report(knobs, `refused again: next probe in ${Math.round(wait)} ms`);
    }

    const cycle = this.#heldCycle(now);
    if (cycle !== undefined) {
      // Held by the server for most of the time since its last hold ended:
      // a window (or a bucket's refill) gives so many per so long, whatever
      // the pace. The pace stays; a quota of what it admitted per that time
      // stops the scope before the refusal, in bursts like the site's.
      this.quota = {
        limit: cycle.admits,
        windowMs: cycle.ms,
        resetAt: this.#heldUntil,
        lateFrom: cycle.from,
        lateUntil: sentAt,
        // Read as a cap as well (`#heldLikeWindow`): probed for it at once.
        ...(this.#capHeld?.at === now ? { capUpTo: Math.max(1, this.#capHeld.upTo) } : {}),
      };
      this.#cut(now, false);
      return this.#report(
        knobs,
        `held again: ${cycle.admits} admitted in ${
          Math.round(cycle.ms)
        } ms, a quota of ${cycle.admits}`,
      );
    }
    // Unpaced, refused with another request sent at the same instant.
    const atOnce = this.rate === Infinity && this.#sends.count >= 2 &&
      this.#sends.atInstant(sentAt, BURST_INSTANT_MS) >= 2;
    const pace = this.rate !== Infinity ? this.#sentPace(sentAt) : this.#sends.count < 2
      // Made at this trigger: what is in flight, over the refused request's round trip.
      ? (Math.max(1, activeNow) * 1000) / Math.max(1, now - sentAt)
      // Sent at one instant: the gap (a millisecond or none) is no rate the scope sent at.
      : atOnce
      ? this.#recentSendRate(now)
      : Math.max(this.#recentSendRate(now), this.#gapRate(sentAt));
    // Unpaced, refused with another request sent at the same instant: the
    // site refuses bursts (a strict spacer), which says nothing of the rate
    // the scope sent at; paced at that rate the requests go apart.
    // (Rampup only: its slow start doubles concurrency, answers come back
    // together and the next sends go at one instant.)
    // Or sent at one instant with the first sends after a server hold (every
    // slot free at once): a bucket or a window that ran out refills while
    // held, so a burst refused then says the site takes no such burst, not
    // that the pace before it was too fast (a 25.7/s GCRA with a burst of 4
    // at 258 ms: seven sent at a 1 s hold's end, three refused, read as
    // "refused at 8.94/s" and kept under it: 0.31; 0.58 now).
    const afterHold = atOnce && this.#sentAtHoldEnd(now, sentAt);
    const burst = afterHold || (this.limits.mode === "rampup" && atOnce &&
      // Few admitted before: a bucket or a window that ran out after a run of
      // admits refuses a burst too, and there the rate was too fast.
      this.#firstAdmits <= BURST_MIN);
    // A rate that was refused is too fast, whatever a quiet round said before
    // (a bucket's saved burst can hide a rate above its limit for a while).
    const firstPace = this.rate === Infinity;
    if (burst) {
      this.#hi = Math.min(this.#hi, 2 * pace);
      // Not pressed on the site's rate: no episode starts here.
      this.#episodeStart = Number.NaN;
    } else if (pace < this.#hi) this.#hi = pace;
    this.#refusedPace = burst ? Infinity : pace;
    let next = burst ? pace : pace * CUT_FACTOR;
    // Whether the sends keep their concurrency (see the end).
    let keepInFlight = false;
    if (
      !burst && this.rate === Infinity && this.#firstAdmits > BURST_MIN && this.#firstSpanMs > 0
    ) {
      // The first refusal after a run of admits (a bucket's burst or a
      // window's quota ran out): the pace that ran it out says little of the
      // rate below, and halving from it sent a round trip's worth into an
      // empty bucket per step. What the site admitted on average since the
      // first send, burst included, is above its rate and far nearer.
      next = Math.min(next, (this.#firstAdmits * 1000) / this.#firstSpanMs);
    }
    let why = burst
      ? `refused in a burst at ${fmt(pace)}/s: paced at ${fmt(next)}/s`
      : `refused at ${fmt(pace)}/s: rate ${fmt(next)}/s`;
    const est = this.#episodeEstimate(sentAt);
    // A window read at a block's end that the admits since refute: its rate
    // bounds the climb from the estimate (see `#fromBlock`).
    let refuted = 0;
    // A window re-opens with its whole quota: a site that admitted far less
    // than the window's rate since it first refused (a bucket after its
    // burst, read as a window at the block's end) has no window.
    if (this.#windowRate > 0 && est !== undefined && est < this.#windowRate / 3) {
      refuted = this.#windowRate;
      this.#windowRate = 0;
    }
    let oneAdmit = false;
    const reopened = this.#windowRate > 0 && sentAt >= this.#windowAt &&
      this.#periodAdmits < WINDOW_MIN_ADMITS && !Number.isNaN(this.#episodeStart) &&
      sentAt > this.#episodeStart;
    if (reopened) {
      // Refused with fewer than WINDOW_MIN_ADMITS admitted since the block
      // ended: a window re-opens with its whole quota (a sliding one frees
      // its slots at the pace they were taken), a bucket whose burst ran out
      // with the one token it refilled. What it admitted since its first
      // refusal is its rate (a bucket of 38 at 2/s read as a window of 32/s
      // took another block of refusals to find it).
      const windowRate = this.#windowRate;
      this.#windowRate = 0;
      const since = Math.max(1, sentAt - this.#episodeStart);
      next = Math.min(pace * CUT_FACTOR, (Math.max(1, this.#episodeAdmits) * 1000) / since);
      // After a block of COUNTER_MIN_WINDOW_MS or more that ended at a round
      // reset: a sliding-window counter (its block lasts until its window
      // rolls over, then its previous window's weight frees room at the
      // window's rate) admits about the window's rate, not one admit over
      // the whole block (a counter of 300 per minute read so at 0.02/s).
      const counter = this.#roundPeriodMs >= COUNTER_MIN_WINDOW_MS;
      if (counter) {
        next = Math.min(pace * CUT_FACTOR, Math.max(next, ESTIMATE_SHARE * windowRate));
      }
      // Read from one admit, the rate is the block's length, and says as
      // little of a sliding-window counter's rate (its block lasts until its
      // window rolls over) as of a slow bucket's: climb from it (see
      // `#fromBlock`). Read from two, twice it bounds the search.
      if (counter) this.#guessHi(windowRate);
      else if (this.#episodeAdmits <= 1) oneAdmit = true;
      else this.#guessHi(2 * next);
      why = `refused at ${
        fmt(pace)
      }/s with ${this.#periodAdmits} admitted since the block: no window, rate ${fmt(next)}/s`;
    } else if (this.rate !== Infinity && this.#windowRate > 0) {
      // A window site refuses the request past its quota, whatever the pace
      // within the window: the pace was above the window's rate, which lies
      // between the last window's estimate and this pace.
      next = Math.min((this.#windowRate + pace) / 2, pace * (1 - CONVERGED));
      why = `refused at ${fmt(pace)}/s, a window of about ${fmt(this.#windowRate)}/s: rate ${
        fmt(next)
      }/s`;
    } else if (
      this.rate !== Infinity && this.#sendsAtRate <= STRICT_SENDS && this.#lastQuiet > 0 &&
      this.#lastQuiet < pace
    ) {
      // Refused at the first sends of a new pace: a strict spacer, and the
      // last quiet pace is known good.
      next = this.#lastQuiet;
      // Within FOUND_NEAR_QUIET of it, the limit is found: bisecting the last
      // few percent cost a refusal a step (an 8/s spacer refused at 10.08,
      // 8.91, 8.33 and 8.04/s on the way from 7.75/s: 5% of its requests).
      // Probes find more later.
      if (pace < next * (1 + FOUND_NEAR_QUIET)) {
        this.#hi = Math.min(this.#hi, next * (1 + CONVERGED));
      }
      why = `refused at the first sends at ${fmt(pace)}/s: back to ${fmt(next)}/s`;
    } else if (
      this.limits.mode === "adaptive" && this.rate !== Infinity &&
      this.#sendsAtRate <= STRICT_SENDS && this.#lastQuiet === 0 &&
      (est === undefined || est >= pace) &&
      pace >
        (QUARTER_ABOVE * (this.#admitsBefore + this.#admitCount) * 1000) /
          this.#unheldSinceFirstSend(now)
    ) {
      // Refused again at the first sends of a pace, no pace was ever quiet,
      // and the pace is still well above what the site admitted since the
      // first send (the time it held the scope left out: a long Retry-After
      // says nothing of the rate): the first cut was from a pace that said
      // little (two sends at one instant over a short round trip read as
      // hundreds a second), so halving takes many refusals to come down; a
      // quarter takes half as many. (Rampup keeps halving here.)
      next = pace * CUT_FACTOR * CUT_FACTOR;
      why = `refused at the first sends at ${fmt(pace)}/s: rate ${fmt(next)}/s`;
    } else if (
      (this.#costlyRefusal || this.#firstAdmits <= 1) && this.rate !== Infinity &&
      this.#firstAdmits <= BURST_MIN &&
      this.#lastQuiet > 0 &&
      pace <= this.#lastQuiet * (1 + NEAR_QUIET) &&
      pace >= this.#lastQuiet * (1 - NEAR_QUIET_BELOW) &&
      (est === undefined || !this.#savedBurst(est))
    ) {
      // Refused after a while at a pace at or just above one that was quiet,
      // by a site that never admitted a burst (a strict spacer): the limit is
      // right there, and a real clock's jitter shortened one gap. What was
      // admitted since the first refusal counts the climb to this pace, far
      // below the limit (a 20/s spacer refused at 20.2/s, admitted 13.9/s),
      // and cutting to it settled at two thirds of the rate. Only where the
      // site admitted at most one before its first refusal, or a refusal
      // costs a long hold: a small bucket (a burst of 2 or 3) refused so kept
      // refusing (5% → 7% refused in the zoo's table).
      // Where a refusal costs a hold of a second or more, a wider margin: a
      // real clock's jitter refused the next pace 6% under it too (a 10/s
      // spacer at 157 ms over loopback: 10.05/s, then 9.42/s).
      next = Math.min(this.#lastQuiet, pace) *
        (1 - (this.#costlyRefusal ? NEAR_QUIET_MARGIN_COSTLY : 2 * CONVERGED));
      why = `refused at ${fmt(pace)}/s, near the quiet ${fmt(this.#lastQuiet)}/s: rate ${
        fmt(next)
      }/s`;
      // Back under a pace the site admitted for a round, not at a wall: the
      // sends keep their pace (one in flight until an answer cost two round
      // trips a refusal: a 25/s spacer at 120 ms, rampup, 0.80; 0.83 now).
      keepInFlight = true;
    } else if (
      this.#climb && this.rate !== Infinity && this.#climbedFrom > 0 &&
      pace <= this.#climbedFrom * (this.#fromBelow ? FROM_BELOW_CLIMB : CLIMB) * (1 + CONVERGED)
    ) {
      // Refused in a climb: the pace it climbed from, one step below, is
      // the limit found (what was admitted since the first refusal counts
      // the climb's slow start, far below it).
      next = Math.min(this.#climbedFrom, pace) * (1 - 2 * CONVERGED);
      // Found, where the site admitted a burst: quiet rounds above it pass
      // on a burst saved while held. A site that never admitted one (a
      // strict spacer) hides no rate behind it: the limit lies between the
      // two paces, and the steps toward the refused one go on (a 12/s
      // spacer with 1 s holds, climbed 8 -> 12/s and refused, sat at 7.5/s:
      // 0.59; 0.79 now).
      this.#hi = this.#firstAdmits <= 1
        ? Math.min(this.#hi, pace)
        : Math.min(this.#hi, pace, next / (1 - CONVERGED_COSTLY));
      why = `refused climbing at ${fmt(pace)}/s: back under ${fmt(this.#climbedFrom)}/s, rate ${
        fmt(next)
      }/s`;
    } else if (
      est !== undefined && est < pace &&
      !this.#oneInFlightBound(est)
    ) {
      // Refused after a while at this pace: a saved burst hid the limit; the
      // admitted rate says where it is. (An estimate at or above the refused
      // pace says nothing of where the limit is below it: the cut halves.)
      if (this.rate !== Infinity) this.#hi = Math.min(this.#hi, (pace + est) / 2);
      // What the site admitted since the scope first pressed on it is where
      // to go: a bucket admits its rate to a client that presses, a strict
      // spacer at least half of it, so the limit is no more than twice it.
      // (With the held time left out where holds were counted: a 1 s hold
      // in a 1.4 s episode read a 17/s bucket as admitting 6.33/s, and the
      // bound of 12.67/s held the scope under it: 0.58.)
      const twice = 2 * (this.#heldMs > 0 ? Math.max(est, this.#estimateUnheld) : est);
      this.#guessHi(twice);
      // A site that first admitted a burst well above this rate is a bucket:
      // pressed, it admits its rate, and a pace above it passes quiet rounds
      // on the burst it saved meanwhile, to be refused long after. The
      // estimate is the limit, give or take the probe step. With holds,
      // what refilled while held is unknown (a small bucket wastes most of
      // a long hold): the limit lies between the estimate with the held time
      // and the one without, and their geometric middle bounds the bisection.
      if (this.#savedBurst(est)) {
        const middle = Math.sqrt(est * this.#estimateUnheld);
        if (middle > est * (1 + 2 * CONVERGED)) this.#guessHi(middle);
        else this.#hi = Math.min(this.#hi, est * (1 + 2 * CONVERGED));
        // A round shorter than the burst takes to refill says nothing of a
        // pace above the rate: the refilled burst hides it.
        // (BURST_ROUND_MAX_MS at most: where the estimate is a sliding
        // window's trickle after its quota went at once, the refill time of
        // that "burst" is minutes, and so was each round of the climb.)
        this.#burstMs = Math.min(BURST_ROUND_MAX_MS, (this.#burstAbove(est) * 1000) / est);
      }
      next = Math.min(ESTIMATE_SHARE * est, pace * (1 - CONVERGED));
      // No lower than QUIET_FLOOR of the last pace a round passed quiet at:
      // the site admitted it for a round, while the estimate counts the
      // holds and blocks of the whole episode (a fixed window of 35 per
      // second at 177 ms with 1 s holds, quiet at 39.5/s, refused at 43.4/s,
      // "admitted 17.86/s": cut to 17/s, 0.48; 0.56 now). Not all of it: a
      // saved burst may have carried that round too.
      if (this.#lastQuiet > 0 && this.#lastQuiet < pace && next < QUIET_FLOOR * this.#lastQuiet) {
        next = QUIET_FLOOR * this.#lastQuiet;
        // The bound read from the estimate is as low: between the quiet pace
        // and the refused one instead (under the floor, the scope sat above
        // its bound and never stepped again: a cap of 4 mixed with a 12/s
        // bucket paced at 8.19/s under a bound of 6.97/s for 20 s, 0.69).
        // A bucket of 11 at 21/s, 185 ms ± 50%: floored to 17.4/s under a
        // bound of 18.2/s read from "admitted 17.14/s", 0.85; 0.98 now.
        this.#hi = Math.max(this.#hi, (this.#lastQuiet + pace) / 2);
      }
      why = `refused at ${fmt(pace)}/s, admitted ${fmt(est)}/s: rate ${fmt(next)}/s`;
    }
    // A first refusal at a pace read from a few sends (nothing admitted in a
    // run before it) says little of the rate: halving from it costs a
    // refusal per step, and a hold per step where refusals bring one (two
    // sends at one instant over a 5 ms round trip read as 318/s: six holds
    // to a 10/s spacer). The search starts below instead, at a pace most
    // sites allow, and climbs 1.5x per quiet round until refused (see
    // FROM_BELOW_RATE). Also where a refusal costs no hold: the halvings
    // from hundreds a second to a slow site's rate were most of its
    // refusals (a 2.7/s spacer: 10 of its 15 in the first two seconds;
    // drawn outside sites, held out: 534 -> 499 of 960 missing). Rampup
    // too, which halved from there where a refusal costs no hold (its
    // misses under 0.9: round-number sites 660 -> 635 of 920, drawn outside
    // 81-160 688 -> 670; a 25/s GCRA at 10 ms, where halving was quick,
    // 0.95 -> 0.87). And however low the cut, a search from below (no bound
    // above, a climb) where the refused sends went at one instant before
    // anything was admitted (or before two were logged): "in flight over
    // the round trip" is no pace the scope sent at, yet it bounded the
    // search (a 40/s strict spacer at 150 ms ± 30%, 1 s holds: two at once,
    // refused, "18.74/s", and 17/s for the rest of the crawl: 0.42 over 600
    // pages; 0.75 now).
    const noPace = this.#sends.count < 2 ||
      (atOnce && this.limits.mode === "adaptive" && this.#firstAdmits === 0);
    const fromBelow = firstPace && this.#firstAdmits <= BURST_MIN &&
      (next > 2 * FROM_BELOW_RATE || noPace);
    if (fromBelow) {
      // A cut that is already slow (one that read no pace) stays, only its
      // bound goes (raised to 8/s, a slow site at a long round trip paid a
      // refusal or two more: rates of 0.5-4/s at 200-800 ms, 76 against 63
      // of 96 crawls missing).
      if (next > 2 * FROM_BELOW_RATE) next = FROM_BELOW_RATE;
      why = this.#heldUntil > now
        ? `refused at ${fmt(pace)}/s, a hold of ${
          Math.round(this.#heldUntil - now)
        } ms: from below at ${fmt(next)}/s`
        : `refused at ${fmt(pace)}/s: from below at ${fmt(next)}/s`;
    }
    this.rate = this.#clampRate(next);
    this.#climb = false;
    // Or where a refusal costs no hold of a second or more: a first pace
    // read over a long round trip says as little (two sends at once,
    // reordered on the way, the first refused: "5/s" on a 13/s spacer at
    // 198 ms, which the scope then took for its limit, probing above it once
    // a window: 0.37, 0.66 now).
    this.#hiSoft = firstPace && this.#firstAdmits <= BURST_MIN &&
      (this.limits.mode === "rampup" || atOnce || !this.#costlyRefusal);
    if (this.#hiSoft) this.#climbBurst = this.#firstAdmits;
    this.#fromBelow = fromBelow;
    if (fromBelow) {
      this.#hi = Infinity;
      this.#hiSoft = false;
      this.#climb = true;
      this.#climbBurst = this.#firstAdmits;
      this.#climbedFrom = 0;
    }
    // The first cut after a run of admits (a bucket's burst spent): the
    // sends already on their way will say what the empty bucket refills.
    this.#inFlightAtCut = undefined;
    if (firstPace && !burst && sentAt !== undefined && this.#firstAdmits > BURST_MIN) {
      const sends = this.#sends.countSince(sentAt + 0.001);
      if (sends >= IN_FLIGHT_MIN_SENDS) {
        this.#inFlightAtCut = { from: sentAt, to: now, sends, answered: 0, admits: 0 };
      }
    }
    this.#cut(now, true);
    if (refuted > this.rate) this.#fromBlock(refuted);
    else if (oneAdmit) this.#fromBlock(Infinity);
    this.#blockStart = now;
    this.#blockFrom = this.#lastRefusedAt;
    this.#refusedAfterHold = false;
    // The trigger's own hold (told just before it) holds the block too.
    this.#blockHeld = this.#heldUntil > now;
    this.#probeMs = Math.max(FIRST_PROBE_MS, 2 * (this.#latencyMs || 0));
    this.#apply(knobs);
    // One in flight until a send after the cut is answered: at a high pace
    // and a long round trip the new pace would otherwise send a round trip's
    // worth into a wall before its first refusal came back.
    if (!keepInFlight) {
      knobs.concurrency = Math.min(knobs.concurrency, Math.max(1, this.limits.minConcurrency));
    }
    return this.#report(knobs, why);
  }

  /**
   * The in-flight count a refusal with `f` in flight points to: a send a
   * moment after it, admitted with more in flight, may have reached the
   * site first (see the cap branch of `onTrigger`).
   */
  #reorderedF(f: number, sentAt: number): number {
    return Math.max(f, this.#sends.admittedWithin(sentAt, sentAt + REORDER_MS));
  }

  /** How high a cap read at a refusal pointing to `fr` may be (see `#capUpTo`). */
  #capUpToFor(fr: number, sentAt: number): number {
    return fr - 1 + this.#sends.pendingWithin(sentAt, sentAt + REORDER_MS);
  }

  /**
   * Whether a first refusal that reads as a cap (refused with `f` in flight,
   * never admitted with as many) came after more than twice `f` admits and
   * a hold that reads as a window's; then the cap is kept in `#capHeld`.
   */
  #heldLikeWindow(now: number, f: number, sentAt: number): boolean {
    const cycle = this.#heldCycle(now);
    if (cycle === undefined || !(cycle.admits > 2 * f)) return false;
    const fr = this.#reorderedF(f, sentAt);
    // What the site was seen serving, in either mode (the cap branch's
    // `fr - 1` is lowered by the refusals after it; a trial is refuted by one).
    this.#capHeld = {
      limit: this.#capBelow(now, fr, sentAt),
      upTo: this.#capUpToFor(fr, sentAt),
      sentAt,
      ms: cycle.ms,
      from: cycle.from,
      at: now,
    };
    return true;
  }

  /**
   * The cycle that this trigger's hold ends, when it reads as a window's:
   * held by the server for most of the time since its last hold ended, for
   * more than a second, after several admits.
   */
  #heldCycle(now: number): HoldCycle | undefined {
    const cycle = this.#cycle;
    const ok = cycle !== undefined && cycle.at === now && cycle.admits >= CYCLE_MIN_ADMITS &&
      cycle.heldMs >= HELD_SHARE * cycle.ms && cycle.ms < this.limits.maxDelayMs &&
      // A hold of a second or less is a bucket's or a spacer's
      // Retry-After as often as a window's (whole seconds).
      // (Longer by more than a real clock's fuzz: a 1 s hold told at a send
      // time read a fraction of a millisecond late is still one second.)
      cycle.heldMs > SECOND_HOLD_MS + HOLD_FUZZ_MS &&
      // A pace that went a round without a refusal above the quota's rate:
      // the hold was a bucket's or a spacer's Retry-After, not a window's.
      (cycle.admits * 1000) / cycle.ms > this.#lastQuiet;
    return ok ? cycle : undefined;
  }

  /**
   * The wait before a block's next probe, from `now`: held for it (the
   * controller's own hold, left out of the sending time like a server's),
   * and the wait after it grows.
   */
  #probeWait(now: number): number {
    // No longer than backoff.maxDelayMs, as a server's hold is capped: the
    // waits grow 1.5 times a probe, and a block of a minute or an hour
    // (a window without Retry-After) held the scope for many minutes
    // between two probes, longer than any setting allowed.
    let wait = Math.min(this.#probeMs, this.limits.maxDelayMs);
    this.#probeMs *= PROBE_GROWTH;
    // Windows are mostly of round lengths: a probe just after the next
    // round reset no probe has refuted, where it comes soon enough, finds
    // the window's end with fewer refusals than the growing waits (a fixed
    // window of 10 per 2 s: refused at 250, 625 and 1,188 ms into its
    // block, now at 1 s only).
    const reset = this.#roundReset(now, wait);
    this.#probeReset = reset ?? Number.NaN;
    if (reset !== undefined) wait = Math.max(1, reset + RESET_MARGIN_MS - now);
    const until = now + wait;
    if (until > this.holdUntil) this.holdUntil = until;
    const from = Math.max(now, this.#heldUntil);
    if (until > from) this.#heldMs += until - from;
    return wait;
  }

  /**
   * The earliest reset of a window of a round length (ROUND_WINDOWS_MS),
   * counted from the period's first send or aligned to the clock, that no
   * refused probe went after, if it comes within ROUND_RESET_REACH waits.
   */
  #roundReset(now: number, wait: number): number | undefined {
    const anchor = this.#periodAnchor;
    const from = this.#blockFrom;
    const refuted = Number.isNaN(this.#lastRefusedAt) ? -Infinity : this.#lastRefusedAt;
    // Not past, and no later than a few waits or the longest a probe may
    // wait (backoff.maxDelayMs).
    const reach = Math.min(now + ROUND_RESET_REACH * wait, now + this.limits.maxDelayMs);
    let best = Infinity;
    for (const w of ROUND_WINDOWS_MS) {
      // Counted from the period's first send, or aligned to the clock (a
      // NaN anchor or block start fails every comparison below).
      for (const r of [anchor + w, Math.floor(from / w) * w + w]) {
        const at = r + RESET_MARGIN_MS;
        if (at > refuted && at >= now && at <= reach && r < best) best = r;
      }
    }
    return best === Infinity ? undefined : best;
  }

  /** The clock second of the last refused send seen (see `#clockWindow`; NaN: none). */
  #clockSec = Number.NaN;
  /** What that second had admitted before the refused send. */
  #clockCount = Number.NaN;
  /** Seconds in a row that admitted as many before their first refusal. */
  #clockRow = 0;
  /** A window per clock second was read (once per controller). */
  #clockDone = false;

  /** Admitted sends from `from` to before `to`: answered ones, and those still out. */
  #admitsIn(from: number, to: number): number {
    let n = this.#sends.pendingWithin(from - SAME_INSTANT_MS, to - SAME_INSTANT_MS);
    const count = Math.min(this.#admitCount, RING);
    for (let k = 1; k <= count; k++) {
      const t = this.#admitStarts[(this.#admitCount - k) % RING]!;
      if (t >= from && t < to) n++;
    }
    return n;
  }

  /** The most admitted sends of one clock second, over the admits kept. */
  #mostPerSecond(): number {
    const count = Math.min(this.#admitCount, RING);
    const per = new Map<number, number>();
    let most = 0;
    for (let k = 1; k <= count; k++) {
      const sec = Math.floor(this.#admitStarts[(this.#admitCount - k) % RING]! / CLOCK_WINDOW_MS);
      const n = (per.get(sec) ?? 0) + 1;
      per.set(sec, n);
      if (n > most) most = n;
    }
    return most;
  }

  /**
   * Whether the refused send at `sentAt` tells a window of so many per
   * clock second (then set as the told quota): the first refused send of
   * each of CLOCK_ROW clock seconds in a row, each held by the server and
   * none a block's probe, came after as many admitted sends of its second,
   * CLOCK_MIN_ADMITS or more, and no second kept admitted more. The
   * commonest limiter a site writes itself, a counter per epoch second,
   * holds a second per refusal (`Retry-After: 1`), which `#heldCycle`
   * leaves to the pace, as a spacer's or a bucket's one-second hold: a
   * fixed window of 12 per clock second was paced at 8.9-10/s with a
   * refusal every two seconds, 0.74-0.82 of its rate; 0.93-0.99 now. (Two
   * seconds in a row read small buckets, whose refill after a one-second
   * hold is as regular, as windows below their rate: a bucket of 6/s with a
   * burst of 2 as 3 per second.) A bucket read so all the same admits the
   * probe of a told quota, half a quota more half way through its window,
   * and is handed back (`AnnouncedWindow`).
   */
  #clockWindow(now: number, sentAt: number): boolean {
    if (this.#clockDone) return false;
    const sec = Math.floor(sentAt / CLOCK_WINDOW_MS);
    if (sec === this.#clockSec) return false;
    const from = sec * CLOCK_WINDOW_MS;
    const n = this.#admitsIn(from, sentAt);
    const prev = this.#clockCount;
    this.#clockSec = sec;
    this.#clockCount = n;
    // Held by the server: a refusal without a hold is followed by sends
    // later in its second, and a strict spacer refused at each of the
    // pace's climbs (rounds of a second, on the clock's seconds at 0) was
    // refused after as many admits in each (an 8/s spacer after seven).
    const held = this.#heldUntil > now;
    const alike = n === prev && Number.isNaN(this.#blockStart);
    this.#clockRow = held ? (alike ? this.#clockRow + 1 : 1) : 0;
    if (!(n >= CLOCK_MIN_ADMITS && this.#clockRow >= CLOCK_ROW)) return false;
    if (this.#mostPerSecond() > n) return false;
    this.#clockDone = true;
    this.quota = {
      limit: n,
      windowMs: CLOCK_WINDOW_MS,
      resetAt: from + CLOCK_WINDOW_MS,
      lateFrom: Number.NaN,
      lateUntil: Number.NaN,
      clock: true,
    };
    this.#cut(now, false);
    return true;
  }

  /** A new episode of pressing on the site's rate, from `at`, with `admits` counted already. */
  #startEpisode(at: number, admits: number): void {
    this.#episodeStart = at;
    this.#episodeAdmits = admits;
    this.#heldMs = 0;
    this.#episodeHolds = 0;
  }

  /** When the current period (a window's) began: its first send. */
  #periodAnchor = Number.NaN;
  /** The send of the refusal that began the current block. */
  #blockFrom = Number.NaN;
  /** The window the last block told, when it ended at a round reset (0: none). */
  #roundPeriodMs = 0;
  /** The round reset the block's next probe goes after (NaN: none). */
  #probeReset = Number.NaN;

  /** See the caller in `onTrigger`: a block from the cap's cut on, probed at growing waits. */
  #loneRefused(now: number, knobs: RampKnobs): string {
    const start = this.#lastCutAt;
    this.rate = this.#clampRate((this.#firstAdmits * 1000) / this.#firstSpanMs);
    this.#cut(now, true);
    this.#blockStart = start;
    this.#blockFrom = this.#lastRefusedAt;
    this.#refusedAfterHold = false;
    this.#blockHeld = this.#heldUntil > now;
    this.#probeMs = Math.max(FIRST_PROBE_MS, 2 * (this.#latencyMs || 0));
    const wait = this.#probeWait(now);
    this.#apply(knobs);
    knobs.concurrency = 1;
    return this.#report(
      knobs,
      `the one send after a cap's cut refused: no cap, the site ran out at ${
        fmt(this.rate)
      }/s; next probe in ${Math.round(wait)} ms`,
    );
  }

  /**
   * The cap a refusal with `f` in flight points to: below `f`, and no more
   * than the site was seen serving at once (the most admitted requests that
   * overlapped, over the last few round trips). Refusals still in flight
   * count in `f` but hold no slot at the site, so `f - 1` alone can be far
   * too high.
   */
  #capBelow(now: number, f: number, sentAt: number, burst = false): number {
    // Rampup's slow start sends each doubling at one instant; a site that
    // queues them (a leaky queue) looks like a cap served in full at the
    // refusal and the higher count only delays the rate it needs (zoo, 20
    // seeds: 4 more rampup misses with it). The admitted overlaps alone there.
    const once = this.#servedAtOnce(now);
    const served = this.limits.mode === "rampup"
      ? once
      : Math.max(once, this.#servedAt(sentAt, true, burst ? f : 0));
    return served >= 1 ? Math.min(f - 1, served) : f - 1;
  }

  /**
   * How many the site was serving when the refused send at `sentAt` came:
   * the admitted requests that were in flight then, and the ones sent before
   * it still out (as if admitted). A site with a cap refuses at the cap, so
   * this is the cap; `#servedAtOnce` alone misses the long requests still
   * out, and when latencies vary much they are the most. With `pending`
   * false (read again once those answers are in) only admitted requests
   * count, those sent at the refused one's instant included.
   */
  #servedAt(sentAt: number, pending = true, f = 0): number {
    let n = pending ? this.#sends.pendingBefore(sentAt) : 0;
    // With f (the refused send's in-flight count): sends at its instant (one
    // dispatch: a burst after a hold) not refused so far were being served
    // too, up to the f - 1 the scope had in flight with it (a cap of 6 at
    // 287 ms ± 50% refused the seventh of a burst after its 1 s hold, read
    // as serving 2 and as a rate: 0.37 of the site's).
    const burst = pending && f > 0;
    let same = burst ? this.#sends.pendingAt(sentAt) : 0;
    const count = Math.min(this.#admitCount, RING);
    for (let k = 1; k <= count; k++) {
      const i = (this.#admitCount - k) % RING;
      const start = this.#admitStarts[i]!;
      if (!(this.#admitTimes[i]! > sentAt)) continue;
      // Read later (no pending sends counted), sends at the refused one's
      // instant that were admitted were served with it.
      if (pending ? start < sentAt : start <= sentAt) n++;
      else if (burst && start <= sentAt + SAME_INSTANT_MS) same++;
    }
    return burst ? n + Math.min(same, Math.max(0, f - 1 - n)) : n;
  }

  /**
   * What the site was serving when the refused send at `sentAt` reached it,
   * read once the answers are in: the admitted requests in flight at its
   * send, or at the send of an admitted one a moment after it (up to
   * REORDER_MS: that one may have got there first), whichever more.
   */
  #servedAround(sentAt: number): number {
    let most = this.#servedAt(sentAt, false);
    const count = Math.min(this.#admitCount, RING);
    for (let k = 1; k <= count; k++) {
      const t = this.#admitStarts[(this.#admitCount - k) % RING]!;
      if (t > sentAt + SAME_INSTANT_MS && t <= sentAt + REORDER_MS) {
        most = Math.max(most, this.#servedAt(t, false));
      }
    }
    return most;
  }

  /**
   * The most admitted requests that overlapped over the last four round
   * trips (0 before a latency is known). Refused again under a supposed cap
   * that the site served in full just before: no cap (a bucket whose burst
   * ran out just as slow start reached its top refuses whatever is in
   * flight), a rate.
   */
  #servedAtOnce(now: number): number {
    const latency = this.#latencyMs;
    return latency > 0 ? this.#mostServed(now - 4 * latency) : 0;
  }

  /** The most admitted requests that overlapped, of those answered after `after`. */
  #mostServed(after: number): number {
    // Admitted intervals: +1 at each start, -1 at each end, ends first at
    // one instant (a site frees a slot before it takes the next arrival).
    const marks: [at: number, step: 1 | -1][] = [];
    const n = Math.min(this.#admitCount, RING);
    for (let k = 1; k <= n; k++) {
      const i = (this.#admitCount - k) % RING;
      const end = this.#admitTimes[i]!;
      if (end <= after) break;
      marks.push([this.#admitStarts[i]!, 1], [end, -1]);
    }
    marks.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let open = 0;
    let served = 0;
    for (const [, step] of marks) {
      open += step;
      if (open > served) served = open;
    }
    return served;
  }

  /**
   * The send at `sentAt` was refused, and a refusal holds no slot at the
   * site: every send after it while its answer was on the way counted one
   * more in flight than the site served. Their counts (admitted, and still
   * out) go one down, so that a cap is read as the site counts (a cap of 3
   * at 295 ms ± 50% admitted sends counted at 4, with a slow refusal still
   * out, and was read as a rate: 0.64 of the site's).
   */
  #discount(sentAt: number): void {
    this.#sends.discount(sentAt);
    const count = Math.min(this.#admitCount, RING);
    for (let k = 1; k <= count; k++) {
      const i = (this.#admitCount - k) % RING;
      if (!(this.#admitStarts[i]! > sentAt)) continue;
      const f = this.#admitF[i]!;
      if (f > 1) {
        this.#admitAtF[f]!--;
        this.#admitAtF[f - 1]!++;
        this.#admitF[i] = f - 1;
      }
    }
  }

  /** Whether a send with `f` or more in flight was ever admitted (then `f` is no cap). */
  #admitsFrom(f: number): boolean {
    for (let g = f; g <= MAX_F; g++) if (this.#admitAtF[g]! > 0) return true;
    return false;
  }

  #admitsBelow(f: number): boolean {
    let n = 0;
    for (let g = 1; g < f; g++) n += this.#admitAtF[g]!;
    return n > 0;
  }

  /** Requests/s sent over the last round (at least the latency, at least one send's worth). */
  #recentSendRate(now: number): number {
    // A round, or the scope's life when shorter (a young scope's few sends are fast ones).
    const life = Number.isNaN(this.#firstSendAt) ? this.#roundMs : now - this.#firstSendAt;
    const span = Math.max(
      Math.min(this.#roundMs, life),
      Number.isNaN(this.#latencyMs) ? 0 : this.#latencyMs,
      1,
    );
    return Math.max(1, this.#sends.countSince(now - span)) * 1000 / span;
  }

  /**
   * Whether an admitted estimate is no more than one request in flight
   * carries (ONE_IN_FLIGHT_SHARE of one per round trip up to one, no saved
   * burst behind it): after each cut the scope keeps one in flight until an
   * answer, so at a long round trip what the site admitted was what the
   * scope sent, and says nothing of the site's rate (a 17/s spacer at
   * 178 ms read as 4.34/s, twice that bounded the search, 0.48 of its
   * rate). The cut then halves from the refused pace.
   */
  #oneInFlightBound(est: number): boolean {
    if (!(this.#latencyMs > 0) || this.#savedBurst(est)) return false;
    const share = (est * this.#latencyMs) / 1000;
    return share >= ONE_IN_FLIGHT_SHARE && share <= 1;
  }

  /**
   * The pace a paced scope was refused at: its rate, or slower where the
   * refused request went a longer gap after the one before it (both sent
   * since the last cut). One in flight after a cut waits for its answer, so
   * at a rate faster than one per round trip the sends go a round trip
   * apart: a 12/s spacer that answers refusals at once and pages in 64 ms
   * was refused 65 ms after an admitted send at a "68.9/s" pace, and each
   * halving from that rate cost another one-second hold (over loopback 5
   * refused, 0.61-0.74 of its rate; 3, 0.78-0.80 now). A gap longer than
   * two round trips (or two of the pace's gaps) is idleness, not a pace,
   * and says nothing.
   */
  #sentPace(sentAt: number): number {
    const prev = this.#sends.before(sentAt);
    if (prev === undefined || !(prev > this.#lastCutAt)) return this.rate;
    let gap = sentAt - prev;
    // A send a moment after it may have reached the site first (a real
    // client's sends arrive a few ms late, unevenly): the refused one then
    // came that gap after an admitted one (a 10/s spacer at 186 ms, two
    // sends 3.8 ms apart, the first overtaken: read as 5.38/s from the send
    // a round trip before, cut to 2.69/s, 0.51).
    const next = this.#sends.after(sentAt);
    if (next !== undefined && next - sentAt < gap && next - sentAt <= OVERTAKE_MS) {
      gap = next - sentAt;
    }
    const latency = Number.isNaN(this.#latencyMs) ? 0 : this.#latencyMs;
    if (gap > 2 * Math.max(latency, 1000 / this.rate)) return this.rate;
    return Math.min(this.rate, 1000 / Math.max(1, gap));
  }

  /** 1000 / the gap before the send at `sentAt` (a strict spacer refuses short gaps). */
  #gapRate(sentAt: number): number {
    const t = this.#sends.before(sentAt);
    return t === undefined ? 0 : 1000 / Math.max(1, sentAt - t);
  }

  /**
   * The rate admitted between the first refused send of this episode and the
   * refused send at `sentAt` (by send time: what was in flight at the first
   * refusal left out), held time left out. A site that refuses has no
   * capacity left, so what it admits from then on is its rate.
   */
  #episodeEstimate(sentAt: number): number | undefined {
    if (this.#episodeAdmits < 4) return undefined;
    const span = sentAt - this.#episodeStart - this.#heldMs;
    if (span <= 0) return undefined;
    // A site that saved a burst (a bucket) refills during the holds too, and
    // the admits that refill paid for came from the held time: it counts.
    // (Told with the held time counted: left out, the estimate is inflated
    // by that refill and hides the burst.)
    const withHolds = (this.#episodeAdmits * 1000) / (span + this.#heldMs);
    this.#estimateUnheld = (this.#episodeAdmits * 1000) / span;
    if (this.#savedBurst(withHolds)) {
      // But a hold refills no more than the burst the site saved at first:
      // a long hold on a small bucket counted in full read it far below its
      // rate (a bucket of 3 at 20/s at 150 ms, 1 s holds: 0.62, 0.71 now).
      const paid = this.#episodeHolds * this.#burstAbove(withHolds);
      return Math.max(withHolds, ((this.#episodeAdmits - paid) * 1000) / span);
    }
    // The first admit after each hold was paid for by the hold (a spacer or
    // a bucket refills while the scope waits): with the held time left out,
    // counting it would read a site that admits one per hold as admitting
    // at the pace that was refused.
    const unpaid = this.#episodeAdmits - this.#episodeHolds;
    return unpaid < 4 ? undefined : (unpaid * 1000) / span;
  }

  /** What the site admitted per second since the scope's first send (0 before it). */
  #rateSinceFirstSend(now: number): number {
    const since = now - this.#firstSendAt;
    return since > 0 ? ((this.#admitsBefore + this.#admitCount) * 1000) / since : 0;
  }

  /** Time since the first send that the server did not hold the scope (at least 1 ms). */
  #unheldSinceFirstSend(now: number): number {
    const ahead = Math.max(0, this.#heldUntil - now);
    const held = this.#allHeldMs - this.#heldBeforeFirstSend;
    return Math.max(1, now - this.#firstSendAt - Math.max(0, held - ahead));
  }

  /** Held time (`#allHeldMs`) before the first send seen (see `#unheldSinceFirstSend`). */
  #heldBeforeFirstSend = 0;

  /** The last episode estimate with the held time left out (see `#episodeEstimate`). */
  #estimateUnheld = 0;
  /** The end of the server hold before the current one (see `onHold`). */
  #prevHoldEnd = 0;
  /** A probe of the current block was refused after a server hold had ended. */
  #refusedAfterHold = false;

  /** How many more the site admitted before its first refusal than `rate` accounts for. */
  #burstAbove(rate: number): number {
    return this.#firstAdmits - (rate * this.#firstSpanMs) / 1000;
  }

  /** Whether the admits before the first refusal were well above `rate`: a burst the site had saved. */
  #savedBurst(rate: number): boolean {
    return this.#burstAbove(rate) >= BURST_MIN;
  }

  #ordinaryStep(now: number, knobs: RampKnobs): string {
    const lim = this.limits;
    const delay = Math.min(
      lim.maxDelayMs,
      Math.max(lim.stepMinDelayMs, knobs.delayMs * lim.stepFactor),
    );
    this.rate = this.#clampRate(1000 / delay);
    this.#hi = Math.min(this.#hi, this.rate / CUT_FACTOR);
    this.#fromBelow = false;
    this.#cut(now, false);
    this.#apply(knobs);
    return this.#report(knobs, `trigger with nothing to measure: one step to ${fmt(this.rate)}/s`);
  }

  #cut(now: number, rate: boolean): void {
    // A cut after a probe answers it: the next probe waits twice as long.
    if (this.#lastProbeAt > this.#lastCutAt) {
      this.#probeEveryMs = Math.min(
        MAX_PROBE_WINDOWS * this.limits.windowMs,
        2 * Math.max(this.limits.windowMs, this.#probeEveryMs),
      );
    }
    this.#lastCutAt = now;
    this.#capWayF = Infinity;
    this.#oneSendRounds = false;
    this.#probesPassed = 0;
    this.#lastCutWasRate = rate;
    this.#blockStart = Number.NaN;
  }

  /**
   * A rate read across a long block of refusals (the admits since the first
   * refusal over its time) is as low as the block is long: a bucket's refill
   * makes such a block, and so does a sliding-window counter, which refuses
   * from its quota's end until its window rolls over and then admits its
   * rate, far above the estimate (71 per 10 s met 6 s before a roll read as
   * 0.19/s, then climbed 1.5x per four sends and halfway to twice that in
   * rounds as long as the window the block told: 0.11 of its rate). Climb
   * from it a round of one send at a time (the bucket's refused climb
   * finds its rate as before), no rounds as long as a saved burst's refill
   * or a window, up to `hi` (a window the admits refuted: halfway steps
   * toward it) or without bound (1.5x a round).
   */
  #fromBlock(hi: number): void {
    this.#windowPeriodMs = 0;
    this.#burstMs = 0;
    this.#oneSendRounds = true;
    this.#climbBase = this.rate;
    this.#hi = hi;
    this.#hiGuess = Number.NaN;
    this.#hiSoft = false;
    this.#climb = hi === Infinity;
    this.#climbBurst = 0;
    this.#fromBelow = hi === Infinity;
    this.#climbedFrom = 0;
  }

  /** An upper bound of twice an admitted rate (see `#hiGuess`). */
  #guessHi(bound: number): void {
    if (!(bound < this.#hi)) return;
    this.#hi = this.#hiGuess = bound;
    this.#guessRefused = this.#refusedPace;
  }

  /** The first admit after a block: a window when the block was long. */
  #endBlock(now: number, sentAt: number): void {
    this.#roundPeriodMs = 0;
    const start = this.#blockStart;
    const serverHeld = this.#blockHeld;
    // A probe refused after a hold had ended: the reset lies between it and
    // the admitted probe, as in a block the server did not hold.
    const held = serverHeld && !this.#refusedAfterHold;
    this.#refusedAfterHold = false;
    this.#blockStart = Number.NaN;
    this.#blockHeld = false;
    const block = now - start;
    const roundTrip = Number.isNaN(this.#latencyMs) ? 0 : this.#latencyMs;
    const gap = this.rate === Infinity ? 0 : 1000 / this.rate;
    // A window shows as several admits, then a block: one or two admits
    // before a block are a strict spacer's, not a window's.
    if (
      !held && block >= Math.max(500, 4 * roundTrip, 4 * gap) &&
      this.#periodAdmits > WINDOW_MIN_ADMITS
    ) {
      // The window reset between the last refused probe and this admitted
      // one: half way is the best guess (the admitted probe alone is late by
      // up to the probe's interval).
      // Or, when the admitted probe went after a round reset, that reset
      // (the site's window is most likely that round length), and the
      // margin the probe went after it: a sliding log frees each slot a
      // window after it was taken, and bursts a window apart to the
      // millisecond meet slots a network's jitter has not freed yet.
      const round = !Number.isNaN(this.#probeReset) && sentAt >= this.#probeReset;
      const reset = Math.max(
        this.#periodStart + 1,
        round
          ? this.#probeReset
          : Number.isNaN(this.#lastRefusedAt)
          ? sentAt
          : (this.#lastRefusedAt + sentAt) / 2,
      );
      const period = reset - this.#periodStart + (round ? RESET_MARGIN_MS : 0);
      this.#roundPeriodMs = round ? period : 0;
      // What the site admits from the reset on is the rate a refusal next
      // is read against (a sliding-window counter met half way through its
      // minute, its first boundary read as a window of 30 s: the rate
      // admitted since the first refusal, 26 s of block in it, was 0.26/s).
      if (round && period >= COUNTER_MIN_WINDOW_MS) this.#startEpisode(sentAt, 1);
      const est = ((this.#periodAdmits - 1) * 1000) / period;
      // Room above it for the guess's error.
      this.#hi = est * WINDOW_HEADROOM;
      this.#windowRate = est;
      this.#windowAt = now;
      // A round shorter than the window says nothing of it.
      this.#windowPeriodMs = Math.min(period, this.limits.windowMs);
      // The window becomes the scope's learned quota, sent in bursts like
      // the site's windows take them (spread evenly, the first and the last
      // windows' bursts were lost: a fixed window of 50 per 10 s paced at
      // 4.75/s took 42.9 s for 200 pages, a greedy client 30 s). The pace
      // only carries the bursts.
      const n = this.#periodAdmits - 1;
      this.quota = {
        limit: n,
        windowMs: period,
        // The next window a period after the admitted probe: where a window
        // counted from the first request after a reset (most per-client
        // ones) or a sliding log begins; a clock window's, up to half the
        // last probe's wait sooner, is found by the shorter windows tried
        // later (a sliding log of 8 per second, its window begun at the
        // guessed reset, was refused a window later and read as too short:
        // 0.76-0.83 of its rate, 0.88-0.92 now).
        resetAt: sentAt + period,
        lateFrom: Number.NaN,
        lateUntil: Number.NaN,
        blind: true,
        left: n - 1,
        since: sentAt,
      };
      this.#hi = Infinity;
      const rate = this.#clampRate(est / ANNOUNCED_SPREAD);
      this.#paceLater(
        rate,
        `a window: ${n} admitted in ${Math.round(period)} ms: a quota of ${n}, in bursts at ${
          fmt(rate)
        }/s`,
      );
    } else if (
      this.rate !== Infinity && this.#admitCount >= 2 && this.#firstAdmits <= 1 &&
      !Number.isNaN(this.#lastRefusedAt)
    ) {
      // A strict spacer's block (no burst ever admitted): the probe admitted
      // now went `gap` after the admit before the block, and one refused
      // went `refusedGap` after it, longer than the pace's own gap and at
      // least a first probe's wait. The site's interval lies between the
      // two: the pace goes to the admitted gap, and the refused one bounds
      // the climb. (A 1/s spacer at 30 ms, paced from below at 8/s, was
      // refused at 8, 2 and 1/s and bisected from 0.5/s toward 8/s: 11
      // refused in 60 pages, 0.76; 9 and 0.90 now.)
      const prev = this.#admitStarts[(this.#admitCount - 2) % RING]!;
      const gap = sentAt - prev;
      const refusedGap = this.#lastRefusedAt - prev;
      if (
        refusedGap > 1000 / this.rate && refusedGap >= FIRST_PROBE_MS && gap > refusedGap &&
        // Held by the server, where a burst was never admitted either (a
        // constant Retry-After shorter than the interval: a 0.42/s spacer
        // answering "2" refused the probe at a hold's end, then was halved
        // from 8/s a refusal a step, 10 refused in 20 pages; 5 now). The
        // admitted probe went at a hold's end, later than it had to: a pace
        // on the safe side, which the climb leaves.
        (!serverHeld || this.#earlyAdmits <= 1)
      ) {
        const rate = this.#clampRate(1000 / gap);
        this.#hi = Math.min(this.#hi, 1000 / refusedGap);
        this.#paceLater(
          rate,
          `a block ended: admitted ${Math.round(gap)} ms after the last admit, refused ${
            Math.round(refusedGap)
          } ms after it: rate ${fmt(rate)}/s`,
        );
      }
    }
    this.#periodStart = now;
    this.#periodAnchor = sentAt;
    this.#probeReset = Number.NaN;
    this.#periodAdmits = 1;
    // Back from one probe at a time to what the pace needs.
    this.#needsApply = true;
  }

  /** The rate of the last window read from a block (0: no window seen). */
  #windowRate = 0;
  /** When the last window was read from a block. */
  #windowAt = 0;
  /** When the last refused request of the current block was sent. */
  #lastRefusedAt = Number.NaN;

  #needsApply = false;
  /** The server held the scope during the current block: it said when, there is no window to learn. */
  #blockHeld = false;
  /** The end of the latest server hold. */
  #heldUntil = 0;

  #clampRate(rate: number): number {
    const lim = this.limits;
    const minRate = 1000 / lim.maxDelayMs;
    const maxRate = lim.minDelayMs > 0 ? 1000 / lim.minDelayMs : Infinity;
    if (!(rate > 0) || Number.isNaN(rate)) return minRate;
    return Math.min(maxRate, Math.max(minRate, rate));
  }

  /** Sets the knobs from the rate and the cap: Little's law for concurrency. */
  #apply(knobs: RampKnobs): void {
    const lim = this.limits;
    this.#sendsAtRate = 0;
    const top = Math.min(lim.maxConcurrency, this.#capLimit);
    knobs.delayMs = this.rate === Infinity
      ? lim.minDelayMs
      : Math.max(lim.minDelayMs, 1000 / this.rate);
    if (this.#capLimit !== Infinity && this.rate === Infinity) {
      knobs.concurrency = Math.max(lim.minConcurrency, this.#capLimit);
      return;
    }
    if (this.rate === Infinity) return;
    const latency = Number.isNaN(this.#latencyMs) ? 0 : this.#latencyMs;
    const needed = Math.ceil((this.rate * latency) / 1000) + 1;
    knobs.concurrency = Math.max(lim.minConcurrency, Math.min(top, needed));
  }

  #report(knobs: RampKnobs, why: string): string {
    this.#pending.push({
      kind: "rampup",
      delayMs: knobs.delayMs,
      concurrency: knobs.concurrency,
      why,
    });
    return why;
  }

  #openRound(now: number): void {
    const latency = Number.isNaN(this.#latencyMs) ? 0 : this.#latencyMs;
    const gap = this.rate === Infinity ? 0 : 1000 / this.rate;
    this.#roundStart = now;
    this.#roundMs = Math.min(
      Math.max(
        MIN_ROUND_MS,
        ROUND_TRIPS * latency,
        (this.#oneSendRounds ? 1 : ROUND_SENDS) * gap,
        this.#windowPeriodMs,
        this.#burstMs,
      ),
      Math.max(this.limits.windowMs, MIN_ROUND_MS),
    );
    this.#roundSends = 0;
    this.#roundTriggers = 0;
    this.#roundMaxActive = 0;
  }

  /** When the current round ends, or `undefined` while none is open. */
  nextWakeAt(): number | undefined {
    if (this.limits.windowMs === 0 || Number.isNaN(this.#roundStart)) return undefined;
    return this.#roundStart + this.#roundMs;
  }

  /** Whether a step waits to be reported. */
  get hasPending(): boolean {
    return this.#pending.length > 0 || this.#needsApply;
  }

  /**
   * Report pending steps; close the round if it has ended: one step up when
   * it was busy and saw no refusal. After an idle gap the next round opens at
   * the next send.
   */
  advance(now: number, knobs: RampKnobs, steps: ScopeStep[]): void {
    if (this.#needsApply) {
      this.#needsApply = false;
      this.#apply(knobs);
      if (this.#phase === "start" && this.#growTo > knobs.concurrency && this.#growBy > 0) {
        knobs.concurrency = Math.min(this.#growTo, knobs.concurrency + this.#growBy);
      }
      this.#growBy = 0;
      // Still waiting for an admit after a refusal under a cap.
      if (this.#oneInFlight) knobs.concurrency = Math.max(1, this.limits.minConcurrency);
    }
    if (this.#pending.length > 0) {
      for (const s of this.#pending) {
        steps.push(Number.isNaN(s.concurrency) ? { ...s, concurrency: knobs.concurrency } : s);
      }
      this.#pending = [];
    }
    if (this.limits.windowMs === 0 || Number.isNaN(this.#roundStart)) return;
    if (now < this.#roundStart + this.#roundMs) return;
    const sends = this.#roundSends;
    const triggers = this.#roundTriggers;
    const maxActive = this.#roundMaxActive;
    // A round without sends, or one closed long after its end, opens no
    // next round: the next send does (no wake-ups for an idle scope).
    const idle = sends === 0 || now - (this.#roundStart + this.#roundMs) >= this.#roundMs;
    if (idle) this.#roundStart = Number.NaN;
    else this.#openRound(now);
    if (triggers > 0 || sends === 0 || !Number.isNaN(this.#blockStart)) return;
    if (now - this.#lastCutAt >= this.limits.windowMs) this.#episodeStart = Number.NaN;
    if (this.#phase === "start") {
      if (this.limits.mode === "rampup" && maxActive >= knobs.concurrency) {
        steps.push(this.#slowStartStep(knobs));
      }
      return;
    }
    this.#quietRound(now, knobs, steps, sends, maxActive);
  }

  #quietRound(
    now: number,
    knobs: RampKnobs,
    steps: ScopeStep[],
    sends: number,
    maxActive: number,
  ): void {
    if (this.rate === Infinity) {
      // Unpaced (a concurrency cap, or never cut): probe one more once per window.
      const top = this.limits.maxConcurrency;
      const trial = this.#capTrial;
      if (trial !== undefined && maxActive >= knobs.concurrency) {
        if (Number.isNaN(trial.since)) trial.since = now;
        else if (now - trial.since >= trial.ms) this.#capTrial = undefined;
      }
      const seen = this.#capLimit < this.#capUpTo
        ? Math.min(this.#capUpTo, this.#servedAround(this.#capSentAt))
        : 0;
      this.#capUpTo = 0;
      if (seen > this.#capLimit && knobs.concurrency < top) {
        this.#capLimit = seen;
        this.#apply(knobs);
        steps.push({
          kind: "rampup",
          delayMs: knobs.delayMs,
          concurrency: knobs.concurrency,
          why: `quiet: the site was serving ${seen} when it refused: concurrency cap ${seen}`,
        });
      } else if (
        this.#capLimit !== Infinity && maxActive >= knobs.concurrency &&
        knobs.concurrency < top && this.#probeDue(now)
      ) {
        this.#capLimit++;
        this.#minRefusedF = Infinity;
        this.#apply(knobs);
        steps.push({
          kind: "rampup",
          delayMs: knobs.delayMs,
          concurrency: knobs.concurrency,
          why: `quiet: probing concurrency ${this.#capLimit}`,
        });
      }
      return;
    }
    // Only a round that used its pace says the pace is safe.
    const allowed = (this.rate * this.#roundMs) / 1000;
    if (sends < 0.75 * allowed && maxActive < knobs.concurrency) return;
    const before = this.rate;
    this.#lastQuiet = before;
    let next: number;
    let why: string;
    // A refusal that costs a hold of a second or more (Retry-After) is worth
    // risking for a larger gain only.
    const converged = this.#costlyRefusal ? CONVERGED_COSTLY : CONVERGED;
    if (
      (this.#hiSoft || this.#hi === this.#hiGuess) && this.#hi !== Infinity &&
      !(before < this.#hi * (1 - converged))
    ) {
      // Reached a rate only the first refusal said was too fast (or only a
      // guess from what was admitted): climb on, or where a guess stood
      // under a refused pace, go on halfway toward that pace.
      const refused = this.#hiSoft ? Infinity : this.#guessRefused;
      this.#hi = refused > before * (1 + converged) && refused < GUESS_NEAR_REFUSED * before
        ? refused
        : Infinity;
      this.#hiSoft = false;
      this.#hiGuess = Number.NaN;
      this.#climb = this.#hi === Infinity;
    }
    if (this.#climb && this.#hi === Infinity) {
      const factor = this.#fromBelow
        ? FROM_BELOW_CLIMB
        : this.#costlyRefusal
        ? CLIMB_COSTLY
        : CLIMB;
      // A pace (factor - 1) above the rate spends a burst of B in B / (factor - 1) sends.
      if (this.#sendsAtRate < this.#climbBurst / (factor - 1)) return;
      // No further than the most the scope's concurrency carries at its
      // latency: above it the pace no longer binds, and a quiet round says
      // nothing of it (the climb would run on for ever).
      const top = Math.min(this.limits.maxConcurrency, this.#capLimit);
      const carried = this.#latencyMs > 0 ? (top * 1000) / this.#latencyMs : Infinity;
      if (before >= carried) {
        this.#climb = false;
        this.#fromBelow = false;
        return;
      }
      next = Math.min(before * factor, carried);
      // Quiet at four times the rate a long block read: the scope, not the
      // site, set what was admitted since the episode began, and a rate
      // read from it later would count that (a sliding-window counter of 50
      // per 5 s refused a climb from 0.29/s at 84/s, and "admitted 3.08/s"
      // since its first refusal 18 s before held it near 3/s: 0.34 of its
      // rate; 0.51 now). The next refusal begins a new episode. (Below
      // that, a slow bucket's climb, refused at 2.2 times the rate its block
      // read, is told by the admits since its first refusal.)
      if (this.#climbBase > 0 && before >= CLIMB_NEW_EPISODE * this.#climbBase) {
        this.#climbBase = 0;
        this.#episodeStart = Number.NaN;
      }
      this.#climbedFrom = before;
      why = `quiet at ${fmt(before)}/s, no refused rate above: climbing to ${fmt(next)}/s`;
    } else if (this.#hi !== Infinity && before < this.#hi * (1 - converged)) {
      if (this.#overRefusalBudget(before)) return;
      // Half way to the refused rate; a quarter when a refusal is costly.
      const step = this.#costlyRefusal ? 0.25 : 0.5;
      next = Math.min(before + step * (this.#hi - before), this.#hi * (1 - CONVERGED / 2));
      why = `quiet at ${fmt(before)}/s: halfway to ${fmt(this.#hi)}/s`;
    } else if (this.#probeDue(now)) {
      const most = this.#costlyRefusal ? MAX_PROBE_STEP / 2 : MAX_PROBE_STEP;
      next = before * (1 + Math.min(most, PROBE_STEP * 2 ** this.#probesPassed));
      this.#hi = Infinity;
      const passed = this.#probesPassed;
      why = `quiet at ${fmt(before)}/s ${
        passed === 0 ? "for a window" : `after ${passed} quiet probe${passed === 1 ? "" : "s"}`
      }: probing ${fmt(next)}/s`;
    } else {
      return;
    }
    this.rate = this.#clampRate(next);
    if (this.rate === before) return;
    this.#apply(knobs);
    steps.push({ kind: "rampup", delayMs: knobs.delayMs, concurrency: knobs.concurrency, why });
  }

  /**
   * Whether a step toward the refused pace `#hi` from `before` waits: it is
   * one of the last steps of the search (the pace within a tenth of it; a
   * twentieth with rampup), and more than REFUSED_BUDGET of the answers so
   * far were refusals. Such a step gains at most a tenth and is refused as
   * often as not (a strict spacer refused at 6, 5, 4.5 and 4.37/s on the way
   * from 4/s: 6 of 106 requests), so where refusals already ran up it waits
   * until enough admitted answers have come to spend one more (a search
   * bounded by a guess, not a refusal, is not held: its end opens the
   * next one). Held-out drawn sites over 5% refused or under 0.8: 488 -> 484
   * of 960; the zoo's slow-api grid 33 -> 26 of 144.
   */
  #overRefusalBudget(before: number): boolean {
    if (this.#hiSoft || this.#hi === this.#hiGuess) return false;
    const fine = this.limits.mode === "rampup" ? FINE_STEPS_RAMPUP : FINE_STEPS;
    if (before < fine * this.#hi) return false;
    const answers = this.#admitsBefore + this.#admitCount + this.#refusals;
    return this.#refusals > REFUSED_BUDGET * answers;
  }

  /**
   * Whether to probe above a found limit now: once per window at first; each
   * probe that a refusal answered doubles the quiet time before the next (up
   * to 32 windows), and a probe that went unanswered for its quiet time
   * brings it back to one window, the next after it sooner and further. A
   * refusal can cost a long hold (Retry-After), so probing a limit that holds
   * must become rare.
   */
  #probeDue(now: number): boolean {
    const window = this.limits.windowMs;
    const probed = !Number.isNaN(this.#lastProbeAt);
    const passed = probed && this.#lastProbeAt > this.#lastCutAt;
    if (passed) this.#probeEveryMs = window;
    const since = Math.max(this.#lastCutAt, probed ? this.#lastProbeAt : -Infinity);
    // After probes that passed, the next comes sooner (half the wait each
    // time, a round at least) and goes further: a limit found low (a
    // concurrency cap read as a rate, a bound inferred from an estimate that
    // counted a long hold) is left in a few windows, not at PROBE_STEP per
    // window (a 6-at-once site read as 9.4/s: 0.45 of its rate over 3,000
    // pages, 0.54 now). Where a refusal costs a long hold, each wait is
    // twice as long and the step at most half as large (a refused probe
    // costs the hold).
    const halvings = this.#probesPassed + (this.#costlyRefusal ? 0 : 1);
    const wait = passed
      ? Math.max(this.#roundMs, window / 2 ** halvings)
      : Math.max(window, this.#probeEveryMs);
    if (now - since < wait) return false;
    if (passed) this.#probesPassed++;
    this.#lastProbeAt = now;
    return true;
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
      // Doubles per round, one more per admitted answer: doubled at once,
      // the new half went out at one instant and a concurrency cap refused
      // all of it (8 refused at a cap of 8, read as a cap of 15).
      this.#growTo = Math.min(this.limits.maxConcurrency, knobs.concurrency * 2);
      this.#growBy = 0;
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
  return resolveRampup(base, input);
}
