/**
 * `meta.throttlingDelayMs` is applied once: by the request queue when the
 * request goes through one (it holds the request aside), else by the gate.
 * The queue marks the requests it has held; the gate skips the delay of a
 * marked request. Strings have no meta, so only objects are ever marked.
 *
 * @module
 */

const delayedByQueue = new WeakSet<object>();
/**
 * Marks made and not taken, at least (a marked request that was collected
 * without being taken still counts): while 0, the gate's question for every
 * request needs no lookup.
 */
let marks = 0;

/** The request queue held this request aside for its `throttlingDelayMs`. */
export function markRequestDelayed(request: unknown): void {
  if (typeof request !== "object" || request === null || delayedByQueue.has(request)) return;
  delayedByQueue.add(request);
  marks++;
}

/**
 * Whether the queue already applied this request's delay; forgets the mark,
 * so the request counts as new if it is sent through again later.
 */
export function takeRequestDelayed(request: unknown): boolean {
  if (marks === 0 || typeof request !== "object" || request === null) return false;
  if (!delayedByQueue.delete(request)) return false;
  marks--;
  return true;
}
