import { describe, expect, it } from "vitest";
import { from, lastValueFrom, toArray } from "rxjs";
import { createDnsCache, DnsLookupError } from "../lib/scopes/dns_cache.ts";
import { DownloadFailedError } from "../lib/http/download_errors.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { recordingDownload, testScheduler } from "./_helpers/test_scheduler.ts";

/** Let DNS promises settle, then run virtual time; repeat. */
async function run(scheduler: { flush(): void }, rounds = 5) {
  for (let i = 0; i < rounds; i++) {
    await new Promise((r) => setImmediate(r));
    scheduler.flush();
  }
}

describe("Throttler per-IP scopes", () => {
  it("Throttler.resolveScopes() adds the IP: two host names on one IP share its limit", async () => {
    const scheduler = testScheduler();
    const dns = createDnsCache({ scheduler, resolve: () => Promise.resolve(["10.0.0.7"]) });
    const throttler = createThrottler<string>(
      { concurrentRequestsPerIp: 2, concurrentRequestsPerDomain: 8 },
      { scheduler, dns },
    );
    const rec = recordingDownload<string>(scheduler, () => 100);
    const urls = Array.from({ length: 12 }, (_, i) => `http://${i % 2 ? "a" : "b"}.test/${i}`);
    const out: unknown[] = [];
    from(urls).pipe(throttleByScope(throttler, rec.download)).subscribe((o) => out.push(o));
    await run(scheduler);
    expect(out).toHaveLength(12);
    expect(rec.sends[0]!.scopes).toEqual(["b.test", "10.0.0.7"]);
    expect(rec.maxInFlight.get("10.0.0.7")).toBe(2);
    expect(rec.maxTotal).toBe(2);
    // 12 requests, 2 at a time, 100 ms each.
    expect(Math.max(...rec.sends.map((s) => s.at))).toBe(500);
    expect(throttler.state("10.0.0.7")?.concurrency).toBe(2);
  });

  it("Throttler.resolveScopes() is synchronous once the IP is cached", async () => {
    const dns = createDnsCache({ resolve: () => Promise.resolve(["10.0.0.7"]) });
    const throttler = createThrottler<string>({ concurrentRequestsPerIp: 1 }, { dns });
    expect(throttler.resolveScopes("http://a.test/")).toBeInstanceOf(Promise);
    await dns.lookup("a.test");
    expect(throttler.resolveScopes("http://a.test:8080/")).toEqual({
      names: ["a.test:8080", "10.0.0.7"],
      amounts: undefined,
    });
    // An IP host is its own IP scope, not twice.
    expect(throttler.resolveScopes("http://10.0.0.9/")).toEqual({
      names: ["10.0.0.9"],
      amounts: undefined,
    });
  });

  it("Throttler.resolveScopes() resolves localhost for real", async () => {
    const throttler = createThrottler<string>({ concurrentRequestsPerIp: 1 });
    const outcomes = await lastValueFrom(
      from(["http://localhost:1/a"]).pipe(
        throttleByScope(throttler, () => Promise.resolve(1)),
        toArray(),
      ),
    );
    expect(outcomes[0]!.kind).toBe("response");
    expect(outcomes[0]!.scopes[0]).toBe("localhost:1");
    expect(["127.0.0.1", "::1"]).toContain(outcomes[0]!.scopes[1]);
  });

  it("Throttler turns a failed lookup into an error outcome (DnsLookupError, a DownloadFailedError)", async () => {
    const dns = createDnsCache({
      resolve: () => Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" })),
    });
    const throttler = createThrottler<string>({ concurrentRequestsPerIp: 1 }, { dns });
    let downloads = 0;
    const outcomes = await lastValueFrom(
      from(["http://gone.test/", "http://ok.test/"]).pipe(
        throttleByScope(throttler, () => Promise.resolve(++downloads)),
        toArray(),
      ),
    );
    expect(downloads).toBe(0);
    const e = (outcomes[0] as { error: unknown }).error;
    expect(e).toBeInstanceOf(DnsLookupError);
    expect(e).toBeInstanceOf(DownloadFailedError);
    expect((e as DnsLookupError).code).toBe("ENOTFOUND");
    expect((e as DnsLookupError).host).toBe("gone.test");
  });

  it("Throttler adds no IP scope when concurrentRequestsPerIp is 0", () => {
    const throttler = createThrottler<string>({}, {
      dns: createDnsCache({ resolve: () => Promise.reject(new Error("must not be asked")) }),
    });
    expect(throttler.resolveScopes("http://a.test/")).toEqual({
      names: ["a.test"],
      amounts: undefined,
    });
  });
});
