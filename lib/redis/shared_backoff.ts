/**
 * `shareBackoff`: tells the other processes of a {@link RedisScopes} cluster
 * about this throttler's backoff and holds, and applies theirs to it.
 *
 * @module
 */
import { Subscription } from "rxjs";
import type { Throttler } from "../throttler/throttler.ts";
import {
  type RedisScopes,
  RedisScopesError,
  type SharedBackoffMessage,
  warnOnThrottler,
} from "./redis_scopes.ts";

/** Options of {@link shareBackoff}. */
export interface ShareBackoffOptions {
  /**
   * Told when publishing fails (the local throttler has backed off all the
   * same; the others miss this step).
   * @default a `warning` event on the throttler (code `redis-scopes`), once per message
   */
  readonly onError?: (error: RedisScopesError) => void;
}

/** The most backoff steps one message may take locally (a guard against a wild level). */
const MAX_STEPS = 32;

type Outgoing = Omit<SharedBackoffMessage, "type" | "from">;

/**
 * Share backoff between the throttlers of several processes.
 *
 * Outgoing: each `backoff` event of the throttler (with the `hold` that came
 * with it, if any) is published with the level it reached. Incoming: a hold
 * is applied as the same trigger the sender saw (`recordBackoff` with the
 * hold), then the scope steps up until its level is at least the sender's;
 * a scope already as far backed off takes no step. What is applied is not
 * published again (no echo between processes), and a process ignores its
 * own messages. Recovery stays local: each throttler recovers on its own
 * clock.
 *
 * @param scopes The shared store (its channel carries the messages).
 * @param throttler This process's throttler.
 * @param options Error reporting.
 * @returns A subscription; unsubscribe to stop sharing.
 * @example
 * ```ts
 * import { createClient } from "redis";
 * import { createThrottler } from "../throttler/throttler.ts";
 * import { createRedisScopes } from "./redis_scopes.ts";
 * import { shareBackoff } from "./shared_backoff.ts";
 * const client = await createClient({ url: "redis://127.0.0.1:6390" }).connect();
 * const shared = await createRedisScopes(client, { prefix: "crawl-42:" });
 * const throttler = createThrottler();
 * const sharing = shareBackoff(shared, throttler);
 * // ... crawl ...
 * sharing.unsubscribe();
 * ```
 */
export function shareBackoff<R>(
  scopes: RedisScopes,
  throttler: Throttler<R>,
  options: ShareBackoffOptions = {},
): Subscription {
  const onError = options.onError ?? warnOnThrottler(throttler);
  let applying = false;
  /** Backoff events of this turn, per scope: a hold event follows its backoff event synchronously. */
  let pending: Map<string, Outgoing> | undefined;

  const publish = (message: Outgoing) => {
    let sent: Promise<void>;
    try {
      sent = scopes.publishBackoff(message);
    } catch (error) {
      onError(RedisScopesError.from("publish", [message.scope], error));
      return;
    }
    sent.catch((error) => onError(RedisScopesError.from("publish", [message.scope], error)));
  };

  const flush = () => {
    const out = pending;
    pending = undefined;
    if (out === undefined) return;
    for (const message of out.values()) publish(message);
  };

  /** Publish `message` at the end of this turn, in place of an earlier one of its scope. */
  const queue = (message: Outgoing) => {
    if (pending === undefined) {
      pending = new Map();
      queueMicrotask(flush);
    }
    pending.set(message.scope, message);
  };

  const subscription = new Subscription();
  subscription.add(throttler.events$.subscribe((event) => {
    // Events raised while a peer's message is applied are the peer's, not news.
    if (applying) return;
    // A trigger taken for noise changed nothing: no news for peers either.
    if (event.type === "backoff" && event.noise !== true) {
      queue({
        scope: event.scope,
        level: event.level,
        delayMs: event.delayMs,
        cause: event.cause,
        hold: pending?.get(event.scope)?.hold,
      });
    } else if (event.type === "hold") {
      const hold = { ms: Math.max(0, event.until - event.at), source: event.source };
      // With its backoff event of this turn, or on its own (published with
      // the level the scope is at). Sent now, not at the end of the turn: the
      // hold comes while the outcome that brought it is emitted, before
      // sharedDownload releases that request's lease, so Redis stores the
      // hold before the slot frees (one connection keeps the order) and no
      // process is granted the scope in between.
      const message = {
        ...(pending?.get(event.scope) ?? {
          scope: event.scope,
          level: throttler.state(event.scope)?.backoffLevel ?? 0,
          cause: "hold",
        }),
        hold,
      };
      pending?.delete(event.scope);
      publish(message);
    }
  }));
  // Backoffs only, where the store has them: every release message of the
  // cluster would otherwise be decoded whole for this subscription.
  subscription.add((scopes.backoffs$ ?? scopes.messages$).subscribe((message) => {
    if (message.type !== "backoff") return;
    applying = true;
    try {
      apply(throttler, message);
    } finally {
      applying = false;
    }
  }));
  subscription.add(flush);
  return subscription;
}

function apply<R>(throttler: Throttler<R>, message: SharedBackoffMessage): void {
  const scope = message.scope;
  const cause = `${message.cause} (shared)`;
  if (message.hold !== undefined && message.hold.ms > 0) {
    // The sender's hold is already capped: do not cap it again. A rate-limit
    // hold that came without a backoff (an announced budget spent, or a
    // refusal the headers explained) is a hold here too, not a step.
    const explained = message.cause === "hold" && message.hold.source === "ratelimit";
    throttler.recordBackoff(
      scope,
      { holdMs: message.hold.ms, uncapped: true, cause, ...(explained ? { explained } : {}) },
      message.hold.source,
    );
  }
  // An adaptive sender has no levels: it tells the pace it learned, and a
  // slower one is adopted here (the shared leases then space the cluster).
  const delayMs = message.delayMs;
  if (
    message.level === 0 && typeof delayMs === "number" && Number.isFinite(delayMs) && delayMs > 0
  ) {
    throttler.adoptDelay(scope, delayMs, cause);
    return;
  }
  for (let i = 0; i < MAX_STEPS; i++) {
    const level = throttler.state(scope)?.backoffLevel ?? 0;
    if (level >= message.level) return;
    throttler.recordBackoff(scope, { cause });
    // A manager that does not step (instant recovery, rampup's cut) stays put.
    if ((throttler.state(scope)?.backoffLevel ?? 0) <= level) return;
  }
}
