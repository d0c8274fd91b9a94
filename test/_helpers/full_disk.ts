/**
 * A full disk without mounting one: swaps the write call of `lib/util/_fs.ts` so
 * that writes succeed for a budget of bytes, then one is cut short and every
 * later one fails with ENOSPC, as write(2) behaves when a file system fills.
 *
 * @module
 */
import { fsCalls } from "../../lib/util/_fs.ts";

/** An error like Node's for a full disk. */
export function enospc(): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error("ENOSPC: no space left on device, write");
  error.code = "ENOSPC";
  error.errno = -28;
  error.syscall = "write";
  return error;
}

/** The paths of the files opened through `fsCalls.openSync`, by descriptor. */
const opened = new Map<number, string>();
const realOpen = fsCalls.openSync;
fsCalls.openSync = (path, flags) => {
  const fd = realOpen(path, flags);
  opened.set(fd, path);
  return fd;
};

/**
 * Let `budget` more bytes be written (the write that crosses it is partial),
 * then fail every write with ENOSPC; with `only`, just to the files whose
 * path it accepts (a job directory on a full disk, the output elsewhere).
 * Returns the function that frees the disk.
 */
export function fillDiskAfter(budget: number, only?: (path: string) => boolean): () => void {
  const real = fsCalls.writeSync;
  let left = budget;
  fsCalls.writeSync = (fd, buffer, offset, length) => {
    if (only !== undefined && !only(opened.get(fd) ?? "")) return real(fd, buffer, offset, length);
    if (left <= 0) throw enospc();
    const n = Math.min(length, left);
    left -= n;
    return real(fd, buffer, offset, n);
  };
  return () => {
    fsCalls.writeSync = real;
  };
}
