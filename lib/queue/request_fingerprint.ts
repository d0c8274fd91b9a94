/**
 * Request fingerprints for the request queue's dedupe (Scrapy's
 * `request_fingerprint`): method, canonical URL and body, hashed.
 *
 * @module
 */
import { requestUrl } from "../request.ts";
import {
  canonicalizeParsed,
  fingerprintParsed,
  parseUrl,
  requestBody,
  requestMethod,
} from "./_fingerprint.ts";

/**
 * The canonical form of a URL: scheme and host lower-cased, the scheme's
 * default port dropped, the fragment dropped, query arguments sorted by name
 * then value (stable, so repeated names keep their relative order when values
 * tie). Percent-encoding is normalised the way the WHATWG URL parser does it.
 *
 * @param url An absolute URL.
 * @returns The canonical URL string.
 * @throws {TypeError} When `url` is not an absolute URL.
 *
 * @example Two spellings of one URL
 * ```ts
 * canonicalUrl("HTTP://Example.COM:80/a?b=2&a=1#top"); // "http://example.com/a?a=1&b=2"
 * ```
 */
export function canonicalUrl(url: string): string {
  return canonicalizeParsed(parseUrl(url));
}

/**
 * The fingerprint of a request, from its upper-cased method (default `GET`),
 * canonical URL and body: the canonical URL itself for a short body-less GET,
 * `"POST https://a.example/x"` for other short body-less requests (under 120
 * characters), else `"#"` and a base64url SHA-1 of the three. Two requests
 * with the same fingerprint are
 * duplicates for the request queue.
 *
 * The body of a WHATWG `Request` cannot be read synchronously and is left out;
 * give a plain `{url, method, body}` object (or a custom fingerprint function
 * to the queue) when POST bodies must tell requests apart.
 *
 * @param request A URL string, a WHATWG `Request` or a `{url, method?, body?}` object.
 * @returns The fingerprint (at most 120 characters).
 * @throws {TypeError} When the request has no URL or its URL is not absolute.
 *
 * @example Fragments do not count
 * ```ts
 * requestFingerprint("https://a.example/x#1") === requestFingerprint("https://a.example/x#2"); // true
 * ```
 */
export function requestFingerprint(request: unknown): string {
  const url = requestUrl(request);
  if (url === undefined) {
    throw new TypeError(
      `Cannot fingerprint request as it has no 'url': current value is ${String(request)}`,
    );
  }
  return fingerprintParsed(parseUrl(url), requestMethod(request), requestBody(request), url);
}
