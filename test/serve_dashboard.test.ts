import { request } from "node:http";
import { asyncScheduler, Subject } from "rxjs";
import { afterEach, describe, expect, it } from "vitest";
import type { DashboardSource } from "../lib/dashboard/dashboard_aggregator.ts";
import { type Dashboard, serveDashboard } from "../lib/dashboard/serve_dashboard.ts";
import type { ThrottleEvent } from "../lib/events.ts";

// Real loopback HTTP; nothing here waits on the clock for a result it asserts
// (ticks come every 50 ms of real time, and the tests wait for messages).
const HANG_LIMIT_MS = 60_000;

function source(): { events$: Subject<ThrottleEvent>; source: DashboardSource } {
  const events$ = new Subject<ThrottleEvent>();
  return {
    events$,
    source: {
      events$,
      scheduler: asyncScheduler,
      state: () => undefined,
      active: 0,
      held: 0,
      scopeCount: 1,
    },
  };
}

interface SseMessage {
  readonly id: string | undefined;
  readonly event: string;
  readonly data: string;
}

/** Reads Server-Sent Events messages from a fetch response, one at a time. */
function sseReader(body: ReadableStream<Uint8Array>): () => Promise<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  return async () => {
    for (;;) {
      const end = buffer.indexOf("\n\n");
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let id: string | undefined;
        let event = "message";
        const data: string[] = [];
        for (const line of block.split("\n")) {
          const colon = line.indexOf(":");
          const field = line.slice(0, colon);
          const value = line.slice(colon + 1).replace(/^ /, "");
          if (field === "id") id = value;
          else if (field === "event") event = value;
          else if (field === "data") data.push(value);
        }
        if (data.length > 0) return { id, event, data: data.join("\n") };
        continue; // a "retry:" block with no data
      }
      const { value, done } = await reader.read();
      if (done) throw new Error("event stream ended");
      buffer += decoder.decode(value, { stream: true });
    }
  };
}

/** A raw request, for what fetch will not send (another Host, another method). */
function raw(
  url: string,
  method: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

const sent = (scope: string): ThrottleEvent => ({
  type: "request-sent",
  at: asyncScheduler.now(),
  scopes: [scope],
  attempt: 1,
});

describe("serveDashboard", () => {
  let dashboard: Dashboard | undefined;
  afterEach(async () => {
    await dashboard?.close();
    dashboard = undefined;
  });

  it(
    "serveDashboard() binds 127.0.0.1 on a free port and serves the page, its script and uPlot",
    async () => {
      dashboard = await serveDashboard(source().source, { port: 0 });
      expect(dashboard.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(dashboard.port).toBeGreaterThan(0);
      const page = await fetch(dashboard.url);
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toContain("text/html");
      const html = await page.text();
      expect(html).toContain('src="/uplot.js"');
      expect(html).not.toMatch(/https?:\/\//); // nothing from a CDN
      for (const path of ["dashboard.js", "uplot.js", "uplot.css"]) {
        const res = await fetch(new URL(path, dashboard.url));
        expect(res.status).toBe(200);
        expect((await res.text()).length).toBeGreaterThan(100);
      }
      const missing = await fetch(new URL("nothing", dashboard.url));
      expect(missing.status).toBe(404);
      await missing.text();
    },
    HANG_LIMIT_MS,
  );

  it("serveDashboard() is read-only: every method but GET and HEAD is refused", async () => {
    dashboard = await serveDashboard(source().source);
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const res = await raw(new URL("events", dashboard.url).href, method);
      expect(res.status).toBe(405);
      expect(res.headers["allow"]).toBe("GET, HEAD");
    }
    expect((await raw(dashboard.url, "HEAD")).status).toBe(200);
  }, HANG_LIMIT_MS);

  it(
    "serveDashboard() on loopback answers only to loopback names in Host (DNS rebinding)",
    async () => {
      dashboard = await serveDashboard(source().source);
      expect((await raw(dashboard.url, "GET", { host: "evil.test" })).status).toBe(403);
      expect((await raw(dashboard.url, "GET", { host: `localhost:${dashboard.port}` })).status)
        .toBe(200);
    },
    HANG_LIMIT_MS,
  );

  it("serveDashboard() warns through onWarning when bound beyond loopback", async () => {
    const warnings: string[] = [];
    dashboard = await serveDashboard(source().source, {
      host: "0.0.0.0",
      onWarning: (line) => warnings.push(line),
    });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("reachable from other machines");
    expect(warnings[0]).toContain(String(dashboard.port));
  }, HANG_LIMIT_MS);

  it("serveDashboard() masks the password of a Redis URL given as a header line", async () => {
    dashboard = await serveDashboard(source().source, {
      info: { redis: "redis://user:s3cret@127.0.0.1:6379/0" },
    });
    const config = await (await fetch(new URL("config.json", dashboard.url))).text();
    expect(config).not.toContain("s3cret");
    expect(config).toContain("redis://***@127.0.0.1:6379/0");
  }, HANG_LIMIT_MS);

  it("serveDashboard() refuses a port out of range before listening", async () => {
    await expect(serveDashboard(source().source, { port: 70_000 })).rejects.toThrow(RangeError);
  });

  it(
    "serveDashboard() streams history then snapshots; a reconnection with Last-Event-ID gets the window again",
    async () => {
      const { events$, source: src } = source();
      dashboard = await serveDashboard(src, { tickMs: 50 });
      const url = new URL("events", dashboard.url);
      const first = new AbortController();
      const res = await fetch(url, { signal: first.signal });
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      const next = sseReader(res.body!);
      const history = await next();
      expect(history.event).toBe("history");
      events$.next(sent("a.test"));
      events$.next(sent("a.test"));
      events$.next({
        type: "backoff",
        at: asyncScheduler.now(),
        scope: "a.test",
        delayMs: 2000,
        level: 1,
        concurrency: 1,
        holdUntil: undefined,
        cause: "429",
      });
      // Snapshots until one has counted the sends (the server aggregates; it
      // never forwards events one by one).
      let snapshot: { rows: { scope: string; sent: number }[]; log: { text: string }[] };
      let lastId: string | undefined;
      const logged: string[] = [];
      do {
        const message = await next();
        expect(message.event).toBe("snapshot");
        lastId = message.id;
        snapshot = JSON.parse(message.data);
        logged.push(...snapshot.log.map((e) => e.text));
      } while (snapshot.rows[0]?.sent !== 2);
      expect(snapshot.rows.map((r) => r.scope)).toEqual(["a.test"]);
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain("backoff level 1");
      first.abort();

      const again = await fetch(url, { headers: { "last-event-id": lastId! } });
      const replay = await sseReader(again.body!)();
      expect(replay.event).toBe("history");
      expect(Number(replay.id)).toBeGreaterThanOrEqual(Number(lastId));
      const window = JSON.parse(replay.data);
      expect(window.rows[0].sent).toBe(2);
      expect(window.log.map((e: { type: string }) => e.type)).toEqual(["backoff"]);
      const series = window.series[0];
      expect(series.scope).toBe("a.test");
      expect(series.columns.sent.reduce((a: number, b: number | null) => a + (b ?? 0), 0) * 0.05)
        .toBeCloseTo(2);
      // The mark is kept only when the scope's ring existed at the event (rings
      // are made at a tick; the three events can come before the first): the
      // log above has the backoff either way.
      expect(series.marks.every((m: { kind: string }) => m.kind === "backoff")).toBe(true);

      const one = await fetch(new URL("series.json?scope=a.test", dashboard.url));
      expect((await one.json()).scope).toBe("a.test");
      const none = await fetch(new URL("series.json?scope=b.test", dashboard.url));
      expect(none.status).toBe(404);
      await none.text();
      // close() ends the open stream and resolves.
      await dashboard.close();
      dashboard = undefined;
      await again.body!.cancel().catch(() => {});
    },
    HANG_LIMIT_MS,
  );
});
