/**
 * `rampup`: turn rampup on for the lifetime of a pipeline. A switch with a
 * subscription's lifetime, not a transformation: outcomes pass through
 * untouched, and the learning happens in the throttler's scopes from the
 * triggers `backoffOn` records. `throttler.enableRampup` is the same switch
 * without a pipeline (docs/DECISIONS.md, "Tidying").
 *
 * @module
 */
import { Observable, type OperatorFunction } from "rxjs";
import type { Outcome } from "../lib/outcome.ts";
import type { RampupConfig } from "../lib/settings/settings.ts";
import type { Throttler } from "../lib/throttler/throttler.ts";
import { resolveRampupOption } from "../lib/managers/_rampup.ts";

/** Options of {@link rampup}. */
export interface RampupOptions extends RampupConfig {
  /** Which scopes ramp up. @default every scope */
  readonly scopes?: (scope: string) => boolean;
}

/**
 * Turns rampup on for the scopes of a pipeline, for as long as it is
 * subscribed, and passes outcomes through untouched (the same objects). It
 * reads no outcome and changes none: it is `throttler.enableRampup(scopes,
 * options)` called on subscribe and stopped on teardown, so where it sits
 * after the gate does not change what it does. Use
 * {@link Throttler.enableRampup} directly when rampup should not follow one
 * pipeline's lifetime (a throttler shared by several pipelines, a crawl
 * driven by a queue), or `rampup: true` on a scope of the settings' `scopes`
 * when it should always be on for that scope.
 *
 * From the moment it is subscribed (before its source, so before the first
 * request reaches the gate), every matching scope that does not configure
 * `rampup` itself starts at two in flight (one while it has a delay to
 * lower first; `minConcurrency` if higher) and, per round,
 * steps up while it sees fewer backoff triggers than `backoffTarget`, holds
 * within the target, and lets triggers cut its rate above it (see
 * docs/RAMPUP.md). Scopes already in memory are switched on at once. When the
 * subscription ends, scopes created later no longer ramp up; scopes that did
 * keep what they learned.
 *
 * The triggers it learns from reach the scopes through `backoffOn`: without
 * `backoffOn` in the pipeline (or something else recording backoff on the
 * throttler), rampup steps up and never learns a limit. Put it last, after
 * `backoffOn`, where it reads as the pipeline-wide switch it is.
 *
 * @param throttler The throttler of the gate.
 * @param options Rampup options over the settings' `rampup`, and a scope filter.
 * @returns An operator passing outcomes through unchanged.
 * @throws {TypeError | RangeError} for bad options, naming the field.
 * @example In a pipeline
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
 * @example The same switch without an operator
 * ```ts
 * import assert from "node:assert/strict";
 * import { createThrottler } from "../mod.ts";
 * const throttler = createThrottler();
 * const stop = throttler.enableRampup((scope) => scope.endsWith(".example"), {
 *   backoffTarget: [1, 2],
 * });
 * throttler.manager("api.example");
 * assert.equal(throttler.state("api.example")?.rampup, true);
 * stop(); // scopes created from now on do not ramp up; api.example keeps what it learned
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
