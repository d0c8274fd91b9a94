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
 * The ring grows by doubling up to 2,048 slots (1,024 tickets); past that,
 * tickets go to a list of fixed chunks of as many slots, oldest first, and
 * nothing is copied again. Doubling a ring to the 2^19 slots of the core
 * bench's backlog (192,000 tickets behind the global cap) copied a million
 * slots into ever larger fresh arrays each time a backlog built up: 16% of
 * the gate's time in steady state, by profile.
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
/** The ring's largest size in slots (a power of two); more tickets go to chunks. */
const RING_SLOTS = 2048;
/** Ticket slots of an overflow chunk (a multiple of STRIDE); one more slot links the next. */
const CHUNK_SLOTS = 2048;

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
  /** Slot index of the ring's first ticket. */
  #head = 0;
  /** Tickets in the ring. */
  #ringSize = 0;
  /** Tickets in all, the ring's and the chunks'. */
  #size = 0;
  /**
   * Tickets stored with a `Ticket` (the rare case): while none is, the
   * accessors of the head need no type check (an `instanceof` each, three
   * or four per ticket the gate starts).
   */
  #boxed = 0;
  /**
   * The owner of the tickets stored without a `Ticket`: that of the first
   * ticket pushed while the queue was empty (one gate subscription, nearly
   * always).
   */
  #owner: GateOwner | undefined;
  readonly #ringMax: number;
  readonly #chunkSlots: number;
  /**
   * The chunks, oldest first, each linked to the next by its last slot; only
   * while the ring is full or its tickets are older than all of theirs.
   */
  #first: unknown[] | undefined;
  /** Slot index of the first ticket in `#first`. */
  #firstAt = 0;
  #last: unknown[] | undefined;
  /** Slot index where the next ticket goes in `#last`. */
  #lastAt = 0;
  /** One emptied chunk kept for the next. */
  #spare: unknown[] | undefined;

  /**
   * @param ringMax The ring's largest size in slots, a power of two of at
   *   least 8 (tests make it small). @default 2048
   * @param chunkSlots Ticket slots per chunk, a multiple of 2. @default 2048
   */
  constructor(ringMax: number = RING_SLOTS, chunkSlots: number = CHUNK_SLOTS) {
    this.#ringMax = ringMax;
    this.#chunkSlots = chunkSlots;
  }

  /** Tickets waiting. */
  get size(): number {
    return this.#size;
  }

  push(owner: GateOwner, request: unknown, attempt: number, claims: RequestScopes): void {
    if (this.#size === 0) this.#owner = owner;
    let rest: unknown = claims;
    if (owner !== this.#owner || attempt !== 1) {
      rest = new Ticket(owner, attempt, claims);
      this.#boxed++;
    }
    this.#size++;
    if (this.#first === undefined) {
      if (this.#ringSize * STRIDE === this.#slots.length) {
        if (this.#slots.length < this.#ringMax) this.#grow();
        else {
          this.#pushChunk(request, rest);
          return;
        }
      }
      const slots = this.#slots;
      const i = (this.#head + this.#ringSize * STRIDE) & (slots.length - 1);
      slots[i] = request;
      slots[i + 1] = rest;
      this.#ringSize++;
      return;
    }
    // Behind the tickets already in chunks, whatever room the ring has.
    this.#pushChunk(request, rest);
  }

  /** The first ticket's owner; read only while `size > 0`. */
  headOwner(): GateOwner {
    if (this.#boxed === 0) return this.#owner!;
    const rest = this.#headRest();
    return rest instanceof Ticket ? rest.owner : this.#owner!;
  }

  /** The first ticket's request; read only while `size > 0`. */
  headRequest(): unknown {
    return this.#ringSize > 0 ? this.#slots[this.#head] : this.#first![this.#firstAt];
  }

  /** The first ticket's attempt; read only while `size > 0`. */
  headAttempt(): number {
    if (this.#boxed === 0) return 1;
    const rest = this.#headRest();
    return rest instanceof Ticket ? rest.attempt : 1;
  }

  /** The first ticket's scopes; read only while `size > 0`. */
  headClaims(): RequestScopes {
    const rest = this.#headRest();
    if (this.#boxed === 0) return rest as RequestScopes;
    return rest instanceof Ticket ? rest.claims : rest as RequestScopes;
  }

  /** Move the first ticket to the end of `other`. */
  moveHeadTo(other: TicketQueue): void {
    const rest = this.#headRest();
    const request = this.headRequest();
    if (rest instanceof Ticket) other.push(rest.owner, request, rest.attempt, rest.claims);
    else other.push(this.#owner!, request, 1, rest as RequestScopes);
    this.shift();
  }

  /** Drop the first ticket (read it first). */
  shift(): void {
    if (this.#size === 0) return;
    if (this.#boxed > 0 && this.#headRest() instanceof Ticket) this.#boxed--;
    if (this.#ringSize > 0) {
      const slots = this.#slots;
      const h = this.#head;
      slots[h] = slots[h + 1] = undefined;
      this.#head = (h + STRIDE) & (slots.length - 1);
      this.#ringSize--;
    } else {
      const first = this.#first!;
      const at = this.#firstAt;
      first[at] = first[at + 1] = undefined;
      this.#firstAt = at + STRIDE;
      if (first === this.#last && this.#firstAt === this.#lastAt) {
        // The chunks are empty: the ring takes the next tickets again.
        this.#first = this.#last = undefined;
        this.#firstAt = this.#lastAt = 0;
        this.#spare = first;
      } else if (this.#firstAt === this.#chunkSlots) {
        const next = first[this.#chunkSlots] as unknown[];
        first[this.#chunkSlots] = undefined;
        this.#first = next;
        this.#firstAt = 0;
        this.#spare = first;
      }
    }
    // Empty: keep no gate that may have ended alive.
    if (--this.#size === 0) this.#owner = undefined;
  }

  /** Drop every ticket of an owner, keeping the others in order; returns how many went. */
  dropOwner(owner: GateOwner): number {
    // Rare (a subscription ended): the tickets kept are pushed again, in order.
    const common = this.#owner;
    const kept: unknown[] = [];
    const size = this.#size;
    while (this.#size > 0) {
      const rest = this.#headRest();
      const ticket = rest instanceof Ticket ? rest : undefined;
      const of = ticket !== undefined ? ticket.owner : common;
      if (of !== owner) {
        kept.push(of, this.headRequest(), ticket?.attempt ?? 1, ticket?.claims ?? rest);
      }
      this.shift();
    }
    for (let i = 0; i < kept.length; i += 4) {
      this.push(
        kept[i] as GateOwner,
        kept[i + 1],
        kept[i + 2] as number,
        kept[i + 3] as RequestScopes,
      );
    }
    return size - kept.length / 4;
  }

  /** The first ticket's second slot: its scopes or a `Ticket`. */
  #headRest(): unknown {
    return this.#ringSize > 0 ? this.#slots[this.#head + 1] : this.#first![this.#firstAt + 1];
  }

  #pushChunk(request: unknown, rest: unknown): void {
    let last = this.#last;
    if (last === undefined) {
      last = this.#first = this.#last = this.#newChunk();
      this.#firstAt = this.#lastAt = 0;
    } else if (this.#lastAt === this.#chunkSlots) {
      const chunk = this.#newChunk();
      last[this.#chunkSlots] = chunk;
      last = this.#last = chunk;
      this.#lastAt = 0;
    }
    const at = this.#lastAt;
    last[at] = request;
    last[at + 1] = rest;
    this.#lastAt = at + STRIDE;
  }

  #newChunk(): unknown[] {
    const spare = this.#spare;
    if (spare !== undefined) {
      this.#spare = undefined;
      return spare;
    }
    return new Array(this.#chunkSlots + 1);
  }

  /** Called when the ring is full and below its largest size: doubles it, the tickets first in order. */
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
