/**
 * One loopback site: a `node:http` server that serves `/p/<i>` pages under a
 * set of hidden limit rules, answers refusals the way real servers do
 * (429 or 503; `Retry-After` absent, constant, exact seconds or an HTTP-date;
 * `RateLimit` / `RateLimit-*` / `X-RateLimit-*` headers on every answer or on
 * refusals only), and records what it saw: every arrival, every refusal,
 * every finish.
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Budget, Limiter } from "./limiters.ts";
import { seededRandom } from "../../lib/sim/zoo_random.ts";

/** How a refusal says when to come back. */
export type RetryAfter =
  | { readonly kind: "none" }
  | { readonly kind: "constant"; readonly seconds: number }
  | { readonly kind: "exact" } // ceil of the limiter's wait, in seconds (delta-seconds)
  | { readonly kind: "date" }; // the same moment as an HTTP-date (whole seconds)

/** Which rate-limit header family a rule announces its budget in. */
export type HeaderStyle =
  | "draft7" // RateLimit: limit=, remaining=, reset=   RateLimit-Policy: q;w=  (express-rate-limit draft-7)
  | "draft6" // RateLimit-Limit / -Remaining / -Reset (delta seconds) + RateLimit-Policy
  | "ietf" // RateLimit-Policy: "default";q=;w=   RateLimit: "default";r=;t=  (draft -08 onward)
  | "github"; // X-RateLimit-Limit / -Remaining / -Used / -Reset (epoch seconds) / -Resource

/** One hidden limit of a site. */
export interface Rule {
  readonly limiter: Limiter;
  /** Status of a refusal by this rule. */
  readonly status: 429 | 503;
  readonly retryAfter: RetryAfter;
  /** Announce this rule's budget, on every answer or on its refusals only. */
  readonly headers?: { readonly style: HeaderStyle; readonly on: "all" | "refusals" };
}

/** How long an admitted page takes. */
export interface Latency {
  /** Base service time, ms. */
  readonly baseMs: number;
  /** Uniform variation, a fraction of the base (0.5: ±50%). @default 0 */
  readonly spread?: number;
  /** Load: above `knee` requests in service, each one more adds `slope` x base to every new one. */
  readonly knee?: number;
  readonly slope?: number;
}

/** A site: its hidden rules, its pages and its latency. */
export interface SiteSpec {
  readonly name: string;
  /** The hidden limit, for the table. */
  readonly shape: string;
  readonly pages: number;
  /** Fresh rules (a new state each call: one for the server, one per ideal replay). */
  readonly rules: () => readonly Rule[];
  readonly latency: Latency;
  /** For spacing limits: the interval a client must keep, ms (the "no faster" check). */
  readonly spacingMs?: number;
}

/** What a site saw. */
export interface SiteRecord {
  /** Arrival times (epoch ms) of every page request, and whether it was admitted. */
  readonly arrivals: { t: number; ok: boolean }[];
  /** Refusals by status. */
  readonly refused: Record<number, number>;
  /** Admitted requests. */
  served: number;
  /** Finish time (epoch ms) of the last answer of any kind. */
  lastFinish: number;
  /** Most requests in service at once. */
  maxActive: number;
}

/** A running site. */
export interface RunningSite {
  readonly origin: string;
  readonly record: SiteRecord;
  close(): Promise<void>;
}

/** Epoch milliseconds with sub-millisecond precision. */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * A small seeded generator (mulberry32), for reproducible latencies: the
 * zoo's, a neutral source (the limiters here share no code with the zoo's).
 */
export const seeded: (seed: number) => () => number = seededRandom;

/** The latency of a page admitted while `active` pages (itself included) are in service. */
export function latencyMs(l: Latency, active: number, random: () => number): number {
  const load = 1 + (l.slope ?? 0) * Math.max(0, active - (l.knee ?? Infinity));
  const spread = l.spread ?? 0;
  return l.baseMs * load * (1 + spread * (2 * random() - 1));
}

/** The headers a rule of `style` announces budget `b` in, at epoch ms `now`. */
export function budgetHeaders(
  style: HeaderStyle,
  b: Budget,
  now: number,
): Record<string, string> {
  const reset = Math.max(0, Math.ceil(b.resetMs / 1000));
  const w = Math.max(1, Math.round(b.windowMs / 1000));
  switch (style) {
    case "draft7":
      return {
        "RateLimit": `limit=${b.limit}, remaining=${b.remaining}, reset=${reset}`,
        "RateLimit-Policy": `${b.limit};w=${w}`,
      };
    case "draft6":
      return {
        "RateLimit-Limit": String(b.limit),
        "RateLimit-Remaining": String(b.remaining),
        "RateLimit-Reset": String(reset),
        "RateLimit-Policy": `${b.limit};w=${w}`,
      };
    case "ietf":
      return {
        "RateLimit-Policy": `"default";q=${b.limit};w=${w}`,
        "RateLimit": `"default";r=${b.remaining};t=${reset}`,
      };
    case "github":
      return {
        "X-RateLimit-Limit": String(b.limit),
        "X-RateLimit-Remaining": String(b.remaining),
        "X-RateLimit-Used": String(b.limit - b.remaining),
        "X-RateLimit-Reset": String(Math.ceil((now + b.resetMs) / 1000)),
        "X-RateLimit-Resource": "core",
      };
  }
}

/** The `Retry-After` value a refusal sends for a wait of `waitMs` at epoch ms `now` (undefined: none). */
export function retryAfterHeader(
  ra: RetryAfter,
  waitMs: number,
  now: number,
): string | undefined {
  const seconds = Number.isFinite(waitMs) ? Math.max(1, Math.ceil(waitMs / 1000)) : 1;
  switch (ra.kind) {
    case "none":
      return undefined;
    case "constant":
      return String(ra.seconds);
    case "exact":
      return String(seconds);
    case "date":
      // An HTTP-date has whole seconds: the next whole second at or after the wait.
      return new Date(Math.ceil((now + (Number.isFinite(waitMs) ? waitMs : 1000)) / 1000) * 1000)
        .toUTCString();
  }
}

const PAGE = (i: string) =>
  `<!doctype html><html><head><title>page ${i}</title></head><body><p>page ${i}</p></body></html>\n`;

/**
 * Start a site on 127.0.0.1 (a free port).
 *
 * @param spec The site.
 * @param seed Seed of its latencies.
 * @returns The running site; `close()` stops it.
 */
export async function startSite(spec: SiteSpec, seed = 1): Promise<RunningSite> {
  const rules = spec.rules();
  const random = seeded(seed);
  const record: SiteRecord = {
    arrivals: [],
    refused: {},
    served: 0,
    lastFinish: 0,
    maxActive: 0,
  };
  let active = 0;
  const finished = (now: number) => {
    if (now > record.lastFinish) record.lastFinish = now;
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const now = epochNow();
    const url = req.url ?? "/";
    if (!url.startsWith("/p/")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    const refusing = rules.find((r) => r.limiter.wait(now) > 0);
    if (refusing !== undefined) {
      record.arrivals.push({ t: now, ok: false });
      record.refused[refusing.status] = (record.refused[refusing.status] ?? 0) + 1;
      const headers: Record<string, string> = { "content-type": "text/plain" };
      const ra = retryAfterHeader(refusing.retryAfter, refusing.limiter.wait(now), now);
      if (ra !== undefined) headers["Retry-After"] = ra;
      for (const r of rules) {
        if (r.headers !== undefined && (r.headers.on === "all" || r === refusing)) {
          Object.assign(headers, budgetHeaders(r.headers.style, r.limiter.budget(now), now));
        }
      }
      res.on("finish", () => finished(epochNow()));
      res.writeHead(refusing.status, headers).end(
        refusing.status === 429 ? "Too Many Requests\n" : "Service Unavailable\n",
      );
      return;
    }
    record.arrivals.push({ t: now, ok: true });
    record.served++;
    let queued = 0;
    for (const r of rules) queued = Math.max(queued, r.limiter.take(now));
    const headers: Record<string, string> = { "content-type": "text/html; charset=utf-8" };
    for (const r of rules) {
      if (r.headers?.on === "all") {
        Object.assign(headers, budgetHeaders(r.headers.style, r.limiter.budget(now), now));
      }
    }
    active++;
    if (active > record.maxActive) record.maxActive = active;
    const work = latencyMs(spec.latency, active, random);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      active--;
      const t = epochNow();
      for (const r of rules) r.limiter.release(t);
      finished(t);
    };
    // A concurrency slot is held until the response has been handed to the
    // socket (or the client went away).
    res.on("finish", release);
    res.on("close", release);
    setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(200, headers).end(PAGE(url.slice(3)));
    }, queued + work);
  };

  const server = createServer(handle);
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    record,
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
