import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { canonicalUrl, requestFingerprint } from "../lib/queue/request_fingerprint.ts";
import { canonicalHostFast } from "../lib/queue/_fingerprint.ts";

describe("canonicalUrl", () => {
  it("canonicalUrl() lower-cases scheme and host, drops the default port and the fragment, sorts the query", () => {
    expect(canonicalUrl("HTTP://Example.COM:80/a/B?b=2&a=1&a=0#top")).toBe(
      "http://example.com/a/B?a=0&a=1&b=2",
    );
  });

  it("canonicalUrl() drops an empty query and an empty fragment", () => {
    expect(canonicalUrl("https://a.example/x?#")).toBe("https://a.example/x");
    expect(canonicalUrl("https://a.example/x#")).toBe("https://a.example/x");
  });

  it("canonicalUrl() keeps a non-default port and an empty path becomes /", () => {
    expect(canonicalUrl("https://example.com:8443")).toBe("https://example.com:8443/");
  });

  it("canonicalUrl() throws a TypeError naming the value for a relative URL", () => {
    expect(() => canonicalUrl("/relative")).toThrow(/current value is "\/relative"/);
  });
});

describe("requestFingerprint", () => {
  it("requestFingerprint() ignores fragments and query order", () => {
    expect(requestFingerprint("https://a.example/x?b=1&a=2#1")).toBe(
      requestFingerprint("https://a.example/x?a=2&b=1"),
    );
  });

  it("requestFingerprint() tells methods and bodies apart", () => {
    const url = "https://a.example/x";
    const fps = [
      requestFingerprint(url),
      requestFingerprint({ url, method: "post" }),
      requestFingerprint({ url, method: "POST", body: "a" }),
      requestFingerprint({ url, method: "POST", body: "b" }),
    ];
    expect(new Set(fps).size).toBe(4);
    expect(requestFingerprint({ url, method: "get" })).toBe(fps[0]);
  });

  it("requestFingerprint() hashes long request lines", () => {
    const fp = requestFingerprint("https://a.example/" + "x".repeat(300));
    expect(fp).toMatch(/^#[A-Za-z0-9_-]{27}$/);
  });

  it("requestFingerprint() throws for a request without a URL", () => {
    expect(() => requestFingerprint({})).toThrow(/no 'url'/);
  });

  it("requestFingerprint() is the same for every order of the query arguments", () => {
    const arg = fc.tuple(fc.constantFrom("a", "b", "c", "d"), fc.stringMatching(/^[a-z0-9]{0,3}$/));
    fc.assert(
      fc.property(fc.array(arg, { maxLength: 6 }), fc.infiniteStream(fc.nat()), (args, rnd) => {
        const shuffled: [string, string][] = [...args];
        const it = rnd[Symbol.iterator]();
        for (let i = shuffled.length - 1; i > 0; i--) {
          const j = (it.next().value as number) % (i + 1);
          [shuffled[i], shuffled[j]] = [
            shuffled[j] as [string, string],
            shuffled[i] as [string, string],
          ];
        }
        const q = (xs: readonly (readonly [string, string])[]) =>
          xs.map(([k, v]) => `${k}=${v}`).join("&");
        expect(requestFingerprint(`https://h.example/p?${q(shuffled)}`))
          .toBe(requestFingerprint(`https://h.example/p?${q(args)}`));
      }),
    );
  });
});

describe("canonicalHostFast", () => {
  it("canonicalHostFast() accepts only URLs the parser leaves unchanged, and returns their host", () => {
    const chars = fc.constantFrom(..."aZ09-._~!$&'()*+,;=:@/%?#.\"<>^`{}|\\ é2eE".split(""));
    const host = fc.constantFrom(
      "a.example",
      "A.example",
      "x",
      "1.2.3.4",
      "a.1",
      "0x1.a",
      "a.0x1",
      "xn--nxasmq6b.com",
      "a..b",
      "a.",
      "_a.b",
      "-a.b",
      "a-b.c",
      "a.b:80",
      "a.b:443",
      "a.b:8080",
      "a.b:0",
      "a.b:08",
      "a.b:99999",
      "u@a.b",
      "a.b:",
    );
    fc.assert(
      fc.property(
        fc.constantFrom("http://", "https://", "HTTP://", "ftp://"),
        host,
        fc.string({ unit: chars, maxLength: 12 }),
        (scheme, h, tail) => {
          const url = scheme + h + tail;
          const fast = canonicalHostFast(url);
          if (fast === undefined) return;
          const u = new URL(url);
          expect([u.href, canonicalUrl(url), u.host]).toEqual([url, url, fast]);
        },
      ),
      { numRuns: 10_000 },
    );
  });

  it("canonicalHostFast() takes the common crawl URL without parsing", () => {
    expect(canonicalHostFast("https://s1.example/p/1")).toBe("s1.example");
    expect(canonicalHostFast("http://127.0.0.1:8080/a?x=1")).toBe(undefined); // IPv4: parsed
    expect(canonicalHostFast("http://localhost:8080/a?x=1")).toBe("localhost:8080");
    expect(canonicalHostFast("https://a.example/x#top")).toBe(undefined);
  });
});
