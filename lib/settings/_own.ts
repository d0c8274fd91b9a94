/**
 * Plain objects used as dictionaries of names a user wrote (meta keys, scope
 * names, setting names), read and written as own properties only. A plain
 * `table[key]` reads `Object.prototype` for `"constructor"` or `"toString"`
 * (a function where a value was expected), and `out[key] = value` with
 * `"__proto__"` replaces the object's prototype instead of storing the value.
 * Private helper.
 *
 * @module
 */

/**
 * `table[key]` when `key` is the table's own property, else `undefined`.
 *
 * @example
 * ```ts
 * import { own } from "./_own.ts";
 * console.assert(own({ a: 1 }, "constructor") === undefined);
 * ```
 */
export function own<T>(table: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/**
 * Stores `value` under `key` as an own, enumerable data property, whatever
 * the key (`"__proto__"` included), as `JSON.parse` and object spread do.
 *
 * @example
 * ```ts
 * import { setOwn } from "./_own.ts";
 * const out: Record<string, unknown> = {};
 * setOwn(out, "__proto__", 1);
 * console.assert(Object.keys(out)[0] === "__proto__" && Object.getPrototypeOf(out) === Object.prototype);
 * ```
 */
export function setOwn<T>(target: Record<string, T>, key: string, value: T): void {
  Object.defineProperty(target, key, {
    value,
    writable: true,
    enumerable: true,
    configurable: true,
  });
}
