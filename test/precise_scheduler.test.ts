import { map, of } from "rxjs";
import { TestScheduler } from "rxjs/testing";
import { describe, expect, it } from "vitest";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { preciseScheduler } from "../lib/util/precise_scheduler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";

describe("preciseScheduler", () => {
  it("preciseScheduler is the epoch clock with a fraction outside a test", () => {
    const t = preciseScheduler.now();
    expect(t).toBeGreaterThan(1.6e12);
    expect(Math.abs(t - Date.now())).toBeLessThan(60_000);
  });

  it("a throttler made with the defaults runs in a marble test's virtual time (TestScheduler.run)", () => {
    const ts = new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
    ts.run(({ cold, expectObservable }) => {
      // No scheduler given: the default clock follows the test's frames.
      const throttler = createThrottler<string>({
        jitter: 0,
        scopes: { "a.test": { delayMs: 100 } },
      });
      expect(preciseScheduler.now()).toBe(0);
      const requests = cold("(ab)", { a: "http://a.test/1", b: "http://a.test/2" });
      const sent = requests.pipe(
        throttleByScope(throttler, (url: string) => of(url)),
        map((o) => o.request),
      );
      // The second goes 100 frames after the first: the scope's delay, in frames.
      expectObservable(sent).toBe("a 99ms b", { a: "http://a.test/1", b: "http://a.test/2" });
    });
    // And back to the real clock after the test.
    expect(preciseScheduler.now()).toBeGreaterThan(1.6e12);
  });
});
