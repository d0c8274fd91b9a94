import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The layout's rule (issue 14): the operators stand on lib/, so lib/ never
// imports from operators/, except what composes the operators: the crawl loop
// (lib/crawl.ts), the command line (lib/cli/) and the simulator (lib/sim/).

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const COMPOSERS = ["lib/crawl.ts", "lib/cli/", "lib/sim/"];
// The only modules directly in lib/: the vocabulary every folder speaks, and
// the crawl loop on top (lib/README.md says why). Everything else is in a
// folder of its subsystem, so the layout cannot go flat again unnoticed.
const TOP_LEVEL = [
  "_request_delay.ts",
  "_resubmit.ts",
  "crawl.ts",
  "download.ts",
  "events.ts",
  "outcome.ts",
  "request.ts",
];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith(".ts") ? [path] : [];
  });
}

/** The specifiers a module imports or re-exports (doc examples in comments left out). */
function importsOf(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  return [...code.matchAll(/(?:import|export)\s[^;]*?from\s+"([^"]+)"/g)].map((m) => m[1]!);
}

describe("layout", () => {
  it("importsOf() reads import and export specifiers and skips doc comments", () => {
    const text = [
      "/**",
      ' * import { x } from "../operators/in_a_doc.ts";',
      " */",
      'import { a } from "./a.ts";',
      'import type {\n  B,\n} from "../operators/b.ts";',
      'export type { C } from "./c.ts";',
    ].join("\n");
    expect(importsOf(text)).toEqual(["./a.ts", "../operators/b.ts", "./c.ts"]);
  });

  it("nothing in lib/ imports from operators/ but the crawl loop, the command line and the simulator", () => {
    const offenders = sources(join(ROOT, "lib")).flatMap((path) => {
      const file = relative(ROOT, path).replaceAll("\\", "/");
      if (COMPOSERS.some((c) => file === c || (c.endsWith("/") && file.startsWith(c)))) return [];
      return importsOf(readFileSync(path, "utf8"))
        .filter((spec) => spec.includes("operators/"))
        .map((spec) => `${file} imports ${spec}`);
    });
    expect(offenders).toEqual([]);
  });

  it("a file of lib/ or operators/ over 500 lines says at its top why it is one file", () => {
    const long = [...sources(join(ROOT, "lib")), ...sources(join(ROOT, "operators"))]
      .map((path) => ({ path, text: readFileSync(path, "utf8") }))
      .filter(({ text }) => text.split("\n").length > 500);
    // The rule must bite: there are such files, and each names its reason in
    // its module doc (before the first import).
    expect(long.length).toBeGreaterThan(0);
    const unexplained = long
      .filter(({ text }) => !/^ \* Size: /m.test(text.slice(0, text.search(/^import /m))))
      .map(({ path }) => relative(ROOT, path).replaceAll("\\", "/"));
    expect(unexplained).toEqual([]);
  });

  it("lib/README.md names every file and folder of lib/, each folder's README.md every file of it", () => {
    const folders = [
      "lib",
      ...readdirSync(join(ROOT, "lib"))
        .filter((name) => statSync(join(ROOT, "lib", name)).isDirectory())
        .map((name) => `lib/${name}`),
    ];
    const unnamed = folders.flatMap((folder) => {
      const map = readFileSync(join(ROOT, folder, "README.md"), "utf8");
      return readdirSync(join(ROOT, folder))
        .filter((name) => name !== "README.md")
        .map((name) => statSync(join(ROOT, folder, name)).isDirectory() ? `${name}/` : name)
        .filter((name) => !map.includes(`\`${name}\``))
        .map((name) => `${folder}/${name}`);
    });
    expect(unnamed).toEqual([]);
  });

  it("no module sits directly in lib/ but the vocabulary and the crawl loop", () => {
    const flat = readdirSync(join(ROOT, "lib")).filter((name) => name.endsWith(".ts"));
    expect(flat.sort()).toEqual(TOP_LEVEL);
  });
});
