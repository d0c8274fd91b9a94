/**
 * `backoffOn` end to end: real `fetch` against a loopback server that answers
 * 429 with `Retry-After: 1` for its first 1.5 s, on the real clock.
 */
import { describe, expect, it } from "vitest";
import { from, lastValueFrom, toArray } from "rxjs";
import { createFetchDownload, type FetchedResponse } from "../lib/http/fetch_download.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { backoffOn } from "../operators/backoff_on.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";

describe("backoffOn() over loopback HTTP", () => {
  it(
    "backoffOn() sends nothing during a Retry-After hold and every request eventually succeeds",
    async () => {
      let openAt = Number.POSITIVE_INFINITY;
      /** performance.now() of each 429 sent, with its hold. */
      const holds: number[] = [];
      const server = await startRecordingServer((_req, res) => {
        const now = performance.now();
        if (openAt === Number.POSITIVE_INFINITY) openAt = now + 1_500;
        if (now < openAt) {
          holds.push(now);
          res.writeHead(429, { "retry-after": "1", "content-type": "text/plain" });
          res.end("slow down");
          return;
        }
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("ok");
      });
      try {
        const throttler = createThrottler({
          concurrentRequestsPerDomain: 4,
          backoff: { minDelayMs: 20, windowMs: 500 },
          retry: { times: 5 },
        });
        const sent: number[] = [];
        const got429: number[] = [];
        throttler.events$.subscribe((e) => {
          if (e.type === "request-sent") sent.push(e.at);
          if (e.type === "request-done" && e.status === 429) got429.push(e.at);
        });
        const urls = Array.from({ length: 6 }, (_, i) => `${server.origin}/page/${i}`);
        const outcomes = await lastValueFrom(
          from(urls).pipe(
            throttleByScope(throttler, createFetchDownload({ timeoutMs: 5_000 })),
            backoffOn(throttler),
            toArray(),
          ),
        );
        // Every request once, and every one a success in the end.
        expect(outcomes.map((o) => o.request).sort()).toEqual([...urls].sort());
        expect(
          outcomes.map((o) =>
            o.kind === "response" ? (o.response as FetchedResponse).status : o.error
          ),
        )
          .toEqual([200, 200, 200, 200, 200, 200]);
        expect(holds.length).toBeGreaterThan(0);
        expect(server.arrivals).toHaveLength(6 + holds.length);
        // No arrival inside any hold: the client starts its second before the
        // 429 reaches it, so 2 ms covers the two clocks' rounding only.
        // No request sent inside a hold: from each 429's arrival at the client
        // to 1 s later (2 ms for timer rounding), nothing leaves for the site.
        // (Requests already in flight when a 429 comes back may still reach the
        // server inside its hold; the client cannot take those back.)
        for (const receivedAt of got429) {
          expect(sent.filter((t) => t > receivedAt && t < receivedAt + 1_000 - 2)).toEqual([]);
        }
        expect(got429).toHaveLength(holds.length);
      } finally {
        await server.close();
      }
    },
    120_000,
  );
});
