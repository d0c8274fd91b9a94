import { existsSync, mkdirSync } from "node:fs";
import { chromium } from "playwright-core";
import { asyncScheduler, Subject, type Subscription, timer } from "rxjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DashboardSource } from "../lib/dashboard/dashboard_aggregator.ts";
import { type Dashboard, serveDashboard } from "../lib/dashboard/serve_dashboard.ts";
import type { ThrottleEvent } from "../lib/events.ts";
import type { ScopeState } from "../lib/managers/scope_manager_protocol.ts";
import { startDemoWeb } from "./_helpers/politely_cli.ts";
import { chromiumPath } from "./_runtime/chromium.ts";

// The page in a real headless browser: Debian's chromium, never a download.
// A machine without it fails here (.ci/run installs it): a skipped browser
// test would hide a broken page.
const CHROMIUM = chromiumPath();
// Hang limits for a loaded 2-core machine; nothing asserts how long anything took.
const HANG_LIMIT_MS = 120_000;
const WAIT_MS = 60_000;
const SITES = ["alpha.test", "beta.test", "gamma.test"] as const;

/** Three sites sending at different rates; beta backs off now and then. */
function busySource(): { source: DashboardSource; stop: () => void } {
  const events$ = new Subject<ThrottleEvent>();
  const states = new Map<string, ScopeState>();
  let active = 0;
  let n = 0;
  const sub: Subscription = timer(0, 20, asyncScheduler).subscribe(() => {
    n++;
    const at = asyncScheduler.now();
    SITES.forEach((scope, i) => {
      if (n % (i + 1) !== 0) return;
      events$.next({ type: "request-sent", at, scopes: [scope], attempt: 1 });
      events$.next({
        type: "request-done",
        at,
        scopes: [scope],
        attempt: 1,
        latencyMs: 5,
        status: scope === "beta.test" && n % 50 === 0 ? 429 : 200,
        error: undefined,
      });
      states.set(scope, {
        scope,
        delayMs: 100 + (n % 40) * 10 * (i + 1),
        baseDelayMs: 100,
        concurrency: 4 - i,
        active: n % (4 - i),
        backoffLevel: scope === "beta.test" && n % 100 < 50 ? 1 : 0,
        holdUntil: 0,
        nextSendAt: 0,
        quota: scope === "gamma.test" ? { limit: 100, used: n % 100, resetsAt: 0 } : undefined,
        rampup: scope === "alpha.test",
      });
    });
    if (n % 50 === 0) {
      events$.next({
        type: "backoff",
        at,
        scope: "beta.test",
        delayMs: 800,
        level: 1,
        concurrency: 1,
        holdUntil: undefined,
        cause: "429",
      });
    }
    active = n % 5;
  });
  return {
    source: {
      events$,
      scheduler: asyncScheduler,
      state: (scope) => states.get(scope),
      get active() {
        return active;
      },
      held: 0,
      get scopeCount() {
        return states.size;
      },
    },
    stop: () => sub.unsubscribe(),
  };
}

/**
 * Debian's chromium on `url`, offline (anything not from `url` is refused and
 * listed in `outside`), with console errors and page errors listed in
 * `problems`.
 */
async function openPage(url: string) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `No chromium at ${CHROMIUM}: install Debian's (apt-get install -y chromium; .ci/run does) ` +
        "or set CHROMIUM_PATH. This test does not download a browser.",
    );
  }
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  const problems: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  const outside: string[] = [];
  await page.route("**/*", (route) => {
    const target = route.request().url();
    if (target.startsWith(url)) return route.continue();
    outside.push(target);
    return route.abort();
  });
  return { browser, page, problems, outside };
}

type Page = Awaited<ReturnType<typeof openPage>>["page"];

/** Resolves once the first plot's pixels change (snapshots keep arriving). */
async function plotsChange(page: Page): Promise<void> {
  const before = await page.$eval(
    "#plots .card canvas",
    (c) => (c as HTMLCanvasElement).toDataURL(),
  );
  await page.waitForFunction(
    (b) => document.querySelector<HTMLCanvasElement>("#plots .card canvas")?.toDataURL() !== b,
    before,
    { timeout: WAIT_MS },
  );
}

/** The first column (the scope's label) of the table's rows, in order. */
function tableNames(page: Page): Promise<string[]> {
  return page.$$eval(
    "#scopes tbody tr",
    (rows) => rows.map((r) => r.querySelector("td")?.textContent ?? ""),
  );
}

describe("dashboard page", () => {
  let dashboard: Dashboard;
  let stop: () => void;

  beforeAll(async () => {
    const busy = busySource();
    stop = busy.stop;
    dashboard = await serveDashboard(busy.source, { tickMs: 250, title: "politely test" });
  });

  afterAll(async () => {
    stop?.();
    await dashboard?.close();
  });

  it(
    "the dashboard page loads offline, draws plots that change, and its table updates and sorts",
    async () => {
      const { browser, page, problems, outside } = await openPage(dashboard.url);
      try {
        await page.goto(dashboard.url, { timeout: WAIT_MS });
        await page.waitForFunction(() => document.title === "politely test", null, {
          timeout: WAIT_MS,
        });

        // Plots: one card per site, each with uPlot canvases that have pixels.
        await page.waitForFunction(
          (n) => document.querySelectorAll("#plots .card canvas").length >= n * 3,
          SITES.length,
          { timeout: WAIT_MS },
        );
        const scopes = await page.$$eval(
          "#plots .card",
          (cards) => cards.map((c) => (c as HTMLElement).dataset["scope"]).sort(),
        );
        expect(scopes).toEqual([...SITES].sort());
        const inked = () =>
          page.$eval("#plots .card canvas", (c) => {
            const canvas = c as HTMLCanvasElement;
            const data = canvas.getContext("2d")!.getImageData(0, 0, canvas.width, canvas.height)
              .data;
            let painted = 0;
            for (let i = 3; i < data.length; i += 4) {
              if (data[i]! > 0) painted++;
            }
            return painted;
          });
        expect(await inked()).toBeGreaterThan(100);
        // The plots change as snapshots arrive.
        await plotsChange(page);

        // The table: every site, counts that move.
        const sentOf = () =>
          page.$$eval(
            "#scopes tbody tr",
            (rows) =>
              rows.map((r) => Number(r.querySelectorAll("td")[9]?.textContent)).reduce(
                (a, b) => a + b,
                0,
              ),
          );
        await page.waitForFunction(
          (n) => document.querySelectorAll("#scopes tbody tr").length >= n,
          SITES.length,
          { timeout: WAIT_MS },
        );
        const sentBefore = await sentOf();
        await page.waitForFunction(
          (b) =>
            [...document.querySelectorAll("#scopes tbody tr")]
              .map((r) => Number(r.querySelectorAll("td")[9]?.textContent))
              .reduce((a, x) => a + x, 0) > b,
          sentBefore,
          { timeout: WAIT_MS },
        );

        // Sorting by name (ascending), then descending.
        const names = () => tableNames(page);
        await page.click("#scopes th[data-key=label]");
        expect(await names()).toEqual([...SITES].sort());
        await page.click("#scopes th[data-key=label]");
        expect(await names()).toEqual([...SITES].sort().reverse());

        // Search narrows table and plots.
        await page.fill("#search", "beta");
        expect(await names()).toEqual(["beta.test"]);
        expect(await page.$$eval("#plots .card", (c) => c.length)).toBe(1);
        await page.fill("#search", "");

        // The event log shows the backoffs, filtered by kind.
        await page.waitForFunction(() => document.querySelector("#log .k-backoff") !== null, null, {
          timeout: WAIT_MS,
        });
        await page.selectOption("#log-type", "recovery");
        expect(await page.$$eval("#log div", (d) => d.length)).toBe(0);
        await page.selectOption("#log-type", "");

        mkdirSync(".reports", { recursive: true });
        await page.screenshot({ path: ".reports/dashboard.png", fullPage: true });
        expect(outside).toEqual([]);
        expect(problems).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    HANG_LIMIT_MS,
  );
});

describe("dashboard page of the demo", () => {
  it(
    "politely demo --web: the demo's sites appear with plots that change, the table sorts, no errors",
    async () => {
      // The demo as a user runs it: its real loopback sites, the real
      // throttler (notices$ and meterTraffic) and the page over HTTP.
      const demo = await startDemoWeb(90);
      const url = demo.url;
      try {
        const { browser, page, problems, outside } = await openPage(url);
        try {
          await page.goto(url, { timeout: WAIT_MS });
          // The five demo sites, each a card with plots.
          await page.waitForFunction(
            () => document.querySelectorAll("#scopes tbody tr").length >= 5,
            null,
            { timeout: WAIT_MS },
          );
          const labels = await page.$$eval(
            "#scopes tbody tr",
            (rows) => rows.map((r) => r.querySelector("td")?.textContent ?? "").sort(),
          );
          for (const site of ["bucket", "capped", "robots"]) {
            expect(labels.some((l) => l.includes(site)), labels.join(", ")).toBe(true);
          }
          await page.waitForFunction(
            () => document.querySelectorAll("#plots .card canvas").length >= 3,
            null,
            { timeout: WAIT_MS },
          );
          await plotsChange(page);
          // Requests counted by the meter reach the table.
          await page.waitForFunction(
            () =>
              [...document.querySelectorAll("#scopes tbody tr")]
                .map((r) => Number(r.querySelectorAll("td")[9]?.textContent))
                .reduce((a, x) => a + x, 0) > 10,
            null,
            { timeout: WAIT_MS },
          );
          const names = () => tableNames(page);
          await page.click("#scopes th[data-key=label]");
          const ascending = await names();
          expect(ascending).toEqual([...ascending].sort());
          expect(outside).toEqual([]);
          expect(problems).toEqual([]);
        } finally {
          await browser.close();
        }
      } finally {
        await demo.stop();
      }
    },
    HANG_LIMIT_MS,
  );
});
