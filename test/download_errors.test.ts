import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as http from "node:http";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import {
  classifyDownloadError,
  DownloadError,
  DownloadFailedError,
  DownloadTimeoutError,
  errorMatches,
  InvalidRequestError,
  isLocalFailure,
  LOCAL_FAILURE,
  ResponseDataLossError,
  ResponseTooLargeError,
} from "../lib/http/download_errors.ts";
import { DEFAULT_BACKOFF_EXCEPTIONS } from "../lib/settings/settings.ts";

const isDeno = "Deno" in globalThis;
const isBun = "Bun" in globalThis;

/** What `fetch(...)` (and reading the body) throws, or a failure when it does not throw. */
async function thrownBy(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error("expected the download to fail");
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("download error classes", () => {
  it("DownloadFailedError carries its name, code, url and cause", () => {
    const cause = new Error("low level");
    const e = new DownloadFailedError("failed", { cause, code: "ECONNRESET", url: "http://x/" });
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe("DownloadFailedError");
    expect(String(e)).toBe("DownloadFailedError: failed");
    expect(e.code).toBe("ECONNRESET");
    expect(e.url).toBe("http://x/");
    expect(e.cause).toBe(cause);
  });

  it("DownloadTimeoutError carries timeoutMs", () => {
    const e = new DownloadTimeoutError("slow", { timeoutMs: 250 });
    expect(e.name).toBe("DownloadTimeoutError");
    expect(e.timeoutMs).toBe(250);
    expect(e.url).toBeUndefined();
    expect("cause" in e).toBe(false);
  });

  it("ResponseDataLossError carries its name and code", () => {
    const e = new ResponseDataLossError("short", { code: "UND_ERR_SOCKET" });
    expect(e.name).toBe("ResponseDataLossError");
    expect(e.code).toBe("UND_ERR_SOCKET");
  });

  it("InvalidRequestError is a TypeError that carries the input", () => {
    const e = new InvalidRequestError("no URL", { input: { id: 1 } });
    expect(e).toBeInstanceOf(TypeError);
    expect(e.name).toBe("InvalidRequestError");
    expect(e.input).toEqual({ id: 1 });
  });

  it("DownloadError is the base of every download failure, carrying url and cause", () => {
    const cause = new Error("low level");
    const url = "http://x/";
    const failures = [
      new DownloadFailedError("failed", { cause, url, code: "ECONNRESET" }),
      new DownloadTimeoutError("slow", { cause, url, timeoutMs: 1 }),
      new ResponseDataLossError("short", { cause, url }),
      new ResponseTooLargeError("big", { cause, url, maxSizeBytes: 1, receivedBytes: 2 }),
    ];
    for (const e of failures) {
      expect(e, e.name).toBeInstanceOf(DownloadError);
      expect(e.url, e.name).toBe(url);
      expect(e.cause, e.name).toBe(cause);
    }
    const base = new DownloadError("lost");
    expect(String(base)).toBe("DownloadError: lost");
    expect(base.url).toBeUndefined();
    expect("cause" in base).toBe(false);
    expect(new InvalidRequestError("no URL", { input: "" })).not.toBeInstanceOf(DownloadError);
    // backoff.exceptions and retry.exceptions can name the base, by class or by name.
    expect(errorMatches(failures[1], [DownloadError])).toBe(true);
    expect(errorMatches(failures[1], ["DownloadError"])).toBe(true);
    expect(errorMatches(new RangeError("bug"), ["DownloadError"])).toBe(false);
  });
});

describe("classifyDownloadError() with real failures", () => {
  let server: http.Server;
  let base: string;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      if (req.url === "/cut") {
        res.writeHead(200, { "content-length": "1000" });
        res.write("x".repeat(100), () => res.socket?.destroy());
      } else if (req.url === "/reset") {
        req.socket.destroy();
      } else if (req.url === "/ok") {
        res.end("ok");
      }
      // anything else: never answer
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it("classifyDownloadError() reads a refused connection as DownloadFailedError", async () => {
    const url = `http://127.0.0.1:${await closedPort()}/`;
    const thrown = await thrownBy(() => fetch(url));
    const e = classifyDownloadError(thrown, { url });
    expect(e).toBeInstanceOf(DownloadFailedError);
    expect((e as DownloadFailedError).cause).toBe(thrown);
    expect((e as DownloadFailedError).url).toBe(url);
    expect((e as DownloadFailedError).message).toContain(url);
  });

  it("classifyDownloadError() names ECONNREFUSED in the code and the message on every runtime", async () => {
    const url = `http://127.0.0.1:${await closedPort()}/`;
    const e = classifyDownloadError(await thrownBy(() => fetch(url)), { url });
    expect((e as DownloadFailedError).code).toBe("ECONNREFUSED");
    expect((e as DownloadFailedError).message).toMatch(
      new RegExp(`^Download of ${url} failed: .*ECONNREFUSED`),
    );
    expect((e as DownloadFailedError).message).not.toContain("fetch failed");
  });

  it("classifyDownloadError() names a failed DNS lookup in the code and the message on every runtime", async () => {
    // `.invalid` never resolves (RFC 2606); a resolver that cannot be reached says EAI_AGAIN.
    const url = "http://politely-test.invalid/";
    const e = classifyDownloadError(await thrownBy(() => fetch(url)), { url });
    expect(e).toBeInstanceOf(DownloadFailedError);
    const code = (e as DownloadFailedError).code;
    expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(code);
    expect((e as DownloadFailedError).message).toContain(code);
    expect((e as DownloadFailedError).message).not.toContain("fetch failed");
  });

  it("classifyDownloadError() names an answer whose headers are over the client's limit", async () => {
    // 16 MiB: over the limit of each runtime (undici 16 KiB, Deno about 1 MiB, Bun 16 MiB).
    const big = http.createServer((_req, res) => {
      res.writeHead(200, { "x-big": "a".repeat(16 * 1024 * 1024) });
      res.end("x");
    });
    await new Promise<void>((resolve) => big.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(big.address() as AddressInfo).port}/`;
    try {
      const e = classifyDownloadError(await thrownBy(() => fetch(url)), { url });
      expect(e).toBeInstanceOf(DownloadFailedError);
      const { code, message } = e as DownloadFailedError;
      expect(message).not.toMatch(/failed: (TypeError: )?fetch failed$/);
      if (isDeno) expect(message).toContain("message head is too large");
      else expect(code).toBe(isBun ? "ResponseHeadersTooLarge" : "UND_ERR_HEADERS_OVERFLOW");
      if (code !== undefined) expect(message).toContain(code);
    } finally {
      big.closeAllConnections();
      await new Promise((resolve) => big.close(resolve));
    }
  });

  it("classifyDownloadError() reads a socket closed before the response as DownloadFailedError", async () => {
    const thrown = await thrownBy(() => fetch(`${base}/reset`));
    expect(classifyDownloadError(thrown)).toBeInstanceOf(DownloadFailedError);
  });

  it("classifyDownloadError() reads a body cut short as ResponseDataLossError", async () => {
    const response = await fetch(`${base}/cut`);
    expect(response.status).toBe(200);
    const thrown = await thrownBy(() => response.text());
    const e = classifyDownloadError(thrown, { url: `${base}/cut`, phase: "body" });
    expect(e).toBeInstanceOf(ResponseDataLossError);
    expect((e as ResponseDataLossError).cause).toBe(thrown);
  });

  it("classifyDownloadError() reads a server that never answers, with AbortSignal.timeout, as DownloadTimeoutError", async () => {
    const signal = AbortSignal.timeout(50);
    const thrown = await thrownBy(() => fetch(`${base}/hang`, { signal }));
    const e = classifyDownloadError(thrown, { signal, timeoutMs: 50 });
    expect(e).toBeInstanceOf(DownloadTimeoutError);
    expect((e as DownloadTimeoutError).timeoutMs).toBe(50);
    expect((e as DownloadTimeoutError).message).toContain("after 50 ms");
  });

  it("classifyDownloadError() leaves a deliberate abort unchanged", async () => {
    const controller = new AbortController();
    const pending = thrownBy(() => fetch(`${base}/hang`, { signal: controller.signal }));
    controller.abort();
    const thrown = await pending;
    expect((thrown as Error).name).toBe("AbortError");
    expect(classifyDownloadError(thrown, { signal: controller.signal, timeoutMs: 50 })).toBe(
      thrown,
    );
  });

  it("classifyDownloadError() reads an unparseable URL as InvalidRequestError", async () => {
    const thrown = await thrownBy(() => fetch("not a url"));
    const e = classifyDownloadError(thrown, { input: { url: "not a url", id: 3 } });
    expect(e).toBeInstanceOf(InvalidRequestError);
    expect((e as InvalidRequestError).input).toEqual({ url: "not a url", id: 3 });
    expect((e as InvalidRequestError).cause).toBe(thrown);
  });
});

/** undici's shape: TypeError("fetch failed") caused by an error with a code. */
const undici = (message: string, code: string) =>
  new TypeError("fetch failed", { cause: Object.assign(new Error(message), { code }) });

describe("classifyDownloadError() with the shapes each runtime throws", () => {
  it("classifyDownloadError() reads undici's connection codes as DownloadFailedError", () => {
    for (const code of ["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_SOCKET"]) {
      const e = classifyDownloadError(undici("x", code));
      expect(e, code).toBeInstanceOf(DownloadFailedError);
      expect((e as DownloadFailedError).code).toBe(code);
    }
  });

  it("classifyDownloadError() reads undici's fetch failed with an unknown cause as DownloadFailedError, naming its code", () => {
    const tls = undici("certificate has expired", "CERT_HAS_EXPIRED");
    const e = classifyDownloadError(tls, { url: "https://a.test/" });
    expect(e).toBeInstanceOf(DownloadFailedError);
    expect((e as DownloadFailedError).code).toBe("CERT_HAS_EXPIRED");
    expect((e as DownloadFailedError).message).toBe(
      "Download of https://a.test/ failed: CERT_HAS_EXPIRED: certificate has expired",
    );
  });

  it("classifyDownloadError() describes a fetch failed that has no cause as before", () => {
    expect((classifyDownloadError(new TypeError("fetch failed")) as Error).message).toBe(
      "Download failed: TypeError: fetch failed",
    );
  });

  it("classifyDownloadError() puts the cause's words in the message, the code first when they lack it", () => {
    const refused = undici("connect ECONNREFUSED 127.0.0.1:8080", "ECONNREFUSED");
    expect((classifyDownloadError(refused, { url: "http://127.0.0.1:8080/" }) as Error).message)
      .toBe("Download of http://127.0.0.1:8080/ failed: connect ECONNREFUSED 127.0.0.1:8080");
    const terminated = new TypeError("terminated", {
      cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }),
    });
    expect((classifyDownloadError(terminated) as Error).message).toBe(
      "Response body was cut short: UND_ERR_SOCKET: other side closed",
    );
  });

  it("classifyDownloadError() finds the code inside a happy-eyeballs AggregateError", () => {
    const aggregate = new AggregateError([
      Object.assign(new Error("connect ECONNREFUSED ::1:80"), { code: "ECONNREFUSED" }),
    ]);
    const e = classifyDownloadError(new TypeError("fetch failed", { cause: aggregate }));
    expect((e as DownloadFailedError).code).toBe("ECONNREFUSED");
  });

  it("classifyDownloadError() reads undici's terminated body as ResponseDataLossError", () => {
    const terminated = new TypeError("terminated", {
      cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }),
    });
    const e = classifyDownloadError(terminated);
    expect(e).toBeInstanceOf(ResponseDataLossError);
    expect((e as ResponseDataLossError).code).toBe("UND_ERR_SOCKET");
    expect(classifyDownloadError(undici("x", "UND_ERR_RES_CONTENT_LENGTH_MISMATCH")))
      .toBeInstanceOf(ResponseDataLossError);
  });

  it("classifyDownloadError() reads a connection failure in the body phase as ResponseDataLossError", () => {
    const bun = Object.assign(new TypeError("ECONNRESET: The socket connection was closed"), {
      code: "ECONNRESET",
    });
    expect(classifyDownloadError(bun)).toBeInstanceOf(DownloadFailedError);
    expect(classifyDownloadError(bun, { phase: "body" })).toBeInstanceOf(ResponseDataLossError);
  });

  it("classifyDownloadError() reads undici's timeout codes as DownloadTimeoutError", () => {
    for (const code of ["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "ETIMEDOUT"]) {
      expect(classifyDownloadError(undici("x", code)), code).toBeInstanceOf(DownloadTimeoutError);
    }
  });

  it("classifyDownloadError() reads a TimeoutError DOMException as DownloadTimeoutError", () => {
    const e = classifyDownloadError(new DOMException("timed out", "TimeoutError"));
    expect(e).toBeInstanceOf(DownloadTimeoutError);
    expect((e as DownloadTimeoutError).timeoutMs).toBeUndefined();
  });

  it("classifyDownloadError() reads an AbortError as a timeout only when its signal timed out", () => {
    const abort = new DOMException("aborted", "AbortError");
    const timedOut = AbortSignal.abort(new DOMException("t", "TimeoutError"));
    expect(classifyDownloadError(abort, { signal: timedOut })).toBeInstanceOf(DownloadTimeoutError);
    expect(classifyDownloadError(abort, { signal: AbortSignal.abort() })).toBe(abort);
    expect(classifyDownloadError(abort)).toBe(abort);
  });

  it("classifyDownloadError() reads Deno's messages", () => {
    const refused = new TypeError("error sending request for url (http://127.0.0.1:1/)", {
      cause: new Error(
        "client error (Connect): tcp connect error: Connection refused (os error 111)",
      ),
    });
    expect(classifyDownloadError(refused)).toBeInstanceOf(DownloadFailedError);
    expect((classifyDownloadError(refused) as DownloadFailedError).code).toBe("ECONNREFUSED");
    expect(classifyDownloadError(new TypeError("error reading a body from connection")))
      .toBeInstanceOf(ResponseDataLossError);
    expect(classifyDownloadError(new TypeError("Invalid URL: 'x'"), { input: "x" }))
      .toBeInstanceOf(InvalidRequestError);
  });

  it("classifyDownloadError() reads Bun's codes", () => {
    const invalid = Object.assign(new TypeError("fetch() URL is invalid"), {
      code: "ERR_INVALID_URL",
    });
    const e = classifyDownloadError(invalid, { url: "::" });
    expect(e).toBeInstanceOf(InvalidRequestError);
    expect((e as InvalidRequestError).input).toBe("::");
    const refused = Object.assign(new Error("Unable to connect"), { code: "ConnectionRefused" });
    expect(classifyDownloadError(refused)).toBeInstanceOf(DownloadFailedError);
  });

  it("classifyDownloadError() reads Deno's words for the cause as the code Node gives, dropping its repeated URL", () => {
    const deno = (words: string) =>
      new TypeError("fetch failed", {
        cause: new Error(`error sending request for url (http://a.test/): ${words}`),
      });
    const cases: readonly (readonly [string, string])[] = [
      [
        "client error (Connect): tcp connect error: Connection refused (os error 111)",
        "ECONNREFUSED",
      ],
      [
        "client error (Connect): dns error: failed to lookup address information: Name or service not known",
        "ENOTFOUND",
      ],
      [
        "client error (Connect): dns error: failed to lookup address information: Temporary failure in name resolution",
        "EAI_AGAIN",
      ],
      ["client error (SendRequest): connection reset by peer", "ECONNRESET"],
    ];
    for (const [words, code] of cases) {
      const e = classifyDownloadError(deno(words), {
        url: "http://a.test/",
      }) as DownloadFailedError;
      expect(e, words).toBeInstanceOf(DownloadFailedError);
      expect(e.code).toBe(code);
      expect(e.message).toBe(`Download of http://a.test/ failed: ${code}: ${words}`);
    }
  });

  it("classifyDownloadError() does not take an unknown error for a failed download by its words", () => {
    const e = new Error("No route to host in the proxy table");
    expect(classifyDownloadError(e)).toBe(e);
  });

  it("classifyDownloadError() returns unknown errors and non-errors unchanged", () => {
    const range = new RangeError("nope");
    const plain = new TypeError("x is not a function");
    for (const e of [range, plain, "fetch failed", 42, null, undefined, { code: 7 }]) {
      expect(classifyDownloadError(e)).toBe(e);
    }
  });

  it("classifyDownloadError() returns an error already classified unchanged", () => {
    const e = new DownloadTimeoutError("slow", { timeoutMs: 1 });
    expect(classifyDownloadError(e, { timeoutMs: 99 })).toBe(e);
  });

  it("classifyDownloadError() survives a cause cycle", () => {
    const a = new TypeError("fetch failed") as Error & { cause?: unknown };
    const b = Object.assign(new Error("b"), { code: "ECONNRESET", cause: a });
    a.cause = b;
    expect(classifyDownloadError(a)).toBeInstanceOf(DownloadFailedError);
  });
});

describe("errorMatches()", () => {
  const timeout = new DownloadTimeoutError("slow", {
    cause: new DOMException("t", "TimeoutError"),
  });

  it("errorMatches() and classifyDownloadError() take a LOCAL_FAILURE error for itself, not for its causes", () => {
    class StoreDown extends Error {
      override readonly name = "StoreDown";
      readonly [LOCAL_FAILURE] = true;
    }
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6390"), {
      code: "ECONNREFUSED",
    });
    const e = new StoreDown("store down", { cause: refused });
    expect(isLocalFailure(e)).toBe(true);
    expect(isLocalFailure(refused)).toBe(false);
    expect(classifyDownloadError(e)).toBe(e);
    expect(errorMatches(e, DEFAULT_BACKOFF_EXCEPTIONS)).toBe(false);
    expect(errorMatches(e, ["ECONNREFUSED"])).toBe(false);
    expect(errorMatches(e, ["StoreDown"])).toBe(true);
    // The same cause, unmarked, is a connection failure of the site.
    expect(
      errorMatches(
        classifyDownloadError(new Error("x", { cause: refused })),
        DEFAULT_BACKOFF_EXCEPTIONS,
      ),
    )
      .toBe(true);
  });

  it("errorMatches() matches a name on the error", () => {
    expect(errorMatches(timeout, ["DownloadTimeoutError"])).toBe(true);
    expect(errorMatches(timeout, ["DownloadFailedError"])).toBe(false);
  });

  it("errorMatches() matches a name along the cause chain", () => {
    expect(errorMatches(timeout, ["TimeoutError"])).toBe(true);
    const wrapped = new Error("outer", {
      cause: new Error("mid", { cause: new RangeError("deep") }),
    });
    expect(errorMatches(wrapped, ["RangeError"])).toBe(true);
  });

  it("errorMatches() matches constructor names along the prototype chain", () => {
    class CustomFailure extends DownloadFailedError {}
    const e = new CustomFailure("x");
    expect(e.name).toBe("DownloadFailedError");
    expect(errorMatches(e, ["CustomFailure"])).toBe(true);
    expect(errorMatches(e, ["DownloadFailedError"])).toBe(true);
    expect(errorMatches(new DownloadFailedError("x"), ["CustomFailure"])).toBe(false);
  });

  it("errorMatches() matches a code and a Scrapy dotted name", () => {
    const e = classifyDownloadError(undici("x", "ECONNREFUSED"));
    expect(errorMatches(e, ["ECONNREFUSED"])).toBe(true);
    expect(errorMatches(e, ["scrapy.exceptions.DownloadFailedError"])).toBe(true);
    expect(errorMatches(e, ["scrapy.exceptions.DownloadTimeoutError"])).toBe(false);
  });

  it("errorMatches() matches classes by instanceof, along the cause chain", () => {
    expect(errorMatches(timeout, [DownloadTimeoutError])).toBe(true);
    expect(errorMatches(timeout, [Error])).toBe(true);
    expect(errorMatches(timeout, [DownloadFailedError])).toBe(false);
    expect(errorMatches(timeout, [DOMException])).toBe(true);
    class Plain {}
    expect(errorMatches(new Plain(), [Plain])).toBe(true);
    expect(errorMatches(new Error("x"), [Plain])).toBe(false);
  });

  it("errorMatches() calls a predicate with the error itself", () => {
    const seen: unknown[] = [];
    const predicate = (e: unknown) => {
      seen.push(e);
      return e instanceof DownloadTimeoutError && e.message === "slow";
    };
    expect(errorMatches(timeout, [predicate])).toBe(true);
    expect(seen).toEqual([timeout]);
    expect(errorMatches(new Error("fast"), [predicate])).toBe(false);
    function isSlow(e: unknown): boolean {
      return (e as Error).message === "slow";
    }
    expect(errorMatches(timeout, [isSlow])).toBe(true);
  });

  it("errorMatches() lets a predicate's own error through", () => {
    const broken = () => {
      throw new Error("bug in predicate");
    };
    expect(() => errorMatches(timeout, [broken])).toThrow("bug in predicate");
  });

  it("errorMatches() matches nothing with no matchers, and never matches non-errors by name", () => {
    expect(errorMatches(timeout, [])).toBe(false);
    expect(errorMatches("DownloadTimeoutError", ["DownloadTimeoutError"])).toBe(false);
    expect(errorMatches(undefined, ["Error", Error])).toBe(false);
  });

  it("errorMatches() with the default exceptions matches transport failures, not invalid requests", () => {
    const d = DEFAULT_BACKOFF_EXCEPTIONS;
    expect(errorMatches(new DownloadFailedError("x"), d)).toBe(true);
    expect(errorMatches(new DownloadTimeoutError("x"), d)).toBe(true);
    expect(errorMatches(new ResponseDataLossError("x"), d)).toBe(true);
    expect(errorMatches(new InvalidRequestError("x", { input: "" }), d)).toBe(false);
    expect(errorMatches(new TypeError("fetch failed"), d)).toBe(false);
  });
});
