/**
 * Installs a Debian package for `npm test` when a tool the tests need is
 * missing (redis-server, chromium), as `.ci/run` does: only as root with
 * apt-get, three tries. Elsewhere the caller says what to install.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import process from "node:process";

/**
 * `apt-get install` of `pkg`, then `present()` again.
 *
 * @param pkg The Debian package.
 * @param present Whether the tool is there now.
 * @returns Whether it is there after the install (false without root or apt-get).
 */
export function aptInstall(pkg: string, present: () => boolean): boolean {
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const apt = spawnSync("apt-get", ["--version"], { stdio: "ignore" }).status === 0;
  if (!root || !apt) return false;
  console.log(`${pkg} is missing: installing it with apt-get (Debian package ${pkg})`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  // dpkg's progress lines are noise in a test run; its errors are not.
  const quiet = { stdio: ["ignore", "ignore", "inherit"] as ("ignore" | "inherit")[], env };
  for (let attempt = 1; attempt <= 3; attempt++) {
    const update = spawnSync("apt-get", ["update", "-qq"], quiet);
    const install = update.status === 0 &&
      spawnSync("apt-get", ["install", "-y", "-qq", pkg], quiet).status === 0;
    if (install && present()) return true;
  }
  return false;
}
