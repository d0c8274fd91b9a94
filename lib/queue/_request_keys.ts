/**
 * The keys of a request in the request queue (`request_queue.ts`): the
 * scope set it waits in (its host, or the scopes and quota amounts of
 * `meta.throttlingScopes` or a custom `scopesOf`) and its fingerprint for
 * dedupe, read once at enqueue (`RequestKeys`), with the helpers a resume
 * and `defaultScopesOf` share, and the `InvalidRequestError` a request is
 * refused with when one of them fails.
 *
 * @module
 */
import { describeValue } from "../settings/_describe_value.ts";
import {
  canonicalHostFast,
  fingerprintParsed,
  parseUrl,
  requestBody,
  requestMethod,
} from "./_fingerprint.ts";
import { InvalidRequestError } from "../http/download_errors.ts";
import { requestMeta, requestUrl, type ScopesInput } from "../request.ts";
import type { QueueScopes, RequestQueueOrder } from "./request_queue.ts";

/**
 * Reads the keys of one request after another into its own fields (one
 * object per queue, none per request): after `read`, `key` names the scope
 * set when the request has one scope, else `scopes` (unsorted) and
 * `amounts` do (none in the priority order), and `fp` is the fingerprint
 * when asked for.
 */
export class RequestKeys<R> {
  key: string | undefined = undefined;
  scopes: readonly string[] | undefined = undefined;
  amounts: readonly (number | undefined)[] | undefined = undefined;
  fp: string | undefined = undefined;
  readonly #scopesOf: ((request: R) => QueueScopes) | undefined;
  readonly #fingerprint: ((request: R) => string) | undefined;
  readonly #scoped: boolean;
  readonly #needsUrl: boolean;
  /** Strings take the parse-free path (default fingerprint and scopes). */
  readonly #fastStrings: boolean;

  constructor(
    scopesOf: ((request: R) => QueueScopes) | undefined,
    fingerprint: ((request: R) => string) | undefined,
    order: RequestQueueOrder,
  ) {
    this.#scopesOf = scopesOf;
    this.#fingerprint = fingerprint;
    this.#scoped = order !== "priority";
    this.#needsUrl = !fingerprint || (order !== "priority" && !scopesOf);
    this.#fastStrings = !fingerprint && (order === "priority" || !scopesOf);
  }

  /**
   * Reads a request's keys; `filter`: its fingerprint too.
   *
   * @throws {InvalidRequestError} When it has no URL, a malformed one, or bad scopes.
   */
  read(request: R, filter: boolean): void {
    // A URL string already in canonical form is its own fingerprint and names
    // its scope (its host) without being parsed: most crawl URLs.
    const host = this.#fastStrings && typeof request === "string"
      ? canonicalHostFast(request)
      : undefined;
    if (host !== undefined) {
      this.key = host;
      this.scopes = undefined;
      this.amounts = undefined;
      this.fp = filter ? request as string : undefined;
      return;
    }
    let key: string | undefined;
    let scopes: readonly string[] | undefined;
    let amounts: readonly (number | undefined)[] | undefined;
    let fp: string | undefined;
    // The default functions need a valid URL; custom ones may do without.
    const url = this.#needsUrl ? parseRequestUrl(request) : undefined;
    if (this.#scoped) {
      const rs = this.#scopesOf ? customScopes(this.#scopesOf, request) : scopesFromMeta(request);
      if (rs === undefined) key = hostOf(request, url as URL);
      else {
        scopes = rs.scopes;
        amounts = rs.amounts;
        if (scopes.length === 0) {
          throw invalidRequest(
            "scopes",
            request,
            "Cannot enqueue request as it has no scopes: current value is []",
          );
        }
      }
    }
    if (filter) {
      fp = this.#fingerprint ? customFingerprint(this.#fingerprint, request) : fingerprintParsed(
        url as URL,
        requestMethod(request),
        requestBody(request),
        requestUrl(request),
      );
    }
    // Written last: a custom scopesOf or fingerprint may enqueue (and so
    // read) another request before it returns.
    this.key = key;
    this.scopes = scopes;
    this.amounts = amounts;
    this.fp = fp;
  }
}

/** A request refused at enqueue, as the `InvalidRequestError` of `download_errors.ts` with its `field`. */
function invalidRequest(
  field: string,
  request: unknown,
  message: string,
  options?: { cause?: unknown },
): InvalidRequestError {
  return new InvalidRequestError(
    message,
    options?.cause === undefined
      ? { input: request, field }
      : { input: request, field, cause: options.cause },
  );
}

/** A request's URL, parsed; refused when it has none or it is not absolute. */
export function parseRequestUrl(request: unknown): URL {
  const url = requestUrl(request);
  if (url === undefined || url === "") {
    throw invalidRequest(
      "url",
      request,
      `Cannot enqueue request as it has no 'url': current value is ${describe(request)}`,
    );
  }
  try {
    return parseUrl(url);
  } catch (cause) {
    throw invalidRequest(
      "url",
      request,
      `Cannot enqueue request as its 'url' is not an absolute URL: current value is ${
        JSON.stringify(url)
      }`,
      { cause },
    );
  }
}

/** The default scope of a request without `meta.throttlingScopes`: its URL's host. */
export function hostOf(request: unknown, url: URL): string {
  if (url.host === "") {
    throw invalidRequest(
      "url",
      request,
      `Cannot enqueue request as its 'url' has no host to use as a scope: current value is ${
        JSON.stringify(url.href)
      }`,
    );
  }
  return url.host;
}

/** The scopes `meta.throttlingScopes` gives (string, iterable or `{scope: amount}`), if set. */
export function scopesFromMeta(request: unknown): QueueScopes | undefined {
  const input: ScopesInput | undefined = requestMeta(request)?.throttlingScopes;
  if (input === undefined) return undefined;
  if (typeof input === "string") return { scopes: [input] };
  if (typeof (input as Iterable<string>)[Symbol.iterator] === "function") {
    const scopes = [...(input as Iterable<string>)];
    if (scopes.some((s) => typeof s !== "string")) {
      throw invalidRequest(
        "scopes",
        request,
        `Cannot enqueue request as 'meta.throttlingScopes' must hold strings: current value is ${
          describe(scopes)
        }`,
      );
    }
    return { scopes };
  }
  const record = input as Readonly<Record<string, number>>;
  const scopes = Object.keys(record);
  return { scopes, amounts: scopes.map((s) => record[s]) };
}

/** A custom `scopesOf`'s answer; its failure refuses the request. */
export function customScopes<R>(scopesOf: (request: R) => QueueScopes, request: R): QueueScopes {
  try {
    return scopesOf(request);
  } catch (e) {
    if (e instanceof InvalidRequestError) throw e;
    throw invalidRequest(
      "scopes",
      request,
      `Cannot enqueue request as its scopes failed: ${String(e)}`,
      {
        cause: e,
      },
    );
  }
}

/** A custom `fingerprint`'s answer; its failure refuses the request. */
function customFingerprint<R>(fingerprint: (request: R) => string, request: R): string {
  try {
    return fingerprint(request);
  } catch (e) {
    throw invalidRequest(
      "fingerprint",
      request,
      `Cannot enqueue request as its fingerprint failed: ${String(e)}`,
      {
        cause: e,
      },
    );
  }
}

/** A value in an error message, cut at 200 characters. */
export function describe(value: unknown): string {
  return describeValue(value, 200);
}
