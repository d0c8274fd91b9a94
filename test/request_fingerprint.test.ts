import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { canonicalUrl, requestFingerprint } from "../lib/request_fingerprint.ts";

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
