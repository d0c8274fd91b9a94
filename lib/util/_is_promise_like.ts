/**
 * Whether a value is a thenable and not an Observable-like (which may also
 * have a `then` in some libraries): such a value is awaited, not subscribed.
 */
export function isPromiseLike<T>(value: unknown): value is PromiseLike<T> {
  return value instanceof Promise ||
    (typeof value === "object" && value !== null &&
      typeof (value as { then?: unknown }).then === "function" &&
      typeof (value as { subscribe?: unknown }).subscribe !== "function");
}
