import { afterEach, describe, expect, it } from "vitest";
import { runScript, scriptSha } from "../lib/redis/_redis_script.ts";
import { connectRedis, onCleanup, runCleanups } from "./_helpers/redis.ts";

/** Hang limit of each test (real I/O; no timing is asserted). */
const HANG_MS = 60_000;

afterEach(runCleanups);

describe("runScript() against a real Redis", () => {
  it(
    "runScript() sends a script Redis does not have with EVAL, which caches it; then EVALSHA runs it",
    async () => {
      const client = await connectRedis();
      onCleanup(() => client.quit());
      // A script no other test sends: not cached yet (no SCRIPT FLUSH, which
      // would touch the tests running beside this one).
      const script = `-- ${crypto.randomUUID()}\nreturn {KEYS[1], ARGV[1], ARGV[2]}`;
      const sha = scriptSha(script);
      const exists = async () =>
        (await client.sendCommand(["SCRIPT", "EXISTS", sha]) as number[])[0];
      expect(await exists()).toBe(0);
      expect(await runScript(client, sha, script, ["k"], ["a", "b"])).toEqual(["k", "a", "b"]);
      expect(await exists()).toBe(1);
      expect(await runScript(client, sha, script, ["k2"], ["c", "d"])).toEqual(["k2", "c", "d"]);
    },
    HANG_MS,
  );

  it(
    "runScript() passes on an error that is not NOSCRIPT, without sending the script again",
    async () => {
      const sent: string[][] = [];
      const client = {
        sendCommand: (args: readonly string[]) => {
          sent.push([...args]);
          return Promise.reject(new Error("ERR wrong number of arguments"));
        },
      };
      await expect(runScript(client, "abc", "return 1", [], [])).rejects.toThrow(/wrong number/);
      expect(sent.map((a) => a[0])).toEqual(["EVALSHA"]);
    },
    HANG_MS,
  );
});
