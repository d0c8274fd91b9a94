/**
 * Nothing lost, nothing crashes (issue 12), measured on the real command
 * line in child processes against a loopback server:
 *
 * - **Interrupted crawls**: one crawl of `--urls` pages (a few ms each) with
 *   a job directory, interrupted `--kills` times with SIGKILL and `--terms`
 *   times with SIGTERM at random moments (each run is resumed with the same
 *   command until one ends by itself). Counts: pages never recorded (lost),
 *   duplicate `--output` lines, pages the server served more than once
 *   (re-sent: those in flight at a kill), exit statuses.
 * - **A huge page**: peak RSS of a crawl fetching one page of `--huge-mb` MB
 *   and 100 ordinary ones (bodies are streamed; `--output` keeps none).
 *
 * `npm run bench -- reliability [--urls 2000] [--kills 20] [--terms 20] [--huge-mb 600] [--seed 1]`
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seededRandom } from "../lib/sim/zoo_random.ts";
import { argValue, fmtFixed, fmtInt, isMain, markdownTable, ROOT } from "./_harness.ts";

const MAIN = join(ROOT, "lib/cli/main.ts");

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function politely(args: readonly string[]): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", MAIN, ...args], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "pipe"],
  });
}

function lines(path: string): string[] {
  return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter((l) => l !== "") : [];
}

/** Interrupted crawls: returns the table row values. */
async function interrupted(n: number, kills: number, terms: number, seed: number) {
  const random = seededRandom(seed);
  const served = new Map<string, number>();
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    if (url === "/robots.txt") {
      res.writeHead(404).end();
      return;
    }
    served.set(url, (served.get(url) ?? 0) + 1);
    setTimeout(() => res.writeHead(200, { "content-type": "text/plain" }).end("ok"), 5);
  });
  const origin = await listen(server);
  const dir = mkdtempSync(join(tmpdir(), "politely-bench-rel-"));
  writeFileSync(
    join(dir, "urls.txt"),
    Array.from({ length: n }, (_, i) => `${origin}/p/${i}`).join("\n") + "\n",
  );
  const output = join(dir, "out.jsonl");
  const args = [
    "crawl",
    join(dir, "urls.txt"),
    "--quiet",
    "--jobdir",
    join(dir, "job"),
    "--output",
    output,
    "--set",
    "CONCURRENT_REQUESTS_PER_DOMAIN=8",
  ];
  const signals: NodeJS.Signals[] = [
    ...Array.from({ length: kills }, () => "SIGKILL" as const),
    ...Array.from({ length: terms }, () => "SIGTERM" as const),
  ];
  // Shuffled, so kills and terms mix.
  for (let i = signals.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [signals[i], signals[j]] = [signals[j]!, signals[i]!];
  }
  const statuses = new Map<string, number>();
  let runs = 0;
  const startedAt = performance.now();
  for (;;) {
    runs++;
    const signal = signals.shift();
    const child = politely(args);
    let stderr = "";
    child.stderr!.on("data", (d) => (stderr += d));
    const before = lines(output).length;
    // A random moment once the run is sending: after 1 to 40 more pages.
    const after = 1 + Math.floor(random() * 40);
    const poll = signal === undefined ? undefined : setInterval(() => {
      if (lines(output).length >= before + after) {
        clearInterval(poll);
        child.kill(signal);
      }
    }, 5);
    const code = await new Promise<string>((resolve) =>
      child.on("close", (c, s) => resolve(c === null ? String(s) : String(c)))
    );
    clearInterval(poll);
    statuses.set(code, (statuses.get(code) ?? 0) + 1);
    if (signal === undefined || code === "0") {
      if (code !== "0") throw new Error(`the last run ended ${code}: ${stderr}`);
      break;
    }
  }
  const seconds = (performance.now() - startedAt) / 1000;
  server.close();
  const records = lines(output).map((l) => JSON.parse(l) as { url: string; status?: number });
  const urls = new Set(records.map((r) => r.url));
  const resent = [...served.values()].filter((c) => c > 1).length;
  const extraFetches = [...served.values()].reduce((s, c) => s + c - 1, 0);
  return {
    runs,
    seconds,
    lost: n - urls.size,
    duplicates: records.length - urls.size,
    notOk: records.filter((r) => r.status !== 200).length,
    resent,
    extraFetches,
    statuses: [...statuses].map(([k, v]) => `${k}×${v}`).join(", "),
  };
}

/** Peak RSS (MiB) of a crawl of one `mb` MB page and 100 ordinary ones, and the huge page's record. */
async function hugePage(mb: number) {
  const chunk = Buffer.alloc(1 << 20, 97);
  const server = createServer((req, res) => {
    if (req.url === "/huge") {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      let left = mb;
      const pump = () => {
        while (left > 0) {
          left--;
          if (!res.write(chunk)) {
            res.once("drain", pump);
            return;
          }
        }
        res.end();
      };
      pump();
      return;
    }
    res.writeHead(req.url === "/robots.txt" ? 404 : 200).end("ok");
  });
  const origin = await listen(server);
  const dir = mkdtempSync(join(tmpdir(), "politely-bench-huge-"));
  writeFileSync(
    join(dir, "urls.txt"),
    [`${origin}/huge`, ...Array.from({ length: 100 }, (_, i) => `${origin}/p/${i}`)].join("\n"),
  );
  const output = join(dir, "out.jsonl");
  const child = spawn("/usr/bin/time", [
    "-f",
    "%e %M",
    process.execPath,
    "--import",
    "tsx",
    MAIN,
    "crawl",
    join(dir, "urls.txt"),
    "--quiet",
    "--output",
    output,
  ], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
  server.close();
  const [seconds, kib] = (stderr.trim().split("\n").at(-1) ?? "").split(" ").map(Number);
  const huge = lines(output).map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((r) => r.url === `${origin}/huge`);
  return {
    status,
    seconds: seconds ?? NaN,
    peakMiB: (kib ?? NaN) / 1024,
    records: lines(output).length,
    huge: huge === undefined
      ? "no record"
      : `status ${huge.status}, ${huge.bytes ?? "?"} bytes${huge.error ? `, ${huge.error}` : ""}`,
  };
}

/** Runs the benchmark and returns its Markdown. */
export async function main(argv: readonly string[]): Promise<string> {
  const n = Number(argValue(argv, "urls") ?? 2000);
  const kills = Number(argValue(argv, "kills") ?? 20);
  const terms = Number(argValue(argv, "terms") ?? 20);
  const mb = Number(argValue(argv, "huge-mb") ?? 600);
  const seed = Number(argValue(argv, "seed") ?? 1);
  process.stderr.write(`reliability: ${n} pages, ${kills} SIGKILLs, ${terms} SIGTERMs...\n`);
  const r = await interrupted(n, kills, terms, seed);
  process.stderr.write(`reliability: a ${mb} MB page and 100 ordinary ones...\n`);
  const h = await hugePage(mb);
  return [
    `### Reliability (issue 12)\n`,
    `One crawl of ${
      fmtInt(n)
    } loopback pages with a job directory, stopped ${kills} times by SIGKILL ` +
    `and ${terms} times by SIGTERM at random moments (seed ${seed}), resumed with the same command ` +
    `each time:\n`,
    markdownTable(
      [
        "runs",
        "seconds",
        "pages lost",
        "duplicate output lines",
        "lines not 200",
        "pages served twice or more",
        "extra fetches",
        "exit statuses",
      ],
      [[
        String(r.runs),
        fmtFixed(r.seconds, 1),
        String(r.lost),
        String(r.duplicates),
        String(r.notOk),
        String(r.resent),
        String(r.extraFetches),
        r.statuses,
      ]],
    ),
    `\nA page served twice was in flight at a SIGKILL (a SIGTERM lets in-flight pages finish or ` +
    `aborts them unrecorded; either way the resume sends them again).\n`,
    `One ${mb} MB page and 100 ordinary ones (\`politely crawl --output\`, bodies streamed):\n`,
    markdownTable(
      ["exit", "seconds", "peak RSS", "output lines", "the huge page"],
      [[
        String(h.status),
        fmtFixed(h.seconds, 1),
        `${fmtFixed(h.peakMiB, 0)} MiB`,
        String(h.records),
        h.huge,
      ]],
    ),
  ].join("\n");
}

if (isMain(import.meta)) {
  console.log(await main(process.argv.slice(2)));
}
