import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../", import.meta.url);

function readText(path: string): string {
  return readFileSync(new URL(path, root), "utf8");
}

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readText(path)) as Record<string, unknown>;
}

/**
 * Turns an `exports` field (a string, or a map of entry points whose targets
 * are strings or condition objects) into entry point -> source file. A target
 * built into `dist/` (`./dist/x.js`, `./dist/x.d.ts`) names its source `./x.ts`.
 */
function entryPoints(field: unknown): Record<string, string> {
  const map = typeof field === "string" ? { ".": field } : field;
  if (map === null || typeof map !== "object" || Array.isArray(map)) {
    throw new TypeError(
      `"exports" must be a string or an object: current value is ${JSON.stringify(field)}`,
    );
  }
  const out: Record<string, string> = {};
  for (const [entry, target] of Object.entries(map)) {
    out[entry] = sourceOf(target, entry);
  }
  return out;
}

function sourceOf(target: unknown, entry: string): string {
  if (typeof target === "string") {
    return target.replace(/^\.\/dist\//, "./").replace(/(\.d)?\.[cm]?js$|\.d\.ts$/, ".ts");
  }
  if (target !== null && typeof target === "object") {
    const conditions = target as Record<string, unknown>;
    const chosen = conditions["import"] ?? conditions["default"] ?? conditions["types"];
    if (chosen !== undefined) return sourceOf(chosen, entry);
  }
  throw new TypeError(`Cannot read export "${entry}": current value is ${JSON.stringify(target)}`);
}

const exportLine = /^export \* from "(\.\/[^"]+\.ts)";$/;

/**
 * Checks that a mod.ts text is one module doc comment followed by
 * `export * from "./...ts";` lines, and returns the exported paths.
 */
function modExports(text: string): string[] {
  const doc = /^\/\*\*[\s\S]*?\*\//.exec(text);
  if (doc === null || !doc[0].includes("@module")) {
    throw new SyntaxError("mod.ts must start with a module doc comment (/** ... @module */)");
  }
  const lines = text.slice(doc[0].length).split("\n").filter((line) => line.trim() !== "");
  return lines.map((line) => {
    const match = exportLine.exec(line);
    if (match?.[1] === undefined) {
      throw new SyntaxError(
        `mod.ts may only hold 'export * from "./...ts";' lines: found ${JSON.stringify(line)}`,
      );
    }
    return match[1];
  });
}

describe("exports", () => {
  it("entryPoints() maps a built dist target back to its source file", () => {
    expect(entryPoints({ ".": { types: "./dist/mod.d.ts", import: "./dist/mod.js" } }))
      .toEqual({ ".": "./mod.ts" });
    expect(entryPoints("./mod.ts")).toEqual({ ".": "./mod.ts" });
  });

  it("entryPoints() tells two drifted export maps apart", () => {
    expect(entryPoints({ ".": "./mod.ts", "./cli": "./lib/cli/main.ts" }))
      .not.toEqual(entryPoints({ ".": "./mod.ts" }));
  });

  it("modExports() rejects code other than export-star lines", () => {
    const doc = "/**\n * x\n *\n * @module\n */\n";
    expect(modExports(`${doc}export * from "./lib/a.ts";\n`)).toEqual(["./lib/a.ts"]);
    expect(() => modExports(`${doc}export { a } from "./lib/a.ts";\n`)).toThrow(SyntaxError);
    expect(() => modExports(`${doc}export * from "./lib/a.js";\n`)).toThrow(SyntaxError);
    expect(() => modExports(`export * from "./lib/a.ts";\n`)).toThrow(SyntaxError);
  });

  it("deno.json and package.json list the same entry points", () => {
    const deno = entryPoints(readJson("deno.json")["exports"]);
    const pkg = entryPoints(readJson("package.json")["exports"]);
    expect(deno).toEqual(pkg);
  });

  it("every entry point in the export maps exists", () => {
    const files = Object.values(entryPoints(readJson("deno.json")["exports"]));
    expect(files.length).toBeGreaterThan(0);
    expect(files.filter((file) => !existsSync(new URL(file, root)))).toEqual([]);
  });

  it("mod.ts holds only a module doc comment and export-star lines", () => {
    expect(modExports(readText("mod.ts")).length).toBeGreaterThan(0);
  });

  it("mod.ts does not export internals: the structured-field parsers, scopeConfigOf, the fingerprint's inside, the job directory's file name", async () => {
    const mod = await import("../mod.ts") as Record<string, unknown>;
    for (
      const name of [
        "parseStructuredList",
        "parseStructuredDictionary",
        "scopeConfigOf",
        "canonicalizeParsed",
        "canonicalHostFast",
        "fingerprintParsed",
        "parseUrl",
        "requestMethod",
        "JOB_DIR_LOG",
      ]
    ) {
      expect(name in mod, name).toBe(false);
    }
    // What stays public around them.
    for (
      const name of ["parseRateLimit", "parseRateLimitPolicy", "canonicalUrl", "requestFingerprint"]
    ) {
      expect(typeof mod[name], name).toBe("function");
    }
  });

  it("mod.ts exports DownloadError, the base class users catch download failures by", async () => {
    const mod = await import("../mod.ts") as Record<string, unknown>;
    const base = mod["DownloadError"] as abstract new (...args: never[]) => unknown;
    expect(typeof base).toBe("function");
    for (
      const name of [
        "DownloadFailedError",
        "DownloadTimeoutError",
        "ResponseDataLossError",
        "ResponseTooLargeError",
        "DnsLookupError",
      ]
    ) {
      const cls = mod[name] as { prototype: unknown };
      expect(cls.prototype instanceof base, name).toBe(true);
    }
  });

  it("every file that mod.ts exports exists", () => {
    const missing = modExports(readText("mod.ts")).filter((file) =>
      !existsSync(new URL(file, root))
    );
    expect(missing).toEqual([]);
  });
});
