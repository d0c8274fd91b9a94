/**
 * WARC output (`--warc FILE`): each fetched exchange is appended as a WARC/1.1
 * `request` record and a `response` record, serialized by webrecorder's
 * warcio.js, so the file is what the standard web-archive tools (pywb,
 * warcio, ReplayWeb.page, CDX indexers) read. A name ending in `.gz` gives a
 * `.warc.gz` with each record its own gzip member, which indexers need to
 * point at single records and which lets a resumed crawl append.
 *
 * Beside warcio only `node:` modules are used (`fs/promises`, `zlib`,
 * `crypto`, `buffer`, `http` for reason phrases), which Node, Deno and Bun
 * all provide.
 *
 * Size: writing records and reading back a torn tail (to append after a kill)
 * share the record format; both are here.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { type FileHandle, open } from "node:fs/promises";
import { STATUS_CODES } from "node:http";
import { basename } from "node:path";
import { inflateRawSync } from "node:zlib";
import { WARC_1_1, WARCRecord, WARCSerializer } from "warcio";
import { fsErrorText } from "../util/_fs.ts";

/** One HTTP exchange to archive. */
export interface WarcExchange {
  /** The URL fetched last (after redirects): the records' `WARC-Target-URI`. */
  readonly url: string;
  /** The request method, such as `"GET"`. */
  readonly method: string;
  /** The request headers sent (a `Host` header is added when missing). */
  readonly requestHeaders: Readonly<Record<string, string>>;
  /** The response status, 100 to 999. */
  readonly status: number;
  /**
   * The reason phrase. @default the standard one for `status` (HTTP/2 has
   * none, so fetch gives `""`)
   */
  readonly statusText?: string;
  /**
   * The response headers. Values are taken as HTTP stacks hand them over (one
   * character per byte, as fetch's `Headers` and `node:http` do), so bytes
   * that were UTF-8 are archived as the same bytes.
   */
  readonly responseHeaders: Readonly<Record<string, string>> | Headers;
  /**
   * The response body as fetch gives it: with any content coding and chunking
   * already undone. The record therefore keeps `Content-Encoding`,
   * `Transfer-Encoding` and `Content-Length` as `X-Archive-Orig-*` headers
   * and says the body's own length, so a replay does not try to decode it
   * again. Not to be changed until `write` has resolved.
   */
  readonly body: Uint8Array;
  /** When the response was fetched: the records' `WARC-Date`. */
  readonly date: Date;
}

/** Options of {@link openWarcWriter}. */
export interface WarcWriterOptions {
  /**
   * Compress each record as its own gzip member (a `.warc.gz`).
   * @default true when `path` ends in `.gz`
   */
  readonly gzip?: boolean;
  /** The `software` field of the `warcinfo` record. @default "politely" */
  readonly software?: string;
  /**
   * `fsync` after every write, so a written exchange survives a power loss or
   * a kernel crash too. Without it a resolved `write` survives the crawler's
   * own crash (kill -9) only: its bytes are in the operating system's cache,
   * which is what a resumed crawl needs, and an `fsync` per exchange costs a
   * disk flush each time. `close` always `fsync`s once.
   * @default false
   */
  readonly durable?: boolean;
}

/** An open WARC file; get one from {@link openWarcWriter}. One writer per file. */
export interface WarcWriter {
  /**
   * Append the exchange's `request` and `response` records. Calls may overlap:
   * records go to the file in call order and never interleave.
   *
   * @param exchange The exchange.
   * @returns Resolves once the bytes were handed to the operating system
   *   (written, and also `fsync`ed with `durable`).
   * @throws {TypeError} (rejects) When a field has the wrong shape (a URL
   *   that does not parse, a header with a line break).
   * @throws {RangeError} (rejects) When `status` is not from 100 to 999.
   * @throws {WarcWriteError} (rejects) When the file could not be written,
   *   or the writer is closed. A part-written exchange is cut off again.
   */
  write(exchange: WarcExchange): Promise<void>;
  /**
   * Wait for the pending writes, `fsync` and close the file. Calling it
   * again returns the same promise.
   *
   * @throws {WarcWriteError} (rejects) When the file could not be flushed or closed.
   */
  close(): Promise<void>;
  /** The file's path. */
  readonly path: string;
  /** Whether records are gzip members. */
  readonly gzip: boolean;
  /**
   * Bytes of a torn last record (the crawl killed while writing it) that
   * opening cut off the end of the file; 0 when it ended with a whole record.
   */
  readonly truncatedBytes: number;
}

/** A WARC file could not be opened, written or closed. */
export class WarcWriteError extends Error {
  override readonly name = "WarcWriteError";
  /** The file. */
  readonly path: string;
  /** The system error code (`ENOSPC`, `EACCES`), when there is one. */
  readonly code: string | undefined;

  /**
   * @param path The file.
   * @param action What failed.
   * @param reason The error of the failed call, or why it was refused.
   */
  constructor(path: string, action: "open" | "write" | "close", reason: unknown) {
    super(
      `Cannot ${action} WARC file '${path}': ${
        reason instanceof Error ? fsErrorText(reason) : String(reason)
      }`,
      reason instanceof Error ? { cause: reason } : undefined,
    );
    this.path = path;
    const code = (reason as { code?: unknown } | null)?.code;
    this.code = typeof code === "string" ? code : undefined;
  }
}

/**
 * Open a WARC file for appending, creating it when missing. A new or empty
 * file gets a `warcinfo` record first; a file that already holds records is
 * appended to (a resumed crawl), never truncated, except for a torn last
 * record: when a crash cut the last write short, the bytes after the last
 * whole record are cut off (reported as `truncatedBytes`), because readers
 * stop or misread at a torn record and would miss everything appended after
 * it. A file that is not a WARC file, or is compressed differently from
 * `gzip`, is refused and left as it is; so is one whose torn end follows
 * damage elsewhere, where cutting would lose the whole records in between.
 *
 * Checking a file that ends with a whole record reads only its last record
 * (damage further back is not looked for; appending does not make it worse);
 * a torn one is read through once to find the last whole record.
 *
 * @param path The file (`.warc`, or `.warc.gz` for gzip).
 * @param options Compression, the warcinfo's software, durability.
 * @returns The writer.
 * @throws {TypeError} (rejects) When `software` is empty or has a line break.
 * @throws {WarcWriteError} (rejects) When the file cannot be opened or read
 *   (the message names the file and the cause), or is refused as above.
 *
 * @example Archive one exchange
 * ```ts
 * import { mkdtempSync } from "node:fs";
 * import { tmpdir } from "node:os";
 * import { join } from "node:path";
 * import { openWarcWriter } from "./warc_writer.ts";
 * const warc = await openWarcWriter(join(mkdtempSync(join(tmpdir(), "warc-")), "crawl.warc.gz"));
 * // A response as `fetch` gives it.
 * const response = new Response("<p>hello</p>", { headers: { "content-type": "text/html" } });
 * await warc.write({
 *   url: "https://example.com/",
 *   method: "GET",
 *   requestHeaders: { "User-Agent": "politely" },
 *   status: response.status,
 *   statusText: response.statusText,
 *   responseHeaders: response.headers,
 *   body: new Uint8Array(await response.arrayBuffer()),
 *   date: new Date(),
 * });
 * await warc.close();
 * ```
 */
export async function openWarcWriter(
  path: string,
  options: WarcWriterOptions = {},
): Promise<WarcWriter> {
  const gzip = options.gzip ?? path.toLowerCase().endsWith(".gz");
  const software = options.software ?? "politely";
  if (typeof software !== "string" || software === "" || /[\r\n]/.test(software)) {
    throw new TypeError(
      `Cannot open WARC file as 'software' must be a non-empty line of text: current value is ${
        JSON.stringify(software)
      }`,
    );
  }
  let handle: FileHandle;
  try {
    // "a+": writes always go to the end (O_APPEND); reading is for the check.
    handle = await open(path, "a+");
  } catch (error) {
    throw new WarcWriteError(path, "open", error);
  }
  let size = 0;
  let truncatedBytes = 0;
  try {
    size = (await handle.stat()).size;
    const whole = size === 0 ? 0 : await wholeRecordsLength(handle, size, gzip, path);
    if (whole < size) {
      await handle.truncate(whole);
      truncatedBytes = size - whole;
      size = whole;
    }
    if (size === 0) {
      const info = WARCRecord.createWARCInfo(
        { filename: basename(path), warcVersion: WARC_1_1, date: new Date().toISOString() },
        {
          software,
          format: "WARC File Format 1.1",
          conformsTo:
            "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        },
      );
      const bytes = await serializeRecords([info], gzip);
      try {
        await writeAll(handle, bytes);
        if (options.durable) await handle.datasync();
      } catch (error) {
        await handle.truncate(0).catch(() => {});
        throw error;
      }
      size = bytes.length;
    }
  } catch (error) {
    await handle.close().catch(() => {});
    throw error instanceof WarcWriteError ? error : new WarcWriteError(path, "open", error);
  }
  return new FileWarcWriter(path, gzip, handle, options.durable ?? false, size, truncatedBytes);
}

class FileWarcWriter implements WarcWriter {
  readonly path: string;
  readonly gzip: boolean;
  readonly truncatedBytes: number;
  readonly #handle: FileHandle;
  readonly #durable: boolean;
  /** Length of the file up to its last whole record. */
  #size: number;
  /** The last write in line; each write waits for the one before. */
  #queue: Promise<void> = Promise.resolve();
  #closing: Promise<void> | undefined;
  /** Set when a failed write's bytes could not be cut off: the file's end is torn. */
  #broken: WarcWriteError | undefined;

  constructor(
    path: string,
    gzip: boolean,
    handle: FileHandle,
    durable: boolean,
    size: number,
    truncatedBytes: number,
  ) {
    this.path = path;
    this.gzip = gzip;
    this.#handle = handle;
    this.#durable = durable;
    this.#size = size;
    this.truncatedBytes = truncatedBytes;
  }

  write(exchange: WarcExchange): Promise<void> {
    if (this.#closing !== undefined) {
      return Promise.reject(new WarcWriteError(this.path, "write", "the writer is closed"));
    }
    let bytes: Promise<Uint8Array>;
    try {
      // Serializing (digests, gzip) starts at once, overlapping the writes
      // queued before this one; only the append waits its turn.
      bytes = serializeRecords(exchangeRecords(exchange), this.gzip);
    } catch (error) {
      return Promise.reject(error);
    }
    // Awaited in turn below; without this a failure while earlier writes are
    // still queued would count as an unhandled rejection meanwhile.
    bytes.catch(() => {});
    const done = this.#queue.then(() => this.#append(bytes));
    this.#queue = done.catch(() => {});
    return done;
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#queue;
      try {
        await this.#handle.sync();
      } catch (error) {
        await this.#handle.close().catch(() => {});
        throw new WarcWriteError(this.path, "close", error);
      }
      try {
        await this.#handle.close();
      } catch (error) {
        throw new WarcWriteError(this.path, "close", error);
      }
    })();
    return this.#closing;
  }

  async #append(serialized: Promise<Uint8Array>): Promise<void> {
    if (this.#broken !== undefined) throw this.#broken;
    const bytes = await serialized;
    try {
      await writeAll(this.#handle, bytes);
      if (this.#durable) await this.#handle.datasync();
      this.#size += bytes.length;
    } catch (error) {
      const failure = new WarcWriteError(this.path, "write", error);
      // A part-written exchange would make readers stop there; cut it off so
      // that later writes (once the disk has room again) are readable.
      try {
        await this.#handle.truncate(this.#size);
      } catch {
        this.#broken = failure;
      }
      throw failure;
    }
  }
}

// ---------------------------------------------------------------------------
// Records

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

/** The request and response records of an exchange, validated. */
function exchangeRecords(x: WarcExchange): [WARCRecord, WARCRecord] {
  let target: URL;
  try {
    target = new URL(x.url);
  } catch (error) {
    throw new TypeError(
      `Cannot write WARC exchange as 'url' must be an absolute URL: current value is ${
        JSON.stringify(x.url)
      }`,
      { cause: error },
    );
  }
  if (typeof x.method !== "string" || !TOKEN.test(x.method)) {
    throw new TypeError(
      `Cannot write WARC exchange as 'method' must be an HTTP token: current value is ${
        JSON.stringify(x.method)
      }`,
    );
  }
  if (!Number.isInteger(x.status) || x.status < 100 || x.status > 999) {
    throw new RangeError(
      `Cannot write WARC exchange as 'status' must be an integer from 100 to 999: current value is ${x.status}`,
    );
  }
  if (!(x.date instanceof Date) || Number.isNaN(x.date.getTime())) {
    throw new TypeError(
      `Cannot write WARC exchange as 'date' must be a valid Date: current value is ${
        String(x.date)
      }`,
    );
  }
  if (!(x.body instanceof Uint8Array)) {
    throw new TypeError("Cannot write WARC exchange as 'body' must be a Uint8Array");
  }
  const statusText = x.statusText || STATUS_CODES[x.status] || "";
  checkLine("statusText", statusText);
  const date = x.date.toISOString();
  const requestHeaders = headerPairs(x.requestHeaders, "requestHeaders");
  if (!requestHeaders.some(([name]) => name.toLowerCase() === "host")) {
    requestHeaders.unshift(["Host", target.host]);
  }
  const response = WARCRecord.create({
    url: x.url,
    date,
    type: "response",
    warcVersion: WARC_1_1,
    statusline: `HTTP/1.1 ${x.status} ${statusText}`,
    httpHeaders: archivedResponseHeaders(
      headerPairs(x.responseHeaders, "responseHeaders"),
      x.body.length,
    ),
  }, [x.body]);
  const request = WARCRecord.create({
    url: x.url,
    date,
    type: "request",
    warcVersion: WARC_1_1,
    statusline: `${x.method} ${target.pathname}${target.search} HTTP/1.1`,
    httpHeaders: requestHeaders,
    warcHeaders: { "WARC-Concurrent-To": response.warcHeader("WARC-Record-ID") ?? "" },
  }, []);
  setDigests(request, new Uint8Array());
  setDigests(response, x.body);
  return [request, response];
}

/**
 * Sets the `WARC-Payload-Digest` and `WARC-Block-Digest` that warcio would
 * compute (`sha256:` and hex, over the body and over the HTTP header block
 * plus the body, the bytes its serializer writes); warcio keeps digests a
 * record already has. Its own hashing starts a new hash-wasm instance for
 * each digest, measured at 0.5 to 2.4 ms a record (most of a write's time,
 * and 2.4 ms under Bun) against 0.04 to 0.09 ms through `node:crypto`.
 */
function setDigests(record: WARCRecord, payload: Uint8Array): void {
  const head = record.httpHeaders === null
    ? new Uint8Array()
    : encoder.encode(`${record.httpHeaders.toString()}\r\n`);
  const sha256 = (...parts: Uint8Array[]) => {
    const hash = createHash("sha256");
    for (const part of parts) hash.update(part);
    return `sha256:${hash.digest("hex")}`;
  };
  record.warcHeaders.headers.set("WARC-Payload-Digest", sha256(payload));
  record.warcHeaders.headers.set("WARC-Block-Digest", sha256(head, payload));
}

/** Header pairs in order, duplicates kept, values turned from byte strings back into text. */
function headerPairs(
  headers: Readonly<Record<string, string>> | Headers,
  field: string,
): [string, string][] {
  // Any iterable of pairs (fetch's Headers or another implementation of it),
  // so a Headers object is never read as a record with no own properties.
  const entries: Iterable<[string, string]> = Symbol.iterator in headers
    ? headers as Headers
    : Object.entries(headers);
  const pairs: [string, string][] = [];
  for (const [name, value] of entries) {
    if (typeof name !== "string" || !TOKEN.test(name)) {
      throw new TypeError(
        `Cannot write WARC exchange as '${field}' has a header name that is not an HTTP token: current value is ${
          JSON.stringify(name)
        }`,
      );
    }
    if (typeof value !== "string") {
      throw new TypeError(
        `Cannot write WARC exchange as '${field}.${name}' must be a string: current value is ${
          String(value)
        }`,
      );
    }
    checkLine(`${field}.${name}`, value);
    pairs.push([name, byteStringToText(value)]);
  }
  return pairs;
}

/** A line break would end the header block early and corrupt the record. */
function checkLine(field: string, value: string): void {
  if (/[\r\n]/.test(value) || value.includes("\u0000")) {
    throw new TypeError(
      `Cannot write WARC exchange as '${field}' must not contain CR, LF or NUL: current value is ${
        JSON.stringify(value)
      }`,
    );
  }
}

/**
 * warcio writes header text as UTF-8, while HTTP stacks give each header byte
 * as one character (0-255). Bytes that form UTF-8 are turned back into the
 * text they encode, so they are archived unchanged; other bytes above 127
 * (Latin-1 values) cannot pass through warcio unchanged and are written as
 * the UTF-8 of those characters.
 */
function byteStringToText(value: string): string {
  let high = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c > 0xff) return value;
    if (c > 0x7f) high = true;
  }
  if (!high) return value;
  try {
    return utf8.decode(Uint8Array.from(value, (ch) => ch.charCodeAt(0)));
  } catch {
    return value;
  }
}

/**
 * The body is stored decoded, so the headers that describe its coding on the
 * wire are kept under pywb's `X-Archive-Orig-` prefix (what replay tools show
 * as the original headers) and the length of the stored body is given.
 */
function archivedResponseHeaders(
  pairs: readonly [string, string][],
  bodyLength: number,
): [string, string][] {
  const decoded = pairs.some(([name, value]) => {
    const lower = name.toLowerCase();
    return lower === "transfer-encoding" ||
      (lower === "content-encoding" && value.trim().toLowerCase() !== "identity");
  });
  if (!decoded) return [...pairs];
  const out: [string, string][] = pairs.map(([name, value]) => {
    const lower = name.toLowerCase();
    return lower === "content-encoding" || lower === "transfer-encoding" ||
        lower === "content-length"
      ? [`X-Archive-Orig-${name}`, value]
      : [name, value];
  });
  out.push(["Content-Length", String(bodyLength)]);
  return out;
}

/** The records as bytes; with gzip each record is one gzip member. */
async function serializeRecords(
  records: readonly WARCRecord[],
  gzip: boolean,
): Promise<Uint8Array> {
  const parts = await Promise.all(records.map((r) => WARCSerializer.serialize(r, { gzip })));
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
    if (bytesWritten <= 0) throw new Error("write(2) wrote nothing");
    offset += bytesWritten;
  }
}

// ---------------------------------------------------------------------------
// Finding the last whole record of an existing file
//
// A unit is what the file is a sequence of: a record in a .warc, a gzip
// member (holding whole records) in a .warc.gz. Appends only ever add units
// at the end, so a crash can only leave the last unit torn: a prefix of it.

/** Bytes read at a time; a longer unit widens the read until it fits. */
const WINDOW = 1 << 20;
/** Longest WARC header block accepted. */
const MAX_HEAD = 1 << 16;
const CRLFCRLF = Buffer.from("\r\n\r\n", "latin1");
const GZIP_MAGIC = Buffer.from([0x1f, 0x8b, 0x08]);
const WARC_MAGIC = Buffer.from("WARC/1.", "latin1");

type Unit =
  /** A complete unit ending at `end`; `warc` when it holds whole WARC records. */
  | { readonly kind: "whole"; readonly end: number; readonly warc: boolean }
  /** Not complete within the bytes given: more bytes may complete it. */
  | { readonly kind: "short" }
  /** Not a unit, whatever follows. */
  | { readonly kind: "bad" };

const SHORT: Unit = { kind: "short" };
const BAD: Unit = { kind: "bad" };

/**
 * The length of the file up to its last whole record, or a refusal.
 *
 * First the cheap check: the last unit found searching back from the end
 * ends at the end. Otherwise the file is read forward unit by unit (the only
 * way to find unit boundaries for certain: a body may hold text or gzip data
 * that looks like a unit) up to the first one that is not whole; what follows
 * it is cut off only when no whole unit starts there, as is so for a torn
 * append and not for damage in the middle.
 */
async function wholeRecordsLength(
  handle: FileHandle,
  size: number,
  gzip: boolean,
  path: string,
): Promise<number> {
  checkFormat(await readRange(handle, 0, Math.min(size, 16)), gzip, path);
  const last = await lastWholeUnit(handle, size, gzip);
  if (last !== undefined && last.end === size && last.warc) return size;
  const whole = await wholeUnitsLength(handle, size, gzip);
  if (last !== undefined && last.start >= whole) {
    throw new WarcWriteError(
      path,
      "open",
      whole === 0
        ? "it does not start with a WARC record"
        : `it is damaged at byte ${whole} and has whole records after that, so it is not a torn last record to cut off; not appending to it`,
    );
  }
  return whole;
}

/** Refuse a file that starts like neither kind of WARC file, or like the other kind. */
function checkFormat(head: Uint8Array, gzip: boolean, path: string): void {
  const isPrefix = (magic: Uint8Array) => head.every((b, i) => i >= magic.length || b === magic[i]);
  if (isPrefix(gzip ? GZIP_MAGIC : WARC_MAGIC)) return;
  const reason = isPrefix(gzip ? WARC_MAGIC : GZIP_MAGIC)
    ? gzip
      ? "it holds uncompressed WARC records and gzip is true (a name ending in .gz); pass gzip: false"
      : "it holds gzip-compressed WARC records and gzip is false; pass gzip: true or name it .gz"
    : "it is not a WARC file";
  throw new WarcWriteError(path, "open", reason);
}

/** The whole unit that starts last, searching back from the end. */
async function lastWholeUnit(
  handle: FileHandle,
  size: number,
  gzip: boolean,
): Promise<{ start: number; end: number; warc: boolean } | undefined> {
  const marker = gzip ? GZIP_MAGIC : WARC_MAGIC;
  let width = Math.min(size, WINDOW);
  let before = size; // candidates starting before this offset are left to try
  for (;;) {
    const start = size - width;
    const view = await readRange(handle, start, size);
    let from = before - start - 1;
    while (from >= 0) {
      const i = view.lastIndexOf(marker, from);
      if (i < 0) break;
      from = i - 1;
      // A record starts the file or follows the CRLFCRLF ending the one before.
      if (!gzip && start + i > 0 && (i < 4 || !hasAt(view, i - 4, CRLFCRLF))) continue;
      const unit = gzip ? memberAt(view, i) : recordAt(view, i);
      if (unit.kind === "whole") {
        return { start: start + i, end: start + unit.end, warc: unit.warc };
      }
    }
    if (start === 0) return undefined;
    // A record start in the first 4 bytes could not be told apart: try it again.
    before = gzip ? start : start + 4;
    width = Math.min(size, width * 2);
  }
}

/** The length of the leading run of whole units. */
async function wholeUnitsLength(handle: FileHandle, size: number, gzip: boolean): Promise<number> {
  let pos = 0;
  let viewStart = 0;
  let view = await readRange(handle, 0, Math.min(size, WINDOW));
  while (pos < size) {
    const unit = gzip ? memberAt(view, pos - viewStart) : recordAt(view, pos - viewStart);
    if (unit.kind === "whole" && unit.warc) {
      pos = viewStart + unit.end;
      continue;
    }
    const viewEnd = viewStart + view.length;
    if (unit.kind !== "short" || viewEnd >= size) return pos;
    const width = Math.max(WINDOW, 2 * (viewEnd - pos));
    viewStart = pos;
    view = await readRange(handle, pos, Math.min(size, pos + width));
  }
  return size;
}

/** The WARC record at `at`: its header block, `Content-Length` bytes and CRLFCRLF. */
function recordAt(bytes: Uint8Array, at: number): Unit {
  const block = Buffer.from(
    bytes.buffer,
    bytes.byteOffset + at,
    Math.min(bytes.length - at, MAX_HEAD),
  );
  const version = block.toString("latin1", 0, 10);
  if (!"WARC/1.0\r\n".startsWith(version) && !"WARC/1.1\r\n".startsWith(version)) return BAD;
  const stop = block.indexOf(CRLFCRLF);
  if (stop < 0) return at + block.length === bytes.length ? SHORT : BAD;
  const length = /\r\nContent-Length:[ \t]*(\d{1,15})[ \t]*\r\n/i.exec(
    block.toString("latin1", 0, stop + 2),
  );
  if (length === null) return BAD;
  const end = at + stop + 4 + Number(length[1]) + 4;
  if (end > bytes.length) return SHORT;
  return hasAt(bytes, end - 4, CRLFCRLF) ? { kind: "whole", end, warc: true } : BAD;
}

/** The gzip member at `at`, inflated to see that it is complete and holds whole records. */
function memberAt(bytes: Uint8Array, at: number): Unit {
  const available = bytes.length - at;
  for (let i = 0; i < GZIP_MAGIC.length; i++) {
    if (i >= available) return SHORT;
    if (bytes[at + i] !== GZIP_MAGIC[i]) return BAD;
  }
  if (available < 10) return SHORT;
  const flags = bytes[at + 3]!;
  if (flags & 0xe0) return BAD;
  let p = at + 10;
  if (flags & 0x04) { // FEXTRA
    if (p + 2 > bytes.length) return SHORT;
    p += 2 + (bytes[p]! | (bytes[p + 1]! << 8));
  }
  for (const flag of [0x08, 0x10]) { // FNAME, FCOMMENT: zero-terminated
    if (flags & flag) {
      const zero = bytes.indexOf(0, p);
      if (zero < 0) return SHORT;
      p = zero + 1;
    }
  }
  if (flags & 0x02) p += 2; // FHCRC
  if (p >= bytes.length) return SHORT;
  let content: Uint8Array;
  let used: number;
  try {
    // `info` gives the compressed bytes used; inflating stops at the end of
    // the deflate stream, so later members in `bytes` are left alone.
    const result = inflateRawSync(bytes.subarray(p), { info: true }) as unknown as {
      buffer: Uint8Array;
      engine: { bytesWritten: number };
    };
    content = result.buffer;
    used = result.engine.bytesWritten;
  } catch {
    // Deno and Bun report a truncated and a corrupt stream alike, so both
    // are "short": the caller tries more bytes, up to the end of the file.
    return SHORT;
  }
  const end = p + used + 8; // CRC32 and ISIZE follow
  if (end > bytes.length) return SHORT;
  const isize = (bytes[end - 4]! | (bytes[end - 3]! << 8) | (bytes[end - 2]! << 16) |
    (bytes[end - 1]! << 24)) >>> 0;
  if (isize !== content.length % 2 ** 32) return BAD;
  return { kind: "whole", end, warc: holdsWholeRecords(content) };
}

function holdsWholeRecords(content: Uint8Array): boolean {
  let at = 0;
  while (at < content.length) {
    const unit = recordAt(content, at);
    if (unit.kind !== "whole") return false;
    at = unit.end;
  }
  return content.length > 0;
}

function hasAt(bytes: Uint8Array, at: number, pattern: Uint8Array): boolean {
  if (at < 0 || at + pattern.length > bytes.length) return false;
  for (let i = 0; i < pattern.length; i++) if (bytes[at + i] !== pattern[i]) return false;
  return true;
}

async function readRange(handle: FileHandle, start: number, end: number): Promise<Buffer> {
  const out = Buffer.alloc(end - start);
  let filled = 0;
  while (filled < out.length) {
    const { bytesRead } = await handle.read(out, filled, out.length - filled, start + filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled === out.length ? out : out.subarray(0, filled);
}
