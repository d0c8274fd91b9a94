/**
 * Rate limiters as real servers and common middleware run them, written from
 * their public descriptions (not from politely's simulator): token bucket,
 * GCRA, fixed window (aligned to the clock or to a key's first request),
 * sliding log, sliding-window counter (Cloudflare / Redis style), a
 * concurrency cap and nginx's `limit_req` (with and without `nodelay`).
 *
 * Every limiter is a small state machine over epoch milliseconds (`now`
 * passed in), so the same object serves a loopback site and the ideal
 * client's replay in virtual time (`ideal.ts`). A refused request leaves no
 * trace in any of them (none of these counts refusals against the client).
 *
 * @module
 */

/** What a limiter tells a client about its budget (for `RateLimit` and `X-RateLimit-*` headers). */
export interface Budget {
  /** Requests allowed per window (or the bucket's size). */
  readonly limit: number;
  /** Requests left now. */
  readonly remaining: number;
  /** Milliseconds until the budget is back (window end, next token). */
  readonly resetMs: number;
  /** The window, in milliseconds. */
  readonly windowMs: number;
}

/** One limiter's state machine. */
export interface Limiter {
  /** Milliseconds until a request would be admitted (0: now; `Infinity`: when something finishes). */
  wait(now: number): number;
  /** Admit a request at `now`; returns how long the server queues it before work starts (nginx without `nodelay`). */
  take(now: number): number;
  /** A response admitted earlier has finished. */
  release(now: number): void;
  /** The budget to announce, after any `take` at `now`. */
  budget(now: number): Budget;
}

/** Below this a wait counts as none (float arithmetic on epoch milliseconds). */
const EPS = 1e-6;
/** A wait added to land just past a boundary, ms (epoch ms carry about 1e-4 ms of precision). */
const EPS_MS = 1e-3;

/** Token bucket: `rate` tokens a second, `burst` at most, full at start. */
export class TokenBucket implements Limiter {
  #tokens: number;
  #last = Number.NaN;
  constructor(readonly rate: number, readonly burst: number) {
    this.#tokens = burst;
  }
  #refill(now: number): void {
    if (!Number.isNaN(this.#last) && now > this.#last) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) * this.rate) / 1000);
    }
    if (Number.isNaN(this.#last) || now > this.#last) this.#last = now;
  }
  wait(now: number): number {
    this.#refill(now);
    return this.#tokens >= 1 - EPS ? 0 : ((1 - this.#tokens) * 1000) / this.rate;
  }
  take(now: number): number {
    this.#refill(now);
    this.#tokens -= 1;
    return 0;
  }
  release(): void {}
  budget(now: number): Budget {
    this.#refill(now);
    const t = Math.max(0, this.#tokens);
    return {
      limit: this.burst,
      remaining: Math.floor(t + EPS),
      resetMs: t >= 1 ? 0 : ((1 - t) * 1000) / this.rate,
      windowMs: (this.burst * 1000) / this.rate,
    };
  }
}

/**
 * GCRA (the generic cell rate algorithm, as redis-cell and `throttled` run it):
 * a theoretical arrival time advanced by 1/rate per admitted request; an
 * arrival earlier than TAT - tolerance is refused. `burst` 1 is strict spacing.
 */
export class Gcra implements Limiter {
  #tat = -Infinity;
  readonly #interval: number;
  readonly #tolerance: number;
  constructor(readonly rate: number, readonly burst = 1) {
    this.#interval = 1000 / rate;
    this.#tolerance = this.#interval * (burst - 1);
  }
  wait(now: number): number {
    const w = this.#tat - this.#tolerance - now;
    return w > EPS ? w : 0;
  }
  take(now: number): number {
    this.#tat = Math.max(this.#tat, now) + this.#interval;
    return 0;
  }
  release(): void {}
  budget(now: number): Budget {
    const used = Math.max(0, this.#tat - now) / this.#interval;
    return {
      limit: this.burst,
      remaining: Math.max(0, Math.floor(this.burst - used + EPS)),
      resetMs: Math.max(0, this.#tat - now),
      windowMs: this.#interval * this.burst,
    };
  }
}

/**
 * Fixed window: `limit` per `windowMs`. `"clock"`: windows start at multiples
 * of the window in epoch time (Redis `INCR key:<minute>`); `"first"`: a window
 * starts at the first request after the last one ended (`INCR` plus `EXPIRE`
 * on the first hit, GitHub's hourly window).
 */
export class FixedWindow implements Limiter {
  #start = -Infinity;
  #count = 0;
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    readonly anchor: "clock" | "first",
  ) {}
  #roll(now: number, starting: boolean): void {
    if (this.anchor === "clock") {
      const start = Math.floor(now / this.windowMs) * this.windowMs;
      if (start !== this.#start) {
        this.#start = start;
        this.#count = 0;
      }
    } else if (now >= this.#start + this.windowMs && starting) {
      this.#start = now;
      this.#count = 0;
    }
  }
  wait(now: number): number {
    this.#roll(now, false);
    if (this.anchor === "first" && now >= this.#start + this.windowMs) return 0;
    return this.#count < this.limit ? 0 : this.#start + this.windowMs - now;
  }
  take(now: number): number {
    this.#roll(now, true);
    this.#count++;
    return 0;
  }
  release(): void {}
  budget(now: number): Budget {
    this.#roll(now, false);
    const fresh = this.anchor === "first" && now >= this.#start + this.windowMs;
    return {
      limit: this.limit,
      remaining: fresh ? this.limit : Math.max(0, this.limit - this.#count),
      resetMs: fresh ? this.windowMs : this.#start + this.windowMs - now,
      windowMs: this.windowMs,
    };
  }
}

/** Sliding log: at most `limit` admitted requests in any span of `windowMs`. */
export class SlidingLog implements Limiter {
  readonly #log: number[] = [];
  constructor(readonly limit: number, readonly windowMs: number) {}
  #prune(now: number): void {
    while (this.#log.length > 0 && this.#log[0]! <= now - this.windowMs) this.#log.shift();
  }
  wait(now: number): number {
    this.#prune(now);
    if (this.#log.length < this.limit) return 0;
    return this.#log[this.#log.length - this.limit]! + this.windowMs - now + EPS_MS;
  }
  take(now: number): number {
    this.#prune(now);
    this.#log.push(now);
    return 0;
  }
  release(): void {}
  budget(now: number): Budget {
    this.#prune(now);
    return {
      limit: this.limit,
      remaining: Math.max(0, this.limit - this.#log.length),
      resetMs: this.#log.length > 0 ? this.#log[0]! + this.windowMs - now : 0,
      windowMs: this.windowMs,
    };
  }
}

/**
 * Sliding-window counter (Cloudflare's and the common Redis recipe): windows
 * aligned to the clock; the estimate is the previous window's count weighted
 * by the share of it still inside the sliding span, plus this window's count.
 * A request is admitted while estimate + 1 <= limit.
 */
export class SlidingCounter implements Limiter {
  #start = Number.NaN;
  #prev = 0;
  #cur = 0;
  constructor(readonly limit: number, readonly windowMs: number) {}
  #roll(now: number): void {
    const start = Math.floor(now / this.windowMs) * this.windowMs;
    if (start === this.#start) return;
    this.#prev = start - this.#start === this.windowMs ? this.#cur : 0;
    this.#cur = 0;
    this.#start = start;
  }
  #estimate(now: number): number {
    const f = (now - this.#start) / this.windowMs;
    return this.#prev * (1 - f) + this.#cur;
  }
  wait(now: number): number {
    this.#roll(now);
    if (this.#estimate(now) + 1 <= this.limit + EPS) return 0;
    const room = this.limit - 1 - this.#cur;
    if (room >= 0 && this.#prev > 0) {
      // prev * (1 - f) <= room, within this window
      const f = 1 - room / this.#prev;
      return Math.max(EPS_MS, this.#start + f * this.windowMs - now);
    }
    // Next window: prev' = cur, cur' = 0.
    const next = this.#start + this.windowMs;
    const f = this.#cur <= this.limit - 1 ? 0 : 1 - (this.limit - 1) / this.#cur;
    return next + f * this.windowMs - now + EPS_MS;
  }
  take(now: number): number {
    this.#roll(now);
    this.#cur++;
    return 0;
  }
  release(): void {}
  budget(now: number): Budget {
    this.#roll(now);
    return {
      limit: this.limit,
      remaining: Math.max(0, Math.floor(this.limit - this.#estimate(now) + EPS)),
      resetMs: this.#start + this.windowMs - now,
      windowMs: this.windowMs,
    };
  }
}

/** Concurrency cap: at most `max` admitted requests whose responses have not finished. */
export class ConcurrencyCap implements Limiter {
  #active = 0;
  constructor(readonly max: number) {}
  wait(): number {
    return this.#active < this.max ? 0 : Infinity;
  }
  take(): number {
    this.#active++;
    return 0;
  }
  release(): void {
    this.#active--;
  }
  budget(): Budget {
    return { limit: this.max, remaining: this.max - this.#active, resetMs: 1000, windowMs: 1000 };
  }
}

/**
 * nginx `limit_req zone=... rate=R burst=B [nodelay]`, after
 * ngx_http_limit_req_module.c: `excess = excess - rate * ms / 1000 + 1` on
 * whole milliseconds, refused when excess > burst; admitted requests with
 * excess > 0 are delayed excess / rate seconds unless `nodelay`.
 */
export class NginxLimitReq implements Limiter {
  #excess = 0;
  #last = Number.NaN;
  constructor(readonly rate: number, readonly burst: number, readonly nodelay: boolean) {}
  #excessAt(now: number): number {
    if (Number.isNaN(this.#last)) return 0;
    const ms = Math.abs(Math.floor(now) - Math.floor(this.#last));
    return Math.max(0, this.#excess - (this.rate * ms) / 1000 + 1);
  }
  wait(now: number): number {
    const e = this.#excessAt(now);
    if (e <= this.burst + EPS) return 0;
    // Whole milliseconds: the first whole ms at which excess fits.
    const ms = Math.ceil(((e - this.burst) * 1000) / this.rate - EPS);
    return Math.max(1, Math.floor(now) + ms - now);
  }
  take(now: number): number {
    const e = this.#excessAt(now);
    this.#excess = e;
    this.#last = now;
    return this.nodelay || e === 0 ? 0 : (e * 1000) / this.rate;
  }
  release(): void {}
  budget(now: number): Budget {
    const e = this.#excessAt(now);
    return {
      limit: this.burst + 1,
      remaining: Math.max(0, Math.floor(this.burst + 1 - e)),
      resetMs: (e * 1000) / this.rate,
      windowMs: 1000 / this.rate,
    };
  }
}
