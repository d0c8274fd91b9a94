import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  hierarchicalScopes,
  hostScope,
  originScope,
  registrableDomainScope,
} from "../lib/scopes/domain_scopes.ts";

describe("hostScope()", () => {
  it.each([
    ["http://example.com/", "example.com"],
    ["https://Books.ToScrape.COM/catalogue?x#y", "books.toscrape.com"],
    ["HTTPS://example.com:443/", "example.com"],
    ["http://example.com:80", "example.com"],
    ["http://example.com:080/", "example.com"],
    ["http://example.com:443/", "example.com:443"],
    ["https://example.com:80/", "example.com:80"],
    ["http://example.com:8080/a", "example.com:8080"],
    ["http://example.com:/a", "example.com"],
    ["ws://example.com:80/", "example.com"],
    ["wss://example.com:443/", "example.com"],
    ["http://127.0.0.1:8080/", "127.0.0.1:8080"],
    ["http://0x7f.1/", "127.0.0.1"],
    ["http://[::1]:3000/", "[::1]:3000"],
    ["http://[0:0::1]:80/", "[::1]"],
    ["http://user:pw@Example.com:8080/", "example.com:8080"],
    ["http://bücher.de/", "xn--bcher-kva.de"],
    ["http://localhost:3000", "localhost:3000"],
    ["http://example.com./", "example.com."],
    ["ftp://example.com:21/", "example.com"],
  ])("hostScope() maps %s to %s", (url, scope) => {
    expect(hostScope(url)).toBe(scope);
  });

  it("hostScope() throws a TypeError naming the value for an invalid URL", () => {
    expect(() => hostScope("not a url")).toThrow(TypeError);
    expect(() => hostScope("not a url")).toThrow(/"not a url"/);
    expect(() => hostScope("http://example.com:99999/")).toThrow(TypeError);
    expect(() => hostScope("mailto:a@example.com")).toThrow(/without a host/);
  });

  it("hostScope() agrees with new URL(url).host on generated web URLs", () => {
    fc.assert(
      fc.property(
        fc.webUrl({
          withQueryParameters: true,
          withFragments: true,
          validSchemes: ["http", "https"],
        }),
        (url) => {
          expect(hostScope(url)).toBe(new URL(url).host.toLowerCase());
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("hostScope() agrees with new URL(url).host on generated hosts and ports", () => {
    const label = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9-]{0,5}$/);
    fc.assert(
      fc.property(
        fc.constantFrom("http", "https", "HTTP", "ws", "wss"),
        fc.array(label, { minLength: 1, maxLength: 4 }),
        fc.option(
          fc.oneof(
            fc.integer({ min: 0, max: 70000 }).map(String),
            fc.constantFrom("", "080", "0443"),
          ),
        ),
        fc.constantFrom("", "/", "/a?b", "#f", "?q"),
        (scheme, labels, port, rest) => {
          const url = `${scheme}://${labels.join(".")}${port === null ? "" : `:${port}`}${rest}`;
          let expected: string | undefined;
          try {
            expected = new URL(url).host.toLowerCase();
          } catch {
            expected = undefined;
          }
          if (expected === undefined) expect(() => hostScope(url)).toThrow(TypeError);
          else expect(hostScope(url)).toBe(expected);
        },
      ),
      { numRuns: 3000 },
    );
  });
});

describe("originScope()", () => {
  it.each([
    ["https://Example.com:443/x?y", "https://example.com"],
    ["http://example.com:8080/", "http://example.com:8080"],
    ["HTTP://[::1]:80/", "http://[::1]"],
    ["http://user@example.com/", "http://example.com"],
  ])("originScope() maps %s to %s", (url, scope) => {
    expect(originScope(url)).toBe(scope);
  });
});

describe("registrableDomainScope()", () => {
  it.each([
    ["https://books.toscrape.com/", "toscrape.com"],
    ["https://toscrape.com/", "toscrape.com"],
    ["https://a.b.books.toscrape.com:8443/", "toscrape.com"],
    ["http://www.example.co.uk/", "example.co.uk"],
    ["http://example.co.uk/", "example.co.uk"],
    ["http://co.uk/", "co.uk"],
    ["http://alice.github.io/", "github.io"],
    ["http://127.0.0.1:8080/", "127.0.0.1:8080"],
    ["http://10.0.0.1/", "10.0.0.1"],
    ["http://[::1]:3000/", "[::1]:3000"],
    ["http://localhost:3000/", "localhost:3000"],
    ["http://printer.local/", "printer.local"],
    ["http://foo.bar.unknowntld/", "foo.bar.unknowntld"],
    ["http://Books.ToScrape.com./", "toscrape.com"],
  ])("registrableDomainScope() maps %s to %s", (url, scope) => {
    expect(registrableDomainScope(url)).toBe(scope);
  });

  it("registrableDomainScope() uses the private suffix section when asked", () => {
    expect(registrableDomainScope("http://alice.github.io/", { privateSuffixes: true })).toBe(
      "alice.github.io",
    );
  });
});

describe("hierarchicalScopes()", () => {
  it.each([
    ["https://books.toscrape.com/", ["toscrape.com", "books.toscrape.com"]],
    ["https://toscrape.com/", ["toscrape.com"]],
    ["https://quotes.toscrape.com:8080/", ["toscrape.com", "quotes.toscrape.com"]],
    ["https://a.b.books.toscrape.com/", [
      "toscrape.com",
      "books.toscrape.com",
      "b.books.toscrape.com",
      "a.b.books.toscrape.com",
    ]],
    ["http://www.example.co.uk/", ["example.co.uk", "www.example.co.uk"]],
    ["http://www.example.co.uk./", ["example.co.uk", "www.example.co.uk"]],
    ["http://127.0.0.1:8080/", ["127.0.0.1:8080"]],
    ["http://[::1]/", ["[::1]"]],
    ["http://localhost/", ["localhost"]],
    ["http://a.b.unknowntld/", ["a.b.unknowntld"]],
    ["http://alice.github.io/", ["github.io", "alice.github.io"]],
  ])("hierarchicalScopes() maps %s to %j", (url, scopes) => {
    expect(hierarchicalScopes(url)).toEqual(scopes);
  });

  it("hierarchicalScopes() uses the private suffix section when asked", () => {
    expect(hierarchicalScopes("http://x.alice.github.io/", { privateSuffixes: true })).toEqual([
      "alice.github.io",
      "x.alice.github.io",
    ]);
  });

  it("hierarchicalScopes() starts with the registrable domain and ends with the host", () => {
    const label = fc.stringMatching(/^[a-z0-9]{1,6}$/);
    fc.assert(
      fc.property(
        fc.array(label, { maxLength: 4 }),
        fc.constantFrom("example.com", "example.co.uk"),
        (sub, d) => {
          const host = [...sub, d].join(".");
          const scopes = hierarchicalScopes(`https://${host}/`);
          expect(scopes[0]).toBe(registrableDomainScope(`https://${host}/`));
          expect(scopes.at(-1)).toBe(host);
          expect(scopes).toHaveLength(sub.length + 1);
          for (let i = 1; i < scopes.length; i++) {
            expect(scopes[i]!.endsWith(`.${scopes[i - 1]}`))
              .toBe(true);
          }
        },
      ),
    );
  });
});
