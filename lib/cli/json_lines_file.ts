/**
 * A JSON Lines file the command line writes (`--output`, `--events`):
 * opened at once, so an unwritable path fails before the crawl starts, and
 * buffered, with every line on disk by `close()`. A write that fails (a full
 * disk) leaves whole lines only and closes the file.
 *
 * @module
 */
import { fsCalls, fsErrorText, writeAll } from "../_fs.ts";
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
   * Create (or truncate) the file.
   *
   * @param path Where to write.
   * @param what What the file is, for the message (`"output"`, `"events"`).
   * @throws {Error} With a one-line message when the file cannot be created.
   */
  constructor(path: string, what: string) {
    this.path = path;
    this.#what = what;
    try {
      this.#fd = fsCalls.openSync(path, "w");
    } catch (error) {
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
