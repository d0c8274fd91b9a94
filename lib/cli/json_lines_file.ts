/**
 * A JSON Lines file the command line writes (`--output`, `--events`):
 * opened at once, so an unwritable path fails before the crawl starts, and
 * buffered, with every line on disk by `close()`.
 *
 * @module
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { describeFsError } from "./input.ts";

const FLUSH_AT = 64 * 1024;

/** One JSON value per line, written to a file. */
export class JsonLinesFile {
  /** The path, as given. */
  readonly path: string;
  #fd: number | undefined;
  #buffer = "";

  /**
   * Create (or truncate) the file.
   *
   * @param path Where to write.
   * @param what What the file is, for the message (`"output"`, `"events"`).
   * @throws {Error} With a one-line message when the file cannot be created.
   */
  constructor(path: string, what: string) {
    this.path = path;
    try {
      this.#fd = openSync(path, "w");
    } catch (error) {
      throw new Error(`Cannot write ${what} '${path}': ${describeFsError(error)}`);
    }
  }

  /** Append one value as a line (`Infinity` and `NaN` become `null`, as JSON has them). */
  write(value: unknown): void {
    this.#buffer += `${JSON.stringify(value)}\n`;
    if (this.#buffer.length >= FLUSH_AT) this.flush();
  }

  /** Write what is buffered. */
  flush(): void {
    if (this.#fd === undefined || this.#buffer === "") return;
    const text = this.#buffer;
    this.#buffer = "";
    writeSync(this.#fd, text);
  }

  /** Flush and close. Safe to call twice. */
  close(): void {
    if (this.#fd === undefined) return;
    this.flush();
    closeSync(this.#fd);
    this.#fd = undefined;
  }
}
