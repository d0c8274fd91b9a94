#!/usr/bin/env node
// The npm `bin` of politely, plain JavaScript so that Node 20 runs it as is.
//
// Installed from npm (this file lies under a node_modules directory) it runs
// the compiled dist/lib/cli/main.js: plain Node, no TypeScript loader.
// In a source checkout it runs the TypeScript entry point lib/cli/main.ts
// through tsx (a devDependency), registered for this process only, so
// `node bin/politely.js` always runs the current source, never a stale dist/.
// (Deno and Bun can also run lib/cli/main.ts directly.)
//
// The path is only a hint: a checkout inside a folder named node_modules has
// no dist/ until it is built, so it runs the source; an installed package
// kept outside any node_modules (Deno's npm cache, Yarn Plug'n'Play) cannot
// load tsx, which is not installed with it, so it runs dist/.
import { existsSync } from "node:fs";
import process from "node:process";
import { fileURLToPath } from "node:url";

const dist = new URL("../dist/lib/cli/main.js", import.meta.url);
const hasDist = existsSync(fileURLToPath(dist));
const installed = fileURLToPath(import.meta.url).split(/[\\/]/).includes("node_modules");

/** tsx's `register`, or undefined when tsx cannot be loaded from here. */
async function loadTsx() {
  try {
    return (await import("tsx/esm/api")).register;
  } catch (error) {
    if (hasDist) return undefined;
    process.stderr.write(
      "politely: cannot run: there is no dist/ (run 'npm run build') and tsx cannot be loaded " +
        `(run 'npm install' in the checkout): ${String(error?.message ?? error).split("\n")[0]}\n`,
    );
    process.exit(1);
  }
}

const register = installed && hasDist ? undefined : await loadTsx();
if (register === undefined) {
  await import(dist.href);
} else {
  register();
  await import("../lib/cli/main.ts");
}
