/**
 * What a request is to politely: a URL string, a WHATWG `Request`, or a plain
 * object with a `url`. Items with no URL at all (ETL records) are fine too, as
 * long as the throttler is given a scope function for them.
 *
 * @module
 */

/** A request's scopes as a user writes them: one name, several, or `{scope: quotaAmount}`. */
export type ScopesInput =
  | string
  | Iterable<string>
  | Readonly<Record<string, number>>;

/**
 * Per-request throttling options (Scrapy's request meta, camelCased, in ms).
 */
export interface RequestMeta {
  /** Custom scopes for this request, replacing the default (domain) scope. */
  readonly throttlingScopes?: ScopesInput;
  /** Hold this request once, before it first reaches the gate. */
  readonly throttlingDelayMs?: number;
  /** Never let this request's outcome trigger backoff. */
  readonly throttlingDontTrack?: boolean;
  /** Let the request queue's dedupe pass this request. */
  readonly dontFilter?: boolean;
  readonly [key: string]: unknown;
}

/** A request as a plain object. */
export interface RequestObject {
  readonly url: string;
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Higher goes first in the request queue. @default 0 */
  readonly priority?: number;
  readonly meta?: RequestMeta;
}

/** Anything politely accepts as a request without a custom scope function. */
export type RequestLike = string | Request | RequestObject;

/** The URL of a request-like value, or `undefined` when it has none. */
export function requestUrl(request: unknown): string | undefined {
  if (typeof request === "string") return request;
  if (typeof request === "object" && request !== null) {
    const url = (request as { url?: unknown }).url;
    if (typeof url === "string") return url;
  }
  return undefined;
}

/** The meta of a request-like value (`meta` property), or `undefined`. */
export function requestMeta(request: unknown): RequestMeta | undefined {
  if (typeof request !== "object" || request === null) return undefined;
  const meta = (request as { meta?: unknown }).meta;
  // Most requests have no meta: the Request check comes after (the gate asks per request).
  if (typeof meta !== "object" || meta === null || request instanceof Request) return undefined;
  return meta as RequestMeta;
}

/** The priority of a request-like value (`priority` property), default 0. */
export function requestPriority(request: unknown): number {
  if (typeof request === "object" && request !== null) {
    const p = (request as { priority?: unknown }).priority;
    if (typeof p === "number" && Number.isFinite(p)) return p;
  }
  return 0;
}
