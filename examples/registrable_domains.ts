/**
 * Registrable-domain scopes: `www.example.com`, `img.example.com` and
 * `api.example.com` are often one operator's servers, so one limit should
 * cover them all. The same pages are crawled three times with
 * `concurrentRequestsPerDomain: 2`, and the server counts how many requests
 * each domain had in flight at once:
 * - the default scope (the host): each subdomain has its own 2, together 6;
 * - `registrableDomainScope` (tldts and the Public Suffix List): one scope
 *   `example.com`, 2 in all;
 * - `hierarchicalScopes`: `example.com` at 3 and each subdomain at 2, so one
 *   busy subdomain cannot take all of the domain's 3.
 *
 * Nothing leaves the machine: every host name is answered by one loopback
 * server. The download keeps the URL's host name for throttling but connects
 * to 127.0.0.1, telling the server which site was meant in an `X-Site`
 * header (as a reverse proxy would with `Host`).
 * Run with `npx tsx examples/registrable_domains.ts` (or `npx deno run -A`, `npx bun`).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { from, lastValueFrom, toArray } from "rxjs";
import {
  createFetchDownload,
  createThrottler,
  hierarchicalScopes,
  hostScope,
  registrableDomainScope,
  throttleByScope,
} from "../mod.ts";

/** The most requests each domain (`example.com`, `example.org`) had in flight at once, per run. */
export type Peaks = Record<"host" | "registrable" | "hierarchical", Record<string, number>>;

const HOSTS = ["www.example.com", "img.example.com", "api.example.com", "blog.example.org"];

/** Runs the example; resolves with the peaks the server saw in each run. */
export async function main(log: (line: string) => void = console.log): Promise<Peaks> {
  // The server: 100 ms per page; counts requests in flight per domain (the
  // last two labels of the site name are enough for these names).
  const inFlight = new Map<string, number>();
  let peaks: Record<string, number> = {};
  const server = createServer((req, res) => {
    const site = String(req.headers["x-site"] ?? "unknown");
    const domain = site.split(".").slice(-2).join(".");
    const now = (inFlight.get(domain) ?? 0) + 1;
    inFlight.set(domain, now);
    peaks[domain] = Math.max(peaks[domain] ?? 0, now);
    setTimeout(() => {
      inFlight.set(domain, (inFlight.get(domain) ?? 1) - 1);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`${site}${req.url}\n`);
    }, 100);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const loopback = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // Same request, other address: as if DNS sent every one of these names here.
  const toLoopback: typeof fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init?.headers);
    headers.set("x-site", url.hostname);
    return fetch(`${loopback}${url.pathname}${url.search}`, { ...init, headers });
  };
  const download = createFetchDownload({ timeoutMs: 5_000, fetch: toLoopback });
  const urls = HOSTS.flatMap((host) =>
    Array.from({ length: 4 }, (_, i) => `https://${host}/page/${i + 1}`)
  );

  const run = async (
    label: string,
    getScopes: (url: string) => string | string[],
    scopes: Record<string, { concurrency: number }> = {},
  ): Promise<Record<string, number>> => {
    peaks = {};
    const throttler = createThrottler<string>(
      { concurrentRequestsPerDomain: 2, scopes },
      { getScopes },
    );
    const started = throttler.scheduler.now();
    const outcomes = await lastValueFrom(
      from(urls).pipe(throttleByScope(throttler, download), toArray()),
    );
    const ms = Math.round(throttler.scheduler.now() - started);
    const failed = outcomes.filter((o) => o.kind === "error").length;
    const scopesOfWww = [getScopes("https://www.example.com/")].flat().join(" + ");
    log(
      `${label.padEnd(24)} ${scopesOfWww.padEnd(33)} ${String(peaks["example.com"]).padStart(11)}` +
        `${String(peaks["example.org"]).padStart(13)}  ${ms} ms` +
        (failed > 0 ? ` (${failed} of ${outcomes.length} failed)` : ""),
    );
    return peaks;
  };

  log(
    `16 pages on ${HOSTS.join(", ")}; concurrentRequestsPerDomain 2\n` +
      `${"scope function".padEnd(24)} ${"scopes of www.example.com".padEnd(33)} ` +
      `${"example.com".padStart(11)}${"example.org".padStart(13)}  (peak requests in flight)`,
  );
  try {
    return {
      host: await run("hostScope (default)", hostScope),
      registrable: await run("registrableDomainScope", registrableDomainScope),
      hierarchical: await run("hierarchicalScopes", hierarchicalScopes, {
        "example.com": { concurrency: 3 },
      }),
    };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) await main();
