/**
 * The settings of a command-line crawl: `--settings FILE` (JSON, Scrapy's
 * UPPER_CASE names or ours), then each `--set NAME=VALUE` over it, validated
 * at once. Errors are one line and name the setting.
 *
 * @module
 */
import { firstLine } from "./_first_line.ts";
import { readFileSync } from "node:fs";
import {
  loadSettings,
  parseSettingValue,
  type ScrapySettingsWarning,
} from "../settings/scrapy_settings.ts";
import type { ThrottlerSettingsInput } from "../settings/settings.ts";
import { describeFsError } from "./input.ts";
import { own, setOwn } from "../settings/_own.ts";

/** A settings problem, as the one line the command line prints. */
export class SettingsError extends Error {
  override readonly name = "SettingsError";
}

/** Settings ready for `createThrottler`, and what to tell the user about them. */
export interface CliSettings {
  readonly settings: ThrottlerSettingsInput;
  readonly warnings: readonly ScrapySettingsWarning[];
}

/**
 * Read `--settings` and apply `--set` over it. A dotted name (`backoff.maxDelayMs`)
 * sets a nested camelCase setting.
 *
 * @param settingsFile The JSON file, if any.
 * @param set The `--set` pairs, in order.
 * @returns The validated settings and warnings (ignored Scrapy names, deprecations).
 * @throws {SettingsError} With one line: unreadable file, malformed JSON, unknown name (with a suggestion), bad value.
 * @example
 * ```ts
 * import { resolveCliSettings } from "./cli_settings.ts";
 * const { settings } = resolveCliSettings(undefined, [["DOWNLOAD_DELAY", "0.25"]]);
 * console.assert(settings.downloadDelayMs === 250);
 * ```
 */
export function resolveCliSettings(
  settingsFile: string | undefined,
  set: readonly (readonly [string, string])[],
): CliSettings {
  let dict: Record<string, unknown> = {};
  if (settingsFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(settingsFile, "utf8");
    } catch (error) {
      throw new SettingsError(`Cannot read settings '${settingsFile}': ${describeFsError(error)}`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      throw new SettingsError(
        `Cannot read settings '${settingsFile}': malformed JSON (${
          error instanceof Error ? error.message : error
        })`,
      );
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new SettingsError(
        `Cannot read settings '${settingsFile}': expected a JSON object of settings`,
      );
    }
    dict = { ...dict, ...(parsed as Record<string, unknown>) };
  }
  for (const [name, text] of set) {
    if (name === "") throw new SettingsError(`--set expects NAME=VALUE: the name is empty`);
    const value = parseSettingValue(name, text);
    const path = name.split(".");
    // Names are data: `--set scopes.constructor.concurrency=2` configures a
    // scope named "constructor", `--set __proto__.x=1` is an unknown setting.
    let node = dict;
    for (const key of path.slice(0, -1)) {
      const below = own(node, key);
      const copy: Record<string, unknown> =
        typeof below === "object" && below !== null && !Array.isArray(below)
          ? { ...(below as Record<string, unknown>) }
          : {};
      setOwn(node, key, copy);
      node = copy;
    }
    setOwn(node, path[path.length - 1]!, value);
  }
  try {
    return loadSettings(dict);
  } catch (error) {
    throw new SettingsError(firstLine(error));
  }
}

/**
 * `--settings` and `--set` as a command reads them: the settings, with each
 * warning written to `stderr` as one line; or `undefined` when they cannot be
 * used, after one line saying why (the command exits 2).
 *
 * @param args The command's `--settings FILE` and `--set` pairs.
 * @param stderr Where the lines go.
 * @returns The settings, or `undefined`.
 */
export function loadCliSettings(
  args: {
    readonly settingsFile: string | undefined;
    readonly set: readonly (readonly [string, string])[];
  },
  stderr: { write(text: string): unknown },
): CliSettings | undefined {
  let settings: CliSettings;
  try {
    settings = resolveCliSettings(args.settingsFile, args.set);
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    stderr.write(`politely: ${error.message}\n`);
    return undefined;
  }
  for (const w of settings.warnings) stderr.write(`politely: warning: ${w.message}\n`);
  return settings;
}
