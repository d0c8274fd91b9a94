/**
 * The requests waiting at the gate, in one scope's list or behind the global
 * cap: a first-in-first-out queue whose tickets are not objects. Each ticket
 * is four consecutive slots of one ring buffer (its owner, request, attempt
 * and scopes), so a backlog costs its slots and nothing else: no object per
 * waiting request for the garbage collector to copy as the backlog ages
 * (bench/core.bench.ts queues 200,000 requests at once).
 *
 * @module
 */
import type { RequestScopes } from "../scopes/scopes.ts";

/** Whoever submits requests to the gate (a `throttleByScope` subscription). */
export interface GateOwner {
  /**
   * Called once per submitted request, when it has been counted against all
   * its scopes and may start; `sentAt` is the time its send was recorded at.
   * `slot` is an opaque token to give back to `release` (it spares a lookup
   * there).
   */
  start(
    request: unknown,
    attempt: number,
    claims: RequestScopes,
    sentAt: number,
    slot: object | undefined,
  ): void;
}

/** Slots per ticket: owner, request, attempt, claims. */
const STRIDE = 4;

/** A FIFO of waiting requests (see the module doc). */
export class TicketQueue {
  /** A power of two of slots, a multiple of STRIDE. */
  #slots: unknown[] = new Array(4 * STRIDE);
  /** Slot index of the first ticket. */
  #head = 0;
  #size = 0;

  /** Tickets waiting. */
  get size(): number {
    return this.#size;
  }

  push(owner: GateOwner, request: unknown, attempt: number, claims: RequestScopes): void {
    if (this.#size * STRIDE === this.#slots.length) this.#grow();
    const slots = this.#slots;
    const i = (this.#head + this.#size * STRIDE) & (slots.length - 1);
    slots[i] = owner;
    slots[i + 1] = request;
    slots[i + 2] = attempt;
    slots[i + 3] = claims;
    this.#size++;
  }

  /** The first ticket's owner; read only while `size > 0`. */
  headOwner(): GateOwner {
    return this.#slots[this.#head] as GateOwner;
  }

  /** The first ticket's request; read only while `size > 0`. */
  headRequest(): unknown {
    return this.#slots[this.#head + 1];
  }

  /** The first ticket's attempt; read only while `size > 0`. */
  headAttempt(): number {
    return this.#slots[this.#head + 2] as number;
  }

  /** The first ticket's scopes; read only while `size > 0`. */
  headClaims(): RequestScopes {
    return this.#slots[this.#head + 3] as RequestScopes;
  }

  /** Drop the first ticket (read it first). */
  shift(): void {
    if (this.#size === 0) return;
    const slots = this.#slots;
    const h = this.#head;
    slots[h] =
      slots[h + 1] =
      slots[h + 2] =
      slots[h + 3] =
        undefined;
    this.#head = (h + STRIDE) & (slots.length - 1);
    this.#size--;
  }

  /** Drop every ticket of an owner, keeping the others in order; returns how many went. */
  dropOwner(owner: GateOwner): number {
    const slots = this.#slots;
    const mask = slots.length - 1;
    let kept = 0;
    // Compact in place: the kept tickets move towards the head, in order.
    for (let t = 0; t < this.#size; t++) {
      const from = (this.#head + t * STRIDE) & mask;
      if (slots[from] === owner) continue;
      const to = (this.#head + kept * STRIDE) & mask;
      if (to !== from) {
        slots[to] = slots[from];
        slots[to + 1] = slots[from + 1];
        slots[to + 2] = slots[from + 2];
        slots[to + 3] = slots[from + 3];
      }
      kept++;
    }
    for (let t = kept; t < this.#size; t++) {
      const i = (this.#head + t * STRIDE) & mask;
      slots[i] =
        slots[i + 1] =
        slots[i + 2] =
        slots[i + 3] =
          undefined;
    }
    const dropped = this.#size - kept;
    this.#size = kept;
    return dropped;
  }

  /** Called when full: doubles the buffer, the tickets first in order. */
  #grow(): void {
    const old = this.#slots;
    const head = this.#head;
    const next: unknown[] = new Array(old.length * 2);
    let j = 0;
    for (let i = head; i < old.length; i++) next[j++] = old[i];
    for (let i = 0; i < head; i++) next[j++] = old[i];
    this.#slots = next;
    this.#head = 0;
  }
}
