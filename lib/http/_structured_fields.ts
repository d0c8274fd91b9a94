/**
 * Structured fields (RFC 9651), the parts a List or a Dictionary needs: the
 * parsers under `rate_limit_headers.ts`'s `RateLimit` and `RateLimit-Policy`
 * readers. Internal (not exported by mod.ts); the types are, through
 * `rate_limit_headers.ts`.
 *
 * @module
 */

/** A structured-field bare item (RFC 9651 §3.3). */
export type SfBareItem =
  | { readonly type: "integer"; readonly value: number }
  | { readonly type: "decimal"; readonly value: number }
  | { readonly type: "string"; readonly value: string }
  | { readonly type: "token"; readonly value: string }
  | { readonly type: "boolean"; readonly value: boolean }
  /** Base64 text, not decoded. */
  | { readonly type: "bytes"; readonly value: string }
  /** Epoch seconds. */
  | { readonly type: "date"; readonly value: number }
  | { readonly type: "displaystring"; readonly value: string };

/** Parameters in order; a repeated key keeps its first place and last value (RFC 9651 §4.2.3.2). */
export type SfParameters = ReadonlyMap<string, SfBareItem>;

/** An item with its parameters. */
export interface SfItem {
  readonly kind: "item";
  readonly value: SfBareItem;
  readonly params: SfParameters;
}

/** An inner list `(a b);p=1` with its parameters. */
export interface SfInnerList {
  readonly kind: "inner-list";
  readonly items: readonly SfItem[];
  readonly params: SfParameters;
}

/** A member of a structured-field List or Dictionary. */
export type SfMember = SfItem | SfInnerList;

/** Thrown inside the parser only, and always caught at its entry points. */
class SfSyntaxError {}

class SfCursor {
  i = 0;
  constructor(readonly s: string) {}
  peek(): string {
    return this.s[this.i] ?? "";
  }
  take(): string {
    return this.s[this.i++] ?? "";
  }
  done(): boolean {
    return this.i >= this.s.length;
  }
  skipSp(): void {
    while (this.peek() === " ") this.i++;
  }
  skipOws(): void {
    while (this.peek() === " " || this.peek() === "\t") this.i++;
  }
  fail(): never {
    throw new SfSyntaxError();
  }
}

const isDigit = (c: string) => c >= "0" && c <= "9";
const isAlpha = (c: string) => (c >= "a" && c <= "z") || (c >= "A" && c <= "Z");
const isLcAlpha = (c: string) => c >= "a" && c <= "z";
const TCHAR_EXTRA = "!#$%&'*+-.^_`|~";
const isTchar = (c: string) => c !== "" && (isDigit(c) || isAlpha(c) || TCHAR_EXTRA.includes(c));

function sfKey(c: SfCursor): string {
  const first = c.peek();
  if (!isLcAlpha(first) && first !== "*") c.fail();
  let key = "";
  for (;;) {
    const ch = c.peek();
    if (ch === "" || !(isLcAlpha(ch) || isDigit(ch) || "_-.*".includes(ch))) return key;
    key += c.take();
  }
}

function sfNumber(c: SfCursor): SfBareItem {
  let sign = 1;
  if (c.peek() === "-") {
    c.take();
    sign = -1;
  }
  if (!isDigit(c.peek())) c.fail();
  let text = "";
  let decimal = false;
  for (;;) {
    const ch = c.peek();
    if (isDigit(ch)) text += c.take();
    else if (!decimal && ch === ".") {
      if (text.length > 12) c.fail();
      text += c.take();
      decimal = true;
    } else break;
    if (!decimal && text.length > 15) c.fail();
    if (decimal && text.length > 16) c.fail();
  }
  if (!decimal) return { type: "integer", value: sign * Number(text) };
  if (text.endsWith(".") || text.length - text.indexOf(".") - 1 > 3) c.fail();
  return { type: "decimal", value: sign * Number(text) };
}

function sfString(c: SfCursor): string {
  c.take(); // the opening DQUOTE
  let out = "";
  for (;;) {
    if (c.done()) c.fail();
    const ch = c.take();
    if (ch === "\\") {
      const next = c.take();
      if (next !== '"' && next !== "\\") c.fail();
      out += next;
    } else if (ch === '"') return out;
    else if (ch < " " || ch > "~") c.fail();
    else out += ch;
  }
}

function sfDisplayString(c: SfCursor): string {
  c.take(); // %
  if (c.take() !== '"') c.fail();
  const bytes: number[] = [];
  for (;;) {
    if (c.done()) c.fail();
    const ch = c.take();
    if (ch < " " || ch > "~") c.fail();
    if (ch === "%") {
      const hex = c.take() + c.take();
      if (!/^[0-9a-f]{2}$/.test(hex)) c.fail();
      bytes.push(parseInt(hex, 16));
    } else if (ch === '"') {
      try {
        return new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
      } catch {
        c.fail();
      }
    } else bytes.push(ch.charCodeAt(0));
  }
}

function sfBareItem(c: SfCursor): SfBareItem {
  const ch = c.peek();
  if (ch === "-" || isDigit(ch)) return sfNumber(c);
  if (ch === '"') return { type: "string", value: sfString(c) };
  if (isAlpha(ch) || ch === "*") {
    let token = "";
    while (isTchar(c.peek()) || c.peek() === ":" || c.peek() === "/") token += c.take();
    return { type: "token", value: token };
  }
  if (ch === ":") {
    c.take();
    let b64 = "";
    while (/^[A-Za-z0-9+/=]$/.test(c.peek())) b64 += c.take();
    if (c.take() !== ":") c.fail();
    return { type: "bytes", value: b64 };
  }
  if (ch === "?") {
    c.take();
    const v = c.take();
    if (v !== "0" && v !== "1") c.fail();
    return { type: "boolean", value: v === "1" };
  }
  if (ch === "@") {
    c.take();
    const n = sfNumber(c);
    if (n.type !== "integer") c.fail();
    return { type: "date", value: n.value as number };
  }
  if (ch === "%") return { type: "displaystring", value: sfDisplayString(c) };
  return c.fail();
}

function sfParams(c: SfCursor): SfParameters {
  const params = new Map<string, SfBareItem>();
  while (c.peek() === ";") {
    c.take();
    c.skipSp();
    const key = sfKey(c);
    let value: SfBareItem = { type: "boolean", value: true };
    if (c.peek() === "=") {
      c.take();
      value = sfBareItem(c);
    }
    params.set(key, value);
  }
  return params;
}

function sfItem(c: SfCursor): SfItem {
  const value = sfBareItem(c);
  return { kind: "item", value, params: sfParams(c) };
}

function sfMember(c: SfCursor): SfMember {
  if (c.peek() !== "(") return sfItem(c);
  c.take();
  const items: SfItem[] = [];
  for (;;) {
    c.skipSp();
    if (c.peek() === ")") {
      c.take();
      return { kind: "inner-list", items, params: sfParams(c) };
    }
    items.push(sfItem(c));
    const next = c.peek();
    if (next !== " " && next !== ")") c.fail();
  }
}

/** After a member: end of input, or a comma and another member. */
function sfNextMember(c: SfCursor): boolean {
  c.skipOws();
  if (c.done()) return false;
  if (c.take() !== ",") c.fail();
  c.skipOws();
  if (c.done()) c.fail(); // trailing comma
  return true;
}

function sfParse<T>(value: string, body: (c: SfCursor) => T): T | undefined {
  const c = new SfCursor(value);
  try {
    c.skipSp();
    const result = body(c);
    c.skipSp();
    return c.done() ? result : undefined;
  } catch (e) {
    if (e instanceof SfSyntaxError) return undefined;
    throw e;
  }
}

/**
 * Parse a structured-field List (RFC 9651 §4.2.1): items and inner lists,
 * each with parameters. Any syntax error fails the whole field, as the RFC
 * requires.
 *
 * @param value The field value (repeated fields already joined with `", "`).
 * @returns The members (an empty value is an empty list), or `undefined`
 *   when the value is not a valid List.
 * @example A RateLimit field
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseStructuredList } from "./_structured_fields.ts";
 * const [first] = parseStructuredList('"default";r=50;t=30') ?? [];
 * assert(first?.kind === "item" && first.params.get("r")?.value === 50);
 * assert(parseStructuredList("r=") === undefined);
 * ```
 */
export function parseStructuredList(value: string): SfMember[] | undefined {
  return sfParse(value, (c) => {
    const members: SfMember[] = [];
    if (c.done()) return members;
    do members.push(sfMember(c)); while (sfNextMember(c));
    return members;
  });
}

/**
 * Parse a structured-field Dictionary (RFC 9651 §4.2.2): `key=member`, or a
 * bare `key` for `true`, each with parameters. A repeated key keeps its
 * first place and its last value.
 *
 * @param value The field value.
 * @returns The members by key, or `undefined` when the value is not a valid Dictionary.
 * @example An older RateLimit field
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseStructuredDictionary } from "./_structured_fields.ts";
 * const d = parseStructuredDictionary("limit=100, remaining=0, reset=30");
 * const reset = d?.get("reset");
 * assert(reset?.kind === "item" && reset.value.value === 30);
 * ```
 */
export function parseStructuredDictionary(value: string): Map<string, SfMember> | undefined {
  return sfParse(value, (c) => {
    const members = new Map<string, SfMember>();
    if (c.done()) return members;
    do {
      const key = sfKey(c);
      if (c.peek() === "=") {
        c.take();
        members.set(key, sfMember(c));
      } else {
        members.set(key, {
          kind: "item",
          value: { type: "boolean", value: true },
          params: sfParams(c),
        });
      }
    } while (sfNextMember(c));
    return members;
  });
}
