/**
 * A zoo site (`zoo.ts`) over real loopback HTTP: the same model as the
 * virtual-time site (`zoo_site.ts`), decided at each arrival on a scheduler's
 * clock (the real one by default) and answered after the decision's latency,
 * for benchmarks that judge a client against real sockets. A `node:http`
 * server on 127.0.0.1 and a free port, so it runs under Node, Deno and Bun.
 *
 * These are the *servers'* limits: nothing here uses politely's throttling.
 *
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { listenOnLoopback } from "../demo/_loopback.ts";
import { asyncScheduler, type SchedulerLike, type Subscription, timer } from "rxjs";
import { createStatsRecorder, type SiteStats } from "../demo/_limiters.ts";
import { createZooLimiter, type ZooSiteSpec } from "./zoo.ts";

/** Options of {@linkcode startZooServer}. */
export interface ZooServerOptions {
  /**
   * The server's clock and timers: arrivals are decided at `scheduler.now()`,
   * answers wait `timer(latencyMs, scheduler)`.
   * @default asyncScheduler
   */
  readonly scheduler?: SchedulerLike;
  /**
   * Epoch ms at scheduler time 0, the base of `X-RateLimit-Reset` epochs and
   * of `Date` / `Retry-After` dates. By default the scheduler's offset from the
   * wall clock, read once at start (about 0 for `asyncScheduler`), so a client
   * on the real clock reads the resets as real times.
   * @default the wall clock's offset from the scheduler, read once (this option is that read's injectable default)
   */
  readonly epochMs?: number;
}

/** What a zoo server has seen, beyond the common site stats. */
export interface ZooServerStats extends SiteStats {
  /**
   * Refused arrivals that came while the last answer sent had announced a
   * remaining budget of 0 and the model's reset had not passed: requests
   * the client had been told to hold. Always 0 on a site that announces
   * nothing.
   */
  readonly refusedInHold: number;
}

/** A running zoo server. */
export interface ZooServer {
  /** `http://127.0.0.1:PORT` (no trailing slash). */
  readonly url: string;
  readonly port: number;
  readonly spec: ZooSiteSpec;
  /** What the server has seen so far (a copy). Arrival times are scheduler time. */
  stats(): ZooServerStats;
  /** Stops the server, drops its connections and pending answers; resolves when the port is free. Idempotent. */
  close(): Promise<void>;
}

function body(status: number): string {
  if (status === 200) return "<!doctype html><html><body><p>ok</p></body></html>\n";
  return status === 429 ? "Too Many Requests\n" : "Service Unavailable\n";
}

/**
 * Serves `spec` on 127.0.0.1 and a free port. Every path is one page of the
 * site and counts against its limit. A slot of a concurrency cap is freed
 * when the answer is finished or the connection closes, whichever is first.
 *
 * @param spec What the site hides and how it answers.
 * @param options Clock and epoch.
 * @returns The running server, once it listens.
 * @throws {RangeError} When the spec is out of range, naming the field (before anything listens).
 * @example Three at once against a burst of 2
 * ```ts
 * import { startZooServer } from "./zoo_server.ts";
 * const server = await startZooServer({
 *   name: "b",
 *   limiter: { shape: "token-bucket", ratePerSec: 1, burst: 2 },
 *   latencyMs: 10,
 * });
 * const statuses = await Promise.all(
 *   [1, 2, 3].map(() => fetch(`${server.url}/`).then(async (r) => (await r.text(), r.status))),
 * );
 * console.log(statuses.sort().join()); // "200,200,429"
 * await server.close();
 * ```
 */
export function startZooServer(
  spec: ZooSiteSpec,
  options: ZooServerOptions = {},
): Promise<ZooServer> {
  // injectable default: the real clock, read through asyncScheduler.
  const scheduler = options.scheduler ?? asyncScheduler;
  // Dates the server announces must be real dates.
  const epochMs = options.epochMs ?? Date.now() - scheduler.now(); // single injectable default (pass `epochMs`)
  const limiter = createZooLimiter(spec, { epochMs });
  const recorder = createStatsRecorder();
  const pending = new Set<Subscription>();
  let refusedInHold = 0;
  /** Scheduler time until which the last answer sent told the client to hold. */
  let holdUntil = -Infinity;

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const now = scheduler.now();
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    req.resume(); // a request body is never read; drain it so the connection can be reused
    recorder.enter();
    const d = limiter.arrive(now);
    recorder.arrive(now, path, d.status);
    if (d.status !== 200 && now < holdUntil) refusedInHold++;

    let latency: Subscription | undefined;
    let over = false;
    res.once("close", () => {
      if (latency) pending.delete(latency);
      latency?.unsubscribe();
      if (over) return;
      over = true;
      d.release?.();
      recorder.depart(!res.writableFinished);
    });

    const send = () => {
      const text = body(d.status);
      res.writeHead(d.status, {
        "content-type": d.status === 200 ? "text/html; charset=utf-8" : "text/plain; charset=utf-8",
        "content-length": String(Buffer.byteLength(text)),
        "cache-control": "no-store",
        ...d.headers,
      });
      // The client learns of a spent budget when this answer goes out.
      if (d.announced !== undefined) {
        holdUntil = d.announced.remaining === 0 ? now + d.announced.resetInMs : -Infinity;
      }
      res.end(req.method === "HEAD" ? undefined : text);
    };

    let fired = false;
    const sub = timer(d.latencyMs, scheduler).subscribe(() => {
      fired = true;
      if (latency) pending.delete(latency);
      send();
    });
    // A synchronous scheduler (queueScheduler, zero delay) has already answered.
    if (!fired) {
      latency = sub;
      pending.add(sub);
    }
  }

  const server: Server = createServer(handle);
  return listenOnLoopback(server, pending).then(({ port, close }) => ({
    url: `http://127.0.0.1:${port}`,
    port,
    spec,
    stats: () => ({ ...recorder.snapshot(), refusedInHold }),
    close,
  }));
}
