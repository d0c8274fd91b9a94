import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { VirtualTimeScheduler } from "rxjs";
import { describe, expect, it } from "vitest";
import { createZooLimiter, type ZooSiteSpec } from "../lib/sim/zoo.ts";
import { startZooServer, type ZooServer } from "../lib/sim/zoo_server.ts";
import { runProcess } from "./_helpers/run_process.ts";

/** Polls without a wall-clock bound on behaviour: only on real I/O arriving. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`Timed out waiting for ${what}`);
}

/** Moves a virtual clock to `frame`, running every answer due by then. */
function advanceTo(scheduler: VirtualTimeScheduler, frame: number): void {
  scheduler.schedule(() => {}, frame - scheduler.frame);
  scheduler.flush();
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
}

/**
 * Sends `count` concurrent GETs at the virtual time `at` (all arrive at the
 * same frozen time), then answers them all by flushing the clock.
 */
async function batch(
  server: ZooServer,
  scheduler: VirtualTimeScheduler,
  at: number,
  count: number,
): Promise<Answer[]> {
  advanceTo(scheduler, at);
  const before = server.stats().requests;
  const answers = Array.from(
    { length: count },
    () =>
      fetch(`${server.url}/page`).then(async (r) => {
        await r.arrayBuffer();
        return { status: r.status, headers: r.headers };
      }),
  );
  await until(() => server.stats().requests === before + count, `${count} arrivals`);
  scheduler.flush();
  const got = await Promise.all(answers);
  // A slot is freed when the server sees the response finished.
  await until(() => server.stats().inFlight === 0, "every answer finished");
  return got;
}

/** What the model says to the same batches, each answered (and released) before the next. */
function modelled(spec: ZooSiteSpec, batches: readonly [number, number][]): number[][] {
  const limiter = createZooLimiter(spec);
  return batches.map(([at, count]) => {
    const decisions = Array.from({ length: count }, () => limiter.arrive(at));
    for (const d of decisions) d.release?.();
    return decisions.map((d) => d.status).sort();
  });
}

describe("startZooServer()", () => {
  it("startZooServer() refuses on every shape exactly as the model does", async () => {
    const table: [ZooSiteSpec, [number, number][]][] = [
      [
        { name: "b", limiter: { shape: "token-bucket", ratePerSec: 10, burst: 3 }, latencyMs: 20 },
        [[0, 5], [100, 3], [250, 2]],
      ],
      [
        {
          name: "g",
          limiter: { shape: "token-bucket", ratePerSec: 4, burst: 1 },
          latencyMs: 10,
          status: 503,
        },
        [[0, 2], [100, 1], [250, 2]],
      ],
      [
        { name: "f", limiter: { shape: "fixed-window", quota: 3, windowMs: 1000 }, latencyMs: 10 },
        [[0, 2], [500, 3], [1000, 4]],
      ],
      [
        {
          name: "s",
          limiter: { shape: "sliding-window", quota: 3, windowMs: 1000 },
          latencyMs: 10,
        },
        [[0, 2], [500, 3], [1000, 3], [1500, 2]],
      ],
      [
        {
          name: "c",
          limiter: { shape: "concurrency", maxConcurrency: 2 },
          latencyMs: 50,
          status: 503,
        },
        [[0, 4], [100, 3]],
      ],
      [
        {
          name: "l",
          limiter: { shape: "load-shed", workers: 1, maxQueue: 1 },
          latencyMs: 100,
          status: 503,
        },
        [[0, 3], [500, 1]],
      ],
      [{ name: "n", limiter: { shape: "none" }, latencyMs: 5 }, [[0, 6]]],
    ];
    for (const [spec, batches] of table) {
      const scheduler = new VirtualTimeScheduler();
      const server = await startZooServer(spec, { scheduler });
      try {
        const got: number[][] = [];
        for (const [at, count] of batches) {
          got.push((await batch(server, scheduler, at, count)).map((a) => a.status).sort());
        }
        expect({ site: spec.name, got }).toEqual({
          site: spec.name,
          got: modelled(spec, batches),
        });
        const refused = got.flat().filter((s) => s !== 200).length;
        expect(server.stats().rejected).toBe(refused);
      } finally {
        await server.close();
      }
    }
  }, 60_000);

  it(
    "startZooServer() sends each header family, Retry-After and a Date from its clock",
    async () => {
      const spec = (
        announce: NonNullable<ZooSiteSpec["announce"]>,
        retryAfter: NonNullable<ZooSiteSpec["retryAfter"]>,
      ): ZooSiteSpec => ({
        name: "h",
        limiter: { shape: "fixed-window", quota: 1, windowMs: 2000 },
        latencyMs: 10,
        announce,
        retryAfter,
      });
      const epochMs = 1_800_000_000_000;
      const cases: [ZooSiteSpec, Record<string, string>][] = [
        [spec("ietf", "seconds"), {
          "ratelimit-policy": '"default";q=1;w=2',
          ratelimit: '"default";r=0;t=2',
          "retry-after": "2",
        }],
        [spec("legacy", "none"), {
          "ratelimit-limit": "1",
          "ratelimit-remaining": "0",
          "ratelimit-reset": "2",
        }],
        [spec("x-delta", "none"), { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "2" }],
        // A constant Retry-After, whatever the limiter's own wait.
        [spec("none", 7), { "retry-after": "7" }],
        [spec("x-epoch", "date"), {
          "x-ratelimit-reset": String((epochMs + 2000) / 1000),
          date: new Date(epochMs).toUTCString(),
          "retry-after": new Date(epochMs + 2000).toUTCString(),
        }],
      ];
      for (const [s, expected] of cases) {
        const scheduler = new VirtualTimeScheduler();
        const server = await startZooServer(s, { scheduler, epochMs });
        try {
          const [first] = await batch(server, scheduler, 0, 1);
          const [second] = await batch(server, scheduler, 20, 1);
          expect(first!.status).toBe(200);
          expect(second!.status).toBe(429);
          expect({ announce: s.announce, headers: Object.fromEntries(second!.headers) })
            .toMatchObject({ announce: s.announce, headers: expected });
        } finally {
          await server.close();
        }
      }
    },
    120_000,
  );

  it("startZooServer() dates x-epoch resets on the wall clock by default", async () => {
    const server = await startZooServer({
      name: "e",
      limiter: { shape: "fixed-window", quota: 5, windowMs: 10_000 },
      latencyMs: 1,
      announce: "x-epoch",
    });
    try {
      const before = Date.now();
      const r = await fetch(`${server.url}/`);
      await r.arrayBuffer();
      const reset = Number(r.headers.get("x-ratelimit-reset")) * 1000;
      // A window of 10 s from the first request: the reset lies 10-11 s ahead
      // (rounded up to a second); a loaded machine only makes it nearer.
      expect(reset).toBeGreaterThanOrEqual(before + 9_000);
      expect(reset).toBeLessThanOrEqual(before + 11_000);
    } finally {
      await server.close();
    }
  });

  it("startZooServer() counts refusals that arrive inside a hold it announced", async () => {
    const scheduler = new VirtualTimeScheduler();
    const server = await startZooServer({
      name: "w",
      limiter: { shape: "fixed-window", quota: 2, windowMs: 1000 },
      latencyMs: 10,
      announce: "ietf",
    }, { scheduler });
    try {
      // Two admitted in one batch: the second answer announces r=0.
      await batch(server, scheduler, 0, 2);
      expect(server.stats().refusedInHold).toBe(0);
      expect((await batch(server, scheduler, 200, 2)).map((a) => a.status)).toEqual([429, 429]);
      expect(server.stats().refusedInHold).toBe(2);
      // After the reset the budget is back and nothing counts.
      expect((await batch(server, scheduler, 1000, 1))[0]!.status).toBe(200);
      expect(server.stats().refusedInHold).toBe(2);
    } finally {
      await server.close();
    }
  });

  it("startZooServer() answers on the real clock after the model's latency", async () => {
    const server = await startZooServer({
      name: "r",
      limiter: { shape: "concurrency", maxConcurrency: 1 },
      latencyMs: 300,
    });
    try {
      const started = performance.now(); // real clock: real I/O
      const [a, b] = await Promise.all(
        [1, 2].map(() =>
          fetch(`${server.url}/`).then(async (r) => (await r.arrayBuffer(), r.status))
        ),
      );
      // Only a lower bound: a loaded machine may be late, never early.
      expect(performance.now() - started).toBeGreaterThanOrEqual(299);
      expect([a, b].sort()).toEqual([200, 429]);
      await until(() => server.stats().inFlight === 0, "the slot freed");
      const r = await fetch(`${server.url}/`);
      await r.arrayBuffer();
      expect(r.status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it("startZooServer() frees a concurrency slot when the client hangs up", async () => {
    const scheduler = new VirtualTimeScheduler(); // never flushed: the answer stays pending
    const server = await startZooServer({
      name: "a",
      limiter: { shape: "concurrency", maxConcurrency: 1 },
      latencyMs: 100,
    }, { scheduler });
    try {
      const controller = new AbortController();
      const pending = fetch(`${server.url}/`, { signal: controller.signal }).catch(() => "aborted");
      await until(() => server.stats().requests === 1, "the arrival");
      controller.abort();
      expect(await pending).toBe("aborted");
      await until(() => server.stats().inFlight === 0, "the hang-up");
      expect(server.stats().aborted).toBe(1);
      expect((await batch(server, scheduler, 0, 1))[0]!.status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it("startZooServer() close() frees the port even with an answer pending", async () => {
    const scheduler = new VirtualTimeScheduler();
    const server = await startZooServer(
      { name: "p", limiter: { shape: "none" }, latencyMs: 10 },
      { scheduler },
    );
    const pending = fetch(`${server.url}/`).then((r) => r.status, () => "failed");
    await until(() => server.stats().requests === 1, "the arrival");
    await server.close();
    expect(await pending).toBe("failed");
    const other = createServer();
    await new Promise<void>((resolve, reject) => {
      other.once("error", reject);
      other.listen(server.port, "127.0.0.1", resolve);
    });
    await new Promise((resolve) => other.close(resolve));
    await server.close(); // twice is fine
  });

  it("startZooServer() leaves no handle that keeps the process alive after close()", async () => {
    const moduleUrl = new URL("../lib/sim/zoo_server.ts", import.meta.url).href;
    const code = `const { startZooServer } = await import(${JSON.stringify(moduleUrl)});
const shapes = [
  { shape: "token-bucket", ratePerSec: 5, burst: 2 },
  { shape: "fixed-window", quota: 2, windowMs: 1000 },
  { shape: "concurrency", maxConcurrency: 1 },
  { shape: "load-shed", workers: 1, maxQueue: 0 },
];
for (const limiter of shapes) {
  const server = await startZooServer({ name: "x", limiter, latencyMs: 300, announce: "ietf" });
  const statuses = await Promise.all([1, 2, 3].map(() => fetch(server.url + "/").then((r) => r.text().then(() => r.status))));
  fetch(server.url + "/late").catch(() => {});
  await server.close();
  console.log(limiter.shape, statuses.sort().join(","));
}`;
    const runtime = process.versions["bun"] ? "bun" : "Deno" in globalThis ? "deno" : "node";
    const args = runtime === "bun"
      ? ["-e", code]
      : runtime === "deno"
      ? ["eval", code]
      : ["--import", "tsx", "--input-type=module", "-e", code];
    const root = fileURLToPath(new URL("..", import.meta.url));
    const run = await runProcess(process.execPath, args, { cwd: root, timeoutMs: 20_000 });
    expect(run.stdout + run.stderr).toContain("concurrency 200,429,429");
    expect(run.code).toBe(0);
  }, 120_000);

  it("startZooServer() rejects a bad spec before listening, naming the field", () => {
    expect(() =>
      startZooServer({
        name: "bad",
        limiter: { shape: "concurrency", maxConcurrency: 0 },
        latencyMs: 1,
      })
    ).toThrow(/'limiter\.maxConcurrency' must be an integer >= 1: current value is 0/);
  });
});
