import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { NEVER } from "rxjs";
import { runCrawl } from "../lib/cli/crawl.ts";
import type { InputLine } from "../lib/cli/input.ts";
import { emptyCounts } from "../lib/cli/crawl_stats.ts";
import {
  fit,
  formatDelay,
  formatDuration,
  type LiveViewState,
  renderLiveView,
  TerminalScreen,
} from "../lib/cli/live_view.ts";

function fixture(name: string): string {
  return readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8").replace(/\n$/, "");
}

const STATE: LiveViewState = {
  title: "politely demo",
  elapsedMs: 12_400,
  done: 230,
  total: 400,
  inFlight: 5,
  queued: 165,
  retries: 7,
  failures: 1,
  etaMs: 9_200,
  rows: [
    {
      scope: "bucket",
      active: 2,
      concurrency: 2,
      delayMs: 125,
      backoffLevel: 1,
      holdLeftMs: 0,
      counts: { ...emptyCounts(), "2xx": 96, "4xx": 4 },
      ratePerSec: 8.04,
    },
    {
      scope: "capped",
      active: 0,
      concurrency: 4,
      delayMs: 0,
      backoffLevel: 2,
      holdLeftMs: 850,
      counts: { ...emptyCounts(), "2xx": 80, "5xx": 3, error: 1 },
      ratePerSec: 6.5,
    },
    {
      scope: "a-rather-long-scope-name.subdomain.example.com:8443",
      active: 1,
      concurrency: 1,
      delayMs: 1500,
      backoffLevel: 0,
      holdLeftMs: 0,
      counts: { ...emptyCounts(), "2xx": 50, "3xx": 2 },
      ratePerSec: 1.25,
    },
  ],
  hiddenScopes: 2,
  evicted: 12,
  note: "Ctrl-C stops.",
};

describe("renderLiveView()", () => {
  it("renderLiveView() draws the stored frame at 100 columns", () => {
    expect(renderLiveView(STATE, 100)).toBe(fixture("live_view_100.txt"));
  });

  it("renderLiveView() draws the stored frame at 72 columns, cutting long scope names from the left", () => {
    expect(renderLiveView(STATE, 72)).toBe(fixture("live_view_72.txt"));
  });

  it("renderLiveView() makes every line exactly the terminal's width", () => {
    for (const width of [40, 60, 80, 100, 132]) {
      for (const line of renderLiveView(STATE, width).split("\n")) expect(line.length).toBe(width);
    }
  });

  it("renderLiveView() shows an empty crawl without rows and an unknown ETA", () => {
    const frame = renderLiveView(
      {
        ...STATE,
        done: 0,
        total: 0,
        rows: [],
        hiddenScopes: 0,
        evicted: 0,
        etaMs: undefined,
        note: undefined as never,
      },
      80,
    );
    expect(frame).toContain("(no active scope)");
    expect(frame).not.toContain("evicted");
    expect(frame.split("\n")[1]).toMatch(/\] {3}0% {2}ETA -\s*$/);
  });
});

describe("renderLiveView() quotas", () => {
  it("renderLiveView() shows a quota column only when a row has a quota (configured or learned)", () => {
    const [first, ...rest] = STATE.rows;
    const frame = renderLiveView(
      { ...STATE, rows: [{ ...first!, quota: { used: 7, limit: 60 } }, ...rest] },
      110,
    ).split("\n");
    expect(frame[2]).toMatch(/ {3}hold {5}quota {4}2xx /);
    expect(frame[3]).toMatch(/^bucket .* - {6}7\/60 {5}96 /);
    expect(frame[4]).toMatch(/ 850ms {9}- {5}80 /);
    expect(renderLiveView(STATE, 110)).not.toMatch(/quota/);
  });
});

describe("renderLiveView() evictions", () => {
  it("renderLiveView() counts evicted scopes even when every active scope is shown", () => {
    const frame = renderLiveView({ ...STATE, hiddenScopes: 0, evicted: 1 }, 80).split("\n");
    expect(frame.at(-2)?.trimEnd()).toBe("1 scope evicted");
  });
});

describe("live view helpers", () => {
  it("formatDuration() reads as people write durations", () => {
    expect([850, 4_200, 37_000, 185_000, 3_720_000].map(formatDuration)).toEqual([
      "850ms",
      "4.2s",
      "37s",
      "3m05s",
      "1h02m",
    ]);
  });

  it("formatDelay() shows 0, ms and seconds", () => {
    expect([0, 125, 1500, 20_000].map(formatDelay)).toEqual(["0", "125ms", "1.50s", "20.0s"]);
  });

  it("fit() cuts with a marker or pads to the width", () => {
    expect(fit("abcdef", 4)).toBe("ab..");
    expect(fit("ab", 4, "right")).toBe("  ab");
  });
});

describe("TerminalScreen", () => {
  it("TerminalScreen hides the cursor, redraws in place and shows the cursor on close", () => {
    const writes: string[] = [];
    const screen = new TerminalScreen({ write: (t: string) => writes.push(t), columns: 90 });
    expect(screen.width).toBe(90);
    screen.draw("one\ntwo");
    screen.draw("three\nfour\nfive");
    screen.close();
    screen.close();
    expect(writes).toEqual([
      "\x1b[?25l",
      "one\x1b[K\ntwo\x1b[K\n\x1b[J",
      "\x1b[2Fthree\x1b[K\nfour\x1b[K\nfive\x1b[K\n\x1b[J",
      "\x1b[?25h",
    ]);
  });

  it("TerminalScreen.detach() draws the next frame below a line written after the last one (the Ctrl-C line stays)", () => {
    const writes: string[] = [];
    const screen = new TerminalScreen({ write: (t: string) => writes.push(t), columns: 90 });
    screen.draw("one\ntwo");
    writes.push("politely: stopping on SIGINT\n"); // stderr, same terminal
    screen.detach();
    screen.draw("last");
    // No cursor-up over the two frame lines (which would land on the stop line).
    expect(writes.at(-1)).toBe("last\x1b[K\n\x1b[J");
  });
});

describe("runCrawl() live view stopped by a signal", () => {
  it("runCrawl() draws its last frame below the line a signal wrote, not over it", async () => {
    const writes: string[] = [];
    const terminal = { write: (t: string) => writes.push(t) > 0, columns: 100, rows: 30 };
    const stop = new AbortController();
    let started = 0;
    const done = runCrawl({
      settings: { concurrentRequestsPerDomain: 1 },
      input: [{ kind: "request", request: { url: "http://a.test/1" } }] as unknown as InputLine[],
      view: "live",
      stdout: terminal as never,
      stderr: { write: () => true },
      refreshMs: 10,
      stop: stop.signal,
      download: (() => {
        started++;
        return NEVER; // in flight until stopped
      }) as never,
    });
    await new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (started > 0 && writes.some((w) => w.includes("politely crawl"))) {
          clearInterval(poll);
          resolve();
        }
      }, 5);
    });
    // What main.ts's signal handler does: a line on the terminal, then the stop.
    terminal.write("politely: stopping on SIGINT (send it again to quit at once)\n");
    stop.abort();
    const result = await done;
    expect(result.stoppedBy).toBe("signal");
    const frames = writes.filter((w) => w.includes("politely crawl"));
    // The last frame starts where the cursor is (below the stop line): no move up.
    expect(frames.at(-1)!.startsWith("\x1b[")).toBe(false);
  }, 60_000);
});
