/**
 * `backoffOn` in virtual time: the gate and backoff composed, downloads as
 * Observables on a `TestScheduler`, every send recorded at its exact frame.
 */
import { describe, expect, it } from "vitest";
import { from, map, mergeMap, Observable, of, throwError, timer, VirtualTimeScheduler } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { DownloadFailedError } from "../lib/http/download_errors.ts";
import type { ThrottleEvent } from "../lib/events.ts";
import type { Outcome } from "../lib/outcome.ts";
import type { RequestObject } from "../lib/request.ts";
import { type ResponseBackoff, updateScopeBackoff } from "../lib/http/response_backoff.ts";
import type { ScopeState } from "../lib/managers/scope_manager_protocol.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { createThrottler, type Throttler } from "../lib/throttler/throttler.ts";
import { backoffOn, type BackoffOnOptions } from "../operators/backoff_on.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";

interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly latencyMs?: number;
}
interface Reply {
  readonly status: number;
  readonly headers: Record<string, string>;
}
interface Send {
  readonly url: string;
  readonly at: number;
  readonly attempt: number;
}

/** The URL of a string or `{ url }` request. */
const urlOf = (r: string | RequestObject) => typeof r === "string" ? r : r.url;
const hostOf = (r: string | RequestObject) => new URL(urlOf(r)).host;

/**
 * A pipeline on a fresh TestScheduler. `answer(url, n, now)` decides each
 * reply (`n`: how many requests this host has seen before, from 0); replies
 * take 10 ms unless said otherwise.
 */
function pipeline<R extends string | RequestObject>(
  requests: readonly R[],
  answer: (url: string, n: number, now: number) => Answer,
  settings: ThrottlerSettingsInput = {},
  options: BackoffOnOptions<R, Reply> & { log?: (line: string) => void } = {},
) {
  const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
  scheduler.maxFrames = Number.POSITIVE_INFINITY;
  const throttler: Throttler<R> = createThrottler<R>(
    // backoffOn over the reference's exponential steps; adaptive scopes: test/zoo_crawl.test.ts.
    { jitter: 0, adaptive: false, ...settings, backoff: { jitter: 0, ...settings.backoff } },
    options.log === undefined ? { scheduler } : { scheduler, log: options.log },
  );
  const sends: Send[] = [];
  const seen = new Map<string, number>();
  const events: ThrottleEvent[] = [];
  throttler.events$.subscribe((e) => events.push(e));
  const outcomes: (Outcome<R, Reply> & { at: number })[] = [];
  let completedAt: number | undefined;
  const download = (request: R, context: { attempt: number }) =>
    new Observable<Reply>((subscriber) => {
      const url = urlOf(request);
      const host = hostOf(request);
      const n = seen.get(host) ?? 0;
      seen.set(host, n + 1);
      sends.push({ url, at: scheduler.now(), attempt: context.attempt });
      const a = answer(url, n, scheduler.now());
      return timer(a.latencyMs ?? 10, scheduler).subscribe(() => {
        subscriber.next({ status: a.status, headers: a.headers ?? {} });
        subscriber.complete();
      });
    });
  const { log: _log, ...backoffOptions } = options;
  from(requests).pipe(throttleByScope(throttler, download), backoffOn(throttler, backoffOptions))
    .subscribe({
      next: (o) => outcomes.push({ ...o, at: scheduler.now() }),
      complete: () => (completedAt = scheduler.now()),
    });
  return {
    scheduler,
    throttler,
    sends,
    events,
    outcomes,
    run: () => {
      scheduler.flush();
      return completedAt;
    },
  };
}

const urls = (host: string, n: number) =>
  Array.from({ length: n }, (_, i) => `http://${host}/${i}`);
const timesOf = (sends: readonly Send[], host: string) =>
  sends.filter((s) => new URL(s.url).host === host).map((s) => s.at);

describe("backoffOn()", () => {
  it("backoffOn() slows the scope that gets 429s while another scope on the same pipeline keeps its pace", () => {
    const requests = [...urls("a.test", 6), ...urls("b.test", 6)].sort((x, y) =>
      x.slice(-1).localeCompare(y.slice(-1))
    );
    const p = pipeline(
      requests,
      (url, n) => ({ status: url.includes("a.test") && n < 2 ? 429 : 200 }),
      { downloadDelayMs: 100, concurrentRequestsPerDomain: 1 },
      { retry: false },
    );
    expect(p.run()).toBeDefined();
    // b.test: one request every 100 ms, untouched.
    expect(timesOf(p.sends, "b.test")).toEqual([0, 100, 200, 300, 400, 500]);
    // a.test: 429 at 10 -> 1 s after it; 429 at 1020 -> 2 s; then 2 s apart (no recovery within a minute).
    expect(timesOf(p.sends, "a.test")).toEqual([0, 1_010, 3_020, 5_020, 7_020, 9_020]);
    expect(p.throttler.state("b.test")).toMatchObject({ delayMs: 100, backoffLevel: 0 });
    expect(p.throttler.state("a.test")).toMatchObject({ delayMs: 2_000, backoffLevel: 2 });
  });

  it("backoffOn() holds a scope exactly for Retry-After: nothing sent during the hold, the next right at its end", () => {
    const p = pipeline(
      urls("a.test", 4),
      (_url, n) => n === 0 ? { status: 429, headers: { "retry-after": "5" } } : { status: 200 },
      { concurrentRequestsPerDomain: 1 },
      { retry: false },
    );
    p.run();
    // 429 at 10 -> hold until 5010; the step to 1 s spaces the rest.
    expect(timesOf(p.sends, "a.test")).toEqual([0, 5_010, 6_010, 7_010]);
    expect(p.events.filter((e) => e.type === "hold")).toEqual([
      { type: "hold", at: 10, scope: "a.test", until: 5_010, source: "retry-after" },
    ]);
  });

  it("backoffOn() applies the backoff before the scope's next request at concurrency 8 (first reply 429)", () => {
    const p = pipeline(
      urls("a.test", 20),
      (_url, n) => ({ status: n === 0 ? 429 : 200, latencyMs: 50 }),
      {},
      { retry: false },
    );
    p.run();
    const times = timesOf(p.sends, "a.test");
    expect(times.slice(0, 8)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    // The 429 arrives at 50 with seven requests still in flight: the next send waits a full 1 s.
    expect(times[8]).toBe(1_050);
    expect(times.filter((t) => t > 0 && t < 1_050)).toEqual([]);
    expect(times.slice(9, 12)).toEqual([2_050, 3_050, 4_050]);
  });

  it("backoffOn() sends failed attempts back through the gate, each throttled and seen by backoff; the last comes out exhausted", () => {
    const p = pipeline(
      urls("a.test", 2),
      () => ({ status: 429 }),
      { concurrentRequestsPerDomain: 1 },
      // Scrapy's rule: a refusal counts as any failure (refusedTimes 0).
      { retry: { times: 2, refusedTimes: 0 } },
    );
    expect(p.run()).toBe(31_060);
    // Six attempts, each after the delay its predecessor's 429 set: 1, 2, 4, 8, 16 s.
    expect(p.sends.map((s) => [s.url, s.at, s.attempt])).toEqual([
      ["http://a.test/0", 0, 1],
      ["http://a.test/1", 1_010, 1],
      ["http://a.test/0", 3_020, 2],
      ["http://a.test/1", 7_030, 2],
      ["http://a.test/0", 15_040, 3],
      ["http://a.test/1", 31_050, 3],
    ]);
    expect(p.events.filter((e) => e.type === "backoff").map((e) => e.type === "backoff" && e.level))
      .toEqual([
        1,
        2,
        3,
        4,
        5,
        6,
      ]);
    expect(p.events.filter((e) => e.type === "retry").map((e) => e.type === "retry" && e.attempt))
      .toEqual([
        2,
        2,
        3,
        3,
      ]);
    // Nothing dropped: each request once, exhausted, with its attempt count.
    expect(p.outcomes.map((o) => [o.request, o.kind, o.attempt, o.exhausted])).toEqual([
      ["http://a.test/0", "response", 3, true],
      ["http://a.test/1", "response", 3, true],
    ]);
  });

  it("throttleByScope() firstAttempt: a request others tried starts at their count, so backoffOn retries only what is left", () => {
    const scheduler = new VirtualTimeScheduler();
    const throttler = createThrottler<string>(
      { jitter: 0, adaptive: false, backoff: { jitter: 0, windowMs: 0 } },
      { scheduler },
    );
    // 1 + the attempts other workers made (a shared queue's takes); NaN is no count.
    const first: Record<string, number> = {
      "http://a.test/fresh": 1,
      "http://b.test/twice": 3,
      "http://c.test/over": 7,
      "http://d.test/bad": Number.NaN,
    };
    const sent: [string, number][] = [];
    const outcomes: [string, number, boolean | undefined][] = [];
    from(Object.keys(first)).pipe(
      throttleByScope(
        throttler,
        (url: string, { attempt }) => {
          sent.push([url, attempt]);
          return timer(10, scheduler).pipe(map(() => ({ status: 503, headers: {} })));
        },
        { firstAttempt: (r) => first[r]! },
      ),
      backoffOn(throttler, { retry: { times: 2, refusedTimes: 0 } }),
    ).subscribe((o) => outcomes.push([o.request, o.attempt, o.exhausted]));
    scheduler.flush();
    expect(sent.filter(([u]) => u.includes("b.test"))).toEqual([["http://b.test/twice", 3]]);
    expect(outcomes.sort()).toEqual([
      ["http://a.test/fresh", 3, true],
      ["http://b.test/twice", 3, true],
      ["http://c.test/over", 7, true],
      ["http://d.test/bad", 3, true],
    ]);
    expect(sent.filter(([u]) => u.includes("a.test")).map(([, a]) => a)).toEqual([1, 2, 3]);
  });

  it("backoffOn() warns once when an operator before it rebuilt the outcomes, so retries cannot happen", () => {
    const scheduler = new VirtualTimeScheduler();
    const throttler = createThrottler<string>({}, { scheduler });
    const events: ThrottleEvent[] = [];
    throttler.events$.subscribe((e) => events.push(e));
    const outcomes: Outcome<string, { status: number }>[] = [];
    from(["http://a.test/0", "http://a.test/1"]).pipe(
      throttleByScope(throttler, () => of({ status: 429 })),
      // A new object of the same fields: the gate's link is not among them.
      map((o): Outcome<string, { status: number }> =>
        o.kind === "response"
          ? {
            kind: "response",
            request: o.request,
            response: o.response,
            scopes: o.scopes,
            attempt: o.attempt,
            sentAt: o.sentAt,
            latencyMs: o.latencyMs,
          }
          : o
      ),
      backoffOn(throttler, { retry: { times: 2 } }),
    ).subscribe((o) => outcomes.push(o));
    scheduler.flush();
    const warnings = events.filter((e) => e.type === "warning");
    expect(warnings.map((e) => e.type === "warning" && e.code)).toEqual(["backoff-cannot-retry"]);
    expect(outcomes.map((o) => [o.attempt, o.exhausted])).toEqual([[1, true], [1, true]]);
    // Spread, the outcome keeps the link: retried, no warning.
    const spread: ThrottleEvent[] = [];
    const t2 = createThrottler<string>({}, { scheduler });
    t2.events$.subscribe((e) => spread.push(e));
    from(["http://b.test/0"]).pipe(
      throttleByScope(t2, () => of({ status: 429 })),
      map((o) => ({ ...o, seen: true })),
      backoffOn(t2, { retry: { times: 1, refusedTimes: 0 } }),
    ).subscribe();
    scheduler.flush();
    expect(spread.filter((e) => e.type === "warning")).toEqual([]);
    expect(spread.filter((e) => e.type === "retry")).toHaveLength(1);
  });

  it("backoffOn() retries a status the user chose without backing off for it, and stops at the first success", () => {
    const p = pipeline(
      urls("a.test", 1),
      (_url, n) => ({ status: n < 2 ? 500 : 200 }),
      { concurrentRequestsPerDomain: 1 },
      { retry: { times: 5, httpCodes: [500] } },
    );
    p.run();
    expect(p.sends.map((s) => [s.at, s.attempt])).toEqual([[0, 1], [10, 2], [20, 3]]);
    expect(p.events.filter((e) => e.type === "backoff")).toEqual([]);
    expect(p.outcomes.map((o) => [o.attempt, o.exhausted])).toEqual([[3, undefined]]);
  });

  it("backoffOn() never lets a throttlingDontTrack request trigger backoff (it is still retried)", () => {
    const requests: RequestObject[] = urls("a.test", 3).map((url) => ({
      url,
      meta: { throttlingDontTrack: true },
    }));
    const p = pipeline(requests, () => ({ status: 429 }), { concurrentRequestsPerDomain: 1 }, {
      retry: { times: 1, refusedTimes: 0 },
    });
    p.run();
    expect(p.events.filter((e) => e.type === "backoff")).toEqual([]);
    expect(p.throttler.state("a.test")).toMatchObject({
      delayMs: 0,
      backoffLevel: 0,
      holdUntil: 0,
    });
    expect(p.sends).toHaveLength(6);
    expect(p.outcomes.every((o) => o.exhausted === true && o.attempt === 2)).toBe(true);
  });

  it("backoffOn() uses each scope's own backoff.httpCodes: a scope only backs off for its own codes", () => {
    const requests: RequestObject[] = [
      { url: "http://a.test/429", meta: { throttlingScopes: ["a.test", "api"] } },
      { url: "http://b.test/429" },
      { url: "http://a.test/503" },
    ];
    const p = pipeline(
      requests,
      (url) => ({ status: Number(url.slice(-3)) }),
      { scopes: { "a.test": { backoff: { httpCodes: [503] } } } },
      { retry: false },
    );
    p.run();
    const backoffs = p.events.flatMap((e) => e.type === "backoff" ? [[e.scope, e.cause]] : []);
    expect(backoffs).toEqual([
      ["api", "status 429"],
      ["b.test", "status 429"],
      ["a.test", "status 503"],
    ]);
  });

  it("backoffOn() getResponseBackoff: an API's upstream status backs off the target scope (the reference's example)", () => {
    const requests: RequestObject[] = [
      {
        url: "http://api.test/?url=http://target.test/1",
        meta: { throttlingScopes: ["api.test", "target.test"] },
      },
    ];
    const p = pipeline(
      requests,
      () => ({ status: 200, headers: { "x-upstream-status-code": "429" } }),
      {},
      {
        retry: false,
        getResponseBackoff: (outcome, base): ResponseBackoff => {
          if (outcome.kind !== "response" || outcome.response.status !== 200) return base(outcome);
          const upstream = Number(outcome.response.headers["x-upstream-status-code"] ?? "200");
          const read = base({ ...outcome, response: { ...outcome.response, status: upstream } });
          // The API itself is fine: only the target backs off.
          return updateScopeBackoff(read, "api.test", { trigger: false });
        },
      },
    );
    p.run();
    expect(p.throttler.state("target.test")).toMatchObject({ delayMs: 1_000, backoffLevel: 1 });
    expect(p.throttler.state("api.test")).toMatchObject({ delayMs: 0, backoffLevel: 0 });
  });

  it("backoffOn() getResponseBackoff with updateScopeBackoff reconciles an estimated cost with the actual one", () => {
    const requests: RequestObject[] = [
      { url: "http://api.test/a", meta: { throttlingScopes: { "api.test": 1, cost: 10 } } },
    ];
    const p = pipeline(
      requests,
      () => ({ status: 200, headers: { "x-actual-cost": "25" } }),
      { scopes: { cost: { quota: 100 } } },
      {
        retry: false,
        getResponseBackoff: (outcome, base) => {
          const read = base(outcome);
          if (outcome.kind !== "response") return read;
          const actual = outcome.response.headers["x-actual-cost"];
          return actual === undefined
            ? read
            : updateScopeBackoff(read, "cost", { consumed: Number(actual) - 10 });
        },
      },
    );
    p.run();
    expect(p.throttler.state("cost")?.quota).toMatchObject({ limit: 100, used: 25 });
  });

  it("backoffOn() names a failed download's code in the cause of its backoff and its retry", () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.maxFrames = Number.POSITIVE_INFINITY;
    const throttler = createThrottler<string>({ jitter: 0, adaptive: false }, { scheduler });
    const events: ThrottleEvent[] = [];
    throttler.events$.subscribe((e) => events.push(e));
    const refused = () =>
      timer(10, scheduler).pipe(
        mergeMap(() =>
          throwError(() => new DownloadFailedError("refused", { code: "ECONNREFUSED" }))
        ),
      );
    const plain = () => timer(10, scheduler).pipe(mergeMap(() => throwError(() => new Error("x"))));
    from(["http://a.test/"]).pipe(
      throttleByScope(throttler, refused),
      backoffOn(throttler, { retry: { times: 1 } }),
    ).subscribe();
    from(["http://b.test/"]).pipe(
      throttleByScope(throttler, plain),
      backoffOn(throttler, { retry: { times: 1, exceptions: [Error] } }),
    ).subscribe();
    scheduler.flush();
    const causes = (type: "backoff" | "retry", scope: string) =>
      events.flatMap((e) =>
        e.type === "backoff" && type === "backoff" && e.scope === scope
          ? [e.cause]
          : e.type === "retry" && type === "retry" && e.scopes.includes(scope)
          ? [e.cause]
          : []
      );
    expect(causes("backoff", "a.test")).toEqual([
      "DownloadFailedError ECONNREFUSED",
      "DownloadFailedError ECONNREFUSED",
    ]);
    expect(causes("retry", "a.test")).toEqual(["DownloadFailedError ECONNREFUSED"]);
    expect(causes("retry", "b.test")).toEqual(["Error"]);
  });

  it("backoffOn() on an adaptive scope: a lone 502 or 504 among admitted answers is retried and slows nothing; a lone 503 or 429 slows the scope", () => {
    /** The scope's delay and concurrency after 40 requests, the 20th answered `status`. */
    const after = (status: number) => {
      const p = pipeline(
        urls("a.test", 40),
        (_url, n) => ({ status: n === 20 ? status : 200 }),
        { adaptive: true, concurrentRequestsPerDomain: 4 },
      );
      p.run();
      expect(p.outcomes.filter((o) => o.kind === "response" && o.response.status === 200))
        .toHaveLength(40);
      const s = p.throttler.state("a.test")!;
      const count = (type: string) => p.events.filter((e) => e.type === type).length;
      return {
        delayMs: s.delayMs,
        concurrency: s.concurrency,
        backoffs: count("backoff"),
        noise: p.events.filter((e) => e.type === "backoff" && e.noise === true).length,
        retries: count("retry"),
      };
    };
    const untouched = after(200);
    // [status, slowed]; a trigger taken for noise says so in its backoff event.
    const table: [number, boolean][] = [[502, false], [504, false], [503, true], [429, true]];
    for (const [status, slowed] of table) {
      const s = after(status);
      const was = s.delayMs > untouched.delayMs || s.concurrency < untouched.concurrency;
      expect({ status, slowed: was, backoffs: s.backoffs, noise: s.noise, retries: s.retries })
        .toEqual({ status, slowed, backoffs: 1, noise: slowed ? 0 : 1, retries: 1 });
    }
  });

  it("backoffOn() on an adaptive scope: a lone failed download slows nothing, four of ten do", () => {
    const run = (failing: (n: number) => boolean) => {
      const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
      scheduler.maxFrames = Number.POSITIVE_INFINITY;
      const throttler = createThrottler<string>(
        { jitter: 0, adaptive: true, concurrentRequestsPerDomain: 1 },
        { scheduler },
      );
      let n = 0;
      const download = () => {
        const fail = failing(n++);
        return timer(10, scheduler).pipe(
          mergeMap(() =>
            fail
              ? throwError(() => new DownloadFailedError("reset", { code: "ECONNRESET" }))
              : of({ status: 200 })
          ),
        );
      };
      from(urls("a.test", 30)).pipe(
        throttleByScope(throttler, download),
        backoffOn(throttler, { retry: { times: 1 } }),
      ).subscribe();
      scheduler.flush();
      return throttler.state("a.test")!.delayMs;
    };
    expect(run(() => false)).toBe(0);
    expect(run((n) => n === 15)).toBe(0);
    expect(run((n) => n >= 15 && n < 19)).toBeGreaterThan(0);
  });

  it("backoffOn() retry events name a failure in the words of throttleByScope()'s request-done", () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.maxFrames = Number.POSITIVE_INFINITY;
    const throttler = createThrottler<string>({ jitter: 0, adaptive: false }, { scheduler });
    const events: ThrottleEvent[] = [];
    throttler.events$.subscribe((e) => events.push(e));
    const failing = (error: () => unknown) => () =>
      timer(10, scheduler).pipe(mergeMap(() => throwError(error)));
    // What fetch throws under Node, not yet classified: the gate reads it as backoffOn does.
    const refused = () =>
      new TypeError("fetch failed", {
        cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), {
          code: "ECONNREFUSED",
        }),
      });
    from(["http://a.test/"]).pipe(
      throttleByScope(throttler, failing(refused)),
      backoffOn(throttler, { retry: { times: 1 } }),
    ).subscribe();
    from(["http://b.test/"]).pipe(
      throttleByScope(throttler, failing(() => new RangeError("bad"))),
      backoffOn(throttler, { retry: { times: 1, exceptions: [RangeError] } }),
    ).subscribe();
    scheduler.flush();
    const words = (scope: string) => ({
      done: events.flatMap((e) =>
        e.type === "request-done" && e.scopes.includes(scope) ? [e.error] : []
      ),
      retry: events.flatMap((e) => e.type === "retry" && e.scopes.includes(scope) ? [e.cause] : []),
    });
    const ab = "DownloadFailedError ECONNREFUSED";
    expect(words("a.test")).toEqual({ done: [ab, ab], retry: [ab] });
    expect(words("b.test")).toEqual({ done: ["RangeError", "RangeError"], retry: ["RangeError"] });
  });

  it("backoffOn() retries a refusal (429, 503) up to times + refusedTimes, any other failure up to times", () => {
    // [status, refusedTimes, attempts made]
    const table: [number, number | undefined, number][] = [
      [429, undefined, 13], // the default: 2 + 10 retries
      [503, undefined, 13],
      [429, 3, 6],
      [503, 0, 3], // Scrapy's rule
      [500, undefined, 3],
      [502, 10, 3],
    ];
    for (const [status, refusedTimes, attempts] of table) {
      const p = pipeline(
        urls("a.test", 1),
        () => ({ status }),
        { concurrentRequestsPerDomain: 1, adaptive: false, backoff: { windowMs: 0 } },
        { retry: refusedTimes === undefined ? { times: 2 } : { times: 2, refusedTimes } },
      );
      p.run();
      expect({ status, refusedTimes, attempts: p.sends.length }).toEqual({
        status,
        refusedTimes,
        attempts,
      });
      expect(p.outcomes.map((o) => [o.attempt, o.exhausted])).toEqual([[attempts, true]]);
    }
  });

  it("backoffOn() retries a 403 a rate limit answered (Retry-After, or a spent budget) as a refusal after its hold, and not a plain 403", () => {
    // [headers of every 403, attempts made, the first retry's send time]
    const table: [Record<string, string>, number, number | undefined][] = [
      [{ "retry-after": "2" }, 13, 2_010], // GitHub's secondary limit; 2 + 10 retries
      [{ "x-ratelimit-remaining": "0", "x-ratelimit-reset": "3" }, 13, 3_010], // its primary one
      [{}, 1, undefined], // forbidden: an outcome, not a refusal
      [{ "x-ratelimit-remaining": "7", "x-ratelimit-reset": "3" }, 1, undefined],
    ];
    for (const [headers, attempts, retriedAt] of table) {
      const p = pipeline(
        urls("a.test", 1),
        () => ({ status: 403, headers }),
        { concurrentRequestsPerDomain: 1, backoff: { windowMs: 0 } },
        { retry: { times: 2 } },
      );
      p.run();
      const what = JSON.stringify(headers);
      expect(p.sends.length, what).toBe(attempts);
      expect(p.sends[1]?.at, what).toBe(retriedAt);
      expect(p.outcomes.map((o) => [o.attempt, o.exhausted === true]), what).toEqual([
        [attempts, attempts > 1],
      ]);
    }
  });

  it("backoffOn() throws a RangeError naming retry.times for a bad value", () => {
    const throttler = createThrottler();
    expect(() => backoffOn(throttler, { retry: { times: -1 } })).toThrow(
      "Cannot create backoffOn as 'retry.times' must be an integer >= 0: current value is -1",
    );
    expect(() => backoffOn(throttler, { retry: { refusedTimes: -2 } })).toThrow(
      "Cannot create backoffOn as 'retry.refusedTimes' must be an integer >= 0: current value is -2",
    );
    expect(() => backoffOn(throttler, { retry: { times: 1.5 } })).toThrow(RangeError);
  });
});

describe("backoff events, scope$ and debug lines", () => {
  it("Throttler.scope$() emits the new delay and level on each trigger and each recovery step", () => {
    const scheduler = new TestScheduler(() => {});
    scheduler.maxFrames = Number.POSITIVE_INFINITY;
    const throttler = createThrottler({ adaptive: false }, { scheduler });
    const seen: [number, number, number][] = [];
    const sub = throttler.scope$("a.test").subscribe((s: ScopeState) => {
      const last = seen.at(-1);
      if (last === undefined || last[1] !== s.delayMs || last[2] !== s.backoffLevel) {
        seen.push([scheduler.now(), s.delayMs, s.backoffLevel]);
      }
    });
    scheduler.schedule(() => throttler.recordBackoff("a.test", { cause: "status 429" }), 0);
    scheduler.schedule(() => throttler.recordBackoff("a.test", { cause: "status 429" }), 5_000);
    scheduler.flush();
    sub.unsubscribe();
    expect(seen).toEqual([
      [0, 0, 0],
      [0, 1_000, 1],
      [5_000, 2_000, 2],
      [65_000, 1_000, 1],
      [125_000, 0, 0],
    ]);
  });

  it("debug logs one readable line per backoff, hold, retry and recovery step", () => {
    const lines: string[] = [];
    const p = pipeline(
      urls("a.test", 1),
      (_url, n) => n === 0 ? { status: 429, headers: { "retry-after": "2" } } : { status: 200 },
      { debug: true, backoff: { windowMs: 10_000 } },
      { retry: { times: 1 }, log: (line) => lines.push(line) },
    );
    const sub = p.throttler.scope$("a.test").subscribe(); // keeps the recovery timer running
    p.scheduler.schedule(() => sub.unsubscribe(), 20_000);
    p.run();
    const wanted = lines.filter((l) =>
      /^\[politely\] \S+ (backoff|hold|retry|recovery|request-delayed) /.test(l)
    );
    expect(wanted).toEqual([
      "[politely] 0.010s backoff a.test: delay 1s (level 1), cause status 429",
      "[politely] 0.010s hold a.test: nothing sent until 2.010s (2s, retry-after)",
      "[politely] 0.010s retry a.test: attempt 2 (after status 429)",
      "[politely] 0.010s request-delayed scope=a.test reason=hold waitMs=2000",
      "[politely] 10.010s recovery a.test: delay 0s (level 0)",
    ]);
    expect(lines.every((l) => !l.includes("\n"))).toBe(true);
  });
});

describe("backoffOn() and announced budgets (rate-limit headers on any response)", () => {
  const BASE = Date.UTC(2025, 0, 1, 12, 0, 0);
  // [family, headers saying "none left, resets in 5 s", sends of a.test]: one request at a time,
  // the first answered at 10 with these headers, the rest 200 without headers. A limit with a
  // window (said, or inferred from the reset when only the limit is said) paces the next
  // window (10 per 5 s: 500 ms apart); without a limit the scope is free after the reset.
  const families: [string, (now: number) => Record<string, string>, number[]][] = [
    [
      "IETF RateLimit / RateLimit-Policy",
      () => ({ ratelimit: '"default";r=0;t=5', "ratelimit-policy": '"default";q=10;w=5' }),
      [0, 5_010, 5_510],
    ],
    [
      "RateLimit-Limit/Remaining/Reset",
      () => ({ "ratelimit-limit": "10", "ratelimit-remaining": "0", "ratelimit-reset": "5" }),
      [0, 5_010, 5_510],
    ],
    [
      "X-RateLimit-* with a delta reset",
      () => ({ "x-ratelimit-limit": "10", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "5" }),
      [0, 5_010, 5_510],
    ],
    [
      "X-RateLimit-* with an epoch reset",
      (now) => ({
        "x-ratelimit-limit": "10",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String((BASE + now + 6_000) / 1000), // an instant, not a delay
      }),
      [0, 6_000, 6_600], // reset 5990 ms after the answer: a window of 6 s
    ],
    [
      "X-RateLimit-Reset-After",
      () => ({ "x-ratelimit-remaining": "0", "x-ratelimit-reset-after": "5" }),
      [0, 5_010, 5_020],
    ],
  ];
  for (const status of [200, 429]) {
    for (const [family, headers, wanted] of families) {
      it(`backoffOn() holds until the reset without a backoff step: ${family} on a ${status}`, () => {
        let clock = () => 0;
        const p = pipeline(
          urls("a.test", 3),
          (_url, n, now) => n === 0 ? { status, headers: headers(now) } : { status: 200 },
          { concurrentRequestsPerDomain: 1 },
          { retry: false, nowEpochMs: () => clock() },
        );
        clock = () => BASE + p.scheduler.now();
        p.run();
        expect(timesOf(p.sends, "a.test")).toEqual(wanted);
        expect(p.events.filter((e) => e.type === "hold")).toEqual([
          { type: "hold", at: 10, scope: "a.test", until: wanted[1], source: "ratelimit" },
        ]);
        expect(p.events.filter((e) => e.type === "backoff")).toEqual([]);
        expect(p.throttler.state("a.test")).toMatchObject({ delayMs: 0, backoffLevel: 0 });
      });
    }
  }

  it("backoffOn(): a refusal the headers do not explain stays an ordinary trigger with its hold", () => {
    const p = pipeline(
      urls("a.test", 3),
      (_url, n) =>
        n === 0
          ? { status: 429, headers: { "retry-after": "2", "x-ratelimit-remaining": "7" } }
          : { status: 200 },
      { concurrentRequestsPerDomain: 1 },
      { retry: false },
    );
    p.run();
    // The hold of Retry-After, then the 1 s step. The 7 left are paced over no known reset: not at all.
    expect(timesOf(p.sends, "a.test")).toEqual([0, 2_010, 3_010]);
    expect(p.throttler.state("a.test")).toMatchObject({ delayMs: 1_000, backoffLevel: 1 });
  });

  it("backoffOn() paces a remaining budget over the time to the reset, on 200s", () => {
    // A fixed window of 4 per 2 s from 0, announced on every answer.
    const used = new Map<number, number>();
    const p = pipeline(
      urls("a.test", 8),
      (_url, _n, now) => {
        const window = Math.floor(now / 2_000);
        const n = (used.get(window) ?? 0) + 1;
        used.set(window, n);
        return {
          status: n <= 4 ? 200 : 429,
          headers: {
            "x-ratelimit-limit": "4",
            "x-ratelimit-remaining": String(Math.max(0, 4 - n)),
            "x-ratelimit-reset": String(Math.ceil(((window + 1) * 2_000 - now) / 1000)),
          },
        };
      },
      { concurrentRequestsPerDomain: 1 },
      { retry: false },
    );
    p.run();
    expect(p.outcomes.map((o) => (o.kind === "response" ? o.response.status : 0))).toEqual(
      Array(8).fill(200),
    );
    // Each answer spreads what is left over the first 0.3 of the time to its reset, never
    // faster than 0.3 of the limit's own spacing (4 per 2 s, the window inferred from the
    // first reset): the first goes at once (nothing paced sent yet), then 150 ms apart; the
    // fourth answer (none left) holds the scope until the earliest bound of the reset (2010),
    // and the next window is paced alike. Never a fifth request in a window.
    expect(timesOf(p.sends, "a.test")).toEqual([0, 10, 160, 310, 2_010, 2_160, 2_310, 2_460]);
  });

  it("backoffOn() shows a learned quota in the scope's state, and a configured one wins", () => {
    const headers = { ratelimit: '"default";r=6;t=8', "ratelimit-policy": '"default";q=10;w=10' };
    const learned = pipeline(urls("a.test", 1), () => ({ status: 200, headers }), {}, {
      retry: false,
    });
    learned.run();
    expect(learned.throttler.state("a.test")?.quota).toEqual({
      limit: 10,
      used: 4,
      resetsAt: 8_010,
    });
    const configured = pipeline(urls("a.test", 1), () => ({ status: 200, headers }), {
      scopes: { "a.test": { quota: 100, windowMs: 60_000 } },
    }, { retry: false });
    configured.run();
    // The configured quota, reconciled from the headers' remaining as before.
    expect(configured.throttler.state("a.test")?.quota).toEqual({
      limit: 100,
      used: 94,
      resetsAt: 60_010,
    });
  });

  it("backoffOn() reports announced budgets, and what it did not believe, as events", () => {
    const p = pipeline(
      urls("a.test", 1),
      () => ({ status: 200, headers: { "x-ratelimit-remaining": "3", "x-ratelimit-reset": "-5" } }),
      {},
      { retry: false },
    );
    p.run();
    expect(p.events.filter((e) => e.type === "announced")).toEqual([{
      type: "announced",
      at: 10,
      scope: "a.test",
      limit: undefined,
      windowMs: undefined,
      remaining: 3,
      resetAt: undefined,
      ignored: ['x-ratelimit-reset: "-5"'],
    }]);
  });
});
