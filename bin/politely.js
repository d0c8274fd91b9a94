#!/usr/bin/env node
// The npm `bin` of politely, plain JavaScript so that Node 20 runs it as is.
//
// Installed from npm (this file lies under a node_modules directory) it runs
// the compiled dist/lib/cli/main.js: plain Node, no TypeScript loader.
// In a source checkout it runs the TypeScript entry point lib/cli/main.ts
// through tsx (a devDependency), registered for this process only, so
// `node bin/politely.js` always runs the current source, never a stale dist/.
// (Deno and Bun can also run lib/cli/main.ts directly.)
import { fileURLToPath } from "node:url";

const installed = fileURLToPath(import.meta.url).split(/[\\/]/).includes("node_modules");
if (installed) {
  await import("../dist/lib/cli/main.js");
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../lib/cli/main.ts");
}
