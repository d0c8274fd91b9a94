/**
 * Listening on loopback for the simulated sites (`sites.ts`, `../sim/zoo_server.ts`).
 *
 * @module
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Subscription } from "rxjs";

/** A server listening on 127.0.0.1. */
export interface Listening {
  readonly port: number;
  /**
   * Stops the server: drops the answers still waiting (`pending`) and every
   * connection; resolves when the port is free. Closing twice is one close.
   */
  close(): Promise<void>;
}

/**
 * Listens on 127.0.0.1 and a free port.
 *
 * @param server The server (its handler answers; `pending` holds its delayed answers).
 * @param pending Answers scheduled but not sent yet, unsubscribed on close.
 * @returns The port and a close function, once the server listens.
 */
export function listenOnLoopback(server: Server, pending: Set<Subscription>): Promise<Listening> {
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve, reject) => {
      for (const sub of pending) sub.unsubscribe();
      pending.clear();
      server.close((error) => {
        // A server that never listened (or already closed) is closed enough.
        if (error && (error as NodeJS.ErrnoException).code !== "ERR_SERVER_NOT_RUNNING") {
          reject(error);
        } else resolve();
      });
      // Node closes idle keep-alive sockets itself; Deno's server only closes after this.
      server.closeAllConnections?.();
    });
    return closing;
  };
  return new Promise<Listening>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve({ port: (server.address() as AddressInfo).port, close });
    });
  });
}
