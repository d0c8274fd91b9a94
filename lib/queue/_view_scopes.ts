/**
 * The scopes a request queue works out from a throttler that resolves them
 * itself: `RequestQueue` and `RedisRequestQueue` both take their default
 * `scopesOf` from here. Private to politely.
 *
 * @module
 */
import type { QueueScopes, QueueThrottleView, ViewScopes } from "./request_queue.ts";

/**
 * The default `scopesOf` from a view that resolves scopes itself (a
 * throttler), or `undefined` when it has nothing of its own (the queue's
 * default gives the same).
 *
 * @param view The throttler the queue orders for.
 * @param fallback The queue's own default, for scopes that resolve later (a promise).
 */
export function viewScopesOf<R>(
  view: QueueThrottleView,
  fallback: (request: R) => QueueScopes,
): ((request: R) => QueueScopes) | undefined {
  const resolve = view.resolveScopes as
    | ((request: R) => ViewScopes | PromiseLike<ViewScopes>)
    | undefined;
  if (resolve === undefined || view.usesDefaultScopes === true) return undefined;
  return (request) => {
    const s = resolve.call(view, request);
    if (typeof (s as PromiseLike<ViewScopes>).then === "function") {
      // The gate resolves (and reports a failure) itself.
      (s as PromiseLike<ViewScopes>).then(undefined, () => {});
      return fallback(request);
    }
    const v = s as ViewScopes;
    return v.amounts === undefined ? { scopes: v.names } : { scopes: v.names, amounts: v.amounts };
  };
}
