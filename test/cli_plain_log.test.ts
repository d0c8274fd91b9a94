import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { ThrottleEvent } from "../lib/events.ts";
import { formatPlainEvent, formatProgressLine } from "../lib/cli/plain_log.ts";

const T0 = 1_000_000;
const EVENTS: ThrottleEvent[] = [
  { type: "scope-created", at: T0, scope: "a.example" },
  { type: "request-sent", at: T0 + 1, scopes: ["a.example"], attempt: 1 },
  {
    type: "request-done",
    at: T0 + 40,
    scopes: ["a.example"],
    attempt: 1,
    latencyMs: 39,
    status: 200,
    error: undefined,
  },
  {
    type: "rampup",
    at: T0 + 2_000,
    scope: "a.example",
    delayMs: 100,
    concurrency: 1,
    why: "below target: lower delay",
  },
  {
    type: "backoff",
    at: T0 + 4_700,
    scope: "a.example",
    delayMs: 1_000,
    level: 1,
    concurrency: 1,
    holdUntil: T0 + 6_700,
    cause: "status 429",
  },
  { type: "hold", at: T0 + 4_700, scope: "a.example", until: T0 + 6_700, source: "retry-after" },
  { type: "retry", at: T0 + 4_700, scopes: ["a.example"], attempt: 2, cause: "status 429" },
  { type: "recovery", at: T0 + 64_700, scope: "a.example", delayMs: 0, level: 0 },
  { type: "robots", at: T0 + 100, scope: "b.example", crawlDelayMs: 500, decision: "applied" },
  {
    type: "warning",
    at: T0 + 200,
    code: "many-delayed",
    message: "More than 500 requests are held back",
  },
];

describe("plain log", () => {
  it("formatPlainEvent() writes the stored lines and skips the frequent events", () => {
    const lines = EVENTS.map((e) => formatPlainEvent(e, T0)).filter((l) => l !== undefined);
    const stored = readFileSync(new URL("./fixtures/live_view_plain.txt", import.meta.url), "utf8");
    expect(lines.join("\n") + "\n").toBe(stored);
  });

  it("formatPlainEvent() shows a scope by its label", () => {
    const label = (scope: string) => (scope === "a.example" ? "bucket" : scope);
    expect(formatPlainEvent(EVENTS[4]!, T0, label)).toBe(
      "[4.7s] bucket backoff: status 429, level 1, delay 1.00s, concurrency 1, hold 2.0s",
    );
  });

  it("formatProgressLine() gives counts and the ETA when it is known", () => {
    const state = {
      title: "politely crawl",
      elapsedMs: 12_000,
      done: 120,
      total: 300,
      inFlight: 5,
      queued: 175,
      retries: 3,
      failures: 1,
      etaMs: 18_000,
      rows: [],
      hiddenScopes: 0,
      evicted: 0,
    };
    expect(formatProgressLine(state)).toBe(
      "[12s] done 120/300, in flight 5, queued 175, retries 3, failed 1, ETA 18s",
    );
    expect(formatProgressLine({ ...state, etaMs: undefined })).toBe(
      "[12s] done 120/300, in flight 5, queued 175, retries 3, failed 1",
    );
    expect(formatProgressLine({ ...state, evicted: 40 })).toBe(
      "[12s] done 120/300, in flight 5, queued 175, retries 3, failed 1, evicted 40, ETA 18s",
    );
  });
});
