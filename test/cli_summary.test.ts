import { describe, expect, it } from "vitest";
import { CrawlStats } from "../lib/cli/crawl_stats.ts";
import { formatSummary } from "../lib/cli/summary.ts";

function stats(): CrawlStats {
  const s = new CrawlStats(0);
  for (const [at, status] of [[100, 200], [200, 429], [300, 200]] as const) {
    s.recordEvent({
      type: "request-done",
      at,
      scopes: ["127.0.0.1:40001"],
      attempt: 1,
      latencyMs: 5,
      status,
      error: undefined,
    });
  }
  s.recordFinal(200, false);
  s.recordFinal(200, false);
  return s;
}

describe("formatSummary()", () => {
  it("formatSummary() says how many downloads a Ctrl-C aborted and where the rest stay", () => {
    const text = formatSummary(stats(), 2_000, {
      interrupted: true,
      aborted: 3,
      pending: 7,
      jobDir: "job",
    });
    expect(text.split("\n").slice(0, 4)).toEqual([
      "politely: 2 requests ended in 2.0s (interrupted)",
      "  responses: 2xx 2, 3xx 0, 4xx 0, 5xx 0; errors 0",
      "  attempts: 3, retries 0, failures 0",
      "  stopped by Ctrl-C: 3 downloads in flight aborted, 7 requests not ended (they stay pending in job: run again to resume)",
    ]);
  });

  it("formatSummary() without a job directory says only what was aborted and not ended", () => {
    const text = formatSummary(stats(), 2_000, { interrupted: true, aborted: 1, pending: 1 });
    expect(text).toContain(
      "  stopped by Ctrl-C: 1 download in flight aborted, 1 request not ended\n",
    );
    expect(text).not.toContain("resume");
  });

  it("formatSummary() of a finished crawl has no stopped line", () => {
    expect(formatSummary(stats(), 2_000, { pending: 0 })).not.toContain("stopped");
  });

  it("formatSummary() shows scopes by their label and counts evictions", () => {
    const s = stats();
    s.recordEvent({ type: "scope-evicted", at: 400, scope: "a.example", reason: "idle" });
    s.recordEvent({ type: "scope-evicted", at: 500, scope: "b.example", reason: "limit" });
    const text = formatSummary(s, 2_000, {
      label: (scope) => (scope === "127.0.0.1:40001" ? "bucket" : scope),
    });
    expect(text).toContain("  scopes evicted 2\n");
    expect(text).toMatch(/\n {2}bucket {26} +3 +2 +1 +1\.50$/);
    expect(text).not.toContain("127.0.0.1");
  });
});
