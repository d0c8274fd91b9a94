/**
 * The outside check in virtual time: the same sites (`sites.ts`: the same
 * limiter state machines, refusals, `Retry-After` and budget headers as the
 * loopback servers of `site.ts`) crawled by the same pipeline the command
 * line runs (`throttleByScope`, `backoffOn`, optionally `rampup`, default
 * settings) on an RxJS `VirtualTimeScheduler`: all 28 sites in seconds, so
 * a change to adaptive limits can be weighed on them and on several seeds
 * (the latencies' draws, the clock's phase against clock-aligned windows,
 * the noise on the way out) before the real run. The real run stays the
 * check: a loopback server, sockets and a busy event loop add what no
 * simulation does.
 *
 * @module
 */
import { from, type Observable, type SchedulerLike, VirtualTimeScheduler } from "rxjs";
import { createStatsRecorder } from "../../lib/demo/_limiters.ts";
import type { ThrottleEvent } from "../../lib/events.ts";
import { type VirtualAnswer, virtualDownload } from "../../lib/sim/_virtual_download.ts";
import { seededRandom } from "../../lib/sim/zoo_random.ts";
import type { ThrottlerSettingsInput } from "../../lib/settings/settings.ts";
import { createThrottler } from "../../lib/throttler/throttler.ts";
import { backoffOn } from "../../operators/backoff_on.ts";
import { rampup } from "../../operators/rampup.ts";
import { throttleByScope } from "../../operators/throttle_by_scope.ts";
import { idealMs } from "./ideal.ts";
import { budgetHeaders, latencyMs, retryAfterHeader, type SiteSpec } from "./site.ts";

/** How to crawl one site in virtual time. */
export interface VirtualCrawlOptions {
  /** Seed of the latencies, the jitter, the noise and the clock's phase. @default 1 */
  readonly seed?: number;
  /** Put the `rampup` operator in the pipeline (`politely crawl --rampup`). @default false */
  readonly rampup?: boolean;
  /** Each request reaches the site up to this many ms late (`u⁴ × J`, as `runZooCrawl`). @default 3 */
  readonly outboundJitterMs?: number;
  /** The crawler's settings. @default {} (what `politely crawl` runs with nothing set) */
  readonly settings?: ThrottlerSettingsInput;
  /** Collect the throttler's events. @default false */
  readonly events?: boolean;
}

/** What one virtual crawl measured, from the site's side. */
export interface VirtualCrawlResult {
  /** Ideal time / measured time (first arrival to the last answer's finish). */
  readonly efficiency: number;
  readonly idealMs: number;
  readonly wallMs: number;
  /** Requests the site saw, and how many it refused. */
  readonly requests: number;
  readonly refused: number;
  /** Pages that ended answered 200. */
  readonly ok: number;
  readonly events: readonly ThrottleEvent[];
}

/** Epoch of virtual time 0: 2026-01-01, moved by the seed so clock-aligned windows meet the crawl at another phase. */
const EPOCH_MS = 1_767_225_600_000;

/**
 * Crawls `spec.pages` pages of one outside site in virtual time.
 *
 * @param spec The site.
 * @param options Seed, rampup, noise, settings.
 * @returns The figures.
 */
export function crawlVirtual(
  spec: SiteSpec,
  options: VirtualCrawlOptions = {},
): VirtualCrawlResult {
  const seed = options.seed ?? 1;
  const epoch = EPOCH_MS + seed * 137_731;
  const jitter = options.outboundJitterMs ?? 3;
  const scheduler = new VirtualTimeScheduler(undefined, 3_600_000);
  const rules = spec.rules();
  const random = seededRandom(seed);
  const noise = seededRandom(seed + 7919);
  const recorder = createStatsRecorder();
  let active = 0;
  let requests = 0;
  let refused = 0;
  let first = Number.NaN;
  let lastFinish = 0;
  const decide = (t: number): VirtualAnswer => {
    const now = epoch + t;
    requests++;
    if (Number.isNaN(first)) first = now;
    const refusing = rules.find((r) => r.limiter.wait(now) > 0);
    if (refusing !== undefined) {
      refused++;
      const headers: Record<string, string> = {};
      const ra = retryAfterHeader(refusing.retryAfter, refusing.limiter.wait(now), now);
      if (ra !== undefined) headers["retry-after"] = ra;
      for (const r of rules) {
        if (r.headers !== undefined && (r.headers.on === "all" || r === refusing)) {
          Object.assign(
            headers,
            lowerCased(budgetHeaders(r.headers.style, r.limiter.budget(now), now)),
          );
        }
      }
      // A refusal is answered at once (the limiter sits in front of the work).
      lastFinish = Math.max(lastFinish, now + 1);
      return { status: refusing.status, headers, latencyMs: 1 };
    }
    let queued = 0;
    for (const r of rules) queued = Math.max(queued, r.limiter.take(now));
    const headers: Record<string, string> = {};
    for (const r of rules) {
      if (r.headers?.on === "all") {
        Object.assign(
          headers,
          lowerCased(budgetHeaders(r.headers.style, r.limiter.budget(now), now)),
        );
      }
    }
    active++;
    const took = queued + latencyMs(spec.latency, active, random);
    lastFinish = Math.max(lastFinish, now + took);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      active--;
      for (const r of rules) r.limiter.release(epoch + scheduler.now());
    };
    return { status: 200, headers, latencyMs: took, release };
  };
  // The throttler reads the wall clock as the real one does (epoch ms): a
  // window aligned to the clock is aligned to the crawler's clock too.
  const clock: SchedulerLike = {
    now: () => epoch + scheduler.now(),
    schedule: scheduler.schedule.bind(scheduler) as SchedulerLike["schedule"],
  };
  const throttler = createThrottler(options.settings ?? {}, {
    scheduler: clock,
    random: seededRandom(seed + 3),
  });
  const events: ThrottleEvent[] = [];
  if (options.events === true) throttler.events$.subscribe((e) => events.push(e));
  const urls = Array.from({ length: spec.pages }, (_, i) => `http://site.test/p/${i}`);
  const download = (url: string, c: { signal: AbortSignal }): Observable<unknown> =>
    virtualDownload(
      scheduler,
      recorder,
      url,
      c.signal,
      decide,
      undefined,
      jitter > 0 ? noise() ** 4 * jitter : 0,
    );
  let ok = 0;
  const sub = from(urls).pipe(
    throttleByScope(throttler, download),
    backoffOn(throttler, { nowEpochMs: () => epoch + scheduler.now() }),
    options.rampup === true ? rampup(throttler) : (o) => o,
  ).subscribe((o) => {
    if (o.kind === "response" && (o.response as { status: number }).status === 200) ok++;
  });
  scheduler.flush();
  sub.unsubscribe();
  const ideal = idealMs(spec, first, 8);
  const wall = Math.max(1, lastFinish - first);
  return { efficiency: ideal / wall, idealMs: ideal, wallMs: wall, requests, refused, ok, events };
}

function lowerCased(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) out[k.toLowerCase()] = v;
  return out;
}
