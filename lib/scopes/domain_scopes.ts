/**
 * Built-in scope functions that map a URL to throttling scopes: the default
 * (the host), the origin (for per-origin state such as robots.txt), and the
 * reference's two "Alternative domain throttling" examples built on tldts
 * (the registrable domain, and the registrable domain plus every subdomain
 * level).
 *
 * These run once per request, so the common `http(s)://host[:port]/...` form is
 * read with one regular expression; anything unusual (userinfo, IPv6, IDN,
 * numeric or hex hosts, odd characters) goes through the WHATWG `URL` parser,
 * so the answer is always what `new URL(url).host` says, lower-cased.
 *
 * @module
 */
import { parse } from "tldts";

/** Options of the tldts-based scope functions. */
export interface DomainScopeOptions {
  /**
   * Also use the Public Suffix List's private section, so that
   * `alice.github.io` is its own registrable domain rather than part of
   * `github.io`. The reference's examples (tldextract's default) leave it off:
   * hosts under one private suffix usually share one operator's servers.
   * @default false
   */
  readonly privateSuffixes?: boolean;
}

// `extractHostname: false` and `validateHostname: false`: we hand tldts a
// hostname that the URL grammar (or the fast path's stricter one) already
// checked, so it skips its own extraction and validation.
const TLDTS_ICANN = {
  extractHostname: false,
  validateHostname: false,
  mixedInputs: false,
  detectIp: true,
  allowPrivateDomains: false,
} as const;
const TLDTS_PRIVATE = { ...TLDTS_ICANN, allowPrivateDomains: true } as const;

// scheme, host (ASCII letters, digits, hyphens, dot-separated non-empty
// labels, optional trailing dot), optional port; then the end or a path,
// query or fragment. Anything else falls back to `new URL`.
const FAST_URL = /^(https?|wss?):\/\/([a-z0-9-]+(?:\.[a-z0-9-]+)*\.?)(?::(\d{0,5}))?(?=[/?#]|$)/i;
// Hosts that the URL parser rewrites: a last label that is a number or hex
// (IPv4 in short or hex forms) and IDN labels (checked by the URL parser).
const NUMERIC_LAST_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-f]*)\.?$/i;
const CANONICAL_IPV4 =
  /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/** Scheme (lower-case, no colon) and host (lower-case, default port dropped) of a URL. */
function splitUrl(url: string): [scheme: string, host: string] {
  const m = FAST_URL.exec(url);
  if (m !== null) {
    const host = m[2]!.toLowerCase();
    if (
      !host.includes("xn--") &&
      (!NUMERIC_LAST_LABEL.test(host) || CANONICAL_IPV4.test(host))
    ) {
      const scheme = m[1]!.toLowerCase();
      const port = m[3];
      if (port === undefined || port === "") return [scheme, host];
      const n = Number(port);
      if (n <= 65535) {
        const isDefault = n === (scheme === "https" || scheme === "wss" ? 443 : 80);
        return [scheme, isDefault ? host : `${host}:${n}`];
      }
      // Out-of-range port: let the URL parser reject it.
    }
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (cause) {
    throw new TypeError(
      `Cannot work out the scope of an invalid URL: current value is ${JSON.stringify(url)}`,
      {
        cause,
      },
    );
  }
  if (parsed.hostname === "") {
    throw new TypeError(
      `Cannot work out the scope of a URL without a host: current value is ${JSON.stringify(url)}`,
    );
  }
  // `URL#host` already leaves out the scheme's default port; hosts of
  // non-special schemes keep their case, hence the lower-casing.
  return [parsed.protocol.slice(0, -1), parsed.host.toLowerCase()];
}

/**
 * The default scope of a URL: its host, lower-cased, with the port when it is
 * not the scheme's default (SPEC "Scopes"). Subdomains are separate scopes.
 *
 * @param url An absolute URL.
 * @returns The host, e.g. `"example.com"`, `"example.com:8080"`, `"[::1]:3000"`.
 * @throws {TypeError} when the URL cannot be parsed or has no host.
 * @example Default ports are dropped, others kept
 * ```ts
 * import { hostScope } from "./domain_scopes.ts";
 * console.assert(hostScope("https://Books.ToScrape.com:443/a") === "books.toscrape.com");
 * console.assert(hostScope("http://127.0.0.1:8080/") === "127.0.0.1:8080");
 * ```
 */
export function hostScope(url: string): string {
  return splitUrl(url)[1];
}

/**
 * The origin of a URL as a scope key: `scheme://host`, lower-cased, with the
 * port when it is not the scheme's default. robots.txt is per origin (RFC 9309
 * section 2.3): `http://a.com` and `https://a.com` each have their own.
 *
 * @param url An absolute URL.
 * @returns The origin, e.g. `"https://example.com"`.
 * @throws {TypeError} when the URL cannot be parsed or has no host.
 * @example
 * ```ts
 * import { originScope } from "./domain_scopes.ts";
 * console.assert(originScope("HTTPS://Example.com:443/x?y") === "https://example.com");
 * ```
 */
export function originScope(url: string): string {
  const [scheme, host] = splitUrl(url);
  return `${scheme}://${host}`;
}

/**
 * The host name of a URL, lower-cased, without the port (IPv6 literals keep
 * their brackets): what a DNS lookup for per-IP scopes is asked about.
 *
 * @param url An absolute URL.
 * @returns The host name, e.g. `"example.com"`, `"127.0.0.1"`, `"[::1]"`.
 * @throws {TypeError} when the URL cannot be parsed or has no host.
 * @example
 * ```ts
 * import { urlHostname } from "./domain_scopes.ts";
 * console.assert(urlHostname("http://Example.com:8080/x") === "example.com");
 * console.assert(urlHostname("http://[::1]:3000/") === "[::1]");
 * ```
 */
export function urlHostname(url: string): string {
  return hostnameOf(splitUrl(url)[1]);
}

/** The hostname part of a host scope (IPv6 literals keep their brackets). */
function hostnameOf(host: string): string {
  if (host.startsWith("[")) return host.slice(0, host.indexOf("]") + 1);
  const colon = host.lastIndexOf(":");
  return colon === -1 ? host : host.slice(0, colon);
}

/**
 * The highest-level registrable domain of a URL, so that every subdomain
 * shares one scope (the reference's first "Alternative domain throttling"
 * example): `https://books.toscrape.com` and `https://toscrape.com` both get
 * `toscrape.com`; `a.b.example.co.uk` gets `example.co.uk`. The port is not
 * part of it. IP addresses, `localhost`, public suffixes themselves and hosts
 * under a suffix that is not on the Public Suffix List fall back to the host
 * scope (with its port), as the reference's example falls back to the netloc.
 *
 * @param url An absolute URL.
 * @param options Whether to use the private section of the Public Suffix List.
 * @returns The scope.
 * @throws {TypeError} when the URL cannot be parsed or has no host.
 * @example
 * ```ts
 * import { registrableDomainScope } from "./domain_scopes.ts";
 * console.assert(registrableDomainScope("https://books.toscrape.com/") === "toscrape.com");
 * console.assert(registrableDomainScope("http://localhost:8080/") === "localhost:8080");
 * ```
 */
export function registrableDomainScope(url: string, options?: DomainScopeOptions): string {
  const host = hostScope(url);
  if (host.startsWith("[")) return host;
  const r = parse(
    hostnameOf(host),
    options?.privateSuffixes === true ? TLDTS_PRIVATE : TLDTS_ICANN,
  );
  return r.domain !== null && (r.isIcann === true || r.isPrivate === true) ? r.domain : host;
}

/**
 * One scope per domain level from the registrable domain down to the host
 * (the reference's second "Alternative domain throttling" example):
 * `https://a.books.toscrape.com` gets `["toscrape.com", "books.toscrape.com",
 * "a.books.toscrape.com"]`, parents first. With `toscrape.com` at concurrency
 * 32 and its subdomains at 24 and 16, the subdomains never exceed 32 together.
 * Hosts without a registrable domain (IPs, `localhost`, unknown suffixes) get
 * their host scope alone; the port is not part of the domain scopes.
 *
 * @param url An absolute URL.
 * @param options Whether to use the private section of the Public Suffix List.
 * @returns A new array of scopes, parents first, without duplicates.
 * @throws {TypeError} when the URL cannot be parsed or has no host.
 * @example
 * ```ts
 * import { hierarchicalScopes } from "./domain_scopes.ts";
 * const scopes = hierarchicalScopes("https://books.toscrape.com/catalogue/");
 * console.assert(scopes.join() === "toscrape.com,books.toscrape.com");
 * ```
 */
export function hierarchicalScopes(url: string, options?: DomainScopeOptions): string[] {
  const host = hostScope(url);
  if (host.startsWith("[")) return [host];
  const r = parse(
    hostnameOf(host),
    options?.privateSuffixes === true ? TLDTS_PRIVATE : TLDTS_ICANN,
  );
  const domain = r.domain;
  if (domain === null || (r.isIcann !== true && r.isPrivate !== true)) return [host];
  const scopes = [domain];
  // tldts's hostname has no trailing dot; walk its labels above the domain
  // from right to left, so parents come first.
  const hostname = r.hostname ?? domain;
  const domainStart = hostname.length - domain.length;
  for (let i = domainStart - 2; i >= 0; i--) {
    const startsLabel = i === 0 || hostname.charCodeAt(i - 1) === 46; // "."
    if (startsLabel && hostname.charCodeAt(i) !== 46) scopes.push(hostname.slice(i));
  }
  return scopes;
}
