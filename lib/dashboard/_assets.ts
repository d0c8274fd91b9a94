/**
 * The files the dashboard serves: its page and script (beside this file in
 * the package) and uPlot's browser build (from node_modules). Read once, when
 * a server starts. Private helper.
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/** A file's body and content type. */
export interface Asset {
  readonly type: string;
  readonly body: Uint8Array;
}

/**
 * The page's files by request path.
 *
 * @throws {Error} When a file is missing (a broken install), naming it.
 */
export function loadAssets(): ReadonlyMap<string, Asset> {
  // createRequire resolves through node_modules the same way under Node, Bun
  // and Deno ("nodeModulesDir": "manual"); import.meta.resolve gives Deno an
  // npm: specifier instead of a file.
  const require = createRequire(import.meta.url);
  const uplot = (file: string) => require.resolve(`uplot/dist/${file}`);
  return new Map<string, Asset>([
    ["/", asset(own("page.html"), "text/html; charset=utf-8")],
    ["/dashboard.js", asset(own("page.js"), "text/javascript; charset=utf-8")],
    ["/uplot.js", asset(uplot("uPlot.iife.min.js"), "text/javascript; charset=utf-8")],
    ["/uplot.css", asset(uplot("uPlot.min.css"), "text/css; charset=utf-8")],
  ]);
}

/**
 * A file of lib/dashboard/. From the built package (dist/lib/dashboard/)
 * the sources' directory is three levels up: tsc copies no HTML.
 */
function own(name: string): string {
  const here = new URL(`./${name}`, import.meta.url);
  const fromDist = new URL(`../../../lib/dashboard/${name}`, import.meta.url);
  return fileURLToPath(existsSync(here) || !existsSync(fromDist) ? here : fromDist);
}

function asset(path: string, type: string): Asset {
  try {
    return { type, body: readFileSync(path) };
  } catch (error) {
    throw new Error(`Cannot serve dashboard as its file is missing: ${path}`, { cause: error });
  }
}
