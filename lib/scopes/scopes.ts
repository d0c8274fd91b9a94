/**
 * A request's throttling scopes: how they are written (`ScopesInput`), how the
 * throttler holds them (`RequestScopes`), and the reference's helpers
 * `addScope` and `scopeCache`. The default scope of a URL (its host) is
 * `hostScope` in `domain_scopes.ts`.
 *
 * @module
 */
import type { ScopesInput } from "../request.ts";
import { own, setOwn } from "../settings/_own.ts";

/** Scopes as the throttler holds them: names, and the quota amount of each (or undefined). */
export interface RequestScopes {
  readonly names: readonly string[];
  /** Quota amounts, index for index with `names`; `undefined` when no scope has one. */
  readonly amounts: readonly (number | undefined)[] | undefined;
}

/** Thrown (and turned into a failed outcome) for a request whose scopes cannot be worked out. */
export class InvalidScopesError extends TypeError {
  override readonly name = "InvalidScopesError";
  /** The value that was given as scopes. */
  readonly input: unknown;
  constructor(message: string, input: unknown) {
    super(message);
    this.input = input;
  }
}

/**
 * Normalise scopes as a user writes them.
 *
 * @param input A scope name, an iterable of names, or `{scope: amount}`.
 * @returns Names (deduplicated, in order) and amounts.
 * @throws {InvalidScopesError} for an empty name, a non-finite or negative amount, or a wrong shape.
 * @example
 * ```ts
 * import { normalizeScopes } from "./scopes.ts";
 * const s = normalizeScopes({ api: 2, "example.com": 1 });
 * console.assert(s.names.length === 2 && s.amounts?.[0] === 2);
 * ```
 */
export function normalizeScopes(input: ScopesInput): RequestScopes {
  if (typeof input === "string") {
    if (input === "") {
      throw new InvalidScopesError("Invalid throttling scopes: empty scope name", input);
    }
    return { names: [input], amounts: undefined };
  }
  if (input === null || typeof input !== "object") {
    throw new InvalidScopesError(
      `Invalid throttling scopes: expected a string, an iterable of strings or a record of amounts: current value is ${
        String(input)
      }`,
      input,
    );
  }
  if (Symbol.iterator in input) {
    const names: string[] = [];
    for (const name of input as Iterable<unknown>) {
      if (typeof name !== "string" || name === "") {
        throw new InvalidScopesError(
          `Invalid throttling scopes: scope names must be non-empty strings: current value is ${
            String(name)
          }`,
          input,
        );
      }
      if (!names.includes(name)) names.push(name);
    }
    return { names, amounts: undefined };
  }
  const names: string[] = [];
  const amounts: (number | undefined)[] = [];
  for (const [name, amount] of Object.entries(input)) {
    if (name === "") {
      throw new InvalidScopesError("Invalid throttling scopes: empty scope name", input);
    }
    if (typeof amount !== "number" || !Number.isFinite(amount) || amount < 0) {
      throw new InvalidScopesError(
        `Invalid throttling scopes: amount of '${name}' must be a finite number >= 0: current value is ${
          String(amount)
        }`,
        input,
      );
    }
    names.push(name);
    amounts.push(amount);
  }
  return { names, amounts };
}

/**
 * Add a scope to scopes returned by a scope function (the reference's `add_scope`).
 *
 * @param scopes Scopes in any accepted form.
 * @param scope The scope to add.
 * @param amount Its quota amount, if any.
 * @returns The scopes in record form when any scope has an amount, else as an array.
 */
export function addScope(
  scopes: ScopesInput | undefined,
  scope: string,
  amount?: number,
): ScopesInput {
  const base = scopes === undefined ? { names: [], amounts: undefined } : normalizeScopes(scopes);
  if (amount === undefined && base.amounts === undefined) {
    return base.names.includes(scope) ? [...base.names] : [...base.names, scope];
  }
  // Scope names are data: "__proto__" or "constructor" is a scope like any other.
  const record: Record<string, number> = {};
  base.names.forEach((name, i) => {
    setOwn(record, name, base.amounts?.[i] ?? 0);
  });
  setOwn(record, scope, amount ?? own(record, scope) ?? 0);
  return record;
}

/**
 * Memoise a scope function per request object (the reference's `scope_cache`),
 * so an async lookup (DNS, an API) runs once per request even across retries.
 *
 * @param fn The scope function.
 * @returns The memoised function (string requests are not cached: they have no identity).
 */
export function scopeCache<R, S>(fn: (request: R) => S): (request: R) => S {
  const cache = new WeakMap<object, S>();
  return (request: R): S => {
    if (typeof request !== "object" || request === null) return fn(request);
    const key = request as unknown as object;
    if (cache.has(key)) return cache.get(key) as S;
    const value = fn(request);
    cache.set(key, value);
    return value;
  };
}
