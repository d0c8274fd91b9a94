/**
 * Deno-native smoke test (no vitest shim): mod.ts loads under Deno and a tiny
 * RxJS pipeline over its exports runs.
 *
 * @module
 */
import assert from "node:assert/strict";
import { from, lastValueFrom, map, toArray } from "rxjs";
import * as politely from "../../mod.ts";

Deno.test("mod.ts loads under Deno and a tiny pipeline runs", async () => {
  assert.ok(Object.keys(politely).length > 0);
  const urls = await lastValueFrom(
    from(["https://a.example/1", { url: "https://b.example/2" }]).pipe(
      map((request) => politely.requestUrl(request)),
      toArray(),
    ),
  );
  assert.deepEqual(urls, ["https://a.example/1", "https://b.example/2"]);
  assert.ok(politely.parseSettings({}).concurrentRequests > 0);
});
