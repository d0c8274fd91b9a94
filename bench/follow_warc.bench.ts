/**
 * `politely crawl --follow` over a loopback site of linked pages (issue 13):
 * pages/s and peak RSS with and without `--warc` (plain and gzip). The site
 * answers at once with no limit, so the figures are politely's own cost: link
 * extraction, the queue, the job directory, the archive. The crawl runs as
 * the real command line in a child process (`/usr/bin/time` reads its peak
 * RSS).
 *
 * `npm run bench -- follow_warc [--pages 3000]`
 *
 * @module
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { argValue, fmtFixed, isMain, markdownTable, ROOT } from "./_harness.ts";

function page(i: number, n: number): string {
  const links = [i + 1, i * 7 + 1, i * 13 + 2, i * 31 + 5].map((k) => k % n);
  const filler = "<p>politely crawls as fast as a site allows and no faster.</p>\n".repeat(80);
  return `<!doctype html><html><head><title>page ${i}</title></head><body>
${links.map((k) => `<a href="/p/${k}">page ${k}</a>`).join(" ")}
${filler}</body></html>\n`;
}

/** Runs the benchmark and returns its Markdown. */
export async function main(argv: readonly string[]): Promise<string> {
  const n = Number(argValue(argv, "pages") ?? 3000);
  const server = createServer((req, res) => {
    const m = /^\/p\/(\d+)$/.exec(req.url ?? "");
    if (m === null || Number(m[1]) >= n) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(page(Number(m[1]), n));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const rows: string[][] = [];
  try {
    for (const warc of [undefined, "crawl.warc", "crawl.warc.gz"]) {
      const dir = mkdtempSync(join(tmpdir(), "politely-bench-"));
      const args = [
        "-f",
        "%e %M",
        process.execPath,
        "--import",
        "tsx",
        join(ROOT, "lib/cli/main.ts"),
        "crawl",
        "-",
        "--follow",
        "--quiet",
        "--jobdir",
        join(dir, "job"),
        "--output",
        join(dir, "out.jsonl"),
        "--set",
        "ROBOTSTXT_OBEY=false",
        "--set",
        "CONCURRENT_REQUESTS_PER_DOMAIN=16",
        ...(warc === undefined ? [] : ["--warc", join(dir, warc)]),
      ];
      // Asynchronously: the server answers from this process.
      const run = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const child = spawn("/usr/bin/time", args, {
          cwd: ROOT,
          stdio: ["pipe", "ignore", "pipe"],
        });
        let stderr = "";
        child.stderr.on("data", (d) => (stderr += d));
        child.stdin.end(`${origin}/p/0\n`);
        child.on("close", (status) => resolve({ status, stderr }));
      });
      const last = run.stderr.trim().split("\n").at(-1) ?? "";
      const [seconds, kib] = last.split(" ").map(Number);
      if (run.status !== 0 || !(seconds! > 0)) {
        throw new Error(`crawl exited ${run.status}: ${run.stderr.slice(-500)}`);
      }
      const lines = readFileSync(join(dir, "out.jsonl"), "utf8").split("\n").filter((l) =>
        l !== ""
      );
      if (lines.length !== n) throw new Error(`${lines.length} records for ${n} pages`);
      const size = warc === undefined ? 0 : statSync(join(dir, warc)).size;
      rows.push([
        warc === undefined ? "no archive" : `--warc ${warc}`,
        String(n),
        `${fmtFixed(seconds!, 1)} s`,
        fmtFixed(n / seconds!, 0),
        `${Math.round(kib! / 1024)} MiB`,
        warc === undefined ? "-" : `${fmtFixed(size / 1048576, 1)} MiB`,
      ]);
    }
  } finally {
    server.close();
  }
  return [
    `### politely crawl --follow: ${n} linked pages on loopback, no limit, concurrency 16`,
    "",
    markdownTable(
      ["run", "pages", "wall (process)", "pages/s", "peak RSS", "archive"],
      rows,
      ["l", "r", "r", "r", "r", "r"],
    ),
    "",
    "Each page is 5 KB of HTML with four links; the command line runs in a child process with `--jobdir` and `--output`, its wall time (start-up included) and peak RSS from `/usr/bin/time`.",
    "",
  ].join("\n");
}

if (isMain(import.meta)) console.log(await main(process.argv.slice(2)));
