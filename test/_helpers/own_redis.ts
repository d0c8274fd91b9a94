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

/** Resolves once Redis on `port` answers a PING (fails after 10 s). */
export async function waitForRedis(port: number): Promise<void> {
  await waitFor(async () => {
    const client = createClient({ socket: { port, host: "127.0.0.1", reconnectStrategy: false } });
    client.on("error", () => {});
    await client.connect();
    await client.ping();
    await client.close();
  }, { timeoutMs: 10_000, intervalMs: 50 });
}
