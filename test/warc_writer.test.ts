import { afterEach, describe, expect, it } from "vitest";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { WARCParser, type WARCRecord } from "warcio";
import {
  openWarcWriter,
  type WarcExchange,
  WarcWriteError,
  type WarcWriter,
} from "../lib/http/warc_writer.ts";

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "politely-warc-"));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const text = (s: string) => new TextEncoder().encode(s);
const binary = Uint8Array.from({ length: 256 }, (_, i) => i);

function exchange(path: string, body: Uint8Array, more: Partial<WarcExchange> = {}): WarcExchange {
  return {
    url: `https://a.example${path}`,
    method: "GET",
    requestHeaders: { "User-Agent": "politely-test", Accept: "*/*" },
    status: 200,
    statusText: "OK",
    responseHeaders: { "Content-Type": "text/html; charset=utf-8" },
    body,
    date: new Date(Date.UTC(2024, 4, 1, 12, 0, 0, 250)),
    ...more,
  };
}

interface Parsed {
  readonly record: WARCRecord;
  readonly payload: Uint8Array;
  /** The record's place in the file: offset and length as an indexer sees them. */
  readonly offset: number;
  readonly length: number;
}

/** The records of a WARC file; without `parseHttp` each payload is the whole record block. */
async function parseWarc(path: string, parseHttp = true): Promise<Parsed[]> {
  const parser = new WARCParser([new Uint8Array(await readFile(path))], { parseHttp });
  const out: Parsed[] = [];
  for await (const record of parser) {
    const payload = await record.readFully(false);
    out.push({ record, payload, offset: parser.offset, length: parser.recordLength });
  }
  return out;
}

const types = (records: readonly Parsed[]) => records.map((r) => r.record.warcType);
/** `length` bytes that do not compress (xorshift32 from `seed`). */
function noise(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed + 0x9e3779b9;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** toEqual walks a typed array element by element: seconds for a few MB. */
const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));
const sha256 = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

async function writeAll(writer: WarcWriter, exchanges: readonly WarcExchange[]): Promise<void> {
  for (const x of exchanges) await writer.write(x);
}

describe("openWarcWriter()", () => {
  for (const name of ["crawl.warc", "crawl.warc.gz"]) {
    it(`openWarcWriter() writes warcinfo, then request and response records that warcio reads back (${name})`, async () => {
      const path = join(await tempDir(), name);
      const writer = await openWarcWriter(path);
      expect(writer.gzip).toBe(name.endsWith(".gz"));
      const headers = new Headers([["content-type", "image/png"], ["x-note", "caf\u00c3\u00a9"]]);
      headers.append("set-cookie", "a=1");
      headers.append("set-cookie", "b=2");
      const sent = [
        exchange("/page?q=1", text("<p>hello</p>")),
        exchange("/image.png", binary, { responseHeaders: headers }),
        exchange("/empty", new Uint8Array(), { status: 204, statusText: "" }),
      ];
      await writeAll(writer, sent);
      await writer.close();

      const records = await parseWarc(path);
      // The digests are over the bytes in the file: the whole block (HTTP
      // header block and body) and the body.
      const blocks = await parseWarc(path, false);
      records.forEach((r, i) => {
        if (r.record.warcType === "warcinfo") return;
        expect(r.record.warcBlockDigest).toBe(sha256(blocks[i]!.payload));
        expect(r.record.warcPayloadDigest).toBe(sha256(r.payload));
      });
      expect(types(records)).toEqual([
        "warcinfo",
        "request",
        "response",
        "request",
        "response",
        "request",
        "response",
      ]);
      for (const r of records) expect(r.record.warcHeaders.statusline).toBe("WARC/1.1");
      const info = new TextDecoder().decode(records[0]!.payload);
      expect(info).toContain("software: politely\r\n");
      expect(info).toContain("format: WARC File Format 1.1\r\n");
      expect(records[0]!.record.warcHeader("WARC-Filename")).toBe(name);

      sent.forEach((x, i) => {
        const request = records[1 + 2 * i]!.record;
        const response = records[2 + 2 * i]!;
        expect(request.warcTargetURI).toBe(x.url);
        expect(response.record.warcTargetURI).toBe(x.url);
        expect(request.warcDate).toBe("2024-05-01T12:00:00.250Z");
        expect(response.record.warcDate).toBe("2024-05-01T12:00:00.250Z");
        expect(request.warcConcurrentTo).toEqual([response.record.warcHeader("WARC-Record-ID")]);
        expect(request.httpHeaders?.headers.get("user-agent")).toBe("politely-test");
        expect(request.httpHeaders?.headers.get("host")).toBe("a.example");
        expect(response.payload).toEqual(x.body);
        expect(response.record.warcPayloadDigest).toBe(sha256(x.body));
      });
      expect(records[1]!.record.httpHeaders?.statusline).toBe("GET /page?q=1 HTTP/1.1");
      expect(records[2]!.record.httpHeaders?.statusline).toBe("HTTP/1.1 200 OK");
      expect(records[6]!.record.httpHeaders?.statusline).toBe("HTTP/1.1 204 No Content");
      expect(records[6]!.record.getResponseInfo()?.status).toBe(204);
      const imageHeaders = records[4]!.record.httpHeaders!.headers;
      expect(imageHeaders.get("content-type")).toBe("image/png");
      expect(imageHeaders.get("set-cookie")).toContain("a=1");
      expect(imageHeaders.get("set-cookie")).toContain("b=2");

      // The UTF-8 bytes of the header value, as they came over the wire.
      const raw = Buffer.from(
        name.endsWith(".gz") ? gunzipSync(await readFile(path)) : await readFile(path),
      );
      expect(raw.includes(Buffer.from("x-note: caf\u00e9\r\n", "utf8"))).toBe(true);
    });
  }

  it("openWarcWriter() makes each record of a .warc.gz its own gzip member", async () => {
    const path = join(await tempDir(), "crawl.warc.gz");
    const writer = await openWarcWriter(path);
    await writeAll(writer, [exchange("/1", text("one")), exchange("/2", binary)]);
    await writer.close();
    const file = await readFile(path);
    const records = await parseWarc(path);
    expect(records).toHaveLength(5);
    let next = 0;
    for (const r of records) {
      expect(r.offset).toBe(next);
      const member = gunzipSync(file.subarray(r.offset, r.offset + r.length));
      expect(member.toString("latin1", 0, 10)).toBe("WARC/1.1\r\n");
      next = r.offset + r.length;
    }
    expect(next).toBe(file.length);
  });

  it("openWarcWriter() defaults gzip from the name and takes gzip and software options", async () => {
    const dir = await tempDir();
    const path = join(dir, "crawl.gz.warc");
    const writer = await openWarcWriter(path, { gzip: true, software: "mybot/2.0" });
    expect(writer.gzip).toBe(true);
    expect(writer.path).toBe(path);
    await writer.close();
    const file = await readFile(path);
    expect([file[0], file[1]]).toEqual([0x1f, 0x8b]);
    const records = await parseWarc(path);
    expect(new TextDecoder().decode(records[0]!.payload)).toContain("software: mybot/2.0\r\n");
    await expect(openWarcWriter(join(dir, "x.warc"), { software: "a\r\nb" })).rejects.toThrow(
      TypeError,
    );
  });

  for (const name of ["crawl.warc", "crawl.warc.gz"]) {
    it(`openWarcWriter() appends to an existing file on resume, keeping its records and one warcinfo (${name})`, async () => {
      const path = join(await tempDir(), name);
      const first = await openWarcWriter(path);
      await first.write(exchange("/1", text("first")));
      await first.close();
      const sizeBefore = (await stat(path)).size;
      const before = await readFile(path);

      const second = await openWarcWriter(path);
      expect(second.truncatedBytes).toBe(0);
      await second.write(exchange("/2", text("second")));
      await second.close();

      const after = await readFile(path);
      expect(after.subarray(0, sizeBefore)).toEqual(before);
      const records = await parseWarc(path);
      expect(types(records)).toEqual(["warcinfo", "request", "response", "request", "response"]);
      expect(records.filter((r) => r.record.warcType === "response").map((r) => r.payload))
        .toEqual([text("first"), text("second")]);
    });
  }

  it("WarcWriter.write() keeps overlapping writes whole and in call order", async () => {
    const path = join(await tempDir(), "crawl.warc.gz");
    const writer = await openWarcWriter(path);
    // A large incompressible body first: serializing it (digests, gzip) takes
    // longest, so without the queue the small ones after it would reach the
    // file first.
    const sent = Array.from(
      { length: 24 },
      (_, i) => exchange(`/${i}`, noise(i === 0 ? 4_000_000 : i % 5 === 0 ? 200_000 : i, i)),
    );
    await Promise.all(sent.map((x) => writer.write(x)));
    await writer.close();
    const records = (await parseWarc(path)).slice(1);
    expect(records).toHaveLength(48);
    expect(records.map((r) => r.record.warcTargetURI)).toEqual(
      sent.flatMap((x) => [x.url, x.url]),
    );
    sent.forEach((x, i) => {
      const request = records[2 * i]!;
      const response = records[2 * i + 1]!;
      expect(request.record.warcType).toBe("request");
      expect(response.record.warcType).toBe("response");
      expect(request.record.warcTargetURI).toBe(x.url);
      expect(response.record.warcTargetURI).toBe(x.url);
      expect(request.record.warcConcurrentTo).toEqual([
        response.record.warcHeader("WARC-Record-ID"),
      ]);
      expect(sameBytes(response.payload, x.body)).toBe(true);
    });
  });

  it("WarcWriter.write() rejects after close(), naming the file", async () => {
    const path = join(await tempDir(), "crawl.warc");
    const writer = await openWarcWriter(path);
    const pending = writer.write(exchange("/1", text("before close")));
    const closed = writer.close();
    const late = writer.write(exchange("/2", text("after close")));
    await expect(late).rejects.toThrow(WarcWriteError);
    await expect(late).rejects.toThrow(`Cannot write WARC file '${path}': the writer is closed`);
    await pending;
    await closed;
    await writer.close();
    expect(types(await parseWarc(path))).toEqual(["warcinfo", "request", "response"]);
  });

  it("openWarcWriter() rejects an unwritable path with an error naming the file and the cause", async () => {
    const dir = await tempDir();
    const missing = join(dir, "no-such-dir", "crawl.warc");
    const error = await openWarcWriter(missing).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WarcWriteError);
    expect((error as WarcWriteError).message).toContain(`Cannot open WARC file '${missing}': `);
    expect((error as WarcWriteError).message).toContain("ENOENT");
    expect((error as WarcWriteError).path).toBe(missing);
    expect((error as WarcWriteError).code).toBe("ENOENT");
    await expect(openWarcWriter(dir)).rejects.toThrow(`Cannot open WARC file '${dir}': `);
  });

  it("openWarcWriter() rejects a full disk (Linux's /dev/full) with an error naming the file and ENOSPC", async () => {
    const full = "/dev/full";
    if (!(await stat(full).then(() => true, () => false))) return; // not Linux
    const error = await openWarcWriter(full).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WarcWriteError);
    expect((error as WarcWriteError).message).toContain(`Cannot open WARC file '${full}': `);
    expect((error as WarcWriteError).code).toBe("ENOSPC");
  });

  it("WarcWriter.write() rejects a malformed exchange and writes nothing for it", async () => {
    const path = join(await tempDir(), "crawl.warc");
    const writer = await openWarcWriter(path);
    await expect(writer.write(exchange("/1", text("x"), { status: 0 }))).rejects.toThrow(
      RangeError,
    );
    await expect(
      writer.write(exchange("/1", text("x"), { responseHeaders: { "X-Bad": "a\r\nWARC/1.1" } })),
    ).rejects.toThrow(TypeError);
    await expect(writer.write(exchange("/1", text("x"), { url: "not a url" }))).rejects.toThrow(
      "'url' must be an absolute URL",
    );
    await writer.write(exchange("/ok", text("ok")));
    await writer.close();
    expect(types(await parseWarc(path))).toEqual(["warcinfo", "request", "response"]);
  });

  it("WarcWriter.write() stores a decoded body with the wire's coding headers kept as X-Archive-Orig-*", async () => {
    const path = join(await tempDir(), "crawl.warc");
    const writer = await openWarcWriter(path, { durable: true });
    const body = text("decoded by fetch ".repeat(20));
    await writer.write(exchange("/gz", body, {
      responseHeaders: { "Content-Encoding": "gzip", "Content-Length": "48", Vary: "Accept" },
    }));
    await writer.close();
    const response = (await parseWarc(path))[2]!;
    const headers = response.record.httpHeaders!.headers;
    expect(headers.get("content-encoding")).toBeNull();
    expect(headers.get("x-archive-orig-content-encoding")).toBe("gzip");
    expect(headers.get("x-archive-orig-content-length")).toBe("48");
    expect(headers.get("content-length")).toBe(String(body.length));
    expect(headers.get("vary")).toBe("Accept");
    expect(response.payload).toEqual(body);
    expect(new Uint8Array(await response.record.readFully(true))).toEqual(body);
  });

  for (const name of ["crawl.warc", "crawl.warc.gz"]) {
    it(`openWarcWriter() cuts off a torn last record so that records appended after it are readable (${name})`, async () => {
      const dir = await tempDir();
      const path = join(dir, name);
      const writer = await openWarcWriter(path);
      await writer.write(exchange("/1", text("one")));
      const whole = (await stat(path)).size;
      await writer.write(exchange("/2", binary));
      await writer.close();
      const full = await readFile(path);
      // Where the second exchange's response record starts, as warcio sees it.
      const requestEnd = (await parseWarc(path)).at(-1)!.offset;
      // Cut inside the second exchange: in its request, just after it, one
      // byte into its response, in the middle of the response, its last byte.
      const cuts = [
        whole + 5,
        requestEnd,
        requestEnd + 1,
        Math.floor((requestEnd + full.length) / 2),
        full.length - 1,
      ];
      for (const cut of cuts) {
        await writeFile(path, full.subarray(0, cut));
        const resumed = await openWarcWriter(path);
        const keptRequest = cut >= requestEnd;
        expect(resumed.truncatedBytes).toBe(cut - (keptRequest ? requestEnd : whole));
        await resumed.write(exchange("/3", text("three")));
        await resumed.close();
        const records = await parseWarc(path);
        expect(records.map((r) => r.record.warcTargetURI ?? r.record.warcType)).toEqual([
          "warcinfo",
          "https://a.example/1",
          "https://a.example/1",
          ...(keptRequest ? ["https://a.example/2"] : []),
          "https://a.example/3",
          "https://a.example/3",
        ]);
        expect(records.at(-1)!.payload).toEqual(text("three"));
        const file = await readFile(path);
        if (name.endsWith(".gz")) expect(() => gunzipSync(file)).not.toThrow();
      }
    });
  }

  it("openWarcWriter() starts afresh when the crash tore the warcinfo record itself", async () => {
    const path = join(await tempDir(), "crawl.warc.gz");
    await (await openWarcWriter(path)).close();
    await truncate(path, 12);
    const writer = await openWarcWriter(path);
    expect(writer.truncatedBytes).toBe(12);
    await writer.close();
    expect(types(await parseWarc(path))).toEqual(["warcinfo"]);
  });

  it("openWarcWriter() refuses, and leaves alone, a file that is not a WARC file of its kind, or whose torn end follows damage", async () => {
    const dir = await tempDir();
    const notWarc = join(dir, "notes.warc");
    await writeFile(notWarc, "hello\n");
    await expect(openWarcWriter(notWarc)).rejects.toThrow(
      `Cannot open WARC file '${notWarc}': it is not a WARC file`,
    );
    expect(await readFile(notWarc, "utf8")).toBe("hello\n");

    const plain = join(dir, "plain.warc");
    await (await openWarcWriter(plain)).close();
    await expect(openWarcWriter(plain, { gzip: true })).rejects.toThrow(
      "it holds uncompressed WARC records and gzip is true",
    );
    const gz = join(dir, "crawl.warc.gz");
    await (await openWarcWriter(gz)).close();
    await expect(openWarcWriter(gz, { gzip: false })).rejects.toThrow(
      "it holds gzip-compressed WARC records and gzip is false",
    );

    for (const name of ["damaged.warc", "damaged.warc.gz"]) {
      const path = join(dir, name);
      const writer = await openWarcWriter(path);
      const afterInfo = (await stat(path)).size;
      await writeAll(writer, [exchange("/1", text("one ".repeat(50))), exchange("/2", binary)]);
      await writer.close();
      const bytes = await readFile(path);
      // The version line of a plain record; compressed data in a gzip member.
      const at = name.endsWith(".gz") ? afterInfo + 30 : afterInfo;
      bytes.fill(0x55, at, at + 20);
      // Damage before a whole last record is not looked for; a torn end makes
      // the writer read the file through, and cutting at the damage would
      // lose the whole records after it.
      await writeFile(path, bytes.subarray(0, bytes.length - 1));
      const error = await openWarcWriter(path).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WarcWriteError);
      expect((error as Error).message).toContain(`it is damaged at byte ${afterInfo}`);
      expect(sameBytes(await readFile(path), bytes.subarray(0, bytes.length - 1))).toBe(true);
    }
  });

  it("openWarcWriter() example: archive one exchange (as in its JSDoc)", async () => {
    const path = join(await tempDir(), "crawl.warc.gz");
    const warc = await openWarcWriter(path);
    const response = new Response("<h1>Example</h1>", {
      status: 200,
      statusText: "OK",
      headers: { "Content-Type": "text/html" },
    });
    await warc.write({
      url: "https://example.com/",
      method: "GET",
      requestHeaders: { "User-Agent": "politely" },
      status: response.status,
      statusText: response.statusText,
      responseHeaders: response.headers,
      body: new Uint8Array(await response.arrayBuffer()),
      date: new Date(),
    });
    await warc.close();
    const records = await parseWarc(path);
    expect(new TextDecoder().decode(records[2]!.payload)).toBe("<h1>Example</h1>");
  });
});
