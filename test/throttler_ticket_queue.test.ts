import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RequestScopes } from "../lib/scopes/scopes.ts";
import { type GateOwner, TicketQueue } from "../lib/throttler/_ticket_queue.ts";

const owners: GateOwner[] = [0, 1, 2].map(() => ({ start: () => {} }));
/** Two sets of scopes, so a queue holds tickets of several (the global queue does). */
const claims: RequestScopes[] = [
  { names: ["a"], amounts: undefined },
  { names: ["a", "b"], amounts: undefined },
];
/** Tickets vary in owner, attempt and scopes: each of the three has a common and a rare case. */
const attemptOf = (id: number) => id % 5 === 0 ? 1 + id % 3 : 1;
const claimsOf = (id: number) => claims[id % 7 === 0 ? 1 : 0]!;

function drain(q: TicketQueue): [number, number][] {
  const out: [number, number][] = [];
  while (q.size > 0) {
    const id = q.headRequest() as number;
    out.push([owners.indexOf(q.headOwner()), id]);
    expect(q.headAttempt()).toBe(id < 0 ? 1 : attemptOf(id));
    expect(q.headClaims()).toBe(id < 0 ? claims[0] : claimsOf(id));
    q.shift();
  }
  return out;
}

describe("TicketQueue", () => {
  // The default sizes, and a ring of 8 slots with chunks of 4, so that a few
  // hundred operations go through the chunks, their links and their reuse.
  for (
    const [label, make] of [
      ["", () => new TicketQueue()],
      [" and chunks", () => new TicketQueue(8, 4)],
    ] as const
  ) {
    it(`TicketQueue keeps its tickets first in, first out through growth, wrapping${label}, dropOwner and moveHeadTo`, () => {
      // Operations: push a ticket of an owner, shift one, drop an owner's
      // tickets, or move the first ticket to a second queue (pushed to by
      // another owner first, so moved tickets change between common and rare).
      const op = fc.oneof(
        fc.record({ push: fc.integer({ min: 0, max: 2 }) }),
        fc.constant({ shift: true }),
        fc.record({ drop: fc.integer({ min: 0, max: 2 }) }),
        fc.constant({ move: true }),
      );
      fc.assert(
        fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
          const q = make();
          const model: [number, number][] = [];
          const other = make();
          const otherModel: [number, number][] = [];
          let id = 0;
          for (const o of ops) {
            if ("push" in o) {
              q.push(owners[o.push]!, id, attemptOf(id), claimsOf(id));
              model.push([o.push, id++]);
            } else if ("move" in o) {
              if (model.length > 0) {
                if (other.size === 0) {
                  other.push(owners[2]!, -1, 1, claims[0]!);
                  otherModel.push([2, -1]);
                }
                q.moveHeadTo(other);
                otherModel.push(model.shift()!);
              }
            } else if ("shift" in o) {
              if (model.length > 0) {
                expect([owners.indexOf(q.headOwner()), q.headRequest()]).toEqual(model[0]);
                expect(q.headAttempt()).toBe(attemptOf(model[0]![1]));
                expect(q.headClaims()).toBe(claimsOf(model[0]![1]));
              }
              q.shift();
              model.shift();
            } else {
              const before = model.length;
              const kept = model.filter(([owner]) => owner !== o.drop);
              expect(q.dropOwner(owners[o.drop]!)).toBe(before - kept.length);
              model.splice(0, model.length, ...kept);
            }
            expect(q.size).toBe(model.length);
          }
          expect(drain(q)).toEqual(model);
          expect(drain(other)).toEqual(otherModel);
        }),
        { numRuns: 300 },
      );
    });
  }
});
