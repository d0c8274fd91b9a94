import { describe, expect, it } from "vitest";
import { DownloadFailedError, DownloadTimeoutError } from "../lib/http/download_errors.ts";
import { errorLine, errorReason, errorText } from "../lib/http/_error_text.ts";

const refusedByFetch = () =>
  new TypeError("fetch failed", {
    cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }),
  });
const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe("error text", () => {
  const texts: readonly (readonly [string, unknown, string])[] = [
    [
      "a classified error with a code",
      new DownloadFailedError("x", { code: "ECONNREFUSED" }),
      "DownloadFailedError ECONNREFUSED",
    ],
    ["a classified error without one", new DownloadTimeoutError("slow"), "DownloadTimeoutError"],
    [
      "what fetch throws, read as backoff reads it",
      refusedByFetch(),
      "DownloadFailedError ECONNREFUSED",
    ],
    ["any other error", new RangeError("bad"), "RangeError"],
    ["an empty code", withCode("x", ""), "Error"],
    ["a string", "boom", "boom"],
    ["undefined", undefined, "undefined"],
  ];
  for (const [what, error, text] of texts) {
    it(`errorText() names ${what} as ${JSON.stringify(text)}`, () => {
      expect(errorText(error)).toBe(text);
    });
  }

  const reasons: readonly (readonly [string, unknown, string])[] = [
    ["its message", new Error("went wrong"), "went wrong"],
    [
      "an empty message by the first inner error's",
      new AggregateError([new Error("connect ECONNREFUSED ::1:6390"), new Error("second")], ""),
      "connect ECONNREFUSED ::1:6390",
    ],
    ["an empty message by its code", withCode("", "ECONNRESET"), "ECONNRESET"],
    ["an empty message and no code by its name", new RangeError(""), "RangeError"],
    ["a non-error as a string", 42, "42"],
  ];
  for (const [what, error, reason] of reasons) {
    it(`errorReason() gives ${what}`, () => {
      expect(errorReason(error)).toBe(reason);
    });
  }

  const lines: readonly (readonly [string, unknown, string])[] = [
    ["the name and the first line", new Error("first\nsecond"), "Error: first"],
    ["the reason of an empty message", withCode("", "ECONNRESET"), "Error: ECONNRESET"],
    ["a non-error as a string", null, "null"],
  ];
  for (const [what, error, line] of lines) {
    it(`errorLine() gives ${what}`, () => {
      expect(errorLine(error)).toBe(line);
    });
  }
});
