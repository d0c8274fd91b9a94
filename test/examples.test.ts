import { describe, expect, it } from "vitest";
import { main as costCapped } from "../examples/cost_capped.ts";
import { main as endpointScopes } from "../examples/endpoint_scopes.ts";
import { main as scrapingApi } from "../examples/scraping_api.ts";

const quiet = () => {};

describe("examples (real loopback servers)", () => {
  it("examples/cost_capped.ts spends its 12 units over two windows, the quota holding the rest back", async () => {
    const spent = await costCapped(quiet);
    // Estimates 2 + 1 + 3 fill the first window's quota of 6 (the second
    // request's actual cost of 2 is reconciled after the third was sent).
    expect(spent.reduce((a, b) => a + b, 0)).toBe(12);
    expect(spent.length).toBe(2);
    expect(spent[0]).toBeLessThanOrEqual(7);
  });

  it("examples/scraping_api.ts backs off the target whose upstream said 429, not the API", async () => {
    expect(await scrapingApi(quiet)).toEqual(["shy.example"]);
  });

  it("examples/endpoint_scopes.ts spaces each endpoint by its own delay", async () => {
    const times = await endpointScopes(quiet);
    const gaps = (at: number[]) => at.slice(1).map((t, i) => t - at[i]!);
    expect(times["/fast-endpoint"]).toHaveLength(4);
    expect(times["/slow-endpoint"]).toHaveLength(3);
    for (const g of gaps(times["/fast-endpoint"]!)) expect(g).toBeGreaterThanOrEqual(79);
    for (const g of gaps(times["/slow-endpoint"]!)) expect(g).toBeGreaterThanOrEqual(499);
    // No common limit: the slow endpoint's first request does not queue behind the fast ones.
    expect(times["/slow-endpoint"]![0]).toBeLessThan(times["/fast-endpoint"]![3]!);
  });
});
