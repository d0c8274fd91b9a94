import { afterEach, describe, expect, it } from "vitest";
import { createFetchDownload, type DownloadSizeWarning } from "../lib/http/fetch_download.ts";
import { InvalidRequestError, ResponseTooLargeError } from "../lib/http/download_errors.ts";
import { type RecordingServer, startRecordingServer } from "./_helpers/loopback_server.ts";

let server: RecordingServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const context = () => ({ signal: new AbortController().signal }) as never;

/**
 * A server that sends `total` bytes in 64 KiB chunks, with or without a
 * Content-Length, and records how many it got out before the client left.
 */
async function bigBodyServer(total: number, announce: boolean) {
  const sent = { bytes: 0, finished: false, closedEarly: false };
  server = await startRecordingServer((_req, res) => {
    res.writeHead(200, {
      "content-type": "text/plain",
      ...(announce ? { "content-length": String(total) } : {}),
    });
    const chunk = Buffer.alloc(65_536, "a");
    // Each request counts afresh; `sent` tells about the latest.
    sent.bytes = 0;
    sent.finished = false;
    res.on("close", () => {
      if (!sent.finished) sent.closedEarly = true;
    });
    const pump = () => {
      while (sent.bytes < total) {
        const n = Math.min(chunk.length, total - sent.bytes);
        sent.bytes += n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          res.once("drain", pump);
          return;
        }
      }
      sent.finished = true;
      res.end();
    };
    pump();
  });
  return { origin: server.origin, sent };
}

describe("createFetchDownload() size limits", () => {
  it("createFetchDownload() aborts a streamed body past maxSizeBytes with ResponseTooLargeError, reading no further", async () => {
    const big = await bigBodyServer(50 * 1_048_576, false);
    const download = createFetchDownload({ maxSizeBytes: 1_048_576 });
    const url = `${big.origin}/big`;
    const error = await download(url, context()).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(ResponseTooLargeError);
    const e = error as ResponseTooLargeError;
    expect(e).toMatchObject({ url, maxSizeBytes: 1_048_576, expectedBytes: undefined });
    // Aborted within a chunk or so of the limit, not after the 50 MiB.
    expect(e.receivedBytes).toBeGreaterThan(1_048_576);
    expect(e.receivedBytes).toBeLessThan(1_048_576 + 1_048_576);
    expect(e.message).toContain(
      "over the limit of 1048576 bytes (download.maxSizeBytes, DOWNLOAD_MAXSIZE)",
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(big.sent.finished).toBe(false);
  });

  it("createFetchDownload() refuses a Content-Length over maxSizeBytes before reading the body", async () => {
    const big = await bigBodyServer(5 * 1_048_576, true);
    const download = createFetchDownload({ maxSizeBytes: 1_000_000 });
    const error = await download(`${big.origin}/big`, context()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ResponseTooLargeError);
    expect(error).toMatchObject({ receivedBytes: 0, expectedBytes: 5 * 1_048_576 });
    expect((error as Error).message).toContain("announces 5242880 bytes (Content-Length)");
  });

  it("createFetchDownload() warns once past warnSizeBytes and still returns the body", async () => {
    const big = await bigBodyServer(300_000, false);
    const warnings: DownloadSizeWarning[] = [];
    const download = createFetchDownload({
      warnSizeBytes: 100_000,
      onSizeWarning: (w) => warnings.push(w),
    });
    const url = `${big.origin}/page`;
    const response = await download(url, context());
    expect(response.bytes).toBe(300_000);
    expect(response.body.length).toBe(300_000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ url, announced: false, warnSizeBytes: 100_000 });
    expect(warnings[0]!.bytes).toBeGreaterThan(100_000);
  });

  it("createFetchDownload() with readBody false counts the body and keeps none of it, the limit still held", async () => {
    const big = await bigBodyServer(200_000, true);
    const response = await createFetchDownload({ readBody: false })(`${big.origin}/p`, context());
    expect(response).toMatchObject({ status: 200, body: "", bytes: 200_000 });
    const limited = createFetchDownload({ readBody: false, maxSizeBytes: 100_000 });
    await expect(limited(`${big.origin}/p`, context())).rejects.toBeInstanceOf(
      ResponseTooLargeError,
    );
  });

  it(
    "createFetchDownload() has Scrapy's defaults (1 GiB, 32 MiB) and takes 0 as no limit",
    async () => {
      const big = await bigBodyServer(40 * 1_048_576, true);
      const warnings: DownloadSizeWarning[] = [];
      const response = await createFetchDownload({
        readBody: false,
        onSizeWarning: (w) => warnings.push(w),
      })(`${big.origin}/p`, context());
      expect(response.bytes).toBe(40 * 1_048_576);
      expect(warnings).toEqual([{
        url: `${big.origin}/p`,
        bytes: 40 * 1_048_576,
        announced: true,
        warnSizeBytes: 33_554_432,
      }]);
      const unlimited = await createFetchDownload({ readBody: false, maxSizeBytes: 0 })(
        `${big.origin}/p`,
        context(),
      );
      expect(unlimited.bytes).toBe(40 * 1_048_576);
    },
    60_000,
  );

  it("createFetchDownload() names a bad size option", () => {
    expect(() => createFetchDownload({ maxSizeBytes: -1 })).toThrow(
      "Cannot create fetch download as 'maxSizeBytes' must be an integer >= 0: current value is -1",
    );
    expect(() => createFetchDownload({ warnSizeBytes: 1.5 })).toThrow(RangeError);
  });
});

describe("createFetchDownload() and credentials in URLs", () => {
  it("createFetchDownload() refuses a URL with credentials without sending it, its message masking them", async () => {
    server = await startRecordingServer();
    const url = server.origin.replace("http://", "http://user:s3cret@") + "/private";
    const download = createFetchDownload();
    let error: unknown;
    try {
      await download(url, context());
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error).toMatchObject({ field: "url", input: url });
    expect((error as Error).message).toBe(
      `Cannot download a URL with credentials (user:password@), as they would be shown: current value is '${
        server.origin.replace("http://", "http://***@")
      }/private'; send them in an Authorization header`,
    );
    expect(server.arrivals).toEqual([]);
  });
});

describe("createFetchDownload() and the time a request goes out", () => {
  // Node's fetch (undici) tells when it writes a request's headers; Deno's
  // and Bun's tell nothing, and the gate spaces from the release time there.
  const tells = !("Deno" in globalThis) && !("Bun" in globalThis);

  it("createFetchDownload() calls DownloadContext.wentOut once per download, before the answer, a redirect's request not counted (Node)", async () => {
    server = await startRecordingServer((req, res) => {
      if (req.url === "/from") {
        res.writeHead(302, { location: "/to" });
        res.end();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    });
    const download = createFetchDownload();
    const seen: string[] = [];
    for (const path of ["/plain", "/from"]) {
      const calls: string[] = [];
      const response = download(server.origin + path, {
        signal: new AbortController().signal,
        attempt: 1,
        scopes: [],
        wentOut: () => calls.push(`went out ${path}`),
      }).then((r) => calls.push(`answered ${new URL(r.url).pathname} ${r.status}`));
      await response;
      seen.push(...calls);
    }
    expect(server.arrivals.map((a) => a.path)).toEqual(["/plain", "/from", "/to"]);
    expect(seen).toEqual(
      tells
        ? ["went out /plain", "answered /plain 200", "went out /from", "answered /to 200"]
        : ["answered /plain 200", "answered /to 200"],
    );
  });
});
