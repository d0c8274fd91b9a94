/**
 * The Redis server the Redis tests (and examples/redis_shared.ts) talk to, for
 * `npm test`: the one answering on 127.0.0.1:$REDIS_PORT (6390 by default) if
 * there is one; else a `redis-server` of our own on that port for the run,
 * installed with apt-get first when it is missing and we are root (as CI is).
 * Without either, the run stops with a line that says what to do: the Redis
 * tests would fail anyway, and a skipped test is not an option.
 *
 * @module
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { connect } from "node:net";
import process from "node:process";
import { aptInstall } from "./apt.ts";

/** A Redis server for the run; `stop` ends it if this module started it. */
export interface TestRedis {
  readonly port: number;
  readonly startedHere: boolean;
  stop(): void;
}

/** Whether a Redis server answers PING on 127.0.0.1:`port`. */
export function redisAnswers(port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host: "127.0.0.1", port });
    let reply = "";
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.on("error", () => finish(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n")) finish(reply.startsWith("+PONG"));
    });
  });
}

function hasRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

/**
 * A Redis server on $REDIS_PORT (set in `process.env` for the steps run
 * after this), or an Error saying why there is none.
 */
export async function ensureRedis(): Promise<TestRedis> {
  const port = Number(process.env.REDIS_PORT ?? 6390);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(`REDIS_PORT must be a TCP port: current value is ${process.env.REDIS_PORT}`);
  }
  process.env.REDIS_PORT = String(port);
  if (await redisAnswers(port)) return { port, startedHere: false, stop: () => {} };
  if (!hasRedisServer() && !aptInstall("redis-server", hasRedisServer)) {
    throw new Error(
      `No Redis answers on 127.0.0.1:${port} and redis-server is not installed: ` +
        "install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) " +
        "or set REDIS_PORT to the port of a running Redis",
    );
  }
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: "ignore" },
  );
  let exited = false;
  child.on("exit", () => (exited = true));
  for (let i = 0; i < 100 && !exited; i++) {
    if (await redisAnswers(port, 200)) {
      console.log(`redis-server started on 127.0.0.1:${port} for the tests`);
      return { port, startedHere: true, stop: () => child.kill("SIGTERM") };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server did not start on 127.0.0.1:${port} (is the port taken?)`);
}
