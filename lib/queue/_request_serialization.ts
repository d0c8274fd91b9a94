/**
 * How requests are stored outside memory, by the job directory
 * (`request_queue.ts`) and by the shared queue in Redis
 * (`redis_request_queue.ts`): the same forms in both, so a request reads back
 * the same from either store. Private to politely.
 *
 * @module
 */
import { describeValue } from "../settings/_describe_value.ts";

/** A request's `meta.depth`, 0 when it has none. */
export function metaDepth(meta: { readonly [key: string]: unknown } | undefined): number {
  const d = meta?.["depth"];
  return typeof d === "number" && Number.isFinite(d) ? d : 0;
}

function isJsonSafe(value: unknown, depth: number): boolean {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value !== "object" || depth > 32) return false;
  if (Array.isArray(value)) return value.every((v) => isJsonSafe(v, depth + 1));
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const k in value) {
    if (!isJsonSafe((value as Record<string, unknown>)[k], depth + 1)) return false;
  }
  return true;
}

/**
 * The default serializer: strings, JSON-safe plain objects, body-less
 * `Request`s; `undefined` for anything else (kept in memory only).
 */
export function serializeRequest(request: unknown): unknown {
  if (typeof request === "string") return request;
  if (request instanceof Request) {
    if (request.body !== null) return undefined;
    return ["Q", request.url, request.method, [...request.headers]];
  }
  return isJsonSafe(request, 0) && typeof request === "object" ? ["O", request] : undefined;
}

/**
 * Reads back what {@link serializeRequest} wrote.
 *
 * @param data The stored form.
 * @param store Where it was read from, for the error ("job directory", "Redis").
 * @throws {TypeError} When `data` is none of the stored forms.
 */
export function deserializeRequest(data: unknown, store: string): unknown {
  if (typeof data === "string") return data;
  if (Array.isArray(data)) {
    if (data[0] === "O") return data[1];
    if (data[0] === "Q") {
      return new Request(data[1] as string, {
        method: data[2] as string,
        headers: data[3] as [string, string][],
      });
    }
  }
  throw new TypeError(
    `Cannot read request from ${store}: current value is ${describeValue(data, 200)}`,
  );
}
