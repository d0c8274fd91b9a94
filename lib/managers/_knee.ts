/**
 * The knee of a server that slows down instead of refusing: past some count
 * in flight its answers take longer and it serves no more per second (or
 * fewer: a backend that thrashes). No refusal tells an adaptive scope of it,
 * so its slow start would keep every slot it is allowed. The meter reads
 * rounds of admitted answers (a few round trips each): what was admitted per
 * second, the mean latency and the mean count in flight when each answer
 * came. A round with more in flight than the best one so far that served no
 * more per second (10%) and took much longer (30%) says the knee is the best
 * round's count in flight.
 *
 * Rounds last as rampup's do (`MIN_ROUND_MS`, `ROUND_TRIPS` mean latencies).
 * Pure arithmetic: time is passed in (ms).
 *
 * @module
 */
import { LATENCY_WEIGHT, MIN_ROUND_MS, ROUND_TRIPS } from "./_rampup.ts";

/** Admits a round needs before it says anything. */
const KNEE_MIN_ADMITS = 8;
/** More in flight that gained less than this share per second gained nothing. */
const KNEE_GAIN = 1.1;
/** ... while its mean latency grew by at least this factor. */
const KNEE_SLOWER = 1.3;

/** One round: admits per second, mean latency, mean count in flight at its answers. */
interface KneeRound {
  readonly rate: number;
  readonly latencyMs: number;
  readonly inFlight: number;
}

/** Finds the knee of a server that slows down (see the module doc). */
export class KneeMeter {
  #start = Number.NaN;
  #admits = 0;
  #latencySum = 0;
  #inFlight = 0;
  #latency = Number.NaN;
  #best: KneeRound | undefined;

  /**
   * An admitted answer at `now` that took `latencyMs`, with `inFlight`
   * requests out when it came (itself included).
   *
   * @returns The count in flight to keep when this answer closed a round that
   *   found the knee, else `undefined`.
   */
  admitted(now: number, latencyMs: number, inFlight: number): number | undefined {
    this.#latency = Number.isNaN(this.#latency)
      ? latencyMs
      : this.#latency + LATENCY_WEIGHT * (latencyMs - this.#latency);
    if (Number.isNaN(this.#start)) this.#open(now);
    this.#admits++;
    this.#latencySum += latencyMs;
    this.#inFlight += inFlight;
    const span = now - this.#start;
    if (span < Math.max(MIN_ROUND_MS, ROUND_TRIPS * this.#latency)) return undefined;
    const round: KneeRound = {
      rate: (this.#admits * 1000) / span,
      latencyMs: this.#latencySum / this.#admits,
      inFlight: this.#inFlight / this.#admits,
    };
    const enough = this.#admits >= KNEE_MIN_ADMITS;
    this.#open(now);
    if (!enough) return undefined;
    const best = this.#best;
    if (
      best === undefined || round.rate > best.rate * KNEE_GAIN ||
      (round.rate > best.rate && round.inFlight <= best.inFlight)
    ) {
      this.#best = round;
      return undefined;
    }
    // More in flight for no more served, each answer slower: past the knee.
    if (round.inFlight > best.inFlight && round.latencyMs > best.latencyMs * KNEE_SLOWER) {
      // Served as many: a queue in front of so many workers, where one more
      // in flight costs nothing and one less a worker (round up). Served
      // fewer: a backend that thrashes, where one more costs (round).
      const thrashes = round.rate < best.rate / KNEE_GAIN;
      return Math.max(1, thrashes ? Math.round(best.inFlight) : Math.ceil(best.inFlight));
    }
    return undefined;
  }

  #open(now: number): void {
    this.#start = now;
    this.#admits = 0;
    this.#latencySum = 0;
    this.#inFlight = 0;
  }
}
