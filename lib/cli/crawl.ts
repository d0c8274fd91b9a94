/**
 * A whole command-line crawl: requests from the input go through the request
 * queue (priorities, dedupe, job directory), the throttling gate and backoff;
 * every request ends as one outcome line; the live view or the plain log
 * shows it happening; a summary closes it. Used by `politely crawl` and
 * `politely demo`.
 *
 * Size: the crawl is one pipeline (queue, gate, backoff, output, view,
 * summary) whose parts live elsewhere; what is here is their wiring and the
 * outcome record.
 *
 * @module
 */
import { errorLine } from "../http/_error_text.ts";
import { firstLine } from "./_first_line.ts";
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  concatMap,
  EMPTY,
  from,
  identity,
  interval,
  type Observable,
  of,
  type SchedulerLike,
  Subscription,
} from "rxjs";
import { crawl } from "../crawl.ts";
import type { ThrottleEvent } from "../events.ts";
import { isLocalFailure } from "../http/download_errors.ts";
import { createFetchDownload, type FetchedResponse } from "../http/fetch_download.ts";
import { type Outcome, outcomeStatus } from "../outcome.ts";
import { type RequestObject, requestUrl } from "../request.ts";
import { type QueueWarning, RequestQueue } from "../queue/request_queue.ts";
import { type RedisQueueClient, RedisRequestQueue } from "../redis/redis_request_queue.ts";
import type { CrawlQueue } from "../queue/crawl_queue.ts";
import type { RedisScopes } from "../redis/redis_scopes.ts";
import { obeyRobotsTxt } from "../robots/robots_download.ts";
import { shareBackoff } from "../redis/shared_backoff.ts";
import { sharedDownload } from "../redis/shared_download.ts";
import type { ThrottlerSettingsInput } from "../settings/settings.ts";
import { createThrottler, type Throttler } from "../throttler/throttler.ts";
import type { DownloadFn } from "../../operators/throttle_by_scope.ts";
import { rampup, type RampupOptions } from "../../operators/rampup.ts";
import { DEFAULT_REDIS_WAIT_MS } from "./args.ts";
import { CrawlStats } from "./crawl_stats.ts";
import type { InputLine, InputLineError } from "./input.ts";
import { type JsonLinesFile, JsonLinesWriteError } from "./json_lines_file.ts";
import { JobDirWriteError } from "../queue/job_dir.ts";
import { WarcWriteError, type WarcWriter } from "../http/warc_writer.ts";
import { JobDirLock, JobDirLockedError } from "../queue/job_dir_lock.ts";
import {
  type LiveScopeRow,
  type LiveViewState,
  renderLiveView,
  type TerminalLike,
  TerminalScreen,
} from "./live_view.ts";
import { formatPlainEvent, formatProgressLine } from "./plain_log.ts";

/** How the crawl shows itself while it runs. */
export type ViewMode = "live" | "plain" | "quiet";

/** Options of {@link runCrawl}. */
export interface CrawlOptions {
  /** Settings (already validated by `resolveCliSettings`). */
  readonly settings: ThrottlerSettingsInput;
  /** The input, line by line. */
  readonly input: AsyncIterable<InputLine> | Iterable<InputLine>;
  /**
   * Job directory (pending requests and seen fingerprints survive a stop),
   * or a lock already taken on one, which the crawl then owns.
   * @default settings' queue.jobDir
   */
  readonly jobDir?: string | JobDirLock | undefined;
  /** One JSON line per request. */
  readonly output?: JsonLinesFile | undefined;
  /** One JSON line per throttling event. */
  readonly events?: JsonLinesFile | undefined;
  /** Live view (a TTY), plain log lines, or nothing. */
  readonly view: ViewMode;
  /** Where the view, the log and the summary go. */
  readonly stdout: TerminalLike & { readonly rows?: number | undefined };
  /** Where warnings go. */
  readonly stderr: { write(text: string): unknown };
  /** First word of the view's header. @default "politely crawl" */
  readonly title?: string;
  /**
   * How a scope is shown in the live view and the plain log (the demo names
   * its sites); the scopes themselves, `--output` and `--events` keep the
   * real names.
   * @default the scope's name
   */
  readonly label?: (scope: string) => string;
  /** A line under the live view. */
  readonly note?: string;
  /** Clock and timers. @default the throttler's default scheduler */
  readonly scheduler?: SchedulerLike;
  /** The download. @default fetch with the settings' timeout and User-Agent */
  readonly download?: DownloadFn<RequestObject, FetchedResponse>;
  /** Requests a response leads to (link following), enqueued before the response is marked done. */
  readonly follow?: (
    outcome: Outcome<RequestObject, FetchedResponse>,
  ) => Iterable<RequestObject> | PromiseLike<Iterable<RequestObject>>;
  /**
   * Archive every final response in this WARC file (`--warc`): its request
   * and response records are on disk before the request is marked done in
   * the job directory. The writer is the caller's to close.
   */
  readonly warc?: WarcWriter | undefined;
  /**
   * Write each final response's body to a file in this directory
   * (`--save-bodies`): `HOST/NAME.EXT`, NAME from the URL's SHA-256, EXT from
   * the content type; the `--output` record says which (`bodyFile`). Written
   * before the request is marked done.
   */
  readonly saveBodies?: string | undefined;
  /** Told of each request of the input as it is read (link following learns the start domains). */
  readonly onStart?: (request: RequestObject) => void;
  /** Told of the crawl's throttler once it exists, before any request (`--web` watches it). */
  readonly onThrottler?: (throttler: Throttler<RequestObject>) => void;
  /**
   * URLs whose `--output` line a run before this one wrote (a resume, from
   * `recentOutputUrls`): a request fetched again because the kill came
   * between its line and its completion in the job directory does not get a
   * second line. Consumed as lines are skipped.
   */
  readonly alreadyWritten?: Map<string, number>;
  /**
   * Rampup for the scopes this filter picks (the `rampup` operator after the
   * crawl's `backoffOn`): each starts at one request at a time and probes upwards.
   * @default off (scopes configured with `rampup` still ramp)
   */
  readonly rampup?: RampupOptions;
  /**
   * Share the scopes' limits with other processes through this store
   * (`--redis`): every download, robots.txt included, first takes a
   * cluster-wide lease (`sharedDownload`), and backoff and holds are told to
   * and taken from the others (`shareBackoff`). The store is the caller's to
   * close.
   * @default not shared
   */
  readonly shared?: RedisScopes | undefined;
  /**
   * With `shared`: how long a request waits for Redis to answer (through an
   * outage, `--redis-wait`) before it ends unsent. @default 120000
   */
  readonly sharedWaitMs?: number;
  /**
   * The request queue is a job in Redis shared by every worker on `prefix`
   * (`--shared-queue`): the input seeds it, links found go to it, and the
   * crawl ends when the job is finished (nothing queued or leased by anyone).
   * `join`: wait for the job to be seeded (a worker started without input).
   * Outages are waited for up to `sharedWaitMs`. The client is the caller's to close.
   * @default the in-process queue
   */
  readonly sharedQueue?: {
    readonly client: RedisQueueClient;
    readonly prefix: string;
    readonly join: boolean;
    /** How long a taken request stays leased without renewal (`--redis-lease`). @default 60000 */
    readonly leaseMs?: number;
    /** The job's most requests in all, counted in Redis (`--max-pages`). @default no limit */
    readonly maxRequests?: number | undefined;
  };
  /** Stops the crawl (Ctrl-C): in-flight downloads are aborted, pending requests stay in the job directory. */
  readonly stop?: AbortSignal;
  /** Stop after this long (the demo). */
  readonly durationMs?: number;
  /** Live view refresh period. @default 250 */
  readonly refreshMs?: number;
  /** Plain mode progress line period. @default 5000 */
  readonly progressEveryMs?: number;
}

/** How a crawl went. */
export interface CrawlResult {
  readonly stats: CrawlStats;
  /** Why it ended before every request did: `"signal"` (Ctrl-C), `"duration"`, or `undefined` (it finished). */
  readonly stoppedBy: "signal" | "duration" | undefined;
  /** Scheduler time at the end. */
  readonly endedAt: number;
  /** Requests not ended (kept in the job directory when there is one), `unsent` included. */
  readonly pending: number;
  /**
   * Requests that ended this run unsent (robots.txt or the shared store
   * unreachable): never sent, not marked done, so a resume sends them.
   */
  readonly unsent: number;
  /**
   * Downloads in flight when the crawl was stopped (Ctrl-C or the duration),
   * aborted; they are among `pending`. 0 when the crawl finished.
   */
  readonly aborted: number;
  /** Duplicates dropped. */
  readonly filtered: number;
  /** Requests an earlier run (the job directory's) already had: a resume's re-read input. */
  readonly known: number;
  /** The throttler, for a last look at its scopes. */
  readonly throttler: Throttler<RequestObject>;
  /**
   * The error the crawl ended on, already reported on stderr in one line: a
   * file that could not be written (`JsonLinesWriteError`,
   * `JobDirWriteError`), or the pipeline's error. `undefined` when none.
   */
  readonly error?: unknown;
}

/**
 * The JSON line of an outcome (`--output`).
 *
 * @param outcome The final outcome of a request.
 * @returns `{url, status | error, attempts, scopes, sentAt (ISO), latencyMs, exhausted?}`,
 *   and for a fetched response `finalUrl`, `contentType`, `bytes` and `headers`
 *   (the ones that say what the page is and how the site throttles).
 */
export function outcomeRecord(outcome: Outcome<unknown, unknown>): Record<string, unknown> {
  const status = outcomeStatus(outcome);
  const record: Record<string, unknown> = { url: requestUrl(outcome.request) ?? null };
  if (outcome.kind === "response") record.status = status ?? null;
  else record.error = errorLine(outcome.error);
  record.attempts = outcome.attempt;
  record.scopes = outcome.scopes;
  record.sentAt = Number.isFinite(outcome.sentAt) ? new Date(outcome.sentAt).toISOString() : null;
  record.latencyMs = Math.round(outcome.latencyMs * 10) / 10;
  if (outcome.exhausted === true) record.exhausted = true;
  if (outcome.kind === "response") Object.assign(record, responseFields(outcome.response));
  return record;
}

/** Response headers an `--output` record keeps: what says what the page is and how the site throttles. */
const KEPT_HEADERS = [
  "content-type",
  "content-length",
  "content-encoding",
  "last-modified",
  "etag",
  "location",
  "retry-after",
  "ratelimit",
  "ratelimit-policy",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "x-rate-limit-limit",
  "x-rate-limit-remaining",
  "x-rate-limit-reset",
];

/**
 * What a record says of a fetched response: the final URL after redirects,
 * its content type and body size, and the headers of KEPT_HEADERS that it
 * has. Nothing for a response that is not a fetch download's.
 */
function responseFields(response: unknown): Record<string, unknown> {
  if (typeof response !== "object" || response === null) return {};
  const r = response as Partial<FetchedResponse>;
  if (!(r.headers instanceof Headers)) return {};
  const fields: Record<string, unknown> = {};
  if (typeof r.url === "string" && r.url !== "") fields.finalUrl = r.url;
  fields.contentType = r.headers.get("content-type");
  if (typeof r.bytes === "number") fields.bytes = r.bytes;
  const headers: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = r.headers.get(name);
    if (value !== null) headers[name] = value;
  }
  fields.headers = headers;
  return fields;
}

/** The JSON line of an input line that is not a request. */
export function inputErrorRecord(error: InputLineError): Record<string, unknown> {
  return {
    url: null,
    error: errorLine(error),
    line: error.line,
    input: error.text,
    attempts: 0,
    scopes: [],
    sentAt: null,
    latencyMs: 0,
  };
}

/**
 * Run a crawl to its end (or until stopped).
 *
 * @param options Input, settings, files, view, stop signal.
 * @returns The stats and how it ended.
 * @throws {Error} When the job directory cannot be opened (one line).
 */
export function runCrawl(options: CrawlOptions): Promise<CrawlResult> {
  const stderr = options.stderr;
  const stdout = options.stdout;
  const throttler = createThrottler<RequestObject>(options.settings, {
    ...(options.scheduler !== undefined ? { scheduler: options.scheduler } : {}),
    log: (line) => stderr.write(`${line}\n`),
  });
  options.onThrottler?.(throttler);
  const scheduler = throttler.scheduler;
  const settings = throttler.settings;
  const stats = new CrawlStats(scheduler.now());
  const output = options.output;
  const label = options.label ?? String;
  // A write error (a full disk) is kept here and ends the crawl: once the
  // crawl runs, `stopOnError` is the end that writes no more.
  let failure: unknown;
  let stopOnError = (error: unknown): void => {
    failure ??= error;
  };
  const record = (file: JsonLinesFile | undefined, value: unknown): void => {
    try {
      file?.write(value);
    } catch (error) {
      stopOnError(error);
    }
  };

  const onEvent = (event: ThrottleEvent) => {
    stats.recordEvent(event);
    record(options.events, event);
    if (options.view === "plain") {
      const line = formatPlainEvent(event, stats.startedAt, label);
      if (line !== undefined) stdout.write(`${line}\n`);
    }
  };
  const eventsSub = throttler.events$.subscribe(onEvent);

  const start$ = from(options.input).pipe(
    concatMap((line): Observable<RequestObject> => {
      if (line.kind === "request") {
        options.onStart?.(line.request);
        return of(line.request);
      }
      if (line.kind === "error") {
        record(output, inputErrorRecord(line.error));
        stats.recordFinal(undefined, true);
        stderr.write(`politely: input ${line.error.message}\n`);
      }
      return EMPTY;
    }),
  );
  const jobDir = options.jobDir ?? settings.queue.jobDir;
  const sharedQueue = options.sharedQueue;
  let queue: CliQueue;
  try {
    queue = sharedQueue !== undefined
      ? new RedisRequestQueue<RequestObject>(sharedQueue.client, {
        prefix: sharedQueue.prefix,
        view: throttler,
        scheduler,
        // A worker that joins seeds nothing: given start requests (even none),
        // the queue would mark the job seeded.
        ...(sharedQueue.join ? {} : { start: start$ }),
        fifo: settings.queue.fifo,
        depthPriority: settings.queue.depthPriority,
        dedupe: settings.queue.dedupe,
        outageWaitMs: options.sharedWaitMs ?? DEFAULT_REDIS_WAIT_MS,
        awaitJob: sharedQueue.join,
        ...(sharedQueue.leaseMs !== undefined ? { leaseMs: sharedQueue.leaseMs } : {}),
        ...(sharedQueue.maxRequests !== undefined ? { maxRequests: sharedQueue.maxRequests } : {}),
      })
      : new RequestQueue<RequestObject>({
        // The throttler is the queue's view: both see the same scopes and slots.
        view: throttler,
        scheduler,
        start: start$,
        order: settings.queue.order,
        fifo: settings.queue.fifo,
        depthPriority: settings.queue.depthPriority,
        dedupe: settings.queue.dedupe,
        delayedRequestsWarnThreshold: settings.delayedRequestsWarnThreshold,
        ...(jobDir !== undefined ? { jobDir } : {}),
      });
  } catch (error) {
    eventsSub.unsubscribe();
    const message = firstLine(error);
    // Already one line naming the directory and the holder.
    if (error instanceof JobDirLockedError) return Promise.reject(new Error(message));
    if (sharedQueue !== undefined) {
      return Promise.reject(new Error(`Cannot open the shared queue: ${message}`));
    }
    const dir = jobDir instanceof JobDirLock ? jobDir.dir : jobDir;
    return Promise.reject(new Error(`Cannot open job directory '${dir}': ${message}`));
  }
  const warningsSub = queue.warnings$.subscribe(onEvent);

  // robots.txt is read inside the host's first slot (and Crawl-delay set on
  // its scope) by the library's wrapper; with ROBOTSTXT_OBEY off it is the
  // download itself.
  const local = obeyRobotsTxt(
    throttler,
    options.download ??
      createFetchDownload({
        timeoutMs: settings.downloadTimeoutMs,
        userAgent: settings.userAgent,
        maxSizeBytes: settings.download.maxSizeBytes,
        warnSizeBytes: settings.download.warnSizeBytes,
        // The outcome lines hold no body: keep it only for link following.
        readBody: options.follow !== undefined,
        keepBytes: options.warc !== undefined || options.saveBodies !== undefined,
        onSizeWarning: (w) =>
          throttler.emit({
            type: "warning",
            at: scheduler.now(),
            code: "download-warnsize",
            message: `Response body of ${w.url} ${
              w.announced ? "announces" : "passed"
            } ${w.bytes} bytes, over the warning size of ${w.warnSizeBytes} bytes (DOWNLOAD_WARNSIZE)`,
          }),
      }),
  );
  // Shared: the cluster lease is taken outside the robots.txt wrapper, so a
  // robots.txt fetch is inside a lease too and a site never sees more than
  // the shared limit (the cost: a disallowed URL spends a grant and its gap).
  const shared = options.shared;
  const download = shared === undefined ? local : sharedDownload(shared, throttler, local, {
    timeoutMs: options.sharedWaitMs ?? DEFAULT_REDIS_WAIT_MS,
  });
  const sharing = shared === undefined ? undefined : shareBackoff(shared, throttler);
  const title = (options.title ?? "politely crawl") +
    (sharedQueue !== undefined
      ? ` (shared queue via Redis ${sharedQueue.prefix})`
      : shared === undefined
      ? ""
      : ` (shared via Redis ${shared.prefix})`);
  if ((shared !== undefined || sharedQueue !== undefined) && options.view === "plain") {
    stdout.write(`${title}\n`);
  }

  return new Promise<CrawlResult>((resolve) => {
    let stoppedBy: CrawlResult["stoppedBy"];
    let finished = false;
    const pipeline = new Subscription();
    const screen = options.view === "live" ? new TerminalScreen(stdout) : undefined;
    let lastProgress = scheduler.now();
    const deadline = options.durationMs === undefined
      ? undefined
      : stats.startedAt + options.durationMs;

    const state = (): LiveViewState => {
      const now = scheduler.now();
      const q = queue.stats();
      const done = stats.finished;
      const total = done + q.pending + q.inFlight;
      const elapsedMs = now - stats.startedAt;
      let etaMs = done > 0 && total > done ? ((total - done) * elapsedMs) / done : undefined;
      if (deadline !== undefined) etaMs = Math.max(0, Math.min(etaMs ?? Infinity, deadline - now));
      const all = throttler.states()
        .filter((s) =>
          s.active > 0 || s.holdUntil > now || s.backoffLevel > 0 || stats.rate(s.scope, now) > 0
        )
        .sort((a, b) => rank(stats, a.scope) - rank(stats, b.scope));
      const room = Math.max(
        3,
        (stdout.rows !== undefined && stdout.rows > 0 ? stdout.rows : 24) - 6,
      );
      const rows: LiveScopeRow[] = all.slice(0, room).map((s) => ({
        scope: label(s.scope),
        active: s.active,
        concurrency: s.concurrency,
        delayMs: s.delayMs,
        backoffLevel: s.backoffLevel,
        holdLeftMs: Math.max(0, s.holdUntil - now),
        ...(s.quota === undefined ? {} : { quota: { used: s.quota.used, limit: s.quota.limit } }),
        counts: stats.scope(s.scope).counts,
        ratePerSec: stats.rate(s.scope, now),
      }));
      return {
        title,
        elapsedMs,
        done,
        total,
        inFlight: throttler.active,
        queued: q.pending + throttler.held,
        retries: stats.retries,
        failures: stats.failures,
        etaMs,
        rows,
        hiddenScopes: all.length - rows.length,
        evicted: stats.evicted,
        ...(options.note !== undefined ? { note: options.note } : {}),
      };
    };

    const tick = () => {
      // At the deadline `end` draws the last frame (or progress line) itself.
      if (deadline !== undefined && scheduler.now() >= deadline) return end("duration");
      try {
        output?.flush();
        options.events?.flush();
      } catch (error) {
        return stopOnError(error);
      }
      if (screen !== undefined) screen.draw(renderLiveView(state(), screen.width));
      else if (options.view === "plain") {
        const now = scheduler.now();
        if (now - lastProgress >= (options.progressEveryMs ?? 5000)) {
          lastProgress = now;
          stdout.write(`${formatProgressLine(state())}\n`);
        }
      }
    };
    const ticker = interval(options.refreshMs ?? 250, scheduler).subscribe(tick);

    const onStop = () => end("signal");
    options.stop?.addEventListener("abort", onStop, { once: true });
    // Reported once, then the crawl ends on the next microtask: a write fails
    // inside an event or an outcome, and ending there would unsubscribe the
    // pipeline in the middle of its own emission.
    stopOnError = (error) => {
      if (failure !== undefined || finished) return;
      failure = error;
      stderr.write(`politely: ${describeFailure(error)}\n`);
      queueMicrotask(() => end(undefined));
    };

    const end = (why: CrawlResult["stoppedBy"]) => {
      if (finished) return;
      finished = true;
      stoppedBy = why;
      // Counted before they go: unsubscribing aborts the downloads in flight;
      // they are not marked done, so the job directory keeps them as pending.
      const aborted = why === undefined ? 0 : throttler.active;
      pipeline.unsubscribe();
      // After the pipeline: a backoff of its last turn is still published.
      sharing?.unsubscribe();
      ticker.unsubscribe();
      options.stop?.removeEventListener("abort", onStop);
      if (screen !== undefined) {
        // Stopped by a signal: its line was just written below the frame;
        // the last frame goes below it rather than over it.
        if (why === "signal") screen.detach();
        screen.draw(renderLiveView(state(), screen.width));
        screen.close();
      } else if (options.view === "plain") stdout.write(`${formatProgressLine(state())}\n`);
      const q = queue.stats();
      // Each closed even when another failed; the first failure is reported.
      const closing = (close: () => void) => {
        try {
          close();
        } catch (error) {
          if (failure === undefined) {
            failure = error;
            stderr.write(`politely: ${describeFailure(error)}\n`);
          }
        }
      };
      // The shared queue's close is a promise: it gives back the requests
      // this worker holds and sends its last acknowledgements.
      let closed: unknown;
      closing(() => {
        closed = queue.close();
      });
      Promise.resolve(closed).catch((error: unknown) =>
        closing(() => {
          throw error;
        })
      ).then(() => {
        warningsSub.unsubscribe();
        eventsSub.unsubscribe();
        closing(() => output?.close());
        closing(() => options.events?.close());
        resolve({
          stats,
          stoppedBy,
          endedAt: scheduler.now(),
          pending: q.pending + q.inFlight + q.unsent,
          unsent: q.unsent,
          aborted,
          filtered: q.filtered,
          known: q.known,
          throttler,
          ...(failure !== undefined ? { error: failure } : {}),
        });
      });
    };

    const follow = options.follow;
    const warc = options.warc;
    const alreadyWritten = options.alreadyWritten;
    // Runs before the request is marked done: the archive's records first,
    // then the links (enqueued before the page is done).
    const bodies = options.saveBodies;
    // Runs before the request is marked done: the archive's records and the
    // body's file first, then the links (enqueued before the page is done).
    const discover = warc === undefined && bodies === undefined
      ? follow
      : async (o: Outcome<RequestObject, FetchedResponse>) => {
        if (o.kind === "response" && o.response.raw !== undefined) {
          await warc?.write({
            url: o.response.url,
            method: o.response.sent?.method ?? "GET",
            requestHeaders: o.response.sent?.headers ?? {},
            status: o.response.status,
            ...(o.response.statusText ? { statusText: o.response.statusText } : {}),
            responseHeaders: o.response.headers,
            body: o.response.raw,
            date: new Date(Number.isFinite(o.sentAt) ? o.sentAt : scheduler.now()),
          });
          if (bodies !== undefined) await saveBody(bodies, o.response);
        }
        return follow?.(o);
      };
    pipeline.add(
      crawl({
        throttler,
        queue,
        download,
        ...(discover !== undefined
          ? { discover: (o: Outcome<RequestObject, FetchedResponse>) => discover(o) }
          : {}),
      }).pipe(
        // Subscribed before the crawl, so the first request already ramps.
        options.rampup === undefined ? identity : rampup(throttler, options.rampup),
      ).subscribe({
        next: (outcome) => {
          // Never sent (robots.txt or the shared store unreachable) with a
          // job directory: not ended, the job directory keeps it and its line
          // is written when a resume ends it (written now, the resume's
          // line would be dropped as already written).
          if (
            (jobDir !== undefined || sharedQueue !== undefined) && outcome.kind === "error" &&
            isLocalFailure(outcome.error)
          ) {
            return;
          }
          try {
            const record = outcomeRecord(outcome);
            if (bodies !== undefined && outcome.kind === "response") {
              const file = bodyFileOf(outcome.response);
              if (file !== undefined) record.bodyFile = file;
            }
            const url = record.url;
            const written = typeof url === "string" ? alreadyWritten?.get(url) : undefined;
            if (written !== undefined && written > 0) {
              if (written === 1) alreadyWritten!.delete(url as string);
              else alreadyWritten!.set(url as string, written - 1);
            } else output?.write(record);
            // With a job directory the request is marked done right after
            // this: its line goes to disk first, so a full disk or a kill
            // never leaves a request done whose line is lost.
            if (jobDir !== undefined) output?.flush();
          } catch (error) {
            // Ended here, synchronously: the crawl then does not mark this
            // request done, and the job directory keeps it for a resume.
            if (failure === undefined) {
              failure = error;
              stderr.write(`politely: ${describeFailure(error)}\n`);
            }
            end(undefined);
            return;
          }
          stats.recordFinal(
            outcomeStatus(outcome),
            outcome.kind === "error" || outcome.exhausted === true,
          );
        },
        error: (error: unknown) => {
          if (failure === undefined) {
            failure = error;
            stderr.write(`politely: ${describeFailure(error)}\n`);
          }
          end(undefined);
        },
        complete: () => end(undefined),
      }),
    );
    if (options.stop?.aborted === true) end("signal");
    else if (failure !== undefined) queueMicrotask(() => end(undefined));
  });
}

/** What a crawl needs of its queue beside what `crawl()` does: the in-process one or the shared one. */
type CliQueue = CrawlQueue<RequestObject> & {
  stats(): {
    readonly pending: number;
    readonly inFlight: number;
    readonly unsent: number;
    readonly filtered: number;
    readonly known: number;
  };
  readonly warnings$: Observable<QueueWarning>;
  close(): void | Promise<void>;
};

/**
 * True for an error that a file could not be written (a full disk): the
 * command line's exit 2, as for a file that cannot be opened.
 */
export function isWriteError(error: unknown): boolean {
  return error instanceof JsonLinesWriteError || error instanceof JobDirWriteError ||
    error instanceof WarcWriteError || error instanceof BodyWriteError;
}

/** A write error as its own one-line message (it names the file); anything else with its name. */
function describeFailure(error: unknown): string {
  return isWriteError(error) ? (error as Error).message : errorLine(error);
}

/** Scopes in order of first appearance; scopes without stats yet last. */
function rank(stats: CrawlStats, scope: string): number {
  return stats.scopes.get(scope)?.index ?? stats.scopes.size;
}

const EXTENSIONS: readonly [RegExp, string][] = [
  [/html/, ".html"],
  [/json/, ".json"],
  [/xml/, ".xml"],
  [/^text\/plain/, ".txt"],
  [/^text\/css/, ".css"],
  [/javascript/, ".js"],
  [/^image\/png/, ".png"],
  [/^image\/jpe?g/, ".jpg"],
  [/^application\/pdf/, ".pdf"],
];

/**
 * Where `--save-bodies` puts a response's body, relative to its directory:
 * `HOST/NAME.EXT` (NAME: the first 24 hex digits of the final URL's SHA-256,
 * so one URL is one file; EXT from the content type, `.bin` when unknown).
 * `undefined` for a response that is not a fetch download's.
 */
export function bodyFileOf(response: unknown): string | undefined {
  const r = response as Partial<FetchedResponse> | undefined;
  if (typeof r?.url !== "string" || !(r.headers instanceof Headers)) return undefined;
  let host: string;
  try {
    host = new URL(r.url).host.replace(/[^a-z0-9.-]/gi, "_");
  } catch {
    return undefined;
  }
  const type = (r.headers.get("content-type") ?? "").toLowerCase();
  const ext = EXTENSIONS.find(([re]) => re.test(type))?.[1] ?? ".bin";
  const name = createHash("sha256").update(r.url).digest("hex").slice(0, 24);
  return `${host}/${name}${ext}`;
}

async function saveBody(dir: string, response: FetchedResponse): Promise<void> {
  const file = bodyFileOf(response);
  if (file === undefined || response.raw === undefined) return;
  const path = join(dir, file);
  try {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, response.raw);
  } catch (error) {
    throw new BodyWriteError(path, error);
  }
}

/** A body could not be written (`--save-bodies`): one line naming the file. */
export class BodyWriteError extends Error {
  override readonly name = "BodyWriteError";
  constructor(path: string, cause: unknown) {
    super(`Cannot write body file '${path}': ${(cause as Error)?.message ?? String(cause)}`, {
      cause,
    });
  }
}
