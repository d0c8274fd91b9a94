/**
 * The scopes of a request, as the gate sees them: `meta.throttlingScopes`,
 * else the throttler's `getScopes`, else the URL's host; plus the IP the host
 * resolves to when per-IP scopes are on. Single-scope results are shared
 * through a bounded cache, so a backlog of waiting requests costs no scope
 * objects. `Throttler.resolveScopes` is this.
 *
 * @module
 */
import type { SchedulerLike } from "rxjs";
import { describeValue } from "../settings/_describe_value.ts";
import { createDnsCache, type DnsCache } from "../scopes/dns_cache.ts";
import { hostScope, urlHostname } from "../scopes/domain_scopes.ts";
import { requestMeta, requestUrl, type ScopesInput } from "../request.ts";
import { InvalidScopesError, normalizeScopes, type RequestScopes } from "../scopes/scopes.ts";
import type { ThrottlerSettings } from "../settings/settings.ts";

/** Size of the cache of single-scope `RequestScopes` (see `#single`). */
const SINGLES_MAX = 4096;
/** How many requests skip that cache after it thrashed. */
const SINGLES_SKIP = 16 * SINGLES_MAX;

/** Works out the scopes of requests for one throttler. */
export class ScopeResolver<R> {
  readonly #getScopes: ((request: R) => ScopesInput | PromiseLike<ScopesInput>) | undefined;
  readonly #settings: ThrottlerSettings;
  readonly #scheduler: SchedulerLike;
  #dns: DnsCache | undefined;
  /** Shared scopes of single-scope requests (see #single). */
  readonly #singles = new Map<string, RequestScopes>();
  /** Hits of `#singles` since it was last emptied. */
  #singleHits = 0;
  /** Calls of `#single` left that skip the cache (it thrashed). */
  #singleSkip = 0;

  /**
   * @param getScopes The throttler's `getScopes` option.
   * @param settings The throttler's settings (`concurrentRequestsPerIp` > 0 adds the IP scope).
   * @param scheduler The clock of the DNS cache made when first needed.
   * @param dns The DNS cache to use. @default a `createDnsCache` on `scheduler`
   */
  constructor(
    getScopes: ((request: R) => ScopesInput | PromiseLike<ScopesInput>) | undefined,
    settings: ThrottlerSettings,
    scheduler: SchedulerLike,
    dns: DnsCache | undefined,
  ) {
    this.#getScopes = getScopes;
    this.#settings = settings;
    this.#scheduler = scheduler;
    this.#dns = dns;
  }

  /** Whether the scopes are the default ones: no `getScopes`, no per-IP scopes. */
  get isDefault(): boolean {
    return this.#getScopes === undefined && this.#settings.concurrentRequestsPerIp === 0;
  }

  /** See `Throttler.resolveScopes`. */
  resolve(request: R): RequestScopes | Promise<RequestScopes> {
    const scopes = this.#ownScopes(request);
    if (this.#settings.concurrentRequestsPerIp === 0) return scopes;
    if (scopes instanceof Promise) return scopes.then((s) => this.#withIp(request, s));
    return this.#withIp(request, scopes);
  }

  /** Add the IP scope (the reference's "Per-IP concurrency limiting"). */
  #withIp(request: R, scopes: RequestScopes): RequestScopes | Promise<RequestScopes> {
    const url = requestUrl(request);
    if (url === undefined) return scopes; // an item with custom scopes only
    const host = urlHostname(url);
    const dns = this.#dns ??= createDnsCache({ scheduler: this.#scheduler });
    const ip = dns.peek(host);
    if (ip !== undefined) return addIpScope(scopes, ip);
    return dns.lookup(host).then((address) => addIpScope(scopes, address));
  }

  #ownScopes(request: R): RequestScopes | Promise<RequestScopes> {
    const meta = requestMeta(request);
    if (meta?.throttlingScopes !== undefined) return normalizeScopes(meta.throttlingScopes);
    if (this.#getScopes !== undefined) {
      const scopes = this.#getScopes(request);
      if (typeof (scopes as PromiseLike<ScopesInput>)?.then === "function") {
        return Promise.resolve(scopes).then(normalizeScopes);
      }
      return typeof scopes === "string"
        ? this.#single(scopes)
        : normalizeScopes(scopes as ScopesInput);
    }
    const url = requestUrl(request);
    if (url === undefined) {
      throw new InvalidScopesError(
        "Cannot throttle request as it has no URL and the throttler has no getScopes: current value is " +
          describeValue(request),
        request,
      );
    }
    return this.#single(hostScope(url));
  }

  /**
   * The scopes of a request with one scope and no amount, shared by every
   * request of that scope: a backlog of waiting requests then costs no scope
   * objects. Bounded, so a broad crawl over millions of hosts keeps no more
   * than a few thousand (the cache is emptied when it is full).
   */
  #single(scope: string): RequestScopes {
    // The cache thrashed (more misses than hits while it filled up, as when
    // every request has a new host): skip it for a while, a fresh unshared
    // object is cheaper than a lookup and an insert that only miss.
    if (this.#singleSkip > 0) {
      this.#singleSkip--;
      return normalizeScopes(scope); // throws the usual error for ""
    }
    let scopes = this.#singles.get(scope);
    if (scopes === undefined) {
      if (scope === "") return normalizeScopes(scope); // throws the usual error
      if (this.#singles.size >= SINGLES_MAX) {
        this.#singles.clear();
        const thrashed = this.#singleHits < SINGLES_MAX;
        this.#singleHits = 0;
        if (thrashed) {
          this.#singleSkip = SINGLES_SKIP;
          return normalizeScopes(scope);
        }
      }
      scopes = Object.freeze({ names: Object.freeze([scope]), amounts: undefined });
      this.#singles.set(scope, scopes);
    } else {
      this.#singleHits++;
    }
    return scopes;
  }
}

function addIpScope(scopes: RequestScopes, ip: string): RequestScopes {
  // `http://127.0.0.1/` already has its IP as its host scope.
  if (scopes.names.includes(ip)) return scopes;
  return {
    names: [...scopes.names, ip],
    amounts: scopes.amounts === undefined ? undefined : [...scopes.amounts, undefined],
  };
}
