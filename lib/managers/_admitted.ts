/**
 * Whether a settled request was admitted by the site, for the adaptive
 * arithmetic (`scope_manager.ts`, `_rampup.ts`).
 *
 * @module
 */
import type { DoneInfo } from "./scope_manager_protocol.ts";

/**
 * An answer whose status, if it has one, is not a backoff code: a download
 * that returns something without a status (parsed data, say) was answered.
 * A failed download (an error outcome) was not.
 */
export function admitted(
  result: DoneInfo | undefined,
  triggerCodes: readonly number[],
): result is DoneInfo {
  return result !== undefined && result.failed !== true &&
    (result.status === undefined || !triggerCodes.includes(result.status));
}
