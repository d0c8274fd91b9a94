import { describe, expect, it } from "vitest";
import { from } from "rxjs";
import { hierarchicalScopes } from "../lib/scopes/domain_scopes.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { recordingDownload, seededRandom, testScheduler } from "./_helpers/test_scheduler.ts";

describe("hierarchicalScopes as getScopes (the reference's example)", () => {
  it("hierarchicalScopes() keeps books (24) and quotes (16) within toscrape.com's 32 together", () => {
    const scheduler = testScheduler();
    const throttler = createThrottler<string>({
      concurrentRequests: 100,
      scopes: {
        "toscrape.com": { concurrency: 32 },
        "books.toscrape.com": { concurrency: 24 },
        "quotes.toscrape.com": { concurrency: 16 },
      },
    }, { scheduler, getScopes: (url) => hierarchicalScopes(url) });
    const random = seededRandom(7);
    const latency = new Map<string, number>();
    const rec = recordingDownload<string>(scheduler, (url) => latency.get(url)!);
    const urls = Array.from({ length: 600 }, (_, i) => {
      const url = `https://${random() < 0.5 ? "books" : "quotes"}.toscrape.com/${i}`;
      latency.set(url, 10 + Math.floor(random() * 200));
      return url;
    });
    let done = 0;
    from(urls).pipe(throttleByScope(throttler, rec.download)).subscribe(() => done++);
    scheduler.flush();
    expect(done).toBe(600);
    // Combined in flight, counted from the sends themselves.
    const edges = rec.sends.flatMap((s) => [[s.at, 1], [s.endedAt!, -1]] as const)
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let now = 0;
    let peak = 0;
    for (const [, d] of edges) peak = Math.max(peak, now += d);
    expect(peak).toBe(32);
    expect(rec.maxInFlight.get("toscrape.com")).toBe(32);
    expect(rec.maxInFlight.get("books.toscrape.com")).toBeLessThanOrEqual(24);
    expect(rec.maxInFlight.get("quotes.toscrape.com")).toBeLessThanOrEqual(16);
    expect(rec.sends[0]!.scopes).toEqual(["toscrape.com", rec.sends[0]!.scopes[1]]);
  });
});
