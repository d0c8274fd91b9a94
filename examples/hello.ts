/**
 * Smallest use of politely: read the URL of each kind of request and resolve
 * the default settings. Run with `npx tsx examples/hello.ts` (or deno, bun).
 *
 * @module
 */
import { from, map } from "rxjs";
import { parseSettings, requestUrl } from "../mod.ts";

const settings = parseSettings({});
console.log(`politely: ${settings.concurrentRequests} concurrent requests by default`);

from(["https://example.com/a", { url: "https://example.com/b" }])
  .pipe(map((request) => requestUrl(request)))
  .subscribe((url) => console.log(`request for ${url}`));
