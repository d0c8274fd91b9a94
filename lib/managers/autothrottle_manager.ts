/**
 * A latency-based scope manager: Scrapy's AutoThrottle algorithm as a scope
 * manager factory. Everything else (concurrency, jitter, holds, quotas,
 * backoff) is the default manager's; only the delay follows latency.
 *
 * @module
 */
import type { BaseDelayOptions, DoneInfo } from "./scope_manager_protocol.ts";
import { ThrottlingScopeManager } from "./scope_manager.ts";
import type { ScopeManagerContext, ScopeManagerFactory } from "../settings/settings.ts";

/** Options of {@link autoThrottleManager} (Scrapy's `AUTOTHROTTLE_*`, in ms). */
export interface AutoThrottleOptions {
  /** The delay a scope starts with, unless `DOWNLOAD_DELAY` is larger. @default 5000 */
  readonly startDelayMs?: number;
  /** The largest delay latency can push a scope to. @default 60000 */
  readonly maxDelayMs?: number;
  /** Requests to keep in flight per scope on average. @default 1 */
  readonly targetConcurrency?: number;
}

/**
 * One AutoThrottle adjustment (pure): `target = latency / targetConcurrency`,
 * `new = max(target, (old + target) / 2)`, clamped to `[minDelayMs,
 * maxDelayMs]`; a non-200 response may not lower the delay.
 *
 * @param oldDelayMs The delay before the response.
 * @param latencyMs The response's latency.
 * @param status The response's status (`undefined` for a download error).
 * @param limits `targetConcurrency`, `minDelayMs` (DOWNLOAD_DELAY), `maxDelayMs`.
 * @returns The new delay in ms.
 * @example
 * ```ts
 * import { autoThrottleDelay } from "./autothrottle_manager.ts";
 * const limits = { targetConcurrency: 1, minDelayMs: 0, maxDelayMs: 60_000 };
 * console.assert(autoThrottleDelay(5_000, 1_000, 200, limits) === 3_000);
 * console.assert(autoThrottleDelay(1_000, 100, 503, limits) === 1_000);
 * ```
 */
export function autoThrottleDelay(
  oldDelayMs: number,
  latencyMs: number,
  status: number | undefined,
  limits: {
    readonly targetConcurrency: number;
    readonly minDelayMs: number;
    readonly maxDelayMs: number;
  },
): number {
  const target = latencyMs / limits.targetConcurrency;
  let next = Math.max(target, (oldDelayMs + target) / 2);
  next = Math.min(limits.maxDelayMs, Math.max(limits.minDelayMs, next));
  if (status !== 200 && next < oldDelayMs) return oldDelayMs;
  return next;
}

/** The default manager with AutoThrottle's latency-driven delay. */
class AutoThrottleScopeManager extends ThrottlingScopeManager {
  readonly #limits: { targetConcurrency: number; minDelayMs: number; maxDelayMs: number };
  #autoDelayMs: number;

  constructor(context: ScopeManagerContext, options: Required<AutoThrottleOptions>) {
    super(context);
    const min = context.config.delayMs;
    this.#limits = {
      targetConcurrency: options.targetConcurrency,
      minDelayMs: min,
      maxDelayMs: options.maxDelayMs,
    };
    this.#autoDelayMs = Math.max(min, options.startDelayMs);
    super.setBaseDelay(this.#autoDelayMs);
  }

  override recordDone(now: number, result?: DoneInfo): void {
    super.recordDone(now, result);
    if (result === undefined) return;
    const next = autoThrottleDelay(
      this.#autoDelayMs,
      result.latencyMs,
      result.status,
      this.#limits,
    );
    if (next !== this.#autoDelayMs) {
      this.#autoDelayMs = next;
      super.setBaseDelay(next);
    }
  }

  override setBaseDelay(delayMs: number, options?: BaseDelayOptions): void {
    // A new floor (robots.txt Crawl-delay): AutoThrottle never goes below DOWNLOAD_DELAY.
    this.#limits.minDelayMs = delayMs;
    this.#autoDelayMs = Math.max(this.#autoDelayMs, delayMs);
    super.setBaseDelay(this.#autoDelayMs, options);
  }
}

/**
 * A scope manager factory running Scrapy's AutoThrottle: each scope starts at
 * `max(DOWNLOAD_DELAY, startDelayMs)`, and every settled request moves its
 * delay toward `latency / targetConcurrency` (never below the scope's
 * configured delay, never above `maxDelayMs`; non-200 answers never lower
 * it). Backoff, holds and quotas still apply on top. The throttler uses it
 * for every scope when `autothrottle.enabled` is set.
 *
 * @param options Start delay, max delay, target concurrency.
 * @returns A factory for the throttler's `scopeManager` option or a scope's `manager`.
 * @throws {RangeError} when an option is out of range.
 * @example
 * ```ts
 * import { autoThrottleManager, createThrottler } from "../../mod.ts";
 * const throttler = createThrottler({}, {
 *   scopeManager: autoThrottleManager({ startDelayMs: 1_000, targetConcurrency: 2 }),
 * });
 * console.assert(throttler.manager("example.com").state?.(0).delayMs === 1_000);
 * ```
 */
export function autoThrottleManager(options: AutoThrottleOptions = {}): ScopeManagerFactory {
  const resolved: Required<AutoThrottleOptions> = {
    startDelayMs: options.startDelayMs ?? 5_000,
    maxDelayMs: options.maxDelayMs ?? 60_000,
    targetConcurrency: options.targetConcurrency ?? 1,
  };
  for (const [name, value] of Object.entries(resolved)) {
    const ok = name === "targetConcurrency" ? value > 0 : value >= 0;
    if (!Number.isFinite(value) || !ok) {
      throw new RangeError(
        `Cannot create autoThrottleManager as '${name}' must be a finite number ${
          name === "targetConcurrency" ? "> 0" : ">= 0"
        }: current value is ${value}`,
      );
    }
  }
  return (context) => new AutoThrottleScopeManager(context, resolved);
}
