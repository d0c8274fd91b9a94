import { describe, expect, it } from "vitest";
import { parseInputLine } from "../lib/cli/input.ts";
import { parseCliArgs, UsageError } from "../lib/cli/args.ts";
import { resolveCliSettings, SettingsError } from "../lib/cli/cli_settings.ts";

describe("parseInputLine()", () => {
  it("parseInputLine() reads a bare URL, and skips blank lines and comments", () => {
    expect(parseInputLine("https://a.example/x", 1)).toEqual({
      kind: "request",
      line: 1,
      request: { url: "https://a.example/x" },
    });
    expect(parseInputLine("   ", 2).kind).toBe("skip");
    expect(parseInputLine("# seeds", 3).kind).toBe("skip");
  });

  it("parseInputLine() converts Scrapy's meta names, throttling_delay from seconds to ms", () => {
    const r = parseInputLine(
      JSON.stringify({
        url: "https://a.example/",
        priority: 3,
        meta: {
          throttling_scopes: { api: 2 },
          throttling_delay: 1.5,
          throttling_dont_track: true,
          dont_filter: true,
          depth: 2,
        },
      }),
      1,
    );
    expect(r).toEqual({
      kind: "request",
      line: 1,
      request: {
        url: "https://a.example/",
        priority: 3,
        meta: {
          throttlingScopes: { api: 2 },
          throttlingDelayMs: 1500,
          throttlingDontTrack: true,
          dontFilter: true,
          depth: 2,
        },
      },
    });
  });

  it("parseInputLine() turns a bad line into an InputLineError naming the line and the field", () => {
    const cases: [string, RegExp][] = [
      ['{"url": "https://a.example/"', /^line 7: malformed JSON/],
      ["not a url", /^line 7: expected one URL or one JSON object/],
      ["ftp://a.example/", /^line 7: only http and https URLs/],
      ["/relative", /^line 7: not a valid absolute URL/],
      ['{"url": 5}', /^line 7: 'url' must be a string/],
      [
        '{"url": "https://a.example/", "priority": "high"}',
        /^line 7: 'priority' must be a finite number/,
      ],
      [
        '{"url": "https://a.example/", "meta": {"throttling_delay": -1}}',
        /^line 7: 'meta.throttling_delay' must be a number >= 0/,
      ],
      [
        '{"url": "https://a.example/", "meta": {"dont_filter": "yes"}}',
        /^line 7: 'meta.dont_filter' must be true or false/,
      ],
      ['{"url": "https://a.example/", "callback": "parse"}', /^line 7: unknown field 'callback'/],
      ["[1, 2]", /^line 7: expected one URL or one JSON object/],
    ];
    for (const [text, message] of cases) {
      const r = parseInputLine(text, 7);
      expect(r.kind).toBe("error");
      if (r.kind === "error") {
        expect(r.error.message).toMatch(message);
        expect(r.error.line).toBe(7);
        expect(r.error.text).toBe(text);
      }
    }
  });
});

describe("parseInputLine() and credentials in URLs", () => {
  it("parseInputLine() refuses a URL with credentials as an error naming the line, with them masked in the message and the echo", () => {
    const cases: [string, string][] = [
      ["http://user:s3cret@a.example/x?q=1", "http://***@a.example/x?q=1"],
      ['{"url": "https://user:s3cret@a.example/x", "priority": 2}', "https://***@a.example/x"],
      ['{"url": "https:\\/\\/user:s3cret@a.example/x"}', "https://***@a.example/x"],
      ["http://tok3n-only@a.example/", "http://***@a.example/"],
      ["http:\\\\user:s3cret@a.example/", "http://***@a.example/"],
    ];
    for (const [text, shown] of cases) {
      const r = parseInputLine(text, 4);
      expect(r.kind).toBe("error");
      if (r.kind !== "error") continue;
      expect(r.error.message).toBe(
        `line 4: a URL with credentials (user:password@) is not crawled, so that they are never written out: current value is '${shown}'; send them in "headers" ({"Authorization": "Basic ..."})`,
      );
      expect(r.error.line).toBe(4);
      for (const field of [r.error.message, r.error.text]) {
        expect(field).not.toContain("s3cret");
        expect(field).not.toContain("tok3n");
      }
    }
  });

  it("parseInputLine() masks URL credentials and secret headers in what it echoes of any bad line", () => {
    const cases: [string, string][] = [
      [
        '{"url": "https://a.example/", "headers": {"Authorization": "Basic czNjcmV0", "Accept": "text/html"}, "priority": "high"}',
        '{"url":"https://a.example/","headers":{"Authorization":"***","Accept":"text/html"},"priority":"high"}',
      ],
      [
        '{"url": "ftp://user:s3cret@a.example/"}',
        '{"url":"ftp://***@a.example/"}',
      ],
      ['{"url": "http://user:s3cret@a.example/", ', '{"url": "http://***@a.example/", '],
    ];
    for (const [text, echoed] of cases) {
      const r = parseInputLine(text, 9);
      expect(r.kind).toBe("error");
      if (r.kind !== "error") continue;
      expect(r.error.text).toBe(echoed);
      expect(r.error.message).not.toContain("s3cret");
    }
  });
});

describe("parseCliArgs()", () => {
  it("parseCliArgs() reads crawl's options, --set repeated in order", () => {
    expect(
      parseCliArgs([
        "crawl",
        "urls.txt",
        "--set",
        "A=1",
        "-s",
        "B=x=y",
        "--output",
        "o.jsonl",
        "--jobdir",
        "job",
      ]),
    ).toEqual({
      command: "crawl",
      input: "urls.txt",
      settingsFile: undefined,
      set: [["A", "1"], ["B", "x=y"]],
      jobDir: "job",
      output: "o.jsonl",
      events: undefined,
      plain: false,
      quiet: false,
      rampup: false,
      sharedQueue: false,
      overwrite: false,
      follow: undefined,
    });
    expect(parseCliArgs(["crawl"])).toMatchObject({ command: "crawl", input: "-" });
    expect(parseCliArgs(["crawl", "--rampup"])).toMatchObject({ command: "crawl", rampup: true });
  });

  it("parseCliArgs() reads demo --duration and rejects what it cannot mean", () => {
    expect(parseCliArgs(["demo", "--duration", "3"])).toMatchObject({
      command: "demo",
      durationSec: 3,
    });
    expect(parseCliArgs([])).toEqual({ command: "help" });
    expect(() => parseCliArgs(["demo", "--duration", "-1"])).toThrow(UsageError);
    expect(() => parseCliArgs(["crawl", "--set", "NOEQUALS"])).toThrow(/--set expects NAME=VALUE/);
    expect(() => parseCliArgs(["crawl", "a", "b"])).toThrow(/one input/);
    expect(() => parseCliArgs(["crawlx"])).toThrow(/Unknown command 'crawlx'/);
  });
});

/** The error `fn` throws, or a failure when it throws none. */
function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected an error");
}

describe("parseCliArgs() help and mistakes", () => {
  it("parseCliArgs() reads --help and -h after a command, and help COMMAND, as that command's help", () => {
    expect(parseCliArgs(["--help"])).toEqual({ command: "help" });
    expect(parseCliArgs(["-h"])).toEqual({ command: "help" });
    expect(parseCliArgs(["help"])).toEqual({ command: "help" });
    expect(parseCliArgs(["crawl", "--help"])).toEqual({ command: "help", topic: "crawl" });
    expect(parseCliArgs(["crawl", "urls.txt", "-h"])).toEqual({ command: "help", topic: "crawl" });
    expect(parseCliArgs(["demo", "--help"])).toEqual({ command: "help", topic: "demo" });
    expect(parseCliArgs(["help", "crawl"])).toEqual({ command: "help", topic: "crawl" });
    expect(parseCliArgs(["help", "demo"])).toEqual({ command: "help", topic: "demo" });
  });

  it("parseCliArgs() gives the help even beside a mistake", () => {
    expect(parseCliArgs(["crawl", "--outptu", "x", "--help"])).toEqual({
      command: "help",
      topic: "crawl",
    });
  });

  it("parseCliArgs() names the option a misspelled one was meant to be", () => {
    const cases: readonly (readonly [string[], string])[] = [
      [["crawl", "--outptu", "out.jsonl"], "unknown option --outptu (did you mean --output?)"],
      [["crawl", "--outptu=out.jsonl"], "unknown option --outptu (did you mean --output?)"],
      [["crawl", "--jobdri", "job"], "unknown option --jobdri (did you mean --jobdir?)"],
      [
        ["crawl", "--redis-prefx", "p:"],
        "unknown option --redis-prefx (did you mean --redis-prefix?)",
      ],
      [["demo", "--duraton", "3"], "unknown option --duraton (did you mean --duration?)"],
    ];
    for (const [argv, message] of cases) {
      const error = errorOf(() => parseCliArgs(argv)) as UsageError;
      expect(error).toBeInstanceOf(UsageError);
      expect(error.message).toBe(message);
      expect(error.seeAlso).toBeUndefined();
    }
  });

  it("parseCliArgs() points an option with no likely meaning to the command's help", () => {
    for (
      const [argv, message] of [[["crawl", "--nope"], "unknown option --nope"], [
        ["crawl", "-x"],
        "unknown option -x",
      ]] as const
    ) {
      const error = errorOf(() => parseCliArgs(argv)) as UsageError;
      expect(error.message).toBe(message);
      expect(error.seeAlso).toBe("politely crawl --help");
    }
  });

  it("parseCliArgs() names the command a misspelled one was meant to be", () => {
    const meant = errorOf(() => parseCliArgs(["crwal"])) as UsageError;
    expect(meant.message).toBe("Unknown command 'crwal' (did you mean 'crawl'?)");
    expect(meant.seeAlso).toBeUndefined();
    const unknown = errorOf(() => parseCliArgs(["help", "zzz"])) as UsageError;
    expect(unknown.message).toBe(
      "Unknown command 'zzz': expected 'crawl', 'demo', 'simulate', 'status' or 'help'",
    );
    expect(unknown.seeAlso).toBe("politely help");
  });
});

describe("resolveCliSettings()", () => {
  it("resolveCliSettings() ignores another Scrapy plugin's setting with a warning and still rejects a near-miss", () => {
    const { settings, warnings } = resolveCliSettings(undefined, [
      ["ZYTE_API_KEY", "secret"],
      ["DOWNLOAD_DELAY", "0.5"],
    ]);
    expect(settings).toEqual({ downloadDelayMs: 500 });
    expect(warnings.map((w) => w.settings)).toEqual([["ZYTE_API_KEY"]]);
    expect(() => resolveCliSettings(undefined, [["DOWNLOAD_DELAYY", "1"]])).toThrow(
      "Unknown setting 'DOWNLOAD_DELAYY' (did you mean 'DOWNLOAD_DELAY'?)",
    );
  });

  it("resolveCliSettings() applies --set over Scrapy names and dotted camelCase paths", () => {
    const { settings } = resolveCliSettings(undefined, [
      ["DOWNLOAD_DELAY", "0.5"],
      ["backoff.maxDelayMs", "60000"],
      ["RETRY_ENABLED", "False"],
    ]);
    expect(settings.downloadDelayMs).toBe(500);
    expect(settings.backoff?.maxDelayMs).toBe(60000);
    expect(settings.retry?.enabled).toBe(false);
  });

  it("resolveCliSettings() fails with one line naming the setting", () => {
    expect(() => resolveCliSettings(undefined, [["CONCURRENT_REQUEST", "4"]])).toThrow(
      /did you mean 'CONCURRENT_REQUESTS'/,
    );
    expect(() => resolveCliSettings(undefined, [["DOWNLOAD_DELAY", "-2"]])).toThrow(SettingsError);
    expect(() => resolveCliSettings("/no/such/settings.json", [])).toThrow(
      "Cannot read settings '/no/such/settings.json': no such file or directory",
    );
  });
});
