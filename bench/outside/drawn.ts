/**
 * Drawn outside sites: the outside check's own limiters (`./limiters.ts`,
 * written apart from lib/sim/) with parameters drawn at random, twelve per
 * seed, for `bench/outside.bench.ts --virtual --drawn`. The 28 hand-made
 * sites of `./sites.ts` cover each shape at one setting; these cover each
 * shape across rates 1.5-40/s, windows 1-60 s, bursts 1 to 3 s of rate,
 * caps 1-8, latencies 5-300 ms (±0-50%), 429 or 503, no / exact / HTTP-date /
 * constant Retry-After, budgets announced on every answer or on refusals
 * only, 100-500 pages (8-30 s of the site's rate). Some are out of reach by
 * design (a cap of 8 at 6 ms is done in a tenth of a second, startup costs
 * what it costs); the summary is read against its own past figures, not 1.0.
 *
 * @module
 */
import {
  ConcurrencyCap,
  FixedWindow,
  Gcra,
  NginxLimitReq,
  SlidingCounter,
  SlidingLog,
  TokenBucket,
} from "./limiters.ts";
import { type HeaderStyle, type RetryAfter, seeded, type SiteSpec } from "./site.ts";

/** The limiter kinds drawn, in the order the summary lists them. */
export const DRAWN_KINDS = [
  "bucket",
  "gcra",
  "fixed",
  "slog",
  "swc",
  "cap",
  "nginx",
  "announced",
] as const;

/** One drawn site and the kind of limiter it has. */
export interface DrawnSite extends SiteSpec {
  readonly kind: (typeof DRAWN_KINDS)[number];
}

/**
 * Twelve sites drawn from `seed`.
 *
 * With `slow`, rates of 0.2-2/s (the one-request-a-second politeness limits
 * of many sites, and slower), 20-80 pages (a crawl of 20-100 s); the draw is
 * otherwise the same, from another stream of the seed: `bench/outside.bench.ts
 * --virtual --drawn A-B --slow`.
 *
 * @param seed Any integer; the same seed draws the same sites.
 * @param slow Draw slow sites.
 * @returns The sites, named `d<seed>-<i>` (`s<seed>-<i>` when slow).
 */
export function drawnSites(seed: number, slow = false): DrawnSite[] {
  const r = seeded(seed * 7919 + (slow ? 29 : 13));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const between = (a: number, b: number) => a * Math.pow(b / a, r());
  const sites: DrawnSite[] = [];
  for (let i = 0; i < 12; i++) {
    const rate = slow
      ? Math.round(between(0.2, 2) * 100) / 100
      : Math.round(between(1.5, 40) * 10) / 10;
    const baseMs = Math.round(between(5, 300));
    const spread = pick([0, 0, 0.3, 0.5]);
    const status = pick([429, 429, 503] as const);
    const retryAfter = pick<RetryAfter>([
      { kind: "none" },
      { kind: "exact" },
      { kind: "exact" },
      { kind: "date" },
      { kind: "constant", seconds: pick([1, 2, 5]) },
    ]);
    const kind = pick(DRAWN_KINDS);
    const pages = slow
      ? Math.round(Math.max(20, Math.min(80, rate * between(20, 50))))
      : Math.round(Math.max(100, Math.min(500, rate * between(8, 30))));
    const perWindow = (w: number) => Math.max(2, Math.round((rate * w) / 1000));
    let rules: SiteSpec["rules"];
    let shape: string;
    let spacingMs: number | undefined;
    switch (kind) {
      case "bucket": {
        const burst = Math.max(1, Math.round(between(1, 3 * rate)));
        rules = () => [{ limiter: new TokenBucket(rate, burst), status, retryAfter }];
        shape = `token bucket ${rate}/s burst ${burst}`;
        if (burst === 1) spacingMs = 1000 / rate;
        break;
      }
      case "gcra": {
        const burst = pick([1, 1, 2, 4]);
        rules = () => [{ limiter: new Gcra(rate, burst), status, retryAfter }];
        shape = `GCRA ${rate}/s burst ${burst}`;
        if (burst === 1) spacingMs = 1000 / rate;
        break;
      }
      case "fixed":
      case "announced": {
        const w = pick([1000, 2000, 5000, 10000, 60000]);
        const q = perWindow(w);
        const anchor = pick(["clock", "first"] as const);
        const headers = kind === "announced"
          ? {
            style: pick<HeaderStyle>(["draft7", "draft6", "ietf", "github"]),
            on: pick(["all", "all", "refusals"] as const),
          }
          : undefined;
        rules = () => [{
          limiter: new FixedWindow(q, w, anchor),
          status,
          retryAfter,
          ...(headers === undefined ? {} : { headers }),
        }];
        shape = `fixed window ${q} per ${w / 1000} s (${anchor})${
          headers ? `, ${headers.style} headers on ${headers.on}` : ""
        }`;
        break;
      }
      case "slog": {
        const w = pick([1000, 2000, 5000, 10000]);
        const q = perWindow(w);
        rules = () => [{ limiter: new SlidingLog(q, w), status, retryAfter }];
        shape = `sliding log ${q} per ${w / 1000} s`;
        break;
      }
      case "swc": {
        const w = pick([1000, 2000, 10000, 60000]);
        const q = perWindow(w);
        rules = () => [{ limiter: new SlidingCounter(q, w), status, retryAfter }];
        shape = `sliding-window counter ${q} per ${w / 1000} s`;
        break;
      }
      case "cap": {
        const c = pick([1, 2, 3, 4, 6, 8]);
        rules = () => [{ limiter: new ConcurrencyCap(c), status, retryAfter }];
        shape = `${c} at once`;
        break;
      }
      case "nginx": {
        const burst = pick([0, 5, 10, 20]);
        const nodelay = pick([true, false]);
        const r = Math.max(1, Math.round(rate));
        rules = () => [{ limiter: new NginxLimitReq(r, burst, nodelay), status, retryAfter }];
        shape = `nginx limit_req ${r}r/s burst=${burst}${nodelay ? " nodelay" : ""}`;
        break;
      }
    }
    const ra = retryAfter.kind === "constant"
      ? `Retry-After: ${retryAfter.seconds}`
      : retryAfter.kind === "none"
      ? "no Retry-After"
      : `Retry-After ${retryAfter.kind}`;
    sites.push({
      name: `${slow ? "s" : "d"}${seed}-${i}`,
      kind,
      shape: `${shape}, ${status}, ${ra}; ${baseMs} ms${spread > 0 ? ` ±${spread * 100}%` : ""}`,
      pages,
      rules,
      latency: { baseMs, spread },
      ...(spacingMs === undefined ? {} : { spacingMs }),
    });
  }
  return sites;
}
