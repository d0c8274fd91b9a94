/**
 * `throttleByScope`: the gate. Each request waits until every one of its
 * throttling scopes allows it, is downloaded, and comes out as an outcome.
 *
 * @module
 */
import {
  from,
  Observable,
  type ObservableInput,
  type OperatorFunction,
  type Subscriber,
  type Subscription,
} from "rxjs";
import { type Outcome, outcomeStatus } from "../lib/outcome.ts";
import { InvalidRequestError } from "../lib/http/download_errors.ts";
import { requestMeta } from "../lib/request.ts";
import type { RequestScopes } from "../lib/scopes/scopes.ts";
import type { GateOwner, Throttler } from "../lib/throttler/throttler.ts";
import { errorText } from "../lib/http/_error_text.ts";
import { isPromiseLike } from "../lib/util/_is_promise_like.ts";
import { RESUBMIT, type Resubmit } from "../lib/_resubmit.ts";
import { takeRequestDelayed } from "../lib/_request_delay.ts";
import { scheduleAfter } from "../lib/util/_timer.ts";
import type { DownloadContext, DownloadFn } from "../lib/download.ts";

// The download's types live with what the operators stand on (lib/); the
// gate is where users meet them.
export type { DownloadContext, DownloadFn } from "../lib/download.ts";

/** Put into an error outcome when a download Observable completes without a value. */
export class EmptyDownloadError extends Error {
  override readonly name = "EmptyDownloadError";
}

/**
 * The throttling gate, an operator from requests to outcomes.
 *
 * Requests wait (none is dropped) until every scope allows them and the
 * throttler's global cap has room; each is then counted against all its scopes
 * at once and downloaded. A failing download, an unusable URL or bad scopes
 * become `{ kind: "error" }` outcomes: the pipeline goes on. Each outcome is
 * emitted *before* the request's slot is freed, so an operator placed right
 * after (`backoffOn`) sees it before the scope's next request can go.
 * Unsubscribing aborts the downloads in flight, drops the waiting requests and
 * clears every timer.
 *
 * @param throttler The throttler whose scopes and limits apply (may be shared by pipelines).
 * @param download Downloads one request; gets an AbortSignal, the attempt and the scopes.
 * @param options `firstAttempt`: the attempt number a request from the source
 *   starts at (default 1), for requests other processes already tried (a
 *   shared queue's re-handed request): `backoffOn` counts its retries from
 *   there, and `meta.throttlingDelayMs` applies only at attempt 1.
 * @returns An operator from requests to outcomes.
 * @example A pipeline in a few lines
 * ```ts
 * import { from } from "rxjs";
 * import { createThrottler, throttleByScope } from "../mod.ts";
 * const throttler = createThrottler({ concurrentRequestsPerDomain: 2, downloadDelayMs: 100 });
 * from(["https://example.com/a", "https://example.com/b"]).pipe(
 *   throttleByScope(throttler, (url) => Promise.resolve({ status: 200, url })),
 * ).subscribe((o) => console.log(o.kind, o.request));
 * ```
 */
export function throttleByScope<R, T>(
  throttler: Throttler<R>,
  download: DownloadFn<R, T>,
  options: ThrottleByScopeOptions<R> = {},
): OperatorFunction<R, Outcome<R, T>> {
  const first = options.firstAttempt;
  return (source) =>
    new Observable<Outcome<R, T>>((subscriber) => {
      // Everything belongs to this subscription alone (see Gate).
      const gate = new Gate(throttler, download, subscriber);
      throttler.attach();
      gate.subscription = source.subscribe({
        next: (request) =>
          gate.accept(request, first === undefined ? 1 : attemptFrom(first, request), 0),
        error: (error) => gate.error(error),
        complete: () => gate.sourceComplete(),
      });
      return () => gate.teardown();
    });
}

/** Options of {@linkcode throttleByScope}. */
export interface ThrottleByScopeOptions<R> {
  /**
   * The attempt a request from the source starts at: 1 + the attempts others
   * made at it (`crawl()` asks its queue's `attemptsBefore`). Not a whole
   * number of at least 1, or throwing: 1. @default 1
   */
  readonly firstAttempt?: (request: R) => number;
}

function attemptFrom<R>(first: (request: R) => number, request: R): number {
  let n: number;
  try {
    n = first(request);
  } catch {
    return 1;
  }
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

/**
 * The state of one subscription of the gate. It is the owner of its waiting
 * requests at the throttler, which keeps them without an object each.
 */
class Gate<R, T> implements GateOwner {
  readonly throttler: Throttler<R>;
  readonly download: DownloadFn<R, T>;
  readonly subscriber: Subscriber<Outcome<R, T>>;
  subscription: Subscription | undefined;
  sourceDone = false;
  closed = false;
  /** Requests accepted and not yet out as an outcome (waiting, resolving scopes, in flight). */
  open = 0;
  /** Requests in flight, as an intrusive list (no allocation per request). */
  head: Flight<R, T> | undefined;
  readonly timers = new Set<Subscription>();
  readonly resubmit: Resubmit;
  /**
   * How long after its release a request usually reaches the network: a
   * running minimum that creeps up 2% of the way to each later reading, so it
   * follows a machine that got slower. It starts at 0, so the first requests
   * count all their lateness (the first one, with cold code, is the latest).
   * A request later than this moves its scopes' next send back by the
   * difference (`Flight.wentOut`).
   */
  wireMs = 0;

  constructor(
    throttler: Throttler<R>,
    download: DownloadFn<R, T>,
    subscriber: Subscriber<Outcome<R, T>>,
  ) {
    this.throttler = throttler;
    this.download = download;
    this.subscriber = subscriber;
    this.resubmit = (outcome, delayMs) => {
      if (this.closed) return false;
      this.accept(outcome.request as R, outcome.attempt + 1, delayMs ?? 0);
      return true;
    };
  }

  accept(request: R, attempt: number, extraDelayMs: number): void {
    this.open++;
    let scopes: RequestScopes | Promise<RequestScopes>;
    try {
      scopes = this.throttler.resolveScopes(request);
    } catch (error) {
      this.fail(request, attempt, error);
      return;
    }
    let delay = extraDelayMs;
    if (attempt === 1) {
      const requested = requestMeta(request)?.throttlingDelayMs;
      if (
        requested !== undefined &&
        !(typeof requested === "number" && requested >= 0 && requested < Infinity)
      ) {
        this.fail(
          request,
          attempt,
          new InvalidRequestError(
            `Cannot throttle request as 'meta.throttlingDelayMs' must be a finite number >= 0: current value is ${
              String(requested)
            }`,
            { input: request },
          ),
        );
        return;
      }
      // A request the request queue held aside for this delay waits it once only.
      delay = takeRequestDelayed(request) ? 0 : (requested ?? 0);
    }
    if (scopes instanceof Promise) {
      scopes.then(
        (s) => this.#afterDelay(request, attempt, s, delay),
        (error) => {
          if (!this.closed) this.fail(request, attempt, error);
        },
      );
    } else {
      this.#afterDelay(request, attempt, scopes, delay);
    }
  }

  #afterDelay(request: R, attempt: number, scopes: RequestScopes, delay: number): void {
    if (this.closed) return;
    if (!(delay > 0)) {
      this.throttler.submit(this, request, attempt, scopes);
      return;
    }
    const throttler = this.throttler;
    if (throttler.observed) {
      throttler.emit({
        type: "request-delayed",
        at: throttler.scheduler.now(),
        scope: undefined,
        reason: "request-delay",
        waitMs: delay,
      });
    }
    const timer = scheduleAfter(throttler.scheduler, delay, () => {
      this.timers.delete(timer);
      if (!this.closed) throttler.submit(this, request, attempt, scopes);
    });
    this.timers.add(timer);
  }

  /** The throttler let a request go (see `GateOwner.start`). */
  start(
    request: unknown,
    attempt: number,
    claims: RequestScopes,
    sentAt: number,
    slot: object | undefined,
  ): void {
    new Flight(this, request as R, attempt, claims, slot).start(sentAt);
  }

  /** A request that never reached the gate (bad URL, bad scopes). */
  fail(request: R, attempt: number, error: unknown): void {
    this.open--;
    this.emit({
      kind: "error",
      request,
      error,
      scopes: [],
      attempt,
      sentAt: Number.NaN,
      latencyMs: 0,
      [RESUBMIT]: this.resubmit,
    } as unknown as Outcome<R, T>);
    this.maybeComplete();
  }

  emit(outcome: Outcome<R, T>): void {
    this.subscriber.next(outcome);
  }

  maybeComplete(): void {
    if (this.sourceDone && this.open === 0 && !this.closed) {
      this.closed = true;
      this.subscriber.complete();
    }
  }

  sourceComplete(): void {
    this.sourceDone = true;
    this.maybeComplete();
  }

  error(error: unknown): void {
    this.closed = true;
    this.subscriber.error(error);
  }

  teardown(): void {
    this.closed = true;
    this.subscription?.unsubscribe();
    this.throttler.cancelOwner(this);
    for (const timer of this.timers) timer.unsubscribe();
    this.timers.clear();
    for (let f = this.head; f !== undefined; f = f.next) f.abort();
    this.head = undefined;
    this.throttler.detach();
  }
}

/** One request being downloaded. */
class Flight<R, T> implements DownloadContext {
  readonly gate: Gate<R, T>;
  readonly request: R;
  readonly attempt: number;
  readonly claims: RequestScopes;
  /** The throttler's token for `release`. */
  readonly slot: object | undefined;
  settled = false;
  /** `wentOut` was called (it counts once). */
  wired = false;
  sentAt = 0;
  controller: AbortController | undefined;
  inner: Subscription | undefined;
  prev: Flight<R, T> | undefined;
  next: Flight<R, T> | undefined;

  constructor(
    gate: Gate<R, T>,
    request: R,
    attempt: number,
    claims: RequestScopes,
    slot: object | undefined,
  ) {
    this.gate = gate;
    this.request = request;
    this.attempt = attempt;
    this.claims = claims;
    this.slot = slot;
  }

  // A getter, not a field: one field fewer on each of the objects a busy gate keeps in flight.
  get scopes(): readonly string[] {
    return this.claims.names;
  }

  get signal(): AbortSignal {
    // Created on first use: most downloads in a hot loop never read it.
    return (this.controller ??= new AbortController()).signal;
  }

  wentOut(): void {
    if (this.settled || this.wired) return;
    this.wired = true;
    const gate = this.gate;
    const throttler = gate.throttler;
    const late = throttler.scheduler.now() - this.sentAt;
    const usual = gate.wireMs;
    if (!(late > usual)) {
      gate.wireMs = late > 0 ? late : 0;
      return;
    }
    gate.wireMs = usual + (late - usual) * 0.02;
    const names = this.claims.names;
    for (let i = 0; i < names.length; i++) {
      throttler.peekManager(names[i]!)?.recordWentOut?.(this.sentAt, late - usual);
    }
  }

  start(sentAt: number): void {
    const gate = this.gate;
    const throttler = gate.throttler;
    this.sentAt = sentAt;
    // Link into the gate's in-flight list.
    this.next = gate.head;
    if (gate.head !== undefined) gate.head.prev = this;
    gate.head = this;
    if (throttler.observed) {
      throttler.emit({
        type: "request-sent",
        at: this.sentAt,
        scopes: this.claims.names,
        attempt: this.attempt,
      });
    }
    let result: PromiseLike<T> | ObservableInput<T>;
    try {
      result = gate.download(this.request, this);
    } catch (error) {
      this.settle("error", error);
      return;
    }
    if (isPromiseLike<T>(result)) {
      result.then(
        (value) => this.settle("response", value),
        (error) => this.settle("error", error),
      );
      return;
    }
    let input: Observable<T>;
    try {
      // `from` throws at once for a value that is neither a promise nor an
      // ObservableInput (a JavaScript caller returning a plain response):
      // uncaught, that would leak the slot and escape the pipeline.
      input = from(result);
    } catch (error) {
      this.settle("error", error);
      return;
    }
    let got = false;
    this.inner = input.subscribe({
      next: (value) => {
        if (got) return;
        got = true;
        this.settle("response", value);
        this.inner?.unsubscribe();
      },
      error: (error) => this.settle("error", error),
      complete: () => {
        if (!got) {
          this.settle("error", new EmptyDownloadError("download completed without a value"));
        }
      },
    });
    if (got) this.inner.unsubscribe();
  }

  settle(kind: "response" | "error", value: unknown): void {
    const gate = this.gate;
    if (this.settled || gate.closed) return;
    this.settled = true;
    this.#unlink();
    gate.open--;
    const throttler = gate.throttler;
    const latencyMs = throttler.scheduler.now() - this.sentAt;
    const outcome = (kind === "response"
      ? {
        kind,
        request: this.request,
        response: value,
        scopes: this.claims.names,
        attempt: this.attempt,
        sentAt: this.sentAt,
        latencyMs,
        [RESUBMIT]: gate.resubmit,
      }
      : {
        kind,
        request: this.request,
        error: value,
        scopes: this.claims.names,
        attempt: this.attempt,
        sentAt: this.sentAt,
        latencyMs,
        [RESUBMIT]: gate.resubmit,
      }) as unknown as Outcome<R, T>;
    const status = outcomeStatus(outcome);
    if (throttler.observed) {
      throttler.emit({
        type: "request-done",
        at: this.sentAt + latencyMs,
        scopes: this.claims.names,
        attempt: this.attempt,
        latencyMs,
        status,
        error: outcome.kind === "error" ? errorText(outcome.error) : undefined,
      });
    }
    // Emitted before the slot is freed: backoff recorded downstream must be
    // in place before this scope's next request can be released.
    gate.emit(outcome);
    throttler.answered(this.claims, this.slot, outcome, status, kind === "error");
    gate.maybeComplete();
  }

  /** The pipeline was unsubscribed: abort the download and free the slot. */
  abort(): void {
    if (this.settled) return;
    this.settled = true;
    this.inner?.unsubscribe();
    this.controller?.abort(new DOMException("The pipeline was unsubscribed", "AbortError"));
    this.gate.throttler.release(this.claims, undefined, this.slot);
  }

  #unlink(): void {
    const gate = this.gate;
    if (this.prev !== undefined) this.prev.next = this.next;
    else if (gate.head === this) gate.head = this.next;
    if (this.next !== undefined) this.next.prev = this.prev;
    this.prev = this.next = undefined;
  }
}
