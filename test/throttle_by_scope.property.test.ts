import fc from "fast-check";
import { from, map, mergeMap, timer } from "rxjs";
import { describe, expect, it } from "vitest";
import type { RequestObject } from "../lib/request.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { recordingDownload, seededRandom, testScheduler } from "./_helpers/test_scheduler.ts";

const NAMES = ["a", "b", "c"] as const;

const scopeConfig = fc.record({
  concurrency: fc.integer({ min: 1, max: 4 }),
  delayMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 500 })),
  jitter: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 0.5, noNaN: true })),
});

const request = fc.record({
  at: fc.integer({ min: 0, max: 2000 }),
  scopes: fc.subarray([...NAMES], { minLength: 1 }).chain((s) =>
    fc.shuffledSubarray(s, { minLength: s.length })
  ),
  latency: fc.integer({ min: 0, max: 300 }),
});

const scenario = fc.record({
  configs: fc.tuple(scopeConfig, scopeConfig, scopeConfig),
  cap: fc.integer({ min: 1, max: 8 }),
  seed: fc.integer(),
  requests: fc.array(request, { minLength: 1, maxLength: 40 }),
});

describe("throttleByScope() properties", () => {
  it("throttleByScope() keeps every scope's concurrency and jittered delay and the global cap, and lets every request out once", () => {
    fc.assert(
      fc.property(scenario, ({ configs, cap, seed, requests }) => {
        const scheduler = testScheduler();
        const source = seededRandom(seed);
        const draws: number[] = [];
        const random = () => {
          const r = source();
          draws.push(r);
          return r;
        };
        const throttler = createThrottler<RequestObject>({
          concurrentRequests: cap,
          scopes: Object.fromEntries(NAMES.map((n, i) => [n, configs[i]!])),
        }, { scheduler, random });
        const rec = recordingDownload<RequestObject>(
          scheduler,
          (r) => r.meta!["latency"] as number,
        );
        // The draws made since the previous download started belong to this
        // request's sends, one per scope with a delay and jitter, in scope order.
        const jitteredGap = new Map<string, number[]>();
        let used = 0;
        const download = rec.download;
        const objects: RequestObject[] = requests.map((r, id) => ({
          url: `http://x.test/${id}`,
          meta: { throttlingScopes: r.scopes, latency: r.latency, at: r.at, id },
        }));
        const outcomes: RequestObject[] = [];
        let completed = false;
        from(objects).pipe(
          mergeMap((r) => timer(r.meta!["at"] as number, scheduler).pipe(map(() => r))),
          throttleByScope(throttler, (r, ctx) => {
            for (const scope of ctx.scopes) {
              const c = configs[NAMES.indexOf(scope as (typeof NAMES)[number])]!;
              let gap = c.delayMs;
              if (c.delayMs > 0 && c.jitter > 0) {
                gap = c.delayMs * (1 - c.jitter + 2 * c.jitter * draws[used++]!);
              }
              const list = jitteredGap.get(scope) ?? [];
              list.push(gap);
              jitteredGap.set(scope, list);
            }
            expect(used).toBe(draws.length);
            return download(r, ctx);
          }),
        ).subscribe({ next: (o) => outcomes.push(o.request), complete: () => (completed = true) });
        scheduler.flush();

        NAMES.forEach((name, i) => {
          expect(rec.maxInFlight.get(name) ?? 0).toBeLessThanOrEqual(configs[i]!.concurrency);
          const sends = rec.sends.filter((s) => s.scopes.includes(name)).map((s) => s.at);
          const gaps = jitteredGap.get(name) ?? [];
          for (let k = 1; k < sends.length; k++) {
            expect(sends[k]! - sends[k - 1]!).toBeGreaterThanOrEqual(gaps[k - 1]! - 1e-9);
          }
        });
        expect(rec.maxTotal).toBeLessThanOrEqual(cap);
        for (const s of rec.sends) {
          expect(s.at).toBeGreaterThanOrEqual(s.request.meta!["at"] as number);
        }
        expect(completed).toBe(true);
        expect(outcomes).toHaveLength(objects.length);
        expect(new Set(outcomes).size).toBe(objects.length);
        expect([throttler.active, throttler.held]).toEqual([0, 0]);
      }),
      { numRuns: 300 },
    );
  });
});

describe("throttleByScope() on a clock that moves at every reading", () => {
  it("throttleByScope() keeps concurrency and delays when every clock reading moves the clock on", () => {
    // The gate reads the clock only when it needs it (a request queued behind
    // others reads none). Here every reading moves the clock on, as a real one
    // does: no scope may hold more than its concurrency, and no send may come
    // before its delay, by the gate's times or by the download's own reading.
    fc.assert(
      fc.property(
        fc.record({
          configs: fc.tuple(scopeConfig, scopeConfig, scopeConfig),
          cap: fc.integer({ min: 1, max: 8 }),
          tick: fc.double({ min: 1e-6, max: 0.5, noNaN: true }),
          requests: fc.array(request, { minLength: 1, maxLength: 40 }),
        }),
        ({ configs, cap, tick, requests }) => {
          const frames = testScheduler();
          let readings = 0;
          const scheduler = {
            now: () => frames.now() + tick * readings++,
            schedule: frames.schedule.bind(frames) as typeof frames.schedule,
          };
          const throttler = createThrottler<RequestObject>({
            concurrentRequests: cap,
            scopes: Object.fromEntries(
              NAMES.map((n, i) => [n, { ...configs[i]!, jitter: 0 }]),
            ),
          }, { scheduler });
          const inFlight = new Map<string, number>();
          const starts = new Map<string, number[]>();
          const sentAts = new Map<string, number[]>();
          let total = 0;
          let maxTotal = 0;
          const objects: RequestObject[] = requests.map((r, id) => ({
            url: `http://x.test/${id}`,
            meta: { throttlingScopes: r.scopes, latency: r.latency, at: r.at, id },
          }));
          let done = 0;
          from(objects).pipe(
            mergeMap((r) => timer(r.meta!["at"] as number, frames).pipe(map(() => r))),
            throttleByScope(throttler, (r, ctx) => {
              const at = scheduler.now();
              maxTotal = Math.max(maxTotal, ++total);
              for (const scope of ctx.scopes) {
                const n = (inFlight.get(scope) ?? 0) + 1;
                inFlight.set(scope, n);
                const c = configs[NAMES.indexOf(scope as (typeof NAMES)[number])]!;
                expect(n).toBeLessThanOrEqual(c.concurrency);
                starts.set(scope, [...(starts.get(scope) ?? []), at]);
              }
              return timer(r.meta!["latency"] as number, frames).pipe(map(() => {
                total--;
                for (const scope of ctx.scopes) inFlight.set(scope, inFlight.get(scope)! - 1);
                return r;
              }));
            }),
          ).subscribe((o) => {
            done++;
            for (const scope of o.scopes) {
              sentAts.set(scope, [...(sentAts.get(scope) ?? []), o.sentAt]);
            }
          });
          frames.flush();
          expect(done).toBe(objects.length);
          expect(maxTotal).toBeLessThanOrEqual(cap);
          NAMES.forEach((name, i) => {
            const delay = configs[i]!.delayMs;
            const sent = [...(sentAts.get(name) ?? [])].sort((a, b) => a - b);
            for (let k = 1; k < sent.length; k++) {
              expect(sent[k]! - sent[k - 1]!).toBeGreaterThanOrEqual(delay - 1e-9);
            }
            const s = starts.get(name) ?? [];
            for (let k = 1; k < s.length; k++) {
              // The download reads the clock a few readings after the send was
              // recorded: it may see a gap short by those readings' ticks.
              expect(s[k]! - s[k - 1]!).toBeGreaterThanOrEqual(delay - 8 * tick);
            }
          });
        },
      ),
      { numRuns: 200 },
    );
  });
});
