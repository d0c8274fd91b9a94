import { describe, expect, it } from "vitest";
import { RequestKeys } from "../lib/queue/_request_keys.ts";
import { InvalidRequestError } from "../lib/http/download_errors.ts";
import { RequestQueue } from "../lib/queue/request_queue.ts";
import type { RequestObject } from "../lib/request.ts";

describe("RequestKeys", () => {
  it("RequestKeys.read() names a canonical URL's host as its key and the URL as its fingerprint", () => {
    const keys = new RequestKeys<string>(undefined, undefined, "throttling-aware");
    keys.read("https://a.example/p", true);
    expect([keys.key, keys.scopes, keys.amounts, keys.fp]).toEqual([
      "a.example",
      undefined,
      undefined,
      "https://a.example/p",
    ]);
    keys.read("https://b.example/p", false);
    expect([keys.key, keys.fp]).toEqual(["b.example", undefined]);
  });

  it("RequestKeys.read() gives meta.throttlingScopes as scopes and amounts, and no key", () => {
    const keys = new RequestKeys<RequestObject>(undefined, undefined, "throttling-aware");
    keys.read({ url: "https://a.example/", meta: { throttlingScopes: { b: 2, a: 1 } } }, true);
    expect([keys.key, keys.scopes, keys.amounts]).toEqual([undefined, ["b", "a"], [2, 1]]);
    expect(typeof keys.fp).toBe("string");
  });

  it("RequestKeys.read() reads no scopes in the priority order", () => {
    const keys = new RequestKeys<RequestObject>(undefined, undefined, "priority");
    keys.read({ url: "https://a.example/x?b=1&a=2" }, false);
    expect([keys.key, keys.scopes, keys.amounts, keys.fp]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("RequestKeys.read() refuses a request without scopes or URL", () => {
    const keys = new RequestKeys<RequestObject>(undefined, undefined, "throttling-aware");
    expect(() => keys.read({ url: "https://a.example/", meta: { throttlingScopes: [] } }, true))
      .toThrow(InvalidRequestError);
    expect(() => keys.read({ url: "" }, true)).toThrow(InvalidRequestError);
  });

  it("RequestKeys.read() keeps a request's keys when its scopesOf reads another request's", () => {
    const keys: RequestKeys<string> = new RequestKeys<string>(
      (url) => {
        // Re-entrant, as an enqueue from inside scopesOf: the inner request
        // has one scope (a key), the outer two.
        if (url.endsWith("/outer")) {
          keys.read("https://inner.example/inner", true);
          return { scopes: ["outer.example", "all"] };
        }
        return { scopes: ["inner.example"] };
      },
      undefined,
      "throttling-aware",
    );
    keys.read("https://outer.example/outer", true);
    expect([keys.key, keys.scopes, keys.fp]).toEqual([
      undefined,
      ["outer.example", "all"],
      "https://outer.example/outer",
    ]);
  });

  it("RequestQueue.enqueue() from inside scopesOf enqueues both requests", () => {
    const order: string[] = [];
    const queue: RequestQueue<string> = new RequestQueue<string>({
      scopesOf: (url) => {
        if (url.endsWith("/outer")) queue.enqueue("https://inner.example/inner");
        return { scopes: [new URL(url).host, "all"] };
      },
    });
    queue.enqueue("https://outer.example/outer");
    queue.requests$.subscribe((u) => {
      order.push(u);
      queue.markDone(u);
    });
    expect(order.sort()).toEqual(["https://inner.example/inner", "https://outer.example/outer"]);
    expect(queue.stats()).toMatchObject({ enqueued: 2, filtered: 0, completed: 2 });
  });
});
