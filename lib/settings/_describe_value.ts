/**
 * A value as an error message shows it ("current value is ..."): its JSON,
 * or `String(value)` when it has none (undefined, a function, a cycle).
 *
 * @module
 */

/**
 * @param value Anything.
 * @param maxLength Longer text is cut there and ends with `...`.
 * @returns The text.
 */
export function describeValue(value: unknown, maxLength = Infinity): string {
  let s: string;
  try {
    s = JSON.stringify(value) ?? String(value);
  } catch {
    s = String(value);
  }
  return s.length > maxLength ? s.slice(0, maxLength) + "..." : s;
}
