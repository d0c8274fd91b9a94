/**
 * What a download function is: the request in, a response out (a Promise or
 * any ObservableInput), with a context from the gate. The gate
 * (`throttleByScope`) calls it; the download helpers of `lib/`
 * (`createFetchDownload`, `obeyRobotsTxt`, `sharedDownload`) make or wrap one.
 *
 * @module
 */
import type { ObservableInput } from "rxjs";

/** What a download function is given besides the request. */
export interface DownloadContext {
  /** Aborted when the pipeline is unsubscribed. */
  readonly signal: AbortSignal;
  /** 1 for the first try, 2 for the first retry, ... */
  readonly attempt: number;
  /** The scopes the request is counted against. */
  readonly scopes: readonly string[];
  /**
   * Tell the gate the request has reached the network now (its headers are
   * written). Optional: when a request goes out later than requests usually
   * do (a busy event loop, a connection to set up), the gate spaces its
   * scopes' next request from then, so the site never sees two requests
   * closer than the delay. `createFetchDownload` calls it under Node's fetch.
   * Absent when a download is called outside the gate.
   */
  readonly wentOut?: () => void;
}

/** Downloads one request: a Promise, or any ObservableInput whose first value is the response. */
export type DownloadFn<R, T> = (
  request: R,
  context: DownloadContext,
) => PromiseLike<T> | ObservableInput<T>;
