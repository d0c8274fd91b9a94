import { describe, expect, it } from "vitest";
import { from, lastValueFrom, toArray } from "rxjs";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ThrottleEvent } from "../lib/events.ts";
import type { Outcome } from "../lib/outcome.ts";
import {
  obeyRobotsTxt,
  type ObeyRobotsTxtOptions,
  RobotsTxtDisallowedError,
} from "../lib/robots/robots_download.ts";
import { isLocalFailure } from "../lib/http/download_errors.ts";
import type { ThrottlerSettingsInput } from "../lib/settings/settings.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { startRecordingServer } from "./_helpers/loopback_server.ts";
import { recordingDownload, testScheduler } from "./_helpers/test_scheduler.ts";

const UA = "politely-test/1.0";

/** A loopback server answering /robots.txt with `status` and `body`, 200 "ok" elsewhere. */
function robotsServer(body: string | Buffer, status = 200) {
  return startRecordingServer((req: IncomingMessage, res: ServerResponse) => {
    res.setHeader("connection", "close");
    if (req.url === "/robots.txt") {
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(body);
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok");
  });
}

/** Crawl `paths` of the server through the gate with `obeyRobotsTxt`. */
async function crawl(
  origin: string,
  paths: readonly string[],
  settings: ThrottlerSettingsInput = {},
  options: ObeyRobotsTxtOptions = {},
) {
  const throttler = createThrottler<string>({
    robotsTxtObey: true,
    robotsTxtMaxDelayMs: 50, // keeps the real-time waits short; the decision is what is checked
    userAgent: UA,
    // The configuration robots.txt keeps or changes is what is checked: no
    // adaptive slow start (its own test is below).
    adaptive: false,
    ...settings,
  });
  const events: ThrottleEvent[] = [];
  throttler.events$.subscribe((e) => events.push(e));
  const download = obeyRobotsTxt(
    throttler,
    async (url: string) => (await fetch(url)).status,
    options,
  );
  const outcomes: Outcome<string, number>[] = await lastValueFrom(
    from(paths.map((p) => `${origin}${p}`)).pipe(throttleByScope(throttler, download), toArray()),
  );
  const scope = new URL(origin).host;
  return { throttler, events, outcomes, scope, state: throttler.state(scope) };
}

/**
 * Run virtual time to `endMs` a second at a time, letting promises (robots.txt
 * answers) settle between steps, so each answer comes at the time it was asked.
 */
async function runUntil(scheduler: ReturnType<typeof testScheduler>, endMs: number) {
  const settle = async () => {
    for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  };
  for (let t = 0; t <= endMs; t += 1000) {
    await settle();
    scheduler.maxFrames = t;
    scheduler.flush();
  }
  await settle();
}

const robotsEvents = (events: ThrottleEvent[]) => events.filter((e) => e.type === "robots");
const warnings = (events: ThrottleEvent[]) => events.filter((e) => e.type === "warning");
const byUrl = (outcomes: Outcome<string, number>[]) =>
  Object.fromEntries(
    outcomes.map((o) => [
      new URL(o.request).pathname,
      o.kind === "response" ? o.response : (o.error as Error).name,
    ]),
  );

describe("obeyRobotsTxt() against a loopback server", () => {
  it("obeyRobotsTxt() applies a valid Crawl-delay (capped) and skips disallowed URLs", async () => {
    const server = await robotsServer("User-agent: *\nDisallow: /private\nCrawl-delay: 5\n");
    try {
      const r = await crawl(server.origin, ["/a", "/private/x", "/b"]);
      expect(byUrl(r.outcomes)).toEqual({
        "/a": 200,
        "/private/x": "RobotsTxtDisallowedError",
        "/b": 200,
      });
      const denied = r.outcomes.find((o) => o.kind === "error")!;
      expect(denied.kind === "error" && denied.error).toBeInstanceOf(RobotsTxtDisallowedError);
      expect((denied as { error: RobotsTxtDisallowedError }).error.url).toBe(
        `${server.origin}/private/x`,
      );
      // robots.txt fetched once, through the gate; the disallowed URL never.
      expect(server.arrivals.map((a) => a.path).sort()).toEqual(["/a", "/b", "/robots.txt"]);
      expect(robotsEvents(r.events)).toMatchObject([
        { scope: r.scope, crawlDelayMs: 5000, decision: "apply: concurrency 1, delay 50 ms" },
      ]);
      expect(r.state).toMatchObject({ concurrency: 1, baseDelayMs: 50 });
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() allows everything and keeps the configuration for an absent robots.txt (404)", async () => {
    const server = await robotsServer("not found", 404);
    try {
      const r = await crawl(server.origin, ["/a", "/b", "/c"]);
      expect(byUrl(r.outcomes)).toEqual({ "/a": 200, "/b": 200, "/c": 200 });
      expect(robotsEvents(r.events)).toMatchObject([
        { scope: r.scope, crawlDelayMs: undefined, decision: "keep" },
      ]);
      // The concurrency dropped to 1 while robots.txt was unknown is put back.
      expect(r.state).toMatchObject({ concurrency: 8, baseDelayMs: 0 });
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() disallows everything while robots.txt answers 500, as an unsent local failure once retries are spent", async () => {
    const server = await robotsServer("oops", 500);
    try {
      const r = await crawl(server.origin, ["/a", "/b"], {}, { unreachableRetries: 0 });
      expect(byUrl(r.outcomes)).toEqual({
        "/a": "RobotsTxtDisallowedError",
        "/b": "RobotsTxtDisallowedError",
      });
      const e = (r.outcomes[0] as { error: RobotsTxtDisallowedError }).error;
      expect([e.source, e.status]).toEqual(["unreachable", 500]);
      expect(e.message).toContain("unreachable (status 500)");
      // Never sent: not a final answer about the URL (a job directory keeps it).
      expect(isLocalFailure(e)).toBe(true);
      expect(server.arrivals.map((a) => a.path)).toEqual(["/robots.txt"]);
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() puts an adaptive scope back to its slow start after robots.txt (404)", async () => {
    const server = await robotsServer("not found", 404);
    try {
      const r = await crawl(server.origin, ["/a", "/b", "/c"], { adaptive: true });
      expect(byUrl(r.outcomes)).toEqual({ "/a": 200, "/b": 200, "/c": 200 });
      // One at a time while robots.txt was unknown, then back to the slow
      // start's 2 as a temporary limit (test/scope_manager.test.ts: it grows on).
      expect(r.state?.concurrency).toBe(2);
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() allows everything for a garbage robots.txt", async () => {
    const server = await robotsServer(Buffer.from([0xff, 0xfe, 0x00, 0x3c, 0x68, 0x74, 0x6d]));
    try {
      const r = await crawl(server.origin, ["/a", "/private"]);
      expect(byUrl(r.outcomes)).toEqual({ "/a": 200, "/private": 200 });
      expect(r.state).toMatchObject({ concurrency: 8, baseDelayMs: 0 });
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() follows the group of our user agent, not *", async () => {
    const server = await robotsServer(
      "User-agent: *\nDisallow: /\nCrawl-delay: 30\n\n" +
        "User-agent: politely-test\nDisallow: /a\nCrawl-delay: 0.02\n",
    );
    try {
      const r = await crawl(server.origin, ["/a", "/b"]);
      expect(byUrl(r.outcomes)).toEqual({ "/a": "RobotsTxtDisallowedError", "/b": 200 });
      expect(robotsEvents(r.events)).toMatchObject([{ crawlDelayMs: 20 }]);
      expect(r.state).toMatchObject({ concurrency: 1, baseDelayMs: 20 });
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() keeps a more aggressive configured scope, with a warning", async () => {
    const server = await robotsServer("User-agent: *\nCrawl-delay: 5\n");
    try {
      const host = new URL(server.origin).host;
      const r = await crawl(server.origin, ["/a", "/b"], {
        scopes: { [host]: { concurrency: 4 } },
      });
      expect(r.state).toMatchObject({ concurrency: 4, baseDelayMs: 0 });
      expect(warnings(r.events)).toMatchObject([{ code: "robots-crawl-delay", scope: host }]);
      expect(robotsEvents(r.events)).toMatchObject([{
        decision: "keep: configured scope (warned)",
      }]);
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() keeps a configured scope silently when it sets ignoreRobotsTxt", async () => {
    const server = await robotsServer("User-agent: *\nCrawl-delay: 5\nDisallow: /x\n");
    try {
      const host = new URL(server.origin).host;
      const r = await crawl(server.origin, ["/a", "/x"], {
        scopes: { [host]: { concurrency: 4, ignoreRobotsTxt: true } },
      });
      expect(r.state).toMatchObject({ concurrency: 4, baseDelayMs: 0 });
      expect(warnings(r.events)).toEqual([]);
      // Disallow rules still hold: ignoreRobotsTxt is about Crawl-delay only.
      expect(byUrl(r.outcomes)).toEqual({ "/a": 200, "/x": "RobotsTxtDisallowedError" });
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() obeys rules but not Crawl-delay when throttlingRobotsTxtObey is false", async () => {
    const server = await robotsServer("User-agent: *\nCrawl-delay: 5\nDisallow: /x\n");
    try {
      const r = await crawl(server.origin, ["/a", "/x"], { throttlingRobotsTxtObey: false });
      expect(r.state).toMatchObject({ concurrency: 8, baseDelayMs: 0 });
      expect(byUrl(r.outcomes)).toEqual({ "/a": 200, "/x": "RobotsTxtDisallowedError" });
    } finally {
      await server.close();
    }
  });

  it("obeyRobotsTxt() downloads /robots.txt itself without checking it", async () => {
    const server = await robotsServer("User-agent: *\nDisallow: /\n");
    try {
      const r = await crawl(server.origin, ["/robots.txt"]);
      expect(byUrl(r.outcomes)).toEqual({ "/robots.txt": 200 });
      expect(robotsEvents(r.events)).toEqual([]);
    } finally {
      await server.close();
    }
  });
});

describe("obeyRobotsTxt()", () => {
  it("obeyRobotsTxt() returns the download itself when robotsTxtObey is false", () => {
    const download = () => Promise.resolve(1);
    expect(obeyRobotsTxt(createThrottler(), download)).toBe(download);
  });

  it("obeyRobotsTxt() holds a site whose robots.txt answers 503 and asks again, sending its URLs once it answers (virtual time)", async () => {
    const scheduler = testScheduler();
    const throttler = createThrottler<string>(
      { robotsTxtObey: true, userAgent: UA, backoff: { minDelayMs: 0 } },
      { scheduler, random: () => 0.5 },
    );
    const events: ThrottleEvent[] = [];
    throttler.events$.subscribe((e) => events.push(e));
    const robotsAt: number[] = [];
    const rec = recordingDownload<string>(scheduler, () => 10);
    const download = obeyRobotsTxt(throttler, rec.download, {
      fetch: () => {
        robotsAt.push(scheduler.now());
        // A brief outage: 503 twice, then a file that allows everything.
        return Promise.resolve(
          robotsAt.length <= 2 ? new Response("busy", { status: 503 }) : new Response(""),
        );
      },
    });
    const out: Outcome<string, unknown>[] = [];
    from(["http://a.test/1", "http://a.test/2", "http://a.test/3"])
      .pipe(throttleByScope(throttler, download))
      .subscribe((o) => out.push(o));
    await runUntil(scheduler, 400_000);
    expect(robotsAt).toEqual([0, 60_000, 120_000]);
    expect(out.map((o) => o.kind)).toEqual(["response", "response", "response"]);
    expect(rec.sends.map((s) => s.request).sort()).toEqual([
      "http://a.test/1",
      "http://a.test/2",
      "http://a.test/3",
    ]);
    expect(rec.sends.every((s) => s.at >= 120_000)).toBe(true);
    // The site is held while robots.txt is unreachable, the hold saying why.
    expect(events.filter((e) => e.type === "hold").map((e) => e.type === "hold" && e.source))
      .toEqual(["robots", "robots"]);
  });

  it("obeyRobotsTxt() gives up after its retries with an unsent RobotsTxtDisallowedError, then fails the site's URLs at once (virtual time)", async () => {
    const scheduler = testScheduler();
    const throttler = createThrottler<string>(
      { robotsTxtObey: true, userAgent: UA, backoff: { minDelayMs: 0 } },
      { scheduler, random: () => 0.5 },
    );
    const robotsAt: number[] = [];
    const rec = recordingDownload<string>(scheduler, () => 10);
    const download = obeyRobotsTxt(throttler, rec.download, {
      unreachableRetries: 2,
      unreachableRetryMs: 30_000,
      fetch: () => {
        robotsAt.push(scheduler.now());
        return Promise.reject(new TypeError("fetch failed"));
      },
    });
    const out: Outcome<string, unknown>[] = [];
    from(["http://a.test/1", "http://a.test/2"])
      .pipe(throttleByScope(throttler, download))
      .subscribe((o) => out.push(o));
    await runUntil(scheduler, 400_000);
    expect(robotsAt.slice(0, 3)).toEqual([0, 30_000, 60_000]);
    expect(rec.sends).toEqual([]);
    expect(out).toHaveLength(2);
    for (const o of out) {
      expect(o.kind).toBe("error");
      const e = (o as { error: RobotsTxtDisallowedError }).error;
      expect(e).toBeInstanceOf(RobotsTxtDisallowedError);
      expect(e.source).toBe("unreachable");
      expect(isLocalFailure(e)).toBe(true);
    }
  });

  it("obeyRobotsTxt() spaces a host's requests by the Crawl-delay from the robots.txt fetch on (virtual time)", async () => {
    const scheduler = testScheduler();
    const throttler = createThrottler<string>(
      { robotsTxtObey: true, userAgent: UA },
      { scheduler, random: () => 0.5 },
    );
    let robotsFetches = 0;
    const rec = recordingDownload<string>(scheduler, () => 100);
    const download = obeyRobotsTxt(throttler, rec.download, {
      fetch: () => {
        robotsFetches++;
        return Promise.resolve(new Response("User-agent: *\nCrawl-delay: 10\n"));
      },
    });
    const out: Outcome<string, unknown>[] = [];
    from(["http://a.test/1", "http://a.test/2", "http://a.test/3", "http://b.test/1"])
      .pipe(throttleByScope(throttler, download))
      .subscribe((o) => out.push(o));
    // robots.txt answers through promises: let them settle before virtual time runs.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    scheduler.flush();
    expect(robotsFetches).toBe(2);
    expect(rec.sends.map((s) => `${s.request}@${s.at}`)).toEqual([
      "http://a.test/1@10000",
      "http://b.test/1@10000",
      "http://a.test/2@20000",
      "http://a.test/3@30000",
    ]);
    expect(rec.maxInFlight.get("a.test")).toBe(1);
    expect(out).toHaveLength(4);
  });

  it("obeyRobotsTxt() never lets jitter make a gap shorter than the Crawl-delay (virtual time)", async () => {
    const scheduler = testScheduler();
    // Default jitter (±50%) and a random source that always draws the shortest delay.
    const throttler = createThrottler<string>(
      { robotsTxtObey: true, userAgent: UA },
      { scheduler, random: () => 0 },
    );
    const rec = recordingDownload<string>(scheduler, () => 10);
    const download = obeyRobotsTxt(throttler, rec.download, {
      fetch: () => Promise.resolve(new Response("User-agent: *\nCrawl-delay: 2\n")),
    });
    from(Array.from({ length: 6 }, (_, i) => `http://a.test/${i}`))
      .pipe(throttleByScope(throttler, download))
      .subscribe();
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    scheduler.flush();
    const at = rec.sends.map((s) => s.at);
    expect(at).toHaveLength(6);
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(2000);
  });

  it("obeyRobotsTxt() decides again for a scope rebuilt after eviction (virtual time)", async () => {
    const scheduler = testScheduler();
    const throttler = createThrottler<string>(
      { robotsTxtObey: true, userAgent: UA, scopeMaxIdleMs: 1000 },
      { scheduler, random: () => 0.5 },
    );
    const download = obeyRobotsTxt(throttler, () => Promise.resolve(1), {
      fetch: () => Promise.resolve(new Response("User-agent: *\nCrawl-delay: 1\n")),
    });
    const events: ThrottleEvent[] = [];
    throttler.events$.subscribe((e) => events.push(e));
    const run = async (urls: string[], through = download) => {
      let done = false;
      from(urls).pipe(throttleByScope(throttler, through)).subscribe({
        complete: () => (done = true),
      });
      for (let i = 0; i < 100 && !done; i++) {
        await new Promise((r) => setImmediate(r));
        scheduler.flush();
      }
      expect(done).toBe(true);
    };
    await run(["http://a.test/1"]);
    expect(throttler.state("a.test")).toMatchObject({ concurrency: 1, baseDelayMs: 1000 });
    // Idle long enough, then 1,100 other scopes' requests make the throttler sweep.
    scheduler.schedule(() => {}, 5000);
    scheduler.flush();
    await run(
      Array.from({ length: 1100 }, (_, i) => `http://x${i}.test/`),
      () => Promise.resolve(1),
    );
    expect(events.some((e) => e.type === "scope-evicted" && e.scope === "a.test")).toBe(true);
    await run(["http://a.test/2"]);
    expect(throttler.state("a.test")).toMatchObject({ concurrency: 1, baseDelayMs: 1000 });
  });
});
