/**
 * A download function over the runtime's `fetch` (Node, Deno and Bun all have
 * one): a timeout, an identifying User-Agent, the body streamed with a size
 * limit (kept only when wanted), and failures turned into politely's download
 * error classes.
 *
 * @module
 */
import {
  classifyDownloadError,
  InvalidRequestError,
  ResponseTooLargeError,
} from "./download_errors.ts";
import { requestUrl } from "../request.ts";
import { hasCredentials, withoutCredentials } from "./_url_credentials.ts";
import { DEFAULTS } from "../settings/settings.ts";
import { fetchNotingWire } from "./_wire_notice.ts";
import type { DownloadContext } from "../download.ts";

/** A response as the fetch download gives it: plain data, easy to log as JSON. */
export interface FetchedResponse {
  readonly url: string;
  readonly status: number;
  readonly headers: Headers;
  /** The body as text (empty when `readBody` is false). */
  readonly body: string;
  /** Body size in bytes (counted even when the body is not kept). */
  readonly bytes: number;
  /** The body's bytes, with `keepBytes` (for an archive: `--warc`). */
  readonly raw?: Uint8Array;
  /** The reason phrase (`""` over HTTP/2), with `keepBytes`. */
  readonly statusText?: string;
  /** The method and headers this download set on the request, with `keepBytes`. */
  readonly sent?: { readonly method: string; readonly headers: Readonly<Record<string, string>> };
}

/** A body that went past `warnSizeBytes` (Scrapy's `DOWNLOAD_WARNSIZE`). */
export interface DownloadSizeWarning {
  readonly url: string;
  /** The size that crossed the line: announced (`Content-Length`) or received so far. */
  readonly bytes: number;
  /** Whether `bytes` is the announced size, read before the body. */
  readonly announced: boolean;
  readonly warnSizeBytes: number;
}

const DEFAULT_MAX_SIZE_BYTES = DEFAULTS.download.maxSizeBytes;
const DEFAULT_WARN_SIZE_BYTES = DEFAULTS.download.warnSizeBytes;

/** Options of {@link createFetchDownload}. */
export interface FetchDownloadOptions {
  /** Time allowed for the whole download, body included. @default 180_000 (DOWNLOAD_TIMEOUT) */
  readonly timeoutMs?: number;
  /** Sent as `User-Agent` unless the request sets one. @default "politely/0.1" */
  readonly userAgent?: string;
  /**
   * Keep the body as text. When false the body is still downloaded (streamed,
   * counted and held to `maxSizeBytes`) but nothing of it is kept.
   * @default true
   */
  readonly readBody?: boolean;
  /**
   * Abort a download whose body is larger (announced or received), with a
   * `ResponseTooLargeError`; 0 for no limit (Scrapy's DOWNLOAD_MAXSIZE).
   * @default 1_073_741_824 (1 GiB)
   */
  readonly maxSizeBytes?: number;
  /**
   * Call `onSizeWarning` once for a body larger than this; 0 for never
   * (Scrapy's DOWNLOAD_WARNSIZE).
   * @default 33_554_432 (32 MiB)
   */
  readonly warnSizeBytes?: number;
  /** Told about a body past `warnSizeBytes`. @default nothing is told */
  readonly onSizeWarning?: (warning: DownloadSizeWarning) => void;
  /** The fetch to use. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
  /**
   * Keep the body's bytes (`raw`), the reason phrase and what was sent, for
   * an archive (`--warc`). The text (`readBody`) is then decoded from them.
   * @default false
   */
  readonly keepBytes?: boolean;
}

/**
 * Make a download function for `throttleByScope` that uses `fetch`.
 *
 * The body is read as a stream: a `Content-Length` over `maxSizeBytes` aborts
 * before any of it is read, and a body that grows past it is aborted there,
 * so memory never holds more than the limit (and nothing at all with
 * `readBody: false`).
 *
 * A URL with credentials (`http://user:password@host/`) is refused with an
 * `InvalidRequestError` whose message masks them (fetch refuses it too, with
 * the password in its message); send them in an `Authorization` header.
 *
 * @param options Timeout, User-Agent, body reading and size limits, fetch implementation.
 * @returns `(request, context) => Promise<FetchedResponse>`; rejects with
 *   `DownloadTimeoutError`, `DownloadFailedError`, `ResponseDataLossError`,
 *   `ResponseTooLargeError` or `InvalidRequestError`.
 * @throws {RangeError} when `timeoutMs` is not a positive number, or a size
 *   limit not an integer >= 0.
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
  const maxSize = sizeOption("maxSizeBytes", options.maxSizeBytes, DEFAULT_MAX_SIZE_BYTES);
  const warnSize = sizeOption("warnSizeBytes", options.warnSizeBytes, DEFAULT_WARN_SIZE_BYTES);
  const onSizeWarning = options.onSizeWarning;
  const userAgent = options.userAgent ?? "politely/0.1";
  const readBody = options.readBody ?? true;
  const keepBytes = options.keepBytes ?? false;
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
    const parsed = URL.canParse(url) ? new URL(url) : undefined;
    if (parsed !== undefined && hasCredentials(parsed)) {
      throw new InvalidRequestError(
        `Cannot download a URL with credentials (user:password@), as they would be shown: current value is '${
          withoutCredentials(parsed)
        }'; send them in an Authorization header`,
        { input: request, field: "url" },
      );
    }
    const signal = AbortSignal.any([context.signal, AbortSignal.timeout(timeoutMs)]);
    const init = requestInit(request, userAgent, signal);
    let phase: "request" | "body" = "request";
    try {
      const response = await (context.wentOut === undefined
        ? doFetch(url, init)
        // The context itself is told (`wentOut` is its method): no closure per request.
        : fetchNotingWire(doFetch, url, init, context as { wentOut(): void }));
      phase = "body";
      const warn = (bytes: number, announced: boolean) =>
        onSizeWarning?.({ url, bytes, announced, warnSizeBytes: warnSize });
      const announced = contentLength(response.headers);
      if (announced !== undefined && maxSize > 0 && announced > maxSize) {
        response.body?.cancel().catch(() => {});
        throw tooLarge(url, maxSize, 0, announced);
      }
      let warned = false;
      if (announced !== undefined && warnSize > 0 && announced > warnSize) {
        warned = true;
        warn(announced, true);
      }
      // Text is decoded chunk by chunk, so bytes and text are never both held
      // whole (unless the bytes are kept too).
      const decoder = readBody ? new TextDecoder() : undefined;
      const parts: string[] = [];
      const chunks: Uint8Array[] | undefined = keepBytes ? [] : undefined;
      let bytes = 0;
      const reader = response.body?.getReader();
      if (reader !== undefined) {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          bytes += value.byteLength;
          if (maxSize > 0 && bytes > maxSize) {
            reader.cancel().catch(() => {});
            throw tooLarge(url, maxSize, bytes, announced);
          }
          if (!warned && warnSize > 0 && bytes > warnSize) {
            warned = true;
            warn(bytes, false);
          }
          if (decoder !== undefined) parts.push(decoder.decode(value, { stream: true }));
          chunks?.push(value);
        }
      }
      if (decoder !== undefined) parts.push(decoder.decode());
      const fetched: FetchedResponse = {
        url: response.url || url,
        status: response.status,
        headers: response.headers,
        body: parts.join(""),
        bytes,
      };
      if (chunks === undefined) return fetched;
      const raw = new Uint8Array(bytes);
      let at = 0;
      for (const c of chunks) {
        raw.set(c, at);
        at += c.byteLength;
      }
      const sent: Record<string, string> = {};
      new Headers(init.headers).forEach((v, k) => (sent[k] = v));
      return {
        ...fetched,
        raw,
        statusText: response.statusText,
        sent: { method: init.method ?? "GET", headers: sent },
      };
    } catch (error) {
      throw classifyDownloadError(error, { url, input: request, timeoutMs, signal, phase });
    }
  };
}

function sizeOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(
      `Cannot create fetch download as '${name}' must be an integer >= 0: current value is ${value}`,
    );
  }
  return value;
}

function contentLength(headers: Headers): number | undefined {
  const text = headers.get("content-length");
  if (text === null || !/^\d+$/.test(text.trim())) return undefined;
  return Number(text.trim());
}

function tooLarge(
  url: string,
  maxSizeBytes: number,
  receivedBytes: number,
  expectedBytes: number | undefined,
): ResponseTooLargeError {
  const what = receivedBytes === 0 && expectedBytes !== undefined
    ? `announces ${expectedBytes} bytes (Content-Length)`
    : `passed ${maxSizeBytes} bytes`;
  return new ResponseTooLargeError(
    `Response body of ${url} ${what}, over the limit of ${maxSizeBytes} bytes (download.maxSizeBytes, DOWNLOAD_MAXSIZE)`,
    {
      url,
      maxSizeBytes,
      receivedBytes,
      ...(expectedBytes !== undefined ? { expectedBytes } : {}),
    },
  );
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
