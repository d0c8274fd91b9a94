/**
 * What comes out of the gate for every request: a response or an error, never
 * a dropped request and never an error that ends the pipeline.
 *
 * @module
 */

/** The fields every outcome has. */
export interface OutcomeBase<R> {
  /** The request as it went in. */
  readonly request: R;
  /** The scopes the request was counted against. */
  readonly scopes: readonly string[];
  /** 1 for the first try, 2 for the first retry, ... */
  readonly attempt: number;
  /** Scheduler time (ms) at which the download started; NaN when it never started. */
  readonly sentAt: number;
  /** Time from start to settlement of the download, in ms (0 when never started). */
  readonly latencyMs: number;
  /** Set by `backoffOn` on the last attempt of a request that kept failing. */
  readonly exhausted?: boolean;
}

/** The download settled with a value (any HTTP status counts as a response). */
export interface ResponseOutcome<R, T> extends OutcomeBase<R> {
  readonly kind: "response";
  readonly response: T;
}

/** The download threw, rejected, was aborted, or the request was unusable. */
export interface ErrorOutcome<R> extends OutcomeBase<R> {
  readonly kind: "error";
  readonly error: unknown;
}

/** The result of one request through `throttleByScope`. */
export type Outcome<R, T> = ResponseOutcome<R, T> | ErrorOutcome<R>;

/** The shape of a response that backoff and the command line can read. */
export interface ResponseLike {
  readonly status: number;
  readonly headers?: Headers | Readonly<Record<string, string | readonly string[] | undefined>>;
}

/** The HTTP status of an outcome, when it is a response that has one. */
export function outcomeStatus(outcome: Outcome<unknown, unknown>): number | undefined {
  if (outcome.kind !== "response") return undefined;
  const r = outcome.response as { status?: unknown } | null;
  return typeof r === "object" && r !== null && typeof r.status === "number" ? r.status : undefined;
}
