import { map, mergeMap, type Observable } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { describe, expect, it } from "vitest";
import {
  createSimulatedSite,
  type SimulatedResponse,
  type SimulatedSiteOptions,
} from "../lib/sim/simulated_site.ts";

function testScheduler(): TestScheduler {
  return new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
}

const BASE = "http://site.test";

describe("createSimulatedSite()", () => {
  it("createSimulatedSite() answers a scripted arrival pattern with exact statuses at exact virtual times", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({ ratePerSec: 10, burst: 3, latencyMs: 50, scheduler });
    scheduler.run(({ cold, expectObservable }) => {
      // Four at 0 (burst 3: the fourth is refused), then one at 102 and one at 202:
      // each finds just over one token refilled.
      const arrivals = cold("(abcd) 96ms e 99ms f|");
      const statuses = arrivals.pipe(
        mergeMap((id) => site.download(`${BASE}/${id}`)),
        map((r) => `${r.url.slice(-1)}${r.status}`),
      );
      expectObservable(statuses).toBe("50ms (abcd) 96ms e 99ms (f|)", {
        a: "a200",
        b: "b200",
        c: "c200",
        d: "d429",
        e: "e200",
        f: "f200",
      });
    });
    const stats = site.stats();
    expect(stats.log).toEqual([
      { atMs: 0, path: "/a", status: 200 },
      { atMs: 0, path: "/b", status: 200 },
      { atMs: 0, path: "/c", status: 200 },
      { atMs: 0, path: "/d", status: 429 },
      { atMs: 102, path: "/e", status: 200 },
      { atMs: 202, path: "/f", status: 200 },
    ]);
    expect(stats.arrivals).toEqual([0, 0, 0, 0, 102, 202]);
    expect(stats.byStatus).toEqual({ 200: 5, 429: 1 });
    expect(stats.rejected).toBe(1);
    expect(stats.maxInFlight).toBe(4);
    expect(stats.inFlight).toBe(0);
  });

  it("createSimulatedSite() refuses an arrival 1 ms before the next token and admits it on time", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({
      ratePerSec: 4,
      burst: 1,
      latencyMs: 10,
      rejectLatencyMs: 0,
      retryAfter: true,
      scheduler,
    });
    scheduler.run(({ cold, expectObservable }) => {
      const out = cold("a 248ms b 0ms c|").pipe(
        mergeMap(() => site.download(`${BASE}/`)),
        map((r) => [r.status, r.headers["retry-after"]]),
      );
      // a at 0 (200 at 10), b at 249 (429 at once, a token in 1 ms), c at 250 (200 at 260).
      expectObservable(out).toBe("10ms a 238ms b 10ms (c|)", {
        a: [200, undefined],
        b: [429, "1"],
        c: [200, undefined],
      });
    });
  });

  it("createSimulatedSite() sends no Retry-After on a 429 unless asked", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({ ratePerSec: 1, burst: 1, latencyMs: 5, scheduler });
    const seen: SimulatedResponse[] = [];
    site.download(`${BASE}/1`).subscribe((r) => seen.push(r));
    site.download(`${BASE}/2`).subscribe((r) => seen.push(r));
    scheduler.flush();
    expect(seen).toEqual([
      { status: 200, headers: {}, url: `${BASE}/1` },
      { status: 429, headers: {}, url: `${BASE}/2` },
    ]);
  });

  it("createSimulatedSite() caps concurrency with 503 and an HTTP-date Retry-After on its clock", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({
      ratePerSec: Infinity,
      burst: 1,
      latencyMs: 50,
      maxConcurrency: 2,
      rejectLatencyMs: 1,
      scheduler,
    });
    scheduler.run(({ cold, expectObservable }) => {
      // a, b hold both slots until 50; c is refused; d at 51 finds a slot free.
      const out = cold("(abc) 46ms d|").pipe(
        mergeMap((id) => site.download({ url: `${BASE}/${id}` })),
        map((r) => `${r.status} ${r.headers["retry-after"] ?? "-"}`),
      );
      expectObservable(out).toBe("1ms c 48ms (ab) 47ms (d|)", {
        a: "200 -",
        b: "200 -",
        c: "503 Thu, 01 Jan 1970 00:00:01 GMT",
        d: "200 -",
      });
    });
    expect(site.stats().byStatus).toEqual({ 200: 3, 503: 1 });
    expect(site.stats().maxInFlight).toBe(3);
  });

  it("createSimulatedSite() frees a slot before emitting, so a request sent from next is admitted", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({
      ratePerSec: Infinity,
      burst: 1,
      latencyMs: 10,
      maxConcurrency: 1,
      scheduler,
    });
    const statuses: [number, number][] = [];
    site.download(`${BASE}/1`).subscribe((first) => {
      statuses.push([scheduler.now(), first.status]);
      site.download(`${BASE}/2`).subscribe((second) => {
        statuses.push([scheduler.now(), second.status]);
      });
    });
    scheduler.flush();
    expect(statuses).toEqual([
      [10, 200],
      [20, 200],
    ]);
  });

  it("createSimulatedSite() adds RateLimit fields when asked", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({
      ratePerSec: 2,
      burst: 4,
      latencyMs: 0,
      rateLimitHeaders: true,
      scheduler,
    });
    const seen: Readonly<Record<string, string>>[] = [];
    site.download(`${BASE}/`).subscribe((r) => seen.push(r.headers));
    scheduler.flush();
    // One token spent of four: 0.5 s to refill it.
    expect(seen).toEqual([{
      "ratelimit-policy": '"default";q=4;w=2',
      ratelimit: '"default";r=3;t=1',
    }]);
  });

  it("createSimulatedSite() errors with the signal's reason when aborted in flight, and frees the slot", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({
      ratePerSec: Infinity,
      burst: 1,
      latencyMs: 50,
      maxConcurrency: 1,
      scheduler,
    });
    const controller = new AbortController();
    const reason = new Error("stop");
    scheduler.run(({ cold, expectObservable }) => {
      scheduler.schedule(() => controller.abort(reason), 20);
      expectObservable(site.download(`${BASE}/1`, { signal: controller.signal })).toBe(
        "20ms #",
        undefined,
        reason,
      );
      // The aborted request's slot is free again at 21.
      expectObservable(
        cold("21ms a|").pipe(
          mergeMap(() => site.download(`${BASE}/2`)),
          map((r) => r.status),
        ),
      ).toBe("71ms (a|)", { a: 200 });
    });
    expect(site.stats()).toMatchObject({ requests: 2, aborted: 1, inFlight: 0, rejected: 0 });
  });

  it("createSimulatedSite() errors with an AbortError and counts nothing when the signal is already aborted", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({ ratePerSec: 1, burst: 1, latencyMs: 5, scheduler });
    let error: unknown;
    site.download(`${BASE}/`, { signal: AbortSignal.abort() }).subscribe({
      error: (e) => (error = e),
    });
    expect(error).toBeInstanceOf(DOMException);
    expect((error as DOMException).name).toBe("AbortError");
    expect(site.stats().requests).toBe(0);
  });

  it("createSimulatedSite() abandons a request that is unsubscribed before its answer", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({
      ratePerSec: Infinity,
      burst: 1,
      latencyMs: 50,
      maxConcurrency: 1,
      scheduler,
    });
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(site.download(`${BASE}/1`), "^ 9ms !").toBe("");
      expectObservable(
        cold("10ms a|").pipe(
          mergeMap(() => site.download(`${BASE}/2`)),
          map((r) => r.status),
        ),
      ).toBe("60ms (a|)", { a: 200 });
    });
    expect(site.stats()).toMatchObject({ requests: 2, aborted: 1, inFlight: 0 });
  });

  it("createSimulatedSite() keeps each download cold: one arrival per subscription", () => {
    const scheduler = testScheduler();
    const site = createSimulatedSite({ ratePerSec: 1, burst: 2, latencyMs: 5, scheduler });
    const once: Observable<SimulatedResponse> = site.download(`${BASE}/x`);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) once.subscribe((r) => statuses.push(r.status));
    scheduler.flush();
    expect(statuses).toEqual([200, 200, 429]);
    expect(site.stats().requests).toBe(3);
  });

  it("createSimulatedSite() rejects out-of-range options, naming them", () => {
    const scheduler = testScheduler();
    const base: SimulatedSiteOptions = { ratePerSec: 1, burst: 1, latencyMs: 0, scheduler };
    expect(() => createSimulatedSite({ ...base, ratePerSec: 0 })).toThrow(
      new RangeError(
        "Cannot create simulated site as 'ratePerSec' must be > 0: current value is 0",
      ),
    );
    expect(() => createSimulatedSite({ ...base, burst: 0.5 })).toThrow(
      /'burst' must be a finite number >= 1: current value is 0.5/,
    );
    expect(() => createSimulatedSite({ ...base, latencyMs: -1 })).toThrow(/'latencyMs'/);
    expect(() => createSimulatedSite({ ...base, maxConcurrency: 0 })).toThrow(/'maxConcurrency'/);
    expect(() => createSimulatedSite({ ...base, scheduler: undefined as never })).toThrow(
      TypeError,
    );
  });
});
