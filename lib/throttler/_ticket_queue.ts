/**
 * The requests waiting at the gate, in one scope's list or behind the global
 * cap: a first-in-first-out queue whose tickets are not objects. Each ticket
 * is two consecutive slots of one ring buffer, its request and its scopes,
 * so a backlog costs its slots and nothing else: no object per waiting
 * request for the garbage collector to copy as the backlog ages
 * (bench/core.bench.ts queues 200,000 requests at once). A ticket of another
 * owner than the queue's, or a retry (attempt > 1), is the rare case: its
 * second slot holds a `Ticket` object with the rest.
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

/** Slots per ticket: the request, then its scopes or a `Ticket`. */
const STRIDE = 2;

/** A ticket that is not the common case (see the module doc). */
class Ticket {
  constructor(
    readonly owner: GateOwner,
    readonly attempt: number,
    readonly claims: RequestScopes,
  ) {}
}

/** A FIFO of waiting requests (see the module doc). */
export class TicketQueue {
  /** A power of two of slots, a multiple of STRIDE. */
  #slots: unknown[] = new Array(4 * STRIDE);
  /** Slot index of the first ticket. */
  #head = 0;
  #size = 0;
  /**
   * The owner of the tickets stored without a `Ticket`: that of the first
   * ticket pushed while the queue was empty (one gate subscription, nearly
   * always).
   */
  #owner: GateOwner | undefined;

  /** Tickets waiting. */
  get size(): number {
    return this.#size;
  }

  push(owner: GateOwner, request: unknown, attempt: number, claims: RequestScopes): void {
    if (this.#size === 0) this.#owner = owner;
    else if (this.#size * STRIDE === this.#slots.length) this.#grow();
    const slots = this.#slots;
    const i = (this.#head + this.#size * STRIDE) & (slots.length - 1);
    slots[i] = request;
    slots[i + 1] = owner === this.#owner && attempt === 1
      ? claims
      : new Ticket(owner, attempt, claims);
    this.#size++;
  }

  /** The first ticket's owner; read only while `size > 0`. */
  headOwner(): GateOwner {
    const rest = this.#slots[this.#head + 1];
    return rest instanceof Ticket ? rest.owner : this.#owner!;
  }

  /** The first ticket's request; read only while `size > 0`. */
  headRequest(): unknown {
    return this.#slots[this.#head];
  }

  /** The first ticket's attempt; read only while `size > 0`. */
  headAttempt(): number {
    const rest = this.#slots[this.#head + 1];
    return rest instanceof Ticket ? rest.attempt : 1;
  }

  /** The first ticket's scopes; read only while `size > 0`. */
  headClaims(): RequestScopes {
    const rest = this.#slots[this.#head + 1];
    return rest instanceof Ticket ? rest.claims : rest as RequestScopes;
  }

  /** Move the first ticket to the end of `other`. */
  moveHeadTo(other: TicketQueue): void {
    const slots = this.#slots;
    const h = this.#head;
    const rest = slots[h + 1];
    if (rest instanceof Ticket) other.push(rest.owner, slots[h], rest.attempt, rest.claims);
    else other.push(this.#owner!, slots[h], 1, rest as RequestScopes);
    this.shift();
  }

  /** Drop the first ticket (read it first). */
  shift(): void {
    if (this.#size === 0) return;
    const slots = this.#slots;
    const h = this.#head;
    slots[h] = slots[h + 1] = undefined;
    this.#head = (h + STRIDE) & (slots.length - 1);
    // Empty: keep no gate that may have ended alive.
    if (--this.#size === 0) this.#owner = undefined;
  }

  /** Drop every ticket of an owner, keeping the others in order; returns how many went. */
  dropOwner(owner: GateOwner): number {
    const slots = this.#slots;
    const mask = slots.length - 1;
    const common = this.#owner;
    let kept = 0;
    // Compact in place: the kept tickets move towards the head, in order.
    for (let t = 0; t < this.#size; t++) {
      const from = (this.#head + t * STRIDE) & mask;
      const rest = slots[from + 1];
      if ((rest instanceof Ticket ? rest.owner : common) === owner) continue;
      const to = (this.#head + kept * STRIDE) & mask;
      if (to !== from) {
        slots[to] = slots[from];
        slots[to + 1] = rest;
      }
      kept++;
    }
    for (let t = kept; t < this.#size; t++) {
      const i = (this.#head + t * STRIDE) & mask;
      slots[i] = slots[i + 1] = undefined;
    }
    const dropped = this.#size - kept;
    this.#size = kept;
    if (kept === 0) this.#owner = undefined;
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
