import { describe, expect, it } from "vitest";
import { Subject } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import {
  type QueueThrottleView,
  type QueueWarning,
  RequestQueue,
  type RequestQueueOptions,
  type RequestQueueStats,
} from "../lib/queue/request_queue.ts";
import { InvalidRequestError } from "../lib/http/download_errors.ts";
import type { RequestObject } from "../lib/request.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";

/**
 * A stand-in for the throttler: per-scope "blocked until" times, per-scope
 * in-flight counts and concurrency caps, a global slot count and quota shares.
 */
class FakeView implements QueueThrottleView {
  readonly changes$ = new Subject<unknown>();
  readonly until = new Map<string, number>();
  readonly active = new Map<string, number>();
  readonly cap = new Map<string, number>();
  readonly share = new Map<string, number>();
  slots = Infinity;
  inFlight = 0;
  constructor(readonly now: () => number = () => 0) {}
  waitMs(scopes: readonly string[]): number {
    let w = 0;
    for (const s of scopes) {
      if ((this.active.get(s) ?? 0) >= (this.cap.get(s) ?? Infinity)) return Infinity;
      w = Math.max(w, (this.until.get(s) ?? 0) - this.now());
    }
    return w;
  }
  load(scopes: readonly string[]): number {
    return scopes.reduce((n, s) => n + (this.active.get(s) ?? 0), 0);
  }
  quotaShare(scopes: readonly string[]): number {
    return Math.max(0, ...scopes.map((s) => this.share.get(s) ?? 0));
  }
  freeSlots(): number {
    return this.slots - this.inFlight;
  }
  sent(url: string): void {
    const s = new URL(url).host;
    this.active.set(s, (this.active.get(s) ?? 0) + 1);
    this.inFlight++;
  }
  done(url: string): void {
    const s = new URL(url).host;
    this.active.set(s, (this.active.get(s) ?? 1) - 1);
    this.inFlight--;
    this.changes$.next([s]);
  }
}

/** Enqueues everything, then drains with no limits and returns the order. */
function drain<R>(
  enqueue: (q: RequestQueue<R>) => void,
  options: RequestQueueOptions<R> = {},
): R[] {
  const q = new RequestQueue<R>(options);
  enqueue(q);
  const out: R[] = [];
  q.requests$.subscribe((r) => {
    out.push(r);
    q.markDone(r);
  });
  return out;
}

const u = (path: string, host = "a.example") => `https://${host}/${path}`;

describe("RequestQueue order", () => {
  it("RequestQueue emits regular requests LIFO by default (depth-first)", () => {
    expect(drain<string>((q) => ["1", "2", "3"].forEach((p) => q.enqueue(u(p))))).toEqual([
      u("3"),
      u("2"),
      u("1"),
    ]);
  });

  it("RequestQueue emits regular requests FIFO when fifo is set", () => {
    expect(drain<string>((q) => ["1", "2", "3"].forEach((p) => q.enqueue(u(p))), { fifo: true }))
      .toEqual([u("1"), u("2"), u("3")]);
  });

  it("RequestQueue emits higher priority first, then LIFO within a priority", () => {
    const req = (p: string, priority: number): RequestObject => ({ url: u(p), priority });
    const out = drain<RequestObject>((q) => {
      q.enqueue(req("low1", -1));
      q.enqueue(req("mid1", 0));
      q.enqueue(req("high", 5));
      q.enqueue(req("mid2", 0));
      q.enqueue(req("low2", -1));
    });
    expect(out.map((r) => r.url)).toEqual([u("high"), u("mid2"), u("mid1"), u("low2"), u("low1")]);
  });

  it("RequestQueue emits start requests in the given order, after regular requests of equal priority", () => {
    const out = drain<RequestObject>((q) => {
      q.enqueue({ url: u("s1") }, { start: true });
      q.enqueue({ url: u("s2") }, { start: true });
      q.enqueue({ url: u("r1") });
      q.enqueue({ url: u("s3"), priority: 1 }, { start: true });
      q.enqueue({ url: u("r2") });
      q.enqueue({ url: u("r0"), priority: -1 });
    });
    expect(out.map((r) => r.url)).toEqual([u("s3"), u("r2"), u("r1"), u("s1"), u("s2"), u("r0")]);
  });

  it("RequestQueue takes start requests from the start option in order", () => {
    const out = drain<string>(() => {}, { start: [u("1"), u("2"), u("3", "b.example")] });
    expect(out).toEqual([u("1"), u("2"), u("3", "b.example")]);
  });

  it("RequestQueue crawls breadth-first with depthPriority 1 and fifo", () => {
    const at = (p: string, depth: number): RequestObject => ({ url: u(p), meta: { depth } });
    const out = drain<RequestObject>((q) => {
      q.enqueue(at("d2a", 2));
      q.enqueue(at("d1a", 1));
      q.enqueue(at("d0", 0));
      q.enqueue(at("d1b", 1));
      q.enqueue(at("d2b", 2));
    }, { fifo: true, depthPriority: 1 });
    expect(out.map((r) => r.url)).toEqual([u("d0"), u("d1a"), u("d1b"), u("d2a"), u("d2b")]);
  });

  it("RequestQueue keeps the reference order across scopes when nothing else differs", () => {
    const out = drain<string>((q) => {
      q.enqueue(u("1", "a.example"));
      q.enqueue(u("2", "b.example"));
      q.enqueue(u("3", "c.example"));
    });
    expect(out).toEqual([u("3", "c.example"), u("2", "b.example"), u("1", "a.example")]);
  });

  it("RequestQueue in priority order ignores scopes and URLs may be replaced by a custom fingerprint", () => {
    const out = drain<{ id: number; priority: number }>((q) => {
      q.enqueue({ id: 1, priority: 0 });
      q.enqueue({ id: 2, priority: 3 });
      q.enqueue({ id: 1, priority: 9 });
    }, { order: "priority", fingerprint: (r) => String(r.id) });
    expect(out).toEqual([{ id: 2, priority: 3 }, { id: 1, priority: 0 }]);
  });
});

describe("RequestQueue dedupe", () => {
  it("RequestQueue.enqueue() drops duplicates by canonical URL and counts them", () => {
    const q = new RequestQueue<string | RequestObject>();
    expect(q.enqueue("https://A.example:443/x?b=2&a=1#top")).toBe(true);
    expect(q.enqueue("https://a.example/x?a=1&b=2")).toBe(false);
    expect(q.enqueue({ url: "https://a.example/x?a=1&b=2", method: "POST" })).toBe(true);
    expect(q.enqueue({ url: "https://a.example/x?a=1&b=2", method: "POST", body: "q" })).toBe(true);
    expect(q.enqueue({ url: "https://a.example/x?a=1&b=2", meta: { dontFilter: true } })).toBe(
      true,
    );
    expect(q.stats()).toMatchObject({ enqueued: 4, filtered: 1, pending: 4 });
  });

  it("RequestQueue.enqueue() keeps duplicates when dedupe is off", () => {
    const q = new RequestQueue<string>({ dedupe: false });
    q.enqueue(u("x"));
    expect(q.enqueue(u("x"))).toBe(true);
    expect(q.stats().filtered).toBe(0);
  });
});

describe("RequestQueue bad input", () => {
  it("RequestQueue.enqueue() rejects a request without a URL or with a malformed one, naming the field", () => {
    const q = new RequestQueue<unknown>();
    expect(() => q.enqueue({ method: "GET" })).toThrow(InvalidRequestError);
    expect(() => q.enqueue("not a url")).toThrow(
      /'url' is not an absolute URL: current value is "not a url"/,
    );
    expect(() => q.enqueue("mailto:x@example.com")).toThrow(/has no host/);
    try {
      q.enqueue(42);
    } catch (e) {
      expect((e as InvalidRequestError).field).toBe("url");
    }
    expect(q.stats()).toMatchObject({ rejected: 4, enqueued: 0, pending: 0 });
  });

  it("RequestQueue rejects bad options at construction", () => {
    expect(() => new RequestQueue({ depthPriority: NaN })).toThrow(/'depthPriority'/);
    expect(() => new RequestQueue({ order: "random" as "priority" })).toThrow(/'order'/);
    expect(() => new RequestQueue({ delayedRequestsWarnThreshold: -1 })).toThrow(
      /'delayedRequestsWarnThreshold'/,
    );
  });

  it("RequestQueue.markDone() refuses a request that is not in flight", () => {
    const q = new RequestQueue<string>();
    expect(() => q.markDone(u("x"))).toThrow(RangeError);
  });

  it("RequestQueue.requests$ refuses a second subscriber", () => {
    const q = new RequestQueue<string>();
    q.enqueue(u("x"));
    q.requests$.subscribe(() => {});
    let error: unknown;
    q.requests$.subscribe({ error: (e: unknown) => (error = e) });
    expect(String(error)).toMatch(/twice/);
  });
});

describe("RequestQueue throttling-aware", () => {
  function run(
    body: (ts: TestScheduler, view: FakeView, log: [number, string][]) => unknown,
  ): [number, string][] {
    const ts = new TestScheduler((a, b) => expect(a).toEqual(b));
    const log: [number, string][] = [];
    ts.run(() => {
      const view = new FakeView(() => ts.now());
      body(ts, view, log);
    });
    return log;
  }

  it("RequestQueue does not let a slow scope hold up a fast one", () => {
    const log = run((ts, view, log) => {
      view.until.set("slow.example", 1000);
      const q = new RequestQueue<RequestObject>({ view, scheduler: ts });
      q.enqueue({ url: u("1", "slow.example"), priority: 10 });
      q.enqueue({ url: u("1", "fast.example") });
      q.enqueue({ url: u("2", "fast.example") });
      q.requests$.subscribe((r) => {
        log.push([ts.now(), r.url]);
        q.markDone(r);
      });
      return q;
    });
    expect(log).toEqual([[0, u("2", "fast.example")], [0, u("1", "fast.example")], [
      1000,
      u("1", "slow.example"),
    ]]);
  });

  it("RequestQueue holds a throttlingDelayMs request aside while the ready ones go", () => {
    const log = run((ts, view, log) => {
      const q = new RequestQueue<RequestObject>({ view, scheduler: ts, fifo: true });
      q.enqueue({ url: u("delayed"), priority: 1, meta: { throttlingDelayMs: 500 } });
      q.enqueue({ url: u("r1") });
      q.enqueue({ url: u("r2") });
      expect(q.stats().delayed).toBe(1);
      q.requests$.subscribe((r) => log.push([ts.now(), r.url]));
      return q;
    });
    expect(log).toEqual([[0, u("r1")], [0, u("r2")], [500, u("delayed")]]);
  });

  it("RequestQueue lets a free scope through while a full-concurrency scope waits for a completion", () => {
    const view = new FakeView();
    view.cap.set("full.example", 1);
    const q = new RequestQueue<string>({ view, fifo: true });
    for (const p of ["1", "2", "3"]) q.enqueue(u(p, "full.example"));
    for (const p of ["1", "2"]) q.enqueue(u(p, "free.example"));
    const out: string[] = [];
    let completed = false;
    q.requests$.subscribe({
      next: (r) => {
        view.sent(r);
        out.push(r);
      },
      complete: () => (completed = true),
    });
    expect(out).toEqual([u("1", "full.example"), u("1", "free.example"), u("2", "free.example")]);
    expect(q.stats().blocked).toBe(2);
    view.done(u("1", "free.example"));
    q.markDone(u("1", "free.example"));
    expect(out.length).toBe(3);
    view.done(u("1", "full.example"));
    q.markDone(u("1", "full.example"));
    expect(out.at(-1)).toBe(u("2", "full.example"));
    for (const r of [u("2", "free.example"), u("2", "full.example"), u("3", "full.example")]) {
      view.done(r);
      q.markDone(r);
    }
    expect(out.length).toBe(5);
    expect(completed).toBe(true);
  });

  it("RequestQueue emits only as many requests as the gate has free slots", () => {
    const view = new FakeView();
    view.slots = 2;
    const q = new RequestQueue<string>({ view, fifo: true });
    for (const p of ["1", "2", "3", "4"]) q.enqueue(u(p, `h${p}.example`));
    const out: string[] = [];
    q.requests$.subscribe((r) => {
      view.sent(r);
      out.push(r);
    });
    expect(out.length).toBe(2);
    view.done(out[0] as string);
    q.markDone(out[0] as string);
    expect(out.length).toBe(3);
    expect(q.inFlight).toBe(2);
  });

  it("RequestQueue breaks ties by least-loaded scope set, then by larger quota share", () => {
    const view = new FakeView();
    view.active.set("busy.example", 3);
    view.share.set("big.example", 0.5);
    view.share.set("small.example", 0.1);
    const q = new RequestQueue<string>({ view, fifo: true });
    q.enqueue(u("1", "busy.example"));
    q.enqueue(u("1", "small.example"));
    q.enqueue(u("1", "big.example"));
    const out: string[] = [];
    q.requests$.subscribe((r) => out.push(r));
    expect(out).toEqual([u("1", "big.example"), u("1", "small.example"), u("1", "busy.example")]);
  });

  it("RequestQueue groups requests with several scopes into one scope set and waits for every scope", () => {
    const view = new FakeView();
    view.cap.set("b", 0);
    const q = new RequestQueue<RequestObject>({ view });
    q.enqueue({ url: u("ab"), meta: { throttlingScopes: ["b", "a"] } });
    q.enqueue({ url: u("a"), meta: { throttlingScopes: { a: 2 } } });
    const out: string[] = [];
    q.requests$.subscribe((r) => out.push(r.url));
    expect(out).toEqual([u("a")]);
    view.cap.delete("b");
    view.changes$.next(["b"]);
    expect(out).toEqual([u("a"), u("ab")]);
  });

  it("RequestQueue warns once when more requests than the threshold are held back", () => {
    const view = new FakeView();
    view.cap.set("a.example", 0);
    const q = new RequestQueue<string>({ view, delayedRequestsWarnThreshold: 2 });
    const warnings: QueueWarning[] = [];
    q.warnings$.subscribe((w) => warnings.push(w));
    q.enqueue(u("0"));
    q.requests$.subscribe();
    for (const p of ["1", "2", "3", "4"]) q.enqueue(u(p));
    expect(warnings.map((w) => w.code)).toEqual(["delayed-requests-threshold"]);
    expect(warnings[0]?.message).toMatch(/3 requests are held back/);
  });
});

describe("RequestQueue downloader-aware", () => {
  it("RequestQueue in downloader-aware order takes the scope with fewest active downloads, round-robin on ties", () => {
    const view = new FakeView();
    view.active.set("a.example", 1);
    const q = new RequestQueue<string>({ view, order: "downloader-aware", fifo: true });
    for (const h of ["a", "b", "c"]) for (const p of ["1", "2"]) q.enqueue(u(p, `${h}.example`));
    const out: string[] = [];
    q.requests$.subscribe((r) => {
      view.sent(r);
      out.push(new URL(r).host[0] + new URL(r).pathname);
    });
    // b and c (0 active) go first; then all have one active, and the rotation serves a.
    expect(out).toEqual(["b/1", "c/1", "a/1", "b/2", "c/2", "a/2"]);
  });

  it("RequestQueue in downloader-aware order ignores delays (the gate holds)", () => {
    const view = new FakeView();
    view.until.set("a.example", 10_000);
    const q = new RequestQueue<string>({ view, order: "downloader-aware" });
    q.enqueue(u("1"));
    const out: string[] = [];
    q.requests$.subscribe((r) => out.push(r));
    expect(out).toEqual([u("1")]);
  });
});

describe("RequestQueue lifecycle and stats", () => {
  it("RequestQueue.requests$ completes after a feedback loop when empty and nothing is in flight", () => {
    const q = new RequestQueue<string>({ start: [u("0")] });
    const seen: string[] = [];
    let completed = false;
    const pendingDone: string[] = [];
    q.requests$.subscribe({
      next: (r) => {
        seen.push(r);
        pendingDone.push(r);
      },
      complete: () => (completed = true),
    });
    // Responses arrive later: discovered links go in before markDone.
    while (pendingDone.length > 0) {
      const r = pendingDone.shift() as string;
      const n = Number(new URL(r).pathname.slice(1));
      if (n < 5) {
        q.enqueue(u(String(n + 1)));
        q.enqueue(u(String(n))); // a duplicate
      }
      expect(completed).toBe(false);
      q.markDone(r);
    }
    expect(seen).toEqual(["0", "1", "2", "3", "4", "5"].map((p) => u(p)));
    expect(completed).toBe(true);
    expect(q.stats()).toMatchObject({
      enqueued: 6,
      dequeued: 6,
      completed: 6,
      filtered: 5,
      inFlight: 0,
    });
  });

  it("RequestQueue.requests$ waits for an Observable of start requests to complete", () => {
    const start = new Subject<string>();
    const q = new RequestQueue<string>({ start });
    let completed = false;
    q.requests$.subscribe({ next: (r) => q.markDone(r), complete: () => (completed = true) });
    start.next(u("1"));
    expect(completed).toBe(false);
    start.complete();
    expect(completed).toBe(true);
  });

  it("RequestQueue.stats$ emits the current stats and every change", () => {
    const q = new RequestQueue<string>();
    const stats: RequestQueueStats[] = [];
    q.stats$.subscribe((s) => stats.push(s));
    q.enqueue(u("1"));
    q.enqueue(u("1"));
    expect(stats.map((s) => [s.enqueued, s.filtered])).toEqual([[0, 0], [1, 0], [1, 1]]);
    expect(q.stats()).toMatchObject({ enqueuedMemory: 1, enqueuedDisk: 0 });
  });

  it("RequestQueue.requests$ teardown clears its timers", () => {
    const ts = new TestScheduler((a, b) => expect(a).toEqual(b));
    ts.run(() => {
      const view = new FakeView(() => ts.now());
      view.until.set("a.example", 100);
      const q = new RequestQueue<string>({ view, scheduler: ts });
      q.enqueue(u("1"));
      const out: string[] = [];
      const sub = q.requests$.subscribe((r) => out.push(r));
      ts.schedule(() => sub.unsubscribe(), 50);
      ts.schedule(() => expect(out).toEqual([]), 200);
    });
  });
});

describe("RequestQueue with a Throttler as its view", () => {
  it("RequestQueue takes a Throttler as view and its getScopes as the default scopesOf", () => {
    const scheduler = new TestScheduler(() => {});
    const throttler = createThrottler<string>({}, {
      scheduler,
      getScopes: (url) => (url.includes("/api/") ? "api" : "site"),
    });
    expect(throttler.usesDefaultScopes).toBe(false);
    throttler.delayScope("api", 1000);
    const queue = new RequestQueue<string>({
      view: throttler,
      scheduler,
      start: ["https://a.example/api/1", "https://a.example/page"],
    });
    const out: string[] = [];
    queue.requests$.subscribe((u) => out.push(u));
    // Held by the "api" scope the throttler gives it, not by its host.
    expect(out).toEqual(["https://a.example/page"]);
    expect(queue.stats().blocked).toBe(1);
    scheduler.maxFrames = 60_000; // the hold (and the backoff delay it adds) ends well before
    scheduler.flush();
    expect(out).toEqual(["https://a.example/page", "https://a.example/api/1"]);
  });

  it("RequestQueue takes its defaults from the Throttler's queue settings; options given win", () => {
    const scheduler = new TestScheduler(() => {});
    const throttler = createThrottler<string>(
      { queue: { fifo: true, dedupe: false, order: "priority" } },
      { scheduler },
    );
    const urls = [u("1"), u("2"), u("1")];
    const drained = (queue: RequestQueue<string>) => {
      for (const url of urls) queue.enqueue(url);
      const out: string[] = [];
      queue.requests$.subscribe((r) => {
        out.push(r);
        queue.markDone(r);
      });
      return out;
    };
    // FIFO and no dedupe, as the settings say (LIFO and a dropped duplicate before).
    expect(drained(new RequestQueue<string>({ view: throttler }))).toEqual(urls);
    // Given here, an option wins over the settings.
    expect(drained(new RequestQueue<string>({ view: throttler, fifo: false, dedupe: true })))
      .toEqual([u("2"), u("1")]);
  });

  it("Throttler.changes$ names the changed scopes once per dispatch loop, and only while observed", () => {
    const throttler = createThrottler<string>({});
    const seen: (readonly string[])[] = [];
    const sub = throttler.changes$.subscribe((names) => seen.push(names));
    throttler.setConcurrency("a.example", 2);
    throttler.recordBackoff("b.example");
    expect(seen).toEqual([["a.example"], ["b.example"]]);
    sub.unsubscribe();
    throttler.setConcurrency("a.example", 3);
    expect(seen).toHaveLength(2);
    expect(throttler.quotaShare(["a.example"], undefined)).toBe(0);
  });
});
