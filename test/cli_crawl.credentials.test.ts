import { afterEach, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { type RecordingServer, startRecordingServer } from "./_helpers/loopback_server.ts";
import { runProcess } from "./_helpers/run_process.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MAIN = join(ROOT, "lib/cli/main.ts");

let server: RecordingServer | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await server?.close();
  server = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("politely crawl and credentials in URLs", () => {
  it(
    "politely crawl refuses input lines whose URL has credentials, sends none of them, and writes no password to --output, --events, stdout or stderr",
    async () => {
      server = await startRecordingServer();
      const dir = mkdtempSync(join(tmpdir(), "politely-credentials-"));
      dirs.push(dir);
      const withCredentials = (user: string, password: string, path: string) =>
        server!.origin.replace("http://", `http://${user}:${password}@`) + path;
      const input = join(dir, "in.txt");
      writeFileSync(
        input,
        [
          `${server.origin}/ok`,
          withCredentials("user", "s3cret", "/a"),
          JSON.stringify({ url: withCredentials("bob", "hunter2", "/b") }),
          JSON.stringify({
            url: `${server.origin}/c`,
            headers: { Authorization: "Basic hunter3" },
            priority: "high",
          }),
        ].join("\n") + "\n",
      );
      const out = join(dir, "out.jsonl");
      const events = join(dir, "events.jsonl");
      // The child runs on the runtime running the tests (Deno does not take `--import`).
      const runtime = "Deno" in globalThis ? ["run", "-A", MAIN] : ["--import", "tsx", MAIN];
      const run = await runProcess(process.execPath, [
        ...runtime,
        "crawl",
        input,
        "--output",
        out,
        "--events",
        events,
        "--plain",
      ], { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" } });
      expect(run.code).toBe(0);
      expect(server.arrivals.map((a) => a.path)).toEqual(["/ok"]);
      const lines = readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l));
      // Three refused lines and the one page, in whatever order they ended.
      expect(lines.map((l) => `${l.line ?? "-"} ${l.status ?? "-"}`).sort()).toEqual([
        "- 200",
        "2 -",
        "3 -",
        "4 -",
      ]);
      const masked = server.origin.replace("http://", "http://***@");
      expect(lines.find((l) => l.line === 2)?.input).toBe(`${masked}/a`);
      expect(lines.find((l) => l.line === 3)?.input).toBe(JSON.stringify({ url: `${masked}/b` }));
      expect(lines.find((l) => l.line === 4)?.input).toContain('"Authorization":"***"');
      const written: [string, string][] = [
        ["--output", readFileSync(out, "utf8")],
        ["--events", readFileSync(events, "utf8")],
        ["stdout", run.stdout],
        ["stderr", run.stderr],
      ];
      for (const [name, text] of written) {
        for (const secret of ["s3cret", "hunter2", "hunter3"]) {
          expect({ name, leaks: text.includes(secret) }).toEqual({ name, leaks: false });
        }
      }
      expect(run.stderr).toContain(
        "politely: input line 2: a URL with credentials (user:password@) is not crawled",
      );
    },
    60_000,
  );
});
