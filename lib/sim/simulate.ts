/**
 * `simulate()`: what a configuration will do before it touches a real site.
 * The real throttler, gate, backoff, rampup and request queue (`crawl()`)
 * run against simulated sites (the limiter zoo, lib/sim/zoo.ts) in virtual
 * time, so a crawl of hours takes seconds and the same seed gives the same
 * figures. What the model leaves out is in docs/SIMULATE.md.
 *
 * @module
 */
import { crawl } from "../crawl.ts";
import type { ThrottleEvent } from "../events.ts";
import type { RequestObject } from "../request.ts";
import { RequestQueue } from "../queue/request_queue.ts";
import type { ThrottlerSettingsInput } from "../settings/settings.ts";
import { createThrottler } from "../throttler/throttler.ts";
import { rampup } from "../../operators/rampup.ts";
import { checkSite, type SimulatedSiteSpec } from "./site_spec.ts";
import { createZooLimiter, describeLimiter, idealMs, limitPerSec, ZOO_EPOCH_MS } from "./zoo.ts";
import type { SiteStats, StatsRecorder } from "../demo/_limiters.ts";
import { virtualDownload } from "./_virtual_download.ts";
import { SortedVirtualTimeScheduler } from "./_sorted_virtual_scheduler.ts";
import { seededRandom } from "./zoo_random.ts";

/** Options of {@linkcode simulate}. */
export interface SimulateOptions {
  /** The crawler's settings, as for `createThrottler` (the defaults when absent). */
  readonly settings?: ThrottlerSettingsInput;
  /** The sites (at least one). */
  readonly sites: readonly SimulatedSiteSpec[];
  /**
   * The workload: a number of URLs spread over the sites by their `weight`
   * (or by `zipf`), or the URLs themselves (their hosts must be sites').
   */
  readonly urls: number | readonly string[];
  /**
   * Spread a number of URLs over the sites by a Zipf law of this exponent
   * (site k of n gets a share ∝ 1/k^s, in the order given) instead of by
   * weight. @default weights
   */
  readonly zipf?: number;
  /** Put the `rampup` operator in the pipeline (every scope probes). @default false */
  readonly rampup?: boolean;
  /** Seed of every random draw (jitter, URL order, timing noise). @default 1 */
  readonly seed?: number;
  /** Timing noise: requests reach the sites up to this many ms late (see `runZooCrawl`). @default 0 */
  readonly outboundJitterMs?: number;
  /** Give up after this much virtual time. @default 7 days */
  readonly limitMs?: number;
  /** Collect the throttler's events in the result. @default false */
  readonly events?: boolean;
  /** Told every `progressEvery` requests ended: ended, total, virtual ms. */
  readonly onProgress?: (ended: number, total: number, virtualMs: number) => void;
  /** @default 10_000 */
  readonly progressEvery?: number;
  /** Give each site's admitted arrival times (`admittedAt`), for a plot. @default false */
  readonly keepTimes?: boolean;
}

/** One site's figures. */
export interface SimulatedSiteFigures {
  readonly host: string;
  readonly name: string;
  /** The hidden limit in words ("10/s burst 3"). */
  readonly limit: string;
  /** The limit as a rate (requests/s; concurrency over latency for a cap), or null when none. */
  readonly limitPerSec: number | null;
  /** URLs of the workload on this site. */
  readonly pages: number;
  /** Requests it saw (retries included). */
  readonly requests: number;
  /** Requests it refused (429 or 503). */
  readonly refused: number;
  /** Pages answered 200. */
  readonly ok: number;
  /** From its first arrival to its last answer, ms. */
  readonly durationMs: number;
  /** Pages answered 200 per second over the last half of its crawl (where the scope settled). */
  readonly settledPerSec: number;
  /** A client that knows the limit: `idealMs` of lib/sim/zoo.ts. */
  readonly idealMs: number;
  /** When each admitted request arrived, virtual ms (with `keepTimes`). */
  readonly admittedAt?: readonly number[];
  /** When its last request arrived, virtual ms. */
  readonly lastArrivalAt: number;
}

/** What a simulation predicts. */
export interface SimulateResult {
  /** From the first send to the last answer, virtual ms. */
  readonly durationMs: number;
  /** URLs of the workload. */
  readonly urls: number;
  /** Requests the sites saw (retries included). */
  readonly requests: number;
  readonly refused: number;
  /** URLs that ended answered 200. */
  readonly ok: number;
  /** URLs that ended otherwise (refused after their retries, errors). */
  readonly failed: number;
  /** Whether the simulation hit `limitMs` before every URL ended. */
  readonly cut: boolean;
  /** Per site, in the order given. */
  readonly sites: readonly SimulatedSiteFigures[];
  /** Largest JS heap seen while simulating, bytes (0 where the runtime does not say). */
  readonly peakHeapBytes: number;
  /** The throttler's events, when asked for. */
  readonly events: readonly ThrottleEvent[];
}

/**
 * How many of `total` URLs each site gets: by weight, or by a Zipf law;
 * largest remainders, so the counts add up to `total`.
 */
export function spreadUrls(
  total: number,
  sites: readonly { readonly weight?: number }[],
  zipf?: number,
): number[] {
  const shares = sites.map((s, k) => zipf !== undefined ? 1 / (k + 1) ** zipf : s.weight ?? 1);
  const sum = shares.reduce((a, b) => a + b, 0);
  const exact = shares.map((w) => (total * w) / sum);
  const counts = exact.map(Math.floor);
  let left = total - counts.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) =>
    b[0] - a[0] || a[1] - b[1]
  );
  for (const [, i] of order) {
    if (left-- <= 0) break;
    counts[i]!++;
  }
  return counts;
}

function hostOf(url: string): string {
  const m = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]+)/i.exec(url);
  return (m?.[1] ?? "").toLowerCase();
}

/**
 * Runs a crawl of `urls` over simulated `sites` in virtual time and predicts
 * its duration, refusals and the rate each site settles on.
 *
 * @param options Settings, sites, workload, seed.
 * @returns The figures (and the events, when asked for).
 * @throws {SiteSpecError} For a site that cannot mean anything, naming the field.
 * @throws {RangeError} For a workload that cannot (no sites, a URL of no site).
 * @example
 * ```ts
 * import { simulate } from "./simulate.ts";
 * const r = simulate({
 *   sites: [{ name: "api", host: "api.test", limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 }, latencyMs: 50 }],
 *   urls: 100,
 * });
 * console.assert(r.ok === 100 && r.durationMs > 9_000);
 * ```
 */
export function simulate(options: SimulateOptions): SimulateResult {
  const sites = options.sites;
  if (sites.length === 0) throw new RangeError("Cannot simulate as 'sites' is empty");
  const byHost = new Map<string, { spec: SimulatedSiteSpec; index: number }>();
  sites.forEach((spec, index) => {
    checkSite(spec);
    if (byHost.has(spec.host)) {
      throw new RangeError(`Cannot simulate as two sites have host '${spec.host}'`);
    }
    byHost.set(spec.host, { spec, index });
  });
  const seed = options.seed ?? 1;
  const random = seededRandom(seed);
  // The workload: a number spread over the sites and shuffled, or the URLs given.
  let urls: string[];
  if (typeof options.urls === "number") {
    if (!Number.isInteger(options.urls) || options.urls < 0) {
      throw new RangeError(
        `Cannot simulate as 'urls' must be a whole number >= 0: current value is ${options.urls}`,
      );
    }
    const counts = spreadUrls(options.urls, sites, options.zipf);
    urls = [];
    counts.forEach((n, i) => {
      for (let p = 0; p < n; p++) urls.push(`http://${sites[i]!.host}/p/${p}`);
    });
    const shuffle = seededRandom(seed + 104_729);
    for (let i = urls.length - 1; i > 0; i--) {
      const j = Math.floor(shuffle() * (i + 1));
      [urls[i], urls[j]] = [urls[j]!, urls[i]!];
    }
  } else {
    urls = [...options.urls];
    for (const u of urls) {
      if (!byHost.has(hostOf(u))) {
        throw new RangeError(`Cannot simulate as URL '${u}' is on no site of 'sites'`);
      }
    }
  }
  const pagesOf = new Array<number>(sites.length).fill(0);
  for (const u of urls) pagesOf[byHost.get(hostOf(u))!.index]!++;

  // Same order as VirtualTimeScheduler, without a sort of every pending timer at each new one.
  const scheduler = new SortedVirtualTimeScheduler(options.limitMs ?? 7 * 86_400_000);
  const jitter = options.outboundJitterMs ?? 0;
  const noise = seededRandom(seed + 7919);
  const tallies = sites.map(() => new SiteTally());
  const limiters = sites.map((spec) => createZooLimiter(spec));
  const label = () => "";
  const throttler = createThrottler<RequestObject>(options.settings ?? {}, { scheduler, random });
  const events: ThrottleEvent[] = [];
  const eventsSub = options.events === true
    ? throttler.events$.subscribe((e) => events.push(e))
    : undefined;
  const settings = throttler.settings;
  const queue = new RequestQueue<RequestObject>({
    view: throttler,
    scheduler,
    start: urls.map((url) => ({ url })),
    order: settings.queue.order,
    fifo: settings.queue.fifo,
    depthPriority: settings.queue.depthPriority,
    // Generated URLs are unique: no fingerprint per URL to keep.
    dedupe: typeof options.urls === "number" ? false : settings.queue.dedupe,
  });
  const download = (request: RequestObject, c: { signal: AbortSignal }) => {
    const i = byHost.get(hostOf(request.url))!.index;
    const limiter = limiters[i]!;
    return virtualDownload(
      scheduler,
      tallies[i]!,
      request,
      c.signal,
      (now) => limiter.arrive(now),
      label,
      jitter > 0 ? noise() ** 4 * jitter : 0,
    );
  };

  let ended = 0;
  let ok = 0;
  let firstAt = Infinity;
  let lastAt = 0;
  let peakHeap = 0;
  const heap = () => {
    const used = typeof process !== "undefined" ? process.memoryUsage?.().heapUsed ?? 0 : 0;
    if (used > peakHeap) peakHeap = used;
  };
  const every = options.progressEvery ?? 10_000;
  const sub = crawl({
    throttler,
    queue,
    download,
    backoff: { nowEpochMs: () => ZOO_EPOCH_MS + scheduler.now() },
  }).pipe(options.rampup === true ? rampup(throttler) : (o) => o).subscribe((o) => {
    ended++;
    lastAt = scheduler.now();
    if (o.kind === "response" && o.response.status === 200) ok++;
    if (o.sentAt < firstAt) firstAt = o.sentAt;
    if (ended % every === 0) {
      heap();
      options.onProgress?.(ended, urls.length, scheduler.now());
    }
  });
  heap();
  scheduler.flush();
  heap();
  const cut = ended < urls.length;
  sub.unsubscribe();
  eventsSub?.unsubscribe();
  queue.close();

  const concurrency = settings.concurrentRequestsPerDomain > 0
    ? Math.min(settings.concurrentRequests, settings.concurrentRequestsPerDomain)
    : settings.concurrentRequests;
  let requests = 0;
  let refused = 0;
  const figures = sites.map((spec, i): SimulatedSiteFigures => {
    const t = tallies[i]!;
    requests += t.requests;
    refused += t.refused;
    const first = t.requests > 0 ? t.firstAt : 0;
    const last = t.requests > 0 ? t.lastAt + spec.latencyMs : 0;
    const half = first + (last - first) / 2;
    const late = t.admittedSince(half);
    return {
      host: spec.host,
      name: spec.name,
      limit: describeLimiter(spec.limiter),
      limitPerSec: limitPerSec(spec),
      pages: pagesOf[i]!,
      requests: t.requests,
      refused: t.refused,
      ok: t.admitted,
      durationMs: last - first,
      settledPerSec: last > half ? (late * 1000) / (last - half) : 0,
      idealMs: pagesOf[i]! > 0 ? idealMs(spec, pagesOf[i]!, concurrency) : 0,
      lastArrivalAt: t.lastAt,
      ...(options.keepTimes === true ? { admittedAt: t.admittedTimes() } : {}),
    };
  });
  return {
    durationMs: ended === 0 ? 0 : lastAt - Math.max(0, firstAt),
    urls: urls.length,
    requests,
    refused,
    ok,
    failed: ended - ok,
    cut,
    sites: figures,
    peakHeapBytes: peakHeap,
    events,
  };
}

/**
 * What a simulated site saw, kept small for a million requests: counts, the
 * first and last arrival, and the admitted arrivals' times (8 bytes each) for
 * the settled rate. Only what `simulate` reads; `snapshot` is not used.
 */
class SiteTally implements StatsRecorder {
  requests = 0;
  refused = 0;
  admitted = 0;
  firstAt = 0;
  lastAt = 0;
  #times = new Float64Array(64);

  enter(): void {}
  depart(): void {}

  arrive(atMs: number, _path: string, status: number): void {
    if (this.requests++ === 0) this.firstAt = atMs;
    this.lastAt = atMs;
    if (status === 429 || status === 503) this.refused++;
    else if (status === 200) {
      if (this.admitted === this.#times.length) {
        const grown = new Float64Array(this.#times.length * 2);
        grown.set(this.#times);
        this.#times = grown;
      }
      this.#times[this.admitted++] = atMs;
    }
  }

  /** The admitted arrivals' times, in order. */
  admittedTimes(): number[] {
    return Array.from(this.#times.subarray(0, this.admitted));
  }

  /** Admitted arrivals at or after `atMs` (they come in time order). */
  admittedSince(atMs: number): number {
    let lo = 0;
    let hi = this.admitted;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.#times[mid]! < atMs) lo = mid + 1;
      else hi = mid;
    }
    return this.admitted - lo;
  }

  snapshot(): SiteStats {
    throw new Error("SiteTally keeps no snapshot");
  }
}
