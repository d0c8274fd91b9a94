/**
 * A download function over the runtime's `fetch` (Node, Deno and Bun all have
 * one): a timeout, an identifying User-Agent, the body read in full, and
 * failures turned into politely's download error classes.
 *
 * @module
 */
import { classifyDownloadError, InvalidRequestError } from "./download_errors.ts";
import { requestUrl } from "./request.ts";
import type { DownloadContext } from "../operators/throttle_by_scope.ts";

/** A response as the fetch download gives it: plain data, easy to log as JSON. */
export interface FetchedResponse {
  readonly url: string;
  readonly status: number;
  readonly headers: Headers;
  /** The body as text (empty when `readBody` is false). */
  readonly body: string;
  /** Body size in bytes. */
  readonly bytes: number;
}

/** Options of {@link createFetchDownload}. */
export interface FetchDownloadOptions {
  /** Time allowed for the whole download, body included. @default 180_000 (DOWNLOAD_TIMEOUT) */
  readonly timeoutMs?: number;
  /** Sent as `User-Agent` unless the request sets one. @default "politely/0.1" */
  readonly userAgent?: string;
  /** Read the body. @default true */
  readonly readBody?: boolean;
  /** The fetch to use. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

/**
 * Make a download function for `throttleByScope` that uses `fetch`.
 *
 * @param options Timeout, User-Agent, body reading, fetch implementation.
 * @returns `(request, context) => Promise<FetchedResponse>`; rejects with
 *   `DownloadTimeoutError`, `DownloadFailedError`, `ResponseDataLossError` or
 *   `InvalidRequestError`.
 * @throws {RangeError} when `timeoutMs` is not a positive number.
 * @example
 * ```ts
 * import { createFetchDownload } from "./fetch_download.ts";
 * const download = createFetchDownload({ timeoutMs: 10_000, userAgent: "my-crawler/1.0" });
 * console.assert(typeof download === "function");
 * ```
 */
export function createFetchDownload(
  options: FetchDownloadOptions = {},
): (request: unknown, context: DownloadContext) => Promise<FetchedResponse> {
  const timeoutMs = options.timeoutMs ?? 180_000;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw new RangeError(
      `Cannot create fetch download as 'timeoutMs' must be a finite number > 0: current value is ${timeoutMs}`,
    );
  }
  const userAgent = options.userAgent ?? "politely/0.1";
  const readBody = options.readBody ?? true;
  const doFetch = options.fetch ?? globalThis.fetch;

  return async (request, context) => {
    const url = requestUrl(request);
    if (url === undefined) {
      throw new InvalidRequestError(
        `Cannot download a request with no URL: current value is ${String(request)}`,
        {
          input: request,
        },
      );
    }
    const signal = AbortSignal.any([context.signal, AbortSignal.timeout(timeoutMs)]);
    const init = requestInit(request, userAgent, signal);
    let phase: "request" | "body" = "request";
    try {
      const response = await doFetch(url, init);
      phase = "body";
      let body = "";
      let bytes = 0;
      if (readBody) {
        const buffer = new Uint8Array(await response.arrayBuffer());
        bytes = buffer.byteLength;
        body = new TextDecoder().decode(buffer);
      } else {
        await response.body?.cancel();
      }
      return {
        url: response.url || url,
        status: response.status,
        headers: response.headers,
        body,
        bytes,
      };
    } catch (error) {
      throw classifyDownloadError(error, { url, input: request, timeoutMs, signal, phase });
    }
  };
}

function requestInit(request: unknown, userAgent: string, signal: AbortSignal): RequestInit {
  if (request instanceof Request) {
    const headers = new Headers(request.headers);
    if (!headers.has("user-agent")) headers.set("user-agent", userAgent);
    return { method: request.method, headers, signal, redirect: "follow" };
  }
  const headers = new Headers({ "user-agent": userAgent });
  let method = "GET";
  let body: string | undefined;
  if (typeof request === "object" && request !== null) {
    const r = request as { method?: unknown; headers?: unknown; body?: unknown };
    if (typeof r.method === "string") method = r.method;
    if (typeof r.body === "string") body = r.body;
    if (typeof r.headers === "object" && r.headers !== null) {
      for (const [k, v] of Object.entries(r.headers as Record<string, unknown>)) {
        if (typeof v === "string") headers.set(k, v);
      }
    }
  }
  return body === undefined ? { method, headers, signal } : { method, headers, signal, body };
}
