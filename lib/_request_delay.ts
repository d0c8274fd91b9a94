/**
 * `meta.throttlingDelayMs` is applied once: by the request queue when the
 * request goes through one (it holds the request aside), else by the gate.
 * The queue marks the requests it has held; the gate skips the delay of a
 * marked request. Strings have no meta, so only objects are ever marked.
 *
 * @module
 */

const delayedByQueue = new WeakSet<object>();

/** The request queue held this request aside for its `throttlingDelayMs`. */
export function markRequestDelayed(request: unknown): void {
  if (typeof request === "object" && request !== null) delayedByQueue.add(request);
}

/**
 * Whether the queue already applied this request's delay; forgets the mark,
 * so the request counts as new if it is sent through again later.
 */
export function takeRequestDelayed(request: unknown): boolean {
  return typeof request === "object" && request !== null && delayedByQueue.delete(request);
}
