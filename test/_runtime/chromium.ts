/**
 * The browser the dashboard's page test drives (playwright-core, never a
 * downloaded browser): `$CHROMIUM_PATH`, else Debian's `/usr/bin/chromium`,
 * installed with apt-get first when it is missing and we are root (as
 * `.ci/run` does). Without it the run stops with a line that says what to
 * do: the test would fail anyway, and a skipped test is not an option.
 *
 * @module
 */
import { existsSync } from "node:fs";
import process from "node:process";
import { aptInstall } from "./apt.ts";

/** Where the dashboard test looks for the browser (as `test/dashboard_page.test.ts` does). */
export function chromiumPath(): string {
  return process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
}

/** Makes sure the browser is there, or throws an Error saying why it is not. */
export function ensureChromium(): void {
  const path = chromiumPath();
  if (existsSync(path)) return;
  if (
    process.env["CHROMIUM_PATH"] === undefined && aptInstall("chromium", () => existsSync(path))
  ) {
    return;
  }
  throw new Error(
    `No chromium at ${path} for the dashboard's browser test: install Debian's ` +
      "(apt-get install chromium) or set CHROMIUM_PATH to a Chromium or Chrome binary",
  );
}
