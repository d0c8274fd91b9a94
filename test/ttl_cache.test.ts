import type { SchedulerLike } from "rxjs";
import { describe, expect, it } from "vitest";
import { type Loaded, TtlCache } from "../lib/util/_ttl_cache.ts";

/** A clock the test moves by hand; the cache only reads `now()`. */
function manualClock(): { scheduler: SchedulerLike; set(ms: number): void } {
  let now = 0;
  const scheduler = {
    now: () => now,
    schedule: () => {
      throw new Error("TtlCache must not schedule work");
    },
  } as unknown as SchedulerLike;
  return { scheduler, set: (ms) => void (now = ms) };
}

const FAIL = "fail" as const;

/** A load that answers each call with the next of `answers`, recording the stale values it got. */
function scripted(answers: readonly (Loaded<string> | typeof FAIL)[]) {
  const stale: (string | undefined)[] = [];
  const load = (_key: string, previous: string | undefined): Promise<Loaded<string>> => {
    const answer = answers[stale.length];
    stale.push(previous);
    if (answer === undefined) throw new Error("more loads than the row expects");
    return answer === FAIL ? Promise.reject(new Error("load failed")) : Promise.resolve(answer);
  };
  return { load, stale };
}

describe("TtlCache", () => {
  const rows: readonly {
    readonly name: string;
    readonly failureTtlMs?: number;
    /** What each load answers, in order. */
    readonly answers: readonly (Loaded<string> | typeof FAIL)[];
    /** Scheduler times of the `get("k")` calls; each settles before the next. */
    readonly getsAt: readonly number[];
    /** What each get gave. */
    readonly gave: readonly string[];
    /** The stale value each load was handed. */
    readonly stale: readonly (string | undefined)[];
  }[] = [
    {
      name: "serves a value until its TTL ends, then loads again",
      answers: [{ value: "a", ttlMs: 100 }, { value: "b", ttlMs: 100 }],
      getsAt: [0, 99, 100, 199],
      gave: ["a", "a", "b", "b"],
      stale: [undefined, "a"],
    },
    {
      name: "does not cache a value whose TTL is 0",
      answers: [{ value: "a", ttlMs: 0 }, { value: "b", ttlMs: 0 }],
      getsAt: [5, 5],
      gave: ["a", "b"],
      stale: [undefined, "a"],
    },
    {
      name: "takes each load's own TTL",
      answers: [{ value: "a", ttlMs: 10 }, { value: "b", ttlMs: 1_000 }],
      getsAt: [0, 10, 500, 1_009],
      gave: ["a", "b", "b", "b"],
      stale: [undefined, "a"],
    },
    {
      name: "remembers a failure for failureTtlMs",
      failureTtlMs: 50,
      answers: [FAIL, { value: "a", ttlMs: 100 }],
      getsAt: [0, 49, 50],
      gave: [FAIL, FAIL, "a"],
      stale: [undefined, undefined],
    },
    {
      name: "tries again at once after a failure with no failureTtlMs",
      answers: [FAIL, { value: "a", ttlMs: 100 }],
      getsAt: [0, 0],
      gave: [FAIL, "a"],
      stale: [undefined, undefined],
    },
    {
      name: "hands the last value to the load after a failure expired, not the failure",
      failureTtlMs: 10,
      answers: [{ value: "a", ttlMs: 10 }, FAIL, { value: "b", ttlMs: 10 }],
      getsAt: [0, 10, 20],
      gave: ["a", FAIL, "b"],
      stale: [undefined, "a", undefined],
    },
  ];

  for (const row of rows) {
    it(`TtlCache.get() ${row.name}`, async () => {
      const clock = manualClock();
      const cache = new TtlCache<string>({
        maxEntries: 10,
        scheduler: clock.scheduler,
        ...(row.failureTtlMs === undefined ? {} : { failureTtlMs: row.failureTtlMs }),
      });
      const { load, stale } = scripted(row.answers);
      const gave: string[] = [];
      for (const at of row.getsAt) {
        clock.set(at);
        gave.push(await cache.get("k", load).catch(() => FAIL));
      }
      expect(gave).toEqual(row.gave);
      expect(stale).toEqual(row.stale);
    });
  }

  it("TtlCache.get() shares one load among concurrent callers of a key, its TTL counted from when it settled", async () => {
    const clock = manualClock();
    const cache = new TtlCache<string>({ maxEntries: 10, scheduler: clock.scheduler });
    let release!: (loaded: Loaded<string>) => void;
    let loads = 0;
    const load = () => {
      loads++;
      return new Promise<Loaded<string>>((resolve) => (release = resolve));
    };
    const first = cache.get("k", load);
    const second = cache.get("k", load);
    expect(loads).toBe(1);
    expect(cache.peek("k")).toBeUndefined();
    expect(cache.size).toBe(1);
    clock.set(5);
    expect(cache.peek("k")).toBeUndefined();
    release({ value: "a", ttlMs: 10 });
    expect(await Promise.all([first, second])).toEqual(["a", "a"]);
    clock.set(14);
    expect(cache.peek("k")).toBe("a");
    expect(await cache.get("k", load)).toBe("a");
    clock.set(15);
    expect(cache.peek("k")).toBeUndefined();
    expect(loads).toBe(1);
  });

  it("TtlCache.get() shares a failed load's rejection while it is remembered", async () => {
    const clock = manualClock();
    const cache = new TtlCache<string>({
      maxEntries: 10,
      scheduler: clock.scheduler,
      failureTtlMs: 5,
    });
    const failure = new Error("down");
    let loads = 0;
    const load = () => {
      loads++;
      return Promise.reject(failure);
    };
    const results = await Promise.allSettled([cache.get("k", load), cache.get("k", load)]);
    expect(results).toEqual([
      { status: "rejected", reason: failure },
      { status: "rejected", reason: failure },
    ]);
    await expect(cache.get("k", load)).rejects.toBe(failure);
    expect(loads).toBe(1);
    expect(cache.peek("k")).toBeUndefined();
  });

  it("TtlCache.get() turns a load that throws into a rejection", async () => {
    const clock = manualClock();
    const cache = new TtlCache<string>({ maxEntries: 10, scheduler: clock.scheduler });
    const bug = new TypeError("not a function");
    await expect(cache.get("k", () => {
      throw bug;
    })).rejects.toBe(bug);
  });

  it("TtlCache keeps at most maxEntries keys, dropping the least recently used", async () => {
    const clock = manualClock();
    const cache = new TtlCache<string>({ maxEntries: 2, scheduler: clock.scheduler });
    const load = (key: string) => Promise.resolve({ value: key.toUpperCase(), ttlMs: 100 });
    await cache.get("a", load);
    await cache.get("b", load);
    await cache.get("c", load);
    expect(cache.size).toBe(2);
    expect([cache.peek("a"), cache.peek("b"), cache.peek("c")]).toEqual([undefined, "B", "C"]);
  });

  it("TtlCache.peek() never loads, and clear() forgets everything", async () => {
    const clock = manualClock();
    const cache = new TtlCache<string>({ maxEntries: 0, scheduler: clock.scheduler });
    expect(cache.peek("k")).toBeUndefined();
    expect(cache.size).toBe(0);
    await cache.get("k", () => Promise.resolve({ value: "a", ttlMs: 100 }));
    expect(cache.peek("k")).toBe("a");
    cache.clear();
    expect(cache.size).toBe(0);
    expect(cache.peek("k")).toBeUndefined();
  });
});
