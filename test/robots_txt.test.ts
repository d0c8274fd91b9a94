import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import fc from "fast-check";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { VirtualTimeScheduler } from "rxjs";
import {
  type CrawlDelayDecision,
  crawlDelayDecision,
  createRobotsTxtCache,
  type RobotsFetch,
  type RobotsTxtCacheOptions,
} from "../lib/robots/robots_txt.ts";

const UA = "politely/0.1 (+https://www.npmjs.com/package/politely)";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A loopback server whose handler each test sets; it records the paths asked for. */
let server: Server;
let origin: string;
let handler: Handler;
let requests: string[];

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? "");
    // No keep-alive: a test that drops or abandons a connection cannot leave
    // the next test a pooled socket that is already dead.
    res.setHeader("connection", "close");
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  requests = [];
  handler = (_req, res) => {
    res.statusCode = 404;
    res.end();
  };
});

/** Serve `body` (status 200 unless given) at /robots.txt, 404 elsewhere. */
function serveRobots(body: string | Buffer, status = 200): void {
  handler = (req, res) => {
    if (req.url !== "/robots.txt") {
      res.statusCode = 404;
      res.end();
      return;
    }
    res.statusCode = status;
    res.setHeader("content-type", "text/plain");
    res.end(body);
  };
}

function cache(options: Partial<RobotsTxtCacheOptions> = {}) {
  return createRobotsTxtCache({ fetch: globalThis.fetch, userAgent: UA, ...options });
}

describe("createRobotsTxtCache() against a loopback server", () => {
  it("get() parses a valid Crawl-delay and the rules of the * group", async () => {
    serveRobots("User-agent: *\nDisallow: /private\nAllow: /private/ok\nCrawl-delay: 2.5\n");
    const rules = await cache().get(`${origin}/index.html`);
    expect(rules.source).toBe("parsed");
    expect(rules.status).toBe(200);
    expect(rules.crawlDelayMs).toBe(2500);
    expect(rules.isAllowed(`${origin}/private/x`)).toBe(false);
    expect(rules.isAllowed(`${origin}/private/ok/1`)).toBe(true);
    expect(rules.isAllowed(`${origin}/public`)).toBe(true);
    expect(requests).toEqual(["/robots.txt"]);
  });

  it("get() treats an absent robots.txt (404) as allow-all without a crawl delay", async () => {
    const rules = await cache().get(`${origin}/a`);
    expect(rules.source).toBe("unavailable");
    expect(rules.status).toBe(404);
    expect(rules.crawlDelayMs).toBeUndefined();
    expect(rules.isAllowed(`${origin}/anything/at/all`)).toBe(true);
  });

  it("get() treats a 403 like any 4xx: allow-all", async () => {
    serveRobots("User-agent: *\nDisallow: /\n", 403);
    const rules = await cache().get(`${origin}/a`);
    expect(rules.source).toBe("unavailable");
    expect(rules.isAllowed(`${origin}/a`)).toBe(true);
  });

  it("get() treats a 500 as complete disallow, except /robots.txt itself", async () => {
    serveRobots("User-agent: *\nAllow: /\n", 500);
    const rules = await cache().get(`${origin}/a`);
    expect(rules.source).toBe("unreachable");
    expect(rules.status).toBe(500);
    expect(rules.crawlDelayMs).toBeUndefined();
    expect(rules.isAllowed(`${origin}/a`)).toBe(false);
    expect(rules.isAllowed(`${origin}/`)).toBe(false);
    expect(rules.isAllowed(`${origin}/robots.txt`)).toBe(true);
  });

  it("get() treats a dropped connection as complete disallow", async () => {
    handler = (req) => req.socket.destroy();
    const rules = await cache().get(`${origin}/a`);
    expect(rules.source).toBe("unreachable");
    expect(rules.status).toBeUndefined();
    expect(rules.error).toBeDefined();
    expect(rules.isAllowed(`${origin}/a`)).toBe(false);
  });

  it("get() makes what it can of garbage and never throws", async () => {
    serveRobots(
      Buffer.concat([
        Buffer.from("<html><body><h1>Welcome</h1>\n"),
        Buffer.from([0xff, 0xfe, 0x00, 0x81, 0x0a, 0xc3]),
        Buffer.from("\nDisallow /no-colon\nCrawl-delay: soon\n::::\n"),
      ]),
    );
    const rules = await cache().get(`${origin}/a`);
    expect(rules.source).toBe("parsed");
    expect(rules.crawlDelayMs).toBeUndefined();
    expect(rules.isAllowed(`${origin}/no-colon`)).toBe(true);
  });

  it("get() follows the specific agent's group over *, with its own Crawl-delay", async () => {
    const body = [
      "User-agent: *",
      "Disallow: /all",
      "Crawl-delay: 10",
      "",
      "User-agent: Politely",
      "Disallow: /mine",
      "Crawl-delay: 1.5",
      "",
      "User-agent: otherbot",
      "Crawl-delay: 100",
    ].join("\n");
    serveRobots(body);
    const ours = await cache().get(`${origin}/`);
    expect(ours.crawlDelayMs).toBe(1500);
    expect(ours.isAllowed(`${origin}/mine/1`)).toBe(false);
    expect(ours.isAllowed(`${origin}/all/1`)).toBe(true);
    const someone = await cache({ userAgent: "somebot/2.0" }).get(`${origin}/`);
    expect(someone.crawlDelayMs).toBe(10_000);
    expect(someone.isAllowed(`${origin}/all/1`)).toBe(false);
    expect(someone.isAllowed(`${origin}/mine/1`)).toBe(true);
  });

  it("get() gives no Crawl-delay when our group has none, even if * has one", async () => {
    serveRobots("User-agent: *\nCrawl-delay: 5\n\nUser-agent: politely\nDisallow: /x\n");
    expect((await cache().get(`${origin}/`)).crawlDelayMs).toBeUndefined();
  });

  it.each([
    ["-3", undefined],
    ["abc", undefined],
    ["", undefined],
    ["   # comment", undefined],
    ["Infinity", undefined],
    ["0", 0],
    ["7", 7000],
  ])("get() reads Crawl-delay %j as %j ms", async (value, expected) => {
    serveRobots(`User-agent: *\nCrawl-delay: ${value}\nDisallow: /x\n`);
    expect((await cache().get(`${origin}/`)).crawlDelayMs).toBe(expected);
  });

  it("get() follows redirects, and matches the rules against the origin asked about", async () => {
    handler = (req, res) => {
      if (req.url === "/robots.txt") {
        res.writeHead(301, { location: "/moved/robots.txt" }).end();
      } else if (req.url === "/moved/robots.txt") {
        // Another host name for the same server: a cross-origin redirect.
        res.writeHead(302, { location: `${origin.replace("127.0.0.1", "localhost")}/final.txt` })
          .end();
      } else if (req.url === "/final.txt") {
        res.writeHead(200).end("User-agent: *\nDisallow: /secret\nCrawl-delay: 3\n");
      } else {
        res.writeHead(404).end();
      }
    };
    const rules = await cache().get(`${origin}/`);
    expect(requests).toEqual(["/robots.txt", "/moved/robots.txt", "/final.txt"]);
    expect(rules.source).toBe("parsed");
    expect(rules.url).toBe(`${origin}/robots.txt`);
    expect(rules.crawlDelayMs).toBe(3000);
    expect(rules.isAllowed(`${origin}/secret/1`)).toBe(false);
    expect(rules.isAllowed(`${origin}/open`)).toBe(true);
  });

  it("get() gives up after 5 redirects and treats the file as unavailable", async () => {
    let n = 0;
    handler = (_req, res) => {
      n++;
      res.writeHead(307, { location: `/loop${n}` }).end();
    };
    const rules = await cache().get(`${origin}/`);
    expect(requests).toHaveLength(6);
    expect(rules.source).toBe("unavailable");
    expect(rules.isAllowed(`${origin}/x`)).toBe(true);
  });

  it("get() parses only the first 500 KiB of a huge file", async () => {
    const head = "User-agent: *\nDisallow: /before\n";
    const filler = "# padding padding padding padding padding padding padding padding\n".repeat(
      40_000,
    );
    serveRobots(`${head}${filler}Disallow: /after\n`);
    const rules = await cache().get(`${origin}/`);
    expect(filler.length).toBeGreaterThan(512_000);
    expect(rules.truncated).toBe(true);
    expect(rules.isAllowed(`${origin}/before`)).toBe(false);
    expect(rules.isAllowed(`${origin}/after`)).toBe(true);
  });

  it("get() drops a line cut by the size limit rather than read half of it", async () => {
    const head = "User-agent: *\nDisallow: /a\n";
    serveRobots(`${head}Disallow: /private-area\n`);
    // The limit falls right after "Disallow: /", which alone would disallow everything.
    const rules = await cache({ maxBytes: head.length + "Disallow: /".length }).get(`${origin}/`);
    expect(rules.truncated).toBe(true);
    expect(rules.isAllowed(`${origin}/a`)).toBe(false);
    expect(rules.isAllowed(`${origin}/b`)).toBe(true);
  });

  it("get() times out on scheduler time and treats the file as unreachable", async () => {
    let arrived!: () => void;
    const hung = new Promise<void>((resolve) => (arrived = resolve));
    handler = () => arrived(); // never answers
    const scheduler = new VirtualTimeScheduler();
    const pending = cache({ scheduler, timeoutMs: 30_000 }).get(`${origin}/`);
    await hung;
    scheduler.flush();
    const rules = await pending;
    expect(scheduler.now()).toBe(30_000);
    expect(rules.source).toBe("unreachable");
    expect((rules.error as Error).name).toBe("TimeoutError");
    expect(rules.isAllowed(`${origin}/a`)).toBe(false);
  });

  it("get() fetches once for concurrent callers of one origin, and peek() sees the result", async () => {
    serveRobots("User-agent: *\nDisallow: /x\n");
    const robots = cache();
    expect(robots.peek(`${origin}/a`)).toBeUndefined();
    const all = await Promise.all([
      robots.get(`${origin}/a`),
      robots.get(`${origin}/b`),
      robots.get(`${origin}/c`),
    ]);
    expect(requests).toEqual(["/robots.txt"]);
    expect(all[0]).toBe(all[1]);
    expect(all[1]).toBe(all[2]);
    expect(robots.peek(`${origin}/zzz`)).toBe(all[0]);
    expect(robots.size).toBe(1);
  });
});

/** A fetch that answers from a script of responses and counts calls. */
function scriptedFetch(script: (() => Response)[]) {
  const calls: string[] = [];
  const fetch: RobotsFetch = (url) => {
    calls.push(url);
    const next = script.shift();
    return next === undefined
      ? Promise.reject(new Error("no more responses"))
      : Promise.resolve(next());
  };
  return { fetch, calls };
}

describe("createRobotsTxtCache() caching in virtual time", () => {
  it("get() keeps an answer for ttlMs of scheduler time, then fetches again", async () => {
    const scheduler = new VirtualTimeScheduler();
    const { fetch, calls } = scriptedFetch([
      () => new Response("User-agent: *\nCrawl-delay: 1\n"),
      () => new Response("User-agent: *\nCrawl-delay: 2\n"),
    ]);
    const robots = createRobotsTxtCache({ fetch, userAgent: UA, scheduler, ttlMs: 1000 });
    expect((await robots.get("https://a.example/")).crawlDelayMs).toBe(1000);
    scheduler.frame = 999;
    expect((await robots.get("https://a.example/x")).crawlDelayMs).toBe(1000);
    expect(robots.peek("https://a.example/")).toBeDefined();
    scheduler.frame = 1000;
    expect(robots.peek("https://a.example/")).toBeUndefined();
    expect((await robots.get("https://a.example/x")).crawlDelayMs).toBe(2000);
    expect(calls).toEqual(["https://a.example/robots.txt", "https://a.example/robots.txt"]);
  });

  it("get() keeps an unreachable answer only errorTtlMs", async () => {
    const scheduler = new VirtualTimeScheduler();
    const { fetch, calls } = scriptedFetch([
      () => new Response("", { status: 503 }),
      () => new Response("User-agent: *\nDisallow:\n"),
    ]);
    const robots = createRobotsTxtCache({ fetch, userAgent: UA, scheduler, errorTtlMs: 60_000 });
    expect((await robots.get("https://a.example/")).isAllowed("https://a.example/p")).toBe(false);
    scheduler.frame = 59_999;
    expect((await robots.get("https://a.example/")).source).toBe("unreachable");
    scheduler.frame = 60_000;
    expect((await robots.get("https://a.example/")).isAllowed("https://a.example/p")).toBe(true);
    expect(calls).toHaveLength(2);
  });

  it("get() keeps using the last fetched copy while the file is unreachable", async () => {
    const scheduler = new VirtualTimeScheduler();
    const { fetch } = scriptedFetch([
      () => new Response("User-agent: *\nDisallow: /old\n"),
      () => new Response("", { status: 500 }),
      () => new Response("User-agent: *\nDisallow: /new\n"),
    ]);
    const robots = createRobotsTxtCache({
      fetch,
      userAgent: UA,
      scheduler,
      ttlMs: 1000,
      errorTtlMs: 100,
    });
    const first = await robots.get("https://a.example/");
    scheduler.frame = 1000;
    expect(await robots.get("https://a.example/")).toBe(first);
    scheduler.frame = 1099;
    expect(await robots.get("https://a.example/")).toBe(first);
    scheduler.frame = 1100;
    const third = await robots.get("https://a.example/");
    expect(third.isAllowed("https://a.example/new")).toBe(false);
    expect(third.isAllowed("https://a.example/old")).toBe(true);
  });

  it("get() keeps http and https, and each port, apart", async () => {
    const { fetch, calls } = scriptedFetch(Array.from({ length: 3 }, () => () => new Response("")));
    const robots = createRobotsTxtCache({ fetch, userAgent: UA });
    await robots.get("http://a.example/");
    await robots.get("https://a.example/");
    await robots.get("https://A.example:443/x");
    await robots.get("https://a.example:8443/");
    expect(calls).toEqual([
      "http://a.example/robots.txt",
      "https://a.example/robots.txt",
      "https://a.example:8443/robots.txt",
    ]);
  });

  it("get() evicts the least recently used origin above maxEntries", async () => {
    const { fetch, calls } = scriptedFetch(Array.from({ length: 4 }, () => () => new Response("")));
    const robots = createRobotsTxtCache({ fetch, userAgent: UA, maxEntries: 2 });
    await robots.get("https://a.example/");
    await robots.get("https://b.example/");
    await robots.get("https://a.example/");
    await robots.get("https://c.example/");
    expect(robots.size).toBe(2);
    expect(robots.peek("https://b.example/")).toBeUndefined();
    expect(robots.peek("https://a.example/")).toBeDefined();
    expect(calls).toHaveLength(3);
  });

  it("get() caps a response-like without a body stream at maxBytes too", async () => {
    const text = `User-agent: *\nDisallow: /é\n${"#".repeat(100)}\nDisallow: /after\n`;
    const robots = createRobotsTxtCache({
      fetch: () => Promise.resolve({ status: 200, text: () => Promise.resolve(text) }),
      userAgent: UA,
      maxBytes: 100,
    });
    const rules = await robots.get("https://a.example/");
    expect(rules.truncated).toBe(true);
    expect(rules.isAllowed("https://a.example/%C3%A9")).toBe(false);
    expect(rules.isAllowed("https://a.example/after")).toBe(true);
  });

  it("get() rejects with a TypeError for a URL it cannot parse", async () => {
    const robots = createRobotsTxtCache({ fetch: scriptedFetch([]).fetch, userAgent: UA });
    await expect(robots.get("not a url")).rejects.toBeInstanceOf(TypeError);
    expect(robots.peek("not a url")).toBeUndefined();
  });

  it("get() turns a fetch that throws synchronously into an unreachable answer", async () => {
    const robots = createRobotsTxtCache({
      fetch: () => {
        throw new Error("boom");
      },
      userAgent: UA,
    });
    const rules = await robots.get("https://a.example/");
    expect(rules.source).toBe("unreachable");
    expect((rules.error as Error).message).toBe("boom");
  });

  it("get() never throws and never rejects, whatever the robots.txt says", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 300, unit: "binary" }), async (content) => {
        const robots = createRobotsTxtCache({
          fetch: () => Promise.resolve(new Response(content)),
          userAgent: UA,
        });
        const rules = await robots.get("https://a.example/");
        expect(typeof rules.isAllowed("https://a.example/some/path?q=1")).toBe("boolean");
        const delay = rules.crawlDelayMs;
        expect(delay === undefined || (Number.isFinite(delay) && delay >= 0)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it.each([
    [{ maxBytes: 0 }, /'maxBytes' must be an integer >= 1: current value is 0/],
    [{ timeoutMs: -1 }, /'timeoutMs'.*-1/],
    [{ ttlMs: Number.POSITIVE_INFINITY }, /'ttlMs'.*Infinity/],
    [{ maxRedirects: 1.5 }, /'maxRedirects'/],
  ])("createRobotsTxtCache() rejects %j at once", (bad, message) => {
    expect(() => createRobotsTxtCache({ fetch: globalThis.fetch, userAgent: UA, ...bad })).toThrow(
      RangeError,
    );
    expect(() => createRobotsTxtCache({ fetch: globalThis.fetch, userAgent: UA, ...bad })).toThrow(
      message,
    );
  });

  it("createRobotsTxtCache() rejects a missing fetch or an empty user agent", () => {
    expect(() =>
      createRobotsTxtCache({ fetch: undefined as unknown as RobotsFetch, userAgent: UA })
    ).toThrow(
      /'fetch' must be a function/,
    );
    expect(() => createRobotsTxtCache({ fetch: globalThis.fetch, userAgent: " " })).toThrow(
      /'userAgent'/,
    );
  });
});

describe("crawlDelayDecision()", () => {
  const defaults = { concurrency: 8, delayMs: 0, explicit: false, ignoreRobotsTxt: false };
  const table: [
    string,
    Parameters<typeof crawlDelayDecision>[0],
    number | undefined,
    CrawlDelayDecision,
  ][] = [
    ["no Crawl-delay keeps the config", defaults, undefined, { kind: "keep", keep: true }],
    ["a default scope takes concurrency 1 and the delay", defaults, 5_000, {
      kind: "apply",
      apply: { concurrency: 1, delayMs: 5_000 },
    }],
    ["the delay is capped at maxDelayMs", defaults, 3_600_000, {
      kind: "apply",
      apply: { concurrency: 1, delayMs: 60_000 },
    }],
    ["Crawl-delay 0 still means concurrency 1", defaults, 0, {
      kind: "apply",
      apply: { concurrency: 1, delayMs: 0 },
    }],
    ["a slower default delay is still replaced", { ...defaults, delayMs: 9_000 }, 5_000, {
      kind: "apply",
      apply: { concurrency: 1, delayMs: 5_000 },
    }],
    ["an invalid Crawl-delay keeps the config", defaults, Number.NaN, { kind: "keep", keep: true }],
    ["a negative Crawl-delay keeps the config", defaults, -1, { kind: "keep", keep: true }],
    [
      "ignoreRobotsTxt keeps the config silently",
      {
        concurrency: 4,
        delayMs: 0,
        explicit: true,
        ignoreRobotsTxt: true,
      },
      5_000,
      { kind: "keep", keep: true },
    ],
    [
      "a configured scope at least as polite keeps it silently",
      {
        concurrency: 1,
        delayMs: 10_000,
        explicit: true,
        ignoreRobotsTxt: false,
      },
      5_000,
      { kind: "keep", keep: true },
    ],
    [
      "a configured scope as polite as the capped delay keeps it silently",
      {
        concurrency: 1,
        delayMs: 60_000,
        explicit: true,
        ignoreRobotsTxt: false,
      },
      90_000,
      { kind: "keep", keep: true },
    ],
  ];
  it.each(table)("crawlDelayDecision(): %s", (_name, configured, crawlDelayMs, expected) => {
    expect(crawlDelayDecision(configured, crawlDelayMs, 60_000)).toEqual(expected);
  });

  it.each([
    ["more concurrency", { concurrency: 4, delayMs: 10_000 }],
    ["a shorter delay", { concurrency: 1, delayMs: 1_000 }],
  ])("crawlDelayDecision() keeps a configured scope with %s, with a warning", (_name, config) => {
    const d = crawlDelayDecision(
      { ...config, explicit: true, ignoreRobotsTxt: false },
      5_000,
      60_000,
    );
    expect(d.kind).toBe("keep");
    expect(d.kind === "keep" && d.warning).toMatch(/Crawl-delay 5000 ms.*'ignoreRobotsTxt'/);
    expect(d.kind === "keep" && d.warning).toContain(`concurrency ${config.concurrency}`);
  });
});
