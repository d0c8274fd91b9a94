/**
 * How politely turns an error into text (private: not exported from
 * `mod.ts`). Events name it by class and code ({@link errorText}: the
 * `error` of `request-done`, the `cause` of `backoff` and `retry`, so the
 * three name one failure alike); a record or a message a person reads gives
 * its words ({@link errorLine}, {@link errorReason}).
 *
 * @module
 */
import { classifyDownloadError } from "./download_errors.ts";

/**
 * The error's class, as `classifyDownloadError` reads it, and, when it has
 * one, the code that names the cause: `DownloadFailedError ECONNREFUSED`,
 * `DownloadTimeoutError`, `RangeError`. A log line then says why a site is
 * backed off, not only that a download failed; the message (with its URL) is
 * left to the outcome, so events of one cause read alike and group in a
 * summary.
 *
 * @param error What a download threw (classified or not).
 * @returns The words for an event.
 */
export function errorText(error: unknown): string {
  const classified = classifyDownloadError(error);
  if (!(classified instanceof Error)) return String(classified);
  const code = (classified as { code?: unknown }).code;
  return typeof code === "string" && code !== "" ? `${classified.name} ${code}` : classified.name;
}

/**
 * What went wrong, in words: the error's message, or when it has none (Node
 * gives a connection error to every address an empty message and the
 * per-address failures in `errors`), its first inner error's message, its
 * code, or its name. For a message that names its cause (`RedisScopesError`:
 * "... as Redis failed: connect ECONNREFUSED 127.0.0.1:6390").
 *
 * @param error Anything thrown.
 * @returns The words, never empty for an `Error`.
 */
export function errorReason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.message !== "") return error.message;
  const inner = (error as { errors?: unknown }).errors;
  if (Array.isArray(inner) && inner[0] instanceof Error && inner[0].message !== "") {
    return inner[0].message;
  }
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && code !== "" ? code : error.name;
}

/**
 * One error on one line, for a record a reader goes through (the command
 * line's output): its name and the first line of its {@link errorReason}:
 * `DownloadFailedError: Download of http://a.test/ failed: connect ECONNREFUSED 127.0.0.1:80`.
 *
 * @param error Anything thrown.
 * @returns One line.
 */
export function errorLine(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return `${error.name}: ${errorReason(error).split("\n")[0]}`;
}
