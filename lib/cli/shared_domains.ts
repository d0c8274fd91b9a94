/**
 * `--follow` in a shared job (`--shared-queue`): which domains the links are
 * followed on. They are the start URLs' domains, and a worker that joined
 * without input has none of its own, so the seeding workers write theirs to
 * the job in Redis and every worker reads them back.
 *
 * @module
 */
import { asyncScheduler, type SchedulerLike } from "rxjs";
import { outagePauseMs, sleepOn } from "../util/_timer.ts";
import { queueKeyBase } from "../redis/_redis_queue_scripts.ts";
import type { FetchedResponse } from "../http/fetch_download.ts";
import type { Outcome } from "../outcome.ts";
import type { RedisQueueClient } from "../redis/redis_request_queue.ts";
import type { RequestObject } from "../request.ts";
import type { LinkFollower } from "./follow.ts";

/** How old the domains read from Redis may be when a page's links are followed, in ms. */
const STALE_MS = 1000;

/**
 * The start domains of a shared job, kept in a Redis set beside its queue
 * (`{PREFIX}q:domains`).
 *
 * @example
 * ```ts
 * import type { FetchedResponse } from "../http/fetch_download.ts";
 * import type { Outcome } from "../outcome.ts";
 * import type { RedisQueueClient } from "../redis/redis_request_queue.ts";
 * import type { RequestObject } from "../request.ts";
 * import { LinkFollower } from "./follow.ts";
 * import { SharedStartDomains } from "./shared_domains.ts";
 * // A worker of the shared job "job1:", on the queue's Redis connection.
 * function worker(client: RedisQueueClient) {
 *   const domains = new SharedStartDomains(client, "job1:", new LinkFollower(), 120_000);
 *   domains.addStart({ url: "https://example.com/" }); // a seeding worker
 *   // Any worker: the links of a page, on the job's start domains.
 *   return (page: Outcome<RequestObject, FetchedResponse>) => domains.follow(page);
 * }
 * console.assert(typeof worker === "function");
 * ```
 */
export class SharedStartDomains {
  readonly #client: RedisQueueClient;
  readonly #key: string;
  readonly #follower: LinkFollower;
  readonly #scheduler: SchedulerLike;
  readonly #waitMs: number;
  /** Domains not written yet (Redis failed): written again at the next read. */
  readonly #unwritten = new Set<string>();
  #readAt = -Infinity;
  /** The read under way: pages followed meanwhile wait for it too. */
  #reading: Promise<void> | undefined;

  /**
   * @param client The job's Redis connection (the queue's: a domain is written before the start request).
   * @param prefix The job's prefix.
   * @param follower The worker's link follower, told of every domain read.
   * @param waitMs How long a read waits through a Redis outage before the page's links fail (`--redis-wait`).
   * @param scheduler The clock of the staleness and the waits. @default asyncScheduler
   */
  constructor(
    client: RedisQueueClient,
    prefix: string,
    follower: LinkFollower,
    waitMs: number,
    scheduler: SchedulerLike = asyncScheduler,
  ) {
    this.#waitMs = waitMs;
    this.#client = client;
    this.#key = `${queueKeyBase(prefix)}domains`;
    this.#follower = follower;
    this.#scheduler = scheduler;
  }

  /**
   * A start request of the input: its domain is followed here and written to
   * the job (sent at once, so it is in Redis before the request is).
   *
   * @param request A request of the input.
   */
  addStart(request: RequestObject): void {
    const domain = this.#follower.addStart(request);
    if (domain !== undefined) this.#write([domain]);
  }

  #write(domains: readonly string[]): void {
    for (const d of domains) this.#unwritten.add(d);
    this.#client.sendCommand(["SADD", this.#key, ...domains]).then(
      () => {
        for (const d of domains) this.#unwritten.delete(d);
      },
      () => {}, // kept in #unwritten
    );
  }

  /**
   * The links a page leads to, once the job's domains were read (at most
   * {@link STALE_MS} ago). A Redis outage is waited for (links filtered
   * on a stale list would be lost for good); past `waitMs` the read fails,
   * and so does the page: not acknowledged, it is fetched again later.
   *
   * @param outcome A request's final outcome.
   * @returns The requests to enqueue.
   */
  async follow(outcome: Outcome<RequestObject, FetchedResponse>): Promise<RequestObject[]> {
    const now = this.#scheduler.now();
    if (now - this.#readAt >= STALE_MS && outcome.kind === "response") {
      this.#readAt = now;
      this.#reading = this.#read();
    }
    await this.#reading;
    return this.#follower.follow(outcome);
  }

  async #read(): Promise<void> {
    const started = this.#scheduler.now();
    for (let tries = 0;; tries++) {
      if (this.#unwritten.size > 0) this.#write([...this.#unwritten]);
      try {
        const domains = await this.#client.sendCommand(["SMEMBERS", this.#key]);
        for (const d of domains as string[]) this.#follower.addDomain(d);
        return;
      } catch (error) {
        if (this.#scheduler.now() - started >= this.#waitMs) {
          this.#readAt = -Infinity; // asked again at the next page
          throw error;
        }
        await sleepOn(this.#scheduler, outagePauseMs(tries));
      }
    }
  }
}
