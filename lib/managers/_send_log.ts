/**
 * The last sends of a scope, each with the number of requests in flight when
 * it went (the request itself included): a fixed ring, no allocation per
 * send. The adaptive arithmetic reads it to tell a concurrency cap from a
 * rate (`scope_manager.ts` before a scope's first trigger, `_rampup.ts`
 * after it).
 *
 * @module
 */

/**
 * Times closer than this are one instant: an answer's send time is worked
 * out as its arrival minus its latency, which in floating point (a real
 * clock's fractional ms) can differ from the logged time in the last bits.
 */
export const SAME_INSTANT_MS = 1e-3;

/** In-flight counts are kept up to this. */
export const MAX_IN_FLIGHT = 255;

/** In-flight counts above this are one for {@link SendLog.admitted}. */
const ADMIT_F = 32;

/** A ring of (send time, in flight) pairs. */
export class SendLog {
  readonly #at: Float64Array;
  readonly #inFlight: Uint8Array;
  /** Per in-flight count, the earliest admitted send with it (Infinity: none). */
  #firstAdmit: Float64Array | undefined;
  /** Sends logged so far (the ring keeps the last `capacity`). */
  count = 0;

  constructor(readonly capacity: number) {
    this.#at = new Float64Array(capacity);
    this.#inFlight = new Uint8Array(capacity);
  }

  push(at: number, inFlight: number): void {
    const i = this.count++ % this.capacity;
    this.#at[i] = at;
    this.#inFlight[i] = Math.max(1, Math.min(inFlight, MAX_IN_FLIGHT));
  }

  /** Calls `visit(at, inFlight, index)` from the newest send back, until it returns false. */
  #back(visit: (at: number, inFlight: number, index: number) => boolean): void {
    const n = Math.min(this.count, this.capacity);
    for (let k = 1; k <= n; k++) {
      const i = (this.count - k) % this.capacity;
      if (!visit(this.#at[i]!, this.#inFlight[i]!, i)) return;
    }
  }

  /**
   * The in-flight count of a send at `sentAt` (within a microsecond), taken
   * so that it is not found twice. Of sends at one instant, a refusal takes the highest count (the
   * later sends of a burst are the refused ones), an admit the lowest.
   */
  take(sentAt: number, highest: boolean): number | undefined {
    let best = -1;
    this.#back((at, f, i) => {
      if (at < sentAt - SAME_INSTANT_MS) return false;
      if (at <= sentAt + SAME_INSTANT_MS && f !== 0) {
        if (best < 0 || (highest ? f > this.#inFlight[best]! : f < this.#inFlight[best]!)) {
          best = i;
        }
      }
      return true;
    });
    if (best < 0) return undefined;
    const f = this.#inFlight[best]!;
    this.#inFlight[best] = 0;
    return f;
  }

  /** The send at `sentAt`, with `inFlight` in flight, was admitted. */
  admitted(sentAt: number, inFlight: number): void {
    const first = this.#firstAdmit ??= new Float64Array(ADMIT_F + 1).fill(Infinity);
    const k = Math.min(inFlight, ADMIT_F);
    if (sentAt < first[k]!) first[k] = sentAt;
  }

  /**
   * The most in flight that an admitted send had, of the sends up to `sentAt`
   * (0: none). Later sends may have counted a refusal still on its way in
   * their in-flight count, and a refusal holds no slot at the site: for the
   * refusal of the send at `sentAt`, only the sends before it tell what the
   * site served at once.
   */
  admittedBefore(sentAt: number): number {
    const first = this.#firstAdmit;
    if (first === undefined) return 0;
    for (let k = ADMIT_F; k >= 1; k--) if (first[k]! <= sentAt + SAME_INSTANT_MS) return k;
    return 0;
  }

  /**
   * The most in flight that an admitted send from `from` to `to` went with
   * (0: none known). Sends a moment apart may reach the site in either
   * order: a later one admitted with more in flight got there first.
   */
  admittedWithin(from: number, to: number): number {
    const first = this.#firstAdmit;
    if (first === undefined) return 0;
    for (let k = ADMIT_F; k >= 1; k--) {
      if (first[k]! >= from - SAME_INSTANT_MS && first[k]! <= to) return k;
    }
    return 0;
  }

  /** Sends before `sentAt` (by more than an instant) whose answer has not been taken. */
  pendingBefore(sentAt: number): number {
    let n = 0;
    this.#back((at, f) => {
      if (at < sentAt - SAME_INSTANT_MS && f !== 0) n++;
      return true;
    });
    return n;
  }

  /** Sends at the instant `sentAt` (within a microsecond) whose answer has not been taken. */
  pendingAt(sentAt: number): number {
    let n = 0;
    this.#back((at, f) => {
      if (at < sentAt - SAME_INSTANT_MS) return false;
      if (at <= sentAt + SAME_INSTANT_MS && f !== 0) n++;
      return true;
    });
    return n;
  }

  /** Sends at or after `from`. */
  countSince(from: number): number {
    let n = 0;
    this.#back((at) => at >= from && ++n > 0);
    return n;
  }

  /** Sends at the instant `sentAt` (within a microsecond, or within `withinMs`). */
  atInstant(sentAt: number, withinMs = SAME_INSTANT_MS): number {
    let n = 0;
    this.#back((at) => {
      if (at < sentAt - withinMs) return false;
      if (at <= sentAt + withinMs) n++;
      return true;
    });
    return n;
  }

  /** The time of the last send before `sentAt`, or undefined. */
  before(sentAt: number): number | undefined {
    let found: number | undefined;
    this.#back((at) => {
      if (at < sentAt) {
        found = at;
        return false;
      }
      return true;
    });
    return found;
  }

  /**
   * A send at `sentAt` was refused: a refusal holds no slot at the site, so
   * the sends after it that are still unanswered had one fewer in flight
   * there than they counted.
   */
  discount(sentAt: number): void {
    this.#back((at, f, i) => {
      if (at <= sentAt + SAME_INSTANT_MS) return false;
      if (f > 1) this.#inFlight[i] = f - 1;
      return true;
    });
  }

  /** Copies the sends of `other` in, oldest first. */
  copyFrom(other: SendLog): void {
    const n = Math.min(other.count, other.capacity);
    for (let k = n; k >= 1; k--) {
      const i = (other.count - k) % other.capacity;
      const j = this.count++ % this.capacity;
      this.#at[j] = other.#at[i]!;
      this.#inFlight[j] = other.#inFlight[i]!;
    }
    if (other.#firstAdmit !== undefined) this.#firstAdmit = other.#firstAdmit.slice();
  }
}
