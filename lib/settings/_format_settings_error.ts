/**
 * Turn a zod error from the settings schema into one built-in error in Deno
 * std's message style: what failed, a colon, the current value.
 *
 * zod issues are read as data (`code`, `path`, bounds, expected types); their
 * English `message` is never parsed. `z.config()` is never touched: it is
 * global and belongs to the host application.
 *
 * @module
 */
import type { z } from "zod";
import { closestName } from "./_closest_name.ts";
import { MAX_TIMER_MS } from "../util/_timer.ts";
import type { SettingsRelation } from "./settings.ts";
// A cycle (settings.ts imports this file too) that is safe: the schema is only
// read when an error is being formatted, long after both modules have loaded.

type Issue = z.core.$ZodIssue;
type Path = readonly PropertyKey[];

/** Where a value of our settings came from, when it was written some other way. */
export interface SettingOrigin {
  /** The name to show, e.g. `DOWNLOAD_DELAY` or `THROTTLING_SCOPES["a.com"]["delay"]`. */
  readonly name: string;
  /** The value as the user wrote it. */
  readonly value: unknown;
  /** Our value is the user's times this (1000 for a duration given in seconds). @default 1 */
  readonly scale?: number;
}

/** Options of {@link formatSettingsError}. */
export interface FormatSettingsErrorOptions {
  /** The schema that produced the error, for the names valid at a path. */
  readonly schema: z.core.$ZodType;
  /**
   * Maps a path of our settings to the name and value the user wrote, so a
   * converted Scrapy setting is reported under its Scrapy name and unit.
   */
  readonly locate?: (path: Path) => SettingOrigin | undefined;
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/**
 * A path as a reader would write it: `backoff.maxDelayMs`,
 * `scopes["example.com"].concurrency`, `backoff.httpCodes[0]`. Scope names are
 * data, so they are always bracketed, even when they look like identifiers.
 */
export function formatPath(path: Path): string {
  let out = "";
  path.forEach((key, i) => {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "symbol") out += `[${String(key)}]`;
    else if (i === 0 && IDENTIFIER.test(key)) out += key;
    else if (IDENTIFIER.test(key) && !(i === 1 && path[0] === "scopes")) out += `.${key}`;
    else out += `[${JSON.stringify(key)}]`;
  });
  return out;
}

/** A value as it appears after "current value is": short, unambiguous, never throws. */
export function formatValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return truncate(JSON.stringify(value));
    case "number":
      return Object.is(value, -0) ? "-0" : String(value);
    case "bigint":
      return `${value}n`;
    case "function":
      return value.name ? `[Function ${value.name}]` : "[Function]";
    case "undefined":
    case "boolean":
    case "symbol":
      return String(value);
  }
  try {
    return truncate(JSON.stringify(value, (_key, v: unknown) => {
      if (typeof v === "function") return v.name ? `[Function ${v.name}]` : "[Function]";
      if (typeof v === "bigint") return `${v}n`;
      if (typeof v === "number" && !Number.isFinite(v)) return String(v);
      return v;
    }));
  } catch {
    return Object.prototype.toString.call(value);
  }
}

function truncate(text: string): string {
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

/** Read a value by path; `undefined` where the path leads nowhere. */
export function valueAt(root: unknown, path: Path): unknown {
  let node = root;
  for (const key of path) {
    if (node === null || (typeof node !== "object" && typeof node !== "function")) return undefined;
    // Own properties only: the value at "constructor" is what the user wrote, or nothing.
    if (!Object.hasOwn(node, key)) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

// zod's core definitions (`_zod.def`) are the documented way for a library to
// look inside a schema whether it was built with zod or zod/mini.
interface Def {
  readonly type: string;
  readonly shape?: Record<string, z.core.$ZodType>;
  readonly innerType?: z.core.$ZodType;
  readonly valueType?: z.core.$ZodType;
  readonly element?: z.core.$ZodType;
  readonly items?: readonly z.core.$ZodType[];
  readonly options?: readonly z.core.$ZodType[];
  readonly in?: z.core.$ZodType;
  readonly out?: z.core.$ZodType;
}

function defOf(schema: z.core.$ZodType): Def {
  return schema._zod.def as unknown as Def;
}

/** The schemas a value at this place may match (several for a union). */
function candidatesAt(schema: z.core.$ZodType, path: Path): z.core.$ZodType[] {
  let current: z.core.$ZodType[] = [schema];
  for (const key of path) {
    const next: z.core.$ZodType[] = [];
    for (const s of current.flatMap(expand)) {
      const def = defOf(s);
      if (def.type === "object" && typeof key === "string" && def.shape?.[key]) {
        next.push(def.shape[key]!);
      } else if (def.type === "record" && def.valueType) next.push(def.valueType);
      else if (def.type === "array" && def.element) next.push(def.element);
      else if (def.type === "tuple" && typeof key === "number" && def.items?.[key]) {
        next.push(def.items[key]!);
      }
    }
    current = next;
  }
  return current.flatMap(expand);
}

/** Look through wrappers (optional, nullable, default, pipe) and unions. */
function expand(schema: z.core.$ZodType): z.core.$ZodType[] {
  const def = defOf(schema);
  if (def.type === "union" && def.options) return def.options.flatMap(expand);
  if (def.innerType) return expand(def.innerType);
  // A pipe's shape is its output's (`scopes` checks its keys, then is a record).
  if (def.type === "pipe" && def.in) {
    return [...expand(def.in), ...(def.out ? expand(def.out) : [])];
  }
  return [schema];
}

/** The keys an object at this path may have. */
export function keysAt(schema: z.core.$ZodType, path: Path): string[] {
  const keys = new Set<string>();
  for (const s of candidatesAt(schema, path)) {
    const def = defOf(s);
    if (def.type === "object" && def.shape) { for (const k of Object.keys(def.shape)) keys.add(k); }
  }
  return [...keys];
}

const ARTICLE_TYPES: Record<string, string> = {
  int: "an integer",
  array: "an array",
  object: "an object",
  record: "an object",
  tuple: "a [low, high] pair",
  undefined: "undefined",
  null: "null",
  nan: "NaN",
};

function describeType(expected: string): string {
  return ARTICLE_TYPES[expected] ?? `a ${expected}`;
}

function orList(items: readonly string[]): string {
  const unique = [...new Set(items)];
  if (unique.length <= 1) return unique[0] ?? "";
  return `${unique.slice(0, -1).join(", ")} or ${unique[unique.length - 1]}`;
}

function formatBound(bound: number | bigint, scale: number): string {
  return typeof bound === "bigint" ? String(bound) : String(bound / scale);
}

/** A problem, ready to be put into words. */
interface Problem {
  readonly kind: "type" | "range" | "unknown";
  /** Our path to the offending value. */
  readonly path: Path;
  /** "must be >= 0", "must be a number", ... (unused for unknown keys). */
  readonly expected: string;
  /** The unknown keys, for `kind: "unknown"`. */
  readonly keys?: readonly string[];
  /** Show this instead of the value at `path` (a bad record key). */
  readonly shown?: { readonly value: unknown };
  /** Describe the key of the record at `path`, not a value. */
  readonly isKey?: boolean;
}

/**
 * Reduce one issue to a problem. Unions are followed into the branch that got
 * furthest (a branch of the right type that failed a bound), else their
 * branches' expected types are listed.
 */
function toProblem(
  issue: Issue,
  base: Path,
  input: unknown,
  locate: (p: Path) => SettingOrigin | undefined,
): Problem {
  const path = [...base, ...issue.path];
  const value = valueAt(input, path);
  const scale = locate(path)?.scale ?? 1;
  switch (issue.code) {
    case "unrecognized_keys":
      return { kind: "unknown", path, expected: "", keys: issue.keys };
    case "invalid_type": {
      if (typeof value === "number" && (issue.expected === "number" || issue.expected === "int")) {
        return {
          kind: "range",
          path,
          expected: Number.isFinite(value) ? "must be an integer" : "must be a finite number",
        };
      }
      return { kind: "type", path, expected: `must be ${describeType(issue.expected)}` };
    }
    case "too_small":
    case "too_big": {
      const small = issue.code === "too_small";
      const bound = small ? issue.minimum : issue.maximum;
      if (issue.origin === "string" || issue.origin === "array" || issue.origin === "set") {
        const unit = issue.origin === "string" ? "characters" : "items";
        const expected = small && bound === 1 && issue.origin === "string"
          ? "must not be empty"
          : `must have ${
            issue.exact ? "exactly" : small ? "at least" : "at most"
          } ${bound} ${unit}`;
        return { kind: "range", path, expected };
      }
      const op = small ? (issue.inclusive ? ">=" : ">") : (issue.inclusive ? "<=" : "<");
      const why = !small && bound === MAX_TIMER_MS
        ? " (the longest a timer can wait, about 24.8 days)"
        : "";
      return { kind: "range", path, expected: `must be ${op} ${formatBound(bound, scale)}${why}` };
    }
    case "not_multiple_of":
      return {
        kind: "range",
        path,
        expected: `must be a multiple of ${formatBound(issue.divisor, scale)}`,
      };
    case "invalid_format":
      return { kind: "range", path, expected: `must be a valid ${issue.format}` };
    case "invalid_value": {
      const sameType = issue.values.some((v) => typeof v === typeof value);
      return {
        kind: sameType ? "range" : "type",
        path,
        expected: `must be ${orList(issue.values.map((v) => formatValue(v)))}`,
      };
    }
    case "invalid_key": {
      const inner = issue.issues[0];
      const key = path[path.length - 1];
      const problem = inner ? toProblem(inner, [], key, () => undefined) : undefined;
      return {
        kind: problem?.kind === "type" ? "type" : "range",
        path,
        expected: problem?.expected ?? "must be a valid key",
        shown: { value: key },
        isKey: true,
      };
    }
    case "invalid_element":
      return { kind: "type", path, expected: "must be valid" };
    case "invalid_union": {
      const branches = issue.errors.filter((b) => b.length > 0);
      // A branch whose only complaint is the value's type at the top says
      // nothing about which branch was meant; any other branch does.
      const meant = branches.find((b) =>
        b.some((i) => i.path.length > 0 || (i.code !== "invalid_type" && i.code !== "custom"))
      );
      if (meant) return toProblem(meant[0]!, path, input, locate);
      const custom = branches.flat().find((i) => i.code === "custom");
      if (custom) return { kind: "type", path, expected: `is invalid (${custom.message})` };
      const expected = branches.flat().flatMap((i) =>
        i.code === "invalid_type" ? [describeType(i.expected)] : []
      );
      return { kind: "type", path, expected: `must be ${orList(expected)}` };
    }
    case "custom": {
      const relation = relationOf(issue);
      if (relation !== undefined) {
        const other = locate(relation.other);
        const name = other?.name ?? formatPath(relation.other);
        const shown = other !== undefined && other.value !== undefined
          ? formatValue(other.value)
          : formatValue(relation.otherValue / (other?.scale ?? 1));
        const note = relation.otherIsDefault ? ", its default" : "";
        return {
          kind: "range",
          path,
          expected: `must be ${relation.relation} '${name}' (${shown}${note})`,
        };
      }
      // Refinements of our schema check the contents of a value of the right
      // type ([low, high] order); custom types check the type itself.
      return {
        kind: Array.isArray(value) ? "range" : "type",
        path,
        expected: `is invalid (${issue.message})`,
      };
    }
  }
}

/** The relation between two settings a `custom` issue carries, if any. */
function relationOf(issue: Issue): SettingsRelation | undefined {
  if (issue.code !== "custom") return undefined;
  const params = issue.params as Partial<SettingsRelation> | undefined;
  return params !== undefined && Array.isArray(params.other) &&
      typeof params.otherValue === "number"
    ? params as SettingsRelation
    : undefined;
}

/**
 * Format a zod error from validating settings as a `TypeError` (wrong type or
 * shape, unknown setting) or a `RangeError` (out of range), naming the full
 * path of the setting, what was expected and the current value. The zod error
 * is kept as `cause`.
 *
 * @param error The zod error.
 * @param input What was validated (the values are read from it by path).
 * @param what What was being created, e.g. `"throttler"`.
 * @param options Schema and name mapping (for settings written Scrapy's way).
 * @returns The error to throw.
 * @example A value out of range
 * ```ts
 * import { settingsSchema } from "./settings.ts";
 * import { formatSettingsError } from "./_format_settings_error.ts";
 * const input = { backoff: { maxDelayMs: -5 } };
 * const result = settingsSchema.safeParse(input);
 * if (!result.success) {
 *   const error = formatSettingsError(result.error, input, "throttler", { schema: settingsSchema });
 *   // RangeError: Cannot create throttler as 'backoff.maxDelayMs' must be >= 0: current value is -5
 * }
 * ```
 */
export function formatSettingsError(
  error: z.ZodError,
  input: unknown,
  what: string,
  options: FormatSettingsErrorOptions,
): TypeError | RangeError {
  const schema = options.schema;
  const locate = options.locate ?? (() => undefined);
  const issues = error.issues as Issue[];
  // Unknown names first: a typo explains the other complaints more often than not.
  const first = issues.find((i) => i.code === "unrecognized_keys") ?? issues[0];
  if (first === undefined) {
    return new TypeError(`Cannot create ${what} as its settings are invalid`, { cause: error });
  }
  const problem = toProblem(first, [], input, locate);
  // A bad record key is described through the record that holds it.
  const namedPath = problem.isKey ? problem.path.slice(0, -1) : problem.path;
  const origin = locate(namedPath);
  const name = origin?.name ?? formatPath(namedPath);
  if (problem.kind === "unknown") {
    const valid = keysAt(schema, problem.path);
    const parts = (problem.keys ?? []).map((key) => {
      const keyOrigin = locate([...problem.path, key]);
      const shown = keyOrigin?.name ?? formatPath([...problem.path, key]);
      const suggestion = closestName(key, valid);
      if (suggestion !== undefined) {
        return `Unknown setting '${shown}' (did you mean '${suggestion}'?)`;
      }
      // A short list helps; the two dozen top-level names would only bury the message.
      return valid.length > 0 && valid.length <= 10
        ? `Unknown setting '${shown}' (valid here: ${valid.join(", ")})`
        : `Unknown setting '${shown}'`;
    });
    return new TypeError(parts.join("; "), { cause: error });
  }
  const value = problem.shown
    ? problem.shown.value
    : origin
    ? origin.value
    : valueAt(input, problem.path);
  const subject = problem.isKey
    ? `a key of '${name}'`
    : namedPath.length === 0 && origin === undefined
    ? "its settings"
    : `'${name}'`;
  const message = `Cannot create ${what} as ${subject} ${problem.expected}: current value is ${
    formatValue(value)
  }`;
  return problem.kind === "range"
    ? new RangeError(message, { cause: error })
    : new TypeError(message, { cause: error });
}
