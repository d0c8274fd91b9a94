import { readFileSync, writeFileSync } from "node:fs";
import { WARCParser } from "warcio";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type RecordingServer, startRecordingServer } from "./_helpers/loopback_server.ts";
import { politely, readLines, tempDir } from "./_helpers/politely_cli.ts";
import { JsonLinesFile, recentOutputUrls } from "../lib/cli/json_lines_file.ts";
import { parseCliArgs } from "../lib/cli/args.ts";

const servers: RecordingServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** A loopback site of linked pages: `pages` maps a path to its HTML (a string) or a redirect. */
async function linkedSite(
  pages: (origin: string) => Record<string, string | { redirect: string }>,
): Promise<RecordingServer> {
  let table: Record<string, string | { redirect: string }> = {};
  const s = await startRecordingServer((req, res) => {
    const page = table[req.url ?? ""];
    if (page === undefined) {
      res.writeHead(404, { "content-type": "text/html", connection: "close" });
      res.end("<p>not here</p>");
    } else if (typeof page === "string") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", connection: "close" });
      res.end(page);
    } else {
      res.writeHead(302, { location: page.redirect, connection: "close" });
      res.end();
    }
  });
  table = pages(s.origin);
  servers.push(s);
  return s;
}

/**
 * A site of pages `/1`, `/2`, ... that holds every request after `/answered`
 * unanswered (a crawl killed while it waits) until `release()`; URLs of
 * `count` pages written to `dir/urls.txt`.
 */
async function holdingSite(answered: number, count: number, dir: string) {
  let hang = true;
  const held: import("node:http").ServerResponse[] = [];
  const s = await startRecordingServer((req, res) => {
    const n = Number(req.url?.slice(1));
    if (hang && n > answered) {
      held.push(res);
      return;
    }
    res.writeHead(200, { "content-type": "text/plain", connection: "close" });
    res.end(`page ${n}`);
  });
  servers.push(s);
  const urls = Array.from({ length: count }, (_, i) => `${s.origin}/${i + 1}`);
  writeFileSync(join(dir, "urls.txt"), urls.join("\n"));
  const release = () => {
    hang = false;
    for (const res of held) res.destroy();
  };
  return { urls, held, release };
}

/**
 * A crawl of a {@link holdingSite} with a job directory (one page at a time,
 * `extra` arguments added), killed with SIGKILL once the site holds a
 * request, then `afterKill`, then the site released and the same command run
 * again. Returns the URLs and the second run.
 */
async function killedAndResumed(
  dir: string,
  answered: number,
  count: number,
  extra: readonly string[],
  afterKill: (urls: readonly string[]) => void = () => {},
) {
  const { urls, held, release } = await holdingSite(answered, count, dir);
  const args = [
    "crawl",
    join(dir, "urls.txt"),
    "--jobdir",
    join(dir, "job"),
    ...extra,
    "--set",
    "CONCURRENT_REQUESTS_PER_DOMAIN=1",
    "--set",
    "ROBOTSTXT_OBEY=false",
    "--quiet",
  ];
  const first = await politely(args, { interruptWhen: () => held.length > 0, signal: "SIGKILL" });
  expect(first.code).toBe(null);
  afterKill(urls);
  release();
  return { urls, second: await politely(args) };
}

describe("politely crawl --follow", () => {
  it(
    "politely crawl --follow --max-depth fetches exactly the linked pages within depth, once each",
    async () => {
      const other = await linkedSite(() => ({ "/": "<p>elsewhere</p>" }));
      const s = await linkedSite((origin) => ({
        // Fan-out, a cycle back to /, relative links, a nofollow, an off-domain link, a redirect.
        "/": `<a href="a">a</a> <a href="/b">b</a> <a href="${other.origin}/">x</a>
        <a rel="nofollow" href="/secret">s</a> <a href="/moved">m</a> <a href="#top">t</a>`,
        "/a": `<a href="/">home</a> <a href="./c?x=1&amp;y=2">c</a> <a href="/a">self</a>`,
        "/b": `<link rel="next" href="/d"><a href="mailto:me@example.com">mail</a>`,
        "/moved": { redirect: `${origin}/e` },
        "/e": `<p>moved here</p><a href="/deep">deeper</a>`,
        "/c?x=1&y=2": `<a href="/deep">deeper</a>`,
        "/d": `<meta name="robots" content="noindex, nofollow"><a href="/hidden">h</a>`,
        "/deep": `<p>depth 2</p>`,
        "/secret": `<p>never</p>`,
        "/hidden": `<p>never</p>`,
      }));
      const dir = tempDir();
      const out = join(dir, "out.jsonl");
      const run = await politely([
        "crawl",
        "-",
        "--follow",
        "--max-depth",
        "1",
        "--quiet",
        "--output",
        out,
        "--set",
        "ROBOTSTXT_OBEY=false",
      ], { stdin: `${s.origin}/\n` });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      const paths = s.arrivals.map((a) => a.path).sort();
      // Depth 1: the start page's followed links (the redirect's target is
      // fetched by the redirect itself); not /deep (depth 2), nor the nofollows.
      expect(paths).toEqual(["/", "/a", "/b", "/e", "/moved"].sort());
      expect(other.arrivals).toEqual([]);
      const records = readLines(out);
      expect(records.map((r) => r.url).sort()).toEqual(
        ["/", "/a", "/b", "/moved"].map((p) => `${s.origin}${p}`).sort(),
      );
      const moved = records.find((r) => r.url === `${s.origin}/moved`)!;
      expect(moved.finalUrl).toBe(`${s.origin}/e`);
      expect(moved.contentType).toBe("text/html; charset=utf-8");
      expect(moved.bytes).toBe('<p>moved here</p><a href="/deep">deeper</a>'.length);
      expect((moved.headers as Record<string, string>)["content-type"]).toBe(
        "text/html; charset=utf-8",
      );
    },
    120_000,
  );

  it(
    "politely crawl --follow without --max-depth follows every link of the site, each URL once",
    async () => {
      const s = await linkedSite(() => ({
        "/": `<a href="/a">a</a><a href="/b">b</a>`,
        "/a": `<a href="/b">b</a><a href="/c">c</a><a href="/">home</a>`,
        "/b": `<a href="/c">c</a><a href="/a">a</a>`,
        "/c": `<a href="/d">d</a>`,
        "/d": `<a href="/">home</a>`,
      }));
      const run = await politely(
        ["crawl", "-", "--follow", "--quiet", "--set", "ROBOTSTXT_OBEY=false"],
        { stdin: `${s.origin}/\n` },
      );
      expect(run.code).toBe(0);
      expect(s.arrivals.map((a) => a.path).sort()).toEqual(["/", "/a", "/b", "/c", "/d"]);
    },
    120_000,
  );

  it("politely crawl --follow --max-pages stops following at N requests in all", async () => {
    const s = await linkedSite(() => ({
      "/": Array.from({ length: 20 }, (_, i) => `<a href="/p${i}">${i}</a>`).join(""),
      ...Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`/p${i}`, "<p>leaf</p>"])),
    }));
    const run = await politely(
      ["crawl", "-", "--follow", "--max-pages", "5", "--quiet", "--set", "ROBOTSTXT_OBEY=false"],
      { stdin: `${s.origin}/\n` },
    );
    expect(run.code).toBe(0);
    // The queue is LIFO by default (Scrapy's): which four links is the
    // order's business; that there are four is the limit's.
    const paths = s.arrivals.map((a) => a.path);
    expect(paths[0]).toBe("/");
    expect(paths).toHaveLength(5);
    expect(new Set(paths).size).toBe(5);
  }, 120_000);

  it("politely crawl --allow-domain widens --follow to another domain", async () => {
    const other = await linkedSite(() => ({ "/": "<p>elsewhere</p>" }));
    const s = await linkedSite(() => ({ "/": `<a href="${other.origin}/">x</a>` }));
    // Both loopback sites are 127.0.0.1, told apart by their ports: the
    // start domain is "127.0.0.1:PORT", and --allow-domain 127.0.0.1 lets the other in.
    const run = await politely(
      [
        "crawl",
        "-",
        "--follow",
        "--allow-domain",
        "127.0.0.1",
        "--quiet",
        "--set",
        "ROBOTSTXT_OBEY=false",
      ],
      { stdin: `${s.origin}/\n` },
    );
    expect(run.code).toBe(0);
    expect(other.arrivals.map((a) => a.path)).toEqual(["/"]);
  }, 120_000);

  it("parseCliArgs() checks the link-following options", () => {
    const table: [string[], string][] = [
      [["--max-depth", "2"], "--max-depth needs --follow"],
      [["--allow-domain", "a.test"], "--allow-domain needs --follow"],
      [["--follow", "--max-depth=-1"], "--max-depth expects a whole number >= 0"],
      [["--follow", "--max-pages", "0"], "--max-pages expects a whole number >= 1"],
      [["--follow", "--max-pages", "2.5"], "--max-pages expects a whole number >= 1"],
      [["--follow", "--allow-domain", "http://a.test/"], "--allow-domain expects a domain"],
    ];
    for (const [flags, message] of table) {
      expect(() => parseCliArgs(["crawl", "urls.txt", ...flags]), flags.join(" ")).toThrow(
        message,
      );
    }
    expect(parseCliArgs(["crawl", "-", "--follow", "--allow-domain", "*.Example.com"]))
      .toMatchObject({
        follow: { maxDepth: undefined, maxPages: undefined, allowDomains: ["example.com"] },
      });
  });
});

describe("politely crawl --output across runs", () => {
  it(
    "politely crawl refuses to replace an existing --output without --overwrite, in one line",
    async () => {
      const s = await linkedSite(() => ({ "/": "<p>x</p>" }));
      const dir = tempDir();
      const out = join(dir, "out.jsonl");
      writeFileSync(out, '{"url":"kept"}\n');
      const refused = await politely(["crawl", "-", "--quiet", "--output", out], {
        stdin: `${s.origin}/\n`,
      });
      expect(refused.code).toBe(2);
      expect(refused.stderr.trim().split("\n")).toHaveLength(1);
      expect(refused.stderr).toContain(`--output '${out}' already exists: pass --overwrite`);
      expect(readFileSync(out, "utf8")).toBe('{"url":"kept"}\n');
      expect(s.arrivals).toEqual([]);
      const replaced = await politely(["crawl", "-", "--quiet", "--output", out, "--overwrite"], {
        stdin: `${s.origin}/\n`,
      });
      expect(replaced.code).toBe(0);
      expect(readLines(out).map((r) => r.url)).toEqual([`${s.origin}/`]);
    },
    120_000,
  );

  it("JsonLinesFile in append mode keeps what is there and cuts a torn last line", () => {
    const dir = tempDir();
    const path = join(dir, "out.jsonl");
    writeFileSync(path, '{"url":"a"}\n{"url":"b"}\n{"url":"c');
    const file = new JsonLinesFile(path, "output", "append");
    file.write({ url: "d" });
    file.close();
    expect(readFileSync(path, "utf8")).toBe('{"url":"a"}\n{"url":"b"}\n{"url":"d"}\n');
    // A file with no whole line at all, and a missing one.
    writeFileSync(path, '{"url":"torn');
    const again = new JsonLinesFile(path, "output", "append");
    again.write({ url: "e" });
    again.close();
    expect(readFileSync(path, "utf8")).toBe('{"url":"e"}\n');
    const fresh = new JsonLinesFile(join(dir, "new.jsonl"), "output", "append");
    fresh.close();
    expect(readFileSync(join(dir, "new.jsonl"), "utf8")).toBe("");
  });

  it("recentOutputUrls() counts the URLs of the last records, skipping torn and foreign lines", () => {
    const dir = tempDir();
    const path = join(dir, "out.jsonl");
    writeFileSync(path, '{"url":"a"}\n{"url":"b"}\nnot json\n{"url":"a"}\n{"x":1}\n{"url":"c');
    expect([...recentOutputUrls(path)]).toEqual([["a", 2], ["b", 1]]);
    // Only the tail (the last 29 bytes start exactly at the second "a"
    // record; one byte less and it is cut, so not read).
    expect([...recentOutputUrls(path, 29)]).toEqual([["a", 1]]);
    expect([...recentOutputUrls(path, 28)]).toEqual([]);
    expect(recentOutputUrls(join(dir, "missing.jsonl")).size).toBe(0);
  });

  it(
    "politely crawl --jobdir resumed after SIGKILL appends to --output: every page once",
    async () => {
      // One page at a time; the server holds every request after the 4th
      // unanswered, and the crawl is killed (no chance to flush or clean up).
      const dir = tempDir();
      const out = join(dir, "out.jsonl");
      const { urls, second } = await killedAndResumed(dir, 4, 10, ["--output", out], (urls) => {
        expect(readLines(out).map((r) => r.url)).toEqual(urls.slice(0, 4));
      });
      expect(second.code).toBe(0);
      const all = readLines(out).map((r) => r.url);
      expect([...all].sort()).toEqual([...urls].sort());
      expect(new Set(all).size).toBe(all.length);
    },
    120_000,
  );
});

/** (type, target URI, HTTP status) of each record of a WARC file. */
async function warcRecords(path: string): Promise<[string, string, number | null][]> {
  const parser = new WARCParser([new Uint8Array(readFileSync(path))], { parseHttp: true });
  const out: [string, string, number | null][] = [];
  for await (const record of parser) {
    await record.readFully(false);
    const status = record.httpHeaders?.statusCode;
    out.push([
      record.warcType ?? "",
      record.warcTargetURI ?? "",
      status === undefined ? null : Number(status),
    ]);
  }
  return out;
}

describe("politely crawl --warc", () => {
  it(
    "politely crawl --warc FILE.gz archives a request and a response record per page, readable by warcio",
    async () => {
      const s = await linkedSite((origin) => ({
        "/": `<a href="/a">a</a><a href="/moved">m</a>`,
        "/a": `<p>a</p>`,
        "/moved": { redirect: `${origin}/b` },
        "/b": `<p>b</p>`,
      }));
      const dir = tempDir();
      const warc = join(dir, "crawl.warc.gz");
      const run = await politely(
        ["crawl", "-", "--follow", "--quiet", "--warc", warc, "--set", "ROBOTSTXT_OBEY=false"],
        { stdin: `${s.origin}/\n` },
      );
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      const records = await warcRecords(warc);
      expect(records[0]![0]).toBe("warcinfo");
      const responses = records.filter((r) => r[0] === "response");
      // The final URL after a redirect is the archived one.
      expect(responses.map((r) => r[1]).sort()).toEqual(
        ["/", "/a", "/b"].map((p) => `${s.origin}${p}`).sort(),
      );
      expect(responses.every((r) => r[2] === 200)).toBe(true);
      expect(records.filter((r) => r[0] === "request").length).toBe(3);
    },
    120_000,
  );

  it(
    "politely crawl --warc resumed after SIGKILL appends: every page archived, again only if it was not finished",
    async () => {
      const dir = tempDir();
      const warc = join(dir, "crawl.warc");
      const { urls, second } = await killedAndResumed(dir, 3, 6, ["--warc", warc]);
      // The killed crawl's lock is taken over, with a warning; nothing else is said.
      expect(second.stderr).toMatch(
        /^politely: warning: Took over the lock of job directory [^\n]*\n$/,
      );
      expect(second.code).toBe(0);
      const records = await warcRecords(warc);
      expect(records.filter((r) => r[0] === "warcinfo")).toHaveLength(1);
      const archived = records.filter((r) => r[0] === "response").map((r) => r[1] as string);
      // Every page once, and a page twice only when its record reached the
      // file just before the kill while its completion had not reached the
      // job directory: it was fetched again (the WARC's tail is not searched
      // for it, docs/DECISIONS.md). The site answered three before it held
      // the fourth, and a page's slot is free before its record is written,
      // so under load the last one or two answered can be in that state (a
      // duplicate of /2 seen once on Bun).
      expect([...new Set(archived)].sort()).toEqual([...urls].sort());
      expect(archived.length - urls.length).toBeLessThanOrEqual(2);
    },
    120_000,
  );

  it(
    "politely crawl --save-bodies DIR writes each body to a file that its --output record names",
    async () => {
      const s = await linkedSite(() => ({
        "/": `<a href="/a">a</a>`,
        "/a": `<p>page a</p>`,
      }));
      const dir = tempDir();
      const out = join(dir, "out.jsonl");
      const bodies = join(dir, "bodies");
      const run = await politely(
        [
          "crawl",
          "-",
          "--follow",
          "--quiet",
          "--output",
          out,
          "--save-bodies",
          bodies,
          "--set",
          "ROBOTSTXT_OBEY=false",
        ],
        { stdin: `${s.origin}/\n` },
      );
      expect(run.code).toBe(0);
      const records = readLines(out);
      expect(records).toHaveLength(2);
      const host = new URL(s.origin).host.replace(/[^a-z0-9.-]/gi, "_");
      for (const r of records) {
        expect(r.bodyFile as string).toMatch(new RegExp(`^${host}/[0-9a-f]{24}\\.html$`));
      }
      const a = records.find((r) => r.url === `${s.origin}/a`)!;
      expect(readFileSync(join(bodies, a.bodyFile as string), "utf8")).toBe("<p>page a</p>");
    },
    120_000,
  );

  it(
    "politely crawl refuses an existing --warc without --overwrite or a crawl to resume",
    async () => {
      const dir = tempDir();
      const warc = join(dir, "old.warc");
      writeFileSync(warc, "WARC/1.1\r\n");
      const run = await politely(["crawl", "-", "--quiet", "--warc", warc], { stdin: "" });
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`--warc '${warc}' already exists: pass --overwrite`);
    },
    120_000,
  );
});
