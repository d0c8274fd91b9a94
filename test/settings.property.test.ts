import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { resolveCliSettings } from "../lib/cli/cli_settings.ts";
import { fromScrapySettings, loadSettings } from "../lib/settings/scrapy_settings.ts";
import { parseSettings, resolveScopeConfig, settingsSchema } from "../lib/settings/settings.ts";
import { oddKey } from "./_helpers/odd_keys.ts";

/** Runs `f`; its error, or `undefined` when it returned. */
function thrown(f: () => unknown): Error | undefined {
  try {
    f();
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

const scopeName = oddKey;
/** Names that are no setting of ours (camelCase) or Scrapy's (UPPER_CASE). */
const unknownName = oddKey.filter((k) =>
  !Object.hasOwn(settingsSchema.shape, k) && !/^[A-Z][A-Z0-9_]*$/.test(k)
);

const PROTO_SCOPE =
  `is invalid (a scope cannot be named "__proto__", which JavaScript reserves): current value is`;

describe("settings with prototype-named and odd Unicode keys", () => {
  it("parseSettings() configures a scope of any name, and refuses only __proto__, naming it", () => {
    fc.assert(
      fc.property(scopeName, fc.integer({ min: 1, max: 50 }), (name, concurrency) => {
        const input = { scopes: Object.fromEntries([[name, { concurrency }]]) };
        const error = thrown(() => parseSettings(input));
        if (name === "__proto__") {
          expect(error?.message).toBe(
            `Cannot create throttler as 'scopes["__proto__"]' ${PROTO_SCOPE} {"concurrency":${concurrency}}`,
          );
          return;
        }
        expect(error).toBeUndefined();
        const settings = parseSettings(input);
        expect(Object.keys(settings.scopes)).toEqual([name]);
        expect(resolveScopeConfig(settings, name).concurrency).toBe(concurrency);
      }),
    );
  });

  it("fromScrapySettings() converts a THROTTLING_SCOPES entry of any name, and refuses only __proto__ under its Scrapy name", () => {
    fc.assert(
      fc.property(scopeName, fc.integer({ min: 1, max: 50 }), (name, concurrency) => {
        const dict = {
          THROTTLING_SCOPES: Object.fromEntries([[name, { concurrency, delay: 0.5 }]]),
        };
        const error = thrown(() => fromScrapySettings(dict));
        if (name === "__proto__") {
          expect(error?.message).toBe(
            `Cannot create throttler as 'THROTTLING_SCOPES["__proto__"]' ${PROTO_SCOPE} {"concurrency":${concurrency},"delay":0.5}`,
          );
          return;
        }
        expect(error).toBeUndefined();
        const scopes = fromScrapySettings(dict).settings.scopes!;
        expect(Object.entries(scopes)).toEqual([[name, { concurrency, delayMs: 500 }]]);
        expect(Object.getPrototypeOf(scopes)).toBe(Object.prototype);
      }),
    );
  });

  it("fromScrapySettings(), loadSettings() and parseSettings() report an unknown name of any kind as unknown, at any depth", () => {
    fc.assert(
      fc.property(unknownName, (name) => {
        const cases: [() => unknown, string][] = [
          [() => fromScrapySettings(Object.fromEntries([[name, 1]])), `Unknown setting '${name}'`],
          [
            () => fromScrapySettings({ THROTTLING_SCOPES: { a: Object.fromEntries([[name, 1]]) } }),
            `Unknown setting 'THROTTLING_SCOPES["a"][${JSON.stringify(name)}]'`,
          ],
          [
            () =>
              fromScrapySettings({
                THROTTLING_SCOPES: { a: { backoff: Object.fromEntries([[name, 1]]) } },
              }),
            `Unknown setting 'THROTTLING_SCOPES["a"]["backoff"][${JSON.stringify(name)}]'`,
          ],
          [() => loadSettings(Object.fromEntries([[name, { x: 1 }]])), "Unknown setting '"],
          [() => parseSettings(Object.fromEntries([[name, 1]])), "Unknown setting '"],
          [
            () => parseSettings({ backoff: Object.fromEntries([[name, 1]]) }),
            "Unknown setting 'backoff",
          ],
        ];
        for (const [run, start] of cases) {
          const error = thrown(run);
          expect(error).toBeInstanceOf(TypeError);
          expect(error!.message.startsWith(start)).toBe(true);
        }
      }),
    );
  });

  it("resolveCliSettings() sets a scope of any dot-free name with --set, and calls a prototype-named top-level name unknown", () => {
    fc.assert(
      fc.property(
        scopeName.filter((k) => !k.includes(".")),
        fc.integer({ min: 1, max: 50 }),
        (name, concurrency) => {
          const error = thrown(() =>
            resolveCliSettings(undefined, [[`scopes.${name}.concurrency`, String(concurrency)]])
          );
          if (name === "__proto__") {
            expect(error?.message).toBe(
              `Cannot create throttler as 'scopes["__proto__"]' ${PROTO_SCOPE} {"concurrency":${concurrency}}`,
            );
          } else {
            expect(error).toBeUndefined();
            const { settings } = resolveCliSettings(undefined, [
              [`scopes.${name}.concurrency`, String(concurrency)],
            ]);
            expect(Object.entries(settings.scopes!)).toEqual([[name, { concurrency }]]);
          }
          const top = thrown(() => resolveCliSettings(undefined, [[`${name}.x`, "1"]]));
          if (!Object.hasOwn(settingsSchema.shape, name)) {
            expect(top?.message.startsWith("Unknown setting '")).toBe(true);
          }
        },
      ),
    );
  });
});
