import { describe, expect, it } from "vitest";
import { parseCliArgs, UsageError } from "../lib/cli/args.ts";
import { startDemoWeb } from "./_helpers/politely_cli.ts";

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
      const demo = await startDemoWeb(300);
      const url = demo.url;
      let code: number | null | undefined;
      try {
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
        code = await demo.stop();
      }
      // Deno's child_process reports a child that handled SIGINT and exited 130
      // as ended by the signal (code null), as in cli_crawl.test.ts.
      expect("Deno" in globalThis ? [130, null] : [130]).toContain(code);
      // The summary: stopped cleanly, the dashboard closed on the way out.
      expect(demo.stdout()).toContain("stopped by Ctrl-C");
    },
    120_000,
  );
});
