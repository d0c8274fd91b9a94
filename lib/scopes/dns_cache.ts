/**
 * A DNS cache for per-IP scopes (`CONCURRENT_REQUESTS_PER_IP`): host names
 * resolve once per TTL, concurrent lookups of one host share one resolution,
 * and the hot path can read a cached address synchronously with `peek`.
 *
 * @module
 */
import { asyncScheduler, type SchedulerLike } from "rxjs";
import { DownloadFailedError } from "../http/download_errors.ts";
import { checkCacheOption, type Loaded, TtlCache } from "../util/_ttl_cache.ts";

/** Resolves a host name to its addresses, best first. */
export type DnsResolver = (host: string) => Promise<readonly string[]>;

/** Options of {@link createDnsCache}. */
export interface DnsCacheOptions {
  /**
   * The resolver. The default is `node:dns/promises` `lookup(host, {all: true})`
   * (the system resolver, so `/etc/hosts` applies; available under Node, Deno
   * and Bun), imported on first use.
   * @default the system resolver
   */
  readonly resolve?: DnsResolver;
  /** How long a resolved address is used, in ms (scheduler time). @default 300_000 */
  readonly ttlMs?: number;
  /**
   * How long a failed resolution is remembered, in ms, so a burst of requests
   * to a dead host does not each start a lookup. Short, so a transient failure
   * does not outlive the moment. `0` retries at the next lookup.
   * @default 5_000
   */
  readonly failureTtlMs?: number;
  /**
   * At most this many hosts are cached; past it the least recently used goes.
   * `0` means no limit.
   * @default 100_000
   */
  readonly maxEntries?: number;
  /** Source of time (only `now()` is used). @default asyncScheduler */
  readonly scheduler?: SchedulerLike;
}

/**
 * A host name could not be resolved: the resolver failed or found no address.
 * A `DownloadFailedError` (the connection failed before a response), so
 * `backoff.exceptions` and error handling that know that class know this one.
 *
 * @example
 * ```ts
 * import { DnsLookupError } from "./dns_cache.ts";
 * import { DownloadFailedError } from "../http/download_errors.ts";
 * const e = new DnsLookupError("gone.example");
 * console.assert(e instanceof DownloadFailedError && e.host === "gone.example");
 * ```
 */
export class DnsLookupError extends DownloadFailedError {
  override readonly name: string = "DnsLookupError";
  /** The host that was looked up. */
  readonly host: string;
  /**
   * @param host The host that was looked up.
   * @param options `cause`: the resolver's error, if any (its `code`, such as `ENOTFOUND`, is kept).
   */
  constructor(host: string, options?: { cause?: unknown }) {
    const cause = options?.cause;
    const why = cause instanceof Error ? `: ${cause.message}` : ": no address";
    const code = (cause as { code?: unknown } | undefined)?.code;
    super(
      `DNS lookup of '${host}' failed${why}`,
      options !== undefined && "cause" in options
        ? { cause, ...(typeof code === "string" ? { code } : {}) }
        : undefined,
    );
    this.host = host;
  }
}

/** A DNS cache made by {@link createDnsCache}. */
export interface DnsCache {
  /**
   * The first address of a host, resolving it when it is not cached (or its
   * entry expired). IP literals (`"10.0.0.1"`, `"::1"`, `"[::1]"`) return
   * themselves without a lookup; names are lower-cased.
   *
   * @throws {DnsLookupError} (as a rejection) when resolution fails or finds nothing.
   */
  lookup(host: string): Promise<string>;
  /** The cached, unexpired address of a host, or `undefined`; never starts a lookup. */
  peek(host: string): string | undefined;
  /** Cached hosts, including lookups in flight and remembered failures. */
  readonly size: number;
  /** Forget everything (lookups in flight still settle for their callers). */
  clear(): void;
}

const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;

/** The address an IP literal stands for, or undefined for a name. */
function ipLiteral(host: string): string | undefined {
  if (host.startsWith("[") && host.endsWith("]")) return host.slice(1, -1);
  // A host name never contains ":", so anything with one is IPv6.
  if (host.includes(":")) return host;
  const c = host.charCodeAt(0);
  if (c >= 48 && c <= 57 && IPV4.test(host)) return host; // starts with a digit
  return undefined;
}

async function systemResolve(host: string): Promise<readonly string[]> {
  const dns = await import("node:dns/promises");
  const found = await dns.lookup(host, { all: true });
  return found.map((a) => a.address);
}

/**
 * Create a DNS cache.
 *
 * @param options Resolver, TTLs, size bound and scheduler.
 * @returns The cache.
 * @throws {RangeError} when a TTL is negative or not finite, or `maxEntries` is not an integer >= 0.
 * @throws {TypeError} when `resolve` is given and is not a function.
 * @example Two host names on one address
 * ```ts
 * import { createDnsCache } from "./dns_cache.ts";
 * const dns = createDnsCache({ resolve: async () => ["10.0.0.7"] });
 * const [a, b] = await Promise.all([dns.lookup("a.example"), dns.lookup("b.example")]);
 * console.assert(a === "10.0.0.7" && b === a && dns.peek("a.example") === a);
 * ```
 */
export function createDnsCache(options: DnsCacheOptions = {}): DnsCache {
  const resolve = options.resolve ?? systemResolve;
  if (typeof resolve !== "function") {
    throw new TypeError(
      `Cannot create DNS cache as 'resolve' must be a function: current value is ${
        String(resolve)
      }`,
    );
  }
  const ttlMs = checkCacheOption("DNS cache", "ttlMs", options.ttlMs ?? 300_000, 0, false);
  const failureTtlMs = checkCacheOption(
    "DNS cache",
    "failureTtlMs",
    options.failureTtlMs ?? 5_000,
    0,
    false,
  );
  const maxEntries = checkCacheOption(
    "DNS cache",
    "maxEntries",
    options.maxEntries ?? 100_000,
    0,
    true,
  );
  const scheduler = options.scheduler ?? asyncScheduler;
  const entries = new TtlCache<string>({ maxEntries, scheduler, failureTtlMs });

  const load = (key: string): Promise<Loaded<string>> =>
    Promise.resolve()
      .then(() => resolve(key))
      .then((addresses) => {
        const first = addresses[0];
        if (typeof first !== "string" || first === "") throw new DnsLookupError(key);
        return { value: first, ttlMs };
      })
      .catch((cause: unknown) => {
        throw cause instanceof DnsLookupError ? cause : new DnsLookupError(key, { cause });
      });

  return {
    lookup(host: string): Promise<string> {
      const key = host.toLowerCase();
      const ip = ipLiteral(key);
      if (ip !== undefined) return Promise.resolve(ip);
      return entries.get(key, load);
    },
    peek(host: string): string | undefined {
      const key = host.toLowerCase();
      return ipLiteral(key) ?? entries.peek(key);
    },
    get size(): number {
      return entries.size;
    },
    clear(): void {
      entries.clear();
    },
  };
}
