import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { parseCliArgs, UsageError } from "../lib/cli/args.ts";
import { MAIN, ROOT } from "./_helpers/politely_cli.ts";

describe("politely --web", () => {
  it("parseCliArgs() reads --web PORT, HOST:PORT and [IPv6]:PORT for crawl and demo", () => {
    expect(parseCliArgs(["crawl", "urls.txt", "--web", "8080"])).toMatchObject({
      web: { host: "127.0.0.1", port: 8080 },
    });
    expect(parseCliArgs(["demo", "--web", "0.0.0.0:0"])).toMatchObject({
      web: { host: "0.0.0.0", port: 0 },
    });
    expect(parseCliArgs(["demo", "--web", "[::1]:9000"])).toMatchObject({
      web: { host: "::1", port: 9000 },
    });
    expect(parseCliArgs(["demo"])).toMatchObject({ web: undefined });
    for (const bad of ["", "host", "host:", ":80", "70000", "a:b:80"]) {
      expect(() => parseCliArgs(["crawl", "--web", bad])).toThrow(UsageError);
    }
    expect(() => parseCliArgs(["crawl", "--web", "x"])).toThrow(
      "--web expects [HOST:]PORT, e.g. 8080 or 0.0.0.0:8080 (0 picks a free port): current value is 'x'",
    );
  });

  it(
    "politely demo --web 0 prints the dashboard's address and serves the demo's sites",
    async () => {
      const runtime = "Deno" in globalThis ? ["run", "-A", MAIN] : ["--import", "tsx", MAIN];
      const child = spawn(
        process.execPath,
        [...runtime, "demo", "--plain", "--duration", "300", "--web", "0"],
        { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] },
      );
      let stderr = "";
      let stdout = "";
      child.stdout.on("data", (d) => (stdout += d));
      const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
      try {
        const url = await new Promise<string>((resolve, reject) => {
          child.stderr.on("data", (d) => {
            stderr += d;
            const m = /politely: dashboard at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(stderr);
            if (m !== null) resolve(m[1]!);
          });
          child.on("exit", () => reject(new Error(`demo ended first: ${stderr}`)));
        });
        const page = await fetch(url);
        expect(page.status).toBe(200);
        await page.text();
        // The demo's sites appear under their names, not 127.0.0.1:PORT.
        let labels: string[] = [];
        while (!["bucket", "capped", "fine"].every((n) => labels.includes(n))) {
          const history = await (await fetch(new URL("history.json", url))).json();
          labels = history.rows.map((r: { label: string }) => r.label);
          await new Promise((r) => setTimeout(r, 200)); // a poll, not a timing assertion
        }
        expect(labels.some((l) => l.includes("127.0.0.1"))).toBe(false);
      } finally {
        child.kill("SIGINT");
      }
      // Deno's child_process reports a child that handled SIGINT and exited 130
      // as ended by the signal (code null), as in cli_crawl.test.ts.
      expect("Deno" in globalThis ? [130, null] : [130]).toContain(await exited);
      // The summary: stopped cleanly, the dashboard closed on the way out.
      expect(stdout).toContain("stopped by Ctrl-C");
    },
    120_000,
  );
});
