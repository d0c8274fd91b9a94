#!/usr/bin/env node
// The npm `bin` of politely: plain JavaScript for Node 20, which cannot run
// TypeScript by itself. tsx's ESM loader is registered for this process only,
// then the TypeScript entry point runs. (Deno and Bun run lib/cli/main.ts directly.)
import { register } from "tsx/esm/api";

register();
await import("../lib/cli/main.ts");
