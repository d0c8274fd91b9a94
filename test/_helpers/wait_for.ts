/**
 * `waitFor`: retry an assertion until it holds, for tests of real I/O (Redis,
 * child processes). Like vitest's `vi.waitFor`, which Bun's test runner does
 * not have. The time limit is a hang limit, not a timing assertion: keep it
 * generous.
 *
 * @module
 */

/**
 * Run `check` every `intervalMs` until it returns (or resolves) without
 * throwing; after `timeoutMs` throw its last error.
 *
 * @param check An assertion (throws while the condition does not hold).
 * @param options The hang limit (default 60 s), the pause between tries (default 10 ms), and
 *   which errors end the wait at once.
 * @returns What `check` returned the time it held.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  options: {
    readonly timeoutMs?: number;
    readonly intervalMs?: number;
    /** An error that no later try can mend: thrown at once. */
    readonly stopOn?: (error: unknown) => boolean;
  } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const intervalMs = options.intervalMs ?? 10;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() >= deadline || options.stopOn?.(error) === true) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
