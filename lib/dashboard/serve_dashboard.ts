/**
 * `serveDashboard`: a live page of a throttler's scopes, served over HTTP by
 * the process that crawls. Read-only: GET and HEAD only, and no endpoint
 * changes the crawl.
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Subscription } from "rxjs";
import { maskCredentials } from "../http/_url_credentials.ts";
import { type Asset, loadAssets } from "./_assets.ts";
import {
  DashboardAggregator,
  type DashboardAggregatorOptions,
  type DashboardSource,
} from "./dashboard_aggregator.ts";

/** Where and how a dashboard is served. */
export interface ServeDashboardOptions extends DashboardAggregatorOptions {
  /**
   * The address to listen on. Anything but a loopback address makes the page
   * reachable from other machines: `onWarning` is told. @default "127.0.0.1"
   */
  readonly host?: string;
  /** The port; 0 picks a free one (read it from `url`). @default 0 */
  readonly port?: number;
  /** The page's title. @default "politely" */
  readonly title?: string;
  /**
   * Lines shown in the page's header (e.g. `{ redis: url }`); credentials in
   * URLs (`//user:password@`) are masked before they reach the page.
   * @default {}
   */
  readonly info?: Readonly<Record<string, string>>;
  /** Told one line when the host is not a loopback address. @default console.error */
  readonly onWarning?: (line: string) => void;
  /**
   * Bytes a page may fall behind on its event stream before it is
   * disconnected (it reconnects and gets the history window again).
   * @default 1_048_576
   */
  readonly maxBufferedBytes?: number;
}

/** A running dashboard. */
export interface Dashboard {
  /** The page's address, e.g. `http://127.0.0.1:41234/`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** What the pages are sent. */
  readonly aggregator: DashboardAggregator;
  /** Stop serving: event streams ended, connections closed, the aggregator stopped. */
  close(): Promise<void>;
}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);
/** The names a browser may send in `Host` for a loopback server (anything else: DNS rebinding). */
const LOOPBACK_NAMES = new Set(["127.0.0.1", "[::1]", "localhost"]);

const SECURITY_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  // uPlot sets element styles from script, which style-src does not govern.
  "content-security-policy":
    "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
} as const;

/**
 * Serve a live dashboard of a throttler: totals, per-scope plots (sent and
 * completed per second, delay, concurrency limit against in flight, marks for
 * backoff, holds and rampup steps), a sortable table of scopes and a filtered
 * event log. Pages get one aggregated snapshot per tick by Server-Sent Events
 * (`GET /events`), never the raw event stream; a page that connects or
 * reconnects gets the whole history window first. Everything is served from
 * the package (uPlot included): it works offline.
 *
 * @param throttler The throttler to watch (or anything shaped like one).
 * @param options Address, bounds of the history kept, header lines.
 * @returns The running dashboard, once it listens.
 * @throws {RangeError} For a port outside 0..65535 or a bad bound (before anything listens).
 * @throws {Error} When the address cannot be listened on (in use, not local).
 * @example Serve on a free loopback port
 * ```ts
 * import { createThrottler } from "../throttler/throttler.ts";
 * import { serveDashboard } from "./serve_dashboard.ts";
 * const throttler = createThrottler();
 * const dashboard = await serveDashboard(throttler, { port: 0 });
 * console.assert(dashboard.url.startsWith("http://127.0.0.1:"));
 * await dashboard.close();
 * ```
 */
export async function serveDashboard(
  throttler: DashboardSource,
  options: ServeDashboardOptions = {},
): Promise<Dashboard> {
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RangeError(
      `Cannot serve dashboard as 'port' must be a whole number in 0..65535: current value is ${
        String(port)
      }`,
    );
  }
  const maxBuffered = options.maxBufferedBytes ?? 1_048_576;
  if (!(maxBuffered > 0)) {
    throw new RangeError(
      `Cannot serve dashboard as 'maxBufferedBytes' must be > 0: current value is ${maxBuffered}`,
    );
  }
  const aggregator = new DashboardAggregator(throttler, options);
  const assets = loadAssets();
  const config = JSON.stringify({
    title: options.title ?? "politely",
    info: Object.fromEntries(
      Object.entries(options.info ?? {}).map(([k, v]) => [k, maskCredentials(v)]),
    ),
  });
  const loopback = LOOPBACK.has(host);
  const clients = new Set<ServerResponse>();

  const server = createServer((req, res) => {
    try {
      handle(req, res);
    } catch (error) {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`${error instanceof Error ? error.message : String(error)}\n`);
    }
  });

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== "GET" && req.method !== "HEAD") {
      // Read-only by design: nothing here changes the crawl.
      return plain(res, 405, "read-only: GET and HEAD only", { allow: "GET, HEAD" });
    }
    if (loopback && !LOOPBACK_NAMES.has(hostName(req.headers.host))) {
      // A page on another site that made its name resolve to 127.0.0.1
      // (DNS rebinding) would otherwise read the crawl.
      return plain(res, 403, "this dashboard answers to 127.0.0.1 and localhost only");
    }
    const url = new URL(req.url ?? "/", "http://dashboard.invalid");
    const path = url.pathname;
    if (path === "/events") return openStream(req, res);
    if (path === "/config.json") return send(res, req, jsonAsset(config));
    if (path === "/history.json") {
      return send(res, req, jsonAsset(JSON.stringify(aggregator.history())));
    }
    if (path === "/series.json") {
      const series = aggregator.series(url.searchParams.get("scope") ?? "");
      if (series === undefined) return plain(res, 404, "scope not tracked");
      return send(res, req, jsonAsset(JSON.stringify(series)));
    }
    const asset = assets.get(path === "/index.html" ? "/" : path);
    if (asset === undefined) return plain(res, 404, "not found");
    send(res, req, asset);
  };

  const openStream = (req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      connection: "keep-alive",
    });
    if (req.method === "HEAD") return void res.end();
    // Every connection, a reconnection with Last-Event-ID included, starts
    // with the whole window: the page rebuilds from it and loses nothing the
    // server still keeps.
    const history = aggregator.history();
    res.write(
      `retry: 2000\nid: ${history.seq}\nevent: history\ndata: ${JSON.stringify(history)}\n\n`,
    );
    clients.add(res);
    const drop = () => clients.delete(res);
    req.on("close", drop);
    res.on("error", drop);
  };

  const subscription: Subscription = aggregator.snapshots$.subscribe((snapshot) => {
    if (clients.size === 0) return;
    // Serialized once for every page.
    const message = `id: ${snapshot.seq}\nevent: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
    for (const res of clients) {
      if (res.writableLength > maxBuffered) {
        // A page that does not read: memory stays bounded, it reconnects.
        clients.delete(res);
        res.destroy();
        continue;
      }
      res.write(message);
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  }).catch((error) => {
    subscription.unsubscribe();
    throw error;
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" || host.includes(":")
    ? `[${address.address}]`
    : address.address;
  const url = `http://${shownHost}:${address.port}/`;
  if (!loopback) {
    (options.onWarning ?? ((line) => console.error(line)))(
      `politely: warning: the dashboard listens on ${url} and is reachable from other machines; it shows this crawl's scopes and events to anyone who can connect`,
    );
  }
  aggregator.start();

  let closing: Promise<void> | undefined;
  return {
    url,
    host: address.address,
    port: address.port,
    aggregator,
    close: () =>
      closing ??= new Promise<void>((resolve) => {
        subscription.unsubscribe();
        aggregator.close();
        for (const res of clients) res.end();
        clients.clear();
        server.close(() => resolve());
        // Deno's node:http closes only then; EventSource keeps its connection open.
        server.closeAllConnections();
      }),
  };
}

function hostName(header: string | undefined): string {
  if (header === undefined) return "";
  return header.replace(/:\d+$/, "").toLowerCase();
}

function jsonAsset(text: string): Asset {
  return { type: "application/json", body: new TextEncoder().encode(text) };
}

function send(res: ServerResponse, req: IncomingMessage, asset: Asset): void {
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": asset.type,
    "content-length": String(asset.body.byteLength),
  });
  res.end(req.method === "HEAD" ? undefined : asset.body);
}

function plain(
  res: ServerResponse,
  status: number,
  text: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers, "content-type": "text/plain" });
  res.end(`${text}\n`);
}
