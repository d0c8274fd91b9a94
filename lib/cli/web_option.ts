/**
 * `--web [HOST:]PORT`: the crawl's dashboard, started once the crawl's
 * throttler exists and closed when the crawl is over.
 *
 * @module
 */
import type { RequestObject } from "../request.ts";
import type { Throttler } from "../throttler/throttler.ts";
import { type Dashboard, serveDashboard } from "../dashboard/serve_dashboard.ts";
import type { WebArgs } from "./args.ts";
import { firstLine } from "./_first_line.ts";

/** What the crawl gets (`onThrottler`) and what the command closes. */
export interface WebOption {
  /** Starts the dashboard of this throttler (pass as the crawl's `onThrottler`). */
  readonly onThrottler: (throttler: Throttler<RequestObject>) => void;
  /** Stops serving; waits for a start still under way. Never throws. */
  close(): Promise<void>;
}

/**
 * The dashboard of `--web`. Its address, or why it could not listen, is one
 * line on `stderr`; the crawl goes on without a dashboard that could not
 * listen (it only watches).
 *
 * @param web Where to listen.
 * @param options The page's title, header lines, scope names, where lines go.
 * @returns Hooks for the crawl and the command.
 */
export function webOption(
  web: WebArgs,
  options: {
    readonly title: string;
    readonly info?: Readonly<Record<string, string>>;
    readonly label?: (scope: string) => string;
    readonly stderr: { write(text: string): unknown };
  },
): WebOption {
  let started: Promise<Dashboard | undefined> | undefined;
  const line = (text: string) => options.stderr.write(`${text}\n`);
  return {
    onThrottler: (throttler) => {
      started = serveDashboard(throttler, {
        host: web.host,
        port: web.port,
        title: options.title,
        ...(options.info !== undefined ? { info: options.info } : {}),
        ...(options.label !== undefined ? { label: options.label } : {}),
        onWarning: line,
      }).then(
        (dashboard) => {
          line(`politely: dashboard at ${dashboard.url}`);
          return dashboard;
        },
        (error) => {
          line(
            `politely: warning: --web: cannot serve the dashboard on ${web.host}:${web.port}: ${
              firstLine(error)
            }; crawling without it`,
          );
          return undefined;
        },
      );
    },
    close: async () => {
      const dashboard = await started;
      await dashboard?.close();
    },
  };
}
