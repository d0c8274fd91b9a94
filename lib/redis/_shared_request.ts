/**
 * What `sharedDownload` runs per request, private to it: the requests of one
 * `sharedDownload` share a {@link SharedDownloads} (the lines of waiting
 * requests, the outbox of the turn's Redis calls, one timer for the asks'
 * time-outs and one for the leases' renewals), and each request is a
 * {@link SharedRequest} whose steps are methods (no closures per request).
 *
 * Size: the two classes are one protocol (a request's steps arm the shared
 * timers and post to the shared outbox, which call its methods back); apart,
 * each would have to expose its fields to the other.
 *
 * @module
 */
import {
  from,
  type Observable,
  type ObservableInput,
  type SchedulerLike,
  type Subscriber,
  Subscription,
} from "rxjs";
import type { DownloadContext } from "../download.ts";
import type { Throttler } from "../throttler/throttler.ts";
import type { RequestScopes } from "../scopes/scopes.ts";
import { timerDelay } from "../util/_timer.ts";
import {
  type AcquireOptions,
  type AcquireResult,
  type HandedLease,
  type RedisScopes,
  RedisScopesError,
  type ScopeLease,
  type ScopeLimits,
} from "./redis_scopes.ts";
import type { SharedDownloadContext } from "./shared_download.ts";

/**
 * How long past its wait (`pollMs` at most when a scope is full) this process
 * keeps its place in a scope's queue in Redis: room for a round trip and a
 * busy event loop.
 */
const PATIENCE_MARGIN_MS = 2_000;

/**
 * What the requests of one `sharedDownload` share: the options, the lines of
 * waiting requests, this turn's outbox of Redis calls, and one renewal timer
 * for every lease held. Per request there is a {@link SharedRequest}: its
 * steps are methods, not closures made for each request (at thousands of
 * requests a second the closures were most of the client's allocations).
 */
export class SharedDownloads<R, T> {
  /**
   * One request per scope set asks Redis at a time; the others of the set
   * wait here in order (a release wakes one asker per process, not every
   * waiting request: no thundering herd). The asker hands over when granted,
   * or when it goes.
   */
  readonly lines = new Map<string, Set<SharedRequest<R, T>>>();
  readonly patienceMs: number;
  /** What an asker tells `acquire`: with `more` when others of its line wait behind it. */
  readonly askOptions: AcquireOptions;
  readonly askMoreOptions: AcquireOptions;
  /**
   * The store parks asks (`AcquireOptions.park`): a release hands the slot
   * to this process's parked ask in Redis, and the request starts on the
   * message, without asking again.
   */
  readonly parking: boolean;
  readonly parkOptions: AcquireOptions;
  readonly parkMoreOptions: AcquireOptions;
  /**
   * The parked asks, by lease id, and one subscription to the leases handed
   * to them, from the first park on: kept while none is parked, as a
   * hand-over can come before the answer that says its ask was parked.
   */
  readonly #parked = new Map<string, SharedRequest<R, T>>();
  #handed$: Subscription | undefined;
  /**
   * Hand-overs whose parked ask is not known here yet: the message comes on
   * the subscriber connection and can overtake the answer (on the command
   * connection) that says the ask was parked. Claimed when it is.
   */
  readonly #early = new Map<string, HandedLease>();
  /**
   * Parked asks given up, or answered by an ask again: a hand-over message
   * that comes for one of them gives up the ask it parked in turn.
   */
  readonly #done = new Set<string>();
  /**
   * The asks in flight, each with its deadline, and one timer for the
   * soonest: a time-out timer per ask was a good part of a request's cost.
   */
  readonly #asks = new Set<SharedRequest<R, T>>();
  #deadlineTimer: Subscription | undefined;
  #deadlineAt = Infinity;
  /**
   * The asks waiting for a full scope, by scope, woken by one subscription
   * to the store's releases: a subscription per waiting ask, each looking
   * through every release message, cost waiting asks times released scopes.
   */
  readonly #waiting = new Map<string, Set<SharedRequest<R, T>>>();
  #releases$: Subscription | undefined;
  /** The leases held, renewed together every `leaseMs / 3`. */
  readonly #held = new Set<SharedRequest<R, T>>();
  #renewal: Subscription | undefined;
  /**
   * Redis calls of one turn go out together at its end, releases before
   * acquires: a release made after the outcome was emitted still reaches
   * Redis before the acquire of the request that outcome let start, and after
   * the hold the outcome brought (shareBackoff publishes a hold at once,
   * while the outcome is emitted). A release and an acquire of the same
   * scopes in one turn may meet here instead (`reuseLeases`).
   */
  #releases: (ScopeLease | undefined)[] = [];
  /** How many requests each lease has served after the one it was granted to. */
  readonly #reused = new WeakMap<ScopeLease, number>();
  #acquires: (SharedRequest<R, T> | undefined)[] = [];
  #posted = false;

  constructor(
    readonly scopes: RedisScopes,
    readonly throttler: Throttler<R>,
    readonly download: (
      request: R,
      context: SharedDownloadContext,
    ) => PromiseLike<T> | ObservableInput<T>,
    readonly timeoutMs: number,
    readonly pollMs: number,
    readonly scheduler: SchedulerLike,
    readonly onError: (error: RedisScopesError) => void,
    /** See `SharedDownloadOptions.reuseLeases`. */
    readonly reuseLeases: number,
  ) {
    this.patienceMs = pollMs + PATIENCE_MARGIN_MS;
    this.askOptions = { patienceMs: this.patienceMs };
    this.askMoreOptions = { patienceMs: this.patienceMs, more: true };
    this.parking = scopes.handed$ !== undefined && scopes.unpark !== undefined;
    this.parkOptions = { patienceMs: this.patienceMs, park: true };
    this.parkMoreOptions = { patienceMs: this.patienceMs, more: true, park: true };
  }

  /**
   * A release may hand `request` the lease `id` in Redis (see `parking`).
   * A hand-over that came first is given to it at once (re-entrant: the
   * request's `handed` runs inside this call; callers park last).
   */
  park(id: string, request: SharedRequest<R, T>): void {
    const early = this.#early.get(id);
    if (early !== undefined) {
      this.#early.delete(id);
      request.handed(early);
      return;
    }
    this.#parked.set(id, request);
    this.#handed$ ??= this.scopes.handed$!.subscribe((handed) => this.#handedOver(handed));
  }

  /** The parked ask `id` was granted by an ask again: its hand-over message may still come. */
  answered(id: string): void {
    this.forget(id);
    remember(this.#done, id);
  }

  /** The parked ask `id` was answered otherwise (granted by an ask): no hand-over expected. */
  forget(id: string): void {
    this.#parked.delete(id);
  }

  /**
   * Nobody here wants the parked ask `id` any more: undo it in Redis, with
   * the lease a release may have handed it and the ask parked after that.
   */
  giveUp(id: string, scope: string): void {
    this.forget(id);
    remember(this.#done, id);
    const early = this.#early.get(id);
    if (early !== undefined) {
      this.#early.delete(id);
      if (early.parked !== undefined) this.giveUp(early.parked, scope);
    }
    let done: Promise<void>;
    try {
      done = this.scopes.unpark!(id, scope);
    } catch (error) {
      this.onError(RedisScopesError.from("release", [scope], error));
      return;
    }
    done.catch((error) => this.onError(RedisScopesError.from("release", [scope], error)));
  }

  #handedOver(handed: HandedLease): void {
    const id = handed.lease.id;
    const request = this.#parked.get(id);
    if (request !== undefined) {
      this.forget(id);
      request.handed(handed);
      return;
    }
    if (this.#done.delete(id)) {
      // Its request went (its unpark frees the lease), or was granted it by
      // an ask again: nobody waits for the ask parked after it.
      if (handed.parked !== undefined) this.giveUp(handed.parked, handed.lease.scopes[0]!);
      return;
    }
    // Its ask's answer is on its way: claimed when the request parks.
    remember(this.#early, id, handed);
  }

  /** The limits to ask Redis for: the throttler's own for each scope now, and the quotas' amounts. */
  limitsOf(
    names: readonly string[],
    amounts: readonly (number | undefined)[] | undefined,
  ): ScopeLimits[] {
    const throttler = this.throttler;
    const out: ScopeLimits[] = [];
    for (let i = 0; i < names.length; i++) {
      const scope = names[i]!;
      const base = throttler.state(scope) ?? throttler.scopeConfig(scope);
      const limits = { concurrency: Math.max(1, base.concurrency), delayMs: base.delayMs };
      const amount = amounts?.[i];
      if (amount === undefined || !(amount > 0)) {
        out.push(limits);
        continue;
      }
      // The configured quota, as the gate checks it locally: Redis counts
      // every process's amounts in one window.
      const { quota, windowMs } = throttler.scopeConfig(scope);
      out.push(
        quota === undefined ? limits : { ...limits, quota: { limit: quota, windowMs, amount } },
      );
    }
    return out;
  }

  /**
   * A request's quota amounts, index for index with `names`, when one of its
   * scopes has a configured quota (`undefined` otherwise, or when its scopes
   * cannot be worked out again: the gate already did, so that is not for here
   * to fail on). The context carries only the names; the throttler resolves
   * the amounts as the gate did.
   */
  amountsOf(request: R, names: readonly string[]): Amounts | PromiseLike<Amounts> {
    const throttler = this.throttler;
    let quotas = false;
    for (let i = 0; i < names.length; i++) {
      if (throttler.scopeConfig(names[i]!).quota !== undefined) quotas = true;
    }
    if (!quotas) return undefined;
    try {
      const resolved = throttler.resolveScopes(request);
      return resolved instanceof Promise
        ? resolved.then((r) => alignAmounts(names, r), () => undefined)
        : alignAmounts(names, resolved);
    } catch {
      return undefined;
    }
  }

  /** Time this ask out at its `deadline` unless `unwatch`ed first. */
  watch(request: SharedRequest<R, T>): void {
    this.#asks.add(request);
    if (request.deadline < this.#deadlineAt) this.#armDeadline(request.deadline);
  }

  unwatch(request: SharedRequest<R, T>): void {
    if (!this.#asks.delete(request) || this.#asks.size > 0) return;
    this.#deadlineTimer?.unsubscribe();
    this.#deadlineTimer = undefined;
    this.#deadlineAt = Infinity;
  }

  #armDeadline(at: number): void {
    this.#deadlineTimer?.unsubscribe();
    this.#deadlineAt = at;
    this.#deadlineTimer = this.scheduler.schedule(
      () => this.#expire(),
      Math.max(0, at - this.scheduler.now()),
    );
  }

  #expire(): void {
    this.#deadlineTimer = undefined;
    this.#deadlineAt = Infinity;
    const now = this.scheduler.now();
    for (const request of [...this.#asks]) {
      if (request.deadline > now || !this.#asks.delete(request)) continue;
      // May ask again or fail a line (and so watch others): the timer is
      // armed again below for whatever is left.
      request.timedOut();
    }
    let next = Infinity;
    for (const request of this.#asks) if (request.deadline < next) next = request.deadline;
    if (next < this.#deadlineAt) this.#armDeadline(next);
  }

  /** Wake this ask when a lease of one of its scopes is released (`unwaitRelease` stops it). */
  waitRelease(request: SharedRequest<R, T>, names: readonly string[]): void {
    for (const scope of names) {
      const set = this.#waiting.get(scope);
      if (set === undefined) this.#waiting.set(scope, new Set([request]));
      else set.add(request);
    }
    this.#releases$ ??= this.scopes.released$.subscribe((released) => this.#released(released));
  }

  unwaitRelease(request: SharedRequest<R, T>, names: readonly string[]): void {
    for (const scope of names) {
      const set = this.#waiting.get(scope);
      if (set === undefined || !set.delete(request) || set.size > 0) continue;
      this.#waiting.delete(scope);
    }
    if (this.#waiting.size > 0) return;
    this.#releases$?.unsubscribe();
    this.#releases$ = undefined;
  }

  #released(released: readonly string[]): void {
    let woken: Set<SharedRequest<R, T>> | undefined;
    for (const scope of released) {
      const set = this.#waiting.get(scope);
      if (set === undefined) continue;
      woken ??= new Set();
      for (const request of set) woken.add(request);
    }
    // Each asks again (and so stops waiting) once, however many of its scopes were released.
    if (woken !== undefined) { for (const request of woken) request.wakeUp(); }
  }

  postRelease(lease: ScopeLease): void {
    this.#releases.push(lease);
    this.#post();
  }

  postAcquire(request: SharedRequest<R, T>): void {
    this.#acquires.push(request);
    this.#post();
  }

  #post(): void {
    if (this.#posted) return;
    this.#posted = true;
    queueMicrotask(() => this.#flush());
  }

  #flush(): void {
    this.#posted = false;
    const releases = this.#releases;
    const acquires = this.#acquires;
    this.#releases = [];
    this.#acquires = [];
    if (this.reuseLeases > 0 && releases.length > 0 && acquires.length > 0) {
      this.#reuse(releases, acquires);
    }
    for (const lease of releases) if (lease !== undefined) this.#release(lease);
    for (const request of acquires) if (request !== undefined) request.send();
  }

  /**
   * A lease given back in the turn a request of the same scopes asks keeps
   * its slot for that request, up to `reuseLeases` times in a row, where no
   * scope has a delay, a hold or a quota (a grant would have nothing to wait
   * for and nothing to count; see `SharedRequest.reusable`): no release, no
   * acquire, no hand-over between processes. A lease a renewal found expired
   * is not kept. Each lease so kept and each request so started leave the
   * lists (`undefined`).
   */
  #reuse(
    releases: (ScopeLease | undefined)[],
    acquires: (SharedRequest<R, T> | undefined)[],
  ): void {
    let byKey: Map<string, number[]> | undefined;
    for (let i = 0; i < releases.length; i++) {
      const lease = releases[i]!;
      if ((this.#reused.get(lease) ?? 0) >= this.reuseLeases) continue;
      const key = scopeSetKey(lease.scopes);
      byKey ??= new Map();
      const list = byKey.get(key);
      if (list === undefined) byKey.set(key, [i]);
      else list.push(i);
    }
    if (byKey === undefined) return;
    for (let j = 0; j < acquires.length; j++) {
      const request = acquires[j]!;
      const list = byKey.get(request.key);
      if (list === undefined || list.length === 0 || !request.reusable()) continue;
      const i = list.shift()!;
      const lease = releases[i]!;
      releases[i] = undefined;
      acquires[j] = undefined;
      this.#reused.set(lease, (this.#reused.get(lease) ?? 0) + 1);
      request.reuse(lease);
    }
  }

  /** A renewal found `lease` expired: its slot may be another's, so it is not kept for a next request. */
  expired(lease: ScopeLease): void {
    this.#reused.set(lease, Infinity);
  }

  #release(lease: ScopeLease): void {
    const names = lease.scopes;
    let released: Promise<void>;
    try {
      released = this.scopes.release(lease);
    } catch (error) {
      this.onError(RedisScopesError.from("release", names, error));
      return;
    }
    released.catch((error) => this.onError(RedisScopesError.from("release", names, error)));
  }

  /** Renew this request's lease with the others' every `leaseMs / 3` until it is given back. */
  hold(request: SharedRequest<R, T>): void {
    this.#held.add(request);
    if (this.#renewal !== undefined) return;
    const every = Math.max(1, this.scopes.leaseMs / 3);
    // One timer for every lease held (a lease's first renewal comes at most
    // `every` after its grant, then every `every`): a timer per request was
    // a good part of a request's cost at high rates.
    const tick = () => {
      this.#renewal = this.scheduler.schedule(tick, every);
      for (const held of this.#held) held.renew();
    };
    this.#renewal = this.scheduler.schedule(tick, every);
  }

  unhold(request: SharedRequest<R, T>): void {
    if (!this.#held.delete(request) || this.#held.size > 0) return;
    this.#renewal?.unsubscribe();
    this.#renewal = undefined;
  }
}

type Amounts = readonly (number | undefined)[] | undefined;

/** A scope set as one string: a line's key, and a kept lease's. */
function scopeSetKey(names: readonly string[]): string {
  return names.length === 1 ? names[0]! : JSON.stringify(names);
}

/**
 * The most ids `SharedDownloads` keeps of hand-overs not claimed yet or asks
 * given up (a lost message leaves one behind; Redis frees its lease anyway).
 */
const MAX_KEPT = 10_000;

function remember<V>(kept: Set<string> | Map<string, V>, id: string, value?: V): void {
  if (kept.size >= MAX_KEPT) kept.delete(kept.keys().next().value!);
  if (kept instanceof Set) kept.add(id);
  else kept.set(id, value!);
}

function alignAmounts(names: readonly string[], resolved: RequestScopes): Amounts {
  const given = resolved.amounts;
  if (given === undefined) return undefined;
  return names.map((scope) => {
    const i = resolved.names.indexOf(scope);
    return i < 0 ? undefined : given[i];
  });
}

/** The context the wrapped download is given (`signal` read from the gate's only when used). */
class SharedContext implements SharedDownloadContext {
  readonly lease: ScopeLease;
  readonly #inner: DownloadContext;
  constructor(inner: DownloadContext, lease: ScopeLease) {
    this.#inner = inner;
    this.lease = lease;
  }
  get signal(): AbortSignal {
    // The gate creates its signal on first use; reading it here for every
    // request made an AbortController each.
    return this.#inner.signal;
  }
  get attempt(): number {
    return this.#inner.attempt;
  }
  get scopes(): readonly string[] {
    return this.#inner.scopes;
  }
  /** For {@link WiredSharedContext}: the gate's `wentOut`. */
  protected wireOut(): void {
    this.#inner.wentOut!();
  }
}

/** The same with `wentOut` (present only when the gate's context has it). */
class WiredSharedContext extends SharedContext {
  wentOut(): void {
    // The local scopes' spacing (the shared one is timed in Redis).
    this.wireOut();
  }
}

/** One request of a `sharedDownload`: waits in its line, asks Redis for a lease, downloads, gives the lease back. */
export class SharedRequest<R, T> {
  readonly #shared: SharedDownloads<R, T>;
  readonly #request: R;
  readonly #context: DownloadContext;
  readonly #subscriber: Subscriber<T>;
  readonly #names: readonly string[];
  /** Its scope set as one string: its line's key. */
  readonly key: string;
  /** The request's quota amounts (see `amountsOf`). */
  #amounts: Amounts;
  /** Waiting in its line (not asking yet). */
  #inLine = false;
  /** This request is its line's asker. */
  #asking = false;
  #lease: ScopeLease | undefined;
  /** The id of the last lease it was granted (a late answer granting it again is no second lease). */
  #grantedId: string | undefined;
  /** The id its ask is parked under in Redis (see `SharedDownloads.parking`). */
  #parked: string | undefined;
  #closed = false;
  /** Counts the asks: an answer to an ask that is no longer the current one is late. */
  #ask = 0;
  /** The current ask is posted or in flight (not answered, not timed out). */
  #pending = false;
  /** In the outbox, not sent yet (an ask again before it goes is the same ask). */
  #posted = false;
  /** When the current ask times out (scheduler time). */
  deadline = Infinity;
  /** The wait before the next ask. */
  #timer: Subscription | undefined;
  /**
   * A release of its scopes wakes this ask (see `waitRelease`): while it
   * waits for a full scope, and while its ask is in flight.
   */
  #waitingRelease = false;
  /**
   * A release named this process's turn while the ask was in flight: a
   * refusal that crossed it on the way asks again at once.
   */
  #wokenInFlight = false;
  #inner: Subscription | undefined;
  /** When this request first asked (its time-out counts from there). */
  #askedAt: number | undefined;
  /** The last failure of a lost connection, told if the wait ends without Redis. */
  #lastLost: RedisScopesError | undefined;

  constructor(
    shared: SharedDownloads<R, T>,
    request: R,
    context: DownloadContext,
    subscriber: Subscriber<T>,
  ) {
    this.#shared = shared;
    this.#request = request;
    this.#context = context;
    this.#subscriber = subscriber;
    const names = context.scopes;
    this.#names = names;
    this.key = scopeSetKey(names);
    const found = shared.amountsOf(request, names);
    if (found !== undefined && typeof (found as PromiseLike<Amounts>).then === "function") {
      // Scopes that resolve later (a per-IP scope): join the line once known.
      (found as PromiseLike<Amounts>).then((amounts) => {
        if (this.#closed) return;
        this.#amounts = amounts;
        this.#join();
      });
    } else {
      this.#amounts = found as Amounts;
      this.#join();
    }
  }

  #join(): void {
    const lines = this.#shared.lines;
    const line = lines.get(this.key);
    if (line === undefined) {
      lines.set(this.key, new Set());
      this.#asking = true;
      this.#attempt();
      return;
    }
    this.#inLine = true;
    line.add(this);
  }

  /** Its turn in the line came: ask Redis. */
  ask(): void {
    this.#inLine = false;
    this.#asking = true;
    this.#attempt();
  }

  /**
   * Its turn in the line came, and the grant of the one before it already
   * put this process in the queues of the scopes it filled: wait for a
   * release naming this process (or the poll), as a refused ask would, but
   * without the refusal's round trip.
   */
  waitTurn(parked: string | undefined): void {
    this.#inLine = false;
    this.#asking = true;
    const shared = this.#shared;
    this.#askedAt ??= shared.scheduler.now();
    this.#timer = shared.scheduler.schedule(() => this.#attempt(), shared.pollMs);
    this.#waitingRelease = true;
    shared.waitRelease(this, this.#names);
    this.#takePark(parked); // last: a hand-over that came first starts it here
  }

  /** The line's asker failed: so does this request. */
  fail(error: unknown): void {
    this.#inLine = false;
    this.#subscriber.error(error);
  }

  /**
   * Hand the asking to the next of the line (to wait its turn when `queued`),
   * with the ask Redis parked for it, or close the line (and give the parked
   * ask up).
   */
  #passOn(queued = false, parked?: string): void {
    const lines = this.#shared.lines;
    const line = this.#asking ? lines.get(this.key) : undefined;
    this.#asking = false;
    const next = line?.values().next();
    if (next === undefined || next.done === true) {
      if (line !== undefined) lines.delete(this.key);
      if (parked !== undefined) this.#shared.giveUp(parked, this.#names[0]!);
      return;
    }
    line!.delete(next.value);
    if (queued) next.value.waitTurn(parked);
    else {
      next.value.#parked = parked; // its ask asks again for the parked lease
      next.value.ask();
      next.value.#takePark(parked);
    }
  }

  #takePark(parked: string | undefined): void {
    if (parked === undefined) return;
    this.#parked = parked;
    this.#shared.park(parked, this);
  }

  /** Give its parked ask up (it goes, or failed). */
  #unpark(): void {
    const parked = this.#parked;
    if (parked === undefined) return;
    this.#parked = undefined;
    this.#shared.giveUp(parked, this.#names[0]!);
  }

  /**
   * Whether its acquire, in the outbox, may take a lease this process gives
   * back in the same turn instead (see `SharedDownloads.reuseLeases`): no
   * parked ask, no quota amount, and none of its scopes with a delay, a
   * hold or a quota now (a grant would have had something to wait for or to
   * count).
   */
  reusable(): boolean {
    if (!this.#pending || this.#closed || this.#parked !== undefined) return false;
    const amounts = this.#amounts;
    if (amounts !== undefined && amounts.some((a) => a !== undefined && a > 0)) return false;
    const throttler = this.#shared.throttler;
    const now = this.#shared.scheduler.now();
    for (const scope of this.#names) {
      const state = throttler.state(scope);
      if (state === undefined) {
        const config = throttler.scopeConfig(scope);
        if (config.delayMs > 0 || config.quota !== undefined) return false;
      } else if (state.delayMs > 0 || state.holdUntil > now || state.quota !== undefined) {
        return false;
      }
    }
    return true;
  }

  /** Start on a lease given back in this turn (its acquire is not sent): as on a grant. */
  reuse(lease: ScopeLease): void {
    this.#posted = false;
    this.#cancel();
    this.#lease = lease;
    this.#grantedId = lease.id;
    this.#passOn();
    this.#start();
  }

  /** A release took the lease for its parked ask in Redis: start, as on a grant. */
  handed(handed: HandedLease): void {
    this.#parked = undefined;
    if (this.#closed || this.#lease !== undefined) {
      this.#shared.postRelease(handed.lease);
      if (handed.parked !== undefined) this.#shared.giveUp(handed.parked, this.#names[0]!);
      return;
    }
    this.#cancel();
    this.#lease = handed.lease;
    this.#grantedId = handed.lease.id;
    this.#passOn(handed.parked !== undefined, handed.parked);
    this.#start();
  }

  /** Redis failed this line's asker: the requests waiting behind it fail with it. */
  #failLine(error: unknown): void {
    if (!this.#asking) return;
    this.#asking = false;
    const lines = this.#shared.lines;
    const line = lines.get(this.key);
    lines.delete(this.key);
    for (const waiting of [...(line ?? [])]) waiting.fail(error);
  }

  /** Stop the current step: an ask not sent yet is not sent, a late answer is given back. */
  #cancel(): void {
    this.#ask++;
    if (this.#pending) this.#shared.unwatch(this);
    this.#pending = false;
    this.#timer?.unsubscribe();
    this.#timer = undefined;
    this.#wokenInFlight = false;
    if (this.#waitingRelease) {
      this.#waitingRelease = false;
      this.#shared.unwaitRelease(this, this.#names);
    }
  }

  #attempt(): void {
    this.#cancel();
    const shared = this.#shared;
    const now = shared.scheduler.now();
    this.#askedAt ??= now;
    const leftMs = shared.timeoutMs - (now - this.#askedAt);
    this.#pending = true;
    this.deadline = now + Math.max(0, leftMs);
    shared.watch(this);
    if (this.#posted) return;
    this.#posted = true;
    shared.postAcquire(this);
  }

  /** A lease of a scope it asks for was released: ask again now, or once the ask in flight is answered. */
  wakeUp(): void {
    if (!this.#waitingRelease) return;
    if (!this.#pending) return this.#attempt();
    if (!this.#posted) this.#wokenInFlight = true;
  }

  /** The ask's deadline passed (the shared timer has unwatched it). */
  timedOut(): void {
    if (!this.#pending) return;
    this.#pending = false;
    this.#ask++; // its answer, if it comes, is late
    this.#failed(
      new RedisScopesError(
        `Cannot acquire for scopes ${
          this.#names.join(", ")
        } as Redis did not answer within ${this.#shared.timeoutMs}ms`,
        "acquire",
        this.#names,
      ),
    );
  }

  /** The outbox sends this request's acquire (at the end of the turn it was asked in). */
  send(): void {
    this.#posted = false;
    if (!this.#pending) return; // unsubscribed before it went out: nothing to ask
    const shared = this.#shared;
    const names = this.#names;
    const ask = this.#ask;
    // Listen for releases from now: the message of a release that Redis
    // ran after this ask's refusal may come before the refusal does (another
    // connection), and its turn would be lost until the poll.
    this.#waitingRelease = true;
    shared.waitRelease(this, names);
    let answer: Promise<AcquireResult>;
    try {
      const line = shared.lines.get(this.key);
      const more = line !== undefined && line.size > 0;
      let options = more ? shared.askMoreOptions : shared.askOptions;
      if (shared.parking && names.length === 1) {
        options = more ? shared.parkMoreOptions : shared.parkOptions;
        // Asked again: the parked lease, which a release may have handed it.
        if (this.#parked !== undefined) options = { ...options, lease: this.#parked };
      }
      answer = shared.scopes.acquire(names, shared.limitsOf(names, this.#amounts), options);
    } catch (error) {
      answer = Promise.reject(error);
    }
    answer.then(
      (result) => {
        if (ask !== this.#ask || !this.#pending) {
          // A grant that comes after a time-out or an unsubscribe must still
          // be given back, or its slot stays taken until the lease expires
          // (unless it is the lease a release handed over meanwhile); so
          // must an ask parked for nobody.
          if (result.ok && result.lease.id !== this.#grantedId) {
            shared.postRelease(result.lease);
            if (result.parked !== undefined) shared.giveUp(result.parked, names[0]!);
          } else if (
            !result.ok && result.parked !== undefined && result.parked !== this.#parked &&
            result.parked !== this.#grantedId
          ) shared.giveUp(result.parked, names[0]!);
          return;
        }
        const woken = this.#wokenInFlight;
        this.#cancel();
        let parked: string | undefined;
        if (result.ok) {
          if (this.#parked !== undefined) {
            if (result.handed === true) shared.answered(this.#parked);
            else shared.forget(this.#parked);
          }
          this.#parked = undefined;
        } else if (result.parked !== undefined && result.parked !== this.#parked) {
          parked = result.parked;
          this.#parked = parked; // an ask again asks for it
        }
        if (!result.ok && result.full && result.waitMs <= 0 && woken) this.#attempt();
        else this.#answered(result, woken);
        // Last: a hand-over that overtook this answer starts the request here.
        this.#takePark(parked);
      },
      (error) => {
        if (ask !== this.#ask || !this.#pending) return;
        this.#cancel();
        this.#failed(RedisScopesError.from("acquire", names, error));
      },
    );
  }

  #answered(result: AcquireResult, woken: boolean): void {
    if (result.ok) {
      this.#lease = result.lease;
      this.#grantedId = result.lease.id;
      // Queued by the grant: the next waits for its turn, unless a release
      // that named this process crossed the grant (it may be the turn).
      this.#passOn(result.queued === true && !woken, result.parked);
      this.#start();
      return;
    }
    const shared = this.#shared;
    // Wait out the delay or hold; when a scope is full, until a release
    // anywhere, the soonest lease expiry, or `pollMs`.
    let waitMs = result.waitMs;
    if (result.full) {
      waitMs = Math.max(waitMs, Math.min(shared.pollMs, result.expiresInMs ?? shared.pollMs));
    }
    // A hold past what a timer holds (an uncapped delayScope) wakes early
    // and asks again, instead of overflowing into a busy loop.
    this.#timer = shared.scheduler.schedule(() => this.#attempt(), timerDelay(waitMs));
    if (result.full) {
      this.#waitingRelease = true;
      shared.waitRelease(this, this.#names);
    }
  }

  #failed(error: RedisScopesError): void {
    const shared = this.#shared;
    const names = this.#names;
    const leftMs = shared.timeoutMs - (shared.scheduler.now() - (this.#askedAt ?? 0));
    const timedOut = isClientTimeout(error.cause);
    if ((timedOut || isConnectionLost(error.cause)) && leftMs > 0) {
      // The client gave up on the call, Redis may not have: a slow Redis is
      // a wait. (The store gives back a grant it may have made.) A connection
      // lost is one too: the client reconnects (a restart, a failover). Ask
      // again once Redis has had a moment, within the bound.
      shared.onError(
        new RedisScopesError(
          `Cannot acquire for scopes ${names.join(", ")} as ${
            timedOut ? "the Redis client timed out" : "the connection to Redis was lost"
          }: asking again (a request waits up to ${shared.timeoutMs}ms)`,
          "acquire",
          names,
          { cause: error },
        ),
      );
      if (!timedOut) this.#lastLost = error;
      this.#timer = shared.scheduler.schedule(
        () => this.#attempt(),
        Math.min(shared.pollMs, leftMs),
      );
      return;
    }
    // The budget spent while the connection was down: say why.
    const lastLost = this.#lastLost;
    const final = lastLost !== undefined && error.cause === undefined
      ? new RedisScopesError(
        `Cannot acquire for scopes ${
          names.join(", ")
        } as Redis stayed unreachable for ${shared.timeoutMs}ms (${
          lastLost.message.replace(/^Cannot acquire for scopes .*? as /, "")
        })`,
        "acquire",
        names,
        { cause: lastLost },
      )
      : error;
    this.#unpark();
    this.#failLine(final);
    this.#subscriber.error(final);
  }

  #start(): void {
    if (this.#closed) return this.#giveBack(); // unsubscribed while the grant was on its way
    const shared = this.#shared;
    shared.hold(this);
    let input: Observable<T>;
    try {
      const context = this.#context.wentOut !== undefined
        ? new WiredSharedContext(this.#context, this.#lease!)
        : new SharedContext(this.#context, this.#lease!);
      input = from(shared.download(this.#request, context));
    } catch (error) {
      this.#giveBack();
      this.#subscriber.error(error);
      return;
    }
    // Held before subscribing: a download that answers synchronously ends
    // this request (and runs the teardown) before `subscribe` returns.
    const inner = new Subscription();
    this.#inner = inner;
    inner.add(input.subscribe(this));
  }

  // The download's observer. The outcome first, then the release: a hold the
  // outcome brings is published (by shareBackoff) while it is emitted, so it
  // reaches Redis before the slot frees. The release still goes out before
  // the acquire of the request the outcome let start (see the outbox).

  next(value: T): void {
    this.#subscriber.next(value);
    this.#giveBack();
    this.#subscriber.complete();
  }

  error(error: unknown): void {
    this.#subscriber.error(error);
    this.#giveBack();
  }

  complete(): void {
    this.#giveBack();
    this.#subscriber.complete();
  }

  /** The renewal timer's tick: push the lease's expiry on. */
  renew(): void {
    const held = this.#lease;
    if (held === undefined) return;
    const shared = this.#shared;
    const names = this.#names;
    shared.scopes.renew(held).then(
      (renewed) => {
        if (renewed || this.#lease !== held) return;
        // Expired (a stall longer than leaseMs): its slots may already be
        // someone else's. The download goes on; say so once.
        shared.unhold(this);
        shared.expired(held);
        shared.onError(
          new RedisScopesError(
            `Cannot renew for scopes ${
              names.join(", ")
            } as the lease had expired: the scopes' limits may be exceeded until this download ends`,
            "renew",
            names,
          ),
        );
      },
      (error) => shared.onError(RedisScopesError.from("renew", names, error)),
    );
  }

  #giveBack(): void {
    this.#shared.unhold(this);
    const held = this.#lease;
    this.#lease = undefined;
    if (held !== undefined) this.#shared.postRelease(held);
  }

  teardown(): void {
    this.#closed = true;
    if (this.#inLine) this.#shared.lines.get(this.key)?.delete(this);
    this.#inLine = false;
    this.#unpark();
    this.#passOn();
    this.#cancel();
    this.#inner?.unsubscribe();
    this.#giveBack();
  }
}

/**
 * Whether a Redis client's error says the connection went away (it
 * reconnects by itself), as node-redis and ioredis word it; not a client
 * closed on purpose.
 */
function isConnectionLost(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.constructor.name === "ClientClosedError") return false;
  return /^(?:SocketClosedUnexpectedlyError|ClientOfflineError|ConnectionTimeoutError|DisconnectsClientError)$/
    .test(error.constructor.name) ||
    /\b(?:ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH)\b|socket closed|connection is closed|client is offline/i
      .test(`${(error as { code?: unknown }).code ?? ""} ${error.message}`);
}

/**
 * A client's own command time-out (node-redis's `TimeoutError`, which has no
 * message, or an error that says it timed out): the command may still have
 * run in Redis.
 */
function isClientTimeout(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return error.name === "TimeoutError" || error.constructor.name === "TimeoutError" ||
    /\btime(?:d)?[ -]?out\b/i.test(error.message);
}
