/**
 * The reference's example of a custom scope manager: a fixed quota per time
 * window, with no delay and no exponential backoff, like a fixed-window rate
 * limiter. A runnable model for writing your own manager.
 *
 * @module
 */
import type {
  QuotaReconciliation,
  ScopeState,
  ThrottlingScopeManagerProtocol,
} from "./scope_manager_protocol.ts";
import type { ScopeManagerContext, ScopeManagerFactory } from "../settings/settings.ts";

/**
 * A fixed quota per window: windows start at the first send after the last
 * one ended; a request waits for the next window when the current one has
 * used something and the request would go over `quota`. Backoff triggers are
 * ignored (holds included): this manager never slows down.
 *
 * @example
 * ```ts
 * import { FixedWindowScopeManager } from "./fixed_window_manager.ts";
 * const m = new FixedWindowScopeManager({ scope: "api", quota: 2, windowMs: 1_000 });
 * m.recordSent(0, 1);
 * m.recordSent(10, 1);
 * console.assert(m.canSend(20, 1) === 980);
 * console.assert(m.canSend(1_000, 1) === 0);
 * ```
 */
export class FixedWindowScopeManager implements ThrottlingScopeManagerProtocol {
  readonly scope: string;
  readonly limit: number;
  readonly windowMs: number;
  #resetAt: number | undefined;
  #used = 0;
  #active = 0;
  #lastActivity = 0;

  /**
   * @param options The scope, its quota per window and the window length.
   * @throws {RangeError} for a quota or window that is not a finite number > 0.
   */
  constructor(
    options: { readonly scope: string; readonly quota: number; readonly windowMs: number },
  ) {
    for (const name of ["quota", "windowMs"] as const) {
      const v = options[name];
      if (!Number.isFinite(v) || v <= 0) {
        throw new RangeError(
          `Cannot create FixedWindowScopeManager as '${name}' must be a finite number > 0: current value is ${v}`,
        );
      }
    }
    this.scope = options.scope;
    this.limit = options.quota;
    this.windowMs = options.windowMs;
  }

  #roll(now: number): void {
    if (this.#resetAt !== undefined && now >= this.#resetAt) {
      this.#resetAt = undefined;
      this.#used = 0;
    }
  }

  canSend(now: number, amount?: number): number {
    this.#roll(now);
    if (this.#used > 0 && this.#used + (amount ?? 0) > this.limit) return this.#resetAt! - now;
    return 0;
  }

  recordSent(now: number, amount?: number): void {
    this.#roll(now);
    this.#resetAt ??= now + this.windowMs;
    this.#used += amount ?? 0;
    this.#active++;
    this.#lastActivity = now;
  }

  recordDone(now: number): void {
    this.#active = Math.max(0, this.#active - 1);
    this.#lastActivity = now;
  }

  recordBackoff(): void {
    // This manager does not back off.
  }

  reconcileQuota(now: number, r: QuotaReconciliation): void {
    this.#roll(now);
    if (r.remaining !== undefined) this.#used = Math.max(0, this.limit - r.remaining);
    else if (r.consumed !== undefined) this.#used = Math.max(0, this.#used + r.consumed);
  }

  setBaseDelay(): void {}

  setConcurrency(): void {}

  isIdle(now: number, maxIdleMs: number): boolean {
    this.#roll(now);
    // An open window with use is remembered: forgotten, the scope could overrun its limit.
    return this.#active === 0 && this.#used === 0 && now - this.#lastActivity >= maxIdleMs;
  }

  nextWakeAt(now: number): number | undefined {
    return this.#resetAt !== undefined && this.#resetAt > now ? this.#resetAt : undefined;
  }

  state(now: number): ScopeState {
    this.#roll(now);
    return {
      scope: this.scope,
      delayMs: 0,
      baseDelayMs: 0,
      concurrency: Infinity,
      active: this.#active,
      backoffLevel: 0,
      holdUntil: 0,
      nextSendAt: 0,
      quota: { limit: this.limit, used: this.#used, resetsAt: this.#resetAt ?? 0 },
      rampup: false,
    };
  }
}

/**
 * A factory for a scope's `manager` key: the scope's `quota` and `windowMs`
 * (THROTTLING_WINDOW by default) make a {@link FixedWindowScopeManager}.
 *
 * @returns The factory.
 * @throws {RangeError} when the scope has no `quota` (at the scope's creation).
 * @example
 * ```ts
 * import { createThrottler, fixedWindowManager } from "../../mod.ts";
 * const throttler = createThrottler({
 *   scopes: { api: { quota: 100, windowMs: 60_000, manager: fixedWindowManager() } },
 * });
 * console.assert(throttler.manager("api").state?.(0).quota?.limit === 100);
 * ```
 */
export function fixedWindowManager(): ScopeManagerFactory {
  return (context: ScopeManagerContext) => {
    const quota = context.config.quota;
    if (quota === undefined) {
      throw new RangeError(
        `Cannot create FixedWindowScopeManager for scope '${context.scope}' as 'quota' must be set: current value is undefined`,
      );
    }
    return new FixedWindowScopeManager({
      scope: context.scope,
      quota,
      windowMs: context.config.windowMs,
    });
  };
}
