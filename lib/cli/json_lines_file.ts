/**
 * A JSON Lines file the command line writes (`--output`, `--events`):
 * opened at once, so an unwritable path fails before the crawl starts, and
 * buffered, with every line on disk by `close()`. A write that fails (a full
 * disk) leaves whole lines only and closes the file.
 *
 * @module
 */
import { readSync } from "node:fs";
import { fsCalls, fsErrorText, writeAll } from "../util/_fs.ts";
import { describeFsError } from "./input.ts";

const FLUSH_AT = 64 * 1024;

/** A line of a {@link JsonLinesFile} could not be written; the file is closed, its lines whole. */
export class JsonLinesWriteError extends Error {
  override readonly name = "JsonLinesWriteError";
  /** The file, as given. */
  readonly path: string;
  /** What the file is (`"output"`, `"events"`). */
  readonly what: string;
  /** The system error code (`ENOSPC`, `EIO`), when there is one. */
  readonly code: string | undefined;

  /**
   * @param path The file.
   * @param what What it is.
   * @param cause The error of the failed write.
   */
  constructor(path: string, what: string, cause: unknown) {
    super(`Cannot write ${what} '${path}': ${fsErrorText(cause)}`, { cause });
    this.path = path;
    this.what = what;
    const code = (cause as { code?: unknown } | null)?.code;
    this.code = typeof code === "string" ? code : undefined;
  }
}

/** One JSON value per line, written to a file. */
export class JsonLinesFile {
  /** The path, as given. */
  readonly path: string;
  readonly #what: string;
  #fd: number | undefined;
  #buffer = "";
  /** Bytes of whole lines on file: a failed write is cut back to it. */
  #size = 0;
  #failed: JsonLinesWriteError | undefined;

  /**
   * Open the file.
   *
   * @param path Where to write.
   * @param what What the file is, for the message (`"output"`, `"events"`).
   * @param mode `"truncate"` (the default): created or emptied. `"append"`
   *   (a resumed crawl): created or added to; a torn last line (a kill in the
   *   middle of a write) is cut off first, so the file holds whole lines.
   * @throws {Error} With a one-line message when the file cannot be opened.
   */
  constructor(path: string, what: string, mode: "truncate" | "append" = "truncate") {
    this.path = path;
    this.#what = what;
    try {
      if (mode === "truncate") {
        this.#fd = fsCalls.openSync(path, "w");
        return;
      }
      const fd = fsCalls.openSync(path, "a+");
      this.#fd = fd;
      const size = fsCalls.fstatSize(fd);
      const whole = wholeLinesSize(fd, size);
      if (whole < size) fsCalls.ftruncateSync(fd, whole);
      this.#size = whole;
    } catch (error) {
      if (this.#fd !== undefined) fsCalls.closeSync(this.#fd);
      this.#fd = undefined;
      throw new Error(`Cannot write ${what} '${path}': ${describeFsError(error)}`);
    }
  }

  /** The write error that closed the file, if one did. */
  get failed(): JsonLinesWriteError | undefined {
    return this.#failed;
  }

  /**
   * Append one value as a line (`Infinity` and `NaN` become `null`, as JSON
   * has them). Ignored once a write has failed.
   *
   * @throws {JsonLinesWriteError} When the buffer is written out and that fails.
   */
  write(value: unknown): void {
    if (this.#fd === undefined) return;
    this.#buffer += `${JSON.stringify(value)}\n`;
    if (this.#buffer.length >= FLUSH_AT) this.flush();
  }

  /**
   * Write what is buffered.
   *
   * @throws {JsonLinesWriteError} When that fails: the part written is cut
   * off again (where the file can be truncated) and the file is closed.
   */
  flush(): void {
    const fd = this.#fd;
    if (fd === undefined || this.#buffer === "") return;
    const bytes = Buffer.from(this.#buffer, "utf8");
    this.#buffer = "";
    try {
      writeAll(fd, bytes);
    } catch (error) {
      try {
        fsCalls.ftruncateSync(fd, this.#size);
      } catch {
        // Not a regular file (a pipe, /dev/full): nothing to cut back.
      }
      this.#fd = undefined;
      try {
        fsCalls.closeSync(fd);
      } catch {
        // Closed is what is wanted; a second failure says nothing new.
      }
      throw (this.#failed = new JsonLinesWriteError(this.path, this.#what, error));
    }
    this.#size += bytes.length;
  }

  /**
   * Flush and close. Safe to call twice, and after a failed write.
   *
   * @throws {JsonLinesWriteError} When the last flush fails (the file is closed all the same).
   */
  close(): void {
    const fd = this.#fd;
    if (fd === undefined) return;
    this.flush();
    this.#fd = undefined;
    fsCalls.closeSync(fd);
  }
}

/** The size of the file's whole lines: up to and including its last newline. */
function wholeLinesSize(fd: number, size: number): number {
  const chunk = new Uint8Array(64 * 1024);
  let end = size;
  while (end > 0) {
    const start = Math.max(0, end - chunk.length);
    const n = readSync(fd, chunk, 0, end - start, start);
    for (let i = n - 1; i >= 0; i--) if (chunk[i] === 0x0a) return start + i + 1;
    end = start;
  }
  return 0;
}

/**
 * How often each URL appears in the last lines of a JSON Lines output
 * (`{"url": ...}` records): on a resume, a request whose line reached the
 * file just before a kill, but whose completion did not reach the job
 * directory, is fetched again; its line is not written twice. Only the tail
 * is read (`maxBytes`): such lines are the last ones written.
 *
 * @param path The output file (missing: empty map).
 * @param maxBytes How much of the end to read. @default 4 MiB
 * @returns URL → count.
 */
export function recentOutputUrls(path: string, maxBytes = 4 * 1024 * 1024): Map<string, number> {
  const urls = new Map<string, number>();
  let fd: number;
  try {
    fd = fsCalls.openSync(path, "r");
  } catch {
    return urls;
  }
  try {
    const size = fsCalls.fstatSize(fd);
    // One byte before the tail too: it says whether the tail starts a line.
    const start = Math.max(0, size - maxBytes - 1);
    const bytes = new Uint8Array(size - start);
    let off = 0;
    while (off < bytes.length) {
      const n = readSync(fd, bytes, off, bytes.length - off, start + off);
      if (n === 0) break;
      off += n;
    }
    const lines = new TextDecoder().decode(bytes.subarray(0, off)).split("\n");
    // Mid-file, the first piece is whole only after a newline (then it is
    // the empty piece before it): drop it either way.
    if (start > 0) lines.shift();
    for (const line of lines) {
      if (line === "") continue;
      try {
        const url = (JSON.parse(line) as { url?: unknown }).url;
        if (typeof url === "string") urls.set(url, (urls.get(url) ?? 0) + 1);
      } catch {
        // A torn or foreign line: not a record.
      }
    }
  } finally {
    fsCalls.closeSync(fd);
  }
  return urls;
}
