/**
 * `shareBackoff` against the real Redis on 127.0.0.1:$REDIS_PORT (6390 by
 * default): throttlers of several "processes" in one test, on a fresh random
 * prefix.
 */
import { afterEach, describe, expect, it } from "vitest";
import { from, lastValueFrom, toArray } from "rxjs";
import {
  type AcquireResult,
  createRedisScopes,
  type RedisScopes,
  type RedisScopesClient,
  type SharedMessage,
} from "../lib/redis/redis_scopes.ts";
import { shareBackoff } from "../lib/redis/shared_backoff.ts";
import { sharedDownload } from "../lib/redis/shared_download.ts";
import { createThrottler, type Throttler } from "../lib/throttler/throttler.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { backoffOn } from "../operators/backoff_on.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";
import { connectRedis, onCleanup, redisProcesses, runCleanups, until } from "./_helpers/redis.ts";

afterEach(runCleanups);

/** `n` stores (processes) on one fresh prefix. */
async function stores(n: number): Promise<RedisScopes[]> {
  return (await redisProcesses(n)).map((p) => p.store);
}

/**
 * Wait until `listener` has heard everything `sender` published so far:
 * messages of one connection arrive in order, so once a marker sent now is
 * heard, anything sent before it (an echo, say) has been heard too.
 */
async function barrier(sender: RedisScopes, listener: RedisScopes): Promise<void> {
  const scope = `barrier-${crypto.randomUUID()}`;
  let heard = false;
  const sub = listener.messages$.subscribe((m) => {
    if (m.type === "backoff" && m.scope === scope) heard = true;
  });
  try {
    await sender.publishBackoff({ scope, level: 0, cause: "barrier", hold: undefined });
    await until(() => heard, "the barrier message");
  } finally {
    sub.unsubscribe();
  }
}

/** Two processes, each a store and a throttler sharing its backoff through it. */
async function sharingPair(settings: ThrottlerSettingsInput = {}) {
  const [a, b] = await stores(2);
  // Levels are what most of these tests follow: the reference's exponential
  // backoff unless a test asks for adaptive scopes.
  const ta = createThrottler<string>({ adaptive: false, ...settings });
  const tb = createThrottler<string>({ adaptive: false, ...settings });
  const sa = shareBackoff(a!, ta);
  const sb = shareBackoff(b!, tb);
  onCleanup(() => sa.unsubscribe());
  onCleanup(() => sb.unsubscribe());
  return { a: a!, b: b!, ta, tb, sb };
}

const level = <R>(t: Throttler<R>, scope: string) => t.state(scope)?.backoffLevel ?? 0;

/** One real fetch of `url` through `throttler`'s gate, the shared lease of `store` and `backoffOn`. */
function sharedFetch(store: RedisScopes, throttler: Throttler<string>, url: string) {
  const get = async (u: string) => {
    const response = await fetch(u);
    await response.text();
    return { status: response.status, headers: response.headers };
  };
  return lastValueFrom(
    from([url]).pipe(
      throttleByScope(throttler, sharedDownload(store, throttler, get)),
      backoffOn(throttler),
      toArray(),
    ),
  );
}

describe("shareBackoff()", () => {
  it("shareBackoff() applies one throttler's backoff and hold to another, once, with no echo", async () => {
    const [a, b, watcher] = await stores(3);
    const ta = createThrottler({ adaptive: false });
    const tb = createThrottler({ adaptive: false });
    const sa = shareBackoff(a!, ta);
    const sb = shareBackoff(b!, tb);
    onCleanup(() => sa.unsubscribe());
    onCleanup(() => sb.unsubscribe());
    const heard: SharedMessage[] = [];
    watcher!.messages$.subscribe((m) => heard.push(m));

    ta.recordBackoff("s.test", { holdMs: 3_000, cause: "status 429" }, "retry-after");
    expect(level(ta, "s.test")).toBe(1);
    await until(() => level(tb, "s.test") >= 1, "the backoff to reach the other throttler");
    const state = tb.state("s.test")!;
    expect(state.backoffLevel).toBe(1);
    expect(state.delayMs).toBe(ta.state("s.test")!.delayMs);
    expect(state.holdUntil - tb.scheduler.now()).toBeGreaterThan(2_000);
    // Had b echoed the backoff, the echo would be heard before b's barrier.
    await barrier(b!, watcher!);
    expect(heard.filter((m) => m.type === "backoff" && m.cause !== "barrier")).toEqual([{
      type: "backoff",
      from: "p0",
      scope: "s.test",
      level: 1,
      delayMs: 1_000,
      cause: "status 429",
      hold: { ms: 3_000, source: "retry-after" },
    }]);
    expect(level(ta, "s.test")).toBe(1);
  });

  it("shareBackoff() gives an adaptive scope the slower pace another process learned, and no faster one", async () => {
    const { a, b, ta, tb } = await sharingPair({ adaptive: true });
    // Nothing measured in a: one ordinary step, to a 1 s pace.
    ta.recordBackoff("p.test", { cause: "status 429" });
    expect(ta.state("p.test")!.delayMs).toBe(1_000);
    await until(() => (tb.state("p.test")?.delayMs ?? 0) >= 1_000, "the pace to reach b");
    expect(tb.state("p.test")).toMatchObject({ delayMs: 1_000, backoffLevel: 0 });
    // b already slower: a faster pace from a changes nothing.
    tb.adoptDelay("q.test", 5_000);
    ta.recordBackoff("q.test", { cause: "status 429" });
    await until(() => (ta.state("q.test")?.delayMs ?? 0) === 1_000, "a's own step");
    await barrier(a, b); // a's message about q.test has reached b
    expect(tb.state("q.test")!.delayMs).toBe(5_000);
  });

  it("shareBackoff() shares an announced budget's hold as a hold, with no backoff step", async () => {
    const { ta, tb } = await sharingPair();
    ta.recordAnnounced("r.test", { remaining: 0, resetInMs: 4_000 });
    await until(
      () => (tb.state("r.test")?.holdUntil ?? 0) > 0,
      "the hold to reach the other throttler",
    );
    expect(tb.state("r.test")!.holdUntil - tb.scheduler.now()).toBeGreaterThan(3_000);
    expect(level(tb, "r.test")).toBe(0);
    expect(level(ta, "r.test")).toBe(0);
  });

  it("shareBackoff() steps a scope up to the sender's level, not past it", async () => {
    const { a, b, ta, tb } = await sharingPair();
    tb.recordBackoff("l.test", { cause: "status 503" });
    await until(() => level(ta, "l.test") === 1, "the first step");
    // a steps twice more on its own: b follows to 3, and a stays at 3.
    ta.recordBackoff("l.test", { cause: "status 503" });
    ta.recordBackoff("l.test", { cause: "status 503" });
    await until(() => level(tb, "l.test") === 3, "b at level 3");
    await barrier(b, a); // anything b sent back has reached a
    expect(level(ta, "l.test")).toBe(3);
    expect(level(tb, "l.test")).toBe(3);
  });

  it("shareBackoff() stops sharing when unsubscribed", async () => {
    const { b, ta, tb, sb } = await sharingPair();
    sb.unsubscribe();
    const heardByB: SharedMessage[] = [];
    b.messages$.subscribe((m) => heardByB.push(m));
    ta.recordBackoff("u.test", { cause: "status 429" });
    // b's store got the message (it was sharing's source): nothing applied it.
    await until(() => heardByB.length === 1, "the message to reach b's store");
    expect(level(ta, "u.test")).toBe(1);
    expect(level(tb, "u.test")).toBe(0);
  });

  it("shareBackoff() slows the other process down after one 429 with Retry-After", async () => {
    let first = true;
    const server = await startRecordingServer((_req, res) => {
      if (first) {
        first = false;
        res.writeHead(429, { "retry-after": "2" }).end("slow down");
      } else res.writeHead(200).end("ok");
    });
    onCleanup(() => server.close());
    const { a, b, ta, tb } = await sharingPair({ retry: { enabled: false }, downloadDelayMs: 0 });
    const outcomes = await sharedFetch(a, ta, `${server.origin}/a`);
    expect(outcomes[0]).toMatchObject({ kind: "response", response: { status: 429 } });
    const scope = outcomes[0]!.scopes[0]!;
    await until(() => level(tb, scope) >= 1, "b to back off");
    expect(tb.state(scope)!.holdUntil).toBeGreaterThan(tb.scheduler.now() + 1_000);
    // And the hold is in Redis: b's next request is told to wait, even without its own throttler.
    const got = await b.acquire([scope], [{ concurrency: 8, delayMs: 0 }]);
    expect(got.ok).toBe(false);
    if (got.ok) throw new Error("unreachable");
    expect(got.waitMs).toBeGreaterThan(1_000);
  });
});

describe("shareBackoff() with sharedDownload()", () => {
  it(
    "shareBackoff() stores a hold in Redis before the lease of the response that brought it is released",
    async () => {
      const server = await startRecordingServer((_req, res) => {
        res.writeHead(429, { "retry-after": "5" }).end("slow down");
      });
      onCleanup(() => server.close());
      const [, b] = await redisProcesses(2); // b for the prefix (and its clean-up) and as the other process
      const client = await connectRedis();
      // The real client of process a, its commands recorded in the order they
      // go out on its one connection (the order Redis runs them in).
      const sent: string[] = [];
      const recording: RedisScopesClient = {
        sendCommand: (args) => {
          // A backoff goes out as its message; a release as a batch with an
          // 'r' operation (its message is built in Redis).
          if (args.some((arg) => arg.startsWith('{"type":"backoff"'))) sent.push("backoff");
          else if (args[0] === "EVALSHA" && args.includes("r")) sent.push("release");
          return client.sendCommand([...args]);
        },
        duplicate: () => client.duplicate(),
      };
      const a = await createRedisScopes(recording, { prefix: b!.store.prefix, processId: "a" });
      onCleanup(() => a.close());
      const ta = createThrottler<string>({
        adaptive: false,
        retry: { enabled: false },
        downloadDelayMs: 0,
      });
      const sharing = shareBackoff(a, ta);
      onCleanup(() => sharing.unsubscribe());
      // The other process asks the moment it hears the release, as a waiting request does.
      const asked = new Promise<AcquireResult>((resolve) => {
        const sub = b!.store.released$.subscribe((scopes) => {
          sub.unsubscribe();
          resolve(b!.store.acquire(scopes, scopes.map(() => ({ concurrency: 8, delayMs: 0 }))));
        });
      });
      const outcomes = await sharedFetch(a, ta, `${server.origin}/a`);
      expect(outcomes[0]).toMatchObject({ kind: "response", response: { status: 429 } });
      const got = await asked;
      expect(sent).toEqual(["backoff", "release"]);
      expect(got).toMatchObject({ ok: false });
      if (got.ok) throw new Error("unreachable");
      expect(got.waitMs).toBeGreaterThan(3_000);
    },
    60_000,
  );
});
