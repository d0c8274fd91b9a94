import type { Outcome } from "./outcome.ts";

/**
 * Sends an outcome's request through the gate that produced it once more
 * (attempt + 1), optionally after `delayMs`. Returns false when that gate has
 * already finished. Private link between `throttleByScope` and `backoffOn`.
 */
export type Resubmit = (outcome: Outcome<unknown, unknown>, delayMs?: number) => boolean;

/**
 * Key of the resubmit function on every outcome the gate emits. A symbol key:
 * `JSON.stringify` and `Object.keys` leave it out, so outcomes log as plain data.
 */
export const RESUBMIT: unique symbol = Symbol("politely.resubmit");

/** The resubmit function of an outcome, when it came from a live gate. */
export function resubmitOf(outcome: Outcome<unknown, unknown>): Resubmit | undefined {
  return (outcome as unknown as { [RESUBMIT]?: Resubmit })[RESUBMIT];
}
