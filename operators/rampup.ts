/**
 * `rampup`: find the fastest rate each scope tolerates and stay just under it.
 *
 * @module
 */
import { Observable, type OperatorFunction } from "rxjs";
import type { Outcome } from "../lib/outcome.ts";
import type { RampupConfig } from "../lib/settings.ts";
import type { Throttler } from "../lib/throttler.ts";
import { resolveRampupOption } from "../lib/_rampup.ts";

/** Options of {@link rampup}. */
export interface RampupOptions extends RampupConfig {
  /** Which scopes ramp up. @default every scope */
  readonly scopes?: (scope: string) => boolean;
}

/**
 * Turns rampup on for the scopes of a pipeline and passes outcomes through.
 *
 * From the moment it is subscribed (before its source, so before the first
 * request reaches the gate), every matching scope that does not configure
 * `rampup` itself starts at `minConcurrency` and, per `backoff.windowMs`,
 * steps up while it sees fewer backoff triggers than `backoffTarget`, holds
 * within the target, and lets triggers cut its rate above it (see
 * docs/RAMPUP.md). Scopes already in memory are switched on at once. When the
 * subscription ends, scopes created later no longer ramp up; scopes that did
 * keep what they learned.
 *
 * Put it after `backoffOn` (it only needs the throttler: triggers reach
 * rampup through `backoffOn`).
 *
 * @param throttler The throttler of the gate.
 * @param options Rampup options over the settings' `rampup`, and a scope filter.
 * @returns An operator passing outcomes through unchanged.
 * @throws {TypeError | RangeError} for bad options, naming the field.
 * @example
 * ```ts
 * import { from } from "rxjs";
 * import { backoffOn, createThrottler, rampup, throttleByScope } from "../mod.ts";
 * const throttler = createThrottler({ backoff: { windowMs: 2_000 } });
 * from(["https://example.com/a"]).pipe(
 *   throttleByScope(throttler, (url) => Promise.resolve({ status: 200, url })),
 *   backoffOn(throttler),
 *   rampup(throttler, { backoffTarget: [1, 2] }),
 * ).subscribe((o) => console.log(o.kind));
 * ```
 */
export function rampup<R, T>(
  throttler: Throttler<R>,
  options: RampupOptions = {},
): OperatorFunction<Outcome<R, T>, Outcome<R, T>> {
  const { scopes, ...config } = options;
  if (scopes !== undefined && typeof scopes !== "function") {
    throw new TypeError(
      `Cannot create rampup as 'scopes' must be a function (scope) => boolean: current value is ${
        String(scopes)
      }`,
    );
  }
  // Validate now, not at the first subscription.
  resolveRampupOption(throttler.settings.rampup, config);
  return (source) =>
    new Observable<Outcome<R, T>>((subscriber) => {
      const stop = throttler.enableRampup(scopes ?? (() => true), config);
      const subscription = source.subscribe(subscriber);
      return () => {
        subscription.unsubscribe();
        stop();
      };
    });
}
