/**
 * Reading what a server says about its rate limits: `Retry-After` (RFC 9110),
 * the IETF `RateLimit` / `RateLimit-Policy` structured fields
 * (draft-ietf-httpapi-ratelimit-headers), the older `RateLimit-Limit`,
 * `RateLimit-Remaining`, `RateLimit-Reset` (draft-polli) and the de-facto
 * `X-RateLimit-*` headers.
 *
 * Everything here is pure: the current wall-clock time is a parameter, and a
 * header that cannot be read is ignored (`undefined` or an empty list), never
 * an error, because a server's garbage must not stop a crawl.
 *
 * The HTTP-date and structured-field parsers are written here rather than
 * taken from a library: `Date.parse` accepts garbage (`Date.parse("5")` is a
 * date in 2001 on V8) and differs between runtimes, and the structured-field
 * subset needed is small; the `structured-headers` package would be the one to
 * take if more of RFC 9651 were needed.
 *
 * Size: one small parser per header family (Retry-After with HTTP dates, IETF
 * `RateLimit` structured fields, `RateLimit-*`, `X-RateLimit-*` with epoch or
 * delta resets) and the rule that picks among them; they share the number and
 * date readers.
 *
 * @module
 */
import type { AnnouncedBudget } from "../managers/scope_manager_protocol.ts";
import {
  parseStructuredDictionary,
  parseStructuredList,
  type SfBareItem,
  type SfMember,
} from "./_structured_fields.ts";

export type {
  SfBareItem,
  SfInnerList,
  SfItem,
  SfMember,
  SfParameters,
} from "./_structured_fields.ts";

/**
 * Response headers as politely reads them: a WHATWG `Headers`, or a plain
 * record such as Node's `IncomingHttpHeaders` (names in any case, values a
 * string or a list of strings).
 */
export type HeadersLike =
  | Headers
  | Readonly<Record<string, string | readonly string[] | number | undefined>>;

/**
 * The value of one header field, with repeated fields combined by `", "` as
 * RFC 9110 §5.3 allows. Names are compared case-insensitively.
 *
 * @param headers A `Headers` or a plain record; `null`/`undefined` has no fields.
 * @param name The field name, in any case.
 * @returns The combined value, or `undefined` when the field is absent.
 * @example Both shapes
 * ```ts
 * import assert from "node:assert/strict";
 * import { headerValue } from "./rate_limit_headers.ts";
 * assert(headerValue(new Headers({ "Retry-After": "5" }), "retry-after") === "5");
 * assert(headerValue({ "retry-after": ["5", "7"] }, "Retry-After") === "5, 7");
 * ```
 */
export function headerValue(
  headers: HeadersLike | null | undefined,
  name: string,
): string | undefined {
  if (typeof headers !== "object" || headers === null) return undefined;
  const get = (headers as { get?: unknown }).get;
  if (typeof get === "function") {
    const value: unknown = get.call(headers, name);
    return typeof value === "string" ? value : undefined;
  }
  const wanted = name.toLowerCase();
  const parts: string[] = [];
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted) continue;
    if (typeof value === "string") parts.push(value);
    else if (typeof value === "number") parts.push(String(value));
    else if (Array.isArray(value)) {
      for (const v of value) if (typeof v === "string") parts.push(v);
    }
  }
  return parts.length === 0 ? undefined : parts.join(", ");
}

/**
 * The `X-RateLimit-<part>` header, or its `X-Rate-Limit-<part>` spelling
 * (X/Twitter, Okta: the same numbers, an epoch reset), with the name it was
 * read under.
 */
function xRateLimit(
  headers: HeadersLike | null | undefined,
  part: "limit" | "remaining" | "reset",
): { readonly name: string; readonly value: string } | undefined {
  for (const name of [`x-ratelimit-${part}`, `x-rate-limit-${part}`]) {
    const value = headerValue(headers, name);
    if (value !== undefined) return { name, value };
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Numbers

const DECIMAL = /^[ \t]*(\d+)(?:\.(\d+))?[ \t]*$/;

/** A non-negative decimal number (`"5"`, `"0.5"`); signs, exponents and garbage are not. */
function parseNonNegative(value: string): number | undefined {
  const m = DECIMAL.exec(value);
  if (m === null) return undefined;
  const n = Number(m[0].trim());
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Delta-seconds as whole milliseconds, computed from the digits so that
 * `"1.1"` is exactly 1100 (not 1100.0000000000002); a fraction finer than a
 * millisecond rounds up, so a positive delay never becomes 0.
 */
function parseDeltaSecondsMs(value: string): number | undefined {
  const m = DECIMAL.exec(value);
  if (m === null) return undefined;
  const whole = Number(m[1]);
  const fraction = m[2] ?? "";
  const ms = whole * 1000 + Number(fraction.slice(0, 3).padEnd(3, "0")) +
    (/[1-9]/.test(fraction.slice(3)) ? 1 : 0);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * The members of a field that should occur once but was sent several times
 * (`"5, 7"`). Commas inside an HTTP-date (`"Sun, 06 Nov 1994 ..."`) are kept:
 * a piece that is only a day name is joined to the piece after it.
 */
function singletonMembers(value: string): string[] {
  const pieces = value.split(",");
  const members: string[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i] as string;
    const next = pieces[i + 1];
    if (/^[ \t]*[A-Za-z]+[ \t]*$/.test(piece) && next !== undefined) {
      members.push(`${trimOws(piece)},${next}`);
      i++;
    } else {
      members.push(piece);
    }
  }
  return members.map(trimOws);
}

/** Strip optional whitespace (SP and HTAB only: a newline or NUL makes a value invalid). */
function trimOws(value: string): string {
  return value.replace(/^[ \t]+|[ \t]+$/g, "");
}

function largest(values: readonly (number | undefined)[]): number | undefined {
  let best: number | undefined;
  for (const v of values) if (v !== undefined && (best === undefined || v > best)) best = v;
  return best;
}

function smallest(values: readonly (number | undefined)[]): number | undefined {
  let best: number | undefined;
  for (const v of values) if (v !== undefined && (best === undefined || v < best)) best = v;
  return best;
}

// ---------------------------------------------------------------------------
// HTTP-date (RFC 9110 §5.6.7)

const DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const LONG_DAY = "(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)";
const MONTH = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)";
const TIME = "(\\d{2}):(\\d{2}):(\\d{2})";
const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
/** `Sun, 06 Nov 1994 08:49:37 GMT` (one-digit days and `UTC` tolerated). */
const IMF_FIXDATE = new RegExp(
  `^${DAY},[ \\t]+(\\d{1,2})[ \\t]+${MONTH}[ \\t]+(\\d{4})[ \\t]+${TIME}[ \\t]+(?:GMT|UTC)$`,
  "i",
);
/** `Sunday, 06-Nov-94 08:49:37 GMT` */
const RFC850_DATE = new RegExp(
  `^${LONG_DAY},[ \\t]+(\\d{2})-${MONTH}-(\\d{2})[ \\t]+${TIME}[ \\t]+(?:GMT|UTC)$`,
  "i",
);
/** `Sun Nov  6 08:49:37 1994` */
const ASCTIME_DATE = new RegExp(
  `^${DAY}[ \\t]+${MONTH}[ \\t]+(\\d{1,2})[ \\t]+${TIME}[ \\t]+(\\d{4})$`,
  "i",
);

function utcMs(
  year: number,
  monthName: string,
  day: number,
  hour: number,
  minute: number,
  second: number,
): number | undefined {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  if (month < 0 || day < 1 || hour > 23 || minute > 59 || second > 60) return undefined;
  // setUTCFullYear, unlike Date.UTC, does not read years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month, day);
  if (date.getUTCMonth() !== month) return undefined; // 31 Feb rolled over
  return date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000;
}

/**
 * Parse an HTTP-date in any of the three forms RFC 9110 §5.6.7 says a
 * recipient must accept: IMF-fixdate, the obsolete RFC 850 form and ANSI C's
 * asctime form. Names are read case-insensitively; the day name is not
 * checked against the date.
 *
 * @param value The date text.
 * @param nowEpochMs The current time, needed to place an RFC 850 two-digit
 *   year: one that would be more than 50 years in the future is read as the
 *   most recent past year with the same last two digits.
 * @returns Epoch milliseconds, or `undefined` when `value` is not an HTTP-date.
 * @example The three forms
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseHttpDate } from "./rate_limit_headers.ts";
 * const t = 784111777000;
 * assert(parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT", 0) === t);
 * assert(parseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT", 0) === t);
 * assert(parseHttpDate("Sun Nov  6 08:49:37 1994", 0) === t);
 * ```
 */
export function parseHttpDate(value: string, nowEpochMs: number): number | undefined {
  const text = trimOws(value);
  let m = IMF_FIXDATE.exec(text);
  if (m !== null) {
    const [, d, mon, y, hh, mm, ss] = m as unknown as string[];
    return utcMs(Number(y), mon!, Number(d), Number(hh), Number(mm), Number(ss));
  }
  m = RFC850_DATE.exec(text);
  if (m !== null) {
    const [, d, mon, yy, hh, mm, ss] = m as unknown as string[];
    const nowYear = Number.isFinite(nowEpochMs) ? new Date(nowEpochMs).getUTCFullYear() : 1970;
    const century = nowYear - (nowYear % 100);
    // The latest of the neighbouring centuries that is at most 50 years ahead.
    let year = century + 100 + Number(yy);
    while (year > nowYear + 50) year -= 100;
    return utcMs(year, mon!, Number(d), Number(hh), Number(mm), Number(ss));
  }
  m = ASCTIME_DATE.exec(text);
  if (m !== null) {
    const [, mon, d, hh, mm, ss, y] = m as unknown as string[];
    return utcMs(Number(y), mon!, Number(d), Number(hh), Number(mm), Number(ss));
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Retry-After, RateLimit-Reset, X-RateLimit-Reset

function parseOneRetryAfter(value: string, nowEpochMs: number): number | undefined {
  const delta = parseDeltaSecondsMs(value);
  if (delta !== undefined) return delta;
  const at = parseHttpDate(value, nowEpochMs);
  if (at === undefined || !(at >= nowEpochMs)) return undefined;
  return Math.ceil(at - nowEpochMs);
}

/**
 * The delay a `Retry-After` value asks for.
 *
 * Accepts delta-seconds (leniently with a fraction, `"0.5"` is 500 ms, since
 * real servers send them) and HTTP-dates in all three RFC 9110 forms. A field
 * sent several times (`"5, 7"`) gives its largest valid member. Signs
 * (`"+5"`, `"-0"`), exponents (`"1e3"`), non-ASCII digits, control
 * characters, values too large to be finite and dates in the past give
 * `undefined`. No cap is applied: that is the caller's job.
 *
 * @param value The header value (`null`/`undefined` when absent).
 * @param nowEpochMs The current wall-clock time, epoch ms (for dates).
 * @returns The delay in whole milliseconds (0 means "now"), or `undefined`.
 * @example Seconds and dates
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRetryAfter } from "./rate_limit_headers.ts";
 * const now = Date.UTC(2025, 0, 1, 12, 0, 0);
 * assert(parseRetryAfter("120", now) === 120_000);
 * assert(parseRetryAfter("0.5", now) === 500);
 * assert(parseRetryAfter("Wed, 01 Jan 2025 12:00:30 GMT", now) === 30_000);
 * assert(parseRetryAfter("Wed, 01 Jan 2025 11:00:00 GMT", now) === undefined);
 * assert(parseRetryAfter("soon", now) === undefined);
 * ```
 */
export function parseRetryAfter(
  value: string | null | undefined,
  nowEpochMs: number,
): number | undefined {
  if (typeof value !== "string") return undefined;
  const whole = parseOneRetryAfter(value, nowEpochMs);
  if (whole !== undefined || !value.includes(",")) return whole;
  return largest(singletonMembers(value).map((m) => parseOneRetryAfter(m, nowEpochMs)));
}

/**
 * The delay a draft-polli `RateLimit-Reset` value (delta-seconds until the
 * quota resets) gives. Read like `Retry-After`'s delta-seconds: fractions
 * allowed, anything else `undefined`; repeated fields give the largest.
 *
 * @param value The header value.
 * @returns Milliseconds, or `undefined`.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRateLimitReset } from "./rate_limit_headers.ts";
 * assert(parseRateLimitReset("30") === 30_000);
 * assert(parseRateLimitReset("-1") === undefined);
 * ```
 */
export function parseRateLimitReset(value: string | null | undefined): number | undefined {
  if (typeof value !== "string") return undefined;
  return largest(singletonMembers(value).map(parseDeltaSecondsMs));
}

/** 10^9 seconds is 2001-09-09: no server means a 31-year delay. */
const EPOCH_SECONDS_THRESHOLD = 1e9;
/** 10^12 seconds is 31,700 years: such a value is epoch milliseconds. */
const EPOCH_MS_THRESHOLD = 1e12;

/** Whether an `X-RateLimit-Reset` value is an epoch time in whole seconds (GitHub's form). */
function isEpochSeconds(value: string | undefined): boolean {
  if (value === undefined) return false;
  const n = parseNonNegative(singletonMembers(value)[0] ?? "");
  return n !== undefined && n > EPOCH_SECONDS_THRESHOLD && n <= EPOCH_MS_THRESHOLD;
}

function parseOneXReset(value: string, nowEpochMs: number | undefined): number | undefined {
  const n = parseNonNegative(value);
  if (n === undefined) return undefined;
  if (n <= EPOCH_SECONDS_THRESHOLD) return parseDeltaSecondsMs(value);
  if (nowEpochMs === undefined) return undefined;
  const at = n > EPOCH_MS_THRESHOLD ? n : n * 1000;
  return at >= nowEpochMs ? Math.ceil(at - nowEpochMs) : undefined;
}

/**
 * The delay an `X-RateLimit-Reset` value gives. Servers disagree on its
 * meaning: values up to 10^9 are read as delta-seconds, larger ones as an
 * epoch timestamp in seconds (GitHub's form), and values above 10^12 as
 * epoch milliseconds. A timestamp in the past gives `undefined`.
 *
 * @param value The header value.
 * @param nowEpochMs The current wall-clock time, epoch ms.
 * @returns Milliseconds, or `undefined`.
 * @example Delta and epoch forms
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseXRateLimitReset } from "./rate_limit_headers.ts";
 * const now = 1_700_000_000_000;
 * assert(parseXRateLimitReset("60", now) === 60_000);
 * assert(parseXRateLimitReset("1700000060", now) === 60_000);
 * assert(parseXRateLimitReset("1699999999", now) === undefined);
 * ```
 */
export function parseXRateLimitReset(
  value: string | null | undefined,
  nowEpochMs: number,
): number | undefined {
  if (typeof value !== "string") return undefined;
  return largest(singletonMembers(value).map((m) => parseOneXReset(m, nowEpochMs)));
}

// ---------------------------------------------------------------------------
// RateLimit and RateLimit-Policy

/** One policy's state from a `RateLimit` field. */
export interface RateLimitEntry {
  /** The policy name (the item's string or token), when it has one. */
  readonly policy: string | undefined;
  /** Quota units left (`r`, or `remaining` in the older dictionary form). */
  readonly remaining: number | undefined;
  /** Time until the quota resets (`t`, or `reset`), ms. */
  readonly resetMs: number | undefined;
  /** The quota (`limit`), only in the older dictionary form. */
  readonly limit: number | undefined;
}

/** One policy from a `RateLimit-Policy` field. */
export interface RateLimitPolicy {
  /** The policy name, when it has one. */
  readonly policy: string | undefined;
  /** Quota units per window (`q`, or the item's integer in draft-polli's form). */
  readonly quota: number;
  /** The window (`w`), ms. */
  readonly windowMs: number | undefined;
}

function itemNumber(item: SfBareItem | undefined): number | undefined {
  if (item === undefined || (item.type !== "integer" && item.type !== "decimal")) return undefined;
  return item.value >= 0 ? item.value : undefined;
}

/** Seconds as ms; an SF decimal has at most three fraction digits, so rounding is exact. */
function itemSecondsMs(item: SfBareItem | undefined): number | undefined {
  const s = itemNumber(item);
  return s === undefined ? undefined : Math.round(s * 1000);
}

function itemName(item: SfBareItem): string | undefined {
  return item.type === "string" || item.type === "token" ? item.value : undefined;
}

function memberValue(member: SfMember | undefined): SfBareItem | undefined {
  return member?.kind === "item" ? member.value : undefined;
}

/**
 * Parse a `RateLimit` field: the current List form
 * (`"default";r=50;t=30`, one item per policy, draft-ietf-httpapi-ratelimit-headers-08
 * and later) or the older Dictionary form (`limit=100, remaining=50, reset=30`,
 * drafts 05–07). Negative or non-numeric parameters are left out.
 *
 * @param value The field value.
 * @returns One entry per policy; empty for an absent or invalid field.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRateLimit } from "./rate_limit_headers.ts";
 * const [e] = parseRateLimit('"default";r=0;t=30');
 * assert(e?.policy === "default" && e.remaining === 0 && e.resetMs === 30_000);
 * ```
 */
export function parseRateLimit(value: string | null | undefined): RateLimitEntry[] {
  if (typeof value !== "string") return [];
  const list = parseStructuredList(value);
  if (list !== undefined) {
    const entries: RateLimitEntry[] = [];
    for (const member of list) {
      if (member.kind !== "item") continue;
      const remaining = itemNumber(member.params.get("r"));
      const resetMs = itemSecondsMs(member.params.get("t"));
      if (remaining === undefined && resetMs === undefined) continue;
      entries.push({ policy: itemName(member.value), remaining, resetMs, limit: undefined });
    }
    if (entries.length > 0) return entries;
  }
  const dict = parseStructuredDictionary(value);
  if (dict === undefined) return [];
  const remaining = itemNumber(memberValue(dict.get("remaining")));
  const resetMs = itemSecondsMs(memberValue(dict.get("reset")));
  const limit = itemNumber(memberValue(dict.get("limit")));
  if (remaining === undefined && resetMs === undefined && limit === undefined) return [];
  return [{ policy: undefined, remaining, resetMs, limit }];
}

/**
 * Parse a `RateLimit-Policy` field: `"default";q=100;w=10` (current drafts)
 * or draft-polli's `100;w=60`. Items without a quota are left out.
 *
 * @param value The field value.
 * @returns The policies; empty for an absent or invalid field.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseRateLimitPolicy } from "./rate_limit_headers.ts";
 * const [p] = parseRateLimitPolicy('"default";q=100;w=10');
 * assert(p?.quota === 100 && p.windowMs === 10_000);
 * ```
 */
export function parseRateLimitPolicy(value: string | null | undefined): RateLimitPolicy[] {
  if (typeof value !== "string") return [];
  const policies: RateLimitPolicy[] = [];
  for (const member of parseStructuredList(value) ?? []) {
    if (member.kind !== "item") continue;
    const quota = itemNumber(member.params.get("q")) ?? itemNumber(member.value);
    if (quota === undefined) continue;
    policies.push({
      policy: itemName(member.value),
      quota,
      windowMs: itemSecondsMs(member.params.get("w")),
    });
  }
  return policies;
}

// ---------------------------------------------------------------------------
// What a response asks for

/** A delay a response asks for, and which kind of header gave it. */
export interface ServerDelay {
  /** Milliseconds, not capped. */
  readonly delayMs: number;
  /** `"retry-after"` for `Retry-After`; `"ratelimit"` for any rate-limit header. */
  readonly source: "retry-after" | "ratelimit";
}

/** Every member as a non-negative number; members may carry `;params` (draft-polli lists). */
function legacyNumbers(value: string | undefined): (number | undefined)[] {
  if (value === undefined) return [];
  return value.split(",").map((m) => parseNonNegative(m.split(";")[0] as string));
}

/** A reset counts as a delay only when its quota is spent, or no quota is said. */
const exhausted = (remaining: number | undefined) => remaining === undefined || remaining <= 0;

/**
 * The hold a response asks for: the largest of the delays its headers give.
 *
 * - `Retry-After` (delta-seconds or HTTP-date): always.
 * - The reset of a rate-limit quota, from the `RateLimit` field's `t`, from
 *   `RateLimit-Reset`, or from `X-RateLimit-Reset` (`X-Rate-Limit-Reset`):
 *   only when that quota is spent (its remaining count is 0) or no
 *   remaining count is given. A reset
 *   is when a window ends, not a request to wait: a 503 that says 4,999
 *   requests are left must not hold a scope until the hour is over.
 *
 * Invalid, negative, non-finite and past values are ignored. When the largest
 * value comes from `Retry-After` and a rate-limit header alike, the source is
 * `"retry-after"`. No cap is applied here: the caller caps.
 *
 * @param headers The response headers.
 * @param nowEpochMs The current wall-clock time, epoch ms (for dates and epoch resets).
 * @returns The delay and its source, or `undefined` when no header gives one.
 * @example Retry-After against RateLimit
 * ```ts
 * import assert from "node:assert/strict";
 * import { serverDelayMs } from "./rate_limit_headers.ts";
 * const d = serverDelayMs({ "Retry-After": "10", RateLimit: '"default";r=0;t=30' }, 0);
 * assert(d?.delayMs === 30_000 && d.source === "ratelimit");
 * assert(serverDelayMs({ RateLimit: '"default";r=5;t=30' }, 0) === undefined);
 * ```
 */
export function serverDelayMs(
  headers: HeadersLike | null | undefined,
  nowEpochMs: number,
): ServerDelay | undefined {
  let best: ServerDelay | undefined;
  const offer = (delayMs: number | undefined, source: ServerDelay["source"]) => {
    if (delayMs === undefined || !Number.isFinite(delayMs) || delayMs < 0) return;
    if (best === undefined || delayMs > best.delayMs) best = { delayMs, source };
  };
  offer(parseRetryAfter(headerValue(headers, "retry-after"), nowEpochMs), "retry-after");
  for (const entry of parseRateLimit(headerValue(headers, "ratelimit"))) {
    if (exhausted(entry.remaining)) offer(entry.resetMs, "ratelimit");
  }
  const remaining = smallest(legacyNumbers(headerValue(headers, "ratelimit-remaining")));
  if (exhausted(remaining)) {
    offer(parseRateLimitReset(headerValue(headers, "ratelimit-reset")), "ratelimit");
  }
  const xRemaining = smallest(legacyNumbers(xRateLimit(headers, "remaining")?.value));
  if (exhausted(xRemaining)) {
    offer(parseXRateLimitReset(xRateLimit(headers, "reset")?.value, nowEpochMs), "ratelimit");
  }
  return best;
}

/** What a response says about the quota left. */
export interface QuotaRemaining {
  /** Quota units left. */
  readonly remaining: number;
  /** The quota per window, when given. */
  readonly limit?: number;
  /** Time until the quota resets, ms, when given. */
  readonly resetMs?: number;
  /** The window length, ms, when a `RateLimit-Policy` gives it. */
  readonly windowMs?: number;
  /** The policy the numbers belong to, when named. */
  readonly policy?: string;
}

function quota(
  remaining: number,
  limit: number | undefined,
  resetMs: number | undefined,
  windowMs: number | undefined,
  policy: string | undefined,
): QuotaRemaining {
  return {
    remaining,
    ...(limit === undefined ? {} : { limit }),
    ...(resetMs === undefined ? {} : { resetMs }),
    ...(windowMs === undefined ? {} : { windowMs }),
    ...(policy === undefined ? {} : { policy }),
  };
}

/**
 * The quota left according to a response, for `reconcileQuota({ remaining })`.
 *
 * Read from, in order: the `RateLimit` field (when it names several
 * policies, the one with the fewest units left, which binds first), with its
 * quota and window from the `RateLimit-Policy` item of the same name (or the
 * only one); else `RateLimit-Remaining` / `X-RateLimit-Remaining` with
 * `RateLimit-Limit` / `X-RateLimit-Limit` and `RateLimit-Reset` /
 * `X-RateLimit-Reset` (or `X-Rate-Limit-*`, X/Twitter's and Okta's spelling).
 *
 * @param headers The response headers.
 * @param nowEpochMs The current wall-clock time, epoch ms; without it an
 *   epoch-form `X-RateLimit-Reset` is left out.
 * @returns The quota left, or `undefined` when no header says.
 * @example Current drafts
 * ```ts
 * import assert from "node:assert/strict";
 * import { quotaRemaining } from "./rate_limit_headers.ts";
 * const q = quotaRemaining({
 *   RateLimit: '"default";r=50;t=30',
 *   "RateLimit-Policy": '"default";q=100;w=60',
 * });
 * assert(q?.remaining === 50 && q.limit === 100 && q.resetMs === 30_000);
 * ```
 */
export function quotaRemaining(
  headers: HeadersLike | null | undefined,
  nowEpochMs?: number,
): QuotaRemaining | undefined {
  const policies = parseRateLimitPolicy(headerValue(headers, "ratelimit-policy"));
  const policyNamed = (name: string | undefined) =>
    policies.find((p) => name !== undefined && p.policy === name) ??
      (policies.length === 1 ? policies[0] : undefined);

  let binding: RateLimitEntry | undefined;
  for (const entry of parseRateLimit(headerValue(headers, "ratelimit"))) {
    if (entry.remaining === undefined) continue;
    if (binding === undefined || entry.remaining < (binding.remaining as number)) binding = entry;
  }
  if (binding !== undefined) {
    const policy = policyNamed(binding.policy);
    return quota(
      binding.remaining as number,
      binding.limit ?? policy?.quota,
      binding.resetMs,
      policy?.windowMs,
      binding.policy,
    );
  }

  const remaining = smallest(legacyNumbers(headerValue(headers, "ratelimit-remaining"))) ??
    smallest(legacyNumbers(xRateLimit(headers, "remaining")?.value));
  if (remaining === undefined) return undefined;
  const policy = policyNamed(undefined);
  const limit = legacyNumbers(headerValue(headers, "ratelimit-limit"))[0] ??
    legacyNumbers(xRateLimit(headers, "limit")?.value)[0] ?? policy?.quota;
  const xReset = xRateLimit(headers, "reset")?.value;
  const resetMs = parseRateLimitReset(headerValue(headers, "ratelimit-reset")) ??
    (xReset === undefined ? undefined : largest(
      singletonMembers(xReset).map((m) => parseOneXReset(m, nowEpochMs)),
    ));
  return quota(remaining, limit, resetMs, policy?.windowMs, policy?.policy);
}

// ---------------------------------------------------------------------------
// An announced budget, on any response

/**
 * The longest reset or window believed, ms (a day). A server that says its
 * quota resets in a month, or a value misread as one, would otherwise stop a
 * scope for that long.
 */
export const MAX_ANNOUNCED_MS = 86_400_000;

/** What {@linkcode announcedBudget} read, and what it did not believe. */
export interface AnnouncedReading extends AnnouncedBudget {
  /** The policy the numbers belong to, when named. */
  readonly policy?: string;
  /**
   * Rate-limit values that were present but not believed (unreadable,
   * negative, in the past, over a day), one line each, for a debug event.
   */
  readonly ignored?: readonly string[];
}

/**
 * Whether any header could announce a budget: one pass over a plain record's
 * names (a `Headers` is always read), so responses without rate-limit headers
 * cost no parsing.
 */
function mayAnnounce(headers: HeadersLike): boolean {
  if (typeof (headers as { get?: unknown }).get === "function") return true;
  for (const key in headers) {
    const c = key.charCodeAt(0) | 32;
    if (c !== 114 /* r */ && c !== 120 /* x */) continue;
    const k = key.toLowerCase();
    if (k.startsWith("ratelimit") || k.startsWith("x-ratelimit") || k.startsWith("x-rate-limit")) {
      return true;
    }
  }
  return false;
}

/** The `w` parameter of a draft-polli `RateLimit-Limit` member (`10, 10;w=1`), ms. */
function legacyWindowMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const m = /;[ \t]*w=(\d+)(?:[ \t]*(?:;|,|$))/.exec(value);
  return m === null ? undefined : Number(m[1]) * 1000;
}

/**
 * An epoch `X-RateLimit-Reset` up to a minute in the past reads as 0: the
 * window reset while the answer travelled, or the clocks differ a little.
 * It still tells that the quota was spent, not when to come back.
 */
function justPassed(value: string, nowEpochMs: number): number | undefined {
  const n = parseNonNegative(value);
  if (n === undefined || n <= EPOCH_SECONDS_THRESHOLD) return undefined;
  const at = n > EPOCH_MS_THRESHOLD ? n : n * 1000;
  return at < nowEpochMs && nowEpochMs - at <= 60_000 ? 0 : undefined;
}

const nonEmpty = <T>(list: T[]): T[] | undefined => list.length === 0 ? undefined : list;

/**
 * What a response announces about the server's budget, from any of the
 * header families servers use: the IETF `RateLimit` field (the policy with
 * the fewest units left binds) with its `RateLimit-Policy` item (quota `q`,
 * window `w`); else `RateLimit-Remaining` / `X-RateLimit-Remaining` with
 * `RateLimit-Limit` / `X-RateLimit-Limit` and `RateLimit-Reset` /
 * `X-RateLimit-Reset` (delta-seconds or an epoch time, told apart as in
 * {@linkcode parseXRateLimitReset}) / `X-RateLimit-Reset-After`. Every
 * `X-RateLimit-*` name is also read in X/Twitter's and Okta's spelling,
 * `X-Rate-Limit-*`.
 *
 * A field that is present but cannot be believed (unreadable, negative, an
 * epoch in the past, a reset or window over {@linkcode MAX_ANNOUNCED_MS}, a
 * limit or window of 0) is left out and named in `ignored`. Never throws.
 *
 * @param headers The response headers.
 * @param nowEpochMs The current wall-clock time, epoch ms, for epoch resets;
 *   the response's own `Date` header is preferred when it has one, so a
 *   skewed local clock does not lengthen or shorten the reset.
 * @returns What was announced, or `undefined` when no rate-limit header is present.
 * @example A GitHub-style answer
 * ```ts
 * import assert from "node:assert/strict";
 * import { announcedBudget } from "./rate_limit_headers.ts";
 * const now = 1_700_000_000_000;
 * const a = announcedBudget({
 *   "X-RateLimit-Limit": "60",
 *   "X-RateLimit-Remaining": "0",
 *   "X-RateLimit-Reset": "1700000030",
 * }, now);
 * assert(a?.limit === 60 && a.remaining === 0 && a.resetInMs === 30_000);
 * ```
 */
export function announcedBudget(
  headers: HeadersLike | null | undefined,
  nowEpochMs: number,
): AnnouncedReading | undefined {
  if (typeof headers !== "object" || headers === null || !mayAnnounce(headers)) return undefined;
  let ignored: string[] | undefined;
  let seen = false;
  const read = <T>(
    name: string,
    parse: (value: string) => T | undefined,
    value = headerValue(headers, name),
  ): T | undefined => {
    if (value === undefined) return undefined;
    seen = true;
    const parsed = parse(value);
    if (parsed === undefined) {
      (ignored ??= []).push(`${name}: ${JSON.stringify(value.slice(0, 60))}`);
    }
    return parsed;
  };
  const readX = <T>(
    part: "limit" | "remaining" | "reset",
    parse: (value: string) => T | undefined,
  ): T | undefined => {
    const x = xRateLimit(headers, part);
    return x === undefined ? undefined : read(x.name, parse, x.value);
  };
  const drop = (why: string) => (ignored ??= []).push(why);
  let clock: number | undefined;
  const serverNow = () => {
    if (clock === undefined) {
      const date = headerValue(headers, "date");
      clock = (date === undefined ? undefined : parseHttpDate(date, nowEpochMs)) ?? nowEpochMs;
    }
    return clock;
  };

  const policies = read("ratelimit-policy", (v) => nonEmpty(parseRateLimitPolicy(v))) ?? [];
  let binding: RateLimitEntry | undefined;
  for (const entry of read("ratelimit", (v) => nonEmpty(parseRateLimit(v))) ?? []) {
    if (
      binding === undefined ||
      (entry.remaining !== undefined &&
        (binding.remaining === undefined || entry.remaining < binding.remaining))
    ) binding = entry;
  }
  const policy =
    policies.find((p) => binding?.policy !== undefined && p.policy === binding.policy) ??
      (policies.length === 1 ? policies[0] : undefined);

  let remaining = binding?.remaining ??
    read("ratelimit-remaining", (v) => smallest(legacyNumbers(v))) ??
    readX("remaining", (v) => smallest(legacyNumbers(v)));
  const legacyLimit = headerValue(headers, "ratelimit-limit");
  let limit = binding?.limit ?? policy?.quota ??
    read("ratelimit-limit", (v) => legacyNumbers(v)[0]) ??
    readX("limit", (v) => legacyNumbers(v)[0]);
  let windowMs = policy?.windowMs ?? legacyWindowMs(legacyLimit);
  let resetInMs = binding?.resetMs ??
    read("ratelimit-reset", parseRateLimitReset) ??
    readX("reset", (v) => parseXRateLimitReset(v, serverNow()) ?? justPassed(v, serverNow())) ??
    read("x-ratelimit-reset-after", parseRateLimitReset);
  if (!seen && binding === undefined && policies.length === 0) return undefined;

  if (remaining !== undefined) remaining = Math.floor(remaining);
  if (limit !== undefined && !(limit >= 1)) {
    drop(`limit ${limit}: not a quota`);
    limit = undefined;
  }
  if (windowMs !== undefined && !(windowMs > 0 && windowMs <= MAX_ANNOUNCED_MS)) {
    drop(`window ${windowMs} ms: not in (0, 1 day]`);
    windowMs = undefined;
  }
  if (resetInMs !== undefined && !(resetInMs <= MAX_ANNOUNCED_MS)) {
    drop(`reset in ${resetInMs} ms: over a day`);
    resetInMs = undefined;
  }
  const name = binding?.policy ?? policy?.policy;
  // An epoch in whole seconds tells the reset to a second whenever it is
  // read; a delta read at several times narrows it (see `recordAnnounced`).
  const resetIsEpoch = resetInMs !== undefined && binding?.resetMs === undefined &&
    headerValue(headers, "ratelimit-reset") === undefined &&
    isEpochSeconds(xRateLimit(headers, "reset")?.value);
  return {
    ...(limit === undefined ? {} : { limit }),
    ...(resetIsEpoch ? { resetIsEpoch } : {}),
    ...(windowMs === undefined ? {} : { windowMs }),
    ...(remaining === undefined ? {} : { remaining }),
    ...(resetInMs === undefined ? {} : { resetInMs }),
    ...(name === undefined ? {} : { policy: name }),
    ...(ignored === undefined ? {} : { ignored }),
  };
}
