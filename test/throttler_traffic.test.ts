// Throttler.meterTraffic() and notices$: what a live view needs without an
// event per request (issue 16's cost target), and the dashboard on them.
import { from, lastValueFrom, of, throwError, toArray } from "rxjs";
import { describe, expect, it } from "vitest";
import { DashboardAggregator } from "../lib/dashboard/dashboard_aggregator.ts";
import type { ThrottleEvent } from "../lib/events.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { backoffOn } from "../operators/backoff_on.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { testScheduler } from "./_helpers/test_scheduler.ts";

/** A download answering `status` for URLs whose path is /s<status>, 200 otherwise; /boom fails. */
function download(url: string) {
  if (url.endsWith("/boom")) return throwError(() => new Error("boom"));
  const m = /\/s(\d{3})$/.exec(url);
  return of({ status: m === null ? 200 : Number(m[1]), headers: {} as Record<string, string> });
}

describe("Throttler.meterTraffic() and notices$", () => {
  it("meterTraffic() counts sent, done and failed per scope; take() empties the counts; close() stops counting", async () => {
    const throttler = createThrottler<string>({ retry: { enabled: false } });
    const meter = throttler.meterTraffic();
    await lastValueFrom(
      from([
        "http://a.test/1",
        "http://a.test/2",
        "http://a.test/s404",
        "http://b.test/boom",
        "http://b.test/1",
      ]).pipe(throttleByScope(throttler, download), toArray()),
    );
    const took = meter.take().sort((x, y) => x.scope.localeCompare(y.scope));
    expect(took).toEqual([
      { scope: "a.test", sent: 3, done: 3, failed: 1 },
      { scope: "b.test", sent: 2, done: 2, failed: 1 },
    ]);
    expect(meter.take()).toEqual([]);
    expect(meter.takeTotals()).toEqual({ sent: 5, done: 5, failed: 2 });
    expect(meter.takeTotals()).toEqual({ sent: 0, done: 0, failed: 0 });
    meter.close();
    meter.close(); // idempotent
    await lastValueFrom(from(["http://a.test/3"]).pipe(throttleByScope(throttler, download)));
    const again = throttler.meterTraffic();
    expect(again.take()).toEqual([]);
    again.close();
  });

  it("notices$ carries backoff, hold and retry events but none made per request, and does not make the throttler build those", async () => {
    const scheduler = testScheduler();
    const throttler = createThrottler<string>(
      { backoff: { minDelayMs: 10 }, retry: { times: 1 } },
      { scheduler },
    );
    const notices: ThrottleEvent["type"][] = [];
    const sub = throttler.notices$.subscribe((e) => notices.push(e.type));
    expect(throttler.observed).toBe(false);
    expect(throttler.noticed).toBe(true);
    let calls = 0;
    const outcomes = lastValueFrom(
      from(["http://a.test/x"]).pipe(
        throttleByScope(throttler, () =>
          of({
            status: calls++ === 0 ? 429 : 200,
            headers: { "retry-after": "1" } as Record<string, string>,
          })),
        backoffOn(throttler),
        toArray(),
      ),
    );
    scheduler.flush();
    await outcomes;
    sub.unsubscribe();
    expect(notices).toContain("backoff");
    expect(notices).toContain("hold");
    expect(notices).toContain("retry");
    for (const t of ["request-sent", "request-done", "request-delayed", "scope-created"]) {
      expect(notices).not.toContain(t);
    }
    expect(throttler.noticed).toBe(false);
  });

  it("DashboardAggregator on a real throttler counts requests with the meter and logs notices, with no per-request event built", async () => {
    // The real clock: the aggregator's ticks are taken by hand below (an
    // interval on a virtual clock flushed to the end would never end).
    const throttler = createThrottler<string>({ retry: { enabled: false } });
    const agg = new DashboardAggregator(throttler, { tickMs: 60_000 });
    agg.start();
    expect(throttler.observed).toBe(false);
    const urls = [
      ...Array.from({ length: 30 }, (_, i) => `http://a.test/${i}`),
      ...Array.from({ length: 12 }, (_, i) => `http://b.test/${i}`),
      "http://b.test/s503",
    ];
    await lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
    const snap = agg.tick();
    agg.close();
    expect(snap.totals).toMatchObject({ sent: 43, done: 43, errors: 1 });
    const rows = Object.fromEntries(snap.rows.map((r) => [r.scope, [r.sent, r.done, r.errors]]));
    expect(rows).toMatchObject({ "a.test": [30, 30, 0], "b.test": [13, 13, 1] });
    // Closed: the meter is closed too.
    expect(throttler.noticed).toBe(false);
  });

  it("DashboardAggregator counts a request with two scopes once in its totals, once in each scope's row", async () => {
    const throttler = createThrottler<string>(
      { retry: { enabled: false }, scopes: { api: { concurrency: 4 } } },
      { getScopes: (url) => [new URL(url).host, "api"] },
    );
    const agg = new DashboardAggregator(throttler, { tickMs: 60_000 });
    agg.start();
    const urls = Array.from({ length: 10 }, (_, i) => `http://a.test/${i}`);
    await lastValueFrom(from(urls).pipe(throttleByScope(throttler, download), toArray()));
    const snap = agg.tick();
    agg.close();
    expect(snap.totals).toMatchObject({ sent: 10, done: 10, errors: 0 });
    const rows = Object.fromEntries(snap.rows.map((r) => [r.scope, [r.sent, r.done]]));
    expect(rows).toMatchObject({ "a.test": [10, 10], api: [10, 10] });
  });
});
