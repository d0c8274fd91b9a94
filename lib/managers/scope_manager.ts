/**
 * The default scope manager: the reference's `ThrottlingScopeManager`, a pure
 * state machine over one scope's concurrency, delay, jitter, holds, backoff,
 * recovery, rampup and quota. Time is always passed in (`now`, ms); the only
 * randomness is the injected `random` used for jitter.
 *
 * Size: the scope's manager and the announced or learned window it keeps
 * (`AnnouncedWindow`) change together; the adaptive controller is
 * `_rampup.ts`.
 *
 * @module
 */
import type { ResolvedRampup, ResolvedScopeConfig } from "../settings/settings.ts";
import { MIN_ROUND_MS, type RampLimits, RampupController } from "./_rampup.ts";
import { admitted } from "./_admitted.ts";
import { KneeMeter } from "./_knee.ts";
import { SendLog } from "./_send_log.ts";
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
   * scope then starts over from `minConcurrency`; requests in flight finish.
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
    this.#concurrency = c.minConcurrency;
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
          x.ramp.leaveQuota(knobs, a.leaveRate(), a.probed);
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
    if (ok && ann !== undefined && result.sentAt !== undefined && ann.probing(result.sentAt)) {
      ann.probeAdmitted();
    }
    this.#x?.ramp?.onDone(now, result);
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

  recordBackoff(now: number, signal: BackoffSignal = {}): void {
    const b = this.config.backoff;
    const x = this.#more();
    this.#lastActivity = now;
    // The site pushed back: its limit is no knee (a rampup scope's controller reads it).
    x.knee = undefined;
    x.kneeDone = true;
    if (signal.holdMs !== undefined && signal.holdMs > 0) {
      const hold = signal.uncapped === true ? signal.holdMs : Math.min(signal.holdMs, b.maxDelayMs);
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
        const q = x.ramp.quota;
        x.ramp.quota = undefined;
        const announced = x.ann !== undefined && x.ann.limit >= 1 && !x.ann.inferred;
        if (q !== undefined && this.config.quota === undefined && !announced) {
          // A window told by the server's holds: the scope's learned quota
          // (a configured quota, or one announced in headers, wins).
          (x.ann ??= new AnnouncedWindow()).infer(now, q.limit, q.windowMs, q.resetAt);
        }
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
      a.inferred = false;
      a.limit = limit;
      if (hasWindow) {
        a.windowMs = windowMs;
        a.windowSaid = true;
      }
    }
    if (!hasRemaining || !hasReset) return;
    if (budget.resetIsEpoch === true) a.epochResets = true;
    if (hasLimit && !a.windowSaid && !(resetInMs <= a.windowMs)) {
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
    if (sentAt !== undefined) a.triedOut(sentAt, remaining);
    const resetAt = a.sameReset(now, now + resetInMs, remaining);
    if (remaining < 1) {
      const tried = a.windowToTry();
      const freed = a.freedBy(tried);
      const hold = Math.min(
        Math.max(0, Math.min(resetAt, freed) - now),
        this.config.backoff.maxDelayMs,
      );
      if (freed < resetAt) a.trying(tried, now + hold);
      if (now + hold > x.holdUntil) x.holdUntil = now + hold;
      a.start(now, now + hold, 0);
    } else {
      // The announcing request is counted by the server; the others still in
      // flight may not be yet, so they count as spent.
      const others = this.#active > 0 ? this.#active - 1 : 0;
      a.start(
        now,
        Math.min(resetAt, a.windowEndBy(sentAt, remaining)),
        Math.floor(remaining) - others,
      );
    }
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

/**
 * A budget announced in rate-limit headers, paced: `left` requests may go
 * before `resetAt`, one per `gapMs` after the last. At the reset a learned
 * quota (limit and window) opens the next window; without one the scope is
 * free again until a response announces more.
 */
class AnnouncedWindow {
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
   * A quota of `limit` per `windowMs` told by the server's holds (not
   * announced): nothing until `resetAt`, the hold's end, then bursts of
   * `limit` (see `#roll`).
   */
  infer(now: number, limit: number, windowMs: number, resetAt: number): void {
    this.inferred = true;
    this.limit = limit;
    this.windowMs = windowMs;
    this.toldWindowMs = windowMs;
    this.tooShortMs = 0;
    this.quietWindows = 0;
    this.shrinkStep = INFERRED_STEP;
    this.atFloor = 0;
    this.currentWindowMs = windowMs;
    this.endedWindowMs = windowMs;
    this.probe = "due";
    // Refusals of requests in flight at this one were told already.
    this.shrunkUntil = resetAt;
    this.start(now, resetAt, 0);
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
    if (sent > this.limit / 2) {
      // Refused in the window that tried one more: the next try waits twice
      // as many windows (each costs a hold).
      if (this.tryingMore) {
        this.growthWindows = Math.min(INFERRED_GROWTH_MAX, 2 * this.growthWindows);
      }
      this.limit = Math.max(1, this.limit - 1);
    } else {
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
    this.resetAt = resetAt;
    this.left = left;
    let gap = left > 0 ? (resetAt - now) / left : 0;
    // A quota's own rate is never too fast: a token bucket announces the time
    // until it is full as its reset, in which it refills more than `left`.
    const rate = this.windowMs / this.limit;
    if (rate < gap) gap = rate;
    this.gapMs = gap * ANNOUNCED_SPREAD;
  }

  /** Whether `resetAt` was rolled on by `#roll` since the last announcement. */
  #rolled = false;

  /** Past the reset: the learned quota's next window, or nothing in force. */
  #roll(now: number): void {
    const w = this.windowMs;
    if (w > 0 && this.limit >= 1) {
      const windows = Math.floor((now - this.resetAt) / w) + 1;
      this.resetAt += windows * w;
      this.#rolled = true;
      if (this.inferred) {
        if (this.probe === "due") {
          // A window admits nothing past its quota until it resets (a few
          // more where the quota was told short); holds that told no window
          // (the same Retry-After whatever the wait) admit half a quota more
          // half way through.
          this.probe = "armed";
          this.probeAt = this.resetAt - w + this.toldWindowMs / 2;
          this.probeUntil = this.resetAt;
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
          this.shrinkStep = Math.min(INFERRED_STEP_MAX, this.shrinkStep * 2);
          if (w <= floor && ++this.atFloor >= INFERRED_OUTGROWN) this.outgrownAt = now;
        }
      }
      const limit = this.limit;
      this.left = limit;
      this.lastRemaining = Infinity;
      // A quota told by holds goes in bursts like the ones the site took.
      this.gapMs = (this.inferred ? ANNOUNCED_SPREAD : 1) * (w / limit);
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
    return this.left <= 0 ? this.resetAt - now : this.lastSentAt + this.gapMs - now;
  }

  /**
   * The rate a quota whose holds told no window leaves off at: its own at
   * the floor (half the told window), or twice the told one after a probe
   * admitted half a quota more half way through a window.
   */
  leaveRate(): number {
    return this.probed
      ? (2 * this.limit * 1000) / this.toldWindowMs
      : (this.limit * 1000) / this.windowMs;
  }

  /** Whether a probe (see `probe`) said the holds told no window. */
  get probed(): boolean {
    return this.probeNeed > 0 && this.probeAdmits >= this.probeNeed;
  }

  #startProbe(now: number): void {
    this.probe = "on";
    this.probeFrom = now;
    this.probeAdmits = 0;
    this.probeNeed = Math.ceil(this.limit / 2);
    // One at a time: a window refuses the first extra past its quota, and
    // those in flight with it would be refused as well.
    this.left = 1;
  }

  /** Whether a request sent at `sentAt` was one of the probe's extra sends. */
  probing(sentAt: number): boolean {
    return this.probe === "on" && sentAt >= this.probeFrom && sentAt < this.probeUntil;
  }

  /** One of the probe's extra sends admitted: enough of them and the holds told no window. */
  probeAdmitted(): void {
    if (++this.probeAdmits < this.probeNeed) {
      if (this.left <= 0) this.left = 1;
      return;
    }
    this.probe = "done";
    // From the end of this window: its extra sends are in the site's count.
    this.outgrownAt = this.resetAt;
  }

  /**
   * One of the probe's extra sends refused, held until `holdEnd`: a window
   * (its quota as many more as were admitted). Nothing more in this one; the
   * next begins as told (a sliding window frees slots at the pace they were
   * taken, not at the hold's end).
   */
  probeRefused(holdEnd: number): void {
    this.probe = "done";
    this.left = 0;
    this.shrunkUntil = holdEnd;
  }

  onSent(now: number): void {
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
   */
  freedBy(windowMs = this.windowMs): number {
    const sent = this.#sent;
    const n = this.limit;
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
   * seconds, so the hold tries a window a second shorter than told, once,
   * ended by the scope's own sends (see `freedBy`): the first send after it
   * decides (`triedOut`). Admitted, that length holds from then on; refused
   * (at most one refusal, an explained hold), the told resets were on time
   * and are waited out from then on.
   */
  windowToTry(): number {
    const hi = Math.min(this.windowMs, this.#windowHi);
    if (!this.epochResets || this.windowSaid || !(hi <= WINDOW_TRIED_UP_TO_MS)) return hi;
    // Found, or the try refused (the told resets were on time: a window
    // that begins on a whole second).
    if (this.#windowHi < Infinity || this.#tryRefused) return hi;
    // Windows are mostly whole seconds: a second below the told one.
    return this.windowMs > 1_000 ? this.windowMs - 1_000 : hi;
  }

  /** A hold ends at `until`, before the told reset, trying a window of `windowMs`. */
  trying(windowMs: number, until: number): void {
    // Only the one try: a length found or refused is settled.
    if (windowMs < this.windowMs && this.#windowHi === Infinity && !this.#tryRefused) {
      this.#tried = windowMs;
      this.#triedUntil = until;
    }
  }

  /**
   * An answer to a send at `sentAt` with `remaining` left: the first sent
   * after a try's hold tells whether the window had freed a slot by then.
   */
  triedOut(sentAt: number, remaining: number): void {
    if (Number.isNaN(this.#tried) || sentAt < this.#triedUntil) return;
    // Sent later than the try's hold (a Retry-After held it longer): the
    // length it tried, as long again as the send was late.
    const tried = this.#tried + (sentAt - this.#triedUntil);
    if (remaining >= 1) this.#windowHi = tried;
    else this.#tryRefused = true;
    this.#tried = Number.NaN;
  }

  /**
   * When the window in force ends at the latest, by a window length a try
   * found (Infinity: none found): the first send of this window (answered
   * `remaining` after `limit - 1`) plus that length. An epoch reset told a
   * second late spreads the budget no slower than the window allows.
   */
  windowEndBy(sentAt: number | undefined, remaining: number): number {
    if (sentAt !== undefined && remaining >= this.limit - 1) this.#windowFirstSent = sentAt;
    return this.#windowHi === Infinity || Number.isNaN(this.#windowFirstSent)
      ? Infinity
      : this.#windowFirstSent + this.#windowHi * (1 + FREED_MARGIN);
  }

  #windowFirstSent = Number.NaN;

  /** The window length the try found admitted (Infinity: none). */
  #windowHi = Infinity;
  /** The try was refused: the told resets were on time. */
  #tryRefused = false;
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

function quotaWaitOf(x: ScopeExtra, now: number, amount: number, quota: number): number {
  if (Number.isNaN(x.quotaResetsAt) || now >= x.quotaResetsAt) return 0;
  // An oversized request still goes through an empty window, or it would wait forever.
  if (x.quotaUsed > 0 && x.quotaUsed + amount > quota) return x.quotaResetsAt - now;
  return 0;
}

const NO_STEPS: readonly ScopeStep[] = [];

/**
 * An announced budget goes out over this share of the time to its reset: the
 * rest is margin for a reset read late or a window that slides, and a crawl
 * whose last requests fit in the budget ends sooner than an even spread over
 * the whole window would let it (docs/DECISIONS.md).
 */
const ANNOUNCED_SPREAD = 0.3;

/** An inferred quota's window shortens by this share per quiet window, and lengthens back twice as much when refused early. */
const INFERRED_STEP = 0.03;

/** The most an inferred window shortens by per quiet window (the step doubles from INFERRED_STEP). */
const INFERRED_STEP_MAX = 0.4;
/**
 * Windows read from whole-second resets up to this long are tried shorter
 * (see `windowToTry`): a second too long costs a longer window little.
 */
const WINDOW_TRIED_UP_TO_MS = 10_000;
/** Sends an announced quota keeps to tell when its window frees a slot (quotas up to this many). */
const SENDS_FOR_FREED = 64;
/** A slot freed by the scope's own sends is counted free this share of the window later (arrivals come after sends). */
const FREED_MARGIN = 0.02;

/** Quiet windows at half the told window before the holds are taken to tell no window. */
const INFERRED_OUTGROWN = 4;

/** An inferred quota grows by one after this many windows without a refusal. */
const INFERRED_GROWTH_WINDOWS = 8;
/** Each growth a refusal answered doubles the windows before the next, up to this many. */
const INFERRED_GROWTH_MAX = 64;

/** Admits an adaptive scope has had before it reads a knee (a broad crawl's scopes never do). */
const KNEE_AFTER = 4;

/** Sends an adaptive scope remembers before its first trigger. */
const SENDS_KEPT = 16;

/** Where an adaptive scope's concurrency starts (then +1 per admitted answer). */
export const ADAPTIVE_START = 2;

/** An adaptive scope's controller options: rampup's defaults (its target, no slow-start steps). */
const DEFAULT_RAMPUP: ResolvedRampup = { backoffTarget: [1, 1], delayFactor: 0.5, minDelayMs: 0 };
