/**
 * The default scope manager: the reference's `ThrottlingScopeManager`, a pure
 * state machine over one scope's concurrency, delay, jitter, holds, backoff,
 * recovery, rampup and quota. Time is always passed in (`now`, ms); the only
 * randomness is the injected `random` used for jitter.
 *
 * Size: one scope's knobs and the rules that move them (sends, answers,
 * backoff, holds, quotas, announced budgets) read and write the same state.
 * The announced or learned window is `_announced_window.ts`; the adaptive
 * controller is `_rampup.ts`.
 *
 * @module
 */
import type { ResolvedRampup, ResolvedScopeConfig } from "../settings/settings.ts";
import { MIN_ROUND_MS, type RampLimits, RampupController } from "./_rampup.ts";
import { admitted } from "./_admitted.ts";
import { KneeMeter } from "./_knee.ts";
import { SendLog } from "./_send_log.ts";
import { AnnouncedWindow } from "./_announced_window.ts";
import type {
  AnnouncedBudget,
  BackoffSignal,
  BaseDelayOptions,
  ConcurrencyOptions,
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
 * import { parseSettings, resolveScopeConfig } from "../settings/settings.ts";
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

  #delayMs: number;
  #concurrency: number;
  #active = 0;
  #nextSendAt = 0;
  #lastActivity = 0;
  /** An adaptive scope grows from ADAPTIVE_START to its concurrency, one per admitted answer. */
  #slowStart = false;
  /** Before the controller exists: the most in flight at the send of an admitted request. */
  #admittedUpTo = 0;
  /** Answers admitted (not a trigger status): the adaptive controller starts from the count. */
  #admits = 0;
  /** The last NOISE_ANSWERS answers, newest in bit 0: 1 for a soft trigger's. */
  #softMask = 0;
  /** A soft trigger came; its answer is the next one recorded. */
  #softPending = false;
  #firstSentAt = Number.NaN;
  /** When slow start's next round begins, and how far this round may grow. */
  #slowStartNext = 0;
  #slowStartCap = ADAPTIVE_START;
  /**
   * Before an adaptive scope's first trigger: the last sends as pairs (time,
   * in flight), so the trigger can tell a concurrency cap from a rate and
   * read the gap it came after. Made at a scope's second send: a broad
   * crawl's one-request scopes never have it.
   */
  #sends: SendLog | undefined = undefined;
  /**
   * Backoff, holds, a floor, quota and rampup: created on first use, so a
   * scope that only ever sends and completes (most of a broad crawl's) costs
   * a small object.
   */
  #x: ScopeExtra | undefined;

  constructor(options: ScopeManagerOptions) {
    this.scope = options.scope;
    this.config = options.config;
    this.#random = options.random;
    this.#delayMs = options.config.delayMs;
    this.#concurrency = options.config.concurrency;
    this.#startAdaptive(options.config);
    if (options.config.rampup !== undefined) this.enableRampup(options.config.rampup);
  }

  /**
   * An adaptive scope starts at two in flight and adds one per admitted
   * answer (TCP's slow start: doubling per round trip), so a site that
   * refuses a burst sees a small one.
   */
  #startAdaptive(config: ResolvedScopeConfig): void {
    this.#slowStart = config.adaptive && config.concurrency > ADAPTIVE_START;
    if (this.#slowStart) this.#concurrency = ADAPTIVE_START;
  }

  /**
   * @internal Start over as a new scope, as if just constructed (the
   * throttler reuses the objects of evicted scopes; nobody else holds them).
   */
  reuse(scope: string, config: ResolvedScopeConfig): void {
    (this as { scope: string }).scope = scope;
    (this as { config: ResolvedScopeConfig }).config = config;
    this.#delayMs = config.delayMs;
    this.#concurrency = config.concurrency;
    this.#active = 0;
    this.#nextSendAt = 0;
    this.#lastActivity = 0;
    this.#x = undefined;
    this.#admittedUpTo = 0;
    this.#admits = 0;
    this.#softMask = 0;
    this.#softPending = false;
    this.#firstSentAt = Number.NaN;
    this.#slowStartNext = 0;
    this.#slowStartCap = ADAPTIVE_START;
    this.#sends = undefined;
    this.#startAdaptive(config);
    if (config.rampup !== undefined) this.enableRampup(config.rampup);
  }

  /**
   * The most in flight an admitted send had, before the refused one sent at
   * `sentAt` (all of them when unknown); the first send, admitted before the
   * log was made, counts as one.
   */
  #admittedBefore(sentAt: number | undefined): number {
    const sends = this.#sends;
    if (sends === undefined || sentAt === undefined) return this.#admittedUpTo;
    return Math.max(sends.admittedBefore(sentAt), Math.min(this.#admittedUpTo, 1));
  }

  #more(): ScopeExtra {
    return this.#x ??= new ScopeExtra(this.config.delayMs);
  }

  /**
   * Turn rampup on (`Throttler.enableRampup`, which the `rampup` operator
   * calls, does this for the scopes in memory and new ones). The
   * scope then starts over from 2 in flight (`ADAPTIVE_START`, or
   * `minConcurrency` if higher); requests in flight finish.
   * Already ramping: the new options apply from the next window, and what was
   * learned is kept.
   *
   * @param rampup Rampup options with defaults filled in.
   */
  enableRampup(rampup: ResolvedRampup): void {
    const c = this.config;
    const x = this.#more();
    if (x.ramp !== undefined) {
      x.ramp.config = rampup;
      return;
    }
    x.ramp = new RampupController(rampup, this.#rampLimits("rampup", rampup.minDelayMs));
    this.#slowStart = false;
    // With no delay to lower first (the reference's first steps), where an
    // adaptive scope starts (docs/DECISIONS.md), not at 1: the reference's
    // start cost a round per doubling more.
    const start = this.#delayMs > rampup.minDelayMs
      ? 1
      : Math.min(ADAPTIVE_START, c.maxConcurrency);
    this.#concurrency = Math.max(c.minConcurrency, start);
  }

  #rampLimits(mode: "rampup" | "adaptive", minDelayMs: number): RampLimits {
    const c = this.config;
    return {
      mode,
      minConcurrency: c.minConcurrency,
      maxConcurrency: mode === "rampup" ? c.maxConcurrency : c.concurrency,
      minDelayMs,
      maxDelayMs: c.backoff.maxDelayMs,
      windowMs: c.backoff.windowMs,
      triggerCodes: c.backoff.httpCodes,
      stepMinDelayMs: c.backoff.minDelayMs,
      stepFactor: c.backoff.delayFactor,
    };
  }

  /** Whether any request sent so far gave an amount for this scope (quota scopes warn when none does). */
  get quotaAmountSeen(): boolean {
    return this.#x?.quotaAmountSeen ?? false;
  }

  /** Whether rampup is probing this scope. */
  get rampup(): boolean {
    return this.#x?.ramp !== undefined;
  }

  canSend(now: number, amount?: number): number {
    if (this.#active >= this.#concurrency) return Infinity;
    let wait = this.#nextSendAt - now;
    const x = this.#x;
    if (x !== undefined) {
      const holdWait = x.holdUntil - now;
      if (holdWait > wait) wait = holdWait;
      if (amount !== undefined && amount > 0 && this.config.quota !== undefined) {
        const quotaWait = quotaWaitOf(x, now, amount, this.config.quota);
        if (quotaWait > wait) wait = quotaWait;
      }
      if (x.ann !== undefined) {
        const paceWait = x.ann.waitMs(now);
        if (now >= x.ann.outgrownAt && x.ramp !== undefined) {
          // The holds told no window: the controller paces from here.
          const a = x.ann;
          x.ann = undefined;
          const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
          x.ramp.leaveQuota(knobs, a.leaveRate(), a.probed, a.reopensNoWindow, now, a.probedEarly);
          this.#delayMs = knobs.delayMs;
          this.#concurrency = knobs.concurrency;
          return this.canSend(now, amount);
        }
        if (paceWait > wait) wait = paceWait;
      }
    }
    return wait > 0 ? wait : 0;
  }

  recordWentOut(sentAt: number, lateMs: number): void {
    // Nothing to move once the spacing has passed (or with no delay). A
    // request later than the delay may move a later send's spacing too: slower, never faster.
    if (this.#nextSendAt > sentAt) this.#nextSendAt += lateMs;
    const ann = this.#x?.ann;
    if (ann !== undefined && ann.lastSentAt === sentAt) ann.lastSentAt += lateMs;
  }

  recordSent(now: number, amount?: number): void {
    this.#active++;
    this.#lastActivity = now;
    const x = amount !== undefined ? this.#more() : this.#x;
    const ramp = x?.ramp;
    ramp?.onSent(now, this.#active);
    if (this.#firstSentAt !== this.#firstSentAt) {
      this.#firstSentAt = now; // NaN: first send
      this.#slowStartNext = now + MIN_ROUND_MS;
    }
    if (ramp === undefined && this.config.adaptive && this.#firstSentAt < now) {
      // From the second send on (a broad crawl's one-request scopes never
      // make it), with the first one, whose in-flight count was 1 or more.
      let sends = this.#sends;
      if (sends === undefined) {
        sends = this.#sends = new SendLog(SENDS_KEPT);
        sends.push(this.#firstSentAt, 1);
      }
      sends.push(now, this.#active);
    }
    const floor = x === undefined ? 0 : x.floorMs;
    const delay = this.#delayMs;
    if (delay > 0) {
      // A learned pace is the site's limit: jitter randomises only the delay
      // the scope may not go below (an adaptive scope's configured delay;
      // rampup's minDelayMs, which may be below the configured delay rampup
      // started from) and never shortens the learned gap (docs/DECISIONS.md).
      const least = ramp?.limits.minDelayMs ?? 0;
      const gap = ramp !== undefined && ramp.paced
        ? Math.max(delay, least > 0 ? this.#jittered(least) : 0)
        : this.#jittered(delay);
      this.#nextSendAt = now + (gap < floor ? floor : gap);
    } else if (floor > 0 || this.#nextSendAt > now) {
      this.#nextSendAt = now + floor;
    }
    // Else (no delay, no floor, no later time set): a `#nextSendAt` of `now`
    // would never be read as a wait (it is never after a later `now`), so the
    // old value, also in the past, stays: in a broad crawl the field stays a
    // small integer, not a heap number per scope.
    x?.ann?.onSent(now);
    if (x === undefined || amount === undefined) return;
    x.quotaAmountSeen = true;
    if (amount > 0 && this.config.quota !== undefined) {
      if (Number.isNaN(x.quotaResetsAt) || now >= x.quotaResetsAt) {
        x.quotaResetsAt = now + this.config.windowMs;
        x.quotaUsed = 0;
      }
      x.quotaUsed += amount;
    }
  }

  recordDone(now: number, result?: DoneInfo): void {
    if (this.#active > 0) this.#active--;
    this.#lastActivity = now;
    const ok = admitted(result, this.config.backoff.httpCodes);
    if (ok) this.#admits++;
    if (this.#softMask !== 0 || this.#softPending) {
      this.#softMask = ((this.#softMask << 1) | (this.#softPending ? 1 : 0)) & NOISE_MASK;
      this.#softPending = false;
    }
    if (result?.status !== undefined) {
      this.#x?.ann?.earlyAnswered(result.sentAt ?? now - result.latencyMs, ok);
    }
    if (ok && this.#x?.ramp === undefined) {
      const sentAt = result.sentAt ?? now - result.latencyMs;
      const sends = this.#sends;
      const f = sends?.take(sentAt, false) ?? 1;
      sends?.admitted(sentAt, f);
      if (f > this.#admittedUpTo) this.#admittedUpTo = f;
      // One more per admitted answer, at most doubling per round (a few round
      // trips, at least MIN_ROUND_MS), as rampup's slow start does: growing
      // per answer alone outgrew a small burst within a round trip or two,
      // and doubling at once overshot a concurrency cap by as many.
      if (this.#slowStart) {
        if (now >= this.#slowStartNext) {
          this.#slowStartCap = Math.min(this.config.concurrency, 2 * this.#concurrency);
          this.#slowStartNext = now + Math.max(MIN_ROUND_MS, 3 * result.latencyMs);
        }
        if (this.#concurrency < this.#slowStartCap) this.#concurrency++;
        if (this.#concurrency >= this.config.concurrency) this.#slowStart = false;
      }
    }
    if (ok && this.#admits >= KNEE_AFTER && (this.config.adaptive || this.#x?.ramp !== undefined)) {
      this.#kneeRead(now, result.latencyMs);
    }
    const ann = this.#x?.ann;
    if (ok && ann !== undefined && result.sentAt !== undefined) {
      if (ann.probing(result.sentAt)) ann.probeAdmitted(now);
      if (ann.blind) ann.blindAdmitted(now, result.sentAt);
      ann.admitted(result.sentAt);
    }
    const x = this.#x;
    if (x?.ramp !== undefined) {
      x.ramp.onDone(now, result);
      this.#takeToldQuota(now, x);
    }
  }

  /** Whether this soft trigger and the recent ones make a cluster (see `BackoffSignal.soft`). */
  #clustered(): boolean {
    let n = 1; // this trigger (its own answer is recorded after it)
    for (let m = this.#softMask & (NOISE_MASK >>> 1); m !== 0; m &= m - 1) n++;
    return n >= NOISE_CLUSTER;
  }

  /**
   * A scope that no site refusal has taught yet reads the knee of a server
   * that slows down instead of refusing (lib/managers/_knee.ts). An adaptive
   * scope keeps that many in flight and its slow start ends; a rampup scope's
   * controller takes it as its concurrency cap and probes one more once per
   * window, so the reading goes on.
   */
  #kneeRead(now: number, latencyMs: number): void {
    const x = this.#more();
    if (x.kneeDone || x.level > 0) return;
    const knee = (x.knee ??= new KneeMeter()).admitted(now, latencyMs, this.#active + 1);
    if (knee === undefined) return;
    if (x.ramp !== undefined) {
      const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
      if (x.ramp.kneeAt(knobs, knee)) {
        this.#delayMs = knobs.delayMs;
        this.#concurrency = knobs.concurrency;
      }
      return;
    }
    x.knee = undefined;
    x.kneeDone = true;
    this.#slowStart = false;
    const before = this.#concurrency;
    this.#concurrency = Math.max(1, this.config.minConcurrency, Math.min(before, knee));
    x.kneeStep = {
      kind: "rampup",
      delayMs: this.#delayMs,
      concurrency: this.#concurrency,
      why:
        `slower with more in flight, no more served: concurrency ${before} -> ${this.#concurrency}`,
    };
  }

  recordBackoff(now: number, signal: BackoffSignal = {}): false | undefined {
    if (signal.soft === true && (this.config.adaptive || this.#x?.ramp !== undefined)) {
      this.#softPending = true;
      if (!this.#clustered()) {
        // A lone server error among admitted answers: a flaky backend, not
        // a limit (docs/DECISIONS.md). Retried; nothing learned, nothing cut.
        this.#lastActivity = now;
        return false;
      }
    }
    const b = this.config.backoff;
    const x = this.#more();
    this.#lastActivity = now;
    // The site pushed back: its limit is no knee (a rampup scope's controller reads it).
    x.knee = undefined;
    x.kneeDone = true;
    if (signal.holdMs !== undefined && signal.holdMs > 0) {
      let hold = signal.uncapped === true ? signal.holdMs : Math.min(signal.holdMs, b.maxDelayMs);
      // A spent budget's shortened hold tried too short: "not yet", held as
      // long as holds known good (lib/managers/_announced_window.ts).
      if (signal.explained === true && signal.sentAt !== undefined && x.ann !== undefined) {
        hold = x.ann.earlyRefusedHold(signal.sentAt, hold);
      }
      if (now + hold > x.holdUntil) x.holdUntil = now + hold;
      x.ramp?.onHold(now, now + hold);
      const a = x.ann;
      if (a !== undefined && a.inferred && x.level === 0) {
        // Held within a quota told by holds: the quota is corrected, the
        // pace is not cut (lib/managers/_rampup.ts told the quota instead).
        if (signal.sentAt !== undefined && a.probing(signal.sentAt)) {
          a.probeRefused(x.holdUntil);
        } else if (!(now < a.shrunkUntil)) a.refusedWithin(now, x.holdUntil);
        return;
      }
    }
    const ann = x.ann;
    if (
      ann !== undefined && ann.blind && ann.inferred && x.ramp !== undefined &&
      x.level === 0 && signal.explained !== true &&
      !(signal.holdMs !== undefined && signal.holdMs > 0)
    ) {
      // Refused within a quota read from a block of refusals (no holds):
      // the scope holds itself, and the quota is corrected as a held one is
      // (lib/managers/_announced_window.ts); the pace is not cut.
      if (ann.blindRefused(now, signal.sentAt ?? now)) return;
      // A bucket's refill, not a window's reset: the controller reads it.
      x.ann = undefined;
    }
    if (x.ramp === undefined && x.level === 0 && this.config.adaptive && b.windowMs > 0) {
      // An adaptive scope learns from its first trigger on (lib/managers/_rampup.ts).
      this.#slowStart = false;
      x.ramp = new RampupController(
        DEFAULT_RAMPUP,
        this.#rampLimits("adaptive", Math.max(x.baseDelayMs, x.floorMs)),
        {
          admittedUpTo: this.#admittedBefore(signal.sentAt),
          admits: this.#admits,
          firstSentAt: this.#firstSentAt,
          sends: this.#sends,
        },
      );
      if (x.holdUntil > now) x.ramp.onHold(now, x.holdUntil);
    }
    // A spent announced quota: waiting out its reset is the whole answer.
    if (signal.explained === true) return;
    if (x.ramp !== undefined && x.level === 0) {
      // The controller's cut replaces the exponential step; a trigger it has
      // answered for already only holds.
      const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
      const f = signal.sentAt === undefined ? undefined : this.#sends?.take(signal.sentAt, true);
      this.#sends = undefined;
      if (x.ramp.onTrigger(now, knobs, signal.sentAt, f ?? this.#active) !== undefined) {
        this.#delayMs = knobs.delayMs;
        this.#concurrency = knobs.concurrency;
        if (x.ramp.holdUntil > x.holdUntil) x.holdUntil = x.ramp.holdUntil;
        this.#takeToldQuota(now, x);
        const next = now + this.#delayMs;
        if (next > this.#nextSendAt) this.#nextSendAt = next;
      }
      return;
    }
    if (b.windowMs === 0) return; // instant recovery: only the hold remains
    // A request sent before the last step was already on its way when the
    // scope slowed down: its 429 reports the same overload, not a new one (as
    // TCP cuts its window once per loss event, not once per lost segment).
    if (signal.sentAt !== undefined && signal.sentAt < x.lastStepAt) return;
    this.#delayMs = Math.min(b.maxDelayMs, Math.max(b.minDelayMs, this.#delayMs * b.delayFactor));
    x.level++;
    x.quietSince = now;
    x.lastStepAt = now;
    // The next send was timed with the old delay when the last request went
    // out; without this a request slips through right after a 429.
    const next = now + this.#jittered(this.#delayMs);
    if (next > this.#nextSendAt) this.#nextSendAt = next;
  }

  /**
   * A window the controller read (told by the server's holds, or by a block
   * of refusals): the scope's learned quota. A configured quota, or one
   * announced in headers, wins.
   */
  #takeToldQuota(now: number, x: ScopeExtra): void {
    const ramp = x.ramp;
    const q = ramp?.quota;
    if (ramp === undefined || q === undefined) return;
    ramp.quota = undefined;
    const announced = x.ann !== undefined && x.ann.limit >= 1 && !x.ann.inferred;
    if (this.config.quota === undefined && !announced) {
      (x.ann ??= new AnnouncedWindow()).infer(now, q);
    }
  }

  reconcileQuota(now: number, r: QuotaReconciliation): void {
    const quota = this.config.quota;
    if (quota === undefined) return;
    const x = this.#more();
    if (Number.isNaN(x.quotaResetsAt) || now >= x.quotaResetsAt) {
      x.quotaResetsAt = now + this.config.windowMs;
      x.quotaUsed = 0;
    }
    if (r.remaining !== undefined && Number.isFinite(r.remaining)) {
      x.quotaUsed = Math.max(0, quota - r.remaining);
    } else if (r.consumed !== undefined && Number.isFinite(r.consumed)) {
      x.quotaUsed = Math.max(0, x.quotaUsed + r.consumed);
    }
  }

  /**
   * A response announced the server's budget. Remaining 0 with a reset holds
   * the scope until the reset (capped at the backoff max delay, like any
   * server-given hold; no backoff step). A limit with a window becomes the
   * scope's learned quota unless it has a configured one. A remaining budget
   * with a reset is paced: at most `remaining` requests (less those still in
   * flight) go before the reset, spaced over the time left, and a learned
   * quota carries the pacing on into the next windows.
   *
   * @param now Scheduler time, ms.
   * @param budget What the headers said (fields not finite and >= 0 are ignored).
   */
  recordAnnounced(now: number, budget: AnnouncedBudget): void {
    const { limit, windowMs, remaining, resetInMs } = budget;
    const hasLimit = limit !== undefined && limit >= 1 && Number.isFinite(limit);
    const hasWindow = windowMs !== undefined && windowMs > 0 && Number.isFinite(windowMs);
    const hasReset = resetInMs !== undefined && resetInMs > 0 && Number.isFinite(resetInMs);
    const hasRemaining = remaining !== undefined && remaining >= 0 && Number.isFinite(remaining);
    if (!(hasLimit || (hasRemaining && hasReset))) return;
    const x = this.#more();
    const a = x.ann ??= new AnnouncedWindow();
    this.#lastActivity = now;
    if (hasLimit) {
      if (hasWindow) {
        a.windowMs = windowMs;
        a.windowSaid = true;
      }
      a.told(now, limit, budget.refused === true, budget.sentAt);
    }
    if (!hasRemaining || !hasReset) return;
    if (budget.resetIsEpoch === true) a.epochResets = true;
    if (hasLimit && !a.windowSaid && !(resetInMs <= a.windowMs) && !a.foundAbove) {
      // No window said: a fixed window's first answer announces nearly all of
      // it (less the latency), so the longest reset seen, in whole seconds as
      // windows are, stands for it.
      a.windowMs = Math.ceil(resetInMs / 1_000) * 1_000;
    }
    const sentAt = budget.sentAt;
    if (sentAt !== undefined) {
      // Answered out of order (sent before an answer already read): what it
      // says is older than what the scope knows. A remaining above the last
      // one is no new window, and a spent budget was spent in a window the
      // newer answer already told of.
      if (a.answeredBefore(sentAt)) return;
      a.sentAt(sentAt);
    }
    if (sentAt !== undefined) {
      a.triedOut(sentAt, remaining, budget.refused === true);
      // Told before the request's own recordDone: a shortened hold's send tells now.
      a.earlyAnswered(sentAt, budget.refused !== true);
    }
    const resetAt = a.sameReset(now, now + resetInMs, remaining);
    if (hasLimit && !a.inferred) {
      a.counterSeen(now, sentAt, now + resetInMs, remaining, budget.refused === true);
    }
    if (remaining < 1) {
      const counter = a.slidingCounter;
      let tried = Number.NaN;
      let freed = Infinity;
      let end: number;
      if (counter) {
        // A sliding-window counter frees room all the time: a slot's time
        // after the last send, not its window's end (see `slidingCounter`).
        end = Math.min(resetAt, a.counterFreedBy(now));
      } else {
        tried = a.windowToTry();
        freed = a.freedBy(now, tried);
        // A reset told as a second may be tried shorter (no window said).
        end = a.earlyEnd(now, Math.min(resetAt, freed), resetInMs);
      }
      const hold = Math.min(Math.max(0, end - now), this.config.backoff.maxDelayMs);
      if (freed < resetAt) a.trying(tried, now + hold);
      else if (!counter && end >= resetAt) a.heldToReset(now + hold);
      if (now + hold > x.holdUntil) x.holdUntil = now + hold;
      a.start(now, now + hold, 0);
    } else {
      // The announcing request is counted by the server; the others still in
      // flight may not be yet, so they count as spent.
      const others = this.#active > 0 ? this.#active - 1 : 0;
      let end = Math.min(
        a.earlyScaled(now, resetAt, resetInMs),
        a.windowEndBy(now, sentAt, remaining),
      );
      const budget = Math.floor(remaining) - others;
      // Nothing left once the requests on their way are counted: a
      // sliding-window counter frees room all the time, so it waits a slot's
      // time, as a spent budget does (see `slidingCounter`), not its window's
      // end. (A counter of 100 per 10 s at 150 ms telling one to three left
      // on every answer, with three on their way, waited out every other
      // window: 0.64 of its rate; 0.99 now.)
      if (budget < 1 && a.slidingCounter) end = Math.min(end, a.counterFreedBy(now));
      a.start(now, end, budget);
      if (sentAt !== undefined) this.#openToBudget(now, budget, a.gapMs, now - sentAt);
    }
  }

  /**
   * A budget the site announced is its leave to send so many before the
   * reset: a slow start need not find that rate round by round. Concurrency
   * opens at once to what the budget's pace (`gapMs` between sends, as the
   * announced window spreads it) needs at the announcing answer's latency.
   * A 50-per-second window at 200 ms had used 29 of its first 50 by its
   * reset (docs/DECISIONS.md); opened to the budget spread over the whole
   * time to the reset rather than the share it is sent in, a window of 50
   * per 5 s met 0.42 s before its end used 30 of it.
   */
  #openToBudget(now: number, budget: number, gapMs: number, latencyMs: number): void {
    if (!(budget >= 1 && gapMs > 0 && latencyMs > 0)) return;
    const ramp = this.#x?.ramp;
    if (ramp !== undefined ? !ramp.starting : !this.#slowStart) return;
    const top = ramp !== undefined ? ramp.limits.maxConcurrency : this.config.concurrency;
    // (No more than the budget and the answer on its way: a quota's own pace
    // can be far faster than what is left of it.)
    const need = Math.min(top, budget + 1, Math.ceil(latencyMs / gapMs) + 1);
    if (need <= this.#concurrency) return;
    this.#concurrency = need;
    this.#lastActivity = now;
    if (ramp === undefined && need >= this.config.concurrency) this.#slowStart = false;
  }

  /**
   * An adaptive scope paces no faster than `delayMs` (a pace learned by
   * another process). Not adaptive, or already slower: nothing changes.
   *
   * @param now Scheduler time, ms.
   * @param delayMs The slowest pace to keep, ms between sends.
   * @param why For the `rampup` step it reports.
   */
  adoptDelay(now: number, delayMs: number, why: string): void {
    const x = this.#more();
    if (x.level > 0 || (x.ramp === undefined && !this.config.adaptive)) return;
    this.#slowStart = false;
    x.ramp ??= new RampupController(
      DEFAULT_RAMPUP,
      this.#rampLimits("adaptive", Math.max(x.baseDelayMs, x.floorMs)),
    );
    const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
    if (!x.ramp.adopt(knobs, delayMs, why)) return;
    this.#delayMs = knobs.delayMs;
    this.#concurrency = knobs.concurrency;
    const next = now + this.#delayMs;
    if (next > this.#nextSendAt) this.#nextSendAt = next;
  }

  setBaseDelay(delayMs: number, options?: BaseDelayOptions): void {
    const x = this.#more();
    const wasAtBase = x.level === 0;
    x.baseDelayMs = delayMs;
    x.floorMs = options?.floor === true ? delayMs : 0;
    if (wasAtBase || this.#delayMs < delayMs) this.#delayMs = delayMs;
  }

  setConcurrency(concurrency: number, options?: ConcurrencyOptions): void {
    if (options?.temporary !== true) this.#slowStart = false;
    this.#concurrency = Math.max(1, this.config.minConcurrency, concurrency);
  }

  isIdle(now: number, maxIdleMs: number): boolean {
    const x = this.#x;
    // Not while its next send must still wait (rebuilt from its configuration,
    // it would send at once) or its quota window has use to remember.
    return this.#active === 0 && this.#nextSendAt <= now &&
      (x === undefined ||
        (x.level === 0 && x.holdUntil <= now && !(x.quotaUsed > 0 && now < x.quotaResetsAt) &&
          !(x.ramp !== undefined && x.ramp.cutRecently(now)) &&
          !(x.ann !== undefined && now < x.ann.resetAt))) &&
      now - this.#lastActivity >= maxIdleMs;
  }

  nextWakeAt(now: number): number | undefined {
    const x = this.#x;
    if (x === undefined) return undefined;
    let at = Infinity;
    if (x.level > 0) at = x.quietSince + this.config.backoff.windowMs;
    const ramp = x.ramp;
    if (ramp !== undefined) {
      if (ramp.hasPending) return now;
      const end = ramp.nextWakeAt();
      if (end !== undefined && end < at) at = end;
    }
    if (x.holdUntil > now && x.holdUntil < at) at = x.holdUntil;
    return at === Infinity ? undefined : Math.max(at, now);
  }

  advance(now: number): readonly ScopeStep[] {
    const x = this.#x;
    if (x === undefined || (x.level === 0 && x.ramp === undefined && x.kneeStep === undefined)) {
      return NO_STEPS;
    }
    const window = this.config.backoff.windowMs;
    const steps: ScopeStep[] = [];
    if (x.kneeStep !== undefined) {
      steps.push(x.kneeStep);
      x.kneeStep = undefined;
    }
    while (x.level > 0 && window > 0 && now >= x.quietSince + window) {
      x.quietSince += window;
      x.level--;
      this.#delayMs = x.level === 0
        ? x.baseDelayMs
        : Math.max(x.baseDelayMs, this.#delayMs / this.config.backoff.delayFactor);
      steps.push({ kind: "recovery", delayMs: this.#delayMs, level: x.level });
    }
    if (x.ramp !== undefined && x.level === 0) {
      const knobs = { delayMs: this.#delayMs, concurrency: this.#concurrency };
      x.ramp.advance(now, knobs, steps);
      // A slower pace times the next send too: it was timed with the old
      // delay when the last request went out (a strict spacer's pace read at
      // an admit, 125 ms -> 1185 ms, let the next request go 125 ms after
      // that admit, to be refused).
      if (knobs.delayMs > this.#delayMs) this.#nextSendAt += knobs.delayMs - this.#delayMs;
      this.#delayMs = knobs.delayMs;
      this.#concurrency = knobs.concurrency;
    }
    return steps.length === 0 ? NO_STEPS : steps;
  }

  state(now: number): ScopeState {
    const quota = this.config.quota;
    const x = this.#x;
    const resetsAt = x === undefined ? Number.NaN : x.quotaResetsAt;
    const windowOpen = !Number.isNaN(resetsAt) && now < resetsAt;
    const holdUntil = x === undefined ? 0 : x.holdUntil;
    const learned = quota === undefined ? x?.ann?.learned(now) : undefined;
    return {
      scope: this.scope,
      delayMs: this.#delayMs,
      baseDelayMs: x === undefined ? this.config.delayMs : x.baseDelayMs,
      concurrency: this.#concurrency,
      active: this.#active,
      backoffLevel: x === undefined ? 0 : x.level,
      holdUntil: holdUntil > now ? holdUntil : 0,
      nextSendAt: this.#nextSendAt > now ? this.#nextSendAt : 0,
      quota: quota === undefined ? learned : {
        limit: quota,
        used: windowOpen ? x!.quotaUsed : 0,
        resetsAt: windowOpen ? resetsAt : 0,
      },
      rampup: x?.ramp !== undefined,
    };
  }

  #jittered(delay: number): number {
    const x = this.#x;
    const [lo, hi] = x !== undefined && x.level > 0
      ? this.config.backoff.jitter
      : this.config.jitter;
    if (lo === 0 && hi === 0) return delay;
    return delay * (1 + lo + (hi - lo) * this.#random());
  }
}

/** The state of a scope beyond sending and completing (see `ThrottlingScopeManager.#x`). */
class ScopeExtra {
  /** Configured delay; recovery goes back to it. */
  baseDelayMs: number;
  level = 0;
  /** Start of the quiet window that recovery is counting. */
  quietSince = 0;
  holdUntil = 0;
  /** When the last exponential backoff step was taken. */
  lastStepAt = -Infinity;
  /** A gap jitter may not shorten (a robots.txt Crawl-delay), or 0. */
  floorMs = 0;
  // Quota of the current fixed window (NaN: no window open).
  quotaUsed = 0;
  quotaResetsAt = Number.NaN;
  quotaAmountSeen = false;
  /** Rampup's arithmetic (lib/managers/_rampup.ts), when the scope ramps up. */
  ramp: RampupController | undefined = undefined;
  /** The budget the server announced, once a response did. */
  ann: AnnouncedWindow | undefined = undefined;
  /** The knee of a server that slows down (adaptive scopes before their first trigger). */
  knee: KneeMeter | undefined = undefined;
  /** Whether the knee was found, or a trigger handed the scope to its controller. */
  kneeDone = false;
  /** The step that tells of the knee, until `advance` reports it. */
  kneeStep: ScopeStep | undefined = undefined;

  constructor(baseDelayMs: number) {
    this.baseDelayMs = baseDelayMs;
  }
}

function quotaWaitOf(x: ScopeExtra, now: number, amount: number, quota: number): number {
  if (Number.isNaN(x.quotaResetsAt) || now >= x.quotaResetsAt) return 0;
  // An oversized request still goes through an empty window, or it would wait forever.
  if (x.quotaUsed > 0 && x.quotaUsed + amount > quota) return x.quotaResetsAt - now;
  return 0;
}

const NO_STEPS: readonly ScopeStep[] = [];

/** Admits an adaptive scope has had before it reads a knee (a broad crawl's scopes never do). */
const KNEE_AFTER = 4;

/**
 * A soft trigger (`BackoffSignal.soft`) counts as a limit's refusal when at
 * least NOISE_CLUSTER of the last NOISE_ANSWERS answers (itself included)
 * were soft triggers: 4 of 10 (a 429 or a 503 counts apart). A limit pressed
 * refuses in runs (a spacer every other request at twice its rate, a cap
 * every send above it); a backend failing at random makes such a run once
 * in about 81,000 requests at 2%, 2,400 at 5% and 190 at 10%. 3 of 10
 * slowed the zoo's flaky sites at 10% twice as often (bench/zoo_sweep.bench.ts
 * --set flaky: 0.785 of their speed without failures, 0.840 with 4).
 */
export const NOISE_ANSWERS = 10;
export const NOISE_CLUSTER = 4;
const NOISE_MASK = (1 << NOISE_ANSWERS) - 1;

/** Sends an adaptive scope remembers before its first trigger. */
const SENDS_KEPT = 16;

/** Where an adaptive scope's concurrency starts (then +1 per admitted answer). */
export const ADAPTIVE_START = 2;

/** An adaptive scope's controller options: rampup's defaults (its target, no slow-start steps). */
const DEFAULT_RAMPUP: ResolvedRampup = { backoffTarget: [1, 1], delayFactor: 0.5, minDelayMs: 0 };
