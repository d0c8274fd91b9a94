/**
 * Round-number outside sites: the limits people write ("10 requests per
 * second", "100 per minute", "3 at once"), for `bench/outside.bench.ts
 * --virtual --drawn A-B --round`. The drawn sets (`./drawn.ts`) spread every
 * parameter at random; these take the settings an API's documentation or a
 * site's nginx file has (rates of 2, 5, 10 and 20/s; windows of 1, 5, 10 and
 * 60 s; caps of 1-6; budgets announced in three header families) and draw
 * only what a crawler meets around them: 429 or 503, no / exact / HTTP-date /
 * a constant 1 s `Retry-After`, latencies of 30-250 ms (±0 or 30%). 46
 * sites per seed, 100-300 pages (25 s of the site's rate).
 *
 * Written after the drawn sets (eighth session) as a set none of the tuning
 * had seen: its first figures were a mean efficiency of 0.83 and 52% of the
 * crawls under 0.8 or over 5% refused (docs/ZOO.md).
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
import type { DrawnSite } from "./drawn.ts";
import { type HeaderStyle, type RetryAfter, type Rule, seeded } from "./site.ts";

type Kind = DrawnSite["kind"];

/** One limit of the set: its kind, its description, its rate (null: a cap), its limiter. */
interface RoundLimit {
  readonly kind: Kind;
  readonly shape: string;
  readonly rate: number | null;
  readonly limiter: () => Rule["limiter"];
  readonly spacingMs?: number;
  readonly headers?: { readonly style: HeaderStyle; readonly on: "all" | "refusals" };
}

const LIMITS: readonly RoundLimit[] = [
  ...([[2, 1], [5, 1], [10, 1], [5, 5], [10, 10], [20, 5], [2, 10], [20, 40]] as const).map((
    [rate, burst],
  ): RoundLimit => ({
    kind: "bucket",
    shape: `token bucket ${rate}/s burst ${burst}`,
    rate,
    limiter: () => new TokenBucket(rate, burst),
    ...(burst === 1 ? { spacingMs: 1000 / rate } : {}),
  })),
  ...[2, 5, 10, 20].map((rate): RoundLimit => ({
    kind: "gcra",
    shape: `GCRA ${rate}/s`,
    rate,
    limiter: () => new Gcra(rate),
    spacingMs: 1000 / rate,
  })),
  ...([[5, 1], [10, 1], [20, 1], [50, 5], [30, 10], [100, 60], [60, 60]] as const).flatMap((
    [quota, seconds],
  ) =>
    (["clock", "first"] as const).map((anchor): RoundLimit => ({
      kind: "fixed",
      shape: `fixed window ${quota} per ${seconds} s (${anchor})`,
      rate: quota / seconds,
      limiter: () => new FixedWindow(quota, seconds * 1000, anchor),
    }))
  ),
  ...([[5, 1], [10, 1], [30, 10], [100, 60]] as const).map(([quota, seconds]): RoundLimit => ({
    kind: "slog",
    shape: `sliding log ${quota} per ${seconds} s`,
    rate: quota / seconds,
    limiter: () => new SlidingLog(quota, seconds * 1000),
  })),
  ...([[10, 1], [20, 1], [100, 10], [60, 60]] as const).map(([quota, seconds]): RoundLimit => ({
    kind: "swc",
    shape: `sliding-window counter ${quota} per ${seconds} s`,
    rate: quota / seconds,
    limiter: () => new SlidingCounter(quota, seconds * 1000),
  })),
  ...[1, 2, 3, 4, 6].map((cap): RoundLimit => ({
    kind: "cap",
    shape: `${cap} at once`,
    rate: null,
    limiter: () => new ConcurrencyCap(cap),
  })),
  ...([[5, 0, false], [10, 10, true], [10, 0, false], [2, 5, true]] as const).map((
    [rate, burst, nodelay],
  ): RoundLimit => ({
    kind: "nginx",
    shape: `nginx limit_req ${rate}r/s burst=${burst}${nodelay ? " nodelay" : ""}`,
    rate,
    limiter: () => new NginxLimitReq(rate, burst, nodelay),
  })),
  ...([
    [10, 1, "ietf", "all"],
    [100, 10, "draft7", "refusals"],
    [60, 60, "github", "all"],
  ] as const).map(([quota, seconds, style, on]): RoundLimit => ({
    kind: "announced",
    shape: `fixed window ${quota} per ${seconds} s (clock), ${style} headers on ${on}`,
    rate: quota / seconds,
    limiter: () => new FixedWindow(quota, seconds * 1000, "clock"),
    headers: { style, on },
  })),
];

const RETRY_AFTERS: readonly RetryAfter[] = [
  { kind: "none" },
  { kind: "exact" },
  { kind: "constant", seconds: 1 },
  { kind: "date" },
];

/**
 * The round-number sites of `seed`: every limit of the set once, with its
 * status, `Retry-After` and latency drawn from the seed.
 *
 * @param seed Any integer; the same seed draws the same sites.
 * @returns The sites, named `r<seed>-<i>`.
 */
export function roundSites(seed: number): DrawnSite[] {
  const r = seeded(seed * 104_729 + 3);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  return LIMITS.map((limit, i): DrawnSite => {
    const retryAfter = pick(RETRY_AFTERS);
    const status = pick([429, 429, 503] as const);
    const baseMs = pick([30, 50, 100, 150, 250]);
    const spread = pick([0, 0.3]);
    const pages = limit.rate === null
      ? 200
      : Math.round(Math.max(100, Math.min(300, limit.rate * 25)));
    const ra = retryAfter.kind === "constant"
      ? `Retry-After: ${retryAfter.seconds}`
      : retryAfter.kind === "none"
      ? "no Retry-After"
      : `Retry-After ${retryAfter.kind}`;
    const headers = limit.headers === undefined ? {} : { headers: limit.headers };
    return {
      name: `r${seed}-${i}`,
      kind: limit.kind,
      shape: `${limit.shape}, ${status}, ${ra}; ${baseMs} ms${
        spread > 0 ? ` ±${spread * 100}%` : ""
      }`,
      pages,
      rules: (): Rule[] => [{ limiter: limit.limiter(), status, retryAfter, ...headers }],
      latency: { baseMs, spread },
      ...(limit.spacingMs === undefined ? {} : { spacingMs: limit.spacingMs }),
    };
  });
}
