// Every setting's default lives in three places: DEFAULTS (what the code
// uses), the `@default` of its field in the zod schema (what an editor shows)
// and docs/SETTINGS.md (what a reader sees). This test reads the last two and
// compares all three.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { DEFAULTS, normalizeJitter } from "../lib/settings/settings.ts";

const read = (path: string) => readFileSync(fileURLToPath(new URL(path, import.meta.url)), "utf8");

/** `key.path` → default text, from the table "Every setting" of docs/SETTINGS.md. */
function docDefaults(): Map<string, string> {
  const doc = read("../docs/SETTINGS.md");
  const table = doc.slice(doc.indexOf("## Every setting"), doc.indexOf("### Scope keys"));
  const out = new Map<string, string>();
  for (const line of table.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const key = /^`([a-zA-Z.]+)`/.exec(cells[1] ?? "")?.[1];
    if (key === undefined) continue;
    out.set(key, cells[3]!.replaceAll("`", ""));
  }
  return out;
}

/** `key.path` → `@default` text, from the zod schemas of lib/settings/settings.ts. */
function schemaDefaults(): Map<string, string> {
  const source = read("../lib/settings/settings.ts");
  const blocks: [string, string][] = [
    ["const backoffSchema = z.object({", "backoff."],
    ["const rampupSchema = z.object({", "rampup."],
    ["const retrySchema = z.object({", "retry."],
    ["const queueSchema = z.object({", "queue."],
    ["const downloadSchema = z.object({", "download."],
    ["const autothrottleSchema = z.object({", "autothrottle."],
    ["export const settingsSchema = z.object({", ""],
  ];
  const out = new Map<string, string>();
  for (const [start, prefix] of blocks) {
    const from = source.indexOf(start);
    expect(from, start).toBeGreaterThanOrEqual(0);
    const body = source.slice(from, source.indexOf("}).strict()", from));
    for (const m of body.matchAll(/@default (.+)\n\s*\*\/\n\s*([a-zA-Z]+):/g)) {
      out.set(prefix + m[2], m[1]!.trim());
    }
  }
  return out;
}

/** The value a default's text stands for ("60_000", "true (±50%)", "none", a JSON literal). */
function valueOf(text: string): unknown {
  const bare = text.replace(/\s*\(.*\)\s*$/, "").replaceAll("_", "").trim();
  if (bare === "none") return undefined;
  return JSON.parse(bare);
}

/** The value DEFAULTS has at `path`, in the form the texts use. */
function defaultAt(path: string): unknown {
  let v: unknown = DEFAULTS;
  for (const part of path.split(".")) v = (v as Record<string, unknown>)[part];
  return v;
}

/** A text's value in DEFAULTS' form (jitter as [lo, hi], a target as [lo, hi], errors by name). */
function asResolved(path: string, text: string): unknown {
  const value = valueOf(text);
  if (path === "jitter" || path === "backoff.jitter") {
    return normalizeJitter(value as number | boolean);
  }
  if (path === "rampup.backoffTarget" && typeof value === "number") return [value, value];
  return value;
}

function resolvedForm(path: string, value: unknown): unknown {
  if (path === "backoff.exceptions") {
    return (value as unknown[]).map((e) =>
      typeof e === "string" ? e : (e as { name: string }).name
    );
  }
  return value;
}

/** Every leaf of DEFAULTS that is a setting (not the per-scope record). */
function leaves(): string[] {
  const out: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (
      v !== null && typeof v === "object" && !Array.isArray(v) && path !== "scopes" &&
      Object.keys(v).length > 0
    ) {
      for (const [k, child] of Object.entries(v)) walk(child, path === "" ? k : `${path}.${k}`);
    } else out.push(path);
  };
  walk(DEFAULTS, "");
  return out;
}

describe("settings defaults", () => {
  it("DEFAULTS, the schema's @default and docs/SETTINGS.md agree on every setting", () => {
    const docs = docDefaults();
    const schema = schemaDefaults();
    const mismatches: string[] = [];
    for (const path of leaves()) {
      const actual = resolvedForm(path, defaultAt(path));
      for (const [where, texts] of [["docs/SETTINGS.md", docs], ["@default", schema]] as const) {
        const text = texts.get(path);
        if (text === undefined) {
          mismatches.push(`${path}: no default in ${where}`);
          continue;
        }
        let said: unknown;
        try {
          said = asResolved(path, text);
        } catch {
          mismatches.push(`${path}: ${where} says '${text}', not a value`);
          continue;
        }
        if (JSON.stringify(said) !== JSON.stringify(actual)) {
          mismatches.push(
            `${path}: ${where} says ${JSON.stringify(said)}, DEFAULTS has ${
              JSON.stringify(actual)
            }`,
          );
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it("the texts are read: a default changed in one place would show", () => {
    // The readers find every setting (a parse that found nothing would pass the test above
    // only through its 'no default' lines, which it reports).
    expect(docDefaults().size).toBeGreaterThanOrEqual(40);
    expect(schemaDefaults().size).toBeGreaterThanOrEqual(40);
    expect(asResolved("downloadDelayMs", "0")).toBe(DEFAULTS.downloadDelayMs);
    expect(asResolved("backoff.maxDelayMs", "300_000")).toBe(300_000);
    expect(asResolved("jitter", "true (±50%)")).toEqual([-0.5, 0.5]);
  });
});
