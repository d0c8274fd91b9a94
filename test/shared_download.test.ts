/**
 * `sharedDownload`: its lease bookkeeping against a scripted store in virtual
 * time (every path that could leak a lease or a renewal timer), then against
 * the real Redis on 127.0.0.1:$REDIS_PORT (6390 by default) and a loopback
 * HTTP server, several throttlers (processes) sharing a fresh random prefix.
 */
import { afterEach, describe, expect, it } from "vitest";
import process from "node:process";
import { from, lastValueFrom, NEVER, Observable, of, Subject, throwError, toArray } from "rxjs";
import {
  type AcquireOptions,
  type AcquireResult,
  createRedisScopes,
  type HandedLease,
  type RedisScopes,
  type RedisScopesClient,
  RedisScopesError,
  type ScopeLease,
  type ScopeLimits,
} from "../lib/redis/redis_scopes.ts";
import { sharedDownload, type SharedDownloadOptions } from "../lib/redis/shared_download.ts";
import { createThrottler, type Throttler } from "../lib/throttler/throttler.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import type { Outcome } from "../lib/outcome.ts";
import { backoffOn } from "../operators/backoff_on.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";
import { testScheduler } from "./_helpers/test_scheduler.ts";
import { type ProcessRun, runProcess } from "./_helpers/run_process.ts";
import {
  connectRedis,
  onCleanup,
  REDIS_PORT,
  redisProcesses,
  runCleanups,
  until,
} from "./_helpers/redis.ts";

afterEach(runCleanups);

/** A store whose Redis answers come when the test says, and that records every call. */
function scriptedStore(leaseMs = 300) {
  const acquires: {
    scopes: readonly string[];
    limits: readonly ScopeLimits[];
    options: AcquireOptions | undefined;
    answer: (result: AcquireResult) => void;
    fail: (error: unknown) => void;
  }[] = [];
  const released: ScopeLease[] = [];
  const renewed: ScopeLease[] = [];
  const releases$ = new Subject<readonly string[]>();
  const script = {
    acquires,
    released,
    renewed,
    releases$,
    /** How `renew` answers. */
    renew: (): Promise<boolean> => Promise.resolve(true),
    /** What `acquire` does before it waits for the test's answer (a synchronous throw, say). */
    beforeAcquire: () => {},
    /** Answer the `i`th acquire with a lease. */
    grant(i: number): ScopeLease {
      const call = acquires[i]!;
      const lease = { id: `l${i}`, scopes: call.scopes, grantedAt: 0, expiresAt: leaseMs };
      call.answer({ ok: true, lease });
      return lease;
    },
  };
  const store: RedisScopes = {
    prefix: "scripted:",
    processId: "scripted",
    leaseMs,
    acquire: (scopes, limits, options) => {
      script.beforeAcquire();
      return new Promise((answer, fail) =>
        acquires.push({ scopes, limits, options, answer, fail })
      );
    },
    release: (lease) => {
      released.push(lease);
      return Promise.resolve();
    },
    renew: (lease) => {
      renewed.push(lease);
      return script.renew();
    },
    publishBackoff: () => Promise.resolve(),
    messages$: NEVER,
    released$: releases$,
    close: () => Promise.resolve(),
  };
  return { store, script };
}

/** Let the scripted store's promises settle (microtasks only: no time passes). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** A throttler on a virtual clock, a scripted store, and a one-request pipeline through both. */
function rig<T>(
  download: Parameters<typeof sharedDownload<string, T>>[2],
  options: Omit<SharedDownloadOptions, "scheduler"> = {},
  prepare: (script: ReturnType<typeof scriptedStore>["script"]) => void = () => {},
  /** Put `backoffOn` after the gate (backoff steps and retries, as a crawl has them). */
  withBackoff = false,
) {
  const scheduler = testScheduler();
  const { store, script } = scriptedStore();
  prepare(script);
  const errors: RedisScopesError[] = [];
  const throttler = createThrottler<string>({ downloadDelayMs: 0 }, { scheduler });
  const outcomes: Outcome<string, T>[] = [];
  let completed = false;
  const subscription = from(["http://a.test/1"]).pipe(
    throttleByScope(
      throttler,
      sharedDownload(store, throttler, download, { onError: (e) => errors.push(e), ...options }),
    ),
    withBackoff ? backoffOn(throttler) : (o) => o,
  ).subscribe({ next: (o) => outcomes.push(o), complete: () => completed = true });
  onCleanup(() => subscription.unsubscribe());
  let now = 0;
  /** Move the virtual clock `ms` on, running what falls due (a leaked periodic timer cannot hang it). */
  const advance = async (ms: number) => {
    await settle();
    now += ms;
    scheduler.maxFrames = now;
    scheduler.flush();
    await settle();
  };
  /** Timers still armed on the virtual clock (a renewal or a poll left running shows here). */
  const armed = () => scheduler.actions.filter((action) => !action.closed).length;
  return {
    armed,
    store,
    script,
    throttler,
    errors,
    outcomes,
    subscription,
    advance,
    done: () => completed,
  };
}

describe("sharedDownload() lease bookkeeping", () => {
  it("sharedDownload() releases a grant that arrives after the pipeline was unsubscribed", async () => {
    let started = 0;
    const { script, subscription, advance, armed } = rig(() => {
      started++;
      return of(200);
    });
    await advance(0);
    expect(script.acquires).toHaveLength(1);
    subscription.unsubscribe();
    expect(armed()).toBe(0); // the acquire's time-out went with it
    const lease = script.grant(0);
    await advance(1_000);
    expect(started).toBe(0);
    expect(script.released).toEqual([lease]);
  });

  it("sharedDownload() releases a grant that arrives after the time-out, which failed the download", async () => {
    const { script, outcomes, advance } = rig(() => of(200), { timeoutMs: 500 });
    await advance(500);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatchObject({ kind: "error" });
    const error = (outcomes[0] as { error: RedisScopesError }).error;
    expect(error).toBeInstanceOf(RedisScopesError);
    expect(error).toMatchObject({ operation: "acquire", scopes: ["a.test"] });
    expect(error.message).toMatch(/did not answer within 500ms/);
    const lease = script.grant(0);
    await advance(0);
    expect(script.released).toEqual([lease]);
  });

  it("sharedDownload() asks no more once unsubscribed while a full scope is waited for", async () => {
    const { script, subscription, advance, armed } = rig(() => of(200), { pollMs: 100 });
    await advance(0);
    script.acquires[0]!.answer({ ok: false, waitMs: 0, full: true, expiresInMs: 10_000 });
    await advance(100); // the poll
    expect(script.acquires).toHaveLength(2);
    script.acquires[1]!.answer({ ok: false, waitMs: 0, full: true, expiresInMs: 10_000 });
    await advance(50);
    subscription.unsubscribe();
    expect(armed()).toBe(0);
    script.releases$.next(["a.test"]); // a release elsewhere wakes nobody now
    await advance(1_000);
    expect(script.acquires).toHaveLength(2);
    expect(script.released).toEqual([]);
  });

  it("sharedDownload() asks again at once when a lease of the scope is released elsewhere", async () => {
    const { script, advance } = rig(() => of(200), { pollMs: 60_000 });
    await advance(0);
    script.acquires[0]!.answer({ ok: false, waitMs: 0, full: true, expiresInMs: 60_000 });
    await advance(10);
    script.releases$.next(["other.test"]);
    await advance(0);
    expect(script.acquires).toHaveLength(1);
    script.releases$.next(["a.test"]);
    await advance(0);
    expect(script.acquires).toHaveLength(2);
  });

  it("sharedDownload() asks again at once when its turn was released while a refused ask was on its way", async () => {
    const { script, advance, armed } = rig(() => of(200), { pollMs: 60_000 });
    await advance(0);
    expect(script.acquires).toHaveLength(1);
    // The release message (another connection) overtakes the refusal it made stale.
    script.releases$.next(["a.test"]);
    script.acquires[0]!.answer({ ok: false, waitMs: 0, full: true, expiresInMs: 60_000 });
    await advance(0);
    expect(script.acquires).toHaveLength(2); // not after pollMs
    script.grant(1);
    await advance(0);
    expect(script.released).toHaveLength(1);
    expect(armed()).toBe(0);
  });

  it("sharedDownload() renews while the download runs, and stops and releases when unsubscribed mid-download", async () => {
    let aborted = false;
    const { script, subscription, advance, armed } = rig((_url, ctx) => {
      ctx.signal.addEventListener("abort", () => aborted = true);
      return NEVER;
    });
    await advance(0);
    const lease = script.grant(0);
    await advance(250); // leaseMs 300: a renewal every 100 ms
    expect(script.renewed).toEqual([lease, lease]);
    subscription.unsubscribe();
    await advance(0);
    expect(script.released).toEqual([lease]);
    expect(aborted).toBe(true);
    expect(armed()).toBe(0);
    await advance(1_000);
    expect(script.renewed).toHaveLength(2);
  });

  for (
    const [what, download] of [
      ["the download fails", () => throwError(() => new Error("boom"))],
      ["the download throws synchronously", () => {
        throw new Error("boom");
      }],
      ["the download's promise rejects", () => Promise.reject(new Error("boom"))],
    ] as const
  ) {
    it(`sharedDownload() releases the lease and stops renewing when ${what}`, async () => {
      const { script, outcomes, advance, armed } = rig(download);
      await advance(0);
      const lease = script.grant(0);
      await advance(0);
      expect(outcomes).toMatchObject([{ kind: "error", error: { message: "boom" } }]);
      expect(script.released).toEqual([lease]);
      expect(armed()).toBe(0);
      await advance(1_000);
      expect(script.renewed).toEqual([]);
    });
  }

  it("sharedDownload() releases the lease and stops renewing once the download answered", async () => {
    const { script, outcomes, advance, done, armed } = rig(() => Promise.resolve(200));
    await advance(0);
    const lease = script.grant(0);
    await advance(0);
    expect(outcomes).toMatchObject([{ kind: "response", response: 200 }]);
    expect(done()).toBe(true);
    expect(script.released).toEqual([lease]);
    expect(armed()).toBe(0);
    await advance(1_000);
    expect(script.renewed).toEqual([]);
  });

  it("sharedDownload() unsubscribes a download that answers at once and goes on", async () => {
    let tornDown = false;
    const { script, outcomes, advance, armed } = rig(() =>
      new Observable<number>((subscriber) => {
        subscriber.next(200); // synchronously, and never completes
        return () => tornDown = true;
      })
    );
    await advance(0);
    const lease = script.grant(0);
    await advance(0);
    expect(outcomes).toMatchObject([{ kind: "response", response: 200 }]);
    expect(script.released).toEqual([lease]);
    expect(tornDown).toBe(true);
    expect(armed()).toBe(0);
  });

  it("sharedDownload() turns a synchronous throw of the store into an error outcome naming the operation", async () => {
    const { outcomes, advance, armed } = rig(() => of(200), {}, (script) => {
      script.beforeAcquire = () => {
        throw new Error("client is closed");
      };
    });
    await advance(0);
    expect(outcomes).toHaveLength(1);
    const error = (outcomes[0] as { error: unknown }).error;
    expect(error).toBeInstanceOf(RedisScopesError);
    expect(error).toMatchObject({ operation: "acquire", scopes: ["a.test"] });
    expect((error as Error).message).toMatch(/client is closed/);
    expect(armed()).toBe(0); // no time-out left armed for the call that never went out
  });

  it("sharedDownload(): Redis refusing connections is waited for (asked again every pollMs), then an error outcome that says so and backs the site off not at all", async () => {
    const { script, outcomes, errors, throttler, advance } = rig(
      () => of(200),
      {
        timeoutMs: 1_000,
        pollMs: 250,
      },
      undefined,
      true,
    );
    // What node-redis passes on when nothing listens: no message, one error per address.
    const refused = () =>
      Object.assign(
        new AggregateError([
          Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6390"), { code: "ECONNREFUSED" }),
        ], ""),
        { code: "ECONNREFUSED" },
      );
    await advance(0);
    for (let i = 0; i < 10 && outcomes.length === 0; i++) {
      script.acquires.at(-1)!.fail(refused());
      await advance(250);
    }
    // Asked at 0, 250, 500 and 750 ms; the fourth refusal came with the budget spent.
    expect(script.acquires).toHaveLength(4);
    expect(errors[0]!.message).toMatch(/the connection to Redis was lost: asking again/);
    expect(outcomes).toHaveLength(1);
    const error = (outcomes[0] as { error: Error }).error;
    expect(error).toBeInstanceOf(RedisScopesError);
    expect(error.message).toMatch(
      /as Redis stayed unreachable for 1000ms \(Redis failed: connect ECONNREFUSED 127\.0\.0\.1:6390\)$/,
    );
    // Not the site's failure: no backoff step (ECONNREFUSED from a site would be one).
    expect(throttler.state("a.test")?.backoffLevel ?? 0).toBe(0);
  });

  it("sharedDownload(): a Redis that comes back after a lost connection serves the request that waited", async () => {
    const { script, outcomes, advance } = rig(() => of(200), { pollMs: 250 });
    await advance(0);
    script.acquires[0]!.fail(new Error("Socket closed unexpectedly"));
    await advance(250);
    expect(script.acquires).toHaveLength(2);
    script.grant(1);
    await advance(0);
    expect(outcomes).toMatchObject([{ kind: "response", response: 200 }]);
  });

  it("sharedDownload() reports a failed renewal and a lease found expired, and the download goes on", async () => {
    const { script, outcomes, errors, advance } = rig(() => NEVER);
    await advance(0);
    script.renew = () =>
      Promise.reject(new RedisScopesError("Cannot renew: down", "renew", ["a.test"]));
    script.grant(0);
    await advance(100);
    script.renew = () => Promise.resolve(false);
    await advance(100);
    expect(errors.map((e) => e.operation)).toEqual(["renew", "renew"]);
    expect(errors[1]!.message).toMatch(/expired/);
    expect(outcomes).toEqual([]);
  });
});

describe("sharedDownload() lines", () => {
  /** Four requests of one scope, all admitted locally, through a scripted store. */
  // The lines' own protocol: no lease kept for the next request (a download
  // that answers at once gives its lease back in the turn the next of its
  // line asks; see the reuseLeases tests below).
  function fourInLine(
    options: Omit<SharedDownloadOptions, "scheduler"> = { reuseLeases: 0 },
    settings: ThrottlerSettingsInput = {},
    count = 4,
  ) {
    const scheduler = testScheduler();
    const { store, script } = scriptedStore();
    const throttler = createThrottler<string>(
      { adaptive: false, concurrentRequestsPerDomain: 4, downloadDelayMs: 0, ...settings },
      { scheduler },
    );
    const outcomes: Outcome<string, number>[] = [];
    const urls = Array.from({ length: count }, (_, i) => `http://a.test/${i + 1}`);
    const subscription = from(urls).pipe(
      throttleByScope(
        throttler,
        sharedDownload(store, throttler, () => of(200), { scheduler, pollMs: 60_000, ...options }),
      ),
    ).subscribe((o) => outcomes.push(o));
    onCleanup(() => subscription.unsubscribe());
    return { script, outcomes, subscription, throttler };
  }

  it("sharedDownload() keeps a lease given back in the turn the next request of its scopes asks, up to reuseLeases in a row", async () => {
    const { script, outcomes } = fourInLine(
      { reuseLeases: 2 },
      { concurrentRequestsPerDomain: 1 },
      5,
    );
    await settle();
    expect(script.acquires).toHaveLength(1);
    script.grant(0);
    await settle();
    // The lease served the first request and the two after it, then went
    // back: the fourth request asked for its own.
    expect(outcomes).toHaveLength(3);
    expect(script.acquires).toHaveLength(2);
    expect(script.released.map((l) => l.id)).toEqual(["l0"]);
    script.grant(1);
    await settle();
    expect(outcomes.map((o) => o.kind)).toEqual(Array(5).fill("response"));
    expect(script.acquires).toHaveLength(2);
    expect(script.released.map((l) => l.id)).toEqual(["l0", "l1"]);
  });

  it("sharedDownload() keeps no lease a renewal found expired: the next request asks Redis", async () => {
    const scheduler = testScheduler();
    const { store, script } = scriptedStore(); // leases of 300 ms, renewed every 100 ms
    const throttler = createThrottler<string>(
      { adaptive: false, concurrentRequestsPerDomain: 1, downloadDelayMs: 0 },
      { scheduler },
    );
    const first = new Subject<number>();
    const outcomes: Outcome<string, number>[] = [];
    const subscription = from(["http://a.test/1", "http://a.test/2"]).pipe(
      throttleByScope(
        throttler,
        sharedDownload(
          store,
          throttler,
          (url) => (url.endsWith("/1") ? first : of(200)),
          { scheduler, pollMs: 60_000, onError: () => {} },
        ),
      ),
    ).subscribe((o) => outcomes.push(o));
    onCleanup(() => subscription.unsubscribe());
    await settle();
    script.grant(0);
    await settle();
    script.renew = () => Promise.resolve(false); // the stall outlived the lease
    scheduler.maxFrames = 100;
    scheduler.flush();
    await settle();
    first.next(200);
    first.complete();
    await settle();
    expect(script.released.map((l) => l.id)).toEqual(["l0"]);
    expect(script.acquires).toHaveLength(2);
    script.grant(1);
    await settle();
    expect(outcomes.map((o) => o.kind)).toEqual(["response", "response"]);
  });

  /** Three requests one at a time, each granted when it asks: every lease given back. */
  async function expectEveryLeaseAskedAndGivenBack(
    options: Omit<SharedDownloadOptions, "scheduler">,
    settings: ThrottlerSettingsInput,
  ): Promise<void> {
    const { script, outcomes } = fourInLine(options, {
      concurrentRequestsPerDomain: 1,
      ...settings,
    }, 3);
    for (let i = 0; i < 3; i++) {
      await settle();
      expect(script.acquires).toHaveLength(i + 1);
      script.grant(i);
    }
    await settle();
    expect(outcomes.map((o) => o.kind)).toEqual(Array(3).fill("response"));
    expect(script.released.map((l) => l.id)).toEqual(["l0", "l1", "l2"]);
  }

  it("sharedDownload() with reuseLeases 0 gives every lease back and asks for every request", async () => {
    await expectEveryLeaseAskedAndGivenBack({ reuseLeases: 0 }, {});
  });

  it("sharedDownload() keeps no lease for a scope with a quota: each grant is counted in Redis", async () => {
    await expectEveryLeaseAskedAndGivenBack({}, {
      scopes: { "a.test": { quota: 100, windowMs: 60_000 } },
    });
  });

  it("sharedDownload() has one request of a scope set ask Redis at a time, the others waiting in line", async () => {
    const { script, outcomes, throttler } = fourInLine();
    await settle();
    expect(throttler.active).toBe(4);
    expect(script.acquires).toHaveLength(1);
    script.acquires[0]!.answer({ ok: false, waitMs: 0, full: true, expiresInMs: 60_000 });
    await settle();
    script.releases$.next(["a.test"]); // wakes the one asker, not four
    await settle();
    expect(script.acquires).toHaveLength(2);
    script.grant(1);
    await settle();
    // Granted: the next in line asks at once.
    expect(outcomes).toHaveLength(1);
    expect(script.acquires).toHaveLength(3);
    script.grant(2);
    await settle();
    script.grant(3);
    await settle();
    script.grant(4);
    await settle();
    expect(outcomes.map((o) => o.kind)).toEqual(Array(4).fill("response"));
    expect(script.acquires).toHaveLength(5);
  });

  it("sharedDownload() asks with more while others wait in line, and the next waits for its turn when the grant queued the process", async () => {
    const { script, outcomes } = fourInLine();
    await settle();
    expect(script.acquires[0]!.options?.more).toBe(true);
    const lease = { id: "l0", scopes: ["a.test"], grantedAt: 0, expiresAt: 300 };
    script.acquires[0]!.answer({ ok: true, lease, queued: true });
    await settle();
    expect(outcomes).toHaveLength(1);
    expect(script.acquires).toHaveLength(1); // no ask only to be refused
    script.releases$.next(["a.test"]); // its turn
    await settle();
    expect(script.acquires).toHaveLength(2);
    script.grant(1);
    await settle();
    script.grant(2);
    await settle();
    expect(script.acquires[3]!.options?.more).toBeFalsy(); // the last of the line
    script.grant(3);
    await settle();
    expect(outcomes.map((o) => o.kind)).toEqual(Array(4).fill("response"));
  });

  it("sharedDownload() fails the requests waiting behind an asker whose Redis call failed", async () => {
    const { script, outcomes } = fourInLine();
    await settle();
    // Not a lost connection (that is waited for): a failure of the call itself.
    script.acquires[0]!.fail(new Error("ERR Error running script"));
    await settle();
    expect(script.acquires).toHaveLength(1);
    expect(outcomes).toHaveLength(4);
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({
        kind: "error",
        error: { name: "RedisScopesError", operation: "acquire" },
      });
    }
  });

  it("sharedDownload() hands the asking on when the asker is unsubscribed, and forgets a waiter that went", async () => {
    const scheduler = testScheduler();
    const { store, script } = scriptedStore();
    const throttler = createThrottler<string>({ concurrentRequestsPerDomain: 4 }, { scheduler });
    const download = sharedDownload(store, throttler, () => of(200), { scheduler, pollMs: 60_000 });
    const context = (scopes: readonly string[]) => ({
      signal: new AbortController().signal,
      attempt: 1,
      scopes,
    });
    const first = from(download("http://a.test/1", context(["a.test"]))).subscribe();
    const second = from(download("http://a.test/2", context(["a.test"]))).subscribe();
    const got: number[] = [];
    const third = from(download("http://a.test/3", context(["a.test"]))).subscribe((v) =>
      got.push(v)
    );
    onCleanup(() => [first, second, third].forEach((s) => s.unsubscribe()));
    await settle();
    expect(script.acquires).toHaveLength(1);
    second.unsubscribe(); // waiting in line: leaves it
    first.unsubscribe(); // the asker: the third asks now
    await settle();
    expect(script.acquires).toHaveLength(2);
    script.grant(1);
    await settle();
    expect(got).toEqual([200]);
    expect(script.acquires).toHaveLength(2);
  });
});

/** A loopback server that answers 200 after `ms` and counts the most requests it had in flight at once. */
async function slowServer(ms: number) {
  let inFlight = 0;
  let most = 0;
  const server = await startRecordingServer((_req, res) => {
    most = Math.max(most, ++inFlight);
    setTimeout(() => {
      inFlight--;
      res.writeHead(200).end("ok");
    }, ms);
  });
  onCleanup(() => server.close());
  return { ...server, most: () => most };
}

const WORKER = new URL("./_redis_worker.ts", import.meta.url).pathname;

/** Run test/_redis_worker.ts as a real child process on the runtime running the tests. */
function runWorker(args: readonly string[]): Promise<ProcessRun> {
  const runtime = "Deno" in globalThis
    ? ["run", "-A", WORKER]
    : "Bun" in globalThis
    ? [WORKER]
    : ["--import", "tsx", WORKER];
  return runProcess(process.execPath, [...runtime, ...args], {
    env: { ...process.env, REDIS_PORT: String(REDIS_PORT) },
  });
}

describe("sharedDownload()", () => {
  it("sharedDownload() keeps the combined in-flight of three throttlers within the scope's concurrency", async () => {
    const server = await slowServer(15);
    const procs = await redisProcesses(3);
    const runs = procs.map(({ store }, p) => {
      // Each throttler alone would allow 2 in flight: 6 together without Redis.
      const throttler = createThrottler({ concurrentRequestsPerDomain: 2, downloadDelayMs: 0 });
      const download = sharedDownload(store, throttler, async (url: string, ctx) => {
        const response = await fetch(url, { signal: ctx.signal });
        await response.text();
        return response.status;
      });
      const urls = Array.from({ length: 8 }, (_, i) => `${server.origin}/p${p}/${i}`);
      return lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
    });
    const outcomes = (await Promise.all(runs)).flat();
    expect(outcomes.map((o) => o.kind === "response" ? o.response : o.error)).toEqual(
      Array(24).fill(200),
    );
    expect(server.arrivals).toHaveLength(24);
    expect(server.most()).toBe(2); // the limit, and reached
  });

  it("sharedDownload() keeps two real child processes within the scope's concurrency", async () => {
    const server = await slowServer(10);
    const [a] = await redisProcesses(1); // for the prefix and the clean-up of its keys
    const runs = await Promise.all(
      ["w1", "w2"].map((tag) => runWorker([server.origin, a!.store.prefix, "10", "2", tag])),
    );
    for (const run of runs) {
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(JSON.parse(run.stdout.trim().split("\n").at(-1)!)).toMatchObject({
        statuses: Array(10).fill(200),
      });
    }
    expect(server.arrivals).toHaveLength(20);
    expect(server.most()).toBeLessThanOrEqual(2);
  }, 120_000);

  it(
    "sharedDownload() gives two real child processes on one slot their turns: neither is starved",
    async () => {
      const server = await slowServer(2);
      const [a] = await redisProcesses(1); // for the prefix and the clean-up of its keys
      const count = 30;
      // Both send once both are ready (a barrier in Redis).
      const runs = await Promise.all(
        ["w1", "w2"].map((tag) =>
          runWorker([server.origin, a!.store.prefix, String(count), "1", tag, "2"])
        ),
      );
      const grants: { w: number; at: number }[] = [];
      runs.forEach((run, w) => {
        expect(run.code, run.stdout + run.stderr).toBe(0);
        const result = JSON.parse(run.stdout.trim().split("\n").at(-1)!);
        expect(result.statuses).toEqual(Array(count).fill(200));
        for (const at of result.granted) grants.push({ w, at });
      });
      expect(server.most()).toBe(1);
      // While both had requests left (the first `count` grants), each had at least a quarter.
      grants.sort((x, y) => x.at - y.at);
      const first = grants.slice(0, count);
      for (const w of [0, 1]) {
        expect(first.filter((g) => g.w === w).length).toBeGreaterThanOrEqual(count / 4);
      }
    },
    90_000,
  );

  it(
    "sharedDownload() holds two throttlers to one quota window of a scope on the Redis clock",
    async () => {
      const procs = await redisProcesses(2);
      const windowMs = 300;
      const granted: { at: number; amount: number }[] = [];
      const runs = procs.map(({ store }, p) => {
        // Each throttler alone allows 4 per window: 8 together without Redis.
        const throttler = createThrottler({
          downloadDelayMs: 0,
          scopes: { "api.test": { concurrency: 8, quota: 4, windowMs } },
        });
        const download = sharedDownload(
          store,
          throttler,
          (request: { url: string; meta: { throttlingScopes: Record<string, number> } }, ctx) => {
            granted.push({
              at: ctx.lease.grantedAt,
              amount: request.meta.throttlingScopes["api.test"]!,
            });
            return Promise.resolve(200);
          },
        );
        const requests = [1, 2, 1, 1, 2, 1].map((amount, i) => ({
          url: `http://api.test/p${p}/${i}`,
          meta: { throttlingScopes: { "api.test": amount } },
        }));
        return lastValueFrom(from(requests).pipe(throttleByScope(throttler, download), toArray()));
      });
      const outcomes = (await Promise.all(runs)).flat();
      expect(outcomes.map((o) => o.kind)).toEqual(Array(12).fill("response"));
      // Windows as the gate opens them: at the first grant after the last one ended.
      granted.sort((x, y) => x.at - y.at);
      let end = -Infinity;
      let used = 0;
      for (const g of granted) {
        if (g.at >= end) {
          end = g.at + windowMs;
          used = 0;
        }
        used += g.amount;
        expect(used).toBeLessThanOrEqual(4);
      }
    },
    60_000,
  );

  it("sharedDownload() spaces two throttlers' sends by the delay on the Redis clock", async () => {
    const procs = await redisProcesses(2);
    const delayMs = 25;
    const granted: number[] = [];
    const runs = procs.map(({ store }, p) => {
      const throttler = createThrottler({
        concurrentRequestsPerDomain: 4,
        downloadDelayMs: delayMs,
        jitter: [0, 0],
      });
      const download = sharedDownload(store, throttler, (_url: string, ctx) => {
        granted.push(ctx.lease.grantedAt);
        return Promise.resolve(200);
      });
      const urls = Array.from({ length: 4 }, (_, i) => `http://delay.test/p${p}/${i}`);
      return lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
    });
    await Promise.all(runs);
    expect(granted).toHaveLength(8);
    granted.sort((a, b) => a - b);
    for (let i = 1; i < granted.length; i++) {
      expect(granted[i]! - granted[i - 1]!).toBeGreaterThanOrEqual(delayMs - 1);
    }
  });

  it(
    "sharedDownload() gives two processes competing for one slot their turns: neither is starved",
    async () => {
      const procs = await redisProcesses(2);
      const grants: { p: number; at: number }[] = [];
      const perProcess = 40;
      const runs = procs.map(({ store }, p) => {
        const throttler = createThrottler({ concurrentRequestsPerDomain: 1, downloadDelayMs: 0 });
        const download = sharedDownload(store, throttler, (_url: string, ctx) => {
          grants.push({ p, at: ctx.lease.grantedAt });
          return Promise.resolve(200);
        });
        const urls = Array.from({ length: perProcess }, (_, i) => `http://fair.test/p${p}/${i}`);
        return lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
      });
      const outcomes = (await Promise.all(runs)).flat();
      expect(outcomes.map((o) => o.kind)).toEqual(Array(2 * perProcess).fill("response"));
      // While both still had requests to send (the first perProcess grants),
      // each had a fair part of the turns: at least a quarter.
      grants.sort((x, y) => x.at - y.at);
      const first = grants.slice(0, perProcess);
      for (const p of [0, 1]) {
        expect(first.filter((g) => g.p === p).length).toBeGreaterThanOrEqual(perProcess / 4);
      }
    },
    60_000,
  );

  it(
    "sharedDownload() waits out a client time-out of an acquire that Redis ran, and gives that grant back",
    async () => {
      const [b] = await redisProcesses(1); // the prefix and its clean-up
      const client = await connectRedis();
      class TimeoutError extends Error {} // node-redis's: no message, known by its class
      let timedOut = 0;
      const slow: RedisScopesClient = {
        sendCommand: async (args) => {
          const reply = await client.sendCommand([...args]);
          // The first acquire runs in Redis (and is granted), but the client
          // gives up on it before the answer comes.
          if (
            timedOut === 0 && args[0] === "EVALSHA" && (args.includes("a") || args.includes("p"))
          ) {
            timedOut++;
            throw new TimeoutError();
          }
          return reply;
        },
        duplicate: () => client.duplicate(),
      };
      const store = await createRedisScopes(slow, { prefix: b!.store.prefix, processId: "slow" });
      onCleanup(() => store.close());
      const throttler = createThrottler<string>({ concurrentRequestsPerDomain: 1 });
      const errors: RedisScopesError[] = [];
      const outcome = await lastValueFrom(
        from(["http://slow.test/1"]).pipe(
          throttleByScope(
            throttler,
            sharedDownload(store, throttler, () => Promise.resolve(200), {
              pollMs: 20,
              onError: (e) => errors.push(e),
            }),
          ),
        ),
      );
      expect(timedOut).toBe(1);
      // Granted on the second ask: the first grant, which took the one slot, was given back.
      expect(outcome).toMatchObject({ kind: "response", response: 200 });
      expect(errors.map((e) => e.message)).toEqual([
        expect.stringMatching(/client timed out: asking again/),
      ]);
      await until(
        async () => (await client.zCard(`${store.prefix}lease:slow.test`)) === 0,
        "every lease given back",
      );
    },
    60_000,
  );

  it("sharedDownload() releases the lease when the pipeline is unsubscribed mid-download", async () => {
    const [a] = await redisProcesses(1);
    const { client, store } = a!;
    const throttler = createThrottler();
    let started = 0;
    const subscription = from(["http://hang.test/1"]).pipe(
      throttleByScope(
        throttler,
        sharedDownload(store, throttler, () => {
          started++;
          return NEVER;
        }),
      ),
    ).subscribe();
    onCleanup(() => subscription.unsubscribe());
    const key = `${store.prefix}lease:hang.test`;
    await until(async () => (await client.zCard(key)) === 1, "the lease");
    expect(started).toBe(1);
    subscription.unsubscribe();
    await until(async () => (await client.zCard(key)) === 0, "the release");
  });

  it("sharedDownload() wakes a waiting request when another process releases", async () => {
    const [a, b] = await redisProcesses(2);
    const held = await a!.store.acquire(["wake.test"], [{ concurrency: 1, delayMs: 0 }]);
    if (!held.ok) throw new Error("expected a lease");
    const throttler = createThrottler({ concurrentRequestsPerDomain: 1 });
    const done = lastValueFrom(
      from(["http://wake.test/1"]).pipe(
        // A poll of a minute: only the release message can wake it within the test.
        throttleByScope(
          throttler,
          sharedDownload(b!.store, throttler, () => Promise.resolve(200), { pollMs: 60_000 }),
        ),
      ),
    );
    // The acquire went out with the download's start; b's next command is
    // answered after it, so once a PING is answered the request was refused.
    await until(() => throttler.active === 1, "the request to start");
    await b!.client.ping();
    await a!.store.release(held.lease);
    const outcome = await done;
    expect(outcome.kind).toBe("response");
  });

  it("sharedDownload() starts a parked request on the slot a release hands over, without asking again", async () => {
    const [a, b] = await redisProcesses(2);
    const held = await a!.store.acquire(["hand.test"], [{ concurrency: 1, delayMs: 0 }]);
    if (!held.ok) throw new Error("expected a lease");
    const acquires: AcquireResult[] = [];
    const store = b!.store;
    const counted: RedisScopes = {
      prefix: store.prefix,
      processId: store.processId,
      leaseMs: store.leaseMs,
      acquire: async (...args) => {
        const got = await store.acquire(...args);
        acquires.push(got);
        return got;
      },
      release: (lease) => store.release(lease),
      unpark: (id, scope) => store.unpark!(id, scope),
      handed$: store.handed$!,
      renew: (lease) => store.renew(lease),
      publishBackoff: (m) => store.publishBackoff(m),
      messages$: store.messages$,
      released$: store.released$,
      close: () => store.close(),
    };
    const throttler = createThrottler({ concurrentRequestsPerDomain: 1 });
    const leases: string[] = [];
    const done = lastValueFrom(
      from(["http://hand.test/1"]).pipe(
        throttleByScope(
          throttler,
          sharedDownload(counted, throttler, (_url: string, ctx) => {
            leases.push(ctx.lease.id);
            return Promise.resolve(200);
          }, { pollMs: 60_000 }),
        ),
      ),
    );
    await until(() => acquires.length === 1, "the refused ask");
    expect(acquires[0]).toMatchObject({ ok: false, full: true, parked: "p1:1" });
    await a!.store.release(held.lease);
    expect((await done).kind).toBe("response");
    expect(leases).toEqual(["p1:1"]); // the lease the release took for it
    expect(acquires).toHaveLength(1);
    await until(
      async () => (await b!.client.zCard(`${b!.store.prefix}lease:hand.test`)) === 0,
      "the lease given back",
    );
  });

  it("sharedDownload() gives up a parked ask when unsubscribed: the slot goes to the next process", async () => {
    const [a, b, c] = await redisProcesses(3);
    const one = [{ concurrency: 1, delayMs: 0 }];
    const held = await a!.store.acquire(["gone.test"], one);
    if (!held.ok) throw new Error("expected a lease");
    const throttler = createThrottler({ concurrentRequestsPerDomain: 1 });
    const subscription = from(["http://gone.test/1"]).pipe(
      throttleByScope(
        throttler,
        sharedDownload(b!.store, throttler, () => Promise.resolve(200), { pollMs: 60_000 }),
      ),
    ).subscribe();
    const queue = `${a!.store.prefix}queue:gone.test`;
    await until(async () => (await a!.client.zCard(queue)) === 1, "b's parked ask");
    expect(await c!.store.acquire(["gone.test"], one, { park: true })).toMatchObject({
      ok: false,
      parked: "p2:1",
    });
    const toC: HandedLease[] = [];
    c!.store.handed$!.subscribe((h) => toC.push(h));
    subscription.unsubscribe();
    await until(async () => (await a!.client.zRange(queue, 0, -1)).join() === "p2", "b gone");
    await a!.store.release(held.lease);
    await until(() => toC.length === 1, "c's hand-over");
    expect(toC[0]!.lease.id).toBe("p2:1");
  });

  it("sharedDownload() turns a Redis failure into an error outcome with a RedisScopesError", async () => {
    const [a] = await redisProcesses(1);
    a!.client.destroy();
    const throttler: Throttler<string> = createThrottler();
    let started = 0;
    const outcomes: Outcome<string, number>[] = await lastValueFrom(
      from(["http://down.test/1", "http://down.test/2"]).pipe(
        throttleByScope(
          throttler,
          sharedDownload(a!.store, throttler, () => {
            started++;
            return Promise.resolve(200);
          }),
        ),
        toArray(),
      ),
    );
    expect(started).toBe(0);
    expect(outcomes).toHaveLength(2);
    for (const outcome of outcomes) {
      expect(outcome.kind).toBe("error");
      if (outcome.kind !== "error") continue;
      expect(outcome.error).toBeInstanceOf(RedisScopesError);
      expect(outcome.error).toMatchObject({ operation: "acquire", scopes: ["down.test"] });
    }
  });

  it("sharedDownload() names a bad option", async () => {
    const [a] = await redisProcesses(1);
    expect(() =>
      sharedDownload(a!.store, createThrottler(), () => Promise.resolve(1), { pollMs: 0 })
    ).toThrow(/'pollMs' must be a finite number > 0: current value is 0/);
    for (const reuseLeases of [-1, 1.5]) {
      expect(() =>
        sharedDownload(a!.store, createThrottler(), () => Promise.resolve(1), { reuseLeases })
      ).toThrow(
        new RegExp(`'reuseLeases' must be an integer >= 0: current value is ${reuseLeases}`),
      );
    }
  });
});
