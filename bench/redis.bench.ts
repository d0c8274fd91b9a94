/**
 * Shared limits through Redis at high request rates (issue 15): 1, 2, 4 and 8
 * processes, each sending `--requests` instant requests over `--scopes`
 * scopes (`--per-scope` at once per scope across all processes, default 2)
 * at a concurrency of 64 per process through `throttleByScope` and
 * `sharedDownload` on one Redis (127.0.0.1:$REDIS_PORT, 6390 by default).
 *
 * Per row: total requests/s of all processes, Redis round trips (commands the
 * stores sent), script calls, acquires (asked of the store) and hand-overs (leases a release took
 * for a parked ask, started without asking again) per request, the wait for a lease (p50/p99,
 * from the local slot to the grant), client CPU per request, and failed
 * requests. Each process is its own `node --import tsx` child; they start
 * together at a time the parent gives them.
 *
 * `--reuse-leases N` is `sharedDownload`'s `reuseLeases` (default 8; 0: every
 * lease given back, as before it existed).
 *
 * Run: `npx tsx bench/redis.bench.ts [--requests 20000] [--procs 1,2,4,8] [--scopes 100] [--per-scope 2] [--reuse-leases 8]`.
 *
 * @module
 */
import process from "node:process";
import { createClient } from "redis";
import { from, lastValueFrom, tap, toArray } from "rxjs";
import {
  argValue,
  fmtFixed,
  fmtInt,
  isMain,
  machine,
  markdownTable,
  percentile,
  reportToParent,
  runChild,
} from "./_harness.ts";
import {
  createRedisScopes,
  type RedisScopes,
  type RedisScopesClient,
} from "../lib/redis/redis_scopes.ts";
import { sharedDownload } from "../lib/redis/shared_download.ts";
import { createThrottler } from "../lib/throttler/throttler.ts";
import { throttleByScope } from "../operators/throttle_by_scope.ts";

const PORT = Number(process.env.REDIS_PORT ?? 6390);
const FILE = new URL(import.meta.url).pathname;

interface ChildResult {
  readonly requests: number;
  readonly failed: number;
  readonly firstFailure: string | undefined;
  readonly commands: number;
  readonly scripts: number;
  readonly acquires: number;
  readonly handed: number;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly cpuMs: number;
  readonly waits: number[];
}

async function child(argv: readonly string[]): Promise<void> {
  const prefix = argValue(argv, "prefix")!;
  const tag = argValue(argv, "tag")!;
  const requests = Number(argValue(argv, "requests"));
  const scopes = Number(argValue(argv, "scopes"));
  const perScope = Number(argValue(argv, "per-scope"));
  const startAt = Number(argValue(argv, "start"));
  const reuseLeases = Number(argValue(argv, "reuse-leases"));
  const client = createClient({ socket: { host: "127.0.0.1", port: PORT } });
  client.on("error", () => {});
  await client.connect();
  let commands = 0;
  let scripts = 0;
  const counted: RedisScopesClient = {
    sendCommand: (args) => {
      commands++;
      if (args[0] === "EVALSHA" || args[0] === "EVAL") scripts++;
      return client.sendCommand([...args]);
    },
    duplicate: () => client.duplicate(),
  };
  const real = await createRedisScopes(counted, { prefix, processId: tag });
  let acquires = 0;
  let handed = 0;
  const store: RedisScopes = {
    prefix: real.prefix,
    processId: real.processId,
    leaseMs: real.leaseMs,
    acquire: (...a) => {
      acquires++;
      return real.acquire(...a);
    },
    release: (lease) => real.release(lease),
    unpark: (id, scope) => real.unpark!(id, scope),
    handed$: real.handed$!.pipe(tap(() => handed++)),
    renew: (lease) => real.renew(lease),
    publishBackoff: (m) => real.publishBackoff(m),
    messages$: real.messages$,
    backoffs$: real.backoffs$!,
    released$: real.released$,
    close: () => real.close(),
  };
  const throttler = createThrottler<string>({
    adaptive: false,
    concurrentRequests: 64,
    concurrentRequestsPerDomain: perScope,
    downloadDelayMs: 0,
  });
  const waits: number[] = [];
  /** When each request took its local slot (the outer download was called). */
  const slotAt = new Map<string, number>();
  const shared = sharedDownload(store, throttler, (url: string) => {
    waits.push(performance.now() - slotAt.get(url)!);
    return Promise.resolve(200);
  }, { reuseLeases });
  const download: typeof shared = (url, context) => {
    slotAt.set(url, performance.now());
    return shared(url, context);
  };
  const urls = Array.from(
    { length: requests },
    (_, i) => `http://s${i % scopes}.test/${tag}/${i}`,
  );
  const commandsBefore = commands;
  const scriptsBefore = scripts;
  const acquiresBefore = acquires;
  const handedBefore = handed;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, startAt - Date.now())));
  const cpu0 = process.cpuUsage();
  const startedAt = Date.now();
  const outcomes = await lastValueFrom(
    from(urls).pipe(throttleByScope(throttler, download), toArray()),
  );
  const endedAt = Date.now();
  const cpu = process.cpuUsage(cpu0);
  const failures = outcomes.filter((o) => o.kind === "error");
  reportToParent(
    {
      requests,
      failed: failures.length,
      firstFailure: failures[0]?.kind === "error" ? String(failures[0].error) : undefined,
      commands: commands - commandsBefore,
      scripts: scripts - scriptsBefore,
      acquires: acquires - acquiresBefore,
      handed: handed - handedBefore,
      startedAt,
      endedAt,
      cpuMs: (cpu.user + cpu.system) / 1000,
      waits,
    } satisfies ChildResult,
  );
  await store.close();
  await client.close();
}

async function parent(argv: readonly string[]): Promise<void> {
  const requests = Number(argValue(argv, "requests") ?? 20_000);
  const scopes = Number(argValue(argv, "scopes") ?? 100);
  const perScope = Number(argValue(argv, "per-scope") ?? 2);
  const procs = (argValue(argv, "procs") ?? "1,2,4,8").split(",").map(Number);
  const reuseLeases = argValue(argv, "reuse-leases") ?? "8";
  const admin = createClient({ socket: { host: "127.0.0.1", port: PORT } });
  await admin.connect();
  const rows: string[][] = [];
  for (const n of procs) {
    const prefix = `bench:${crypto.randomUUID()}:`;
    // Time for n children to start (tsx compiles each on a shared 2-core machine).
    const start = Date.now() + 2_000 + 1_000 * n;
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        runChild<ChildResult>(FILE, [
          "--child",
          "--prefix",
          prefix,
          "--tag",
          `p${i}`,
          "--requests",
          String(requests),
          "--scopes",
          String(scopes),
          "--per-scope",
          String(perScope),
          "--start",
          String(start),
          "--reuse-leases",
          reuseLeases,
        ])),
    );
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(keys);
    const total = results.reduce((s, r) => s + r.requests, 0);
    const seconds = (Math.max(...results.map((r) => r.endedAt)) -
      Math.min(...results.map((r) => r.startedAt))) / 1000;
    const waits = results.flatMap((r) => r.waits);
    const failed = results.reduce((s, r) => s + r.failed, 0);
    rows.push([
      String(n),
      fmtInt(total / seconds),
      fmtFixed(results.reduce((s, r) => s + r.commands, 0) / total),
      fmtFixed(results.reduce((s, r) => s + r.scripts, 0) / total),
      fmtFixed(results.reduce((s, r) => s + r.acquires, 0) / total),
      fmtFixed(results.reduce((s, r) => s + r.handed, 0) / total),
      fmtFixed(percentile(waits, 0.5), 1),
      fmtFixed(percentile(waits, 0.99), 1),
      fmtInt((results.reduce((s, r) => s + r.cpuMs, 0) * 1000) / total),
      `${failed}${failed > 0 ? ` (${results.find((r) => r.firstFailure)?.firstFailure})` : ""}`,
    ]);
    console.error(`${n} processes: ${rows.at(-1)!.join(" | ")}`);
  }
  await admin.close();
  console.log(
    `### Shared limits through Redis: ${
      fmtInt(requests)
    } instant requests per process over ${scopes} scopes (${perScope} at once per scope, shared), concurrency 64 per process, reuseLeases ${reuseLeases}\n`,
  );
  console.log(markdownTable(
    [
      "processes",
      "requests/s (all)",
      "round trips / request",
      "script calls / request",
      "acquires / request",
      "hand-overs / request",
      "lease wait p50 ms",
      "p99 ms",
      "client CPU us / request",
      "failed",
    ],
    rows,
  ));
  console.log(`\n${machine()}, Redis on 127.0.0.1:${PORT}`);
}

if (isMain(import.meta)) {
  const argv = process.argv.slice(2);
  await (argv.includes("--child") ? child(argv) : parent(argv));
}
