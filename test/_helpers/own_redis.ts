/**
 * A redis-server of a test's own, for the tests that stop and restart Redis
 * (the shared one on $REDIS_PORT stays up for every other test): a free port,
 * the server started with or without an AOF, and a wait until it answers.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import { type AddressInfo, createServer } from "node:net";
import { createClient } from "redis";
import { waitFor } from "./wait_for.ts";

/** A TCP port nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const port = (probe.address() as AddressInfo).port;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Starts redis-server on `port`. With `aofDir`, its data is kept there by an
 * AOF written at every command (a restart finds it); without, nothing is
 * saved (a restart comes back empty). `extra`: more arguments (a cluster
 * node's).
 */
export function startRedisServer(
  port: number,
  aofDir?: string,
  extra: readonly string[] = [],
): ChildProcess {
  const persistence = aofDir === undefined
    ? ["--appendonly", "no"]
    : ["--appendonly", "yes", "--appendfsync", "always", "--dir", aofDir];
  const child = spawn("redis-server", [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    ...persistence,
    ...extra,
  ], { stdio: "ignore" });
  child.on("error", () => {});
  return child;
}

/**
 * Resolves once Redis on `port` answers a PING (fails after 10 s). With
 * `server`, fails at once if that redis-server has exited (it could not
 * bind the port: something else took it since `freePort`).
 */
export async function waitForRedis(port: number, server?: ChildProcess): Promise<void> {
  await waitFor(async () => {
    if (server !== undefined && server.exitCode !== null) {
      throw new ServerExited(`redis-server on port ${port} exited (${server.exitCode})`);
    }
    const client = createClient({ socket: { port, host: "127.0.0.1", reconnectStrategy: false } });
    client.on("error", () => {});
    await client.connect();
    await client.ping();
    await client.close();
  }, { timeoutMs: 10_000, intervalMs: 50, stopOn: (e) => e instanceof ServerExited });
}

class ServerExited extends Error {}

/**
 * A redis-server of a test's own on a free port, once it answers: another
 * port is tried when the server cannot bind the one `freePort` gave (a
 * server of a test running beside it took it meanwhile, and a client then
 * talked to that server: "Socket closed unexpectedly" for 10 s). Arguments
 * as {@link startRedisServer}.
 */
export async function startOwnRedis(
  aofDir?: string,
  extra: readonly string[] = [],
): Promise<{ readonly port: number; readonly server: ChildProcess }> {
  for (let attempt = 1;; attempt++) {
    const port = await freePort();
    const server = startRedisServer(port, aofDir, extra);
    try {
      await waitForRedis(port, server);
      return { port, server };
    } catch (error) {
      server.kill("SIGKILL");
      if (!(error instanceof ServerExited) || attempt >= 5) throw error;
    }
  }
}
