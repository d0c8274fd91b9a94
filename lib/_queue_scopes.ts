/**
 * What the request queue (`request_queue.ts`) reads of a request to place
 * it: its URL, its default scopes (`meta.throttlingScopes`, else the URL's
 * host), its body for the default fingerprint, a custom `scopesOf` or
 * `fingerprint` called safely, and the `InvalidRequestError` a request is
 * refused with when one of them fails.
 *
 * @module
 */
import { describeValue } from "./_describe_value.ts";
import { parseUrl } from "./_fingerprint.ts";
import { InvalidRequestError } from "./download_errors.ts";
import { requestMeta, requestUrl, type ScopesInput } from "./request.ts";
import type { QueueScopes } from "./request_queue.ts";

/** A request refused at enqueue, as the `InvalidRequestError` of `download_errors.ts` with its `field`. */
export function invalidRequest(
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
export function customFingerprint<R>(fingerprint: (request: R) => string, request: R): string {
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

/** The body the default fingerprint reads: a `{url, body}` object's string body, else none. */
export function requestBodyOf(request: unknown): string {
  if (typeof request === "object" && request !== null && !(request instanceof Request)) {
    const b = (request as { body?: unknown }).body;
    if (typeof b === "string") return b;
  }
  return "";
}

/** A value in an error message, cut at 200 characters. */
export function describe(value: unknown): string {
  return describeValue(value, 200);
}
