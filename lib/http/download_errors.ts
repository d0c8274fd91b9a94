/**
 * The download failures politely tells apart, and the reading of what
 * `fetch` throws under Node (undici), Deno and Bun into them. These are the
 * classes that `backoff.exceptions` names by default (Scrapy's
 * `DownloadFailedError`, `DownloadTimeoutError`, `ResponseDataLossError`);
 * they and `ResponseTooLargeError` extend `DownloadError`.
 *
 * Size: the classes are short; most of the file reads what each runtime's
 * `fetch` throws (undici's causes and codes, Deno's and Bun's messages) into
 * them, one set of facts per runtime.
 *
 * @module
 */
import type { ErrorMatcher } from "../settings/settings.ts";

/** Options shared by the download error classes. */
export interface DownloadErrorOptions {
  /** The error this one was read from. */
  readonly cause?: unknown;
  /** The URL being downloaded. */
  readonly url?: string;
}

function errorOptions(options: { readonly cause?: unknown } | undefined): ErrorOptions | undefined {
  return options !== undefined && "cause" in options ? { cause: options.cause } : undefined;
}

/**
 * A download that failed on the way: the base class of
 * {@link DownloadFailedError}, {@link DownloadTimeoutError},
 * {@link ResponseDataLossError} and {@link ResponseTooLargeError}, so one
 * `instanceof DownloadError` tells a failed download from any other error.
 * It carries the URL, when known, and the error it was read from as `cause`
 * (no `cause` property at all when none was given, as with `Error`).
 *
 * {@link InvalidRequestError} is not one: it is a `TypeError` (the request
 * had the wrong shape and was never sent).
 *
 * @example Telling a failed download from other errors
 * ```ts
 * import assert from "node:assert/strict";
 * import { DownloadError, DownloadTimeoutError } from "./download_errors.ts";
 * const e: unknown = new DownloadTimeoutError("timed out", { url: "https://example.com/" });
 * assert.ok(e instanceof DownloadError);
 * assert.equal(e.url, "https://example.com/");
 * assert.ok(!(new RangeError("bug") instanceof DownloadError));
 * ```
 */
export class DownloadError extends Error {
  override readonly name: string = "DownloadError";
  /** The URL being downloaded, when known. */
  readonly url: string | undefined;

  /**
   * @param message What failed.
   * @param options The cause and the URL.
   */
  constructor(message: string, options?: DownloadErrorOptions) {
    super(message, errorOptions(options));
    this.url = options?.url;
  }
}

/**
 * The connection failed before a response came: refused, reset, DNS lookup
 * failed, TLS handshake failed, the socket closed. When read from what
 * `fetch` threw, `code` names the cause (`ECONNREFUSED`, `ENOTFOUND`,
 * `UND_ERR_HEADERS_OVERFLOW`, `CERT_HAS_EXPIRED`) and so does the message.
 *
 * @example Thrown by a custom download function
 * ```ts
 * import assert from "node:assert/strict";
 * import { DownloadFailedError } from "./download_errors.ts";
 * const e = new DownloadFailedError("connection refused", { code: "ECONNREFUSED" });
 * assert.equal(e.name, "DownloadFailedError");
 * assert.equal(e.code, "ECONNREFUSED");
 * ```
 */
export class DownloadFailedError extends DownloadError {
  override readonly name: string = "DownloadFailedError";
  /** The system or runtime error code (`ECONNREFUSED`, `UND_ERR_SOCKET`, ...), when known. */
  readonly code: string | undefined;

  /**
   * @param message What failed.
   * @param options The cause, error code and URL.
   */
  constructor(message: string, options?: DownloadErrorOptions & { readonly code?: string }) {
    super(message, options);
    this.code = options?.code;
  }
}

/**
 * The download took longer than allowed (no response, or a body that stalled).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DownloadTimeoutError } from "./download_errors.ts";
 * const e = new DownloadTimeoutError("timed out", { timeoutMs: 5_000 });
 * assert.equal(e.timeoutMs, 5_000);
 * ```
 */
export class DownloadTimeoutError extends DownloadError {
  override readonly name: string = "DownloadTimeoutError";
  /** The time allowed, ms, when known. */
  readonly timeoutMs: number | undefined;

  /**
   * @param message What timed out.
   * @param options The cause, the time allowed and the URL.
   */
  constructor(message: string, options?: DownloadErrorOptions & { readonly timeoutMs?: number }) {
    super(message, options);
    this.timeoutMs = options?.timeoutMs;
  }
}

/**
 * The response started but its body was cut short (the connection closed
 * mid-body, fewer bytes than `Content-Length`, a broken chunked encoding).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ResponseDataLossError } from "./download_errors.ts";
 * assert.equal(new ResponseDataLossError("cut short").name, "ResponseDataLossError");
 * ```
 */
export class ResponseDataLossError extends DownloadError {
  override readonly name: string = "ResponseDataLossError";
  /** The system or runtime error code, when known. */
  readonly code: string | undefined;

  /**
   * @param message What was lost.
   * @param options The cause, error code and URL.
   */
  constructor(message: string, options?: DownloadErrorOptions & { readonly code?: string }) {
    super(message, options);
    this.code = options?.code;
  }
}

/**
 * The response body is larger than allowed (`download.maxSizeBytes`, Scrapy's
 * `DOWNLOAD_MAXSIZE`): the download was aborted once its `Content-Length`
 * said so, or once the bytes received went past the limit, so no more of it
 * was read or kept. No backoff trigger and no retry by default: the site is
 * not overloaded, and the same response would come again.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ResponseTooLargeError } from "./download_errors.ts";
 * const e = new ResponseTooLargeError("too large", { maxSizeBytes: 1024, receivedBytes: 2048 });
 * assert.equal(e.maxSizeBytes, 1024);
 * ```
 */
export class ResponseTooLargeError extends DownloadError {
  override readonly name: string = "ResponseTooLargeError";
  /** The limit, in bytes. */
  readonly maxSizeBytes: number;
  /** Bytes received before the download was aborted (0 when `Content-Length` said enough). */
  readonly receivedBytes: number;
  /** The size the response announced (`Content-Length`), when it did. */
  readonly expectedBytes: number | undefined;

  /**
   * @param message What was too large.
   * @param options The limit, the sizes seen and the URL.
   */
  constructor(
    message: string,
    options: DownloadErrorOptions & {
      readonly maxSizeBytes: number;
      readonly receivedBytes: number;
      readonly expectedBytes?: number;
    },
  ) {
    super(message, options);
    this.maxSizeBytes = options.maxSizeBytes;
    this.receivedBytes = options.receivedBytes;
    this.expectedBytes = options.expectedBytes;
  }
}

/**
 * The request cannot be sent: it has no URL, or one that does not parse. A
 * `TypeError`, since the request has the wrong shape; it is no backoff
 * trigger by default, as the server never saw it.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { InvalidRequestError } from "./download_errors.ts";
 * const e = new InvalidRequestError("no URL", { input: { id: 7 } });
 * assert.deepEqual(e.input, { id: 7 });
 * assert.ok(e instanceof TypeError);
 * ```
 */
export class InvalidRequestError extends TypeError {
  override readonly name: string = "InvalidRequestError";
  /** The request as it was given. */
  readonly input: unknown;
  /** The part of the request that was wrong (`"url"`, `"scopes"`, `"meta.throttlingDelayMs"`, ...), when known. */
  readonly field: string | undefined;

  /**
   * @param message What is wrong with the request.
   * @param options The request as given, the field that was wrong, and the cause.
   */
  constructor(
    message: string,
    options: { readonly input: unknown; readonly field?: string; readonly cause?: unknown },
  ) {
    super(message, errorOptions(options));
    this.input = options.input;
    this.field = options.field;
  }
}

// ---------------------------------------------------------------------------
// Reading what fetch throws

/** What the caller of `fetch` knows that the error does not say. */
export interface ClassifyContext {
  /** The URL being downloaded, for the message and the `url` field. */
  readonly url?: string;
  /** The request as given, for `InvalidRequestError.input`. @default url */
  readonly input?: unknown;
  /** The time allowed, ms, for `DownloadTimeoutError.timeoutMs`. */
  readonly timeoutMs?: number;
  /**
   * The signal passed to `fetch`. An `AbortError` is a timeout only when this
   * signal's reason is a `TimeoutError` (e.g. it came from `AbortSignal.timeout`
   * or `AbortSignal.any` over one).
   */
  readonly signal?: AbortSignal;
  /**
   * `"body"` once the response headers have arrived: a connection that fails
   * then has lost data. Bun reports a body cut short as a plain `ECONNRESET`,
   * so only the caller can tell. @default "request"
   */
  readonly phase?: "request" | "body";
}

/** What a chain of errors says, gathered once. */
interface ErrorFacts {
  readonly names: Set<string>;
  readonly codes: Set<string>;
  /** Codes read from the words of errors that carry none (Deno's); they name, never classify. */
  readonly wordCodes: Set<string>;
  readonly messages: string[];
}

const MAX_CHAIN = 32;

/**
 * Marks an error raised on this side before the request reached the site (a
 * shared store such as Redis failing, say). Such an error is an error outcome
 * like any other, but it says nothing about the site: `classifyDownloadError`
 * leaves it as it is, and matching (`errorMatches`, so backoff and retry
 * triggers) looks at the error itself, not at its causes, so the connection
 * error of a store does not pass for one of the site. To retry it, name it.
 */
export const LOCAL_FAILURE: unique symbol = Symbol.for("politely.localFailure");

/** Whether an error carries `LOCAL_FAILURE` (see there). */
export function isLocalFailure(error: unknown): boolean {
  return typeof error === "object" && error !== null &&
    (error as { [LOCAL_FAILURE]?: unknown })[LOCAL_FAILURE] === true;
}

/**
 * The error and everything it was caused by: `cause` links and the members of
 * an `AggregateError` (Node's happy-eyeballs connect gives one per address).
 * Cycles and very deep chains are cut off.
 */
function errorChain(error: unknown): object[] {
  const chain: object[] = [];
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0 && chain.length < MAX_CHAIN) {
    const e = queue.shift();
    if (typeof e !== "object" || e === null || seen.has(e)) continue;
    seen.add(e);
    chain.push(e);
    const { cause, errors } = e as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
  return chain;
}

/**
 * Deno reports a failed connection with the system's words and no code
 * ("tcp connect error: Connection refused (os error 111)", "dns error: failed
 * to lookup address information: Name or service not known"): the code Node
 * and Bun give the same failure, so a log, a record and `backoff.exceptions`
 * read alike on every runtime. First match wins. Used to name a failure
 * already known to be one, never to decide that it is.
 */
const SYSTEM_ERROR_TEXTS: readonly (readonly [RegExp, string])[] = [
  [/connection refused/i, "ECONNREFUSED"],
  [/connection reset/i, "ECONNRESET"],
  [/temporary failure in name resolution/i, "EAI_AGAIN"],
  [/failed to lookup address|name or service not known|nodename nor servname/i, "ENOTFOUND"],
  [/no route to host/i, "EHOSTUNREACH"],
  [/network is unreachable/i, "ENETUNREACH"],
];

function gatherFacts(error: unknown): ErrorFacts {
  const facts: ErrorFacts = {
    names: new Set(),
    codes: new Set(),
    wordCodes: new Set(),
    messages: [],
  };
  for (const e of errorChain(error)) {
    const { name, code, message } = e as { name?: unknown; code?: unknown; message?: unknown };
    if (typeof name === "string") facts.names.add(name);
    // DOMException has a numeric legacy `code` (23 for TimeoutError): only strings are codes.
    if (typeof code === "string") facts.codes.add(code);
    else if (typeof message === "string") {
      const known = SYSTEM_ERROR_TEXTS.find(([text]) => text.test(message));
      if (known !== undefined) facts.wordCodes.add(known[1]);
    }
    if (typeof message === "string") facts.messages.push(message);
  }
  return facts;
}

const TIMEOUT_CODES = new Set([
  "ETIMEDOUT",
  "ESOCKETTIMEDOUT",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "Timeout", // Bun
]);

const DATA_LOSS_CODES = new Set([
  "UND_ERR_RES_CONTENT_LENGTH_MISMATCH",
  "ERR_STREAM_PREMATURE_CLOSE",
  "Z_BUF_ERROR",
  "Z_DATA_ERROR",
]);

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EADDRNOTAVAIL",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_DESTROYED",
  "UND_ERR_CONNECT",
  // Bun's own names
  "ConnectionRefused",
  "ConnectionClosed",
  "ConnectionReset",
  "FailedToOpenSocket",
  "DNSError",
  // An answer whose headers are over the client's limit (undici's
  // UND_ERR_HEADERS_OVERFLOW arrives as "fetch failed").
  "ResponseHeadersTooLarge",
]);

/** undici ("terminated") and Deno ("error reading a body from connection"). */
const BODY_FAILURE = /^terminated$|error reading a body|response body error|body stream error/i;
/** Node ("Failed to parse URL"), Deno ("Invalid URL"), Bun ("URL is invalid"). */
const INVALID_URL = /failed to parse url|^invalid url|url is invalid/i;
/** undici's "fetch failed", and Deno's wording for connection failures. */
const FETCH_FAILED =
  /^fetch failed$|error sending request|tcp connect error|dns error|connection (refused|reset|closed)/i;

function firstCode(facts: ErrorFacts, among: ReadonlySet<string>): string | undefined {
  for (const code of facts.codes) if (among.has(code)) return code;
  return undefined;
}

function first(codes: ReadonlySet<string>): string | undefined {
  for (const code of codes) return code;
  return undefined;
}

function isClassified(error: unknown): boolean {
  return error instanceof DownloadError || error instanceof InvalidRequestError;
}

function describe(error: unknown): string {
  const { name, message } = error as { name?: unknown; message?: unknown };
  const detail = [name, message].filter((s) => typeof s === "string" && s !== "").join(": ");
  return detail === "" ? String(error) : detail;
}

/**
 * Deno's wrapper names the URL (and the addresses), which the message already
 * does: "error sending request for url (http://a.test/): " and "error sending
 * request from 127.0.0.1:48694 for http://a.test/ (127.0.0.1:80): ".
 */
const DENO_REQUEST_PREFIX = /^error sending request .*?\): /;

/**
 * What went wrong, in the words of the innermost error that has any:
 * undici's "fetch failed" only wraps its cause ("connect ECONNREFUSED
 * 127.0.0.1:8080"). The code leads when those words do not hold it
 * ("UND_ERR_HEADERS_OVERFLOW: Headers Overflow Error"). An error with no
 * cause is described by its name and message, as before.
 */
function explain(error: unknown, code: string | undefined): string {
  const chain = errorChain(error);
  let detail: string | undefined;
  for (let i = chain.length - 1; i > 0 && detail === undefined; i--) {
    const message = (chain[i] as { message?: unknown }).message;
    if (typeof message === "string" && message !== "") {
      detail = message.replace(DENO_REQUEST_PREFIX, "");
    }
  }
  if (detail === undefined) detail = describe(error);
  return code === undefined || detail.includes(code) ? detail : `${code}: ${detail}`;
}

/**
 * Read an error thrown by `fetch` (or by reading a response body) as one of
 * politely's download errors, keeping the original as `cause`:
 *
 * - `TimeoutError` anywhere in the cause chain, a timeout code (`ETIMEDOUT`,
 *   `UND_ERR_HEADERS_TIMEOUT`, ...), or an `AbortError` whose `signal` (from
 *   `context`) was aborted by a timeout → {@link DownloadTimeoutError}.
 * - An unparseable URL (`ERR_INVALID_URL`) → {@link InvalidRequestError}.
 * - A body cut short (undici's `"terminated"`, Deno's "error reading a body",
 *   a content-length mismatch), or any connection failure during
 *   `phase: "body"` → {@link ResponseDataLossError}.
 * - undici's `"fetch failed"` and connection codes (`ECONNREFUSED`,
 *   `ECONNRESET`, `ENOTFOUND`, `UND_ERR_SOCKET`, ...) →
 *   {@link DownloadFailedError}.
 *
 * The message names the cause, not only the wrapper: `Download of
 * http://127.0.0.1:8080/ failed: connect ECONNREFUSED 127.0.0.1:8080`, not
 * `fetch failed`. The `code` of a connection failure is the one found in the
 * cause chain; under Deno, which gives none, it is read from the system's
 * words ("Connection refused" is `ECONNREFUSED`, a failed DNS lookup
 * `ENOTFOUND`), so codes are the same on every runtime.
 *
 * Anything else is returned unchanged, and so are errors that already are
 * one of these classes. A plain `AbortError` (the pipeline was unsubscribed,
 * the caller cancelled) is a cancellation, not a failure: it is returned
 * unchanged, so it is no backoff trigger.
 *
 * @param error What was thrown.
 * @param context What the caller knows: URL, input, time allowed, signal, phase.
 * @returns The classified error, or `error` itself.
 * @example A refused connection under Node
 * ```ts
 * import assert from "node:assert/strict";
 * import { classifyDownloadError, DownloadFailedError } from "./download_errors.ts";
 * const thrown = new TypeError("fetch failed", {
 *   cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }),
 * });
 * const e = classifyDownloadError(thrown, { url: "http://127.0.0.1:9/" });
 * assert.ok(e instanceof DownloadFailedError);
 * assert.equal(e.code, "ECONNREFUSED");
 * assert.equal(e.message, "Download of http://127.0.0.1:9/ failed: connect ECONNREFUSED 127.0.0.1:9");
 * assert.equal(e.cause, thrown);
 * ```
 */
export function classifyDownloadError(error: unknown, context: ClassifyContext = {}): unknown {
  if (
    typeof error !== "object" || error === null || isClassified(error) || isLocalFailure(error)
  ) {
    return error;
  }
  const facts = gatherFacts(error);
  const url = context.url;
  const where = url === undefined ? "" : ` of ${url}`;
  const common = url === undefined ? { cause: error } : { cause: error, url };

  const signalReason: unknown = context.signal?.aborted === true
    ? context.signal.reason
    : undefined;
  const abortedByTimeout = facts.names.has("AbortError") &&
    gatherFacts(signalReason).names.has("TimeoutError");
  const timeoutCode = firstCode(facts, TIMEOUT_CODES);
  if (facts.names.has("TimeoutError") || timeoutCode !== undefined || abortedByTimeout) {
    const after = context.timeoutMs === undefined ? "" : ` after ${context.timeoutMs} ms`;
    return new DownloadTimeoutError(
      `Download${where} timed out${after}: ${explain(error, timeoutCode)}`,
      context.timeoutMs === undefined ? common : { ...common, timeoutMs: context.timeoutMs },
    );
  }
  if (facts.names.has("AbortError")) return error;

  if (
    facts.codes.has("ERR_INVALID_URL") ||
    (error instanceof TypeError && INVALID_URL.test(error.message))
  ) {
    const input = "input" in context ? context.input : url;
    return new InvalidRequestError(
      `Cannot download as the request has no valid URL: current value is ${JSON.stringify(input)}`,
      { input, cause: error },
    );
  }

  const dataLossCode = firstCode(facts, DATA_LOSS_CODES);
  const connectionCode = firstCode(facts, CONNECTION_CODES);
  const fetchFailed = facts.messages.some((m) => FETCH_FAILED.test(m));
  const bodyFailed = facts.messages.some((m) => BODY_FAILURE.test(m));
  // Any code names the cause better than none: a TLS failure (CERT_HAS_EXPIRED),
  // undici's UND_ERR_HEADERS_OVERFLOW.
  const code = dataLossCode ?? connectionCode ?? first(facts.codes) ?? first(facts.wordCodes);
  const withCode = code === undefined ? common : { ...common, code };
  if (
    dataLossCode !== undefined || bodyFailed ||
    (context.phase === "body" && (connectionCode !== undefined || fetchFailed))
  ) {
    return new ResponseDataLossError(
      `Response body${where} was cut short: ${explain(error, code)}`,
      withCode,
    );
  }
  if (connectionCode !== undefined || fetchFailed) {
    return new DownloadFailedError(`Download${where} failed: ${explain(error, code)}`, withCode);
  }
  return error;
}

// ---------------------------------------------------------------------------
// Matching errors against `backoff.exceptions`

/** A class rather than a predicate: `class` syntax, or an `Error` subclass (built-ins included). */
function isErrorClass(fn: (...args: never[]) => unknown): boolean {
  if (fn === Error || fn.prototype instanceof Error) return true;
  return /^class[\s{]/.test(Function.prototype.toString.call(fn));
}

/** Constructor names along an object's prototype chain, `Object` excluded. */
function constructorNames(e: object): string[] {
  const names: string[] = [];
  for (
    let p = Object.getPrototypeOf(e);
    p !== null && p !== Object.prototype;
    p = Object.getPrototypeOf(p)
  ) {
    const ctor = (p as { constructor?: unknown }).constructor;
    if (typeof ctor === "function" && ctor.name !== "") names.push(ctor.name);
  }
  return names;
}

function matchesName(chain: readonly object[], wanted: string): boolean {
  // Scrapy settings name classes by dotted path: "scrapy.exceptions.DownloadTimeoutError".
  const name = wanted.includes(".") ? wanted.slice(wanted.lastIndexOf(".") + 1) : wanted;
  return chain.some((e) => {
    const { name: own, code } = e as { name?: unknown; code?: unknown };
    return own === name || code === name || constructorNames(e).includes(name);
  });
}

/**
 * Whether an error is a backoff trigger by `backoff.exceptions`.
 *
 * - A **string** matches an error `name`, a constructor name on the prototype
 *   chain, or a string `code` (`"ECONNREFUSED"`), of the error or of anything
 *   in its `cause` chain (and `AggregateError` members). A dotted name
 *   (`"scrapy.exceptions.DownloadTimeoutError"`) is matched by its last part,
 *   so Scrapy settings carry over.
 * - A **class** (`class` syntax or an `Error` subclass) matches by
 *   `instanceof`, along the same chain.
 * - Any other function is a **predicate**, called with the error itself; its
 *   own errors are not caught, since they are bugs to see.
 *
 * @param error What a download threw (after {@link classifyDownloadError}).
 * @param matchers The matchers; any one matching is enough.
 * @returns Whether one matches.
 * @example Names, classes and predicates
 * ```ts
 * import assert from "node:assert/strict";
 * import { DownloadTimeoutError, errorMatches } from "./download_errors.ts";
 * const e = new DownloadTimeoutError("slow", { timeoutMs: 100 });
 * assert.ok(errorMatches(e, ["DownloadTimeoutError"]));
 * assert.ok(errorMatches(e, [DownloadTimeoutError]));
 * assert.ok(errorMatches(e, [(x) => x instanceof Error && x.message === "slow"]));
 * assert.ok(!errorMatches(e, ["DownloadFailedError", RangeError]));
 * ```
 */
export function errorMatches(error: unknown, matchers: readonly ErrorMatcher[]): boolean {
  if (matchers.length === 0) return false;
  const chain = isLocalFailure(error) ? [error as object] : errorChain(error);
  return matchers.some((matcher) => {
    if (typeof matcher === "string") return matchesName(chain, matcher);
    if (typeof matcher !== "function") return false;
    const fn = matcher as (...args: never[]) => unknown;
    if (isErrorClass(fn)) {
      const ctor = matcher as abstract new (...args: never[]) => unknown;
      return chain.some((e) => e instanceof ctor);
    }
    return (matcher as (error: unknown) => boolean)(error) === true;
  });
}
