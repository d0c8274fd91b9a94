/**
 * The synchronous file calls through which the job directory and the command
 * line's output files write, gathered in one object so that a test can make
 * them fail like a full disk (ENOSPC part-way through a write) without
 * mounting a tiny file system. Nothing in the package changes them.
 *
 * @module
 */
import {
  closeSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";

/** The calls; a test swaps one and puts it back. */
export const fsCalls: {
  writeSync: (fd: number, buffer: Uint8Array, offset: number, length: number) => number;
  fsyncSync: (fd: number) => void;
  openSync: (path: string, flags: string) => number;
  closeSync: (fd: number) => void;
  renameSync: (from: string, to: string) => void;
  ftruncateSync: (fd: number, length: number) => void;
  fstatSize: (fd: number) => number;
  rmSync: (path: string) => void;
} = {
  writeSync: (fd, buffer, offset, length) => writeSync(fd, buffer, offset, length),
  fsyncSync,
  openSync: (path, flags) => openSync(path, flags),
  closeSync,
  renameSync,
  ftruncateSync: (fd, length) => ftruncateSync(fd, length),
  fstatSize: (fd) => fstatSync(fd).size,
  rmSync: (path) => rmSync(path, { force: true }),
};

/** Write all of `bytes` (a write may take only part); returns how many were written. */
export function writeAll(fd: number, bytes: Uint8Array): number {
  let off = 0;
  while (off < bytes.length) off += fsCalls.writeSync(fd, bytes, off, bytes.length - off);
  return off;
}

/** The first line of an error's message (Node's say the code: `ENOSPC: no space left on device, write`). */
export function fsErrorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n")[0] ?? text;
}
