/**
 * Runs a child process to its end and collects what it printed: the tests
 * that start the command line, a worker or a packed install use it.
 *
 * @module
 */
import { spawn } from "node:child_process";

/** How a child process ended and what it printed. */
export interface ProcessRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Where and how to run it. */
export interface RunProcessOptions {
  readonly cwd?: string;
  /** The environment. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
  /** Killed with SIGKILL after this long (it then ends with that signal). @default none */
  readonly timeoutMs?: number;
}

/**
 * Run `command args` with no stdin; resolves when it has ended, rejects if
 * it could not be started.
 */
export function runProcess(
  command: string,
  args: readonly string[],
  options: RunProcessOptions = {},
): Promise<ProcessRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const kill = options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
    child.on("error", (error) => {
      if (kill !== undefined) clearTimeout(kill);
      reject(error);
    });
    child.on("close", (code, signal) => {
      if (kill !== undefined) clearTimeout(kill);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
