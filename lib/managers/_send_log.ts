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

  // The scans below walk from the newest send back, as plain loops: `take`
  // runs once per admitted answer of an adaptive scope, and a visitor
  // closure per call cost the core benchmark several per cent.

  /**
   * The in-flight count of a send at `sentAt` (within a microsecond), taken
   * so that it is not found twice. Of sends at one instant, a refusal takes the highest count (the
   * later sends of a burst are the refused ones), an admit the lowest.
   */
  take(sentAt: number, highest: boolean): number | undefined {
    const times = this.#at, counts = this.#inFlight, cap = this.capacity;
    let best = -1;
    let bestF = 0;
    for (let k = 1, n = Math.min(this.count, cap); k <= n; k++) {
      const i = (this.count - k) % cap;
      const at = times[i]!;
      if (at < sentAt - SAME_INSTANT_MS) break;
      const f = counts[i]!;
      if (at <= sentAt + SAME_INSTANT_MS && f !== 0) {
        if (best < 0 || (highest ? f > bestF : f < bestF)) {
          best = i;
          bestF = f;
        }
      }
    }
    if (best < 0) return undefined;
    counts[best] = 0;
    return bestF;
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
    const times = this.#at, counts = this.#inFlight, cap = this.capacity;
    let n = 0;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const i = (this.count - k) % cap;
      if (times[i]! < sentAt - SAME_INSTANT_MS && counts[i] !== 0) n++;
    }
    return n;
  }

  /** Sends after `from` (by more than an instant) up to `to` whose answer has not been taken. */
  pendingWithin(from: number, to: number): number {
    const times = this.#at, counts = this.#inFlight, cap = this.capacity;
    let n = 0;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const i = (this.count - k) % cap;
      const at = times[i]!;
      if (at <= from + SAME_INSTANT_MS) break;
      if (at <= to && counts[i] !== 0) n++;
    }
    return n;
  }

  /** Sends at the instant `sentAt` (within a microsecond) whose answer has not been taken. */
  pendingAt(sentAt: number): number {
    const times = this.#at, counts = this.#inFlight, cap = this.capacity;
    let n = 0;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const i = (this.count - k) % cap;
      const at = times[i]!;
      if (at < sentAt - SAME_INSTANT_MS) break;
      if (at <= sentAt + SAME_INSTANT_MS && counts[i] !== 0) n++;
    }
    return n;
  }

  /** Sends at or after `from`. */
  countSince(from: number): number {
    const times = this.#at, cap = this.capacity;
    let n = 0;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      if (!(times[(this.count - k) % cap]! >= from)) break;
      n++;
    }
    return n;
  }

  /** Sends at the instant `sentAt` (within a microsecond, or within `withinMs`). */
  atInstant(sentAt: number, withinMs = SAME_INSTANT_MS): number {
    const times = this.#at, cap = this.capacity;
    let n = 0;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const at = times[(this.count - k) % cap]!;
      if (at < sentAt - withinMs) break;
      if (at <= sentAt + withinMs) n++;
    }
    return n;
  }

  /** The time of the last send before `sentAt`, or undefined. */
  before(sentAt: number): number | undefined {
    const times = this.#at, cap = this.capacity;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const at = times[(this.count - k) % cap]!;
      if (at < sentAt) return at;
    }
    return undefined;
  }

  /** The time of the first send after `sentAt` (by more than an instant), or undefined. */
  after(sentAt: number): number | undefined {
    const times = this.#at, cap = this.capacity;
    let found: number | undefined;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const at = times[(this.count - k) % cap]!;
      if (at <= sentAt + SAME_INSTANT_MS) break;
      found = at;
    }
    return found;
  }

  /**
   * A send at `sentAt` was refused: a refusal holds no slot at the site, so
   * the sends after it that are still unanswered had one fewer in flight
   * there than they counted.
   */
  discount(sentAt: number): void {
    const times = this.#at, counts = this.#inFlight, cap = this.capacity;
    for (let k = 1, m = Math.min(this.count, cap); k <= m; k++) {
      const i = (this.count - k) % cap;
      if (times[i]! <= sentAt + SAME_INSTANT_MS) break;
      const f = counts[i]!;
      if (f > 1) counts[i] = f - 1;
    }
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
