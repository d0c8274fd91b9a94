/**
 * `npm run bench`: runs every benchmark (`bench/*.bench.ts`), each in its own
 * `node --expose-gc --import tsx` process, and prints what each prints (one
 * Markdown table or more per bench).
 *
 * - `npm run bench` runs them all: `core` and `delay_accuracy` first, then the
 *   others in name order; `outside` (about ten minutes of real crawls) only
 *   when named.
 * - `npm run bench -- core delay_accuracy` runs the named ones.
 * - Options after the names (`--requests 20000 --reps 3`) go to every bench
 *   built on `_harness.ts` (they read `--name value` options). Other benches
 *   run with their own defaults, and their output (plain lines) is fenced.
 * - `npm run bench -- --list` lists the benches.
 *
 * A bench file is a standalone script: it reads its options from argv and
 * prints Markdown to stdout (progress goes to stderr).
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { machine, ROOT, runNode } from "./_harness.ts";

const FIRST = ["core", "delay_accuracy"];
/** Benches that run only when named: `outside` crawls 28 loopback sites for about ten minutes. */
const NAMED_ONLY = ["outside"];

function benches(): string[] {
  const found = readdirSync(join(ROOT, "bench"))
    .filter((f) => f.endsWith(".bench.ts"))
    .map((f) => f.slice(0, -".bench.ts".length));
  return [
    ...FIRST.filter((b) => found.includes(b)),
    ...found.filter((b) => !FIRST.includes(b)).sort(),
  ];
}

async function main(argv: readonly string[]): Promise<number> {
  const all = benches();
  if (argv.includes("--list")) {
    console.log(all.join("\n"));
    return 0;
  }
  const firstOption = argv.findIndex((a) => a.startsWith("--"));
  const names = firstOption < 0 ? [...argv] : argv.slice(0, firstOption);
  const options = firstOption < 0 ? [] : argv.slice(firstOption);
  const unknown = names.filter((n) => !all.includes(n));
  if (unknown.length > 0) {
    console.error(`unknown bench ${unknown.join(", ")}: expected one of ${all.join(", ")}`);
    return 2;
  }
  const chosen = names.length > 0 ? names : all.filter((b) => !NAMED_ONLY.includes(b));
  console.log(
    `## Benchmarks\n\n${machine()}. Command: \`npm run bench${
      argv.length ? ` -- ${argv.join(" ")}` : ""
    }\`.\n`,
  );
  let failed = 0;
  for (const name of chosen) {
    process.stderr.write(`bench ${name}...\n`);
    try {
      const file = join(ROOT, "bench", `${name}.bench.ts`);
      if (readFileSync(file, "utf8").includes('from "./_harness.ts"')) {
        // It prints its own Markdown, passed through as it comes.
        await runNode(file, options, { echo: true });
      } else {
        console.log(`### ${name}\n\nCommand: \`npx tsx bench/${name}.bench.ts\`\n\n\`\`\`text`);
        await runNode(file, [], { echo: true });
        console.log("```");
      }
      console.log("");
    } catch (error) {
      failed++;
      console.log(
        `### ${name}\n\nFailed: ${error instanceof Error ? error.message : String(error)}\n`,
      );
    }
  }
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
