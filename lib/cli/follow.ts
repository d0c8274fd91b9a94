/**
 * Link following for `politely crawl --follow`: which links of a fetched page
 * become requests. Links come from `extractLinks` (an HTML parser, `<base>`,
 * `rel=nofollow` and `<meta name=robots content=nofollow>` obeyed); they are
 * kept to the start URLs' registrable domains (and `--allow-domain`), to
 * `--max-depth` clicks from a start URL, and to `--max-pages` requests in
 * all. What is kept goes through the request queue like any other request
 * (dedupe, depth priority, job directory).
 *
 * @module
 */
import { registrableDomainScope, urlHostname } from "../scopes/domain_scopes.ts";
import type { FetchedResponse } from "../http/fetch_download.ts";
import { extractLinks } from "../http/html_links.ts";
import type { Outcome } from "../outcome.ts";
import { requestMeta, type RequestObject } from "../request.ts";

/** Options of {@link LinkFollower}. */
export interface LinkFollowOptions {
  /** Links at most this many clicks from a start URL. @default unlimited */
  readonly maxDepth?: number | undefined;
  /**
   * Requests in all, start URLs included: links stop being followed once
   * this many distinct URLs were taken (start URLs past it are still
   * fetched: the input is never dropped). @default unlimited
   */
  readonly maxPages?: number | undefined;
  /** Domains followed besides the start URLs' own (a host matches its domain and every subdomain). */
  readonly allowDomains?: readonly string[];
}

/** The depth of a request: `meta.depth` when a whole number >= 0, else 0. */
export function requestDepth(request: unknown): number {
  const d = requestMeta(request)?.["depth"];
  return typeof d === "number" && Number.isInteger(d) && d >= 0 ? d : 0;
}

function domainOf(url: string): string | undefined {
  try {
    return registrableDomainScope(url);
  } catch {
    return undefined;
  }
}

/** Whether a response is a page whose links are followed (an HTML 2xx). */
function isHtmlPage(outcome: Outcome<RequestObject, FetchedResponse>): boolean {
  if (outcome.kind !== "response") return false;
  const r = outcome.response;
  if (r.status < 200 || r.status > 299 || r.body === "") return false;
  const type = r.headers.get("content-type")?.toLowerCase() ?? "";
  return type === "" || type.includes("text/html") || type.includes("application/xhtml+xml");
}

/**
 * Decides which links of each page a crawl follows.
 *
 * @example
 * ```ts
 * import { LinkFollower } from "./follow.ts";
 * const f = new LinkFollower({ maxDepth: 1 });
 * f.addStart({ url: "https://example.com/" });
 * const next = f.follow({
 *   kind: "response",
 *   request: { url: "https://example.com/" },
 *   response: {
 *     url: "https://example.com/",
 *     status: 200,
 *     headers: new Headers({ "content-type": "text/html" }),
 *     body: '<a href="/a">a</a> <a href="https://elsewhere.test/">x</a>',
 *     bytes: 60,
 *   },
 *   scopes: ["example.com"],
 *   attempt: 1,
 *   sentAt: 0,
 *   latencyMs: 1,
 * });
 * console.assert(next.length === 1 && next[0]!.url === "https://example.com/a");
 * ```
 */
export class LinkFollower {
  readonly #maxDepth: number;
  readonly #maxPages: number;
  readonly #allow: readonly string[];
  /** Registrable domains of the start URLs (with the port for IPs and single-label hosts). */
  readonly #domains = new Set<string>();
  /** URLs taken, while `maxPages` is set (the queue dedupes otherwise). */
  readonly #taken = new Set<string>();

  /** @param options Depth, page and domain limits. */
  constructor(options: LinkFollowOptions = {}) {
    this.#maxDepth = options.maxDepth ?? Infinity;
    this.#maxPages = options.maxPages ?? Infinity;
    this.#allow = (options.allowDomains ?? []).map((d) => d.toLowerCase());
  }

  /** Requests taken so far against `maxPages` (start URLs and links). */
  get taken(): number {
    return this.#taken.size;
  }

  /**
   * A start URL: its domain is followed, and it counts against `maxPages`.
   *
   * @param request A request of the input.
   * @returns The domain now followed (`undefined` for a URL without one).
   */
  addStart(request: RequestObject): string | undefined {
    const domain = domainOf(request.url);
    if (domain !== undefined) this.#domains.add(domain);
    if (this.#maxPages !== Infinity) this.#taken.add(request.url);
    return domain;
  }

  /**
   * A start URL's domain, learnt from another worker of a shared job (what
   * `addStart` returned there).
   *
   * @param domain A registrable domain (with the port for IPs and single-label hosts).
   */
  addDomain(domain: string): void {
    this.#domains.add(domain);
  }

  #allowed(url: string): boolean {
    const domain = domainOf(url);
    if (domain !== undefined && this.#domains.has(domain)) return true;
    if (this.#allow.length === 0) return false;
    let host: string;
    try {
      host = urlHostname(url).toLowerCase();
    } catch {
      return false;
    }
    return this.#allow.some((d) => host === d || host.endsWith(`.${d}`) || domain === d);
  }

  /**
   * The requests a final outcome leads to: the links of an HTML page within
   * the limits, one click deeper than the page.
   *
   * @param outcome A request's final outcome.
   * @returns Requests to enqueue (none for anything but an HTML 2xx page).
   */
  follow(outcome: Outcome<RequestObject, FetchedResponse>): RequestObject[] {
    if (!isHtmlPage(outcome) || outcome.kind !== "response") return [];
    const depth = requestDepth(outcome.request) + 1;
    if (depth > this.#maxDepth || this.#taken.size >= this.#maxPages) return [];
    const page = outcome.response.url || outcome.request.url;
    const { links } = extractLinks(outcome.response.body, page);
    const out: RequestObject[] = [];
    for (const url of links) {
      if (!this.#allowed(url)) continue;
      if (this.#maxPages !== Infinity) {
        if (this.#taken.has(url)) continue;
        if (this.#taken.size >= this.#maxPages) break;
        this.#taken.add(url);
      }
      out.push({ url, meta: { depth } });
    }
    return out;
  }
}
