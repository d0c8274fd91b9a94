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
    reporters: ["default", "json"],
    outputFile: { json: ".reports/vitest.json" },
  },
});
