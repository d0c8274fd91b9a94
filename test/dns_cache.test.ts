import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { asyncScheduler, type SchedulerLike } from "rxjs";
import { createDnsCache, DnsLookupError, type DnsResolver } from "../lib/scopes/dns_cache.ts";

/** A scheduler whose clock the test moves by hand (only `now` is read by the cache). */
function fakeClock(): SchedulerLike & { t: number } {
  const clock = {
    t: 0,
    now: () => clock.t,
    schedule: asyncScheduler.schedule.bind(asyncScheduler),
  };
  return clock as SchedulerLike & { t: number };
}

/** A resolver that answers from a table and counts its calls per host. */
function tableResolver(table: Record<string, readonly string[] | Error>) {
  const calls: string[] = [];
  const resolve: DnsResolver = (host) => {
    calls.push(host);
    const answer = table[host];
    if (answer === undefined) return Promise.reject(new Error(`ENOTFOUND ${host}`));
    if (answer instanceof Error) return Promise.reject(answer);
    return Promise.resolve(answer);
  };
  return { resolve, calls };
}

/** A resolver whose answers the test releases by hand. */
function manualResolver() {
  const pending: {
    host: string;
    settle: (a: readonly string[]) => void;
    fail: (e: unknown) => void;
  }[] = [];
  const resolve: DnsResolver = (host) =>
    new Promise((settle, fail) => {
      pending.push({ host, settle, fail });
    });
  return { resolve, pending };
}

const flush = () => new Promise<void>((r) => setImmediate(r));

describe("createDnsCache()", () => {
  it("lookup() returns the first address and caches it until the TTL ends", async () => {
    const scheduler = fakeClock();
    const { resolve, calls } = tableResolver({ "a.example": ["10.0.0.1", "10.0.0.2"] });
    const dns = createDnsCache({ resolve, ttlMs: 1_000, scheduler });
    expect(dns.peek("a.example")).toBeUndefined();
    expect(await dns.lookup("a.example")).toBe("10.0.0.1");
    expect(dns.peek("a.example")).toBe("10.0.0.1");
    scheduler.t = 999;
    expect(await dns.lookup("A.Example")).toBe("10.0.0.1");
    expect(calls).toEqual(["a.example"]);
    scheduler.t = 1_000;
    expect(dns.peek("a.example")).toBeUndefined();
    expect(await dns.lookup("a.example")).toBe("10.0.0.1");
    expect(calls).toEqual(["a.example", "a.example"]);
  });

  it("lookup() shares one resolution between concurrent callers", async () => {
    const { resolve, pending } = manualResolver();
    const dns = createDnsCache({ resolve, scheduler: fakeClock() });
    const a = dns.lookup("a.example");
    const b = dns.lookup("a.example");
    await flush();
    expect(pending.map((p) => p.host)).toEqual(["a.example"]);
    expect(dns.peek("a.example")).toBeUndefined();
    pending[0]!.settle(["192.0.2.5"]);
    expect(await Promise.all([a, b])).toEqual(["192.0.2.5", "192.0.2.5"]);
  });

  it("lookup() gives two host names on one IP the same address", async () => {
    const { resolve } = tableResolver({ "a.example": ["10.0.0.7"], "b.example": ["10.0.0.7"] });
    const dns = createDnsCache({ resolve, scheduler: fakeClock() });
    expect(await dns.lookup("a.example")).toBe(await dns.lookup("b.example"));
  });

  it("lookup() rejects with a DnsLookupError naming the host, remembered only for failureTtlMs", async () => {
    const scheduler = fakeClock();
    const { resolve, calls } = tableResolver({ "empty.example": [] });
    const dns = createDnsCache({ resolve, failureTtlMs: 100, scheduler });
    const error = await dns.lookup("gone.example").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DnsLookupError);
    expect((error as DnsLookupError).host).toBe("gone.example");
    expect((error as DnsLookupError).cause).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/gone\.example.*ENOTFOUND/);
    expect(dns.peek("gone.example")).toBeUndefined();
    scheduler.t = 99;
    await expect(dns.lookup("gone.example")).rejects.toBeInstanceOf(DnsLookupError);
    expect(calls).toEqual(["gone.example"]);
    scheduler.t = 100;
    await expect(dns.lookup("gone.example")).rejects.toBeInstanceOf(DnsLookupError);
    expect(calls).toEqual(["gone.example", "gone.example"]);
    await expect(dns.lookup("empty.example")).rejects.toThrow(/empty\.example.*no address/);
  });

  it("lookup() recovers after a failure once failureTtlMs has passed", async () => {
    const scheduler = fakeClock();
    const { resolve, pending } = manualResolver();
    const dns = createDnsCache({ resolve, failureTtlMs: 50, scheduler });
    const first = dns.lookup("flaky.example");
    await flush();
    pending[0]!.fail(new Error("SERVFAIL"));
    await expect(first).rejects.toBeInstanceOf(DnsLookupError);
    scheduler.t = 50;
    const second = dns.lookup("flaky.example");
    await flush();
    pending[1]!.settle(["10.1.1.1"]);
    expect(await second).toBe("10.1.1.1");
  });

  it("lookup() turns a resolver that throws synchronously into a rejection", async () => {
    const dns = createDnsCache({
      resolve: () => {
        throw new Error("boom");
      },
      scheduler: fakeClock(),
    });
    await expect(dns.lookup("a.example")).rejects.toBeInstanceOf(DnsLookupError);
  });

  it.each([
    ["10.0.0.1", "10.0.0.1"],
    ["::1", "::1"],
    ["[::1]", "::1"],
    ["[2001:DB8::1]", "2001:db8::1"],
  ])("lookup() returns the IP literal %s as %s without resolving", async (host, address) => {
    const { resolve, calls } = tableResolver({});
    const dns = createDnsCache({ resolve, scheduler: fakeClock() });
    expect(await dns.lookup(host)).toBe(address);
    expect(dns.peek(host)).toBe(address);
    expect(calls).toEqual([]);
    expect(dns.size).toBe(0);
  });

  it("lookup() evicts the least recently used host above maxEntries", async () => {
    const { resolve, calls } = tableResolver({ a: ["10.0.0.1"], b: ["10.0.0.2"], c: ["10.0.0.3"] });
    const dns = createDnsCache({ resolve, maxEntries: 2, scheduler: fakeClock() });
    await dns.lookup("a");
    await dns.lookup("b");
    expect(dns.peek("a")).toBe("10.0.0.1"); // a is now the most recently used
    await dns.lookup("c");
    expect(dns.size).toBe(2);
    expect(dns.peek("b")).toBeUndefined();
    expect(dns.peek("a")).toBe("10.0.0.1");
    expect(calls).toEqual(["a", "b", "c"]);
    dns.clear();
    expect(dns.size).toBe(0);
  });

  it("lookup() keeps at most maxEntries hosts, and never evicts the two last used", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 3, max: 8 }),
        fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 1, maxLength: 60 }),
        async (maxEntries, keys) => {
          const dns = createDnsCache({
            resolve: (h) => Promise.resolve([`10.0.0.${h.slice(1)}`]),
            maxEntries,
          });
          let previous: string | undefined;
          for (const k of keys) {
            const host = `h${k}`;
            expect(await dns.lookup(host)).toBe(`10.0.0.${k}`);
            expect(dns.size).toBeLessThanOrEqual(maxEntries);
            expect(dns.peek(host)).toBe(`10.0.0.${k}`);
            if (previous !== undefined) expect(dns.peek(previous)).toBeDefined();
            previous = host;
          }
        },
      ),
    );
  });

  it.each([
    [{ ttlMs: -1 }, /'ttlMs' must be a finite number >= 0: current value is -1/],
    [{ failureTtlMs: Number.NaN }, /'failureTtlMs'.*NaN/],
    [{ maxEntries: 1.5 }, /'maxEntries' must be an integer >= 0: current value is 1.5/],
  ])("createDnsCache() rejects bad options at once: %j", (options, message) => {
    expect(() => createDnsCache(options)).toThrow(RangeError);
    expect(() => createDnsCache(options)).toThrow(message);
  });

  it("createDnsCache() rejects a resolver that is not a function", () => {
    expect(() => createDnsCache({ resolve: "8.8.8.8" as unknown as DnsResolver })).toThrow(
      TypeError,
    );
  });

  it("lookup() resolves localhost with the system resolver", async () => {
    const dns = createDnsCache();
    const address = await dns.lookup("localhost");
    expect(["127.0.0.1", "::1"]).toContain(address);
    expect(dns.peek("localhost")).toBe(address);
  });
});
