/**
 * The inside of request fingerprints (`request_fingerprint.ts`), shared with
 * the request queue's fast path: parsing, canonical URLs, and the host of a
 * URL already in canonical form without parsing it. Private to politely.
 *
 * @module
 */
import { createHash } from "node:crypto";

/** The upper-cased method of a request-like value, default `GET`. */
export function requestMethod(request: unknown): string {
  if (typeof request === "object" && request !== null) {
    const m = (request as { method?: unknown }).method;
    if (typeof m === "string" && m !== "") return m.toUpperCase();
  }
  return "GET";
}

/** The string body of a plain request object, else `""`. */
export function requestBody(request: unknown): string {
  if (typeof request === "object" && request !== null && !(request instanceof Request)) {
    const b = (request as { body?: unknown }).body;
    if (typeof b === "string") return b;
  }
  return "";
}

/** Parses an absolute URL, with an error that names the value. @internal */
export function parseUrl(url: string): URL {
  // URL.parse would avoid the throw, but Node 20.0-20.17 lacks it.
  try {
    return new URL(url);
  } catch (cause) {
    throw new TypeError(
      `Cannot parse request 'url' as an absolute URL: current value is ${JSON.stringify(url)}`,
      {
        cause,
      },
    );
  }
}

/** The canonical URL of a parsed URL (see {@link canonicalUrl}). @internal */
export function canonicalizeParsed(u: URL): string {
  // Most crawl URLs are canonical already: reuse the parser's string.
  const href = u.href;
  if (
    !href.includes("#") && !href.endsWith("?") && !u.search.includes("&") && u.username === "" &&
    u.password === ""
  ) return href;
  // The WHATWG parser already lower-cases scheme and host and drops default ports.
  const base = u.origin === "null" ? `${u.protocol}${u.host ? "//" + u.host : ""}` : u.origin;
  let query = "";
  if (u.search.length > 1) {
    const pairs = u.search.slice(1).split("&").filter((p) => p !== "");
    if (pairs.length > 1) {
      pairs.sort((a, b) => {
        const ia = a.indexOf("="), ib = b.indexOf("=");
        const ka = ia < 0 ? a : a.slice(0, ia), kb = ib < 0 ? b : b.slice(0, ib);
        if (ka !== kb) return ka < kb ? -1 : 1;
        return a < b ? -1 : a > b ? 1 : 0;
      });
    }
    if (pairs.length > 0) query = "?" + pairs.join("&");
  }
  return base + u.pathname + query;
}

/**
 * The host (with its port) of an `http:`/`https:` URL that is already in
 * canonical form, without parsing it: lower-case host, no default or
 * zero-led port, no user info, a path of plain characters and no dot
 * segments, at most one query argument, no fragment. Such a URL is its own
 * `href` and its own canonical URL, so the queue takes its scope and its
 * fingerprint without `new URL` (most crawl URLs qualify). `undefined` when
 * in doubt: the caller then parses.
 *
 * @internal
 */
export function canonicalHostFast(url: string): string | undefined {
  let i: number;
  let defaultPort: string;
  if (url.startsWith("https://")) {
    i = 8;
    defaultPort = "443";
  } else if (url.startsWith("http://")) {
    i = 7;
    defaultPort = "80";
  } else return undefined;
  const n = url.length;
  const hostStart = i;
  let labelStart = i;
  let portAt = -1;
  for (; i < n; i++) {
    const c = url.charCodeAt(i);
    if (c === 47 /* / */) break;
    if (portAt >= 0) {
      if (c < 48 || c > 57) return undefined;
      continue;
    }
    if ((c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 45 /* - */) continue;
    if (c === 46 /* . */) {
      if (i === labelStart) return undefined; // empty label
      labelStart = i + 1;
      continue;
    }
    if (c === 58 /* : */) {
      portAt = i;
      continue;
    }
    return undefined;
  }
  const hostEnd = portAt >= 0 ? portAt : i;
  if (i >= n || hostEnd === labelStart || hostEnd === hostStart) return undefined;
  // A last label that is a number makes the host an IPv4 address (rewritten
  // by the parser); "xn--" labels go through IDNA: both left to the parser.
  // (A last label starting with a digit is left to the parser: "1", "0x1".)
  const first = url.charCodeAt(labelStart);
  if (first >= 48 && first <= 57) return undefined;
  const xn = url.indexOf("xn--", hostStart);
  if (xn >= 0 && xn < hostEnd) return undefined;
  if (portAt >= 0) {
    const port = url.slice(portAt + 1, i);
    if (port === "" || port === defaultPort || port.charCodeAt(0) === 48 || port.length > 5) {
      return undefined;
    }
    if (Number(port) > 65535) return undefined;
  }
  // Path and query: only characters the parser keeps as they are.
  let query = -1;
  for (let k = i; k < n; k++) {
    const c = url.charCodeAt(k);
    if (c === 63 /* ? */) {
      if (query >= 0) continue;
      query = k;
      continue;
    }
    if (c === 38 /* & */ && query >= 0) return undefined; // the query would be sorted
    if (c === 46 /* . */ && query < 0 && url.charCodeAt(k - 1) === 47) {
      const next = url.charCodeAt(k + 1);
      if (k + 1 === n || next === 47 || next === 46 || next === 63) return undefined; // dot segment
    }
    if (c === 37 /* % */ && query < 0) {
      const next = url.charCodeAt(k + 1), last = url.charCodeAt(k + 2);
      if (next === 50 && (last === 101 || last === 69)) return undefined; // %2e
    }
    if (!PLAIN[c]) return undefined;
    if (c === 39 /* ' */ && query >= 0) return undefined;
  }
  if (query === n - 1) return undefined; // an empty query is dropped
  return url.slice(hostStart, i);
}

/** ASCII characters the URL parser never rewrites in a path or query. */
const PLAIN: readonly boolean[] = (() => {
  const t: boolean[] = new Array(128).fill(false);
  const ok = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/%?";
  for (let k = 0; k < ok.length; k++) t[ok.charCodeAt(k)] = true;
  return t;
})();

/** Canonical request lines up to this length are their own fingerprint. */
const LITERAL_MAX = 120;

/** The fingerprint of a parsed URL, method and body. @internal */
export function fingerprintParsed(u: URL, method: string, body: string, original?: string): string {
  const canonical = canonicalizeParsed(u);
  // A short body-less request is its own fingerprint: no larger than a hash,
  // collision-free, and a SHA-1 per request would dominate enqueue time. A GET
  // is the bare URL (the request's own string when already canonical, so the
  // seen set costs no extra string); other methods are prefixed with
  // "METHOD ", and hashes with "#": no URL starts with either.
  if (body === "" && canonical.length + method.length < LITERAL_MAX) {
    if (method !== "GET") return method + " " + canonical;
    return canonical === original ? original : canonical;
  }
  const h = createHash("sha1");
  h.update(method);
  h.update("\n");
  h.update(canonical);
  h.update("\n");
  h.update(body);
  return "#" + h.digest("base64url");
}
