/**
 * A rate-limit budget as the scope keeps it: announced in headers (a
 * remaining count until a reset, a limit per window), told by the server's
 * holds or read from a block of refusals without holds (a quota inferred by
 * `_rampup.ts`; a blind one holds the scope itself), paced over the time to
 * its reset and rolled on window by window. Pure: every method takes `now`.
 *
 * Size: one window whose rules (pacing, rolling, the inferred quota's
 * growth, probes and blind tries, the epoch-reset try) read and write the
 * same state.
 *
 * @module
 */
import type { ScopeState } from "./scope_manager_protocol.ts";

/**
 * A quota told by the server's holds (`lib/managers/_rampup.ts`): `limit`
 * per `windowMs`, the next window from `resetAt`; admits answered later of
 * sends in [lateFrom, lateUntil) count too (see `AnnouncedWindow.admitted`).
 * @internal
 */
export interface ToldQuota {
  readonly limit: number;
  readonly windowMs: number;
  readonly resetAt: number;
  readonly lateFrom: number;
  readonly lateUntil: number;
  /**
   * Told by a block of refusals without holds (a window read by probing,
   * see `blind`), not by holds; `left` may go before `resetAt`.
   */
  readonly blind?: boolean;
  readonly left?: number;
  /** When the admitted send that ended the block went (a blind quota's window began then). */
  readonly since?: number;
  /**
   * Counted in the clock's seconds (`_rampup.ts`, `#clockWindow`): the
   * window's length is known, not read from a hold's whole seconds.
   */
  readonly clock?: boolean;
  /**
   * The refusal it came from read as a concurrency cap of at most this many
   * as well (`_rampup.ts`, `#heldLikeWindow`): the probe goes as soon as the
   * first window's quota is spent (see `#roll`).
   */
  readonly capUpTo?: number;
}

/**
 * A budget announced in rate-limit headers, paced: `left` requests may go
 * before `resetAt`, one per `gapMs` after the last. At the reset a learned
 * quota (limit and window) opens the next window; without one the scope is
 * free again until a response announces more.
 * @internal
 */
export class AnnouncedWindow {
  /** The learned quota: requests per window (NaN: not announced). */
  limit = Number.NaN;
  /** Its window, ms (NaN: not announced). */
  windowMs = Number.NaN;
  /** End of the budget in force (NaN: none). */
  resetAt = Number.NaN;
  /** Requests that may still go before `resetAt`. */
  left = 0;
  gapMs = 0;
  lastSentAt = -Infinity;
  /** The remaining count last announced (Infinity: a new window began). */
  lastRemaining = Infinity;
  /** Whether the quota was told by the server's holds, not announced in headers. */
  inferred = false;
  /**
   * The inferred quota was read from a block of refusals that came without
   * holds: the scope holds itself at a refusal (see `blindRefused`).
   */
  blind = false;
  /** An inferred quota's window as told by the holds (its probes stay within a factor of 2). */
  toldWindowMs = 0;
  /** The longest inferred window that was refused early (shorter ones are too short too). */
  tooShortMs = 0;
  /** Refusals before this time were answered for by the last correction. */
  shrunkUntil = 0;
  /** The length of the inferred window in force (`windowMs` is the next one's). */
  currentWindowMs = 0;
  /** The length of the window that ended when the one in force began. */
  endedWindowMs = 0;
  /** Inferred windows since the last refusal within one. */
  quietWindows = 0;
  /** Quiet inferred windows before the quota tries one more. */
  growthWindows = INFERRED_GROWTH_WINDOWS;
  /** The window in force is the first to try one more. */
  tryingMore = false;
  /** The share the next quiet window shortens the inferred window by. */
  shrinkStep = INFERRED_STEP;
  /** Quiet windows at the floor (half the told window), none refused early. */
  atFloor = 0;
  /**
   * From when the holds are known to have told no window (NaN: not known):
   * quiet for INFERRED_OUTGROWN windows at half the told window, or a probe
   * admitted (see `probe`). The manager then hands the scope back to its
   * controller.
   */
  outgrownAt = Number.NaN;
  /** Early refusals in a row within an inferred quota (see `refusedWithin`). */
  #earlyInRow = 0;
  /** Admits since the inferred quota's first window opened, and when it opened. */
  #quotaAdmits = 0;
  #quotaFrom = Number.NaN;
  /** The admitted rate the quota leaves off at when the site reopened no window (NaN: not so). */
  #slidingRate = Number.NaN;
  /**
   * The probe of a quota told by holds: up to half the quota more, half way
   * through its first window, at the quota's pace ("due" until that window
   * opens, "armed" in it, "on" from the first extra send until a refusal or
   * enough admits, or the window after; then "done").
   */
  probe: "due" | "armed" | "on" | "done" = "done";
  /** When the armed probe may go. */
  probeAt = Number.NaN;
  /** The probe's sends went from this time until `probeUntil` (the end of its window). */
  probeFrom = Number.NaN;
  probeUntil = Number.NaN;
  /** Extra sends admitted so far, and how many tell that the holds told no window. */
  probeAdmits = 0;
  probeNeed = 0;
  /**
   * See `ToldQuota.capUpTo` (0: none): while above 0, the probe (armed or
   * running) goes once the first window's quota is spent.
   */
  #capUpTo = 0;
  /** The probe that said the holds told no window went once the quota was spent. */
  probedEarly = false;

  /**
   * A quota of `limit` per `windowMs` told by the server's holds (not
   * announced): nothing until `resetAt`, the hold's end, then bursts of
   * `limit` (see `#roll`).
   */
  infer(now: number, told: ToldQuota): void {
    const { limit, windowMs, resetAt } = told;
    this.inferred = true;
    this.blind = told.blind === true;
    this.#lateFrom = told.lateFrom;
    this.#lateUntil = told.lateUntil;
    this.limit = limit;
    this.windowMs = windowMs;
    this.toldWindowMs = windowMs;
    this.tooShortMs = 0;
    this.quietWindows = 0;
    this.shrinkStep = INFERRED_STEP;
    this.atFloor = 0;
    this.currentWindowMs = windowMs;
    this.endedWindowMs = windowMs;
    // A window read by probing a block is no hold's length to doubt (the
    // probe's half a quota more, half way through a window that began at a
    // guessed reset, went into the site's next window and read as no window).
    this.probe = this.blind ? "done" : "due";
    this.#capUpTo = this.blind ? 0 : told.capUpTo ?? 0;
    if (told.clock === true) {
      // Counted in the clock's seconds, three alike: the window is no hold's
      // length to shorten (the shortest a quiet window tries is tooShortMs
      // times 1 + INFERRED_STEP / 3, see `#roll`: the second itself), and
      // its quota was counted whole (one more is tried as rarely as after
      // the most refused tries).
      this.tooShortMs = windowMs / (1 + INFERRED_STEP / 3);
      this.growthWindows = INFERRED_GROWTH_MAX;
    }
    this.#earlyInRow = 0;
    this.#quotaAdmits = 0;
    this.#quotaFrom = resetAt;
    this.#slidingRate = Number.NaN;
    // Refusals of requests in flight at this one were told already.
    this.shrunkUntil = told.blind === true ? now : resetAt;
    this.start(now, resetAt, told.left ?? 0);
    if (this.blind) {
      this.#fresh(now, told.since ?? now);
      this.#lateStartAt = told.since ?? -Infinity;
      this.#beginBlindWindow(told.since ?? now, 1);
    }
  }

  /**
   * A refusal without a hold, within a blind quota (see `blind`), of a
   * request sent at `sentAt`. A probe's extra send, or a refusal late in the
   * window (more than half the quota sent): nothing more until this
   * window's end, the site's reset as far as the scope knows (late, the
   * quota is one less, see `refusedWithin`). Early in it: the site's window
   * had not reset yet (this window is too short, see `refusedWithin`), and
   * one request tries again a sixteenth of a window later, then the next
   * only once it is answered: admitted, the window begins at its send
   * (`blindAdmitted`); refused, the next try waits as long again.
   */
  blindRefused(now: number, sentAt: number): boolean {
    // A window re-opens with its whole quota; a bucket whose burst ran out
    // admits the one it refilled and refuses the next: no window.
    if (sentAt >= this.#freshFrom && this.#freshAdmits < FRESH_ADMITS) {
      if (this.#evenSpread) return false;
      // The first time, a sliding log as well: it refuses a burst sent a
      // window after the last one began whenever that one went out more
      // slowly (its sends waited for free slots), where a fixed window
      // takes it. The quota stays, spread over its whole window from now
      // on (a sliding log of 5 per second at 150 ms was read as a bucket
      // here, then as windows of 15 per 3.2 s: 0.47 of its rate, 26
      // refused; 0.84 and 11 now); refused so again, it is a bucket.
      this.#evenSpread = true;
      this.refusedWithin(now, now);
      this.#blindRetry(now);
      this.#firstFrom = Infinity;
      return true;
    }
    // A window admits its whole quota once it re-opened: refused after a
    // few admits, well under it, the site refills (a bucket of 30
    // at 5/s, read as a window of 34 per 1.2 s, admitted six of each burst
    // and refused ten: 22% refused).
    if (
      sentAt >= this.#windowFrom && this.#windowAdmits >= FRESH_ADMITS &&
      this.#windowAdmits < this.limit / BLIND_REFILL_SHARE
    ) {
      return false;
    }
    const retry = this.#blindRetryFrom;
    if (!Number.isNaN(retry) && sentAt >= retry) {
      this.#blindRetry(now);
      return true;
    }
    if (now < this.shrunkUntil) return true;
    if (this.probing(sentAt)) {
      this.probeRefused(this.resetAt);
      return true;
    }
    const sent = this.limit - Math.max(0, this.left);
    if (sent > this.limit / 2 && this.resetAt > now) {
      // Short of its quota: the site counted more than this window's
      // sends (a sliding-window counter weighs the window before; a
      // sliding log, the last window's late sends). Spread over the whole
      // window from now on, not in bursts (a counter of 30 per 2 s at 20
      // ms took 10-27 of each burst: 0.65 of its rate over 600 pages, 21
      // refused; 0.87 and 12 now; 1,500 pages of every shape,
      // bench/zoo_grids.bench.ts: 40 -> 24 of 297 missing).
      if (sent < this.limit) this.#evenSpread = true;
      this.refusedWithin(now, this.resetAt);
      return true;
    }
    this.refusedWithin(now, now);
    this.#blindRetry(now);
    this.#firstFrom = Infinity;
    return true;
  }

  /** A blind window began with the admitted send at `sentAt` (see `blindRefused`). */
  #fresh(now: number, sentAt: number): void {
    this.#freshFrom = sentAt;
    this.#freshAdmits = 1;
    this.#freshSent = 1;
    this.#freshUntil = now + this.#blindWaitMs();
  }

  /**
   * Sends of a fresh blind window so far (see `#fresh`): FRESH_ADMITS - 1
   * after the admitted try, then none until they are admitted (or until
   * `#freshUntil`, should an answer never come): a bucket refuses all that
   * a burst sends at once (7 of 8 at a bucket of 38 read as a window).
   */
  #freshSent = 0;
  #freshUntil = 0;

  /** Sends from this time on were made in a window that began with an admitted try (Infinity: none). */
  #freshFrom = Infinity;
  /** What was admitted of them so far (FRESH_ADMITS: a window's quota, not a bucket's refill). */
  #freshAdmits = 0;

  /** Sends spread over the whole window, not in bursts (see `blindRefused`, both branches, and `refusedWithin`). */
  #evenSpread = false;
  /** Refusals late in a quota told by holds but short of it, in windows in a row (see `refusedWithin`). */
  #lateShort = 0;

  /**
   * The share of a window its quota's sends go over: a quota told by holds
   * or read from a block in bursts like the site took (unless tried as a
   * sliding log, `#evenSpread`); an announced one over the whole window.
   */
  #spread(): number {
    return this.inferred && !this.#evenSpread ? ANNOUNCED_SPREAD : 1;
  }

  /**
   * One try at `now` plus a sixteenth of the window, alone until answered
   * (see `blindRefused`); twice as long after each refused try (a window
   * read 0.5 s short was refused four times a sixteenth apart).
   */
  #blindRetry(now: number): void {
    const again = !Number.isNaN(this.#blindRetryFrom);
    this.#blindRetryMs = again ? 2 * this.#blindRetryMs : this.#blindWaitMs();
    // No sooner than a window after the send that ended the block: a window
    // that begins at the first request after a reset (a sliding log, most
    // per-client ones) began there, not half way from the last refused
    // probe (a sliding window of 10 per 2 s was refused three times more).
    const at = Math.max(now + this.#blindRetryMs, this.#lateStartAt + this.windowMs);
    this.#lateStartAt = -Infinity;
    this.#blindRetryFrom = at;
    this.resetAt = at;
    this.left = 0;
    this.shrunkUntil = at;
  }

  /** When the admitted send that ended the block went (-Infinity: used, see `#blindRetry`). */
  #lateStartAt = -Infinity;
  /** The wait before the pending blind try. */
  #blindRetryMs = 0;
  /** The first send of a blind try (see `blindRefused`) goes at or after this time (NaN: none pending). */
  #blindRetryFrom = Number.NaN;

  /** A blind window began here: its first send goes alone until answered (Infinity: none pending). */
  #firstFrom = Infinity;
  /** When the blind window in force began, and how many of its sends were made and admitted. */
  #windowFrom = Infinity;
  #windowAdmits = 0;
  #blindSent = 0;
  /** When that first send went (see `#firstFrom`). */
  #firstSentAt = -Infinity;

  /**
   * Headers announce the budget now: nothing of the blind quota's own
   * holding stays (its first send alone, its fresh wait, its tries, its
   * slow start would pace an announced budget).
   */
  #endBlind(): void {
    this.blind = false;
    this.#freshFrom = Infinity;
    this.#firstFrom = Infinity;
    this.#blindRetryFrom = Number.NaN;
    this.#windowFrom = Infinity;
  }

  /** A blind window begins at `at`, with `admitted` of its sends made and admitted already. */
  #beginBlindWindow(at: number, admitted: number): void {
    this.#windowFrom = at;
    this.#windowAdmits = admitted;
    this.#blindSent = admitted;
  }

  /** How long a blind window's sends wait for an answer that does not come: a sixteenth of it, at least BLIND_RETRY_MIN_MS. */
  #blindWaitMs(): number {
    return Math.max(BLIND_RETRY_MIN_MS, this.windowMs / 16);
  }

  /** An admitted request sent at `sentAt`: a blind try's admit begins the window (see `blindRefused`). */
  blindAdmitted(now: number, sentAt: number): void {
    if (sentAt >= this.#windowFrom) this.#windowAdmits++;
    if (sentAt >= this.#firstFrom) this.#firstFrom = Infinity;
    if (sentAt >= this.#freshFrom && ++this.#freshAdmits >= FRESH_ADMITS) {
      this.#freshFrom = Infinity;
    }
    const retry = this.#blindRetryFrom;
    if (Number.isNaN(retry) || sentAt < retry) return;
    this.#blindRetryFrom = Number.NaN;
    this.#fresh(now, sentAt);
    this.#beginBlindWindow(sentAt, 1);
    this.resetAt = sentAt + this.windowMs;
    this.left = this.limit - 1;
    this.gapMs = this.#spread() * (this.windowMs / this.limit);
  }

  /**
   * Held until `holdEnd` by a refusal within an inferred quota. Late in the
   * window (more than half the quota sent): the quota is one less. Early:
   * the site's window had not reset yet, so this window is too short (and
   * any shorter one), and it lengthens back, at least half way to the told
   * window. Either way the next window starts at the hold's end, in step
   * with the site's.
   */
  refusedWithin(now: number, holdEnd: number): void {
    const sent = this.limit - Math.max(0, this.left);
    if (this.#capUpTo > 0 && this.probe === "armed") {
      // Refused before its quota was spent: a window (or a counter that
      // weighs the one before), no cap; the probe goes half way through, as
      // for any quota told by holds (sent once this quota was spent, its
      // extras weighed on the counter's next windows: a counter of 100 per
      // 10 s was refused early three windows in a row and paced at 2/s).
      this.#capUpTo = 0;
      this.probeAt += this.toldWindowMs / 2;
    }
    if (!this.blind && sent > this.limit / 2 && sent < this.limit) {
      // Late in the window but short of its quota, in two windows in a row
      // (the second the next one rolled after the first's refusal): the
      // site counts more than this window's sends (a sliding-window
      // counter weighs the window before), so the quota is spread over its
      // whole window from then on, as a blind one is (see `blindRefused`). Not at the first such refusal: a
      // sliding log refuses so now and then where its slots free later than
      // the hold said, and takes its quota in bursts (a log of 300 per
      // minute spread at once, 0.90 -> 0.74). A counter of 30 per 2 s at 20
      // ms answering Retry-After in seconds: 0.70 over 600 pages, 17
      // refused; 0.84 and 8 now.
      this.#lateShort = this.quietWindows > 1 ? 1 : this.#lateShort + 1;
      if (this.#lateShort >= 2) this.#evenSpread = true;
    }
    if (sent > this.limit / 2) {
      // Refused in the window that tried one more: the next try waits twice
      // as many windows (each costs a hold).
      if (this.tryingMore) {
        this.growthWindows = Math.min(INFERRED_GROWTH_MAX, 2 * this.growthWindows);
      }
      this.limit = Math.max(1, this.limit - 1);
      this.#earlyInRow = 0;
    } else {
      // Refused early in EARLY_IN_ROW windows in a row, each begun at the
      // last hold's end: the site reopens no quota when its holds end (a
      // sliding window frees a slot at a time, told by each hold). What it
      // admitted since the first window is its rate: the controller paces
      // from there. (A sliding-window counter of 19 per 10 s, told 16 per
      // 4.6 s by its first hold, refused a send of every window for good:
      // 32% of its requests.)
      // (In a row: a window that went quiet in between ends the row.)
      if (this.quietWindows > 1) this.#earlyInRow = 0;
      if (!this.blind && ++this.#earlyInRow >= EARLY_IN_ROW && now > this.#quotaFrom) {
        this.#slidingRate = (this.#quotaAdmits * 1000) / (now - this.#quotaFrom);
        this.outgrownAt = now;
      }
      // The window that ended when this one began was too short: this one
      // began before the site's had reset.
      const w = this.endedWindowMs;
      this.tooShortMs = Math.max(this.tooShortMs, w);
      // Back at least half way to the told window: creeping up 1% per
      // refusal from far below it cost a refusal every other window.
      this.windowMs = Math.min(
        this.toldWindowMs * 2,
        Math.max(w / (1 - INFERRED_STEP) ** 2, (this.tooShortMs + this.toldWindowMs) / 2),
      );
    }
    this.quietWindows = 0;
    this.shrinkStep = INFERRED_STEP;
    this.atFloor = 0;
    this.start(now, holdEnd, 0);
    this.currentWindowMs = this.windowMs;
    this.endedWindowMs = this.windowMs;
    this.shrunkUntil = holdEnd;
  }
  /** Sends in [#lateFrom, #lateUntil) were made in the cycle the quota was told by (see `admitted`). */
  #lateFrom = Number.NaN;
  #lateUntil = Number.NaN;

  /**
   * An admit of a request sent at `sentAt`, within a quota told by holds:
   * counted toward the rate the quota leaves off at (see `refusedWithin`),
   * and, answered after the hold that told the quota but sent in the cycle
   * that told it, before the refused request, counted by the site in that
   * window too. (A window of 50 per 5 s at 7 in flight read 45: six sends
   * were still on their way when the refusal came back, five admitted;
   * every later window sent 45.)
   */
  admitted(sentAt: number): void {
    if (!this.inferred) return;
    if (sentAt >= this.#lateFrom && sentAt < this.#lateUntil) this.limit++;
    if (sentAt >= this.#quotaFrom) this.#quotaAdmits++;
  }

  /** When the latest-sent announcing request so far went. */
  #lastSentAt = -Infinity;

  /**
   * Whether a request sent after `sentAt` was answered already: answers
   * whose latencies vary come out of order, and an older one's remaining,
   * higher than the last one's, read as a new window (a fixed window of 17
   * per second at 133 ms ± 50% was held through every other window: 0.77,
   * 13 refused; 0.91 and none now).
   */
  answeredBefore(sentAt: number): boolean {
    return sentAt < this.#lastSentAt;
  }

  /** An announcing request sent at `sentAt` was answered, in order. */
  sentAt(sentAt: number): void {
    this.#lastSentAt = sentAt;
  }

  /**
   * Whether the site counts requests older than its window: a sliding-window
   * counter (Cloudflare's, Upstash's) weighs the last window's count on the
   * current one and tells its current window's end as the reset, while it
   * frees room all the time as that weight falls. Waiting out each reset
   * from a spent budget ran at half its rate or less (zoo: 50 per 10 s
   * 0.60, 80 per 2 s 0.52); a spent budget now waits a slot's time after
   * the last send, and the rolled windows pace at the window's rate. Read
   * by `counterSeen`; a send that reading let out refused undoes it for good.
   */
  slidingCounter = false;
  /** A send the counter's reading let out was refused: not read again. */
  #counterRefuted = false;
  /** The scope's sends per eighth of a window, the latest eighth at `#binAt` (see `#sentWithin`). */
  #bins: Uint32Array | undefined;
  #binMs = Number.NaN;
  #binAt = 0;
  /** Where the last hold of a spent budget until the told reset ended (Infinity: answered since). */
  #heldTo = Infinity;

  /**
   * An answer told `remaining` left of `limit` (`refused`: a refusal's). What
   * a fixed window has left is the limit less what the scope sent since it
   * began, and a sliding log's the limit less what it sent within a window:
   * with what the scope sent within a window, at least the limit either way.
   * Far less (under a quarter of it) and the site still counts requests
   * older than its window: a sliding-window counter just after its window
   * rolled over a busy one.
   */
  counterSeen(
    now: number,
    sentAt: number | undefined,
    resetAt: number,
    remaining: number,
    refused: boolean,
  ): void {
    const heldTo = this.#heldTo;
    if (sentAt !== undefined && sentAt >= heldTo) this.#heldTo = Infinity;
    const told = this.#lastTold;
    const toldSentAt = this.#lastToldSentAt;
    this.#lastTold = resetAt;
    if (sentAt !== undefined) this.#lastToldSentAt = sentAt;
    if (refused) {
      if (this.slidingCounter) {
        // A send a slot after the last one refused: no counter after all.
        this.slidingCounter = false;
        this.#counterRefuted = true;
      } else if (
        !this.#counterRefuted && this.limit >= COUNTER_LIMIT_MIN && sentAt !== undefined &&
        sentAt >= heldTo && remaining < 1 && resetAt > heldTo + this.windowMs / 2
      ) {
        // The first send after a hold until the told reset refused, and the
        // reset now a window later: a fixed window has reset by then, a
        // sliding log's told reset (its oldest request's expiry, rounded up)
        // has freed a slot, a counter still weighs the window it spent. A
        // counter of 20 per second told by epoch resets lost every other
        // window to a refusal's hold: 0.50, 4.6% refused; 0.90, 0.4% now.
        this.slidingCounter = true;
      }
      return;
    }
    if (this.slidingCounter || this.#counterRefuted || !(this.limit >= COUNTER_LIMIT_MIN)) return;
    if (remaining + this.#sentWithin(now) < this.limit / 4) this.slidingCounter = true;
    else if (
      sentAt !== undefined && sentAt >= heldTo && remaining < 1 &&
      resetAt > heldTo + Math.max(this.windowMs / 2, COUNTER_JUMP_MS)
    ) {
      // The first send after a hold until the told reset: spent again, and
      // the reset now a window later. A fixed window's new one has nearly
      // all of it left; a sliding log's reset is its next oldest request's
      // (a moment later, but for rounding to whole seconds); a counter
      // still weighs the busy window before (80 per 2 s: every other window
      // was waited out, 0.52).
      this.slidingCounter = true;
    } else if (
      sentAt !== undefined && sentAt >= told && toldSentAt < told &&
      remaining < this.limit / 4 && resetAt > told + Math.max(this.windowMs / 2, COUNTER_JUMP_MS)
    ) {
      // The same without a hold until that reset (the scope's last hold was a
      // try a second shorter, refused, and a Retry-After's): the first send
      // after the last answer's told reset, a quarter of the budget or less
      // left, and the reset a window later. A counter of 150 per 10 s told by
      // epoch resets sent its budget every other window, 0.50; 0.90 now. (Not
      // any send after it: a log whose budget went in a burst at its reset
      // tells a reset a window later at the burst's last sends. A log's first
      // send after a hold can still look so when epoch rounding and the hold
      // move its told reset by two seconds: one refusal, and the reading is
      // undone for good; a log of 30 per 2 s 0.94 -> 0.91 in one of twelve.)
      this.slidingCounter = true;
    }
  }

  /** The reset the last answer told, and that answer's send (see `counterSeen`). */
  #lastTold = Infinity;
  #lastToldSentAt = -Infinity;

  /** A spent budget is held until `until`, the told reset. */
  heldToReset(until: number): void {
    this.#heldTo = until;
  }

  /**
   * Sends in the last window up to `now`, or a few more: counted by eighths
   * of a window, the current one and the eight before (an eighth more than
   * the window, never less).
   */
  #sentWithin(now: number): number {
    const bins = this.#bins;
    if (bins === undefined || !(this.#binMs === this.windowMs / COUNTER_EIGHTHS)) return Infinity;
    this.#advanceBins(now);
    let n = 0;
    for (let i = 0; i < bins.length; i++) n += bins[i]!;
    return n;
  }

  #advanceBins(now: number): void {
    const bins = this.#bins!;
    const at = Math.floor(now / this.#binMs);
    if (at <= this.#binAt) return;
    for (let i = this.#binAt + 1; i <= at && i <= this.#binAt + bins.length; i++) {
      bins[i % bins.length] = 0;
    }
    this.#binAt = at;
  }

  /** A send at `now`, counted for `#sentWithin`. */
  #countSend(now: number): void {
    const w = this.windowMs;
    if (!(w > 0) || !(this.limit >= COUNTER_LIMIT_MIN) || this.slidingCounter) return;
    if (this.#bins === undefined || this.#binMs !== w / COUNTER_EIGHTHS) {
      // New, or another window: counted afresh.
      this.#bins = new Uint32Array(COUNTER_EIGHTHS + 1);
      this.#binMs = w / COUNTER_EIGHTHS;
      this.#binAt = Math.floor(now / this.#binMs);
    }
    this.#advanceBins(now);
    const bins = this.#bins;
    bins[this.#binAt % bins.length]!++;
  }

  /** When a spent budget of a sliding-window counter may send again: a slot's time after the last send. */
  counterFreedBy(now: number): number {
    const slot = this.windowMs / Math.max(1, this.limit - 1);
    return Math.max(now, this.lastSentAt + slot);
  }

  /** Whether `windowMs` was announced (a policy's `w`) rather than inferred from resets. */
  windowSaid = false;
  /** Whether resets came as epoch times in whole seconds (see `windowToTry`). */
  epochResets = false;

  /**
   * The reset to believe for an announcement of `resetAt` with `remaining`
   * left: the one in force when both tell the same reset. Servers round
   * resets up to whole seconds and count from when the request arrived, so
   * each announcement is a bound late by up to a second plus the latency; of
   * two bounds of one reset the earlier is the tighter. Two announcements
   * tell the same reset when they are less than a second (or a window)
   * apart and the budget did not grow in between (a new window's does).
   */
  sameReset(now: number, resetAt: number, remaining: number): number {
    const current = this.resetAt;
    // A reset rolled on from the last one by the window is a guess, not a
    // bound: a window that begins at its first request (most per-client
    // limiters) begins after that, and later each time.
    const same = !this.#rolled && now < current && resetAt >= current &&
      remaining <= this.lastRemaining &&
      resetAt - current < (this.windowMs < 1_000 ? this.windowMs : 1_000);
    this.#rolled = false;
    this.lastRemaining = remaining;
    return same ? current : resetAt;
  }

  /**
   * A budget of `left` requests until `resetAt`, spread over the first
   * ANNOUNCED_SPREAD of the time left. A learned quota's next windows (see
   * `#roll`) go at the quota's own rate until a response announces again.
   */
  start(now: number, resetAt: number, left: number): void {
    // The same reset told again (no later) with no more left: the spread
    // already begun goes on at its pace. Spread again over the first share
    // of the time left, each announcement would slow it (49 of a window of
    // 50 that the crawl met 0.42 s before its end, told as a second: 30
    // sent by then, 20 lost, 0.67).
    const again = now < this.resetAt && resetAt <= this.resetAt && left <= this.left &&
      this.gapMs > 0;
    const before = this.gapMs;
    this.resetAt = resetAt;
    this.left = left;
    let gap = left > 0 ? (resetAt - now) / left : 0;
    // A quota's own rate is never too fast: a token bucket announces the time
    // until it is full as its reset, in which it refills more than `left`.
    const rate = this.windowMs / this.limit;
    if (rate < gap) gap = rate;
    this.gapMs = gap * ANNOUNCED_SPREAD;
    // Over a second at most: a longer spread only slows a crawl the budget
    // does not bind (100 pages under 198 left of a minute's window took 9 s
    // for 0.4 s of work), and one it binds gets the same budget a window.
    if (left > 0 && this.gapMs * left > ANNOUNCED_SPREAD_MAX_MS) {
      this.gapMs = ANNOUNCED_SPREAD_MAX_MS / left;
    }
    if (again && before < this.gapMs) this.gapMs = before;
  }

  /** Whether `resetAt` was rolled on by `#roll` since the last announcement. */
  #rolled = false;
  /** When the rolled window in force opened. */
  #rolledAt = Number.NaN;
  /**
   * The site's window begins at the scope's first request after the last
   * one ended, not on a grid (see `told`): a rolled window opens no sooner
   * than the scope's own sends free a slot (`freedBy`).
   */
  #anchorBySends = false;
  /** Whether an admitted answer announced a budget (else only refusals do). */
  #admitsTell = false;

  /** Past the reset: the learned quota's next window, or nothing in force. */
  #roll(now: number): void {
    if (!Number.isNaN(this.#blindRetryFrom)) {
      // A blind try (see `blindRefused`): one send, then none until it is answered.
      this.resetAt = Infinity;
      this.left = 1;
      this.gapMs = 0;
      return;
    }
    if (this.#earlyRoll) {
      this.#earlyRoll = false;
      if (now < this.#earlyUntil) {
        // An early hold's end (see `earlyEnd`): one send, until the told reset.
        this.resetAt = this.#earlyUntil;
        this.left = 1;
        this.gapMs = 0;
        this.#rolled = false;
        return;
      }
    }
    const w = this.windowMs;
    if (w > 0 && this.limit >= 1) {
      const freed = this.#anchorBySends && !this.inferred ? this.freedBy(now, w) : Infinity;
      if (freed > now && freed - now < w) {
        // Not yet: the window the scope's first send of the last one began.
        this.resetAt = freed;
        this.left = 0;
        this.gapMs = 0;
        return;
      }
      const windows = Math.floor((now - this.resetAt) / w) + 1;
      this.#rolledAt = this.resetAt + (windows - 1) * w;
      this.resetAt += windows * w;
      this.#rolled = true;
      if (!this.inferred && this.toldOnRefusals) {
        if (windows === 1) this.#tryAbove();
        else {
          this.#windowSent = 0;
          this.#windowRefused = false;
        }
      }
      if (this.inferred) {
        if (this.probe === "due") {
          // A window admits nothing past its quota until it resets (a few
          // more where the quota was told short); holds that told no window
          // (the same Retry-After whatever the wait) admit half a quota more
          // half way through.
          // Where the refusal that told the quota read as a cap as well, at
          // once: a cap admits the extras at once, a window refuses the first
          // (a cap of 2 at 11 ms answering `Retry-After: 2` was held to 36
          // per 2.2 s for a window before the probe: 0.30 of its rate over
          // 300 pages; 0.40 now; a cap of 4 at 56 ms: 0.63 -> 0.72).
          this.probe = "armed";
          this.probeAt = this.resetAt - w + (this.#capUpTo > 0 ? 0 : this.toldWindowMs / 2);
          this.probeUntil = this.resetAt;
        } else if (
          this.probe === "on" && now >= this.probeUntil &&
          this.probeAdmits >= PROBE_TIMED_OUT_SHARE * this.probeNeed
        ) {
          // The probe's time ran out, not its admits: one at a time over a
          // long round trip, half a window holds fewer sends than half a
          // quota (a cap of 6 at 150 ms, held 2 s, read as 16 per 2.6 s:
          // 8 of the 10 extras admitted, none refused; it stayed a window,
          // 0.20 of the site's rate, 0.54 now). A window refuses the first
          // extra past its quota, or the few a quota read short missed.
          this.probeNeed = this.probeAdmits;
          this.probe = "done";
          this.outgrownAt = now;
        } else if (this.probe === "armed" || (this.probe === "on" && now >= this.probeUntil + w)) {
          this.probe = "done";
        }
        this.endedWindowMs = this.currentWindowMs;
        this.currentWindowMs = w;
        // A quota told by holds may be short (in flight at a refusal): one
        // more after so many windows without a refusal.
        this.tryingMore = ++this.quietWindows % this.growthWindows === 0;
        if (this.tryingMore) this.limit++;
        // A window told by holds may be long (holds end on whole seconds):
        // each window that ended without a refusal tries a shorter one.
        const floor = this.toldWindowMs / 2;
        this.windowMs = Math.max(
          floor,
          this.tooShortMs * (1 + INFERRED_STEP / 3),
          w * (1 - this.shrinkStep),
        );
        if (this.tooShortMs === 0) {
          // No window was refused early yet: the holds may be far longer
          // than the site's window (a Retry-After that is the same whatever
          // the time to the reset), and the steps grow. A window's own
          // Retry-After refuses the first step below it at once.
          // (A window read by probing a block is known to half the probe's
          // interval: the steps stay small.)
          if (!this.blind) this.shrinkStep = Math.min(INFERRED_STEP_MAX, this.shrinkStep * 2);
          if (w <= floor && ++this.atFloor >= INFERRED_OUTGROWN) this.outgrownAt = now;
        }
      }
      const limit = this.limit;
      this.left = limit;
      this.lastRemaining = Infinity;
      // A quota told by holds goes in bursts like the ones the site took.
      this.gapMs = this.#spread() * (w / limit);
      // A blind window's first send goes alone: refused, the site's window
      // had not reset yet, and a burst on its way would be refused whole
      // (five at a window of 20 per 2 s at 100 ms read 7% short).
      if (this.blind) {
        this.#firstFrom = now;
        this.#beginBlindWindow(now, 0);
      }
    } else {
      this.resetAt = Number.NaN;
    }
  }

  waitMs(now: number): number {
    if (!(now < this.resetAt)) {
      if (Number.isNaN(this.resetAt)) return 0;
      this.#roll(now);
      if (Number.isNaN(this.resetAt)) return 0;
    }
    if (this.left <= 0 && this.probe === "armed") {
      if (!(now >= this.probeAt)) return Math.min(this.resetAt, this.probeAt) - now;
      this.#startProbe(now);
    }
    if (
      this.blind && this.left > 0 && this.#freshFrom === Infinity &&
      this.#blindSent > 2 * this.#windowAdmits
    ) {
      // A blind window's sends double with its admits (a slow start): a
      // bucket read as a window refuses what is in flight when it runs dry.
      const until = this.lastSentAt + this.#blindWaitMs();
      if (now < until) return until - now;
    }
    if (
      this.left > 0 && this.#freshFrom !== Infinity && this.#freshSent >= FRESH_ADMITS &&
      now < this.#freshUntil
    ) {
      return this.#freshUntil - now;
    }
    if (this.left > 0 && this.#firstSentAt >= this.#firstFrom) {
      // The window's first send is on its way (see `#roll`).
      const until = this.#firstSentAt + this.#blindWaitMs();
      if (now < until) return until - now;
      this.#firstFrom = Infinity;
    }
    return this.left <= 0 ? this.resetAt - now : this.lastSentAt + this.gapMs - now;
  }

  /**
   * The rate a quota whose holds told no window leaves off at: its own at
   * the floor (half the told window), or twice the told one after a probe
   * admitted half a quota more half way through a window.
   */
  leaveRate(): number {
    if (this.#slidingRate > 0) return this.#slidingRate;
    return this.probed
      ? (2 * this.limit * 1000) / this.toldWindowMs
      : (this.limit * 1000) / this.windowMs;
  }

  /** Whether early refusals in a row said the site reopens no window at its holds' end (see `refusedWithin`). */
  get reopensNoWindow(): boolean {
    return this.#slidingRate > 0;
  }

  /** Whether a probe (see `probe`) said the holds told no window. */
  get probed(): boolean {
    return this.probeNeed > 0 && this.probeAdmits >= this.probeNeed;
  }

  #startProbe(now: number): void {
    this.probe = "on";
    this.probeFrom = now;
    this.probeAdmits = 0;
    // Early, one more than the cap could be: a quota told short misses at
    // most what was in flight at its refusal.
    this.probeNeed = this.#capUpTo > 0
      ? Math.min(Math.ceil(this.limit / 2), this.#capUpTo + 1)
      : Math.ceil(this.limit / 2);
    // One at a time: a window refuses the first extra past its quota, and
    // those in flight with it would be refused as well.
    this.left = 1;
  }

  /** Whether a request sent at `sentAt` was one of the probe's extra sends. */
  probing(sentAt: number): boolean {
    return this.probe === "on" && sentAt >= this.probeFrom && sentAt < this.probeUntil;
  }

  /** One of the probe's extra sends admitted: enough of them and the holds told no window. */
  probeAdmitted(now: number): void {
    if (++this.probeAdmits < this.probeNeed) {
      if (this.left <= 0) this.left = 1;
      return;
    }
    this.probe = "done";
    // From the end of this window: its extra sends are in the site's count.
    // (Sent as soon as the quota was spent, they tell no window at all.)
    this.probedEarly = this.#capUpTo > 0;
    this.outgrownAt = this.probedEarly ? now : this.resetAt;
    this.#capUpTo = 0;
  }

  /**
   * One of the probe's extra sends refused, held until `holdEnd`: a window
   * (its quota as many more as were admitted). Nothing more in this one; the
   * next begins as told (a sliding window frees slots at the pace they were
   * taken, not at the hold's end).
   */
  probeRefused(holdEnd: number): void {
    // The early probe refused (a window, or a bucket spent): the probe half
    // way through a window still tells a bucket (see `#roll`).
    this.probe = this.#capUpTo > 0 ? "due" : "done";
    this.#capUpTo = 0;
    this.left = 0;
    this.shrunkUntil = holdEnd;
  }

  onSent(now: number): void {
    this.#countSend(now);
    if (now >= this.#freshFrom) this.#freshSent++;
    if (now >= this.#windowFrom) this.#blindSent++;
    if (now >= this.#firstFrom && !(this.#firstSentAt >= this.#firstFrom)) this.#firstSentAt = now;
    if (this.limit <= SENDS_FOR_FREED && !this.inferred) {
      const sent = this.#sent ??= new Float64Array(SENDS_FOR_FREED);
      sent[this.#sentCount++ % SENDS_FOR_FREED] = now;
    }
    if (!(now < this.resetAt)) {
      if (Number.isNaN(this.resetAt)) return;
      this.#roll(now);
      if (Number.isNaN(this.resetAt)) return;
    }
    if (this.left <= 0 && this.probe === "armed" && now >= this.probeAt) this.#startProbe(now);
    this.left--;
    this.lastSentAt = now;
    this.#windowSent++;
    if (!Number.isNaN(this.#earlyFrom) && Number.isNaN(this.#earlySentAt)) {
      if (now >= this.#earlyFrom && now < this.#earlyUntil) this.#earlySentAt = now;
      else if (now >= this.#earlyUntil) this.#earlyFrom = Number.NaN;
    }
  }

  /**
   * The share of a reset told within EARLY_UP_TO_MS that a spent budget's
   * hold waits (1: all of it). Resets come in whole seconds, rounded up:
   * "1" may mean a few ms, and a token bucket that tells the time until it
   * is full refills a token much sooner (a 20/s bucket of 1 says "reset 1"
   * after every request, and holding a second each time ran at 1/s). The
   * share halves each `#earlyEvery` holds whose next send was admitted
   * (down to EARLY_MIN_SHARE); a send after a shortened hold refused (an
   * explained hold until the told reset) keeps the share (a try of half) or
   * doubles it (the share in use), and the next halving waits twice as
   * many holds. A real window's told resets are on time to a second: a try
   * costs it one refusal, fewer and fewer.
   */
  #earlyShare = 1;
  #earlyPassed = 1;
  #earlyEvery = 1;
  /** The pending shortened hold: its share, its end, the told reset, and the send it let out (NaN: none). */
  #earlyTry = 1;
  #earlyFrom = Number.NaN;
  #earlyUntil = Number.NaN;
  #earlySentAt = Number.NaN;
  /** The next roll is a shortened hold's end, before the told reset `#earlyUntil` (see `#roll`). */
  #earlyRoll = false;

  /**
   * Where the hold of a budget spent at `now` ends, for a reset at
   * `resetAt` told as `toldMs` from now: the reset, or a share of the told
   * time (see `#earlyShare`), after which one send may go before the reset.
   */
  earlyEnd(now: number, resetAt: number, toldMs: number): number {
    // The share is of the reset as this answer told it (whole seconds); the
    // hold ends no later than `resetAt`, the tighter bound of the resets told.
    if (!(resetAt > now && toldMs <= EARLY_UP_TO_MS && this.limit <= EARLY_LIMIT_MAX)) {
      return resetAt;
    }
    // A window said (RateLimit-Policy's `w`) is a policy, obeyed as told;
    // epoch resets are tried by `windowToTry` (the next whole second says
    // nothing steady for a share to scale).
    if (this.windowSaid || this.epochResets) return resetAt;
    // A try whose send never went (nothing to send), or whose answer never
    // came by its told reset: none pending.
    if (
      !Number.isNaN(this.#earlyFrom) &&
      (Number.isNaN(this.#earlySentAt) ? now >= this.#earlyFrom : now >= this.#earlyUntil)
    ) this.#earlyFrom = Number.NaN;
    if (!Number.isNaN(this.#earlyFrom)) return resetAt;
    let share = this.#earlyShare;
    if (this.#earlyPassed >= this.#earlyEvery) share = Math.max(EARLY_MIN_SHARE, share / 2);
    const end = now + share * toldMs;
    // Not before the reset: no try.
    if (!(end < resetAt)) return resetAt;
    this.#earlyTry = share;
    this.#earlyFrom = end;
    this.#earlyUntil = resetAt;
    this.#earlySentAt = Number.NaN;
    this.#earlyRoll = true;
    return end;
  }

  /** A reset at `resetAt` told as `toldMs` (at most EARLY_UP_TO_MS), read at the share found (for pacing a budget left). */
  earlyScaled(now: number, resetAt: number, toldMs: number): number {
    return toldMs > 0 && toldMs <= EARLY_UP_TO_MS
      ? Math.min(resetAt, now + this.#earlyShare * toldMs)
      : resetAt;
  }

  /**
   * The hold for a refusal, told as `holdMs`, of a send at `sentAt`: when
   * it was a shortened hold's send, the share the refusal leaves of it (a
   * try costs a round trip, not the told second); otherwise `holdMs`.
   */
  earlyRefusedHold(sentAt: number, holdMs: number): number {
    if (Number.isNaN(this.#earlyFrom) || !(sentAt >= this.#earlySentAt)) return holdMs;
    if (!(holdMs <= EARLY_UP_TO_MS)) return holdMs;
    // A try of half the share in use: the share in use; the share in use
    // itself: twice it, as the answer will set it.
    const share = this.#earlyTry < this.#earlyShare ? this.#earlyShare : 2 * this.#earlyShare;
    return Math.min(1, share) * holdMs;
  }

  /** The answer to a send at `sentAt`, admitted (`ok`) or refused: a shortened hold's send tells. */
  earlyAnswered(sentAt: number, ok: boolean): void {
    // The send it let out (its time as the answer tells it may be a little
    // later: when it went out on the wire).
    if (Number.isNaN(this.#earlyFrom) || !(sentAt >= this.#earlySentAt)) return;
    const tried = this.#earlyTry;
    this.#earlyFrom = Number.NaN;
    if (ok) {
      if (tried < this.#earlyShare) {
        this.#earlyShare = tried;
        this.#earlyPassed = 0;
      } else this.#earlyPassed++;
      return;
    }
    if (!(tried < this.#earlyShare)) this.#earlyShare = Math.min(1, 2 * this.#earlyShare);
    this.#earlyEvery = Math.min(EARLY_EVERY_MAX, 2 * this.#earlyEvery);
    this.#earlyPassed = 0;
  }

  /**
   * Whether every limit announced so far came with a refusal: no admitted
   * answer confirmed it. Such a limit may be a token bucket's size rather
   * than a rate (`X-RateLimit-Limit: 10` on the 429s of a 15/s bucket with a
   * burst of 10): its windows try one more, then more (see `#tryAbove`).
   */
  toldOnRefusals = true;
  /** Above a limit told on refusals only: the most per window a whole window admitted (0: none). */
  #foundLimit = 0;
  /** Full windows without a refusal before the next try above (doubles per refused try). */
  #upEvery = 1;
  #upQuiet = 0;
  /** The window in force tries above the found (or told) limit. */
  #upTrying = false;
  /** Sends in the window in force, and whether a send of it was refused. */
  #windowSent = 0;
  #windowRefused = false;
  /** Refusals of sends before this time were answered for by the last correction. */
  #correctedAt = -Infinity;

  /**
   * An answer at `now` (sent at `sentAt`, refused or not) announced a limit
   * of `limit`: the quota, or, while every announcement came with a refusal,
   * the floor under one found by trying above it.
   */
  told(now: number, limit: number, refused: boolean, sentAt: number | undefined): void {
    this.inferred = false;
    if (this.blind) this.#endBlind();
    // A window said with the limit (RateLimit-Policy's `w`) is a policy:
    // obeyed as told. Only a limit without one may be a bucket's size.
    if (!refused || this.windowSaid) this.toldOnRefusals = false;
    if (!refused) this.#admitsTell = true;
    // Refused early in a window rolled on from the last reset (a tenth of it
    // in): the site's window had not ended, so it began later than the grid
    // says, at a first request (a counter with a time-to-live).
    if (
      refused && !this.#admitsTell && this.#rolled && sentAt !== undefined &&
      sentAt >= this.#rolledAt &&
      sentAt < this.#rolledAt + this.windowMs / 10
    ) this.#anchorBySends = true;
    if (!this.toldOnRefusals) {
      this.limit = limit;
      return;
    }
    if (refused && (sentAt === undefined || sentAt >= this.#correctedAt)) {
      this.#windowRefused = true;
      this.#correctedAt = now;
      this.#upQuiet = 0;
      if (this.#upTrying) {
        // The try refused: the found limit stands, and the next try waits
        // twice as many windows (each costs a refusal and a hold).
        this.#upTrying = false;
        this.#upEvery = Math.min(UP_EVERY_MAX, 2 * this.#upEvery);
      } else if (this.#foundLimit > 0) {
        // A found limit refused: a bucket's saved burst hid a pace above its
        // rate for a few windows. Half way back to the told limit.
        this.#foundLimit = Math.floor((this.#foundLimit + limit) / 2);
        if (this.#foundLimit <= limit) this.#foundLimit = 0;
        this.#upEvery = Math.min(UP_EVERY_MAX, 2 * this.#upEvery);
      }
    }
    this.limit = Math.max(limit, this.#foundLimit);
  }

  /**
   * Whether windows of this length were found to admit more than the limit
   * told on refusals: a later reset longer than the window is a bucket's
   * refill time, not a longer window (a 15/s bucket told 10 with a reset of
   * 1.4 s, read as a 2 s window, halved the pace found).
   */
  get foundAbove(): boolean {
    return this.toldOnRefusals && this.#foundLimit > 0;
  }

  /**
   * A window told on refusals only ended (see `toldOnRefusals`): full and not
   * refused, it tried above and passed (the found limit), and every
   * `#upEvery` such windows the next tries UP_STEP more. A real window
   * refuses the first send past its quota, which costs one retry: the scope
   * waits for the reset anyway.
   */
  #tryAbove(): void {
    if (this.#windowSent >= this.limit && !this.#windowRefused) {
      if (this.#upTrying) this.#foundLimit = this.limit;
      this.#upTrying = ++this.#upQuiet >= this.#upEvery;
      if (this.#upTrying) {
        this.#upQuiet = 0;
        this.limit += Math.max(1, Math.round(this.limit * UP_STEP));
      }
    }
    this.#windowSent = 0;
    this.#windowRefused = false;
  }

  /** The scope's last sends (at most SENDS_FOR_FREED), for `freedBy`. */
  #sent: Float64Array | undefined;
  #sentCount = 0;

  /**
   * When the window surely frees a slot again, from the scope's own sends:
   * the `limit`-th last send plus the window (Infinity: not known). A sliding
   * window frees the slot of its oldest request then; a fixed window began
   * before that send, and so resets before then too. Resets are announced in
   * whole seconds (up to a second late), this is as late as the sends say.
   * `now`: the time of asking (a slot freed before it is no news).
   */
  freedBy(now: number, windowMs = this.windowMs): number {
    const sent = this.#sent;
    const n = this.limit;
    if (
      n > SENDS_FOR_FREED && windowMs > 0 && !this.inferred && this.epochResets && !this.windowSaid
    ) {
      // More sends than the scope keeps, resets told by epoch (a delta told
      // at several times narrows by itself): the window's first send (answered
      // with `limit - 1` left, see `windowEndBy`) is the `limit`-th last of
      // a fixed window spent in full (a window of 76 per 2 s told by epoch
      // resets never tried its length, and waited each told reset, up to a
      // second late: 0.67 of its rate).
      return this.#fromWindowFirst(now, windowMs);
    }
    if (sent === undefined || !(windowMs > 0) || !(n <= this.#sentCount)) return Infinity;
    return sent[(this.#sentCount - n) % SENDS_FOR_FREED]! + windowMs * (1 + FREED_MARGIN);
  }

  /**
   * The window length a spent budget's hold tries. A window read from
   * resets (none said) is known to a second only: resets come in whole
   * seconds, so a 1 s window whose reset is told as the next whole second
   * reads as 2 s, and a hold until the told reset waits up to a second too
   * long each window (an express-rate-limit `X-RateLimit-Reset` epoch on a
   * 10 per second window ran at half its rate). Windows are mostly whole
   * seconds, so the hold tries a window a second shorter than told, ended by
   * the scope's own sends (see `freedBy`); the first send after it decides
   * (`triedOut`), one refusal at most per length (an explained hold).
   * - Admitted: that length (as long again as the send was late) holds, each
   *   hold it ends telling again; a send after one refused drops it (found
   *   while the scope's early sends said little, a log of 30 per 2 s at
   *   120 ms kept 1 s and had two refused every window: 5.7%; 0.8%).
   * - Refused: the window is longer than that length; the next try waits
   *   until a longer reset grows the window read (a sliding log's reset, its
   *   oldest request's expiry rounded up, grows it late: a log of 30 per 2 s
   *   tried 1 s while its resets told 2 s, then read 3 s, and waited out
   *   every told reset, a second late: 0.69; 0.79).
   * - A length found FOUND_LATE_SHARE or more over the whole second under the
   *   told window (its send went late) leaves that second to try.
   */
  windowToTry(): number {
    const hi = Math.min(this.windowMs, this.#windowHi);
    if (!this.epochResets || this.windowSaid || !(hi <= WINDOW_TRIED_UP_TO_MS)) return hi;
    // A second below the told window, unless a refused try ruled it out or a
    // try found about that (or shorter) admitted. A try whose send went far
    // later than its hold (another hold kept it) found a length that says
    // little: a log of 30 per 2 s at 120 ms "found" 2.96 s so and waited out
    // every told reset (0.69; 0.88).
    const shorter = this.windowMs - 1_000;
    return shorter > 0 && shorter > this.#refusedTryMs &&
        shorter * (1 + FOUND_LATE_SHARE) < this.#windowHi
      ? shorter
      : hi;
  }

  /** A hold ends at `until`, before the told reset, trying a window of `windowMs`. */
  trying(windowMs: number, until: number): void {
    if (!(windowMs < this.windowMs)) return;
    // A length not ruled out yet, or the one found (its hold tells again).
    if (windowMs > this.#refusedTryMs || windowMs === this.#windowHi) {
      this.#tried = windowMs;
      this.#triedUntil = until;
    }
  }

  /**
   * An answer to a send at `sentAt` with `remaining` left: the first sent
   * after a try's hold tells whether the window had freed a slot by then.
   */
  triedOut(sentAt: number, remaining: number, refused: boolean): void {
    if (Number.isNaN(this.#tried) || sentAt < this.#triedUntil) return;
    // Sent later than the try's hold (a Retry-After held it longer): the
    // length it tried, as long again as the send was late.
    const tried = this.#tried + (sentAt - this.#triedUntil);
    if (remaining >= 1 || !refused) {
      if (tried < this.#windowHi) this.#windowHi = tried;
    } else {
      if (tried > this.#refusedTryMs) this.#refusedTryMs = tried;
      // The length found refused (a shorter try refused says nothing of it).
      if (tried >= this.#windowHi) this.#windowHi = Infinity;
    }
    this.#tried = Number.NaN;
  }

  /**
   * When the window in force ends at the latest, by a window length a try
   * found (Infinity: none found): the first send of this window (answered
   * `remaining` after `limit - 1`) plus that length. An epoch reset told a
   * second late spreads the budget no slower than the window allows.
   */
  windowEndBy(now: number, sentAt: number | undefined, remaining: number): number {
    if (sentAt !== undefined && remaining >= this.limit - 1) this.#windowFirstSent = sentAt;
    // (A budget spread to an end already past went as one burst a window: a
    // log of 30 per 2 s told by epoch resets ran at a third of its rate.)
    return this.#windowHi === Infinity ? Infinity : this.#fromWindowFirst(now, this.#windowHi);
  }

  /**
   * A window of `windowMs` from the window's first send (and FREED_MARGIN),
   * or Infinity once that has passed by `now` (or no first send is known):
   * the first send was of an older window then (a sliding window's
   * `remaining` seldom comes back to `limit - 1` under load).
   */
  #fromWindowFirst(now: number, windowMs: number): number {
    const end = this.#windowFirstSent + windowMs * (1 + FREED_MARGIN);
    return end > now ? end : Infinity; // NaN: no first send
  }

  #windowFirstSent = Number.NaN;

  /** The window length the try found admitted (Infinity: none). */
  #windowHi = Infinity;
  /**
   * The longest tried length a refusal answered (0: none): the window is
   * longer. A longer reset told later (a sliding log's, a second late by
   * epoch rounding, grows the window read) is tried a second shorter again,
   * if that is longer than this.
   */
  #refusedTryMs = 0;
  /** The length the pending try holds for (NaN: none), and when its hold ends. */
  #tried = Number.NaN;
  #triedUntil = Number.NaN;

  /** The learned quota as `ScopeState.quota` shows it. */
  learned(now: number): ScopeState["quota"] {
    if (!(this.limit >= 1 && this.windowMs > 0)) return undefined;
    const open = now < this.resetAt;
    return {
      limit: this.limit,
      used: open ? Math.max(0, this.limit - Math.max(0, this.left)) : 0,
      resetsAt: open ? this.resetAt : 0,
    };
  }
}

/**
 * An announced budget goes out over this share of the time to its reset: the
 * rest is margin for a reset read late or a window that slides, and a crawl
 * whose last requests fit in the budget ends sooner than an even spread over
 * the whole window would let it (docs/DECISIONS.md).
 */
export const ANNOUNCED_SPREAD = 0.3;

/**
 * The longest an announced budget is spread over (see `start`): spreads of
 * 5 s, 2 s, 1 s and 0.5 s took the drawn outside sites' announced windows
 * from a shortfall of 11.5 to 9.6, 8.1, 6.9 and 6.3 with no more refused;
 * at 0.5 s the zoo's announced sites began to be refused more.
 */
const ANNOUNCED_SPREAD_MAX_MS = 1_000;
/**
 * A probe of a quota told by holds whose time ran out with this share of its
 * extra sends admitted and none refused says the holds told no window (see
 * `#roll`).
 */
const PROBE_TIMED_OUT_SHARE = 0.75;
/** The shortest wait before a blind quota's next try after an early refusal (see `blindRefused`), ms. */
const BLIND_RETRY_MIN_MS = 100;
/**
 * A blind window refused after FRESH_ADMITS or more of its sends were
 * admitted, but fewer than its quota over this, is no window: the site
 * refills (a bucket of 30 at 5/s read as a window of 34 admitted 6 of each
 * burst). (Over 2: a sliding window of 10 per 2 s, its slots freed unevenly,
 * admitted 3 or 4 of 9 and was handed back, 0.93 -> 0.86.)
 */
const BLIND_REFILL_SHARE = 4;
/** Admits in a blind window that began with an admitted try before a refusal says it is a window (see `blindRefused`). */
const FRESH_ADMITS = 3;

/**
 * Early refusals in a row within a quota told by holds that tell the site
 * reopens no window (see `refusedWithin`).
 * @internal
 */
export const EARLY_IN_ROW = 3;

/** An inferred quota's window shortens by this share per quiet window, and lengthens back twice as much when refused early. */
const INFERRED_STEP = 0.03;

/** The most an inferred window shortens by per quiet window (the step doubles from INFERRED_STEP). */
const INFERRED_STEP_MAX = 0.4;
/**
 * Windows read from whole-second resets up to this long are tried shorter
 * (see `windowToTry`): a second too long costs a longer window little.
 */
const WINDOW_TRIED_UP_TO_MS = 10_000;
/**
 * A window length a try found longer than a whole second below the told one
 * by more than this share (its send went late) leaves that length to try.
 */
const FOUND_LATE_SHARE = 0.1;
/** Sends an announced quota keeps to tell when its window frees a slot (quotas up to this many). */
const SENDS_FOR_FREED = 64;
/** A slot freed by the scope's own sends is counted free this share of the window later (arrivals come after sends). */
const FREED_MARGIN = 0.02;

/** The least jump of a told reset past a hold's end that reads as a new window (see `counterSeen`). */
const COUNTER_JUMP_MS = 1_500;
/** What `counterSeen` counts the scope's sends in: eighths of a window. */
const COUNTER_EIGHTHS = 8;
/** Limits this small are not read as sliding-window counters (a few in flight are a quarter). */
const COUNTER_LIMIT_MIN = 8;
/** Resets told this soon or sooner may be a whole second's rounding: holds try shorter (see `earlyEnd`). */
const EARLY_UP_TO_MS = 1_100;
/**
 * Only budgets of limits this small (or none said) try shorter holds: a
 * token bucket announces its burst as the limit and its time until full as
 * the reset, and small ones were held a second for a token due in tens of
 * ms; a real window of many per second pays a refusal per try (the zoo's
 * 1 s windows of 8 to 45: five more misses with every limit trying).
 */
const EARLY_LIMIT_MAX = 5;
/** The shortest share of such a reset a hold waits. */
const EARLY_MIN_SHARE = 1 / 128;
/** Halving the share backs off to once per this many holds whose send was admitted. */
const EARLY_EVERY_MAX = 32;
/** A limit told on refusals only is tried this share higher (at least one more; see `#tryAbove`). */
const UP_STEP = 0.2;
/** Tries above a limit told on refusals only back off to one per this many full windows. */
const UP_EVERY_MAX = 32;

/** Quiet windows at half the told window before the holds are taken to tell no window. */
const INFERRED_OUTGROWN = 4;

/** An inferred quota grows by one after this many windows without a refusal. */
const INFERRED_GROWTH_WINDOWS = 8;
/** Each growth a refusal answered doubles the windows before the next, up to this many. */
const INFERRED_GROWTH_MAX = 64;
