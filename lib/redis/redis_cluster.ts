/**
 * The shared request queue on a Redis Cluster: a node-redis cluster client
 * routes each command by its first key, which the queue's one-argument
 * `sendCommand(args)` does not give; `redisClusterSender` finds it. Every key
 * of a job sits under one hash tag (`{PREFIX}q:`), so a job lives on one
 * slot and its Lua scripts run on that slot's node (docs/REDIS.md).
 *
 * @module
 */
import type { RedisQueueClient } from "./redis_request_queue.ts";

/** The part of a node-redis cluster client (`createCluster`) the sender uses. */
export interface RedisClusterCommands {
  /** Sends one command to the node that serves `firstKey`'s slot (any node when undefined). */
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
  ): Promise<unknown>;
}

/**
 * The first key of a command: for `EVAL`/`EVALSHA`/`FCALL`, the first of its
 * keys (none when it has none); else the word after the command's name.
 *
 * @param args A command with its arguments.
 * @returns The key, or `undefined` for a command without one.
 * @example
 * ```ts
 * import { firstKeyOf } from "./redis_cluster.ts";
 * console.assert(firstKeyOf(["EVALSHA", "abc", "2", "{j:}q:seq", "{j:}q:req"]) === "{j:}q:seq");
 * console.assert(firstKeyOf(["HGETALL", "{j:}q:counts"]) === "{j:}q:counts");
 * console.assert(firstKeyOf(["EVAL", "return 1", "0"]) === undefined);
 * ```
 */
export function firstKeyOf(args: readonly string[]): string | undefined {
  const name = (args[0] ?? "").toUpperCase();
  if (
    name === "EVAL" || name === "EVALSHA" || name === "EVAL_RO" || name === "EVALSHA_RO" ||
    name === "FCALL" || name === "FCALL_RO"
  ) {
    return Number(args[2]) > 0 ? args[3] : undefined;
  }
  return args[1];
}

/**
 * A one-argument `sendCommand` over a cluster client, for
 * `RedisRequestQueue`, `readRedisQueueStatus` and the command line's shared
 * queue: each command goes to the node of its first key's slot.
 *
 * @param cluster A connected node-redis cluster client (`createCluster(...).connect()`).
 * @returns A client the shared queue accepts.
 * @example
 * ```ts
 * import { redisClusterSender } from "./redis_cluster.ts";
 * const sent: (string | undefined)[] = [];
 * const cluster = {
 *   sendCommand: (key: string | undefined, _ro: boolean | undefined, _args: string[]) => {
 *     sent.push(key);
 *     return Promise.resolve("OK");
 *   },
 * };
 * await redisClusterSender(cluster).sendCommand(["SET", "{j:}q:seq", "0", "NX"]);
 * console.assert(sent[0] === "{j:}q:seq");
 * ```
 */
export function redisClusterSender(cluster: RedisClusterCommands): RedisQueueClient {
  return { sendCommand: (args) => cluster.sendCommand(firstKeyOf(args), false, [...args]) };
}
