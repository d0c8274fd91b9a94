/**
 * What a crawl prints when stdout is not a terminal: one plain line per
 * throttling change worth knowing (backoff, recovery, holds, rampup steps,
 * warnings) and a progress line every few seconds. Pure functions: the
 * crawl decides when to print.
 *
 * @module
 */
import { match } from "ts-pattern";
import type { ThrottleEvent } from "../events.ts";
import { formatDelay, formatDuration, type LiveViewState } from "./live_view.ts";

/**
 * The log line of an event, or `undefined` for events too frequent to log
 * (sends, completions, waits).
 *
 * @param event The event.
 * @param startedAt Scheduler time at which the crawl started (lines show time since).
 * @param label How a scope is shown. @default the scope's name
 * @returns One line, without newline.
 * @example
 * ```ts
 * import { formatPlainEvent } from "./plain_log.ts";
 * const line = formatPlainEvent(
 *   { type: "backoff", at: 2500, scope: "a.example", delayMs: 1000, level: 1, concurrency: 1, holdUntil: undefined, cause: "status 429" },
 *   0,
 * );
 * console.assert(line === "[2.5s] a.example backoff: status 429, level 1, delay 1.00s, concurrency 1");
 * ```
 */
export function formatPlainEvent(
  event: ThrottleEvent,
  startedAt: number,
  label: (scope: string) => string = String,
): string | undefined {
  const t = `[${formatDuration(event.at - startedAt)}]`;
  return match(event)
    .with(
      { type: "backoff" },
      (e) =>
        `${t} ${label(e.scope)} backoff: ${e.cause}, level ${e.level}, delay ${
          formatDelay(e.delayMs)
        }, concurrency ${e.concurrency}` +
        (e.holdUntil !== undefined && e.holdUntil > e.at
          ? `, hold ${formatDuration(e.holdUntil - e.at)}`
          : ""),
    )
    .with(
      { type: "recovery" },
      (e) => `${t} ${label(e.scope)} recovery: level ${e.level}, delay ${formatDelay(e.delayMs)}`,
    )
    .with(
      { type: "hold" },
      (e) => `${t} ${label(e.scope)} hold ${formatDuration(e.until - e.at)} (${e.source})`,
    )
    .with(
      { type: "rampup" },
      (e) =>
        `${t} ${label(e.scope)} rampup: ${e.why}, delay ${
          formatDelay(e.delayMs)
        }, concurrency ${e.concurrency}`,
    )
    .with({ type: "robots" }, (e) =>
      `${t} ${label(e.scope)} robots.txt: ${e.decision}` +
      (e.crawlDelayMs !== undefined ? ` (Crawl-delay ${formatDelay(e.crawlDelayMs)})` : ""))
    .with(
      { type: "warning" },
      (e) => `${t} warning${e.scope !== undefined ? ` ${label(e.scope)}` : ""}: ${e.message}`,
    )
    .with(
      { type: "scope-created" },
      { type: "scope-evicted" },
      { type: "request-delayed" },
      { type: "request-sent" },
      { type: "request-done" },
      { type: "retry" },
      // Every response with rate-limit headers has one: the debug log shows them.
      { type: "announced" },
      () => undefined,
    )
    .exhaustive();
}

/**
 * The periodic progress line of plain mode.
 *
 * @param state The same state the live view shows.
 * @returns One line, e.g. `[12s] done 120/300, in flight 5, queued 175, retries 3, failed 1, ETA 18s`.
 */
export function formatProgressLine(state: LiveViewState): string {
  return `[${
    formatDuration(state.elapsedMs)
  }] done ${state.done}/${state.total}, in flight ${state.inFlight}, ` +
    `queued ${state.queued}, retries ${state.retries}, failed ${state.failures}` +
    (state.evicted > 0 ? `, evicted ${state.evicted}` : "") +
    (state.etaMs === undefined ? "" : `, ETA ${formatDuration(state.etaMs)}`);
}
