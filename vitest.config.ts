import { defineConfig } from "vitest/config";

/**
 * Vitest under Node. Deno-only files (test/deno/) run under `deno test`; the
 * JSON report lets `.ci/run` print its "N passed, N failed" line.
 */
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/deno/**", "**/node_modules/**"],
    environment: "node",
    // A test with no time-out of its own gets a minute: the 5 s default failed
    // real-loopback tests on a loaded 2-core machine. Hangs still end.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ["default", "json"],
    outputFile: { json: ".reports/vitest.json" },
  },
});
