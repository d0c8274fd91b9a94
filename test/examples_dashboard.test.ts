import { describe, expect, it } from "vitest";
import { main } from "../examples/dashboard.ts";

describe("examples/dashboard.ts", () => {
  it(
    "examples/dashboard.ts serves the page, streams history then snapshots, and closes",
    async () => {
      const lines: string[] = [];
      const seen = await main((line) => lines.push(line));
      expect(seen.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(seen.pageTitle).toBe("politely");
      expect(seen.messages).toEqual(["history", "snapshot", "snapshot"]);
      expect(seen.pages).toBe(30);
      expect(lines[0]).toBe(`dashboard at ${seen.url}`);
      // Closed: the address no longer answers.
      await expect(fetch(seen.url)).rejects.toThrow();
    },
    60_000,
  );
});
