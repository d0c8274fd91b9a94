/**
 * The readable line of a throttling event, as the `debug` setting logs it.
 *
 * @module
 */
import type { ThrottleEvent } from "../events.ts";

/**
 * One readable line for an event (THROTTLING_DEBUG / `debug`): the time, the
 * kind, then what changed, e.g. `12:00:01.050 backoff a.test: delay 2s
 * (level 2), cause status 429`. Virtual times (below 1e11 ms) show as seconds
 * since 0, real ones as the UTC time of day.
 *
 * @param event The event.
 * @returns The line, without a newline.
 */
export function formatEvent(event: ThrottleEvent): string {
  const time = formatAt(event.at);
  switch (event.type) {
    case "backoff":
      return `${time} backoff ${event.scope}: delay ${formatMs(event.delayMs)}` +
        ` (level ${event.level}), cause ${event.cause}`;
    case "hold":
      return `${time} hold ${event.scope}: nothing sent until ${formatAt(event.until)}` +
        ` (${formatMs(event.until - event.at)}, ${event.source})`;
    case "recovery":
      return `${time} recovery ${event.scope}: delay ${formatMs(event.delayMs)}` +
        ` (level ${event.level})`;
    case "retry":
      return `${time} retry ${event.scopes.join(",")}: attempt ${event.attempt}` +
        ` (after ${event.cause})`;
    default: {
      const { type, at: _at, ...rest } = event;
      const parts = Object.entries(rest)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => `${k}=${formatValue(v)}`);
      return `${time} ${type} ${parts.join(" ")}`;
    }
  }
}

function formatValue(v: unknown): string {
  if (Array.isArray(v)) return v.join(",");
  return typeof v === "number" ? String(Math.round(v * 1000) / 1000) : String(v);
}

function formatAt(at: number): string {
  return at >= 1e11 ? new Date(at).toISOString().slice(11, 23) : `${(at / 1000).toFixed(3)}s`;
}

function formatMs(ms: number): string {
  if (ms === 0) return "0s";
  return ms < 1000 ? `${Math.round(ms * 10) / 10}ms` : `${Math.round(ms) / 1000}s`;
}
