/**
 * The crawl command's input: one URL per line, or one JSON object per line
 * (`{url, priority, meta}`), with Scrapy's meta names accepted. A line that
 * cannot be a request becomes an {@link InputLineError}, which the crawl
 * reports as a failed outcome for that line and goes on (docs/CLI.md).
 *
 * @module
 */
import { firstLine } from "./_first_line.ts";
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import process from "node:process";
import { createInterface } from "node:readline";
import type { RequestMeta, RequestObject } from "../request.ts";
import { own, setOwn } from "../settings/_own.ts";
import { hasCredentials, maskCredentials, withoutCredentials } from "../http/_url_credentials.ts";

/** A line of the input that is not a usable request. */
export class InputLineError extends Error {
  override readonly name = "InputLineError";
  /** 1-based line number in the input. */
  readonly line: number;
  /**
   * The line as read, with credentials masked (`user:password@` in URLs,
   * `Authorization`, `Proxy-Authorization` and `Cookie` header values): it is
   * written to `--output`.
   */
  readonly text: string;

  constructor(line: number, text: string, reason: string) {
    super(`line ${line}: ${reason}`);
    this.line = line;
    this.text = text;
  }
}

/** What one input line gives: a request, nothing (blank or comment), or an error. */
export type InputLine =
  | { readonly kind: "request"; readonly line: number; readonly request: RequestObject }
  | { readonly kind: "skip"; readonly line: number }
  | { readonly kind: "error"; readonly line: number; readonly error: InputLineError };

/** Scrapy's meta names and ours; `throttling_delay` is in seconds, `throttlingDelayMs` in ms. */
const META_NAMES: Readonly<
  Record<string, { readonly name: keyof RequestMeta; readonly scale?: number }>
> = {
  throttling_scopes: { name: "throttlingScopes" },
  throttlingScopes: { name: "throttlingScopes" },
  throttling_delay: { name: "throttlingDelayMs", scale: 1000 },
  throttlingDelayMs: { name: "throttlingDelayMs" },
  throttling_dont_track: { name: "throttlingDontTrack" },
  throttlingDontTrack: { name: "throttlingDontTrack" },
  dont_filter: { name: "dontFilter" },
  dontFilter: { name: "dontFilter" },
};

/**
 * Read one line of input.
 *
 * @param text The line (without its newline).
 * @param line Its 1-based number, for messages.
 * @returns A request, a skip (blank line, `#` comment), or an error naming the line.
 * @example
 * ```ts
 * import { parseInputLine } from "./input.ts";
 * const r = parseInputLine('{"url": "http://127.0.0.1:8080/", "meta": {"throttling_delay": 0.5}}', 1);
 * console.assert(r.kind === "request" && r.request.meta?.throttlingDelayMs === 500);
 * ```
 */
export function parseInputLine(text: string, line: number): InputLine {
  const trimmed = text.trim();
  if (trimmed === "" || trimmed.startsWith("#")) return { kind: "skip", line };
  // The parsed line, once there is one: its echo can then be redacted field by field.
  let value: unknown;
  const fail = (reason: string): InputLine => ({
    kind: "error",
    line,
    error: new InputLineError(line, echo(text, value), maskCredentials(reason)),
  });
  if (!trimmed.startsWith("{")) {
    if (/\s/.test(trimmed)) {
      return fail(`expected one URL or one JSON object: current value is '${short(trimmed)}'`);
    }
    return checkUrl(trimmed) ?? { kind: "request", line, request: { url: trimmed } };
  }
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    return fail(`malformed JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fail(`expected a JSON object: current value is ${short(trimmed)}`);
  }
  const o = value as Record<string, unknown>;
  if (typeof o.url !== "string") {
    return fail(`'url' must be a string: current value is ${short(JSON.stringify(o.url))}`);
  }
  const bad = checkUrl(o.url);
  if (bad !== undefined) return bad;
  const request: { -readonly [K in keyof RequestObject]: RequestObject[K] } = { url: o.url };
  if (o.priority !== undefined) {
    if (typeof o.priority !== "number" || !Number.isFinite(o.priority)) {
      return fail(
        `'priority' must be a finite number: current value is ${short(JSON.stringify(o.priority))}`,
      );
    }
    request.priority = o.priority;
  }
  for (const key of ["method", "body"] as const) {
    if (o[key] === undefined) continue;
    if (typeof o[key] !== "string") {
      return fail(`'${key}' must be a string: current value is ${short(JSON.stringify(o[key]))}`);
    }
    request[key] = o[key];
  }
  if (o.headers !== undefined) {
    if (typeof o.headers !== "object" || o.headers === null || Array.isArray(o.headers)) {
      return fail(`'headers' must be an object of strings`);
    }
    request.headers = o.headers as Record<string, string>;
  }
  if (o.meta !== undefined) {
    const meta = convertMeta(o.meta);
    if (typeof meta === "string") return fail(meta);
    request.meta = meta;
  }
  const unknown = Object.keys(o).filter((k) =>
    !["url", "priority", "meta", "method", "body", "headers"].includes(k)
  );
  if (unknown.length > 0) {
    return fail(
      `unknown field '${unknown[0]}': expected url, priority, meta, method, headers or body`,
    );
  }
  return { kind: "request", line, request };

  function checkUrl(url: string): InputLine | undefined {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return fail(`not a valid absolute URL: current value is '${short(url)}'`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      return fail(`only http and https URLs can be crawled: current value is '${short(url)}'`);
    }
    // Refused rather than sent: the URL is written to --output and --events,
    // and fetch refuses it anyway. Credentials belong in a header.
    if (hasCredentials(parsed)) {
      return fail(
        `a URL with credentials (user:password@) is not crawled, so that they are never written out: current value is '${
          short(withoutCredentials(parsed))
        }'; send them in "headers" ({"Authorization": "Basic ..."})`,
      );
    }
    return undefined;
  }
}

/**
 * Scrapy's meta names (and ours) as politely's `RequestMeta`; a string is the
 * reason it is not one. Any other key is kept as it is, as data: `__proto__`,
 * `constructor` and the like too (docs/DECISIONS.md).
 */
function convertMeta(meta: unknown): RequestMeta | string {
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) {
    return `'meta' must be an object: current value is ${short(JSON.stringify(meta))}`;
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(meta)) {
    const known = own(META_NAMES, key);
    if (known === undefined) {
      setOwn(out, key, value);
      continue;
    }
    if (known.name === "throttlingDelayMs") {
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
        return `'meta.${key}' must be a number >= 0: current value is ${
          short(JSON.stringify(value))
        }`;
      }
      out[known.name] = value * (known.scale ?? 1);
    } else if (known.name === "throttlingScopes") {
      const ok = typeof value === "string" ||
        (Array.isArray(value) && value.every((s) => typeof s === "string")) ||
        (typeof value === "object" && value !== null && !Array.isArray(value) &&
          Object.values(value).every((n) => typeof n === "number" && Number.isFinite(n)));
      if (!ok) {
        return `'meta.${key}' must be a string, an array of strings or {scope: amount}: current value is ${
          short(JSON.stringify(value))
        }`;
      }
      out[known.name] = value;
    } else {
      if (typeof value !== "boolean") {
        return `'meta.${key}' must be true or false: current value is ${
          short(JSON.stringify(value))
        }`;
      }
      out[known.name] = value;
    }
  }
  return out as RequestMeta;
}

/** Header names whose values are secrets: never echoed. */
const SECRET_HEADERS = new Set(["authorization", "proxy-authorization", "cookie"]);

/**
 * The line as it may be written out: a JSON object that held credentials
 * (in its URL or in a secret header) re-serialised without them; otherwise
 * the text with anything like URL credentials masked.
 */
function echo(text: string, value: unknown): string {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return maskCredentials(text);
  }
  const parsed = value as Record<string, unknown>;
  let redacted = false;
  const out: Record<string, unknown> = { ...parsed };
  if (typeof parsed.url === "string" && URL.canParse(parsed.url)) {
    const url = new URL(parsed.url);
    if (hasCredentials(url)) {
      out.url = withoutCredentials(url);
      redacted = true;
    }
  }
  const headers = parsed.headers;
  if (typeof headers === "object" && headers !== null && !Array.isArray(headers)) {
    const kept: Record<string, unknown> = {};
    for (const [name, header] of Object.entries(headers)) {
      const secret = SECRET_HEADERS.has(name.toLowerCase());
      if (secret) redacted = true;
      setOwn(kept, name, secret ? "***" : header);
    }
    out.headers = kept;
  }
  return redacted ? maskCredentials(JSON.stringify(out)) : maskCredentials(text);
}

function short(text: string | undefined): string {
  const t = text ?? "undefined";
  return t.length > 80 ? `${t.slice(0, 77)}...` : t;
}

/**
 * Open the input now, so an unreadable file fails before any request is sent.
 *
 * @param path A file, or `"-"` for stdin.
 * @returns The lines, read lazily.
 * @throws {Error} With a one-line message when the file cannot be opened or is a directory.
 */
export async function openInput(path: string): Promise<AsyncIterable<string>> {
  if (path === "-") return createInterface({ input: process.stdin, crlfDelay: Infinity });
  let handle;
  try {
    handle = await open(path, "r");
    const stat = await handle.stat();
    if (stat.isDirectory()) throw Object.assign(new Error("is a directory"), { code: "EISDIR" });
  } catch (error) {
    await handle?.close();
    throw new Error(`Cannot read input '${path}': ${describeFsError(error)}`);
  }
  await handle.close();
  return createInterface({ input: createReadStream(path), crlfDelay: Infinity });
}

/** A file system error in a few words ("no such file", "permission denied"). */
export function describeFsError(error: unknown): string {
  const code = (error as { code?: unknown })?.code;
  switch (code) {
    case "ENOENT":
      return "no such file or directory";
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "EISDIR":
      return "is a directory";
    case "ENOTDIR":
      return "a parent is not a directory";
    default:
      return firstLine(error);
  }
}
