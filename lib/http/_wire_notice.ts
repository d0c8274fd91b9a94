/**
 * When a `fetch` request reaches the network. Node's `fetch` (undici)
 * publishes on `node:diagnostics_channel` when it creates a request
 * (`undici:request:create`, synchronously inside the `fetch()` call for a
 * request without a body to wait for) and when it has written the request's
 * headers to the socket (`undici:client:sendHeaders`). {@link fetchNotingWire}
 * ties the two together for one call, so a download can tell the gate when its
 * request went out rather than when the gate released it; the gate then
 * spaces the scope's next request from there (docs/DECISIONS.md, "Spacing
 * from the wire"). Deno and Bun publish nothing there: the callback is never
 * called and spacing stays at the release time.
 *
 * The subscription is module state on purpose: diagnostics channels are
 * process-wide, one subscription serves every download, and a subscriber
 * costs undici one message per request.
 *
 * @module
 */
import diagnostics from "node:diagnostics_channel";

/** What the download goes out for (a request's `DownloadContext`). */
interface GoingOut {
  wentOut(): void;
}

/** The download of the `fetch()` call in progress (set only during the call). */
let calling: GoingOut | undefined;
/** undici's request object → the download that created it. */
const waiting = new WeakMap<object, GoingOut>();
let subscribed = false;

function subscribe(): void {
  subscribed = true;
  diagnostics.subscribe("undici:request:create", (message) => {
    const f = calling;
    if (f === undefined) return;
    // Only the first request of the call: a redirect's is created later.
    calling = undefined;
    const request = (message as { request?: unknown }).request;
    if (typeof request === "object" && request !== null) waiting.set(request, f);
  });
  diagnostics.subscribe("undici:client:sendHeaders", (message) => {
    const request = (message as { request?: unknown }).request;
    if (typeof request !== "object" || request === null) return;
    const f = waiting.get(request);
    if (f === undefined) return;
    waiting.delete(request);
    f.wentOut();
  });
}

/**
 * Call `doFetch(url, init)`, and `download.wentOut()` once when the request's
 * headers are written to the socket (under Node's fetch; never elsewhere, nor
 * when the request is created after the call returns).
 */
export function fetchNotingWire(
  doFetch: typeof fetch,
  url: string,
  init: RequestInit,
  download: GoingOut,
): Promise<Response> {
  if (!subscribed) subscribe();
  calling = download;
  try {
    return doFetch(url, init);
  } finally {
    calling = undefined;
  }
}
