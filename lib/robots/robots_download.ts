/**
 * `obeyRobotsTxt`: a download function that obeys robots.txt (`robotsTxtObey`)
 * and applies its Crawl-delay to the host's scope (`throttlingRobotsTxtObey`,
 * SPEC "robots.txt Crawl-Delay").
 *
 * How it works, and why there: it wraps the download function, so it runs
 * inside a slot the gate has already granted.
 * - The first request of an origin whose robots.txt is not cached fetches it
 *   in its own slot: robots.txt counts against the host scope like any
 *   request. Before awaiting it, the host scope's concurrency drops to 1
 *   (synchronously, so the gate starts no other request of that host while
 *   the answer is unknown); the decision then sets concurrency 1 and the
 *   Crawl-delay, or puts the configured concurrency back.
 * - The slot was granted under the old delay, so the request then waits out
 *   the new delay after the robots.txt fetch started, downloads, and keeps
 *   its slot until the delay has passed since its own download started: with
 *   concurrency 1, the host's next request cannot go sooner.
 * - Later requests of the origin read the cached rules synchronously and cost
 *   nothing more than a lookup. A scope that was evicted and rebuilt from its
 *   configuration gets the decision again (decisions are remembered per scope
 *   manager, weakly).
 * - A disallowed URL is not downloaded: the download rejects with
 *   {@link RobotsTxtDisallowedError}, which the gate turns into an error
 *   outcome. Its slot is still counted (it was granted before the rules could
 *   be read), so it costs the scope one delay; disallowed URLs are best
 *   dropped upstream once known.
 * - A request for `/robots.txt` itself is downloaded as is.
 *
 * @module
 */
import { from, Observable, type ObservableInput, type Subscription, take, timer } from "rxjs";
import type { DownloadContext, DownloadFn } from "../download.ts";
import { hostScope, originScope } from "../scopes/domain_scopes.ts";
import { requestUrl } from "../request.ts";
import { LOCAL_FAILURE } from "../http/download_errors.ts";
import { MAX_TIMER_MS } from "../util/_timer.ts";
import { own } from "../settings/_own.ts";
import {
  crawlDelayDecision,
  type CrawlDelayScopeConfig,
  createRobotsTxtCache,
  isRobotsTxtPath,
  type RobotsFetch,
  type RobotsRules,
  type RobotsSource,
  type RobotsTxtCache,
} from "./robots_txt.ts";
import { scopeKind } from "../settings/settings.ts";
import type { Throttler } from "../throttler/throttler.ts";

/** Robots.txt restricts and restores a scope for a while: an adaptive slow start goes on. */
const TEMPORARY = { temporary: true } as const;

/** A URL that robots.txt does not let us fetch; comes out as an error outcome. */
export class RobotsTxtDisallowedError extends Error {
  override readonly name: string = "RobotsTxtDisallowedError";
  /** The URL that was not fetched. */
  readonly url: string;
  /** The robots.txt that decided. */
  readonly robotsUrl: string;
  /**
   * `"parsed"`: a rule disallows the URL; `"unreachable"`: robots.txt could
   * not be fetched (5xx, network error, timeout), so everything is disallowed
   * for a short while (RFC 9309 section 2.3.1.4).
   */
  readonly source: RobotsSource;
  /** The robots.txt response's status, when there was one. */
  readonly status: number | undefined;

  /**
   * True for an unreachable robots.txt: the URL was never sent and may be
   * sent once robots.txt answers, so it is no final answer about the URL.
   */
  get [LOCAL_FAILURE](): boolean {
    return this.source === "unreachable";
  }

  /**
   * @param url The URL that was not fetched.
   * @param rules The rules that disallow it.
   * @example
   * ```ts
   * import { RobotsTxtDisallowedError } from "./robots_download.ts";
   * const e = new RobotsTxtDisallowedError("https://a.example/private", {
   *   url: "https://a.example/robots.txt", source: "parsed", status: 200, error: undefined,
   * });
   * console.assert(e.url === "https://a.example/private" && e.source === "parsed");
   * ```
   */
  constructor(
    url: string,
    rules: Pick<RobotsRules, "url" | "source" | "status" | "error">,
  ) {
    super(
      rules.source === "unreachable"
        ? `Cannot fetch ${url} as its robots.txt is unreachable (${
          rules.status === undefined ? "no response" : `status ${rules.status}`
        }), so every URL of the origin is disallowed for now: ${rules.url}`
        : `Cannot fetch ${url} as robots.txt disallows it: ${rules.url}`,
      rules.error === undefined ? undefined : { cause: rules.error },
    );
    this.url = url;
    this.robotsUrl = rules.url;
    this.source = rules.source;
    this.status = rules.status;
  }
}

/** Options of {@link obeyRobotsTxt}. */
export interface ObeyRobotsTxtOptions {
  /**
   * The robots.txt cache (share one between pipelines to fetch each file once).
   * @default a `createRobotsTxtCache` with `fetch`, the settings' `userAgent` and
   *   `downloadTimeoutMs`, and the throttler's scheduler
   */
  readonly robots?: RobotsTxtCache;
  /**
   * Fetches robots.txt when `robots` is not given.
   * @default the global `fetch`, sending the settings' `userAgent`
   */
  readonly fetch?: RobotsFetch;
  /**
   * When robots.txt is unreachable (5xx, network error, time-out), how long
   * the site's URLs wait (the scope held) before robots.txt is asked again;
   * also how long the cache keeps that answer when it is made here.
   * @default the settings' `robotsTxtRetryMs` (60_000)
   */
  readonly unreachableRetryMs?: number;
  /**
   * How many more times robots.txt is asked before the URL gives up, as a
   * {@link RobotsTxtDisallowedError} with `source: "unreachable"`: an error
   * of this side, never sent, so a crawl with a job directory keeps the URL
   * for a resume (see `LOCAL_FAILURE`).
   * @default the settings' `robotsTxtRetries` (4: robots.txt asked 5 times over 4 minutes)
   */
  readonly unreachableRetries?: number;
}

/**
 * Wrap a download function so that it obeys robots.txt: disallowed URLs are
 * not fetched (error outcome {@link RobotsTxtDisallowedError}), and a valid
 * Crawl-delay for our user agent sets the host scope to concurrency 1 and that
 * delay (capped at `robotsTxtMaxDelayMs`), unless the scope is configured
 * (a `scopes` entry with `concurrency` or `delayMs`): a more aggressive one is
 * kept with a `warning` event, unless it sets `ignoreRobotsTxt`. Every
 * decision is a `robots` event. See the module doc for how it is done.
 *
 * With `robotsTxtObey` false this returns `download` itself; with
 * `throttlingRobotsTxtObey` false, rules are obeyed and Crawl-delay ignored.
 *
 * @param throttler The throttler of the gate this download runs behind.
 * @param download The download function to wrap.
 * @param options The robots.txt cache, or the fetch to build one with.
 * @returns A download function for `throttleByScope`.
 * @example
 * ```ts
 * import { createThrottler, throttleByScope } from "../../mod.ts";
 * import { obeyRobotsTxt } from "./robots_download.ts";
 * const throttler = createThrottler({ robotsTxtObey: true });
 * const download = obeyRobotsTxt(throttler, (url: string) => fetch(url));
 * console.assert(typeof download === "function" && typeof throttleByScope === "function");
 * ```
 */
export function obeyRobotsTxt<R, T>(
  throttler: Throttler<R>,
  download: DownloadFn<R, T>,
  options: ObeyRobotsTxtOptions = {},
): DownloadFn<R, T> {
  const settings = throttler.settings;
  if (!settings.robotsTxtObey) return download;
  const throttle = settings.throttlingRobotsTxtObey;
  const scheduler = throttler.scheduler;
  const unreachableRetryMs = options.unreachableRetryMs ?? settings.robotsTxtRetryMs;
  const unreachableRetries = options.unreachableRetries ?? settings.robotsTxtRetries;
  if (!(unreachableRetryMs > 0) || unreachableRetryMs > MAX_TIMER_MS) {
    throw new RangeError(
      `Cannot obey robots.txt as 'unreachableRetryMs' must be > 0 and <= ${MAX_TIMER_MS}: current value is ${unreachableRetryMs}`,
    );
  }
  if (!Number.isSafeInteger(unreachableRetries) || unreachableRetries < 0) {
    throw new RangeError(
      `Cannot obey robots.txt as 'unreachableRetries' must be an integer >= 0: current value is ${unreachableRetries}`,
    );
  }
  const robots = options.robots ?? createRobotsTxtCache({
    fetch: options.fetch ?? userAgentFetch(settings.userAgent),
    userAgent: settings.userAgent,
    scheduler,
    timeoutMs: settings.downloadTimeoutMs,
    // An unreachable answer expires when it is time to ask again.
    errorTtlMs: unreachableRetryMs,
  });
  /** Per scope manager (so a rebuilt scope decides again), the origins decided. */
  const decided = new WeakMap<object, Set<string>>();
  /** Concurrency to put back when the decision keeps the configuration. */
  const restricted = new Map<string, number>();
  /**
   * Origins whose robots.txt stayed unreachable through every retry: their
   * URLs give up at once (unsent) until robots.txt answers again, rather than
   * each waiting out the retries.
   */
  const exhausted = new Set<string>();

  const isDecided = (scope: string, origin: string): boolean =>
    decided.get(throttler.manager(scope))?.has(origin) === true;

  const scopeConfig = (scope: string): CrawlDelayScopeConfig => {
    const config = throttler.scopeConfig(scope);
    let configured = own(settings.scopes, scope);
    const colon = scope.lastIndexOf(":");
    if (configured === undefined && colon > 0) {
      configured = own(settings.scopes, scope.slice(0, colon));
    }
    return {
      concurrency: config.concurrency,
      delayMs: config.delayMs,
      explicit: configured?.concurrency !== undefined || configured?.delayMs !== undefined,
      ignoreRobotsTxt: config.ignoreRobotsTxt,
    };
  };

  /** While robots.txt is unknown, a scope that may get a Crawl-delay sends one at a time. */
  const restrict = (scope: string): void => {
    if (!throttle || restricted.has(scope)) return;
    const c = scopeConfig(scope);
    if (c.explicit || c.ignoreRobotsTxt) return;
    const concurrency = throttler.state(scope)?.concurrency ?? c.concurrency;
    if (concurrency <= 1) return;
    restricted.set(scope, concurrency);
    throttler.setConcurrency(scope, 1, TEMPORARY);
  };

  /** Apply the Crawl-delay decision; returns the delay now in force for the request's scopes. */
  const decide = (scope: string, origin: string, rules: RobotsRules): number => {
    const manager = throttler.manager(scope);
    let origins = decided.get(manager);
    const before = restricted.get(scope);
    restricted.delete(scope);
    if (origins?.has(origin) === true) return 0;
    if (origins === undefined) decided.set(manager, origins = new Set());
    origins.add(origin);
    const at = scheduler.now();
    if (!throttle) {
      throttler.emit({
        type: "robots",
        at,
        scope,
        crawlDelayMs: rules.crawlDelayMs,
        decision: "ignored (throttlingRobotsTxtObey is false)",
      });
      return 0;
    }
    const d = crawlDelayDecision(
      scopeConfig(scope),
      rules.crawlDelayMs,
      settings.robotsTxtMaxDelayMs,
    );
    if (d.kind === "apply") {
      throttler.setConcurrency(scope, 1);
      // A Crawl-delay is the least the site asks for: jitter must not undercut it.
      throttler.setBaseDelay(scope, d.apply.delayMs, { floor: true });
      throttler.emit({
        type: "robots",
        at,
        scope,
        crawlDelayMs: rules.crawlDelayMs,
        decision: `apply: concurrency 1, delay ${d.apply.delayMs} ms`,
      });
      return d.apply.delayMs;
    }
    if (before !== undefined) throttler.setConcurrency(scope, before, TEMPORARY);
    if (d.warning !== undefined) {
      throttler.warnOnce(`robots:${scope}`, "robots-crawl-delay", `${scope}: ${d.warning}`, scope);
    }
    throttler.emit({
      type: "robots",
      at,
      scope,
      crawlDelayMs: rules.crawlDelayMs,
      decision: d.warning !== undefined ? "keep: configured scope (warned)" : "keep",
    });
    return 0;
  };

  const slow = (
    request: R,
    context: DownloadContext,
    url: string,
    origin: string,
    targets: readonly string[],
  ): Observable<T> =>
    new Observable<T>((subscriber) => {
      let fetchedHere = robots.peek(url) === undefined;
      for (const scope of targets) if (!isDecided(scope, origin)) restrict(scope);
      let startedAt = scheduler.now();
      let inner: Subscription | undefined;
      let retrying = false;
      let tries = 0;
      let lastUnreachableAt: number | undefined;
      const onRules = (rules: RobotsRules): void => {
        if (rules.source !== "unreachable") exhausted.delete(origin);
        else if (tries >= unreachableRetries) exhausted.add(origin);
        if (rules.source === "unreachable" && !exhausted.has(origin)) {
          // RFC 9309 2.3.1.4: an unreachable robots.txt disallows the whole
          // site *for now*. The URL waits (in this one slot; the site's other
          // requests wait at the gate, the scope held) and robots.txt is
          // asked again once that answer expires, instead of the URL ending
          // as disallowed after one 503.
          if (subscriber.closed) return unrestrict();
          const fresh = rules.fetchedAt !== lastUnreachableAt;
          if (fresh) {
            tries++;
            lastUnreachableAt = rules.fetchedAt;
            if (rules.fetchedAt >= startedAt) {
              for (const scope of targets) {
                throttler.recordBackoff(
                  scope,
                  {
                    holdMs: unreachableRetryMs,
                    cause: `robots.txt unreachable (${
                      rules.status === undefined ? "no response" : `status ${rules.status}`
                    })`,
                  },
                  "robots",
                );
              }
            }
          }
          retrying = true;
          inner = timer(unreachableRetryMs, scheduler).subscribe(() => {
            retrying = false;
            fetchedHere = robots.peek(url) === undefined;
            startedAt = scheduler.now();
            robots.get(url).then(onRules, onError);
          });
          return;
        }
        // Decide even when the pipeline is gone: the scope was restricted.
        let delayMs = 0;
        for (const scope of targets) delayMs = Math.max(delayMs, decide(scope, origin, rules));
        if (subscriber.closed) return;
        if (!rules.isAllowed(url)) {
          subscriber.error(new RobotsTxtDisallowedError(url, rules));
          return;
        }
        const wait = fetchedHere ? Math.max(0, startedAt + delayMs - scheduler.now()) : 0;
        inner = timer(wait, scheduler).subscribe(() => {
          const sentAt = scheduler.now();
          let input: Observable<T>;
          try {
            input = from(download(request, context) as ObservableInput<T>).pipe(take(1));
          } catch (error) {
            subscriber.error(error);
            return;
          }
          let got = false;
          inner = input.subscribe({
            next: (value) => {
              got = true;
              // Keep the slot until the delay has passed since this download started.
              const hold = Math.max(0, sentAt + delayMs - scheduler.now());
              inner = timer(hold, scheduler).subscribe(() => {
                subscriber.next(value);
                subscriber.complete();
              });
            },
            error: (e: unknown) => subscriber.error(e),
            complete: () => {
              if (!got) subscriber.complete(); // empty: the gate reports it
            },
          });
        });
      };
      /** Undecided: the scopes get their concurrency back. */
      const unrestrict = (): void => {
        for (const scope of targets) {
          const before = restricted.get(scope);
          restricted.delete(scope);
          if (before !== undefined) throttler.setConcurrency(scope, before, TEMPORARY);
        }
      };
      const onError = (error: unknown): void => {
        unrestrict();
        if (!subscriber.closed) subscriber.error(error);
      };
      robots.get(url).then(onRules, onError);
      return () => {
        inner?.unsubscribe();
        // Stopped while waiting to ask again: nothing was decided.
        if (retrying) unrestrict();
      };
    });

  return (request, context) => {
    const url = requestUrl(request);
    if (url === undefined) return download(request, context);
    let origin: string;
    let host: string;
    try {
      origin = originScope(url);
      host = hostScope(url);
    } catch {
      return download(request, context); // its own error for a URL it cannot use
    }
    if (isRobotsTxtPath(url)) return download(request, context);
    const targets = throttleTargets(host, context.scopes);
    const rules = robots.peek(url);
    // An unreachable answer still cached goes the slow way, which waits and asks again.
    if (rules !== undefined && rules.source !== "unreachable") {
      let all = true;
      for (const scope of targets) if (!isDecided(scope, origin)) all = false;
      if (all) {
        if (!rules.isAllowed(url)) return Promise.reject(new RobotsTxtDisallowedError(url, rules));
        return download(request, context);
      }
    }
    return slow(request, context, url, origin, targets);
  };
}

/** The scopes a Crawl-delay applies to: the host's, else the request's domain scopes. */
function throttleTargets(host: string, scopes: readonly string[]): readonly string[] {
  if (scopes.includes(host)) return [host];
  return scopes.filter((s) => scopeKind(s) === "domain");
}

function userAgentFetch(userAgent: string): RobotsFetch {
  return (url, init) =>
    globalThis.fetch(url, {
      signal: init.signal,
      redirect: init.redirect,
      headers: { "user-agent": userAgent },
    });
}
