/**
 * A real `node:http` server on 127.0.0.1 (port 0) that records when each
 * request arrived, for the end-to-end tests that need real I/O.
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the server saw it. */
export interface Arrival {
  readonly path: string;
  /** `performance.now()` when the request arrived, in ms. */
  readonly atMs: number;
}

/** A running recording server. */
export interface RecordingServer {
  /** `http://127.0.0.1:<port>` (no trailing slash). */
  readonly origin: string;
  readonly arrivals: Arrival[];
  /** Stops the server (and, under Deno, its open connections). */
  close(): Promise<void>;
}

/**
 * Start a loopback server that answers every request with `status` (200)
 * and a short body, recording arrivals.
 */
export async function startRecordingServer(
  handler?: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<RecordingServer> {
  const arrivals: Arrival[] = [];
  const server = createServer((req, res) => {
    arrivals.push({ path: req.url ?? "", atMs: performance.now() });
    if (handler !== undefined) return handler(req, res);
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    arrivals,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
