/**
 * Runs the `politely` command line as a child process for the CLI tests.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT: string = fileURLToPath(new URL("../..", import.meta.url));
export const MAIN: string = join(ROOT, "lib/cli/main.ts");

/** How a run ended. */
export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run `politely` as a child process (Node with tsx), optionally interrupting it. */
export function politely(
  args: readonly string[],
  options: {
    stdin?: string;
    interruptWhen?: () => boolean;
    /** The signal `interruptWhen` sends. @default "SIGINT" */
    signal?: NodeJS.Signals;
    /** Close the reading end of the child's stdout after this many lines, like `| head -n`. */
    closeStdoutAfterLines?: number;
  } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    // The child runs on the runtime running the tests: `deno run` under Deno
    // (Deno does not take Node's `--import`), Node with tsx elsewhere.
    const runtime = "Deno" in globalThis ? ["run", "-A", MAIN] : ["--import", "tsx", MAIN];
    const child = spawn(process.execPath, [...runtime, ...args], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
      const keep = options.closeStdoutAfterLines;
      if (keep !== undefined && stdout.split("\n").length > keep) {
        stdout = stdout.split("\n").slice(0, keep).join("\n");
        child.stdout.destroy();
      }
    });
    child.stderr.on("data", (d) => (stderr += d));
    child.stdin.end(options.stdin ?? "");
    let poll: ReturnType<typeof setInterval> | undefined;
    if (options.interruptWhen !== undefined) {
      const when = options.interruptWhen;
      poll = setInterval(() => {
        if (when()) {
          clearInterval(poll);
          child.kill(options.signal ?? "SIGINT");
        }
      }, 20);
    }
    child.on("error", reject);
    child.on("close", (code) => {
      if (poll !== undefined) clearInterval(poll);
      resolve({ code, stdout, stderr });
    });
  });
}

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "politely-cli-"));
}

export function readLines(path: string): Record<string, unknown>[] {
  return readFileSync(path, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
}

/** A `politely demo --web 0` running as a child process (see {@link startDemoWeb}). */
export interface DemoWeb {
  /** The dashboard's address, as the demo printed it. */
  readonly url: string;
  /** What the demo wrote to stdout so far. */
  stdout(): string;
  /** Stop it with SIGINT (Ctrl-C) and resolve with its exit code (null when ended by the signal). */
  stop(): Promise<number | null>;
}

/**
 * Start `politely demo --plain --duration SECONDS --web 0` on the runtime
 * running the tests and resolve once it printed the dashboard's address.
 */
export function startDemoWeb(durationSec: number): Promise<DemoWeb> {
  const runtime = "Deno" in globalThis ? ["run", "-A", MAIN] : ["--import", "tsx", MAIN];
  const child = spawn(
    process.execPath,
    [...runtime, "demo", "--plain", "--duration", String(durationSec), "--web", "0"],
    { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  return new Promise((resolve, reject) => {
    child.stderr.on("data", (d) => {
      stderr += d;
      const m = /politely: dashboard at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(stderr);
      if (m !== null) {
        resolve({
          url: m[1]!,
          stdout: () => stdout,
          stop: () => {
            child.kill("SIGINT");
            return exited;
          },
        });
      }
    });
    child.on("exit", () => reject(new Error(`demo ended first: ${stderr}`)));
  });
}
