import {
  EMPTY,
  from,
  map,
  merge,
  NEVER,
  Observable,
  type ObservableInput,
  of,
  Subject,
  tap,
  throwError,
  timer,
} from "rxjs";
import { describe, expect, it } from "vitest";
import type { ThrottleEvent } from "../lib/events.ts";
import type { RequestObject } from "../lib/request.ts";
import { resubmitOf } from "../lib/_resubmit.ts";
import { InvalidScopesError } from "../lib/scopes/scopes.ts";
import { ThrottlingScopeManager } from "../lib/managers/scope_manager.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import {
  createThrottler,
  type Throttler,
  type ThrottlerOptions,
} from "../lib/throttler/throttler.ts";
import {
  type DownloadContext,
  EmptyDownloadError,
  throttleByScope,
} from "../operators/throttle_by_scope.ts";
import { recordingDownload, seededRandom, testScheduler } from "./_helpers/test_scheduler.ts";

type Req = string | Request | RequestObject;

function setup(
  settings: ThrottlerSettingsInput = {},
  latency: (r: Req, attempt: number) => number = () => 100,
  options: ThrottlerOptions<Req> = {},
) {
  const scheduler = testScheduler();
  const throttler = createThrottler<Req>(settings, { scheduler, random: () => 0.5, ...options });
  const rec = recordingDownload<Req>(scheduler, latency);
  const events: ThrottleEvent[] = [];
  throttler.events$.subscribe((e) => events.push(e));
  return { scheduler, throttler, rec, events };
}

/** Subscribe and record every notification with its scheduler time. */
function collect<T>(throttler: Throttler<Req>, obs: Observable<T>) {
  const s = throttler.scheduler;
  const result = {
    values: [] as { at: number; value: T }[],
    completedAt: undefined as number | undefined,
    error: undefined as unknown,
    subscription: undefined as unknown as { unsubscribe(): void },
  };
  result.subscription = obs.subscribe({
    next: (value) => result.values.push({ at: s.now(), value }),
    error: (error) => (result.error = error),
    complete: () => (result.completedAt = s.now()),
  });
  return result;
}

const urls = (host: string, n: number) =>
  Array.from({ length: n }, (_, i) => `http://${host}/${i}`);

describe("throttleByScope()", () => {
  it("throttleByScope() never has more requests of a scope in flight than its concurrency", () => {
    // Not adaptive: an adaptive scope's slow start would begin at 2 (test/rampup.test.ts).
    const { scheduler, throttler, rec } = setup({
      concurrentRequestsPerDomain: 3,
      adaptive: false,
    });
    const out = collect(
      throttler,
      from(urls("a.test", 10)).pipe(throttleByScope(throttler, rec.download)),
    );
    scheduler.flush();
    expect(rec.maxInFlight.get("a.test")).toBe(3);
    expect(rec.sends.map((s) => s.at)).toEqual([0, 0, 0, 100, 100, 100, 200, 200, 200, 300]);
    expect(out.values).toHaveLength(10);
    expect(out.completedAt).toBe(400);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() tells every scope manager of each answer: its latency, status, failure and send time", () => {
    // A custom manager may keep what it is told: each answer is its own
    // object. The default managers are told the same values.
    const told: { scope: string; info: unknown }[] = [];
    const { scheduler, throttler } = setup(
      { concurrentRequestsPerDomain: 1, adaptive: false },
      () => 0,
      {
        scopeManager: ({ scope, config, random }) => {
          const m = new ThrottlingScopeManager({ scope, config, random });
          const recordDone = m.recordDone.bind(m);
          m.recordDone = (now, result) => {
            told.push({ scope, info: result });
            recordDone(now, result);
          };
          return m;
        },
      },
    );
    const latency: Record<string, number> = { "http://a.test/1": 30, "http://a.test/2": 50 };
    const download = (url: Req, _: unknown, on = scheduler) =>
      timer(latency[url as string] ?? 20, on).pipe(
        map(() => {
          if (url === "http://a.test/2") throw new Error("down");
          return { status: url === "http://a.test/1" ? 503 : 200 };
        }),
      );
    const out = collect(
      throttler,
      from(["http://a.test/1", "http://a.test/2", "http://a.test/3"]).pipe(
        throttleByScope(throttler, download),
      ),
    );
    scheduler.flush();
    expect(out.values.map((v) => v.value.kind)).toEqual(["response", "error", "response"]);
    expect(told).toEqual([
      { scope: "a.test", info: { latencyMs: 30, status: 503, failed: false, sentAt: 0 } },
      { scope: "a.test", info: { latencyMs: 50, status: undefined, failed: true, sentAt: 30 } },
      { scope: "a.test", info: { latencyMs: 20, status: 200, failed: false, sentAt: 80 } },
    ]);
    expect(new Set(told.map((t) => t.info)).size).toBe(3);

    // The default manager of a scope reaches the same state from the same answers.
    const plain = setup({ concurrentRequestsPerDomain: 1, adaptive: false }, () => 0);
    const seen = collect(
      plain.throttler,
      from(["http://a.test/1", "http://a.test/2", "http://a.test/3"]).pipe(
        throttleByScope(plain.throttler, (url) => download(url, undefined, plain.scheduler)),
      ),
    );
    plain.scheduler.flush();
    expect(seen.values.map((v) => v.value.kind)).toEqual(["response", "error", "response"]);
    expect(plain.throttler.state("a.test")).toEqual(throttler.state("a.test"));
  });

  it("throttleByScope() spaces a scope's next send from when a late request went out (DownloadContext.wentOut)", () => {
    const { scheduler, throttler } = setup({
      scopes: { "a.test": { delayMs: 100, jitter: 0 } },
      adaptive: false,
    });
    // How long after its release each request reaches the network. The
    // usual lateness starts at 0 and follows the smallest reading.
    const late = [5, 0, 0, 3, 0];
    let n = 0;
    const download = (_url: Req, ctx: DownloadContext) =>
      new Observable<number>((sub) => {
        const i = n++;
        const wire = scheduler.schedule(() => ctx.wentOut?.(), late[i]);
        const answer = scheduler.schedule(() => {
          sub.next(200);
          sub.complete();
        }, 50);
        return () => {
          wire.unsubscribe();
          answer.unsubscribe();
        };
      });
    const out = collect(
      throttler,
      from(urls("a.test", 5)).pipe(throttleByScope(throttler, download)),
    );
    scheduler.flush();
    // 0 +5 late → 105; 105 → 205 (on time); 205 → 305; 305 +3 late → 408.
    expect(out.values.map((v) => v.value.sentAt)).toEqual([0, 105, 205, 305, 408]);
  });

  it("throttleByScope() counts DownloadContext.wentOut once, and not after the outcome", () => {
    const { scheduler, throttler } = setup({
      scopes: { "a.test": { delayMs: 100, jitter: 0 } },
      adaptive: false,
    });
    let n = 0;
    const download = (_url: Req, ctx: DownloadContext) =>
      new Observable<number>((sub) => {
        const first = n++ === 0;
        // The first: two reports at 5 (one counts). The second: its answer at
        // 10, its report at 20 (ignored).
        const at = first ? [5, 5] : [20];
        const wires = at.map((t) => scheduler.schedule(() => ctx.wentOut?.(), t));
        const answer = scheduler.schedule(() => {
          sub.next(200);
          sub.complete();
        }, first ? 50 : 10);
        return () => {
          for (const w of wires) w.unsubscribe();
          answer.unsubscribe();
        };
      });
    const out = collect(
      throttler,
      from(urls("a.test", 3)).pipe(throttleByScope(throttler, download)),
    );
    scheduler.flush();
    expect(out.values.map((v) => v.value.sentAt)).toEqual([0, 105, 205]);
  });

  it("throttleByScope() never has more requests in flight than the global cap", () => {
    const { scheduler, throttler, rec, events } = setup({
      concurrentRequests: 5,
      concurrentRequestsPerDomain: 4,
    });
    const source = from(["a", "b", "c", "d"].flatMap((h) => urls(`${h}.test`, 4)));
    const out = collect(throttler, source.pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    expect(rec.maxTotal).toBe(5);
    expect(out.values).toHaveLength(16);
    expect(out.completedAt).toBe(400);
    const globalWaits = events.filter((e) => e.type === "request-delayed" && e.reason === "global");
    expect(globalWaits.length).toBeGreaterThan(0);
    expect(globalWaits[0]).toMatchObject({ scope: undefined, waitMs: Infinity });
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() spaces the sends of a scope by its delay (marbles)", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, expectObservable }) => {
      const throttler = createThrottler<string>({ downloadDelayMs: 100, jitter: 0 }, { scheduler });
      const values = { a: "http://a.test/a", b: "http://a.test/b", c: "http://a.test/c" };
      const outcomes = cold("(abc|)", values).pipe(
        throttleByScope(
          throttler,
          (r) => timer(10, scheduler).pipe(map(() => ({ status: 200, r }))),
        ),
        map((o) => o.request.slice(-1)),
      );
      // Sent at 0, 100, 200; each answered 10 ms later; complete with the last.
      expectObservable(outcomes).toBe("10ms a 99ms b 99ms (c|)", { a: "a", b: "b", c: "c" });
    });
  });

  it("throttleByScope() keeps the delay between sends also when requests arrive late and spread out", () => {
    const { scheduler, throttler, rec } = setup({ downloadDelayMs: 100, jitter: 0 }, () => 30);
    const arrivals = [0, 10, 250, 260, 900];
    const source = merge(
      ...arrivals.map((at, i) => timer(at, scheduler).pipe(map(() => `http://a.test/${i}`))),
    );
    collect(throttler, source.pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    expect(rec.sends.map((s) => s.at)).toEqual([0, 100, 250, 350, 900]);
  });

  it("throttleByScope() applies jitter within delay * [0.5, 1.5) with random 0, 0.999 and a seeded source", () => {
    const cases: [string, () => number, (k: number) => number][] = [
      ["0", () => 0, () => 0],
      ["0.999", () => 0.999, () => 0.999],
    ];
    const seq = seededRandom(42);
    const draws = Array.from({ length: 8 }, () => seq());
    cases.push(["seeded", seededRandom(42), (k) => draws[k]!]);
    for (const [name, random, r] of cases) {
      const { scheduler, throttler, rec } = setup({ downloadDelayMs: 200, jitter: 0.5 }, () => 5, {
        random,
      });
      collect(throttler, from(urls("a.test", 9)).pipe(throttleByScope(throttler, rec.download)));
      scheduler.flush();
      const at = rec.sends.map((s) => s.at);
      for (let k = 1; k < at.length; k++) {
        const gap = at[k]! - at[k - 1]!;
        expect({ name, k, gap }).toEqual({
          name,
          k,
          gap: expect.closeTo(200 * (0.5 + r(k - 1)), 6),
        });
        expect(gap).toBeGreaterThanOrEqual(100);
        expect(gap).toBeLessThan(300);
      }
    }
  });

  it("throttleByScope() holds a request with two scopes until both allow it, then counts it against both at once", () => {
    const { scheduler, throttler, rec } = setup(
      { scopes: { a: { concurrency: 1 }, b: { concurrency: 1 } } },
      (r) => Number((r as RequestObject).meta?.["latency"] ?? 100),
    );
    const req = (name: string, scopes: string[], latency: number): RequestObject => ({
      url: `http://x.test/${name}`,
      meta: { throttlingScopes: scopes, latency, name },
    });
    const arrivals: [number, RequestObject][] = [
      [0, req("a1", ["a"], 100)], // holds a until 100
      [10, req("ab", ["a", "b"], 100)], // must wait for a: goes at 100, holds a and b until 200
      [50, req("b1", ["b"], 20)], // b is free at 50 (no partial hold by "ab"): goes at once
      [150, req("b2", ["b"], 20)], // b is held by "ab" until 200
      [150, req("a2", ["a"], 20)], // a is held by "ab" until 200
    ];
    const source = merge(...arrivals.map(([at, r]) => timer(at, scheduler).pipe(map(() => r))));
    const out = collect(throttler, source.pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    const sent = Object.fromEntries(
      rec.sends.map((s) => [(s.request as RequestObject).meta!["name"], [s.at, s.scopes]]),
    );
    expect(sent).toEqual({
      a1: [0, ["a"]],
      b1: [50, ["b"]],
      ab: [100, ["a", "b"]],
      b2: [200, ["b"]],
      a2: [200, ["a"]],
    });
    expect(rec.maxInFlight.get("a")).toBe(1);
    expect(rec.maxInFlight.get("b")).toBe(1);
    expect(out.values.find((v) => v.value.request === arrivals[1]![1])?.value.scopes).toEqual([
      "a",
      "b",
    ]);
    expect(out.completedAt).toBe(220);
  });

  it("throttleByScope() does not deadlock on requests with crossing scopes", () => {
    const { scheduler, throttler, rec } = setup(
      { scopes: { a: { concurrency: 1 }, b: { concurrency: 1 }, c: { concurrency: 2 } } },
      (_r, _a) => 7,
    );
    const orders = [["a", "b"], ["b", "a"], ["b", "c"], ["c", "a"], ["a"], ["b"], ["c", "b", "a"]];
    const requests: RequestObject[] = [];
    for (let i = 0; i < 40; i++) {
      requests.push({
        url: `http://x.test/${i}`,
        meta: { throttlingScopes: orders[i % orders.length]! },
      });
    }
    const source = merge(
      ...requests.map((r, i) => timer((i * 3) % 11, scheduler).pipe(map(() => r))),
    );
    const out = collect(throttler, source.pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    expect(out.values).toHaveLength(40);
    expect(out.completedAt).toBeDefined();
    expect(rec.maxInFlight.get("a")).toBe(1);
    expect(rec.maxInFlight.get("b")).toBe(1);
    expect(rec.maxInFlight.get("c")).toBe(2);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() applies meta.throttlingDelayMs once before the gate, not again on a retry", () => {
    const { scheduler, throttler, rec, events } = setup({}, () => 50);
    const request: RequestObject = { url: "http://a.test/x", meta: { throttlingDelayMs: 500 } };
    const out = collect(
      throttler,
      of(request).pipe(
        throttleByScope(throttler, rec.download),
        tap((o) => {
          if (o.attempt === 1) expect(resubmitOf(o)!(o)).toBe(true);
        }),
      ),
    );
    scheduler.flush();
    expect(rec.sends.map((s) => [s.attempt, s.at])).toEqual([[1, 500], [2, 550]]);
    expect(out.values.map((v) => [v.value.attempt, v.at])).toEqual([[1, 550], [2, 600]]);
    expect(out.completedAt).toBe(600);
    const delayed = events.filter((e) => e.type === "request-delayed");
    expect(delayed).toEqual([
      { type: "request-delayed", at: 0, scope: undefined, reason: "request-delay", waitMs: 500 },
    ]);
  });

  it("throttleByScope() resubmit with a delay waits that long, then goes through the gate again", () => {
    const { scheduler, throttler, rec } = setup({ downloadDelayMs: 100, jitter: 0 }, () => 10);
    collect(
      throttler,
      of("http://a.test/x").pipe(
        throttleByScope(throttler, rec.download),
        tap((o) => {
          if (o.attempt < 3) resubmitOf(o)!(o, o.attempt === 1 ? 40 : 0);
        }),
      ),
    );
    scheduler.flush();
    // Attempt 2: out at 10, +40 ms = 50, but the scope's delay holds it to 100.
    // Attempt 3: out at 110, delay holds it to 200.
    expect(rec.sends.map((s) => [s.attempt, s.at])).toEqual([[1, 0], [2, 100], [3, 200]]);
  });

  it("throttleByScope() on unsubscribe aborts downloads in flight, clears every timer, emits nothing more, frees slots", () => {
    const { scheduler, throttler, rec } = setup(
      { downloadDelayMs: 100, jitter: 0, concurrentRequestsPerDomain: 2 },
      () => 1000,
    );
    const requests: Req[] = [
      ...urls("a.test", 5),
      { url: "http://b.test/later", meta: { throttlingDelayMs: 5000 } },
    ];
    const out = collect(throttler, from(requests).pipe(throttleByScope(throttler, rec.download)));
    let pending = -1;
    scheduler.schedule(() => throttler.recordBackoff("c.test"), 50); // arms a recovery wake-up
    scheduler.schedule(() => {
      expect([throttler.active, throttler.held]).toEqual([2, 3]);
      out.subscription.unsubscribe();
      pending = scheduler.actions.length;
    }, 150);
    scheduler.flush();
    expect(pending).toBe(0);
    expect(rec.sends.map((s) => s.at)).toEqual([0, 100]);
    expect(rec.sends.every((s) => s.signal.aborted)).toBe(true);
    expect((rec.sends[0]!.signal.reason as DOMException).name).toBe("AbortError");
    expect(rec.total).toBe(0);
    expect(out.values).toEqual([]);
    expect(out.completedAt).toBeUndefined();
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
    // The throttler stays usable, with its slots all free.
    const again = collect(
      throttler,
      from(urls("a.test", 2)).pipe(throttleByScope(throttler, rec.download)),
    );
    scheduler.flush();
    expect(again.values).toHaveLength(2);
  });

  it("throttleByScope() on unsubscribe aborts a promise download and ignores its late answer", async () => {
    const { scheduler, throttler } = setup();
    let signal: AbortSignal | undefined;
    let resolve: (v: { status: number }) => void = () => {};
    const out = collect(
      throttler,
      of("http://a.test/").pipe(throttleByScope(throttler, (_r, ctx) => {
        signal = ctx.signal;
        return new Promise<{ status: number }>((r) => (resolve = r));
      })),
    );
    scheduler.flush();
    expect(throttler.active).toBe(1);
    out.subscription.unsubscribe();
    expect(signal?.aborted).toBe(true);
    resolve({ status: 200 });
    await new Promise((r) => setTimeout(r, 0));
    expect(out.values).toEqual([]);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() subscriptions sharing one throttler share its limits", () => {
    const { scheduler, throttler, rec } = setup({
      concurrentRequestsPerDomain: 2,
      concurrentRequests: 3,
    });
    const one = collect(
      throttler,
      from(urls("a.test", 6)).pipe(throttleByScope(throttler, rec.download)),
    );
    const two = collect(
      throttler,
      from([...urls("a.test", 6), ...urls("b.test", 6)]).pipe(
        throttleByScope(throttler, rec.download),
      ),
    );
    scheduler.schedule(() => one.subscription.unsubscribe(), 250);
    scheduler.flush();
    expect(rec.maxInFlight.get("a.test")).toBe(2);
    expect(rec.maxTotal).toBe(3);
    // Unsubscribing one pipeline leaves the other's requests alone.
    expect(two.values).toHaveLength(12);
    expect(two.values.every((v) => v.value.kind === "response")).toBe(true);
    expect(one.values.length).toBeLessThan(6);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() turns an unparseable URL or bad scopes into an error outcome and goes on, leaking no slot", () => {
    const { scheduler, throttler, rec } = setup({ concurrentRequestsPerDomain: 1 });
    const requests: Req[] = [
      "http://a.test/1",
      "not a url",
      { url: "http://a.test/2", meta: { throttlingScopes: { a: -1 } } },
      { url: "http://a.test/3", meta: { throttlingScopes: "" } },
      { nourl: true } as unknown as Req,
      "http://a.test/4",
    ];
    const out = collect(throttler, from(requests).pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    const summary = out.values.map(({ at, value: o }) => [
      at,
      o.kind,
      o.kind === "error" ? (o.error as Error).name : "",
      o.scopes,
      o.sentAt,
    ]);
    expect(summary).toEqual([
      [0, "error", "TypeError", [], Number.NaN],
      [0, "error", "InvalidScopesError", [], Number.NaN],
      [0, "error", "InvalidScopesError", [], Number.NaN],
      [0, "error", "InvalidScopesError", [], Number.NaN],
      [100, "response", "", ["a.test"], 0],
      [200, "response", "", ["a.test"], 100],
    ]);
    const bad = out.values[0]!.value;
    expect(bad.kind === "error" && (bad.error as Error).message).toContain('"not a url"');
    expect(out.values[1]!.value.kind === "error" && out.values[1]!.value.error).toBeInstanceOf(
      InvalidScopesError,
    );
    expect(out.completedAt).toBe(200);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() turns a bad meta.throttlingDelayMs into an error outcome naming the field", () => {
    const { scheduler, throttler, rec } = setup();
    const requests: Req[] = [
      { url: "http://a.test/1", meta: { throttlingDelayMs: -5 } },
      { url: "http://a.test/2", meta: { throttlingDelayMs: Number.NaN } },
      { url: "http://a.test/3", meta: { throttlingDelayMs: "5" as unknown as number } },
      { url: "http://a.test/4", meta: { throttlingDelayMs: 50 } },
    ];
    const out = collect(throttler, from(requests).pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    expect(out.values.map(({ at, value: o }) => [at, o.kind])).toEqual([
      [0, "error"],
      [0, "error"],
      [0, "error"],
      [150, "response"],
    ]);
    const first = out.values[0]!.value;
    expect(first.kind === "error" && (first.error as Error).name).toBe("InvalidRequestError");
    expect(first.kind === "error" && (first.error as Error).message).toBe(
      "Cannot throttle request as 'meta.throttlingDelayMs' must be a finite number >= 0: current value is -5",
    );
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() turns a download that throws, errors or completes empty into an error outcome", () => {
    const { scheduler, throttler } = setup({ concurrentRequestsPerDomain: 1 });
    const boom = new Error("boom");
    const downloads: Record<string, () => ObservableInput<{ status: number }>> = {
      throws: () => {
        throw boom;
      },
      errors: () => throwError(() => boom),
      "errors later": () =>
        timer(30, scheduler).pipe(map(() => {
          throw boom;
        })),
      empty: () => EMPTY,
      "empty later": () =>
        timer(30, scheduler).pipe(
          map(() => ({ status: 0 })),
          (o) =>
            new Observable<{ status: number }>((s) =>
              o.subscribe({ complete: () => s.complete() })
            ),
        ),
      ok: () => of({ status: 204 }, { status: 999 }),
    };
    const out = collect(
      throttler,
      from(Object.keys(downloads).map((k) => `http://a.test/${k}`)).pipe(
        throttleByScope(throttler, (r) => downloads[decodeURIComponent(String(r).slice(14))]!()),
      ),
    );
    scheduler.flush();
    const summary = out.values.map(({ value: o }) => [
      String(o.request).slice(14),
      o.kind === "error" ? o.error : o.response,
      o.latencyMs,
    ]);
    expect(summary).toEqual([
      ["throws", boom, 0],
      ["errors", boom, 0],
      ["errors later", boom, 30],
      ["empty", expect.any(EmptyDownloadError), 0],
      ["empty later", expect.any(EmptyDownloadError), 30],
      ["ok", { status: 204 }, 0],
    ]);
    expect(out.completedAt).toBe(60);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() turns a rejected promise into an error outcome", async () => {
    const { scheduler, throttler } = setup();
    const boom = new Error("rejected");
    const out = collect(
      throttler,
      of("http://a.test/").pipe(throttleByScope(throttler, () => Promise.reject(boom))),
    );
    scheduler.flush();
    await new Promise((r) => setTimeout(r, 0));
    expect(out.values.map((v) => v.value.kind === "error" && v.value.error)).toEqual([boom]);
    expect(out.completedAt).toBe(0);
    expect(throttler.active).toBe(0);
  });

  it("throttleByScope() turns a download that returns no Promise or ObservableInput into an error outcome", () => {
    const { scheduler, throttler } = setup({ concurrentRequestsPerDomain: 1 });
    // A JavaScript caller (no type checking) returning a plain value.
    const download = (() => ({ status: 200 })) as unknown as () => Promise<{ status: number }>;
    const out = collect(
      throttler,
      from(["http://a.test/1", "http://a.test/2"]).pipe(throttleByScope(throttler, download)),
    );
    scheduler.flush();
    expect(out.values.map((v) => [v.value.kind, (v.value as { error?: Error }).error?.name]))
      .toEqual([
        ["error", "TypeError"],
        ["error", "TypeError"],
      ]);
    expect(out.completedAt).toBe(0);
    expect([throttler.active, throttler.held]).toEqual([0, 0]);
  });

  it("throttleByScope() propagates an error of the source and aborts what is in flight", () => {
    const { scheduler, throttler, rec } = setup({}, () => 1000);
    const source = new Subject<Req>();
    const out = collect(throttler, source.pipe(throttleByScope(throttler, rec.download)));
    source.next("http://a.test/1");
    const failure = new Error("source failed");
    scheduler.schedule(() => source.error(failure), 10);
    scheduler.flush();
    expect(out.error).toBe(failure);
    expect(out.values).toEqual([]);
    expect(rec.sends[0]!.signal.aborted).toBe(true);
    expect([throttler.active, throttler.held, scheduler.actions.length]).toEqual([0, 0, 0]);
  });

  it("throttleByScope() completes only once the source completed and every request came out", () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const throttler = createThrottler({ concurrentRequestsPerDomain: 1 }, { scheduler });
      const source = hot("-a-b|", { a: "http://a.test/a", b: "http://a.test/b" });
      const download = (r: string) => cold("5ms (x|)", { x: r.slice(-1) });
      const out = source.pipe(
        throttleByScope(throttler, download),
        map((o) => o.kind === "response" && o.response),
      );
      // a sent at 1, out at 6; b waits for a's slot, sent at 6, out at 11.
      expectObservable(out).toBe("------a----(b|)", { a: "a", b: "b" });
      expectSubscriptions(source.subscriptions).toBe("^---!");
    });
    scheduler.run(({ expectObservable }) => {
      // A source that never completes keeps the gate open.
      const throttler = createThrottler({}, { scheduler });
      const out = NEVER.pipe(throttleByScope(throttler, () => of(1)));
      expectObservable(out).toBe("");
    });
  });

  it("throttleByScope() emits outcomes with request, scopes, attempt, sentAt and latencyMs", () => {
    const { scheduler, throttler } = setup({ downloadDelayMs: 100, jitter: 0 });
    const req = new Request("http://A.test:8080/x");
    const seen: DownloadContext[] = [];
    const out = collect(
      throttler,
      from([req, "http://a.test:8080/y"]).pipe(throttleByScope(throttler, (_r, ctx) => {
        seen.push({ attempt: ctx.attempt, scopes: ctx.scopes, signal: ctx.signal });
        return timer(25, scheduler).pipe(map(() => ({ status: 201 })));
      })),
    );
    scheduler.flush();
    const outcomes = out.values.map((v) => v.value);
    expect(outcomes[0]).toMatchObject({
      kind: "response",
      request: req,
      response: { status: 201 },
      scopes: ["a.test:8080"],
      attempt: 1,
      sentAt: 0,
      latencyMs: 25,
    });
    expect(outcomes[1]).toMatchObject({ sentAt: 100, latencyMs: 25, scopes: ["a.test:8080"] });
    expect(seen.map((c) => [c.attempt, c.scopes, c.signal.aborted])).toEqual([
      [1, ["a.test:8080"], false],
      [1, ["a.test:8080"], false],
    ]);
  });

  it("throttleByScope() resolves scopes with an async getScopes before the gate", async () => {
    const { scheduler, throttler, rec } = setup({}, () => 10, {
      getScopes: (r) =>
        Promise.resolve(String(r).includes("/x/") ? ["x", "shared"] : { shared: 1 }),
    });
    const out = collect(
      throttler,
      from(["http://a.test/x/1", "http://b.test/2"]).pipe(throttleByScope(throttler, rec.download)),
    );
    await new Promise((r) => setTimeout(r, 0));
    scheduler.flush();
    expect(rec.sends.map((s) => [s.at, s.scopes])).toEqual([[0, ["x", "shared"]], [10, [
      "shared",
    ]]]);
    expect(out.values).toHaveLength(2);
    expect(out.completedAt).toBe(20);
  });

  it("throttleByScope() turns a rejecting getScopes into an error outcome", async () => {
    const failure = new Error("lookup failed");
    const { scheduler, throttler, rec } = setup({}, () => 10, {
      getScopes: () => Promise.reject(failure),
    });
    const out = collect(
      throttler,
      of("http://a.test/").pipe(throttleByScope(throttler, rec.download)),
    );
    await new Promise((r) => setTimeout(r, 0));
    scheduler.flush();
    expect(out.values.map((v) => v.value.kind === "error" && v.value.error)).toEqual([failure]);
    expect(out.completedAt).toBe(0);
    expect(rec.sends).toEqual([]);
  });

  it("throttleByScope() works for items without a URL given a scope function", () => {
    const { scheduler, throttler, rec } = setup({ scopeConcurrency: 2 }, () => 10, {
      getScopes: (r) => `tenant-${(r as unknown as { tenant: number }).tenant}`,
    });
    const items = [1, 1, 1, 2].map((tenant, id) => ({ tenant, id }) as unknown as Req);
    collect(throttler, from(items).pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    expect(rec.sends.map((s) => [s.at, s.scopes[0]])).toEqual([
      [0, "tenant-1"],
      [0, "tenant-1"],
      [0, "tenant-2"],
      [10, "tenant-1"],
    ]);
  });

  it("throttleByScope() reports scope-created, request-sent, request-delayed (with reasons) and request-done", () => {
    const { scheduler, throttler, rec, events } = setup(
      {
        concurrentRequests: 2,
        downloadDelayMs: 100,
        jitter: 0,
        scopes: { c: { concurrency: 1 }, q: { quota: 1, windowMs: 1000, concurrency: 5 } },
      },
      () => 10,
    );
    const requests: Req[] = [
      "http://a.test/1",
      "http://a.test/2", // delay
      { url: "http://x.test/1", meta: { throttlingScopes: "c" } },
      { url: "http://x.test/2", meta: { throttlingScopes: "c" } }, // global cap (a + c in flight)
    ];
    collect(throttler, from(requests).pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    const at0 = events.filter((e) => e.at === 0).map((e) =>
      e.type === "request-delayed" ? `${e.type}:${e.scope}:${e.reason}:${e.waitMs}` : `${e.type}`
    );
    expect(at0).toEqual([
      "scope-created",
      "request-sent",
      "request-delayed:a.test:delay:100",
      "scope-created",
      "request-sent",
      "request-delayed:undefined:global:Infinity",
    ]);
    const done = events.find((e) => e.type === "request-done");
    expect(done).toEqual({
      type: "request-done",
      at: 10,
      scopes: ["a.test"],
      attempt: 1,
      latencyMs: 10,
      status: 200,
      error: undefined,
    });
    expect(events.find((e) => e.type === "request-sent")).toEqual({
      type: "request-sent",
      at: 0,
      scopes: ["a.test"],
      attempt: 1,
    });
  });

  it("throttleByScope() reports request-delayed for concurrency, quota and hold", () => {
    const { scheduler, throttler, rec, events } = setup(
      {
        // delayScope is also a backoff trigger: a zero minimum keeps its delay step
        // out of the way, so the hold is what the request waits for.
        backoff: { minDelayMs: 0 },
        scopes: { c: { concurrency: 1 }, q: { quota: 1, windowMs: 1000, concurrency: 5 } },
      },
      () => 10,
    );
    const more: Req[] = [
      { url: "http://x.test/3", meta: { throttlingScopes: "c" } },
      { url: "http://x.test/4", meta: { throttlingScopes: "c" } }, // concurrency
      { url: "http://x.test/5", meta: { throttlingScopes: { q: 1 } } },
      { url: "http://x.test/6", meta: { throttlingScopes: { q: 1 } } }, // quota
    ];
    throttler.delayScope("h.test", 300);
    collect(
      throttler,
      from([...more, "http://h.test/"]).pipe(throttleByScope(throttler, rec.download)),
    );
    scheduler.flush();
    const reasons = events.filter((e) => e.type === "request-delayed").map((e) =>
      e.type === "request-delayed" && [e.scope, e.reason, e.waitMs]
    );
    expect(reasons).toEqual([
      ["c", "concurrency", Infinity],
      ["q", "quota", 1000],
      ["h.test", "hold", 300],
    ]);
    const errorDone = events.filter((e) => e.type === "request-done" && e.error !== undefined);
    expect(errorDone).toEqual([]);
  });

  it("throttleByScope() request-done names the class of a failed download's error", () => {
    const { scheduler, throttler, events } = setup();
    collect(
      throttler,
      of("http://a.test/").pipe(
        throttleByScope(throttler, () => throwError(() => new RangeError("bad"))),
      ),
    );
    scheduler.flush();
    expect(events.find((e) => e.type === "request-done")).toMatchObject({
      status: undefined,
      error: "RangeError",
    });
  });

  it("throttleByScope() changes are visible on scope$ as they happen", () => {
    const { scheduler, throttler, rec } = setup({ concurrentRequestsPerDomain: 2 }, () => 50);
    const states: [number, number][] = [];
    const sub = throttler.scope$("a.test").subscribe((s) =>
      states.push([scheduler.now(), s.active])
    );
    collect(throttler, from(urls("a.test", 3)).pipe(throttleByScope(throttler, rec.download)));
    scheduler.flush();
    sub.unsubscribe();
    expect(states).toEqual([[0, 0], [0, 1], [0, 2], [50, 1], [50, 2], [50, 1], [100, 0]]);
  });

  it("throttleByScope() emits each outcome before freeing its slot (a synchronous resubmit waits its turn)", () => {
    const { scheduler, throttler, rec } = setup({ concurrentRequestsPerDomain: 1 }, () => 10);
    const activeAtEmit: number[] = [];
    collect(
      throttler,
      from(urls("a.test", 2)).pipe(
        throttleByScope(throttler, rec.download),
        tap(() => activeAtEmit.push(throttler.state("a.test")!.active)),
      ),
    );
    scheduler.flush();
    expect(activeAtEmit).toEqual([1, 1]);
  });
});
