import { describe, expect, it } from "vitest";
import { formatQueueStatus } from "../lib/cli/queue_status.ts";
import type { RedisQueueStatus } from "../lib/redis/redis_queue_status.ts";

const base: RedisQueueStatus = {
  exists: true,
  queued: 0,
  leased: 0,
  done: 0,
  failed: 0,
  seen: 0,
  reclaimed: 0,
  filtered: 0,
  limited: 0,
  finished: false,
  scopes: [],
};

describe("formatQueueStatus()", () => {
  it("formatQueueStatus() says whether the job exists, runs or is finished, then its counts", () => {
    expect(formatQueueStatus({ ...base, exists: false }, "r p:")).toBe(
      "job r p:: no such job (nothing was ever queued)\n" +
        "0 queued, 0 leased, 0 done, 0 failed (0 seen, 0 duplicates dropped, 0 leases expired and handed out again)",
    );
    const text = formatQueueStatus(
      { ...base, finished: true, done: 3, failed: 1, seen: 4, filtered: 2, reclaimed: 1 },
      "r p:",
    );
    expect(text.split("\n")).toEqual([
      "job r p:: finished",
      "0 queued, 0 leased, 3 done, 1 failed (4 seen, 2 duplicates dropped, 1 leases expired and handed out again)",
    ]);
    // A job with a --max-pages says how many it dropped past it.
    expect(formatQueueStatus({ ...base, limited: 5 }, "r p:").split("\n")[1]).toBe(
      "0 queued, 0 leased, 0 done, 0 failed (0 seen, 0 duplicates dropped, 5 dropped past --max-pages, 0 leases expired and handed out again)",
    );
  });

  it("formatQueueStatus() shows 30 scope rows and sums the rest in one", () => {
    const scopes = Array.from({ length: 32 }, (_, i) => ({
      scope: `s${String(i).padStart(2, "0")}.test`,
      queued: 32 - i,
      leased: 1,
      done: 2,
      failed: 0,
    }));
    const lines = formatQueueStatus({ ...base, scopes }, "r p:").split("\n");
    expect(lines[3]).toBe("scope      queued   leased     done   failed");
    expect(lines[4]).toBe("s00.test       32        1        2        0");
    expect(lines).toHaveLength(4 + 30 + 1);
    expect(lines.at(-1)).toBe("(2 more)        3        2        4        0");
  });
});
