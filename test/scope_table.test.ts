import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hashScope, ScopeTable, type Slotted } from "../lib/throttler/_scope_table.ts";

interface Entry extends Slotted {
  readonly scope: string;
  slot: number;
}

const entry = (scope: string): Entry => ({ scope, slot: -1 });

/** Names that all fall in one home slot of a table of `capacity` (a long probe run). */
function collidingNames(count: number, capacity: number): string[] {
  const out: string[] = [];
  const home = hashScope("c0") & (capacity - 1);
  for (let i = 0; out.length < count; i++) {
    const name = `c${i}`;
    if ((hashScope(name) & (capacity - 1)) === home) out.push(name);
  }
  return out;
}

describe("ScopeTable", () => {
  it("ScopeTable finds, adds and deletes entries by scope name", () => {
    const t = new ScopeTable<Entry>();
    const a = entry("a.test");
    expect(t.get("a.test")).toBeUndefined();
    t.add(a);
    expect(t.get("a.test")).toBe(a);
    expect(t.size).toBe(1);
    expect(a.slot).toBeGreaterThanOrEqual(0);
    t.delete(a);
    expect(t.get("a.test")).toBeUndefined();
    expect(a.slot).toBe(-1);
    expect(t.size).toBe(0);
    t.delete(a); // deleting twice is a no-op
    expect(t.size).toBe(0);
  });

  it("ScopeTable keeps every entry of a colliding probe run findable when one in the middle goes", () => {
    // Seven names with one home slot in the first table (capacity 16): a run of seven.
    const names = collidingNames(7, 16);
    const t = new ScopeTable<Entry>();
    const entries = names.map(entry);
    for (const e of entries) {
      expect(t.get(e.scope)).toBeUndefined();
      t.add(e);
    }
    t.delete(entries[2]!);
    t.delete(entries[0]!);
    for (const [i, e] of entries.entries()) {
      expect(t.get(e.scope)).toBe(i === 0 || i === 2 ? undefined : e);
    }
    expect([...t.values()].map((e) => e.scope).sort()).toEqual(
      names.filter((_, i) => i !== 0 && i !== 2).sort(),
    );
  });

  it("ScopeTable grows and shrinks back, keeping every entry", () => {
    const t = new ScopeTable<Entry>();
    const entries = Array.from({ length: 5000 }, (_, i) => entry(`h${i}.example.com`));
    for (const e of entries) t.add(e);
    expect(t.size).toBe(5000);
    for (const e of entries.slice(0, 4990)) t.delete(e);
    expect(t.size).toBe(10);
    for (const e of entries.slice(4990)) expect(t.get(e.scope)).toBe(e);
    expect(t.get("h0.example.com")).toBeUndefined();
  });

  it("ScopeTable answers as a Map would, over any sequence of adds, deletes and lookups", () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant("add" as const), name: fc.integer({ min: 0, max: 60 }) }),
      fc.record({ kind: fc.constant("delete" as const), name: fc.integer({ min: 0, max: 60 }) }),
      fc.record({ kind: fc.constant("get" as const), name: fc.integer({ min: 0, max: 60 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const t = new ScopeTable<Entry>();
        const m = new Map<string, Entry>();
        for (const o of ops) {
          const name = `s${o.name}`;
          if (o.kind === "add") {
            if (t.get(name) === undefined) {
              const e = entry(name);
              t.add(e);
              m.set(name, e);
            }
          } else if (o.kind === "delete") {
            const e = m.get(name);
            if (e !== undefined) {
              t.delete(e);
              m.delete(name);
            }
          }
          expect(t.get(name)).toBe(m.get(name));
          expect(t.size).toBe(m.size);
        }
        for (const [name, e] of m) expect(t.get(name)).toBe(e);
        expect(new Set(t.values())).toEqual(new Set(m.values()));
      }),
    );
  });

  it("ScopeTable.add() after a lookup of another name still stores at the right place", () => {
    const t = new ScopeTable<Entry>();
    expect(t.get("a.test")).toBeUndefined();
    const b = entry("b.test");
    t.add(b); // the miss was for a.test: b.test must be hashed itself
    expect(t.get("b.test")).toBe(b);
    expect(t.get("a.test")).toBeUndefined();
  });
});
