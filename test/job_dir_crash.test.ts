import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** Pages 0..PAGES-1; page n links to 2n+1 and 2n+2 (and back to 0, a duplicate). */
const PAGES = 400;
const fixture = fileURLToPath(new URL("./fixtures/crawl_child.ts", import.meta.url));

describe("job directory crash safety", () => {
  let server: Server;
  let base = "";
  let dir = "";
  /** Every request the server saw: [run, path]. */
  const hits: [number, string][] = [];
  let run = 0;
  let onHit: (() => void) | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "politely-crash-"));
    server = createServer((req, res) => {
      const path = req.url ?? "";
      hits.push([run, path]);
      onHit?.();
      const n = Number(path.slice("/p/".length));
      const links = [2 * n + 1, 2 * n + 2].filter((k) => k < PAGES).map((k) =>
        `<a href="/p/${k}">`
      );
      // A short pause keeps several requests in flight when the kill comes.
      setTimeout(() => res.end(`<html>${links.join("")}<a href="/p/0"></html>`), 5);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  function start(): ChildProcess {
    run++;
    return spawn(process.execPath, [
      "--import",
      "tsx",
      fixture,
      join(dir, "job"),
      `${base}/p/0`,
      join(dir, "done.log"),
    ], {
      stdio: ["ignore", "ignore", "inherit"],
    });
  }

  function exited(child: ChildProcess): Promise<number | null> {
    return new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  }

  function doneLines(): string[] {
    const path = join(dir, "done.log");
    return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter((l) => l !== "") : [];
  }

  it(
    "a crawl killed with SIGKILL at several points and resumed fetches every page, none that had completed again",
    async () => {
      /** For each run, the URLs logged as done (after markDone returned) by the end of it. */
      const doneBy: Set<string>[] = [];
      for (const killAfter of [15, 60, 90, 150]) {
        const child = start();
        const runHits = () => hits.filter(([r]) => r === run).length;
        onHit = () => {
          if (runHits() >= killAfter) {
            onHit = undefined;
            child.kill("SIGKILL");
          }
        };
        await exited(child);
        onHit = undefined;
        doneBy.push(new Set(doneLines()));
      }
      const last = start();
      expect(await exited(last)).toBe(0);
      const finalDone = doneLines();
      expect(finalDone).toContain("FINISHED");

      // Every page was fetched.
      const fetched = new Set(hits.map(([, p]) => p));
      for (let n = 0; n < PAGES; n++) expect(fetched.has(`/p/${n}`)).toBe(true);
      // No page was fetched twice in one run (dedupe).
      for (let r = 1; r <= run; r++) {
        const paths = hits.filter(([x]) => x === r).map(([, p]) => p);
        expect(new Set(paths).size).toBe(paths.length);
      }
      // Nothing completed before a kill was fetched in a later run.
      for (let r = 1; r < run; r++) {
        const completed = doneBy[r - 1] as Set<string>;
        const later = hits.filter(([x, p]) => x > r && completed.has(base + p));
        expect(later).toEqual([]);
      }
      // Some runs were killed mid-crawl (the test would prove nothing otherwise).
      expect(doneBy[0]?.size ?? 0).toBeGreaterThan(0);
      expect(doneBy[0]?.size ?? 0).toBeLessThan(PAGES);
    },
    120_000,
  );
});
