import { from, map, mergeMap, of, timer } from "rxjs";
import { describe, expect, it } from "vitest";
import type { ThrottleEvent } from "../lib/events.ts";
import { fixedWindowManager } from "../lib/managers/fixed_window_manager.ts";
import { InvalidScopesError } from "../lib/scopes/scopes.ts";
import { fromScrapySettings } from "../lib/settings/scrapy_settings.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { createThrottler, type ThrottlerOptions } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { testScheduler } from "./_helpers/test_scheduler.ts";

function setup(settings: ThrottlerSettingsInput = {}, options: ThrottlerOptions<unknown> = {}) {
  const scheduler = testScheduler();
  // Stores and events over the reference's exponential levels; adaptive
  // scopes' steps: test/rampup.test.ts and test/zoo_crawl.test.ts.
  const throttler = createThrottler<unknown>({ adaptive: false, ...settings }, {
    scheduler,
    random: () => 0.5,
    ...options,
  });
  const events: ThrottleEvent[] = [];
  throttler.events$.subscribe((e) => events.push(e));
  return { scheduler, throttler, events };
}

/** Send each request at its time through a gate answering at once; returns the subscription. */
function send(
  t: ReturnType<typeof setup>,
  arrivals: readonly (readonly [number, unknown])[],
  latencyMs = 0,
) {
  const { scheduler, throttler } = t;
  return from(arrivals).pipe(
    mergeMap(([at, r]) => timer(at, scheduler).pipe(map(() => r))),
    throttleByScope(
      throttler,
      () =>
        latencyMs === 0
          ? of({ status: 200 })
          : timer(latencyMs, scheduler).pipe(map(() => ({ status: 200 }))),
    ),
  ).subscribe();
}

const evicted = (events: ThrottleEvent[]) =>
  events.flatMap((e) => (e.type === "scope-evicted" ? [`${e.scope}:${e.reason}`] : []));

describe("createThrottler()", () => {
  it("createThrottler() fills in the defaults of SPEC.md", () => {
    const { throttler } = setup();
    expect(throttler.settings.concurrentRequests).toBe(16);
    expect(throttler.scopeConfig("example.com")).toMatchObject({
      concurrency: 8,
      delayMs: 0,
      jitter: [-0.5, 0.5],
    });
    expect(throttler.scopeConfig("api")).toMatchObject({ concurrency: 1, delayMs: 0 });
  });

  it("createThrottler() fails at creation on a bad setting, naming it", () => {
    expect(() => createThrottler({ concurrentRequestsPerDomain: 0 })).toThrow(
      /concurrentRequestsPerDomain/,
    );
    expect(() => createThrottler({ downloadDelayMs: -5 })).toThrow(/downloadDelayMs/);
    expect(() => createThrottler({ scopes: { a: { jitter: 2 } } })).toThrow(
      /scopes\.a\.jitter|jitter/,
    );
  });

  it("createThrottler() takes what fromScrapySettings() returns as it is", () => {
    const converted = fromScrapySettings({
      DOWNLOAD_DELAY: 0.25,
      CONCURRENT_REQUESTS_PER_DOMAIN: 2,
      ZYTE_API_KEY: "k",
    });
    const throttler = createThrottler(converted);
    expect(throttler.settings.downloadDelayMs).toBe(250);
    expect(throttler.settings.concurrentRequestsPerDomain).toBe(2);
  });

  it("createThrottler() still rejects an object with settings, warnings and anything else", () => {
    expect(() => createThrottler({ settings: {}, warnings: [], downloadDelayMs: 1 } as never))
      .toThrow(/Unknown setting 'settings'/);
  });

  it("Throttler.scopeConfig() gives host:port the configuration of its host unless that exact key is configured", () => {
    const { throttler } = setup({
      scopes: { "example.com": { delayMs: 500 }, "example.com:9000": { delayMs: 7 } },
    });
    expect(throttler.scopeConfig("example.com:8080").delayMs).toBe(500);
    expect(throttler.scopeConfig("example.com:9000").delayMs).toBe(7);
    expect(throttler.scopeConfig("other.com:8080").delayMs).toBe(0);
  });
});

describe("Throttler.resolveScopes()", () => {
  it("Throttler.resolveScopes() takes meta.throttlingScopes, else getScopes, else the URL's host", () => {
    const plain = setup().throttler;
    expect(plain.resolveScopes("https://Books.Example.com:443/x")).toEqual({
      names: ["books.example.com"],
      amounts: undefined,
    });
    expect(plain.resolveScopes(new Request("http://a.test:8080/"))).toEqual({
      names: ["a.test:8080"],
      amounts: undefined,
    });
    expect(plain.resolveScopes({ url: "http://a.test/", meta: { throttlingScopes: { api: 3 } } }))
      .toEqual({ names: ["api"], amounts: [3] });
    const custom = setup({}, { getScopes: () => ["x", "y"] }).throttler;
    expect(custom.resolveScopes({ url: "http://a.test/" })).toEqual({
      names: ["x", "y"],
      amounts: undefined,
    });
    expect(custom.resolveScopes({ url: "http://a.test/", meta: { throttlingScopes: "z" } }))
      .toEqual({ names: ["z"], amounts: undefined });
  });

  it("Throttler.resolveScopes() throws for a request with no URL and no getScopes, and for an invalid URL", () => {
    const { throttler } = setup();
    expect(() => throttler.resolveScopes({ id: 1 })).toThrow(InvalidScopesError);
    expect(() => throttler.resolveScopes({ id: 1 })).toThrow(/no URL.*getScopes.*\{"id":1\}/);
    expect(() => throttler.resolveScopes("http://")).toThrow(TypeError);
  });
});

describe("Throttler stores", () => {
  it("Throttler.scope$() emits the state at once and after every change; states$ emits every change", () => {
    const t = setup({ concurrentRequestsPerDomain: 2 });
    const { scheduler, throttler } = t;
    const one: [number, number, number][] = [];
    const all: string[] = [];
    throttler.scope$("a.test").subscribe((s) =>
      one.push([scheduler.now(), s.active, s.backoffLevel])
    );
    throttler.states$.subscribe((s) => all.push(`${scheduler.now()}:${s.scope}:${s.active}`));
    send(t, [[0, "http://a.test/1"], [0, "http://b.test/1"]], 10);
    scheduler.schedule(() => throttler.recordBackoff("a.test"), 20);
    scheduler.flush();
    expect(one.slice(0, 4)).toEqual([[0, 0, 0], [0, 1, 0], [10, 0, 0], [20, 0, 1]]);
    expect(all.slice(0, 4)).toEqual(["0:a.test:1", "0:b.test:1", "10:a.test:0", "10:b.test:0"]);
  });

  it("Throttler.recordBackoff() emits backoff, and recovery one window later while someone is attached", () => {
    const { scheduler, throttler, events } = setup({ backoff: { windowMs: 1000 } });
    const sub = throttler.scope$("a.test").subscribe();
    throttler.recordBackoff("a.test", { cause: "status 429" });
    throttler.recordBackoff("a.test", { cause: "status 429" });
    scheduler.flush();
    const kinds = events.filter((e) => e.type === "backoff" || e.type === "recovery")
      .map((e) =>
        e.type === "backoff"
          ? `${e.at} backoff ${e.delayMs} ${e.level} ${e.cause}`
          : e.type === "recovery"
          ? `${e.at} recovery ${e.delayMs} ${e.level}`
          : ""
      );
    expect(kinds).toEqual([
      "0 backoff 1000 1 status 429",
      "0 backoff 2000 2 status 429",
      "1000 recovery 1000 1",
      "2000 recovery 0 0",
    ]);
    sub.unsubscribe();
    expect(scheduler.actions).toEqual([]);
  });

  it("Throttler.delayScope() holds the scope uncapped, emits a hold, and rejects a bad duration", () => {
    const { throttler, events } = setup({ backoff: { maxDelayMs: 1000 } });
    throttler.delayScope("a.test", 600_000);
    expect(throttler.state("a.test")!.holdUntil).toBe(600_000);
    expect(events.find((e) => e.type === "hold")).toEqual({
      type: "hold",
      at: 0,
      scope: "a.test",
      until: 600_000,
      source: "delay-scope",
    });
    expect(throttler.waitMs(["a.test"])).toBeGreaterThanOrEqual(600_000);
    expect(() => throttler.delayScope("a.test", -1)).toThrow(RangeError);
    expect(() => throttler.delayScope("a.test", Number.NaN)).toThrow(/'ms'.*NaN/);
  });

  it("Throttler.reconcileQuota() corrects the window's use and the wait", () => {
    const t = setup({ scopes: { api: { quota: 10, windowMs: 1000, concurrency: 5 } } });
    const { scheduler, throttler } = t;
    send(t, [[0, { url: "http://a.test/", meta: { throttlingScopes: { api: 2 } } }]]);
    scheduler.flush();
    expect(throttler.state("api")!.quota).toEqual({ limit: 10, used: 2, resetsAt: 1000 });
    throttler.reconcileQuota("api", { remaining: 0 });
    expect(throttler.state("api")!.quota!.used).toBe(10);
    expect(throttler.waitMs(["api"], [1])).toBe(1000);
  });

  it("Throttler.recordAnnounced() emits announced, and a ratelimit hold when the budget is spent", () => {
    const t = setup();
    const { scheduler, throttler, events } = t;
    scheduler.schedule(() => {
      throttler.recordAnnounced("a.test", {
        limit: 10,
        windowMs: 5_000,
        remaining: 4,
        resetInMs: 2_000,
      });
      throttler.recordAnnounced("a.test", { remaining: 0, resetInMs: 3_000, ignored: ["x: 1"] });
    }, 100);
    scheduler.flush();
    expect(events.filter((e) => e.type === "announced" || e.type === "hold")).toEqual([
      {
        type: "announced",
        at: 100,
        scope: "a.test",
        limit: 10,
        windowMs: 5_000,
        remaining: 4,
        resetAt: 2_100,
        ignored: undefined,
      },
      {
        type: "announced",
        at: 100,
        scope: "a.test",
        limit: undefined,
        windowMs: undefined,
        remaining: 0,
        resetAt: 3_100,
        ignored: ["x: 1"],
      },
      { type: "hold", at: 100, scope: "a.test", until: 3_100, source: "ratelimit" },
    ]);
    expect(throttler.state("a.test")).toMatchObject({
      backoffLevel: 0,
      holdUntil: 3_100,
      quota: { limit: 10, used: 10, resetsAt: 3_100 },
    });
  });

  it("Throttler.recordAnnounced() leaves a manager without recordAnnounced alone", () => {
    const t = setup({ scopes: { "a.test": { quota: 5 } } }, { scopeManager: fixedWindowManager() });
    t.throttler.recordAnnounced("a.test", { remaining: 0, resetInMs: 3_000 });
    expect(t.throttler.waitMs(["a.test"])).toBe(0);
    expect(t.events.filter((e) => e.type === "hold")).toEqual([]);
  });

  it("Throttler.setBaseDelay() and setConcurrency() change a scope's limits", () => {
    const { throttler } = setup();
    throttler.setBaseDelay("a.test", 250);
    throttler.setConcurrency("a.test", 3);
    expect(throttler.state("a.test")).toMatchObject({
      delayMs: 250,
      baseDelayMs: 250,
      concurrency: 3,
    });
  });
});

describe("Throttler scope eviction", () => {
  it("Throttler evicts the least recently used idle scopes above scopeLimit", () => {
    const t = setup({ scopeLimit: 2 });
    send(t, [0, 1, 2, 3, 4].map((i) => [i * 10, `http://s${i}.test/`] as const));
    t.scheduler.flush();
    const gone = evicted(t.events);
    // Oldest first, and never the one just used.
    expect(gone.slice(0, 2)).toEqual(["s0.test:limit", "s1.test:limit"]);
    expect(gone).not.toContain("s4.test:limit");
    expect(t.throttler.scopeCount).toBeLessThanOrEqual(3);
    expect(t.throttler.state("s0.test")).toBeUndefined();
    expect(t.throttler.state("s4.test")).toBeDefined();
  });

  it("Throttler never evicts a scope in flight, in backoff, in a hold or watched", () => {
    const t = setup({ scopeLimit: 1, backoff: { windowMs: 0 } });
    const { scheduler, throttler } = t;
    const keep = setup({ scopeLimit: 1 });
    // busy.test in flight for 1000 ms; held.test in a hold (no backoff level with window 0).
    send(t, [[0, "http://busy.test/"]], 1000);
    throttler.recordBackoff("held.test", { holdMs: 5000 });
    expect(throttler.state("held.test")).toMatchObject({ backoffLevel: 0, holdUntil: 5000 });
    const watch = throttler.scope$("watched.test").subscribe();
    send(t, [10, 20, 30, 40].map((i) => [i, `http://x${i}.test/`] as const));
    let gone: string[] = [];
    scheduler.schedule(() => {
      gone = evicted(t.events);
      expect(throttler.state("busy.test")?.active).toBe(1);
    }, 500);
    scheduler.flush();
    expect(gone).not.toContain("busy.test:limit");
    expect(gone).not.toContain("held.test:limit");
    expect(gone).not.toContain("watched.test:limit");
    expect(gone.length).toBeGreaterThan(0);
    expect(evicted(t.events)).not.toContain("watched.test:limit");
    watch.unsubscribe();
    // Backoff level > 0 keeps a scope too.
    keep.throttler.recordBackoff("slow.test");
    send(keep, [10, 20, 30].map((i) => [i, `http://y${i}.test/`] as const));
    keep.scheduler.flush();
    expect(evicted(keep.events)).not.toContain("slow.test:limit");
    expect(keep.throttler.state("slow.test")?.backoffLevel).toBeGreaterThan(0);
  });

  it("Throttler rebuilds an evicted scope from its configuration", () => {
    const t = setup({ scopeLimit: 1, scopes: { "s0.test": { delayMs: 100, jitter: 0 } } });
    const { scheduler, throttler, events } = t;
    throttler.setBaseDelay("s0.test", 5000);
    // s1 and s2 come after s0's 5 s delay has passed: until then s0 is kept.
    send(t, [[0, "http://s0.test/"], [6000, "http://s1.test/"], [6010, "http://s2.test/"]]);
    scheduler.flush();
    expect(evicted(events)).toContain("s0.test:limit");
    expect(throttler.state("s0.test")).toBeUndefined();
    send(t, [[0, "http://s0.test/"]]);
    scheduler.flush();
    expect(throttler.state("s0.test")).toMatchObject({ delayMs: 100, baseDelayMs: 100 });
    expect(events.filter((e) => e.type === "scope-created" && e.scope === "s0.test")).toHaveLength(
      2,
    );
  });

  it("Throttler evicts scopes idle longer than scopeMaxIdleMs", () => {
    const t = setup({ scopeLimit: 0, scopeMaxIdleMs: 1000 });
    const hot = Array.from({ length: 1100 }, (_, i) => [2000, `http://hot.test/${i}`] as const);
    send(t, [[0, "http://idle.test/"], ...hot]);
    t.scheduler.flush();
    expect(evicted(t.events)).toEqual(["idle.test:idle"]);
    expect(t.throttler.state("hot.test")).toBeDefined();
  });
  it("Throttler evicts an idle scope also when a busier scope was created before it", () => {
    const t = setup({ scopeLimit: 0, scopeMaxIdleMs: 1000 });
    const hot = Array.from({ length: 1100 }, (_, i) => [2000, `http://hot.test/${i}`] as const);
    send(t, [[0, "http://hot.test/first"], [1, "http://idle.test/"], ...hot]);
    t.scheduler.flush();
    expect(evicted(t.events)).toEqual(["idle.test:idle"]);
  });
});
