import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { extractLinks } from "../lib/http/html_links.ts";

const PAGE = "https://a.example/dir/page.html";

interface Case {
  readonly name: string;
  readonly html: string;
  readonly links: readonly string[];
  /** Default `PAGE`. */
  readonly base?: string;
  /** Default `false`. */
  readonly nofollow?: boolean;
}

const CASES: readonly Case[] = [
  // Resolution and <base>
  {
    name: "resolves a relative href against the page URL",
    html: `<a href="b.html">b</a> <a href="../up">up</a> <a href="/root">root</a>`,
    links: ["https://a.example/dir/b.html", "https://a.example/up", "https://a.example/root"],
  },
  {
    name: "resolves against a relative <base href>, itself resolved against the page URL",
    html: `<head><base href="/sub/"></head><a href="x">x</a> <a href="/abs">abs</a>`,
    links: ["https://a.example/sub/x", "https://a.example/abs"],
    base: "https://a.example/sub/",
  },
  {
    name: "resolves against an absolute <base href> on another host",
    html: `<base href="https://cdn.example/root/"><a href="x?y=1">x</a>`,
    links: ["https://cdn.example/root/x?y=1"],
    base: "https://cdn.example/root/",
  },
  {
    name: "uses only the first <base> with an href, even for links before it",
    html: `<a href="early">e</a><base target="_top"><base href="/one/"><base href="/two/">` +
      `<a href="late">l</a>`,
    links: ["https://a.example/one/early", "https://a.example/one/late"],
    base: "https://a.example/one/",
  },
  {
    name: "ignores a <base href> that does not parse or is not http(s)",
    html: `<base href="http://[bad"><a href="x">x</a>`,
    links: ["https://a.example/dir/x"],
  },
  {
    name: "ignores a javascript: <base href>",
    html: `<base href="javascript:alert(1)"><a href="x">x</a>`,
    links: ["https://a.example/dir/x"],
  },
  {
    name: "keeps a protocol-relative href on the page's scheme",
    html: `<a href="//b.example/p">b</a>`,
    links: ["https://b.example/p"],
  },
  // Which elements
  {
    name: "collects <area href>",
    html: `<map><area shape="rect" href="/area"></map>`,
    links: ["https://a.example/area"],
  },
  {
    name: "collects <link rel=next> (a case-insensitive token) and no other <link>",
    html: `<link rel="stylesheet" href="/s.css"><link rel="prev" href="/p1">` +
      `<link rel="Next prefetch" href="/p3"><link rel=next href="/p4"><link href="/none">`,
    links: ["https://a.example/p3", "https://a.example/p4"],
  },
  {
    name: "skips an <a> without href",
    html: `<a name="top">anchor</a><a id="x" class="y">no href</a><a href="/yes">y</a>`,
    links: ["https://a.example/yes"],
  },
  {
    name: "reads an empty href as the page itself",
    html: `<a href="">self</a>`,
    links: ["https://a.example/dir/page.html"],
  },
  // nofollow
  {
    name: "skips a link whose rel holds nofollow, in any case and position",
    html: `<a rel="nofollow" href="/ad1">1</a><a rel="noopener NOFOLLOW" href="/ad2">2</a>` +
      `<link rel="next nofollow" href="/p2"><area rel="nofollow" href="/ad3">` +
      `<a rel="external" href="/ok">ok</a><a rel="nofollowing" href="/ok2">ok2</a>`,
    links: ["https://a.example/ok", "https://a.example/ok2"],
  },
  {
    name: "returns no links under <meta name=robots content=nofollow>",
    html: `<meta name="robots" content="nofollow"><a href="/x">x</a>`,
    links: [],
    nofollow: true,
  },
  {
    name: "reads nofollow from a comma-separated, mixed-case robots content and a spaced name",
    html: `<meta name=" Robots " content="NoIndex,NoFollow"><a href="/x">x</a>`,
    links: [],
    nofollow: true,
  },
  {
    name: "reads robots content none as nofollow",
    html: `<META NAME="ROBOTS" CONTENT=" none "><a href="/x">x</a>`,
    links: [],
    nofollow: true,
  },
  {
    name: "applies a robots nofollow that comes after the links",
    html: `<a href="/x">x</a><meta name="robots" content="noarchive, nofollow">`,
    links: [],
    nofollow: true,
  },
  {
    name: "keeps the links under robots noindex alone",
    html: `<meta name="robots" content="noindex"><a href="/x">x</a>`,
    links: ["https://a.example/x"],
  },
  {
    name: "reads only the robots meta, not an agent's or another name",
    html: `<meta name="googlebot" content="nofollow"><meta name="politely" content="none">` +
      `<meta content="nofollow"><a href="/x">x</a>`,
    links: ["https://a.example/x"],
  },
  {
    name: "still reports the base under nofollow",
    html: `<base href="/b/"><meta name="robots" content="none">`,
    links: [],
    nofollow: true,
    base: "https://a.example/b/",
  },
  // Fragments and schemes
  {
    name: "drops the fragment and keeps the query",
    html: `<a href="/x?q=1&r=2#frag">x</a><a href="#top">top</a><a href="/y#">y</a>`,
    links: [
      "https://a.example/x?q=1&r=2",
      "https://a.example/dir/page.html",
      "https://a.example/y",
    ],
  },
  {
    name: "keeps only http and https URLs",
    html: `<a href="mailto:me@a.example">m</a><a href="javascript:void(0)">j</a>` +
      `<a href="JavaScript:go()">J</a><a href="data:text/html,hi">d</a><a href="tel:+1555">t</a>` +
      `<a href="ftp://f.example/x">f</a><a href="HTTP://b.example/Up">u</a>` +
      `<a href="https://c.example">c</a>`,
    links: ["http://b.example/Up", "https://c.example/"],
  },
  {
    name: "skips an href that does not parse, silently",
    html: `<a href="http://[::1">bad</a><a href="https://exa mple.com/">bad</a>` +
      `<a href="http://b.example:99999/">bad</a><a href="/good">good</a>`,
    links: ["https://a.example/good"],
  },
  // Dedupe
  {
    name: "removes duplicates, keeping first-seen order",
    html: `<a href="/b">b</a><a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>` +
      `<a href="https://a.example/a">a</a><a href="/c#again">c</a><a href="/b?x">bx</a>`,
    links: [
      "https://a.example/b",
      "https://a.example/a",
      "https://a.example/c",
      "https://a.example/b?x",
    ],
  },
  // What the tokenizer hands over
  {
    name: "decodes entities in an href (&amp; in a query)",
    html: `<a href="/s?a=1&amp;b=2&#38;c=3">s</a><a href="&#x2F;ent&#47;">e</a>`,
    links: ["https://a.example/s?a=1&b=2&c=3", "https://a.example/ent/"],
  },
  {
    name: "trims whitespace around an href",
    html: `<a href="  /x \n">x</a><a href="\n\t/y\t">y</a><a href="   ">self</a>`,
    links: ["https://a.example/x", "https://a.example/y", "https://a.example/dir/page.html"],
  },
  {
    name: "reads upper-case tags, attributes and unquoted values",
    html: `<BASE HREF="/B/"><A HREF="X">x</A><AREA HREF=Y><LINK REL=NEXT HREF="/P2">` +
      `<A REL=NOFOLLOW HREF="/no">no</A><a href=/u?q=1>u</a>`,
    links: [
      "https://a.example/B/X",
      "https://a.example/B/Y",
      "https://a.example/P2",
      "https://a.example/u?q=1",
    ],
    base: "https://a.example/B/",
  },
  {
    name: "reads malformed HTML as a browser would, without throwing",
    html: `</a></div><<a href=/ok>>` + `<a href="/first" href="/second">` +
      `<a href="/x"<a href="/y">` + `<div <a href="/in-div-attrs">` + `<p><a\nhref\n=\n"/nl">` +
      `<table><tr><a href="/in-table"></td></b></i>` + `<a href='/unterminated`,
    links: [
      "https://a.example/ok",
      "https://a.example/first",
      "https://a.example/x",
      "https://a.example/nl",
      "https://a.example/in-table",
    ],
  },
  {
    name: "ignores links in comments, <script>, <style>, <textarea> and <title>",
    html: `<!-- <a href="/c"> --><script>"<a href='/s'>"</script><style>a[href="/st"]{}</style>` +
      `<textarea><a href="/ta"></textarea><title><a href="/ti"></title><a href="/real">r</a>`,
    links: ["https://a.example/real"],
  },
  {
    name: "returns nothing for an empty page",
    html: "",
    links: [],
  },
];

describe("extractLinks()", () => {
  for (const c of CASES) {
    it(`extractLinks() ${c.name}`, () => {
      expect(extractLinks(c.html, PAGE)).toEqual({
        links: c.links,
        nofollow: c.nofollow ?? false,
        base: c.base ?? PAGE,
      });
    });
  }

  it("extractLinks() gives the result shown in its JSDoc example", () => {
    const { links } = extractLinks(
      `<a href="b.html#top">B</a> <a href="/c?x=1&amp;y=2">C</a>
       <a rel="nofollow" href="/ad">ad</a> <a href="mailto:me@a.example">me</a>`,
      "https://a.example/docs/a.html",
    );
    expect(links).toEqual(["https://a.example/docs/b.html", "https://a.example/c?x=1&y=2"]);
  });

  it("extractLinks() stops at 10,000 links, keeping the first ones", () => {
    const html = Array.from({ length: 10_005 }, (_, i) => `<a href="/p/${i}">${i}</a>`).join("");
    const { links } = extractLinks(html, PAGE);
    expect(links).toHaveLength(10_000);
    expect(links[0]).toBe("https://a.example/p/0");
    expect(links[9_999]).toBe("https://a.example/p/9999");
  });

  it("extractLinks() counts the cap in distinct links, not hrefs", () => {
    const repeated = `<a href="/same">s</a><a href="mailto:x@a.example">m</a>`.repeat(10_000);
    const { links } = extractLinks(`${repeated}<a href="/last">l</a>`, PAGE);
    expect(links).toEqual(["https://a.example/same", "https://a.example/last"]);
  });

  it("extractLinks() throws a TypeError when the page URL is not absolute", () => {
    expect(() => extractLinks("<a href=x>", "/relative")).toThrow(TypeError);
    expect(() => extractLinks("<a href=x>", "")).toThrow(
      `Cannot extract links as 'pageUrl' is not an absolute URL: current value is ""`,
    );
  });
});

/** Pieces of markup that, shuffled together, reach the tokenizer's odd corners. */
const MARKUP = fc.constantFrom(
  '<a href="/p?x=1#y">',
  "<a href=../q>",
  "<area href='//b.example/c'>",
  '<base href="/b/">',
  "<a href=",
  "<A HREF='",
  "<area href=",
  "<base href=",
  "<link rel=next href=",
  '<meta name=robots content="nofollow">',
  " rel=nofollow",
  '"',
  "'",
  ">",
  "</a>",
  "<",
  "/x",
  "?q=1&amp;r",
  "#frag",
  "//b.example",
  "..",
  "http://",
  "https://[",
  "mailto:",
  "javascript:",
  "data:,",
  "&#x23;",
  "&amp",
  " ",
  "\n",
  "<!--",
  "-->",
  "<script>",
  "</script>",
  "<svg>",
  "<![CDATA[",
);

const html = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.array(fc.oneof({ arbitrary: MARKUP, weight: 4 }, fc.string({ maxLength: 5 })), {
    maxLength: 40,
  }).map((parts) => parts.join("")),
);

describe("extractLinks() properties", () => {
  it("extractLinks() never throws and returns only distinct absolute http(s) URLs without fragments", () => {
    fc.assert(
      fc.property(html, fc.constantFrom(PAGE, "http://b.example/", "https://c.example/a/b?q#f"), (
        page,
        pageUrl,
      ) => {
        const result = extractLinks(page, pageUrl);
        expect(new Set(result.links).size).toBe(result.links.length);
        if (result.nofollow) expect(result.links).toEqual([]);
        for (const link of result.links) {
          const url = new URL(link);
          expect(url.protocol === "http:" || url.protocol === "https:").toBe(true);
          expect(url.href).toBe(link);
          expect(link).not.toContain("#");
        }
        expect(["http:", "https:"]).toContain(new URL(result.base).protocol);
      }),
      { numRuns: 500 },
    );
  });
});
