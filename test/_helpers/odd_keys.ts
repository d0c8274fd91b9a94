/**
 * Keys that trip code which treats a plain object as a dictionary: the names
 * of `Object.prototype`'s properties, and odd Unicode (NUL, lone surrogates,
 * zero-width and bidi controls, combining marks, astral characters).
 *
 * @module
 */
import fc from "fast-check";

/** Names `Object.prototype` answers to (`__proto__` is an accessor there). */
export const PROTOTYPE_NAMES: readonly string[] = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "isPrototypeOf",
  "propertyIsEnumerable",
  "toLocaleString",
  "__defineGetter__",
  "__lookupSetter__",
];

/** One of {@link PROTOTYPE_NAMES}. */
export const prototypeName: fc.Arbitrary<string> = fc.constantFrom(...PROTOTYPE_NAMES);

/** A non-empty string of odd Unicode, sometimes glued to a prototype name. */
export const oddUnicode: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    "\u0000",
    "\u200b",
    "\u202e",
    "\ud800",
    "\udfff",
    "e\u0301",
    "\u{1f600}",
    "\ufeff",
    " ",
    "\u0130",
    "__proto__\u0000",
    "\u200bconstructor",
  ),
  fc.string({ unit: "binary", minLength: 1, maxLength: 6 }),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 3 }),
);

/** A key from either family, prototype names drawn often. */
export const oddKey: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: prototypeName, weight: 2 },
  { arbitrary: oddUnicode, weight: 1 },
);
