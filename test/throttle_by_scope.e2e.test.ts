import { asyncScheduler, from, lastValueFrom, toArray } from "rxjs";
import { describe, expect, it } from "vitest";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";

async function get(
  url: string,
  { signal }: { signal: AbortSignal },
): Promise<{ status: number; body: string }> {
  const response = await fetch(url, { signal });
  return { status: response.status, body: await response.text() };
}

describe("throttleByScope() against a loopback server", () => {
  it("throttleByScope() never sends two requests of a scope closer than its delay (real fetch, asyncScheduler)", async () => {
    const server = await startRecordingServer();
    try {
      // Warm up fetch and the keep-alive connection.
      for (let i = 0; i < 3; i++) {
        await get(`${server.origin}/warmup`, { signal: new AbortController().signal });
      }
      server.arrivals.length = 0;
      const throttler = createThrottler<string>(
        { downloadDelayMs: 100, jitter: 0, concurrentRequestsPerDomain: 4 },
        { scheduler: asyncScheduler },
      );
      const sentAt: number[] = [];
      const timed = (url: string, ctx: { signal: AbortSignal }) => {
        sentAt.push(performance.now());
        return get(url, ctx);
      };
      const urls = Array.from({ length: 5 }, (_, i) => `${server.origin}/${i}`);
      const outcomes = await lastValueFrom(
        from(urls).pipe(throttleByScope(throttler, timed), toArray()),
      );
      expect(outcomes.map((o) => o.kind === "response" && o.response.status)).toEqual([
        200,
        200,
        200,
        200,
        200,
      ]);
      expect(outcomes[0]!.scopes).toEqual([server.origin.slice("http://".length)]);
      expect(server.arrivals.map((a) => a.path)).toEqual(["/0", "/1", "/2", "/3", "/4"]);
      const arrivedAt = server.arrivals.map((a) => a.atMs);
      // Safety bounds, not speed assertions. The server must not see a
      // request before the delay has passed since the previous one left the
      // client. 5 ms of slack: clock granularity, and a pause (a GC on a
      // loaded machine) between the gate's clock reading for a send and this
      // download's own reading of it, which makes the earlier send look late
      // (97.4 ms was seen at a load of 12 on 2 cores, 1 run in 18). A gate
      // that did not space sends shows gaps of a few ms. (Arrival-to-arrival
      // gaps also carry fetch's own latency jitter, measured here at up to
      // 50 ms on a loaded machine, so they are not what the gate controls.)
      for (let k = 1; k < 5; k++) {
        expect(sentAt[k]! - sentAt[k - 1]!).toBeGreaterThanOrEqual(95);
        expect(arrivedAt[k]! - sentAt[k - 1]!).toBeGreaterThanOrEqual(95);
        expect(arrivedAt[k]!).toBeGreaterThanOrEqual(sentAt[k]!);
      }
      expect([throttler.active, throttler.held]).toEqual([0, 0]);
    } finally {
      await server.close();
    }
  });

  it("throttleByScope() aborts a real fetch in flight on unsubscribe", async () => {
    let closed!: () => void;
    const connectionClosed = new Promise<void>((r) => (closed = r));
    let arrived!: () => void;
    const requestArrived = new Promise<void>((r) => (arrived = r));
    // Never answers: the request stays in flight until the client goes away.
    const server = await startRecordingServer((req) => {
      req.socket.once("close", () => closed());
      arrived();
    });
    try {
      const throttler = createThrottler<string>({}, { scheduler: asyncScheduler });
      let signal: AbortSignal | undefined;
      const seen: unknown[] = [];
      const sub = from([`${server.origin}/slow`]).pipe(
        throttleByScope(throttler, (url, ctx) => {
          signal = ctx.signal;
          return get(url, ctx);
        }),
      ).subscribe((o) => seen.push(o));
      await requestArrived;
      expect(throttler.active).toBe(1);
      sub.unsubscribe();
      expect(signal?.aborted).toBe(true);
      await connectionClosed;
      expect(seen).toEqual([]);
      expect([throttler.active, throttler.held]).toEqual([0, 0]);
    } finally {
      await server.close();
    }
  });
});
