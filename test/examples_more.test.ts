import { describe, expect, it } from "vitest";
import { main as bunCrawl } from "../examples/bun_crawl.ts";
import { main as denoCrawl } from "../examples/deno_crawl.ts";
import { main as etlQuota } from "../examples/etl_quota.ts";
import { main as followLinks } from "../examples/follow_links.ts";
import { main as registrableDomains } from "../examples/registrable_domains.ts";
import { main as watchEvents } from "../examples/watch_events.ts";

const quiet = () => {};
const LIMIT_MS = 120_000;
const hasDeno = "Deno" in globalThis;
const hasBun = "Bun" in globalThis;

describe("examples (real loopback servers)", () => {
  it(
    "examples/follow_links.ts fetches each of the 16 pages of both sites once, retrying the refused",
    async () => {
      const report = await followLinks(quiet);
      for (const site of ["bucket", "capped"]) {
        expect(report[site]!.pages).toBe(16);
        // 200 exactly once per page: nothing fetched twice, nothing dropped.
        expect(report[site]!.byStatus[200]).toBe(16);
      }
    },
    LIMIT_MS,
  );

  it(
    "examples/etl_quota.ts loads every record once and the API refuses at most a couple",
    async () => {
      const { loaded, windows, refused } = await etlQuota(quiet);
      expect([...loaded].sort((a, b) => a - b)).toEqual(
        Array.from({ length: 24 }, (_, i) => i + 1),
      );
      // 58 units at 20 per window need three windows; the reconciled count keeps it to three.
      expect(windows).toHaveLength(3);
      expect(refused).toBeLessThanOrEqual(2);
    },
    LIMIT_MS,
  );

  it(
    "examples/watch_events.ts sees two backoffs, two Retry-After holds, two retries and adaptive steps",
    async () => {
      const { events, statuses, holdSources } = await watchEvents(quiet);
      expect(statuses).toEqual(Array.from({ length: 20 }, () => 200));
      expect(events.backoff).toBe(2);
      expect(events.retry).toBe(2);
      expect(holdSources).toEqual(["retry-after", "retry-after"]);
      // The adaptive scope's cut after each refusal and its climb back are rampup events.
      expect(events.rampup).toBeGreaterThanOrEqual(2);
    },
    LIMIT_MS,
  );

  it(
    "examples/registrable_domains.ts: subdomains share one limit under registrableDomainScope",
    async () => {
      const peaks = await registrableDomains(quiet);
      // Host scopes: 2 per subdomain, three subdomains of example.com at once.
      expect(peaks.host["example.com"]).toBeGreaterThan(2);
      expect(peaks.registrable["example.com"]).toBe(2);
      expect(peaks.hierarchical["example.com"]).toBe(3);
      for (const run of Object.values(peaks)) expect(run["example.org"]).toBe(2);
    },
    LIMIT_MS,
  );

  it("examples/deno_crawl.ts crawls under Deno and only prints a note elsewhere", async () => {
    const lines: string[] = [];
    const summary = await denoCrawl((line) => lines.push(line));
    if (hasDeno) {
      expect(summary?.statuses).toEqual(Array.from({ length: 16 }, () => 200));
      expect(summary?.lines).toBe(16);
    } else {
      expect(summary).toBeUndefined();
      expect(lines).toEqual([expect.stringContaining("needs Deno")]);
    }
  }, LIMIT_MS);

  it("examples/bun_crawl.ts crawls under Bun and only prints a note elsewhere", async () => {
    const lines: string[] = [];
    const summary = await bunCrawl((line) => lines.push(line));
    if (hasBun) {
      expect(summary?.statuses).toEqual(Array.from({ length: 16 }, () => 200));
      expect(summary?.lines).toBe(16);
    } else {
      expect(summary).toBeUndefined();
      expect(lines).toEqual([expect.stringContaining("needs Bun")]);
    }
  }, LIMIT_MS);
});
