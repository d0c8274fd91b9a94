/**
 * One crawler process for the multi-process test of `sharedDownload`
 * (test/shared_download.test.ts): its own throttler and Redis connection,
 * `count` requests to `origin` through `throttleByScope(sharedDownload(...))`.
 * Prints one JSON line `{ "statuses": [...], "granted": [...] }` (the Redis
 * times of its grants) and exits 0, or 1 on failure.
 *
 * Usage: `<runtime> test/_redis_worker.ts <origin> <prefix> <count> <concurrency> <tag> [together]`
 * with REDIS_PORT in the environment (default 6390); with `together` (a
 * number of workers) it sends nothing until that many workers are ready (a
 * counter in Redis), so that they start together.
 *
 * @module
 */
import process from "node:process";
import { from, lastValueFrom, toArray } from "rxjs";
import { createRedisScopes } from "../lib/redis/redis_scopes.ts";
import { sharedDownload } from "../lib/redis/shared_download.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";
import { connectRedis, runCleanups } from "./_helpers/redis.ts";

const [origin = "", prefix = "", count = "0", concurrency = "1", tag = "w", together = "1"] =
  process
    .argv.slice(2);
const client = await connectRedis();
const store = await createRedisScopes(client, { prefix, processId: tag });
try {
  const throttler = createThrottler<string>({
    concurrentRequestsPerDomain: Number(concurrency),
    downloadDelayMs: 0,
  });
  const granted: number[] = [];
  const download = sharedDownload(store, throttler, async (url: string, ctx) => {
    granted.push(ctx.lease.grantedAt);
    const response = await fetch(url, { signal: ctx.signal });
    await response.text();
    return response.status;
  });
  // A barrier in Redis: workers in separate processes start together.
  await client.incr(`${prefix}ready`);
  while (Number(await client.get(`${prefix}ready`)) < Number(together)) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const urls = Array.from({ length: Number(count) }, (_, i) => `${origin}/${tag}/${i}`);
  const outcomes = await lastValueFrom(
    from(urls).pipe(throttleByScope(throttler, download), toArray()),
  );
  const statuses = outcomes.map((o) => o.kind === "response" ? o.response : String(o.error));
  console.log(JSON.stringify({ statuses, granted }));
} finally {
  await store.close();
  await runCleanups(); // the client
}
