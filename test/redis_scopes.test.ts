/**
 * `createRedisScopes` against the real Redis on 127.0.0.1:$REDIS_PORT (6390
 * by default). Each test works under a fresh random key prefix; two or three
 * stores on one prefix stand for as many processes. Times are compared on
 * Redis's clock (the leases' `grantedAt`/`expiresAt`), with a millisecond of
 * rounding at most; the wall clock only bounds how long a test polls.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  type AcquireResult,
  createRedisScopes,
  type HandedLease,
  type RedisScopesClient,
  RedisScopesError,
  type ScopeLease,
  type SharedMessage,
} from "../lib/redis/redis_scopes.ts";
import {
  connectRedis,
  onCleanup,
  redisProcesses,
  runCleanups,
  sleep,
  until,
} from "./_helpers/redis.ts";

afterEach(runCleanups);

/** The lease of a grant, or a failure saying what was answered instead. */
function leaseOf(got: AcquireResult): ScopeLease {
  if (!got.ok) throw new Error(`expected a lease, got ${JSON.stringify(got)}`);
  return got.lease;
}

describe("createRedisScopes()", () => {
  it("createRedisScopes() grants no more leases across processes than the scope's concurrency", async () => {
    const [a, b, c] = await redisProcesses(3);
    const limits = [{ concurrency: 2, delayMs: 0 }];
    const first = leaseOf(await a!.store.acquire(["s"], limits));
    leaseOf(await b!.store.acquire(["s"], limits));
    expect(await c!.store.acquire(["s"], limits)).toMatchObject({ ok: false, full: true });
    await a!.store.release(first);
    expect((await c!.store.acquire(["s"], limits)).ok).toBe(true);
  });

  it("createRedisScopes() grants sends at least delayMs apart on the server's clock", async () => {
    const procs = await redisProcesses(2);
    const delayMs = 30;
    const granted: number[] = [];
    let refused = 0;
    await Promise.all(procs.map(async ({ store }) => {
      while (granted.length < 8) {
        const got = await store.acquire(["d"], [{ concurrency: 10, delayMs }]);
        if (got.ok) {
          granted.push(got.lease.grantedAt);
          await store.release(got.lease);
        } else {
          refused++;
          await sleep(Math.max(1, got.waitMs));
        }
      }
    }));
    expect(refused).toBeGreaterThan(0); // the two did compete
    granted.sort((x, y) => x - y);
    for (let i = 1; i < granted.length; i++) {
      // The script compares times with microseconds; a millisecond of rounding allowed.
      expect(granted[i]! - granted[i - 1]!).toBeGreaterThanOrEqual(delayMs - 1);
    }
  });

  it("createRedisScopes() owes a freed slot to the process that waited for it, not to the one that released it", async () => {
    const [a, b] = await redisProcesses(2);
    const limits = [{ concurrency: 1, delayMs: 0 }];
    const held = leaseOf(await a!.store.acquire(["t"], limits));
    expect(await b!.store.acquire(["t"], limits)).toMatchObject({ ok: false, full: true });
    await a!.store.release(held);
    // a asks first, but b has waited: a is told to wait as for a full scope.
    expect(await a!.store.acquire(["t"], limits)).toMatchObject({ ok: false, full: true });
    const turn = leaseOf(await b!.store.acquire(["t"], limits));
    await b!.store.release(turn);
    // Then a's turn: b, granted, went to the back (behind a).
    expect(await b!.store.acquire(["t"], limits)).toMatchObject({ ok: false, full: true });
    expect((await a!.store.acquire(["t"], limits)).ok).toBe(true);
  });

  it("createRedisScopes() wakes on a release only the process whose turn it is", async () => {
    const [a, b, c] = await redisProcesses(3);
    const limits = [{ concurrency: 1, delayMs: 0 }];
    const held = leaseOf(await a!.store.acquire(["h"], limits));
    expect(await b!.store.acquire(["h"], limits)).toMatchObject({ ok: false });
    expect(await c!.store.acquire(["h"], limits)).toMatchObject({ ok: false });
    const woken: string[] = [];
    const heardByC: SharedMessage[] = [];
    a!.store.released$.subscribe(() => woken.push("a"));
    b!.store.released$.subscribe(() => woken.push("b"));
    c!.store.released$.subscribe(() => woken.push("c"));
    c!.store.messages$.subscribe((m) => heardByC.push(m));
    await a!.store.release(held);
    await until(() => heardByC.length === 1 && woken.includes("b"), "the release message");
    expect(heardByC[0]).toMatchObject({ type: "release", scopes: ["h"], next: ["p1"] });
    expect(woken).toEqual(["b"]); // not a, which released, nor c, behind b
  });

  it("createRedisScopes() names on a release as many waiting processes as the scope has free slots", async () => {
    const [a, b, c] = await redisProcesses(3);
    const limits = [{ concurrency: 2, delayMs: 0 }];
    const first = leaseOf(await a!.store.acquire(["w"], limits));
    const second = leaseOf(await a!.store.acquire(["w"], limits));
    expect(await b!.store.acquire(["w"], limits)).toMatchObject({ ok: false, full: true });
    expect(await c!.store.acquire(["w"], limits)).toMatchObject({ ok: false, full: true });
    const woken: string[] = [];
    b!.store.released$.subscribe(() => woken.push("b"));
    c!.store.released$.subscribe(() => woken.push("c"));
    await a!.store.release(first);
    await until(() => woken.includes("b"), "b's turn");
    await a!.store.release(second);
    // Two slots free, b not yet back: c, second in the queue, is owed one too.
    await until(() => woken.includes("c"), "c's turn");
    expect((await c!.store.acquire(["w"], limits)).ok).toBe(true);
    expect((await b!.store.acquire(["w"], limits)).ok).toBe(true);
  });

  it("createRedisScopes() queues a process whose grant asked with more and filled the scope", async () => {
    const [a, b] = await redisProcesses(2);
    const limits = [{ concurrency: 1, delayMs: 0 }];
    const got = await a!.store.acquire(["v"], limits, { more: true });
    expect(got).toMatchObject({ ok: true, queued: true });
    // b comes after a's place: refused, and behind a once the slot frees.
    expect(await b!.store.acquire(["v"], limits)).toMatchObject({ ok: false, full: true });
    await a!.store.release(leaseOf(got));
    expect(await b!.store.acquire(["v"], limits)).toMatchObject({ ok: false, full: true });
    expect(await a!.store.acquire(["v"], limits)).toMatchObject({ ok: true, queued: false });
    // A grant that leaves a free slot keeps no place.
    const roomy = [{ concurrency: 3, delayMs: 0 }];
    expect(await a!.store.acquire(["u"], roomy, { more: true })).toMatchObject({ queued: false });
  });

  it("createRedisScopes() hands a freed slot to the parked ask of the process whose turn it is, without a new ask", async () => {
    const [a, b, c] = await redisProcesses(3);
    const one = [{ concurrency: 1, delayMs: 0 }];
    const held = leaseOf(await a!.store.acquire(["k"], one));
    const parked = await b!.store.acquire(["k"], one, { park: true });
    expect(parked).toMatchObject({ ok: false, full: true, parked: "p1:1" });
    const handed: HandedLease[] = [];
    b!.store.handed$!.subscribe((h) => handed.push(h));
    const woken: string[] = [];
    b!.store.released$.subscribe((s) => woken.push(...s));
    await a!.store.release(held);
    await until(() => handed.length === 1, "the hand-over");
    expect(handed[0]).toMatchObject({ lease: { id: "p1:1", scopes: ["k"] }, parked: undefined });
    expect(woken).toEqual([]); // handed, not woken to ask
    // The slot is b's: nobody else gets it, a's own ask included.
    expect(await c!.store.acquire(["k"], one)).toMatchObject({ ok: false, full: true });
    expect(await a!.store.acquire(["k"], one)).toMatchObject({ ok: false, full: true });
    // Asked again (its message lost, say), the parked lease is answered as granted.
    expect(await b!.store.acquire(["k"], one, { park: true, lease: "p1:1" })).toMatchObject({
      ok: true,
      lease: { id: "p1:1" },
      handed: true,
    });
    await b!.store.release(handed[0]!.lease);
    expect((await c!.store.acquire(["k"], one)).ok).toBe(true);
  });

  it("createRedisScopes() hands over and wakes processes whose ids JSON escapes, and decodes their release for messages$", async () => {
    const [a] = await redisProcesses(1); // p0, and the prefix's clean-up
    // Characters Redis's cjson writes otherwise than JSON.stringify ('/', DEL), and some it escapes alike.
    const ids = ['b/"x"\x7f é😀', "c\t\\d\n"];
    const [b, c] = await Promise.all(ids.map(async (processId) => {
      const client = await connectRedis();
      const store = await createRedisScopes(client, { prefix: a!.store.prefix, processId });
      onCleanup(() => store.close());
      return store;
    }));
    const one = [{ concurrency: 1, delayMs: 0 }];
    const s = leaseOf(await a!.store.acquire(["s"], one));
    const t = leaseOf(await a!.store.acquire(["t"], one));
    const parked = await b!.acquire(["s"], one, { park: true });
    if (parked.ok || parked.parked === undefined) throw new Error("expected a parked ask");
    expect(await c!.acquire(["t"], one)).toMatchObject({ ok: false, full: true });
    const handedToB: HandedLease[] = [];
    b!.handed$!.subscribe((h) => handedToB.push(h));
    const wokenB: string[] = [];
    b!.released$.subscribe((scopes) => wokenB.push(...scopes));
    const wokenC: string[] = [];
    c!.released$.subscribe((scopes) => wokenC.push(...scopes));
    const heardByC: SharedMessage[] = [];
    c!.messages$.subscribe((m) => heardByC.push(m));
    // One turn, one release message: s handed to b, t c's turn.
    await Promise.all([a!.store.release(s), a!.store.release(t)]);
    await until(
      () => handedToB.length === 1 && wokenC.length === 1 && heardByC.length === 1,
      "the release message",
    );
    expect(handedToB[0]!.lease).toMatchObject({ id: parked.parked, scopes: ["s"] });
    expect(wokenB).toEqual([]);
    expect(wokenC).toEqual(["t"]);
    const heard = heardByC[0]!;
    if (heard.type !== "release") throw new Error("expected a release message");
    expect(heard).toMatchObject({
      from: "p0",
      scopes: ["s", "t"],
      next: ids,
      lease: [parked.parked, ""],
      park: ["", ""],
    });
    expect(Number(heard.at)).toBe(handedToB[0]!.lease.grantedAt);
    expect((await c!.acquire(["t"], one)).ok).toBe(true);
  });

  it("createRedisScopes() tells backoffs$ the other processes' backoff messages only", async () => {
    const [a, b] = await redisProcesses(2);
    const heard: SharedMessage[] = [];
    b!.store.backoffs$!.subscribe((m) => heard.push(m));
    await a!.store.release(
      leaseOf(await a!.store.acquire(["m"], [{ concurrency: 1, delayMs: 0 }])),
    );
    await a!.store.publishBackoff({ scope: "m", level: 1, cause: "status 503", hold: undefined });
    await until(() => heard.length > 0, "the backoff message");
    expect(heard).toEqual([{
      type: "backoff",
      from: "p0",
      scope: "m",
      level: 1,
      cause: "status 503",
    }]);
  });

  it("createRedisScopes() parks the next ask of a process that wants more, and hands it the slot its turn brings", async () => {
    const [a, b] = await redisProcesses(2);
    const one = [{ concurrency: 1, delayMs: 0 }];
    const first = await a!.store.acquire(["n"], one, { park: true, more: true });
    expect(first).toMatchObject({ ok: true, queued: true });
    const next = first.ok ? first.parked : undefined;
    expect(next).toMatch(/^p0:h/);
    const handed: HandedLease[] = [];
    a!.store.handed$!.subscribe((h) => handed.push(h));
    // a's own release hands the slot to a's parked ask (its turn: nobody waits ahead).
    await a!.store.release(leaseOf(first));
    expect(handed).toHaveLength(1);
    expect(handed[0]!.lease).toMatchObject({ id: next, scopes: ["n"] });
    // Bun's toMatchObject writes an asymmetric matcher over the value it matched: checked apart.
    expect(handed[0]!.parked).toMatch(/^p0:h/); // queued again: its next ask parked
    // b asks: behind a, whose next ask is parked again.
    expect(await b!.store.acquire(["n"], one, { park: true })).toMatchObject({ ok: false });
    const heardByB: HandedLease[] = [];
    b!.store.handed$!.subscribe((h) => heardByB.push(h));
    // a gives up what it parked: the slot it frees goes to b.
    await a!.store.unpark!(handed[0]!.parked!, "n");
    await a!.store.release(handed[0]!.lease);
    await until(() => heardByB.length === 1, "b's hand-over");
    expect(heardByB[0]).toMatchObject({ lease: { id: "p1:1" } });
  });

  it("createRedisScopes() gives up a parked ask and the lease a release handed it", async () => {
    const [a, b] = await redisProcesses(2);
    const one = [{ concurrency: 1, delayMs: 0 }];
    const held = leaseOf(await a!.store.acquire(["z"], one));
    const parked = await b!.store.acquire(["z"], one, { park: true });
    if (parked.ok || parked.parked === undefined) throw new Error("expected a parked ask");
    await a!.store.release(held); // handed to b's parked ask
    const leases = `${a!.store.prefix}lease:z`;
    expect(await a!.client.zRange(leases, 0, -1)).toEqual([parked.parked]);
    await b!.store.unpark!(parked.parked, "z");
    expect(await a!.client.zRange(leases, 0, -1)).toEqual([]);
    expect(await a!.client.zRange(`${a!.store.prefix}queue:z`, 0, -1)).toEqual([]);
    // Given up before any release: nothing is handed to it.
    const again = await b!.store.acquire(["z"], one, { park: true });
    expect(again.ok).toBe(true);
    const other = await a!.store.acquire(["z"], one, { park: true });
    if (other.ok || other.parked === undefined) throw new Error("expected a parked ask");
    await a!.store.unpark!(other.parked, "z");
    await b!.store.release(leaseOf(again));
    expect(await a!.client.zRange(leases, 0, -1)).toEqual([]);
  });

  it("createRedisScopes() forgets a waiting process that stops asking once its patience is over", async () => {
    const [a, b] = await redisProcesses(2);
    const limits = [{ concurrency: 1, delayMs: 0 }];
    const held = leaseOf(await a!.store.acquire(["g"], limits));
    // b waits once, then never asks again (it crashed).
    expect(await b!.store.acquire(["g"], limits, { patienceMs: 50 })).toMatchObject({ ok: false });
    await a!.store.release(held);
    expect(await a!.store.acquire(["g"], limits)).toMatchObject({ ok: false, full: true });
    await sleep(80); // past b's patience, on Redis's clock too
    expect((await a!.store.acquire(["g"], limits)).ok).toBe(true);
  });

  it("createRedisScopes() keeps no place for a process in a scope that would have let it through", async () => {
    const [a, b, c] = await redisProcesses(3);
    const one = [{ concurrency: 1, delayMs: 0 }];
    const blocker = leaseOf(await c!.store.acquire(["y"], one));
    // a waits for x and y at once: only y refuses it, so a holds no place in x.
    expect(await a!.store.acquire(["x", "y"], [...one, ...one])).toMatchObject({ ok: false });
    expect((await b!.store.acquire(["x"], one)).ok).toBe(true);
    await c!.store.release(blocker);
  });

  it("createRedisScopes() sends the acquires and releases of one turn in one round trip, releases first", async () => {
    const [b] = await redisProcesses(1); // the prefix and its clean-up
    const client = await connectRedis();
    let calls = 0;
    const counting: RedisScopesClient = {
      sendCommand: (args) => {
        if (args[0] === "EVALSHA" || args[0] === "EVAL") calls++;
        return client.sendCommand([...args]);
      },
      duplicate: () => client.duplicate(),
    };
    const a = await createRedisScopes(counting, { prefix: b!.store.prefix, processId: "a" });
    onCleanup(() => a.close());
    const one = [{ concurrency: 1, delayMs: 0 }];
    const held = leaseOf(await a.acquire(["o"], one));
    expect(calls).toBe(1);
    // Asked in this order in one turn: the acquire still finds the slot free.
    const [next, , other] = await Promise.all([
      a.acquire(["o"], one),
      a.release(held),
      a.acquire(["p"], one),
    ]);
    expect(calls).toBe(2);
    expect(next.ok).toBe(true);
    expect(other.ok).toBe(true);
  });

  it("createRedisScopes() counts every process's quota amounts in one window", async () => {
    const [a, b] = await redisProcesses(2);
    const limits = (amount: number) => [
      { concurrency: 10, delayMs: 0, quota: { limit: 3, windowMs: 60_000, amount } },
    ];
    leaseOf(await a!.store.acquire(["q"], limits(2)));
    // 2 + 2 > 3: b waits for the window a opened to end, however many slots are free.
    const over = await b!.store.acquire(["q"], limits(2));
    expect(over).toMatchObject({ ok: false, full: false });
    if (over.ok) throw new Error("unreachable");
    expect(over.waitMs).toBeGreaterThan(50_000);
    expect(over.waitMs).toBeLessThanOrEqual(60_000);
    // 2 + 1 fits (b gave up its place: it asks for one that fits now).
    leaseOf(await b!.store.acquire(["q"], limits(1)));
    expect(await a!.store.acquire(["q"], limits(1))).toMatchObject({ ok: false, full: false });
    // A request without an amount neither waits for the quota nor uses it.
    leaseOf(await a!.store.acquire(["q"], [{ concurrency: 10, delayMs: 0 }]));
  });

  it("createRedisScopes() lets an oversized amount through an unused quota window, and opens a new window once one ended", async () => {
    const [a, b] = await redisProcesses(2);
    const quota = (amount: number) => [
      { concurrency: 10, delayMs: 0, quota: { limit: 2, windowMs: 150, amount } },
    ];
    const big = leaseOf(await a!.store.acquire(["o"], quota(5)));
    expect(await b!.store.acquire(["o"], quota(1))).toMatchObject({ ok: false, full: false });
    // The window a's grant opened ends 150 ms later on Redis's clock: then b's turn.
    await until(async () => (await b!.store.acquire(["o"], quota(1))).ok, "the window to end");
    const [sec, us] = (await b!.client.sendCommand(["TIME"])) as [string, string];
    expect(Number(sec) * 1000 + Number(us) / 1000).toBeGreaterThanOrEqual(big.grantedAt + 150);
  });

  it("createRedisScopes() keeps scopes whose names hold spaces and odd characters apart, and releases a lease by its id from any store", async () => {
    const [a, b] = await redisProcesses(2);
    const one = { concurrency: 1, delayMs: 0 };
    const names = ["a b", "a", "x\u0000y \u{1F600}"];
    const held = leaseOf(await a!.store.acquire(names, [one, one, one]));
    for (const name of names) {
      expect(await b!.store.acquire([name], [one])).toMatchObject({ ok: false, full: true });
    }
    expect((await b!.store.acquire(["b"], [one])).ok).toBe(true);
    // Not b's own lease: it goes by its whole id.
    await b!.store.release(held);
    for (const name of names) {
      await until(async () => (await b!.store.acquire([name], [one])).ok, name);
    }
  });

  it("createRedisScopes() answers how long the delay has left", async () => {
    const [a, b] = await redisProcesses(2);
    leaseOf(await a!.store.acquire(["w"], [{ concurrency: 5, delayMs: 10_000 }]));
    const next = await b!.store.acquire(["w"], [{ concurrency: 5, delayMs: 0 }]);
    // The first sender's delay binds the second, whatever its own.
    expect(next).toMatchObject({ ok: false, full: false });
    if (next.ok) throw new Error("unreachable");
    expect(next.waitMs).toBeGreaterThan(9_000);
    expect(next.waitMs).toBeLessThanOrEqual(10_000);
  });

  it("createRedisScopes() frees the slot of a crashed process when its lease expires, not before", async () => {
    const [a, b] = await redisProcesses(2, { leaseMs: 150 });
    const limits = [{ concurrency: 1, delayMs: 0 }];
    const crashed = leaseOf(await a!.store.acquire(["c"], limits)); // never released: a crash
    expect(crashed.expiresAt - crashed.grantedAt).toBeCloseTo(150, 6);
    const blocked = await b!.store.acquire(["c"], limits);
    expect(blocked).toMatchObject({ ok: false, full: true });
    if (blocked.ok) throw new Error("unreachable");
    expect(blocked.expiresInMs).toBeGreaterThan(0);
    expect(blocked.expiresInMs).toBeLessThanOrEqual(150);
    let lease: ScopeLease | undefined;
    await until(async () => {
      const got = await b!.store.acquire(["c"], limits);
      if (got.ok) lease = got.lease;
      return got.ok;
    }, "the crashed lease to expire");
    expect(lease!.grantedAt).toBeGreaterThanOrEqual(crashed.expiresAt);
  });

  it("createRedisScopes() takes a lease in every scope of a request or in none", async () => {
    const [a, b] = await redisProcesses(2);
    const { client, store } = a!;
    const one = { concurrency: 1, delayMs: 0 };
    const held = leaseOf(await store.acquire(["x"], [one]));
    expect(await b!.store.acquire(["y", "x"], [one, one])).toMatchObject({ ok: false, full: true });
    expect(await client.zCard(`${store.prefix}lease:y`)).toBe(0);
    expect(await client.exists(`${store.prefix}state:y`)).toBe(0);
    await store.release(held);
    leaseOf(await b!.store.acquire(["y", "x"], [one, one]));
    expect(await client.zCard(`${store.prefix}lease:x`)).toBe(1);
    expect(await client.zCard(`${store.prefix}lease:y`)).toBe(1);
    // Either scope now refuses on its own.
    expect((await store.acquire(["y"], [one])).ok).toBe(false);
    expect((await store.acquire(["x"], [one])).ok).toBe(false);
  });

  it("createRedisScopes() lets the keys of an idle scope expire", async () => {
    const [a] = await redisProcesses(1, { leaseMs: 100, idleTtlMs: 100 });
    const { client, store } = a!;
    const lease = leaseOf(await store.acquire(["idle"], [{ concurrency: 1, delayMs: 20 }]));
    for (const key of [`${store.prefix}lease:idle`, `${store.prefix}state:idle`]) {
      const ttl = await client.pTTL(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(200);
    }
    await store.release(lease);
    await until(async () => (await client.keys(`${store.prefix}*`)).length === 0, "the keys to go");
  });

  it("createRedisScopes() never shortens the life of another process's longer lease", async () => {
    // Processes configured with different lease times share a scope.
    const [long] = await redisProcesses(1, { leaseMs: 60_000, idleTtlMs: 1_000 });
    const short = await createRedisScopes(long!.client, {
      prefix: long!.store.prefix,
      processId: "short",
      leaseMs: 100,
      idleTtlMs: 100,
      subscribe: false,
    });
    const limits = [{ concurrency: 2, delayMs: 0 }];
    leaseOf(await long!.store.acquire(["t"], limits));
    const brief = leaseOf(await short.acquire(["t"], limits));
    expect(await short.renew(brief)).toBe(true);
    // Were the set's TTL cut to the short lease's, the long lease would vanish with it.
    expect(await long!.client.pTTL(`${short.prefix}lease:t`)).toBeGreaterThan(60_000);
    expect(await long!.client.pTTL(`${short.prefix}state:t`)).toBeGreaterThan(500);
  });

  it("createRedisScopes() renews a lease while it is held and not after it expired", async () => {
    const [a] = await redisProcesses(1, { leaseMs: 100 });
    const { client, store } = a!;
    const lease = leaseOf(await store.acquire(["r"], [{ concurrency: 1, delayMs: 0 }]));
    const key = `${store.prefix}lease:r`;
    expect(Number(await client.zScore(key, lease.id))).toBeCloseTo(lease.expiresAt, 3);
    await until(async () => {
      const [sec, us] = (await client.sendCommand(["TIME"])) as [string, string];
      return Number(sec) * 1000 + Number(us) / 1000 > lease.grantedAt + 1;
    }, "a millisecond on Redis's clock");
    expect(await store.renew(lease)).toBe(true);
    expect(Number(await client.zScore(key, lease.id))).toBeGreaterThan(lease.expiresAt);
    // Once it expired and another request swept it, renewing it is refused.
    await until(
      async () => (await store.acquire(["r"], [{ concurrency: 1, delayMs: 0 }])).ok,
      "the lease to expire",
    );
    expect(await store.renew(lease)).toBe(false);
  });

  it("createRedisScopes() stores a published hold so every process waits for it", async () => {
    const [a, b] = await redisProcesses(2);
    await a!.store.publishBackoff({
      scope: "h",
      level: 1,
      cause: "status 429",
      hold: { ms: 5_000, source: "retry-after" },
    });
    const got = await b!.store.acquire(["h"], [{ concurrency: 4, delayMs: 0 }]);
    expect(got).toMatchObject({ ok: false, full: false });
    if (got.ok) throw new Error("unreachable");
    expect(got.waitMs).toBeGreaterThan(4_000);
    expect(got.waitMs).toBeLessThanOrEqual(5_000);
  });

  it("createRedisScopes() delivers messages to the other processes, not back to the sender", async () => {
    const [a, b] = await redisProcesses(2);
    const seenByA: SharedMessage[] = [];
    const seenByB: SharedMessage[] = [];
    a!.store.messages$.subscribe((m) => seenByA.push(m));
    b!.store.messages$.subscribe((m) => seenByB.push(m));
    await a!.store.publishBackoff({ scope: "m", level: 2, cause: "status 503", hold: undefined });
    await a!.store.release(
      leaseOf(await a!.store.acquire(["m"], [{ concurrency: 1, delayMs: 0 }])),
    );
    // b's message comes after a's on one connection: once a hears it, a heard all it would.
    await b!.store.publishBackoff({ scope: "end", level: 0, cause: "end", hold: undefined });
    await until(() => seenByA.length > 0 && seenByB.length >= 2, "the messages");
    expect(seenByB).toEqual([
      { type: "backoff", from: "p0", scope: "m", level: 2, cause: "status 503" },
      { type: "release", from: "p0", scopes: ["m"], next: [""] },
    ]);
    expect(seenByA).toEqual([{
      type: "backoff",
      from: "p1",
      scope: "end",
      level: 0,
      cause: "end",
    }]);
  });

  it("createRedisScopes() rejects with a RedisScopesError naming the operation and scopes when Redis fails", async () => {
    const [a] = await redisProcesses(1);
    a!.client.destroy();
    const error = await a!.store.acquire(["e"], [{ concurrency: 1, delayMs: 0 }]).catch((e) => e);
    expect(error).toBeInstanceOf(RedisScopesError);
    expect(error).toMatchObject({ name: "RedisScopesError", operation: "acquire", scopes: ["e"] });
    expect(error.message).toMatch(/^Cannot acquire for scopes e as Redis failed: /);
  });

  it("createRedisScopes() names a bad option", async () => {
    const client = await connectRedis();
    await expect(createRedisScopes(client, { leaseMs: 0 })).rejects.toThrow(
      /'leaseMs' must be a finite number >= 1: current value is 0/,
    );
  });
});
