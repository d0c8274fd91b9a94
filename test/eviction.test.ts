import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { concat, from, map, mergeMap, of, Subject, timer } from "rxjs";
import type { ThrottleEvent } from "../lib/events.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { ThrottlingScopeManager } from "../lib/managers/scope_manager.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { recordingDownload, testScheduler } from "./_helpers/test_scheduler.ts";

function setup(settings: ThrottlerSettingsInput) {
  const scheduler = testScheduler();
  // The store's rules on the reference's scopes (a new scope is its configuration);
  // adaptive scopes: the test that says so.
  const throttler = createThrottler<string>({ adaptive: false, ...settings }, {
    scheduler,
    random: () => 0.5,
  });
  const events: ThrottleEvent[] = [];
  let peakOverBusy = -Infinity;
  throttler.events$.subscribe((e) => {
    events.push(e);
    // Live scopes beyond those with a request in flight, after every event.
    peakOverBusy = Math.max(peakOverBusy, throttler.scopeCount - throttler.active);
  });
  const evicted = () =>
    events.flatMap((e) => e.type === "scope-evicted" ? [`${e.scope}:${e.reason}`] : []);
  return { scheduler, throttler, events, evicted, peak: () => peakOverBusy };
}

/** Each URL at its time, through one gate with a download of `latency` ms. */
function send(
  t: ReturnType<typeof setup>,
  arrivals: readonly (readonly [number, string])[],
  latency: (url: string) => number = () => 10,
) {
  const rec = recordingDownload<string>(t.scheduler, latency);
  from(arrivals).pipe(
    mergeMap(([at, url]) => timer(at, t.scheduler).pipe(map(() => url))),
    throttleByScope(t.throttler, rec.download),
  ).subscribe();
  return rec;
}

describe("Throttler scope eviction (virtual time)", () => {
  it("Throttler evicts scopes idle longer than scopeMaxIdleMs, not busy ones", () => {
    const t = setup({ scopeLimit: 0, scopeMaxIdleMs: 1000 });
    // idle.test is used once; slow.test stays in flight; 1,100 others make the sweep run.
    send(
      t,
      [[0, "http://idle.test/"], [0, "http://slow.test/"]],
      (u) => u.includes("slow") ? 60_000 : 10,
    );
    send(t, Array.from({ length: 1100 }, (_, i) => [5000 + i, `http://x${i}.test/`] as const));
    t.scheduler.flush();
    expect(t.evicted()).toContain("idle.test:idle");
    expect(t.evicted()).not.toContain("slow.test:idle");
  });

  it("Throttler keeps the scope count within scopeLimit plus the scopes in flight", () => {
    const t = setup({ scopeLimit: 50, concurrentRequests: 20 });
    const arrivals = Array.from({ length: 2000 }, (_, i) => [i, `http://h${i}.test/`] as const);
    const rec = send(t, arrivals, (u) => 5 + (u.length % 40));
    t.scheduler.flush();
    expect(rec.sends).toHaveLength(2000);
    expect(t.peak()).toBeLessThanOrEqual(50);
    expect(t.throttler.scopeCount).toBeLessThanOrEqual(50);
    expect(t.evicted().length).toBeGreaterThanOrEqual(1950);
    expect(t.evicted().every((e) => e.endsWith(":limit"))).toBe(true);
  });

  it("Throttler keeps the limit for a batch given all at once (requests queued behind the global cap)", () => {
    const t = setup({ scopeLimit: 30, concurrentRequests: 4 });
    const rec = recordingDownload<string>(t.scheduler, () => 10);
    from(Array.from({ length: 500 }, (_, i) => `http://b${i}.test/`))
      .pipe(throttleByScope(t.throttler, rec.download)).subscribe();
    t.scheduler.flush();
    expect(rec.sends).toHaveLength(500);
    expect(t.peak()).toBeLessThanOrEqual(30);
  });

  it("Throttler never evicts an adaptive scope within a window of its last cut, and rebuilds it afterwards", () => {
    const t = setup({ adaptive: true, scopeLimit: 2, scopeMaxIdleMs: 100 });
    t.throttler.recordBackoff("cut.test"); // nothing measured: one ordinary step, 1 s
    expect(t.throttler.state("cut.test")!.delayMs).toBe(1_000);
    send(t, Array.from({ length: 50 }, (_, i) => [i, `http://x${i}.test/`] as const));
    t.scheduler.flush();
    expect(t.evicted().map((e) => e.split(":")[0])).not.toContain("cut.test");
    // A window (60 s) later it may go, and comes back as a new scope.
    send(t, Array.from({ length: 50 }, (_, i) => [61_000 + i, `http://y${i}.test/`] as const));
    t.scheduler.flush();
    expect(t.evicted().map((e) => e.split(":")[0])).toContain("cut.test");
    send(t, [[70_000, "http://cut.test/"]]);
    t.scheduler.flush();
    expect(t.throttler.state("cut.test")).toMatchObject({ delayMs: 0, concurrency: 2 });
  });

  it("Throttler never evicts a scope in a hold, in backoff or watched", () => {
    const t = setup({ scopeLimit: 2, scopeMaxIdleMs: 100 });
    t.throttler.recordBackoff("backed.test"); // level 1, recovers after the backoff window
    t.throttler.delayScope("held.test", 1_000_000); // a hold (and a level)
    const watch = t.throttler.scope$("watched.test").subscribe();
    send(t, Array.from({ length: 1200 }, (_, i) => [i, `http://x${i}.test/`] as const));
    t.scheduler.flush();
    const gone = t.evicted().map((e) => e.split(":")[0]);
    expect(gone).not.toContain("backed.test");
    expect(gone).not.toContain("held.test");
    expect(gone).not.toContain("watched.test");
    expect(t.throttler.state("held.test")!.holdUntil).toBe(1_000_000);
    watch.unsubscribe();
  });

  it("Throttler rebuilds an evicted scope from its configuration", () => {
    const t = setup({ scopeLimit: 1, scopes: { "a.test": { delayMs: 100, jitter: 0 } } });
    send(t, [[0, "http://a.test/"]]);
    t.scheduler.flush();
    t.throttler.setBaseDelay("a.test", 5000);
    t.throttler.setConcurrency("a.test", 1);
    expect(t.throttler.state("a.test")).toMatchObject({ baseDelayMs: 5000, concurrency: 1 });
    // After a.test's 100 ms delay has passed: until then it is kept.
    send(t, [[200, "http://b.test/"], [210, "http://c.test/"]]);
    t.scheduler.flush();
    expect(t.evicted()).toContain("a.test:limit");
    expect(t.throttler.state("a.test")).toBeUndefined();
    send(t, [[10, "http://a.test/again"]]);
    t.scheduler.flush();
    expect(t.events.filter((e) => e.type === "scope-created" && e.scope === "a.test"))
      .toHaveLength(2);
    expect(t.throttler.state("a.test")).toMatchObject({ baseDelayMs: 100, concurrency: 8 });
  });
  it("Throttler gives a new scope nothing of an evicted scope's state (its entry may be reused)", () => {
    const t = setup({ scopeLimit: 1, scopes: { "a.test": { delayMs: 100, jitter: 0 } } });
    send(t, [[0, "http://a.test/"]]);
    t.scheduler.flush();
    t.throttler.setBaseDelay("a.test", 5000, { floor: true });
    t.throttler.setConcurrency("a.test", 1);
    // b.test evicts a.test, c.test evicts b.test: c.test may get a.test's old entry.
    const rec = send(t, [
      [200, "http://b.test/"],
      [210, "http://c.test/1"],
      [210, "http://c.test/2"],
    ]);
    t.scheduler.flush();
    expect(t.evicted()).toEqual(["a.test:limit", "b.test:limit"]);
    expect(t.throttler.state("c.test")).toMatchObject({
      scope: "c.test",
      delayMs: 0,
      baseDelayMs: 0,
      concurrency: 8,
      backoffLevel: 0,
      holdUntil: 0,
      nextSendAt: 0,
    });
    // Both c.test requests went at once: no 5 s floor, no concurrency of 1.
    const cSends = rec.sends.filter((s) => s.request.includes("c.test")).map((s) => s.at);
    expect(cSends).toHaveLength(2);
    expect(cSends[1]).toBe(cSends[0]);
  });

  it("Throttler.manager() hands out a manager that stays its scope's after eviction", () => {
    const t = setup({ scopeLimit: 1 });
    const m = t.throttler.manager("a.test");
    send(t, [[10, "http://b.test/"], [20, "http://c.test/"]], () => 1000);
    t.scheduler.schedule(() => {
      expect(t.evicted()).toContain("a.test:limit");
      expect(t.throttler.state("c.test")?.active).toBe(1);
      expect(m.state!(500)).toMatchObject({ scope: "a.test", active: 0 });
    }, 500);
    t.scheduler.flush();
  });

  it("Throttler keeps the timer of a scope that took the entry of one evicted while it was pumped", () => {
    // s.test's second request waits for the first (concurrency 1, no delay)
    // and answers at once (synchronously) when the pump starts it at 50; the
    // first pipeline then completes and concat starts the second, whose
    // t.test takes s.test's place (limit 1, u.test busy) and its entry.
    // t.test/2 must go when t.test's delay has passed (150), not when
    // t.test/1 finishes: the pump of s.test, returning, cleared the timer
    // t.test had just armed on the reused entry.
    const scheduler = testScheduler();
    const throttler = createThrottler<string>({
      scopeLimit: 1,
      scopes: {
        "s.test": { concurrency: 1, delayMs: 0, jitter: 0 },
        "t.test": { concurrency: 2, delayMs: 100, jitter: 0 },
      },
    }, { scheduler, random: () => 0.5 });
    const evicted: string[] = [];
    throttler.events$.subscribe((e) => {
      if (e.type === "scope-evicted") evicted.push(`${e.at} ${e.scope}`);
    });
    const latency: Record<string, number> = {
      "http://u.test/1": 5000,
      "http://s.test/1": 50,
      "http://t.test/1": 5000,
      "http://t.test/2": 10,
    };
    const sends: string[] = [];
    const download = (url: string) => {
      sends.push(`${scheduler.now()} ${url}`);
      const ms = latency[url];
      return ms === undefined
        ? of({ status: 200 })
        : timer(ms, scheduler).pipe(map(() => ({ status: 200 })));
    };
    from(["http://u.test/1"]).pipe(throttleByScope(throttler, download)).subscribe();
    concat(
      from(["http://s.test/1", "http://s.test/2"]).pipe(throttleByScope(throttler, download)),
      from(["http://t.test/1", "http://t.test/2"]).pipe(throttleByScope(throttler, download)),
    ).subscribe();
    scheduler.flush();
    expect(evicted).toContain("50 s.test");
    expect(sends).toEqual([
      "0 http://u.test/1",
      "0 http://s.test/1",
      "50 http://s.test/2",
      "50 http://t.test/1",
      "150 http://t.test/2",
    ]);
  });

  it("Throttler's sweeps look at a bounded number of scopes per request when the old ones are busy", () => {
    const scheduler = testScheduler();
    let looked = 0;
    const throttler = createThrottler<string>({ scopeLimit: 10, concurrentRequests: 5000 }, {
      scheduler,
      random: () => 0.5,
      scopeManager: (ctx) => {
        const m = new ThrottlingScopeManager(ctx);
        const isIdle = m.isIdle.bind(m);
        m.isIdle = (now, maxIdleMs) => {
          looked++;
          return isIdle(now, maxIdleMs);
        };
        return m;
      },
    });
    // 4,000 hosts, all in flight for 10 s: every sweep meets busy scopes only.
    const rec = recordingDownload<string>(scheduler, () => 10_000);
    from(Array.from({ length: 4000 }, (_, i) => `http://h${i}.test/`))
      .pipe(throttleByScope(throttler, rec.download)).subscribe();
    scheduler.flush();
    expect(rec.sends).toHaveLength(4000);
    // Walking every busy scope per request would be millions of looks.
    expect(looked / 4000).toBeLessThan(100);
    expect(throttler.scopeCount).toBeLessThanOrEqual(10 + 1);
  });
});

const HOSTS = ["a.test", "b.test", "c.test", "d.test", "e.test", "f.test"] as const;

const churn = fc.record({
  configs: fc.tuple(...HOSTS.map(() =>
    fc.record({
      concurrency: fc.integer({ min: 1, max: 3 }),
      delayMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 })),
    })
  )),
  scopeLimit: fc.integer({ min: 1, max: 3 }),
  cap: fc.integer({ min: 1, max: 6 }),
  requests: fc.array(
    fc.record({
      at: fc.integer({ min: 0, max: 1500 }),
      host: fc.integer({ min: 0, max: HOSTS.length - 1 }),
      // -1: the download answers synchronously.
      latency: fc.integer({ min: -1, max: 200 }),
      // A request for this host given synchronously from the outcome, if any.
      then: fc.option(fc.integer({ min: 0, max: HOSTS.length - 1 }), { nil: undefined }),
    }),
    { minLength: 1, maxLength: 50 },
  ),
});

describe("Throttler eviction properties", () => {
  it("Throttler keeps concurrency, delays and configurations while a tiny scopeLimit evicts and reuses scopes", () => {
    let evictions = 0;
    fc.assert(
      fc.property(churn, ({ configs, scopeLimit, cap, requests }) => {
        const scheduler = testScheduler();
        const throttler = createThrottler<string>({
          adaptive: false, // each scope's configuration is what must be left (no slow start)
          concurrentRequests: cap,
          scopeLimit,
          scopes: Object.fromEntries(HOSTS.map((h, i) => [h, { ...configs[i]!, jitter: 0 }])),
        }, { scheduler, random: () => 0.5 });
        // Every gap is checked, evictions or not: a scope whose delay has not
        // passed is kept (isIdle), so eviction never shortens a gap.
        throttler.events$.subscribe((e) => {
          if (e.type === "scope-evicted") evictions++;
        });
        const spec = new Map<string, (typeof requests)[number]>();
        const sends: { host: string; at: number }[] = [];
        const inFlight = new Map<string, number>();
        let total = 0;
        let given = 0;
        let done = 0;
        const source = new Subject<string>();
        const give = (host: number, r: (typeof requests)[number]) => {
          const url = `http://${HOSTS[host]}/${given++}`;
          spec.set(url, r);
          source.next(url);
        };
        const download = (url: string) => {
          const host = new URL(url).hostname;
          sends.push({ host, at: scheduler.now() });
          const n = (inFlight.get(host) ?? 0) + 1;
          inFlight.set(host, n);
          total++;
          const i = HOSTS.indexOf(host as (typeof HOSTS)[number]);
          expect(n).toBeLessThanOrEqual(configs[i]!.concurrency);
          expect(total).toBeLessThanOrEqual(cap);
          const end = () => {
            inFlight.set(host, inFlight.get(host)! - 1);
            total--;
            return { status: 200 };
          };
          const latency = spec.get(url)!.latency;
          return latency < 0 ? of(null).pipe(map(end)) : timer(latency, scheduler).pipe(map(end));
        };
        source.pipe(throttleByScope(throttler, download)).subscribe((o) => {
          done++;
          const r = spec.get(o.request)!;
          if (r.then !== undefined) give(r.then, { ...r, then: undefined });
        });
        for (const r of requests) scheduler.schedule(() => give(r.host, r), r.at);
        scheduler.flush();

        expect(done).toBe(given);
        expect([throttler.active, throttler.held]).toEqual([0, 0]);
        HOSTS.forEach((host, i) => {
          const mine = sends.filter((x) => x.host === host);
          for (let k = 1; k < mine.length; k++) {
            expect(mine[k]!.at - mine[k - 1]!.at).toBeGreaterThanOrEqual(configs[i]!.delayMs);
          }
        });
        // What is left in memory is each scope's own configuration.
        for (const st of throttler.states()) {
          const c = configs[HOSTS.indexOf(st.scope as (typeof HOSTS)[number])]!;
          expect([st.delayMs, st.concurrency, st.active]).toEqual([c.delayMs, c.concurrency, 0]);
        }
      }),
      { numRuns: 300 },
    );
    // The runs did evict (and so reuse entries) plenty.
    expect(evictions).toBeGreaterThan(1000);
  });
});
