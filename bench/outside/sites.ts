/**
 * The outside check's sites: 28 limiter shapes and parameters chosen by hand
 * to cover what real servers and middleware run (docs: nginx limit_req,
 * express-rate-limit, Cloudflare, GitHub, redis-cell), none of them told to
 * the crawler. Rates 1.7-30/s, windows 1-60 s, bursts 1-50, caps 2-6,
 * latencies 8-300 ms, some varying ±50%.
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
import type { RetryAfter, SiteSpec } from "./site.ts";

const NONE: RetryAfter = { kind: "none" };
const EXACT: RetryAfter = { kind: "exact" };
const DATE: RetryAfter = { kind: "date" };
const constant = (seconds: number): RetryAfter => ({ kind: "constant", seconds });

/** Every site, in table order. */
export const SITES: readonly SiteSpec[] = [
  // Token buckets.
  {
    name: "bucket-b20",
    shape: "token bucket 15/s burst 20, 429 + Retry-After exact s",
    pages: 250,
    rules: () => [{ limiter: new TokenBucket(15, 20), status: 429, retryAfter: EXACT }],
    latency: { baseMs: 30 },
  },
  {
    name: "bucket-b1",
    shape: "token bucket 8/s burst 1, 429, no Retry-After",
    pages: 150,
    rules: () => [{ limiter: new TokenBucket(8, 1), status: 429, retryAfter: NONE }],
    latency: { baseMs: 40, spread: 0.5 },
    spacingMs: 125,
  },
  {
    name: "bucket-b50-503",
    shape: "token bucket 25/s burst 50, 503 + Retry-After: 2 always",
    pages: 300,
    rules: () => [{ limiter: new TokenBucket(25, 50), status: 503, retryAfter: constant(2) }],
    latency: { baseMs: 10 },
  },
  {
    name: "bucket-b5-date",
    shape: "token bucket 6/s burst 5, 429 + Retry-After HTTP-date",
    pages: 150,
    rules: () => [{ limiter: new TokenBucket(6, 5), status: 429, retryAfter: DATE }],
    latency: { baseMs: 150, spread: 0.3 },
  },
  // GCRA / strict spacing.
  {
    name: "gcra-12",
    shape: "GCRA 12/s no tolerance, 429 + Retry-After exact s",
    pages: 180,
    rules: () => [{ limiter: new Gcra(12), status: 429, retryAfter: EXACT }],
    latency: { baseMs: 60 },
    spacingMs: 1000 / 12,
  },
  {
    name: "gcra-30-503",
    shape: "GCRA 30/s no tolerance, 503, no Retry-After",
    pages: 300,
    rules: () => [{ limiter: new Gcra(30), status: 503, retryAfter: NONE }],
    latency: { baseMs: 8 },
    spacingMs: 1000 / 30,
  },
  {
    name: "gcra-10-b3",
    shape: "GCRA 10/s burst 3, 429 + Retry-After exact s",
    pages: 150,
    rules: () => [{ limiter: new Gcra(10, 3), status: 429, retryAfter: EXACT }],
    latency: { baseMs: 300, spread: 0.5 },
  },
  // Fixed windows.
  {
    name: "fixed-clock-50/5s",
    shape: "fixed window 50 per 5 s (clock), 429 + Retry-After exact s",
    pages: 250,
    rules: () => [{
      limiter: new FixedWindow(50, 5000, "clock"),
      status: 429,
      retryAfter: EXACT,
    }],
    latency: { baseMs: 25 },
  },
  {
    name: "fixed-first-20/2s",
    shape: "fixed window 20 per 2 s (from first request), 429, no Retry-After",
    pages: 200,
    rules: () => [{ limiter: new FixedWindow(20, 2000, "first"), status: 429, retryAfter: NONE }],
    latency: { baseMs: 50, spread: 0.5 },
  },
  {
    name: "fixed-clock-12/1s-503",
    shape: "fixed window 12 per 1 s (clock), 503 + Retry-After: 1",
    pages: 200,
    rules: () => [{
      limiter: new FixedWindow(12, 1000, "clock"),
      status: 503,
      retryAfter: constant(1),
    }],
    latency: { baseMs: 20 },
  },
  // Sliding log and sliding-window counter.
  {
    name: "slog-30/3s",
    shape: "sliding log 30 per 3 s, 429 + Retry-After exact s",
    pages: 200,
    rules: () => [{ limiter: new SlidingLog(30, 3000), status: 429, retryAfter: EXACT }],
    latency: { baseMs: 20 },
  },
  {
    name: "slog-8/1s-503",
    shape: "sliding log 8 per 1 s, 503, no Retry-After",
    pages: 150,
    rules: () => [{ limiter: new SlidingLog(8, 1000), status: 503, retryAfter: NONE }],
    latency: { baseMs: 80, spread: 0.5 },
  },
  {
    name: "swc-100/10s",
    shape: "sliding-window counter 100 per 10 s (Cloudflare), 429 + Retry-After exact s",
    pages: 250,
    rules: () => [{ limiter: new SlidingCounter(100, 10_000), status: 429, retryAfter: EXACT }],
    latency: { baseMs: 30 },
  },
  // Concurrency caps, counted until the response is finished.
  {
    name: "cap3-date",
    shape: "3 at once, 503 + Retry-After HTTP-date",
    pages: 200,
    rules: () => [{ limiter: new ConcurrencyCap(3), status: 503, retryAfter: DATE }],
    latency: { baseMs: 120 },
  },
  {
    name: "cap6-429",
    shape: "6 at once, 429, no Retry-After",
    pages: 200,
    rules: () => [{ limiter: new ConcurrencyCap(6), status: 429, retryAfter: NONE }],
    latency: { baseMs: 200, spread: 0.5 },
  },
  {
    name: "cap2-503",
    shape: "2 at once, 503, no Retry-After",
    pages: 200,
    rules: () => [{ limiter: new ConcurrencyCap(2), status: 503, retryAfter: NONE }],
    latency: { baseMs: 60, spread: 0.3 },
  },
  // nginx limit_req.
  {
    name: "nginx-r15-b20",
    shape: "nginx limit_req rate=15r/s burst=20 (delay), 503",
    pages: 200,
    rules: () => [{ limiter: new NginxLimitReq(15, 20, false), status: 503, retryAfter: NONE }],
    latency: { baseMs: 20 },
  },
  {
    name: "nginx-r20-b10-nodelay",
    shape: "nginx limit_req rate=20r/s burst=10 nodelay, status 429",
    pages: 250,
    rules: () => [{ limiter: new NginxLimitReq(20, 10, true), status: 429, retryAfter: NONE }],
    latency: { baseMs: 10 },
  },
  {
    name: "nginx-r25-b0",
    shape: "nginx limit_req rate=25r/s (no burst), 503",
    pages: 300,
    rules: () => [{ limiter: new NginxLimitReq(25, 0, false), status: 503, retryAfter: NONE }],
    latency: { baseMs: 5 },
    spacingMs: 40,
  },
  // A server that slows down under load instead of refusing.
  {
    name: "slowdown-knee3",
    shape: "no refusals; 80 ms, +50% per request above 3 in service",
    pages: 250,
    rules: () => [],
    latency: { baseMs: 80, knee: 3, slope: 0.5 },
  },
  {
    name: "slowdown-shed",
    shape: "60 ms, +40% per request above 2 in service; 503 above 5 (load shedding)",
    pages: 250,
    rules: () => [{ limiter: new ConcurrencyCap(5), status: 503, retryAfter: NONE }],
    latency: { baseMs: 60, knee: 2, slope: 0.4, spread: 0.2 },
  },
  // Announced budgets.
  {
    name: "draft7-50/5s",
    shape: "fixed window 50 per 5 s (clock), RateLimit draft-7 on all, 429, no Retry-After",
    pages: 200,
    rules: () => [{
      limiter: new FixedWindow(50, 5000, "clock"),
      status: 429,
      retryAfter: NONE,
      headers: { style: "draft7", on: "all" },
    }],
    latency: { baseMs: 40 },
  },
  {
    name: "draft6-20/1s-swc",
    shape: "sliding-window counter 20 per 1 s, RateLimit-Limit/-Remaining/-Reset on all, 429",
    pages: 250,
    rules: () => [{
      limiter: new SlidingCounter(20, 1000),
      status: 429,
      retryAfter: NONE,
      headers: { style: "draft6", on: "all" },
    }],
    latency: { baseMs: 15 },
  },
  {
    name: "ietf-40/2s",
    shape: 'fixed window 40 per 2 s (first), RateLimit-Policy "default";q;w + RateLimit r;t, 429',
    pages: 250,
    rules: () => [{
      limiter: new FixedWindow(40, 2000, "first"),
      status: 429,
      retryAfter: EXACT,
      headers: { style: "ietf", on: "all" },
    }],
    latency: { baseMs: 30, spread: 0.5 },
  },
  {
    name: "github-100/60s",
    shape: "fixed window 100 per 60 s (first), X-RateLimit-* epoch reset on all, 429",
    pages: 150,
    rules: () => [{
      limiter: new FixedWindow(100, 60_000, "first"),
      status: 429,
      retryAfter: NONE,
      headers: { style: "github", on: "all" },
    }],
    latency: { baseMs: 50 },
  },
  {
    name: "xrl-on-429-only",
    shape: "token bucket 15/s burst 10, X-RateLimit-* (epoch reset) on 429 only",
    pages: 200,
    rules: () => [{
      limiter: new TokenBucket(15, 10),
      status: 429,
      retryAfter: NONE,
      headers: { style: "github", on: "refusals" },
    }],
    latency: { baseMs: 30 },
  },
  // Two limits at once.
  {
    name: "mixed-bucket+quota",
    shape: "token bucket 20/s burst 5 (429) + 100 per 10 s window (first; 429 + Retry-After exact)",
    pages: 250,
    rules: () => [
      { limiter: new TokenBucket(20, 5), status: 429, retryAfter: NONE },
      { limiter: new FixedWindow(100, 10_000, "first"), status: 429, retryAfter: EXACT },
    ],
    latency: { baseMs: 25 },
  },
  {
    name: "mixed-cap+rate",
    shape: "4 at once (503) + token bucket 12/s burst 4 (429); 100-400 ms",
    pages: 200,
    rules: () => [
      { limiter: new ConcurrencyCap(4), status: 503, retryAfter: NONE },
      { limiter: new TokenBucket(12, 4), status: 429, retryAfter: NONE },
    ],
    latency: { baseMs: 250, spread: 0.6 },
  },
];
