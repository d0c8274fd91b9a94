/**
 * The live view of a crawl on a terminal: a header, a progress bar with
 * counts and ETA, and one row per active scope. {@link renderLiveView} is
 * pure (state in, fixed-width text out), so frames are tested against stored
 * ones; {@link TerminalScreen} puts frames on a terminal without flicker.
 *
 * @module
 */
import type { StatusCounts } from "./crawl_stats.ts";

/** One active scope, as the view shows it. */
export interface LiveScopeRow {
  /** The scope's name, or its label (the demo shows its sites' names). */
  readonly scope: string;
  /** Requests in flight. */
  readonly active: number;
  /** Concurrency limit now (rampup and backoff move it). */
  readonly concurrency: number;
  /** Stored delay between sends, in ms. */
  readonly delayMs: number;
  /** Unrecovered backoff triggers (0: not in backoff). */
  readonly backoffLevel: number;
  /** Time left in a hard hold (Retry-After), in ms; 0 when none. */
  readonly holdLeftMs: number;
  /**
   * The quota of the current window, configured or learned from the
   * server's rate-limit headers; the column shows only when a row has one.
   */
  readonly quota?: { readonly used: number; readonly limit: number };
  /** Attempts by status class. */
  readonly counts: StatusCounts;
  /** Completed attempts per second, recently. */
  readonly ratePerSec: number;
}

/** Everything a frame shows. */
export interface LiveViewState {
  /** E.g. `"politely crawl"`. */
  readonly title: string;
  readonly elapsedMs: number;
  /** Requests that ended. */
  readonly done: number;
  /** Requests known so far (ended, in flight, queued). */
  readonly total: number;
  readonly inFlight: number;
  readonly queued: number;
  readonly retries: number;
  readonly failures: number;
  /** Estimated time to finish, in ms; `undefined` when unknown. */
  readonly etaMs: number | undefined;
  /** The rows to show, already ordered. */
  readonly rows: readonly LiveScopeRow[];
  /** Active scopes not shown for want of room. */
  readonly hiddenScopes: number;
  /** Scopes the throttler evicted so far (idle, or over the scope limit). */
  readonly evicted: number;
  /** A last line (e.g. "Ctrl-C stops; the job directory keeps what is left"). */
  readonly note?: string;
}

/** A duration for people: `850ms`, `4.2s`, `37s`, `3m05s`, `1h02m`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "-";
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)}s`;
  if (s < 60) return `${Math.round(s)}s`;
  const total = Math.round(s);
  if (total < 3600) return `${Math.floor(total / 60)}m${String(total % 60).padStart(2, "0")}s`;
  const m = Math.floor(total / 60);
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

/** A delay for people: `0`, `125ms`, `1.5s`. */
export function formatDelay(ms: number): string {
  if (ms <= 0) return "0";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
}

/** Exactly `width` characters: cut (marking the cut with `..`) or padded. */
export function fit(text: string, width: number, align: "left" | "right" = "left"): string {
  if (width <= 0) return "";
  if (text.length > width) {
    return width <= 2 ? text.slice(0, width) : `${text.slice(0, width - 2)}..`;
  }
  return align === "left" ? text.padEnd(width) : text.padStart(width);
}

/** Cut from the left, keeping the end (a scope's port). */
function fitTail(text: string, width: number): string {
  if (text.length <= width) return text.padEnd(width);
  return width <= 2 ? text.slice(-width) : `..${text.slice(text.length - width + 2)}`;
}

const COLUMNS: readonly { readonly title: string; readonly width: number }[] = [
  { title: "flight", width: 7 },
  { title: "delay", width: 8 },
  { title: "backoff", width: 8 },
  { title: "hold", width: 7 },
  { title: "quota", width: 10 },
  { title: "2xx", width: 7 },
  { title: "3xx", width: 6 },
  { title: "4xx", width: 6 },
  { title: "5xx", width: 6 },
  { title: "err", width: 6 },
  { title: "req/s", width: 7 },
];
const DROP_ORDER: readonly string[] = ["3xx", "err", "hold", "quota", "backoff", "4xx"];
const MIN_SCOPE = 16;

function totalWidth(columns: readonly { readonly width: number }[]): number {
  return columns.reduce((n, c) => n + c.width, 0);
}

/**
 * Render one frame.
 *
 * @param state What to show.
 * @param width Terminal columns; every line is exactly this wide (min 40).
 * @returns The frame, lines joined by `\n`, no trailing newline.
 * @example
 * ```ts
 * import { renderLiveView } from "./live_view.ts";
 * const frame = renderLiveView({
 *   title: "politely crawl", elapsedMs: 1500, done: 1, total: 2, inFlight: 1, queued: 0,
 *   retries: 0, failures: 0, etaMs: 1500, rows: [], hiddenScopes: 0, evicted: 0,
 * }, 80);
 * console.assert(frame.split("\n").every((line) => line.length === 80));
 * ```
 */
export function renderLiveView(state: LiveViewState, width: number): string {
  const w = Math.max(40, Math.floor(width));
  const lines: string[] = [];
  lines.push(fit(
    `${state.title}  ${formatDuration(state.elapsedMs)}  done ${state.done}/${state.total}  ` +
      `in flight ${state.inFlight}  queued ${state.queued}  retries ${state.retries}  failed ${state.failures}`,
    w,
  ));
  const pct = state.total > 0 ? state.done / state.total : 0;
  const tail = `${String(Math.floor(pct * 100)).padStart(3)}%  ETA ${
    state.etaMs === undefined ? "-" : formatDuration(state.etaMs)
  }`;
  const barWidth = Math.max(10, w - tail.length - 3);
  const filled = Math.round(pct * barWidth);
  lines.push(fit(`[${"#".repeat(filled)}${".".repeat(barWidth - filled)}] ${tail}`, w));
  // On a narrow terminal the least telling columns go first, so the scope keeps room.
  let columns = state.rows.some((r) => r.quota !== undefined)
    ? COLUMNS
    : COLUMNS.filter((c) => c.title !== "quota");
  for (const drop of DROP_ORDER) {
    if (w - totalWidth(columns) >= MIN_SCOPE) break;
    columns = columns.filter((c) => c.title !== drop);
  }
  const scopeWidth = Math.max(MIN_SCOPE, w - totalWidth(columns));
  lines.push(
    fit(fit("scope", scopeWidth) + columns.map((c) => fit(c.title, c.width, "right")).join(""), w),
  );
  for (const row of state.rows) {
    const cells: Record<string, string> = {
      flight: `${row.active}/${row.concurrency}`,
      delay: formatDelay(row.delayMs),
      backoff: row.backoffLevel > 0 ? `L${row.backoffLevel}` : "-",
      hold: row.holdLeftMs > 0 ? formatDuration(row.holdLeftMs) : "-",
      quota: row.quota === undefined ? "-" : `${Math.round(row.quota.used)}/${row.quota.limit}`,
      "2xx": String(row.counts["2xx"]),
      "3xx": String(row.counts["3xx"]),
      "4xx": String(row.counts["4xx"]),
      "5xx": String(row.counts["5xx"]),
      err: String(row.counts.error),
      "req/s": row.ratePerSec.toFixed(1),
    };
    lines.push(
      fit(
        fitTail(row.scope, scopeWidth) +
          columns.map((c) => fit(cells[c.title]!, c.width, "right")).join(""),
        w,
      ),
    );
  }
  if (state.rows.length === 0) lines.push(fit("(no active scope)", w));
  const more: string[] = [];
  if (state.hiddenScopes > 0) more.push(`+ ${state.hiddenScopes} more active scopes`);
  if (state.evicted > 0) {
    more.push(`${state.evicted} ${state.evicted === 1 ? "scope" : "scopes"} evicted`);
  }
  if (more.length > 0) lines.push(fit(more.join(", "), w));
  if (state.note !== undefined) lines.push(fit(state.note, w));
  return lines.join("\n");
}

/** Where frames go: a TTY write stream (`process.stdout`) or anything alike. */
export interface TerminalLike {
  write(text: string): unknown;
  readonly columns?: number | undefined;
}

const HIDE_CURSOR = "\x1b[?25l";
const SHOW_CURSOR = "\x1b[?25h";
const ERASE_LINE_END = "\x1b[K";
const ERASE_BELOW = "\x1b[J";

/**
 * Draws frames in place: the cursor goes back to the first line of the last
 * frame and every line is overwritten (no clear, so no flicker); the cursor is
 * hidden while drawing and shown again by `close()`. Moving up rather than to
 * the screen's home keeps what was printed before the crawl.
 */
export class TerminalScreen {
  readonly #out: TerminalLike;
  #lines = 0;
  #closed = false;

  constructor(out: TerminalLike) {
    this.#out = out;
    out.write(HIDE_CURSOR);
  }

  /** Terminal columns (80 when unknown). */
  get width(): number {
    return this.#out.columns && this.#out.columns > 0 ? this.#out.columns : 80;
  }

  /** Replace the last frame by this one. */
  draw(frame: string): void {
    if (this.#closed) return;
    const lines = frame.split("\n");
    // One write per frame: the terminal never shows half of one.
    let text = this.#lines > 0 ? `\x1b[${this.#lines}F` : "";
    for (const line of lines) text += `${line}${ERASE_LINE_END}\n`;
    text += ERASE_BELOW;
    this.#out.write(text);
    this.#lines = lines.length;
  }

  /**
   * Leave the last frame where it is: the next one is drawn below whatever
   * was written after it (a line on stderr, "stopping on SIGINT", stays
   * visible instead of being drawn over).
   */
  detach(): void {
    this.#lines = 0;
  }

  /** Leave the last frame on screen and show the cursor again. Safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#out.write(SHOW_CURSOR);
  }
}
