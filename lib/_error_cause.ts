/**
 * How an event names the error behind it. Private helper of the backoff and
 * retry events.
 *
 * @module
 */

/**
 * The error's class and, when it has one, the code that names the cause:
 * `DownloadFailedError ECONNREFUSED`, `DownloadTimeoutError`. A log line then
 * says why a site is backed off, not only that a download failed.
 *
 * @param error What a download threw (classified or not).
 * @returns The words for an event's `cause`.
 */
export function errorCause(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && code !== "" ? `${error.name} ${code}` : error.name;
}
