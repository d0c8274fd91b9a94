/**
 * Running a Lua script in Redis by its SHA, one way for every store: the
 * shared scopes (`redis_scopes.ts`) and the shared request queue
 * (`_redis_queue_scripts.ts`).
 *
 * @module
 */
import { createHash } from "node:crypto";

/** The part of a Redis client a script needs (a connected node-redis client fits). */
export interface RedisCommandSender {
  /** Sends one command and resolves with its reply. */
  sendCommand(args: readonly string[]): Promise<unknown>;
}

/**
 * The SHA1 of a script's text, as `EVALSHA` names it.
 *
 * @param script The Lua text.
 * @returns 40 hex digits.
 * @example
 * ```ts
 * import { scriptSha } from "./_redis_script.ts";
 * console.assert(scriptSha("return 1") === "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
 * ```
 */
export function scriptSha(script: string): string {
  return createHash("sha1").update(script).digest("hex");
}

/**
 * Runs a script by its SHA; when Redis does not have it (first use,
 * `SCRIPT FLUSH`, a restarted Redis) sends its text with `EVAL`, which
 * caches it again.
 *
 * @param client The Redis client.
 * @param sha The script's SHA (`scriptSha`, or what `SCRIPT LOAD` answered).
 * @param script The script's text.
 * @param keys Its keys.
 * @param args Its arguments.
 * @returns The script's reply.
 */
export async function runScript(
  client: RedisCommandSender,
  sha: string,
  script: string,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  // Built once (a batch's arguments run to thousands): EVAL reuses it.
  const command = ["EVALSHA", sha, String(keys.length)].concat(keys, args);
  try {
    return await client.sendCommand(command);
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith("NOSCRIPT"))) throw error;
    command[0] = "EVAL";
    command[1] = script;
    return await client.sendCommand(command);
  }
}
