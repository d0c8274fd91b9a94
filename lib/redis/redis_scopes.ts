/**
 * Scope limits shared by several processes through Redis: a cluster-wide
 * admission check per scope (concurrency leases and the gap between sends,
 * decided by one atomic Lua script on the Redis server's clock), shared holds,
 * and a pub/sub channel over which processes tell each other about backoff.
 *
 * The arithmetic of a scope (backoff levels, recovery, rampup) stays in each
 * process's throttler; this store only enforces, across all processes, the
 * limits each process hands it. See docs/REDIS.md.
 *
 * Size: the Lua scripts and the client code that calls them (batching,
 * renewal, pub/sub, outages) sit side by side, so a change to one shows in
 * the other.
 *
 * @module
 */
import { runScript } from "./_redis_script.ts";
import { errorReason } from "../http/_error_text.ts";
import { type Observable, Subject } from "rxjs";
import { LOCAL_FAILURE } from "../http/download_errors.ts";

/**
 * The part of a Redis client this store uses. A node-redis client
 * (`createClient()` from the `redis` package, connected) fits as it is.
 */
export interface RedisScopesClient {
  /** Sends one command and resolves with its reply. */
  sendCommand(args: readonly string[]): Promise<unknown>;
  /** A new, unconnected client with the same options, for pub/sub. */
  duplicate(): RedisScopesSubscriber;
}

/** The pub/sub side of a client (what node-redis's `duplicate()` returns). */
export interface RedisScopesSubscriber {
  connect(): Promise<unknown>;
  subscribe(
    channel: string,
    listener: (message: string, channel: string) => unknown,
  ): Promise<void>;
  on(event: "error", listener: (error: Error) => void): unknown;
  /** Closes the connection once pending commands are answered. */
  close(): Promise<void>;
  /** Closes the connection at once. */
  destroy(): void;
}

/** Options of {@link createRedisScopes}. */
export interface RedisScopesOptions {
  /**
   * Put before every key and the channel name. Processes that share limits
   * use the same prefix. One Redis node: the scripts build their keys from
   * it and declare none, so a Redis Cluster cannot route them.
   * @default "politely:"
   */
  readonly prefix?: string;
  /**
   * How long a lease lives unless released or renewed, in ms: the leases of a
   * process that crashed free their slots after this long.
   * @default 60000
   */
  readonly leaseMs?: number;
  /** How long the keys of an idle scope stay in Redis after their last use, in ms. @default 60000 */
  readonly idleTtlMs?: number;
  /** This process's id in leases and messages. @default crypto.randomUUID() */
  readonly processId?: string;
  /**
   * Open a second connection (`client.duplicate()`) to receive the other
   * processes' messages (`messages$`). Without it, `messages$` never emits.
   * @default true
   */
  readonly subscribe?: boolean;
}

/** The limits a process asks the cluster to enforce for one scope. */
export interface ScopeLimits {
  /** At most this many leases at once, across all processes (>= 1). */
  readonly concurrency: number;
  /** At least this long between two grants, in ms (>= 0). */
  readonly delayMs: number;
  /**
   * A quota the processes share, and this request's amount of it: the
   * single-process gate's window, kept in Redis. @default none
   */
  readonly quota?: SharedQuota | undefined;
}

/**
 * A scope's quota shared across processes, as the single-process gate counts
 * it: a window opens at the first grant with an amount after the last window
 * ended and lasts `windowMs`; a request whose amount would take the window's
 * use past `limit` waits for its end, unless the window has used nothing yet
 * (an oversized request would otherwise wait for ever).
 */
export interface SharedQuota {
  /** The most amount per window (> 0). */
  readonly limit: number;
  /** The window's length, in ms (> 0). */
  readonly windowMs: number;
  /** What this request uses of it (>= 0; 0 neither checks nor uses the quota). */
  readonly amount: number;
}

/** A granted admission: one slot in every scope of a request. */
export interface ScopeLease {
  readonly id: string;
  readonly scopes: readonly string[];
  /** Redis server time of the grant, in ms (with microseconds). */
  readonly grantedAt: number;
  /** Redis server time at which the lease expires unless renewed, in ms. */
  readonly expiresAt: number;
}

/** Options of {@link RedisScopes.acquire}. */
export interface AcquireOptions {
  /**
   * When refused, this process keeps its place in the scopes' queues until the
   * wait answered plus this long, in ms: it promises to ask again by then
   * (a process that stops asking, or died, blocks others for at most this
   * long past its wait). Set it above the longest pause between two asks.
   * @default 2000
   */
  readonly patienceMs?: number;
  /**
   * This process has another request for these scopes waiting: a grant that
   * fills a scope also gives the process its place at the back of that
   * scope's queue (`queued` in the answer), so the next request can wait for
   * its turn without first being refused.
   * @default false
   */
  readonly more?: boolean;
  /**
   * Park the ask in Redis when refused (one scope, no quota amount only): a
   * release that owes this process a slot then takes the lease for it and
   * says so on `handed$`, so the process need not ask again. The refusal
   * answers the parked lease id (`parked`); ask again with it as `lease`
   * (after a poll, or a lost message): a lease handed over meanwhile is
   * answered as granted. Give a parked ask up with `unpark`. Asked with
   * `more`, a grant (or hand-over) that queues the process parks its next
   * ask at once (`parked` of the grant).
   * @default false
   */
  readonly park?: boolean;
  /** Ask again for this parked lease id (see `park`) instead of a new one. @default a new lease */
  readonly lease?: string | undefined;
}

/** A lease a release took in Redis for this process's parked ask (see `AcquireOptions.park`). */
export interface HandedLease {
  readonly lease: ScopeLease;
  /** The hand-over queued the process again: its next ask is parked under this id. */
  readonly parked: string | undefined;
}

/** What `acquire` answers. */
export type AcquireResult =
  | {
    readonly ok: true;
    readonly lease: ScopeLease;
    /** Asked with `more`: the grant filled a scope, and the process now waits in its queue. */
    readonly queued?: boolean;
    /** Asked with `park` and `more` and queued: the next ask, parked under this lease id. */
    readonly parked?: string | undefined;
    /**
     * Asked again for a parked lease that a release had handed over: its
     * message (on `handed$`, with the ask it parked in turn) may still come.
     */
    readonly handed?: boolean;
  }
  | {
    readonly ok: false;
    /** How long until the delay or a hold of the busiest scope ends, in ms (0 when only full). */
    readonly waitMs: number;
    /**
     * A scope has all its leases taken; `expiresInMs` is when the soonest of
     * them expires (a release usually comes first: see `released$`).
     */
    readonly full: boolean;
    readonly expiresInMs: number | undefined;
    /** Asked with `park`: the lease id the ask is parked under. */
    readonly parked?: string | undefined;
  };

/** A backoff another process saw, as it travels on the channel. */
export interface SharedBackoffMessage {
  readonly type: "backoff";
  /** The process that saw it. */
  readonly from: string;
  readonly scope: string;
  /** The sender's backoff level after the trigger. */
  readonly level: number;
  /**
   * The sender's delay after the trigger: an adaptive scope (no levels) that
   * learned a slower pace tells it this way.
   */
  readonly delayMs?: number | undefined;
  readonly cause: string;
  /** A hold that came with it (Retry-After, RateLimit-Reset, delayScope). */
  readonly hold:
    | {
      readonly ms: number;
      readonly source: "retry-after" | "ratelimit" | "delay-scope" | "robots";
    }
    | undefined;
}

/** Leases were released somewhere: waiting requests of these scopes may try again. */
export interface SharedReleaseMessage {
  readonly type: "release";
  readonly from: string;
  readonly scopes: readonly string[];
  /**
   * Index for index with `scopes`, a process whose turn it is next ('' when
   * none waits): a scope with several free slots is repeated in `scopes`,
   * once per process it names. Only those ask again (`released$` of the
   * others leaves the scope out).
   */
  readonly next?: readonly string[];
  /**
   * Index for index with `next`, present when a release handed slots over:
   * the lease id taken for that process's parked ask ('' for none), the id
   * its next ask was parked under ('' for none), and the grant's server time.
   */
  readonly lease?: readonly string[];
  readonly park?: readonly string[];
  readonly at?: string;
}

/** Everything on the channel. */
export type SharedMessage = SharedBackoffMessage | SharedReleaseMessage;

/** A Redis call of the store failed (connection lost, script error, time out). */
export class RedisScopesError extends Error {
  override readonly name = "RedisScopesError";
  /** Not the site's failure: no backoff or retry for it unless named (see `LOCAL_FAILURE`). */
  readonly [LOCAL_FAILURE] = true;
  /** What the store was doing. */
  readonly operation: "connect" | "acquire" | "release" | "renew" | "publish";
  /** The scopes concerned (empty for `connect`). */
  readonly scopes: readonly string[];

  constructor(
    message: string,
    operation: RedisScopesError["operation"],
    scopes: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.operation = operation;
    this.scopes = scopes;
  }

  /**
   * The error of a failed Redis call: what failed, for which scopes, and the
   * failure as `cause` (a `RedisScopesError` is returned as it is).
   *
   * @param operation What the store was doing.
   * @param scopes The scopes concerned.
   * @param error What the client threw or rejected with.
   * @returns `Cannot <operation> for scopes <scopes> as Redis failed: <message>`.
   * @example
   * ```ts
   * import { RedisScopesError } from "./redis_scopes.ts";
   * const e = RedisScopesError.from("acquire", ["a.test"], new Error("socket closed"));
   * console.assert(e.message === "Cannot acquire for scopes a.test as Redis failed: socket closed");
   * ```
   */
  static from(
    operation: RedisScopesError["operation"],
    scopes: readonly string[],
    error: unknown,
  ): RedisScopesError {
    if (error instanceof RedisScopesError) return error;
    return new RedisScopesError(
      `Cannot ${operation} for scopes ${scopes.join(", ")} as Redis failed: ${errorReason(error)}`,
      operation,
      scopes,
      { cause: error },
    );
  }
}

/**
 * The default `onError` of `sharedDownload` and `shareBackoff`: a `warning`
 * event on the throttler (code `redis-scopes`), once per message.
 *
 * @param throttler Where the warnings go.
 * @returns The error handler.
 */
export function warnOnThrottler(
  throttler: { warnOnce(key: string, code: string, message: string): void },
): (error: RedisScopesError) => void {
  return (error) =>
    throttler.warnOnce(`redis-scopes:${error.message}`, "redis-scopes", error.message);
}

/** The shared store; see {@link createRedisScopes}. */
export interface RedisScopes {
  readonly prefix: string;
  readonly processId: string;
  readonly leaseMs: number;
  /**
   * Take a lease in every scope at once, or in none: granted only when every
   * scope has a free slot that no process waiting longer is owed, its delay
   * since the last grant has passed and it is not held. A refused process
   * keeps its place in the queue of each scope that refused it (see
   * docs/REDIS.md, "Turns").
   *
   * @param scopes The request's scopes (at least one).
   * @param limits One entry per scope, in the same order.
   * @param options How long a place in a queue outlives the wait.
   * @throws {RangeError} for limits that do not fit the scopes or a bad option.
   * @throws {RedisScopesError} (as a rejection) when Redis fails.
   */
  acquire(
    scopes: readonly string[],
    limits: readonly ScopeLimits[],
    options?: AcquireOptions,
  ): Promise<AcquireResult>;
  /** Give a lease back (idempotent); tells the other processes. */
  release(lease: ScopeLease): Promise<void>;
  /**
   * Give a parked ask up (see `AcquireOptions.park`), with the lease a release
   * may have handed it meanwhile and the ask that hand-over parked after it.
   * Absent from stores that do not park.
   */
  unpark?(leaseId: string, scope: string): Promise<void>;
  /** Leases handed to this process's parked asks by releases (see `AcquireOptions.park`). */
  readonly handed$?: Observable<HandedLease>;
  /** Push a lease's expiry `leaseMs` further; `false` when it had already expired. */
  renew(lease: ScopeLease): Promise<boolean>;
  /**
   * Tell the other processes about a backoff; a hold in it is also stored in
   * Redis (server time), so every `acquire` of the scope waits for it, even in
   * a process that missed the message.
   */
  publishBackoff(message: Omit<SharedBackoffMessage, "type" | "from">): Promise<void>;
  /**
   * The other processes' messages (never this process's own). A release
   * message is decoded whole only while this has a subscriber.
   */
  readonly messages$: Observable<SharedMessage>;
  /**
   * The other processes' backoff messages, the same as on `messages$`: a
   * subscriber that wants only these does not have every release message of
   * the cluster decoded for it. Absent from stores that do not have it.
   */
  readonly backoffs$?: Observable<SharedBackoffMessage>;
  /**
   * Scopes with a released lease, from this process (at once) or another (by
   * message), for which it is this process's turn or nobody's.
   */
  readonly released$: Observable<readonly string[]>;
  /** Close the pub/sub connection (the client given stays open). */
  close(): Promise<void>;
}

// Times are ms with microseconds, written with %.3f: Lua's tostring keeps 14
// digits only, which would cut server times (13 digits of ms) to the ms.
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local function fmt(x) return string.format('%.3f', x) end
-- Only ever lengthen a key's life: processes may run with other lease and
-- idle times, and a shorter TTL would drop their live leases with the key.
local function extend(key, ms)
  ms = math.ceil(ms)
  -- PTTL is -1 for a key with no TTL yet (just written): below any ms.
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
`;

/**
 * One acquire. `argv` from `first`: lease number, patience ms, then per scope
 * its name, concurrency and delay, and with `stride` 6 also its quota limit,
 * window ms and amount (amount 0: no quota). The keys are built here from
 * the prefix and the scope names (not declared as KEYS: the store is for one
 * Redis node, see docs/REDIS.md; sending four long key names per scope was
 * most of a batch's bytes). Per scope: its lease set, its state hash, its
 * queue of waiting processes (score: when the process first waited) and
 * their deadlines (score: when a process that stopped asking loses its turn).
 *
 * Turns: a process is granted a slot of a scope only while the free slots
 * outnumber the processes that have waited for it longer. A refused process
 * joins the queue of each scope that refused it (keeping its place if already
 * there) and leaves those that would have let it through; a grant takes it
 * out of them all, so a process that wants more goes to the back.
 *
 * Quota: the state hash's `qend` (the window's end) and `qused`; checked and
 * used in the same script as the lease, so processes share one window.
 */
const ACQUIRE = `-- A new lease id for a process's parked ask: one counter for the prefix, so
-- ids differ across scopes (a process tells them apart by id alone); the
-- second keeps ids apart after the counter's key expired.
local function parkId(who)
  local seq = redis.call('INCR', P .. 'seq')
  extend(P .. 'seq', idleMs)
  return who .. ':h' .. seq .. '.' .. t[1]
end
local function acquire(argv, first, n, stride, more, park)
-- A lease number, or (asked again for a parked ask) the whole lease id.
local id = argv[first]
if not string.find(id, ':', 1, true) then id = pid .. ':' .. id end
local patience = tonumber(argv[first + 1])
local parks = P .. 'park:' .. argv[first + 2]
if park then
  local held = redis.call('ZSCORE', P .. 'lease:' .. argv[first + 2], id)
  if held then
    -- A release handed this parked ask its slot and the message has not come
    -- (or was lost): answer the grant again, marked as handed over (the
    -- message, when it comes, names the ask it parked in turn).
    return {1, fmt(tonumber(held) - leaseMs), fmt(tonumber(held)), 0, '', 1}
  end
end
local wait = 0
local full = 0
local expiry = -1
local refused = {}
local ks = {}
for i = 1, n do
  local b = first + 2 + stride * (i - 1)
  local scope = argv[b]
  local leases, state = P .. 'lease:' .. scope, P .. 'state:' .. scope
  local queue, alive = P .. 'queue:' .. scope, P .. 'alive:' .. scope
  local conc = tonumber(argv[b + 1])
  ks[i] = {leases, state, queue, alive, tonumber(argv[b + 2]), conc, 0}
  local delay = ks[i][5]
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', fmt(now))
  local gone = redis.call('ZRANGEBYSCORE', alive, '-inf', fmt(now))
  if #gone > 0 then
    redis.call('ZREM', queue, unpack(gone))
    redis.call('ZREMRANGEBYSCORE', alive, '-inf', fmt(now))
  end
  local taken = redis.call('ZCARD', leases)
  ks[i][7] = taken
  local ahead = redis.call('ZRANK', queue, pid)
  if not ahead then ahead = redis.call('ZCARD', queue) end
  refused[i] = false
  if taken >= conc then
    full = 1
    refused[i] = true
    local soonest = redis.call('ZRANGE', leases, 0, 0, 'WITHSCORES')
    local e = tonumber(soonest[2]) - now
    if expiry < 0 or e < expiry then expiry = e end
  elseif taken + ahead >= conc then
    -- Slots are free, but for processes that waited longer: wait as for a full scope.
    full = 1
    refused[i] = true
  end
  local s = redis.call('HMGET', state, 'last', 'next', 'hold', 'qend', 'qused')
  local at = 0
  if s[1] then at = tonumber(s[1]) + delay end
  if s[2] and tonumber(s[2]) > at then at = tonumber(s[2]) end
  if s[3] and tonumber(s[3]) > at then at = tonumber(s[3]) end
  if stride == 6 then
    local amount = tonumber(argv[b + 5])
    if amount > 0 and s[4] and tonumber(s[4]) > now then
      local used = tonumber(s[5] or '0')
      -- An oversized request still goes through an unused window.
      if used > 0 and used + amount > tonumber(argv[b + 3]) and tonumber(s[4]) > at then
        at = tonumber(s[4])
      end
    end
  end
  if at > now then
    refused[i] = true
    if at - now > wait then wait = at - now end
  end
end
if full == 1 or wait > 0 then
  local deadline = fmt(now + wait + patience)
  for i = 1, n do
    local state, queue, alive = ks[i][2], ks[i][3], ks[i][4]
    if refused[i] then
      -- What a release reads to name as many waiting processes as slots free.
      redis.call('HSET', state, 'conc', ks[i][6])
      extend(state, wait + patience + idleMs)
      redis.call('ZADD', queue, 'NX', fmt(now), pid)
      redis.call('ZADD', alive, deadline, pid)
      extend(queue, wait + patience + idleMs)
      extend(alive, wait + patience + idleMs)
    else
      -- Not waiting for this scope: holding a place in it would only block others.
      redis.call('ZREM', queue, pid)
      redis.call('ZREM', alive, pid)
    end
  end
  if park then
    -- Parked: a release that owes this process a slot takes the lease for it.
    local m = 0
    if more then m = 1 end
    redis.call('HSET', parks, pid, cjson.encode({id, ks[1][6], ks[1][5], m, patience, leaseMs, ''}))
    extend(parks, wait + patience + idleMs)
    return {0, fmt(wait), full, fmt(expiry), id}
  end
  return {0, fmt(wait), full, fmt(expiry)}
end
local expires = now + leaseMs
local queued = 0
for i = 1, n do
  local leases, state, queue, alive, delay = ks[i][1], ks[i][2], ks[i][3], ks[i][4], ks[i][5]
  redis.call('ZADD', leases, fmt(expires), id)
  extend(leases, leaseMs + idleMs)
  redis.call('HSET', state, 'last', fmt(now), 'next', fmt(now + delay))
  local life = delay
  if stride == 6 then
    local b = first + 2 + stride * (i - 1)
    local amount = tonumber(argv[b + 5])
    if amount > 0 then
      local qend = tonumber(redis.call('HGET', state, 'qend') or '0')
      if qend <= now then
        qend = now + tonumber(argv[b + 4])
        redis.call('HSET', state, 'qend', fmt(qend), 'qused', argv[b + 5])
      else
        redis.call('HINCRBYFLOAT', state, 'qused', argv[b + 5])
      end
      if qend - now > life then life = qend - now end
    end
  end
  if more and ks[i][7] + 1 >= ks[i][6] then
    -- It wants another and this grant filled the scope: its place at the
    -- back of the queue now, as the refused ask it spares would have taken.
    redis.call('HSET', state, 'conc', ks[i][6])
    redis.call('ZADD', queue, fmt(now), pid)
    redis.call('ZADD', alive, fmt(now + patience), pid)
    extend(queue, patience + idleMs)
    extend(alive, patience + idleMs)
    queued = 1
  else
    redis.call('ZREM', queue, pid)
    redis.call('ZREM', alive, pid)
  end
  extend(state, life + idleMs)
end
if park then
  if queued == 1 then
    -- The next request of its line is parked at once, under a new lease id.
    local nid = parkId(pid)
    redis.call('HSET', parks, pid, cjson.encode({nid, ks[1][6], ks[1][5], 1, patience, leaseMs, id}))
    extend(parks, patience + idleMs)
    return {1, fmt(now), fmt(expires), 1, nid}
  end
  redis.call('HDEL', parks, pid)
end
return {1, fmt(now), fmt(expires), queued}
end
`;

/**
 * Several acquires and releases in one round trip, on one reading of the
 * clock. No KEYS. ARGV: channel, process id, key prefix, lease ms, idle ms,
 * then the operations: a release is 'r', its number of scopes, its lease id
 * and the scopes; an acquire is 'a' (stride 3) or 'q' (with quotas, stride
 * 6), upper case when asked with `more`, its number of scopes and then as
 * `acquire` above. Answers one reply per operation (a release: per scope
 * the process first in its queue, or this one when it is named too, ''
 * for none). The client puts releases first, so an acquire in the batch
 * finds their slots free; one release message goes out, after them all,
 * naming per scope the processes whose turn it is.
 */
const BATCH = NOW + `local channel, pid, P = ARGV[1], ARGV[2], ARGV[3]
local leaseMs, idleMs = tonumber(ARGV[4]), tonumber(ARGV[5])
` + ACQUIRE + `local a = 6
local out = {}
-- The release message, by process named (see RELEASE_MESSAGE): the scopes
-- nobody waits for, and per process its scopes with the lease handed over
-- and the ask parked after it ('' for none).
local free, whos, byWho = {}, {}, {}
local function emit(scope, who, h)
  if who == '' then
    free[#free + 1] = scope
    return
  end
  local e = byWho[who]
  if not e then
    e = {}
    byWho[who] = e
    whos[#whos + 1] = who
  end
  local k = #e
  e[k + 1] = scope
  if h then e[k + 2], e[k + 3] = h[1], h[2] else e[k + 2], e[k + 3] = '', '' end
end
while a <= #ARGV do
  local kind, n = ARGV[a], tonumber(ARGV[a + 1])
  if kind == 'r' or kind == 'u' then
    -- The processes whose turn it is are named, so only they ask again: as
    -- many from the front of the queue as the scope has free slots, or its
    -- head when it has none. Naming only the head lost the turns of the
    -- others a free slot was owed to until they polled. A named process
    -- with a parked ask (see acquire) is handed the slot here: the lease is
    -- taken for it, and the message tells it so (no ask, no refusal).
    -- 'u' gives up a parked ask (and the lease a release may have handed it).
    local lease = ARGV[a + 2]
    local heads = {}
    local mine = {}
    for i = 1, n do
      local scope = ARGV[a + 2 + i]
      local leases, queue = P .. 'lease:' .. scope, P .. 'queue:' .. scope
      local alive, state, parks = P .. 'alive:' .. scope, P .. 'state:' .. scope, P .. 'park:' .. scope
      local gone = redis.call('ZREM', leases, lease)
      local named = {}
      if kind == 'u' then
        local rec = redis.call('HGET', parks, pid)
        if rec then
          local f = cjson.decode(rec)
          if f[1] == lease or f[7] == lease then
            redis.call('HDEL', parks, pid)
            redis.call('ZREM', queue, pid)
            redis.call('ZREM', alive, pid)
          end
        end
      end
      if gone > 0 or kind == 'r' then named = redis.call('ZRANGE', queue, 0, 0) end
      local handed = {}
      if #named > 0 then
        -- Its concurrency as the last refused process asked for it.
        local conc = tonumber(redis.call('HGET', state, 'conc') or '1')
        redis.call('ZREMRANGEBYSCORE', leases, '-inf', fmt(now))
        local taken = redis.call('ZCARD', leases)
        local free = conc - taken
        if free > 1 then named = redis.call('ZRANGE', queue, 0, free - 1) end
        if free > 0 then
          local recs = redis.call('HMGET', parks, unpack(named))
          local s
          local k = 0
          for j = 1, #named do
            if recs[j] then
              -- {id, conc, delay, more, patience, lease ms, id it came after}
              local f = cjson.decode(recs[j])
              s = s or redis.call('HMGET', state, 'last', 'next', 'hold')
              local at = 0
              if s[1] then at = tonumber(s[1]) + f[3] end
              if s[2] and tonumber(s[2]) > at then at = tonumber(s[2]) end
              if s[3] and tonumber(s[3]) > at then at = tonumber(s[3]) end
              -- Its own limits, as its ask would have been granted: the
              -- processes named before it and not handed a slot come first.
              if at <= now and taken + (j - 1 - k) < f[2] then
                local who = named[j]
                redis.call('ZADD', leases, fmt(now + f[6]), f[1])
                extend(leases, f[6] + idleMs)
                s[1], s[2] = fmt(now), fmt(now + f[3])
                redis.call('HSET', state, 'last', s[1], 'next', s[2])
                extend(state, f[3] + idleMs)
                taken = taken + 1
                k = k + 1
                local nid = ''
                if f[4] == 1 and taken >= f[2] then
                  -- It wants more and this filled the scope: back of the
                  -- queue, its next request parked under a new lease id.
                  nid = parkId(who)
                  redis.call('HSET', parks, who, cjson.encode({nid, f[2], f[3], 1, f[5], f[6], f[1]}))
                  redis.call('HSET', state, 'conc', f[2])
                  redis.call('ZADD', queue, fmt(now), who)
                  redis.call('ZADD', alive, fmt(now + f[5]), who)
                  extend(parks, f[5] + idleMs)
                  extend(queue, f[5] + idleMs)
                  extend(alive, f[5] + idleMs)
                else
                  redis.call('HDEL', parks, who)
                  redis.call('ZREM', queue, who)
                  redis.call('ZREM', alive, who)
                end
                handed[j] = {f[1], nid}
                if who == pid then
                  mine[#mine + 1] = scope
                  mine[#mine + 1] = f[1]
                  mine[#mine + 1] = nid
                end
              end
            end
          end
        end
      end
      local head = named[1] or ''
      for j = 2, #named do
        if named[j] == pid then head = pid end
        emit(scope, named[j], handed[j])
      end
      -- The head last ('' when none waits).
      emit(scope, named[1] or '', handed[1])
      heads[i] = head
    end
    if #mine > 0 then out[#out + 1] = {heads, fmt(now), mine} else out[#out + 1] = heads end
    a = a + 3 + n
  else
    local stride = 3
    if kind == 'q' or kind == 'Q' then stride = 6 end
    local more = kind == 'A' or kind == 'Q' or kind == 'P'
    out[#out + 1] = acquire(ARGV, a + 2, n, stride, more, kind == 'p' or kind == 'P')
    a = a + 4 + stride * n
  end
end
if #free > 0 or #whos > 0 then
  -- cjson writes an empty table as {}.
  local m = {'\\30release\\n', cjson.encode(pid), '\\n', fmt(now), '\\n', '[]'}
  if #free > 0 then m[6] = cjson.encode(free) end
  for _, who in ipairs(whos) do
    m[#m + 1] = '\\n' .. cjson.encode(who) .. '\\t' .. cjson.encode(byWho[who])
  end
  redis.call('PUBLISH', channel, table.concat(m))
end
return out
`;

/** KEYS: lease sets. ARGV: lease id, lease ms, idle ms. Returns how many it renewed. */
const RENEW = NOW + `local expires = now + tonumber(ARGV[2])
local n = 0
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    redis.call('ZADD', KEYS[i], fmt(expires), ARGV[1])
    extend(KEYS[i], tonumber(ARGV[2]) + tonumber(ARGV[3]))
    n = n + 1
  end
end
return n
`;

/** KEYS: the scope's state hash. ARGV: hold ms (0 for none), idle ms, channel, message. */
const PUBLISH = NOW + `local holdMs = tonumber(ARGV[1])
if holdMs > 0 then
  local untilAt = now + holdMs
  local cur = redis.call('HGET', KEYS[1], 'hold')
  if not cur or tonumber(cur) < untilAt then redis.call('HSET', KEYS[1], 'hold', fmt(untilAt)) end
  extend(KEYS[1], holdMs + tonumber(ARGV[2]))
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`;

type ScriptName = "batch" | "renew" | "publish";
const SCRIPTS: Readonly<Record<ScriptName, string>> = {
  batch: BATCH,
  renew: RENEW,
  publish: PUBLISH,
};

/**
 * Create the shared store on a connected Redis client, and (unless
 * `subscribe: false`) subscribe to the channel of its prefix.
 *
 * @param client A connected node-redis client (or anything that fits {@link RedisScopesClient}).
 * @param options Prefix, lease and idle times, process id.
 * @returns The store, once its scripts are loaded and its channel subscribed.
 * @throws {RangeError} for a bad option, naming it.
 * @throws {RedisScopesError} (as a rejection) when Redis cannot be reached.
 * @example Two processes' view of one scope
 * ```ts
 * import { createClient } from "redis";
 * import { createRedisScopes } from "./redis_scopes.ts";
 * const client = await createClient({ url: "redis://127.0.0.1:6390" }).connect();
 * const scopes = await createRedisScopes(client, { prefix: "crawl-42:" });
 * const got = await scopes.acquire(["example.com"], [{ concurrency: 2, delayMs: 500 }]);
 * if (got.ok) await scopes.release(got.lease);
 * await scopes.close();
 * await client.close();
 * ```
 */
export async function createRedisScopes(
  client: RedisScopesClient,
  options: RedisScopesOptions = {},
): Promise<RedisScopes> {
  const prefix = options.prefix ?? "politely:";
  const leaseMs = options.leaseMs ?? 60_000;
  const idleTtlMs = options.idleTtlMs ?? 60_000;
  checkMs("leaseMs", leaseMs, 1);
  checkMs("idleTtlMs", idleTtlMs, 1);
  const store = new RedisScopesStore(
    client,
    prefix,
    leaseMs,
    idleTtlMs,
    options.processId ?? crypto.randomUUID(),
  );
  await store.start(options.subscribe ?? true);
  return store;
}

function checkMs(name: string, value: number, min: number): void {
  if (!(typeof value === "number" && Number.isFinite(value) && value >= min)) {
    throw new RangeError(
      `Cannot create Redis scopes as '${name}' must be a finite number >= ${min}: current value is ${value}`,
    );
  }
}

/**
 * How the batch script writes a release message (a backoff message is JSON,
 * written by the client): this line, the sender's id, the server time of the
 * release, the scopes nobody waits for, then a line per process named, its id
 * and a tab before its scopes, each with the lease handed over to it and the
 * ask parked after that ('' for none). Ids and lists are JSON as Redis's
 * cjson writes it, so a line break is always a separator. Every process
 * receives every release: it looks for its own line and decodes that one
 * and the scopes nobody waits for, not the turns of all the others.
 */
const RELEASE_MESSAGE = "\x1erelease\n";

/**
 * A string as the scripts' cjson writes it: JSON with '/' and DEL escaped
 * too (checked against Redis 7.0 for every character below U+0800).
 */
function cjsonString(value: string): string {
  return JSON.stringify(value).replace(/\//g, "\\/").replace(/\x7f/g, "\\u007f");
}

/** A line of a release message from its start to the next line break (or the end). */
function lineAt(raw: string, start: number): string {
  const end = raw.indexOf("\n", start);
  return raw.slice(start, end < 0 ? raw.length : end);
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === "string");
}

/** A whole release message, for `messages$`; `undefined` when it is not one. */
function decodeRelease(raw: string): SharedReleaseMessage | undefined {
  const lines = raw.slice(RELEASE_MESSAGE.length).split("\n");
  const from: unknown = JSON.parse(lines[0]!);
  const free: unknown = JSON.parse(lines[2] ?? "");
  if (typeof from !== "string" || !isStrings(free)) return undefined;
  const scopes = [...free];
  const next = free.map(() => "");
  const lease = free.map(() => "");
  const park = free.map(() => "");
  for (let l = 3; l < lines.length; l++) {
    const line = lines[l]!;
    const tab = line.indexOf("\t");
    const who: unknown = JSON.parse(line.slice(0, tab));
    const entries: unknown = JSON.parse(line.slice(tab + 1));
    if (typeof who !== "string" || !isStrings(entries)) return undefined;
    for (let i = 0; i + 2 < entries.length; i += 3) {
      scopes.push(entries[i]!);
      next.push(who);
      lease.push(entries[i + 1]!);
      park.push(entries[i + 2]!);
    }
  }
  return lease.some((id) => id !== "")
    ? { type: "release", from, scopes, next, lease, park, at: lines[1]! }
    : { type: "release", from, scopes, next };
}

/** The most acquires and releases in one script call (keeps one call's time in Redis short). */
const MAX_BATCH = 256;

/** An acquire or release waiting for its batch to be sent. */
interface BatchOp {
  /** The lease an acquire asks for, or a release gives back. */
  readonly leaseId: string;
  readonly scopes: readonly string[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * One turn's operations, each kind with the script arguments of its
 * operations in order (written as they are asked: no array per operation).
 */
class Batch {
  readonly releases: BatchOp[] = [];
  readonly acquires: BatchOp[] = [];
  readonly releaseArgs: string[] = [];
  readonly acquireArgs: string[] = [];
}

const NO_KEYS: readonly string[] = [];

class RedisScopesStore implements RedisScopes {
  readonly prefix: string;
  readonly processId: string;
  readonly leaseMs: number;
  readonly #idleTtlMs: number;
  readonly #client: RedisScopesClient;
  readonly #channel: string;
  readonly #shas = new Map<ScriptName, string>();
  readonly #messages = new Subject<SharedMessage>();
  readonly #released = new Subject<readonly string[]>();
  readonly #handed = new Subject<HandedLease>();
  readonly #backoffs = new Subject<SharedBackoffMessage>();
  /** How this process's own release messages begin (they were handled from the reply). */
  readonly #ownRelease: string;
  /** The line of a release message that names this process, up to its scopes. */
  readonly #ownLine: string;
  #subscriber: RedisScopesSubscriber | undefined;
  /** This turn's acquires and releases, not sent yet. */
  #batch: Batch | undefined;
  #leases = 0;
  /** The batch script's first arguments: channel, process id, key prefix, lease and idle ms. */
  readonly #batchHead: readonly string[];

  readonly messages$: Observable<SharedMessage> = this.#messages.asObservable();
  readonly released$: Observable<readonly string[]> = this.#released.asObservable();
  readonly handed$: Observable<HandedLease> = this.#handed.asObservable();
  readonly backoffs$: Observable<SharedBackoffMessage> = this.#backoffs.asObservable();

  constructor(
    client: RedisScopesClient,
    prefix: string,
    leaseMs: number,
    idleTtlMs: number,
    processId: string,
  ) {
    this.#client = client;
    this.prefix = prefix;
    this.leaseMs = leaseMs;
    this.#idleTtlMs = idleTtlMs;
    this.processId = processId;
    this.#channel = `${prefix}events`;
    this.#batchHead = [this.#channel, processId, prefix, String(leaseMs), String(idleTtlMs)];
    const id = cjsonString(processId);
    this.#ownRelease = `${RELEASE_MESSAGE}${id}\n`;
    this.#ownLine = `\n${id}\t`;
  }

  async start(subscribe: boolean): Promise<void> {
    try {
      for (const [name, script] of Object.entries(SCRIPTS) as [ScriptName, string][]) {
        this.#shas.set(name, String(await this.#client.sendCommand(["SCRIPT", "LOAD", script])));
      }
      if (!subscribe) return;
      const sub = this.#client.duplicate();
      // An 'error' event without a listener would crash the process; the
      // client reconnects by itself, and missed messages are covered by the
      // state kept in Redis (holds, leases) and by polling.
      sub.on("error", () => {});
      await sub.connect();
      this.#subscriber = sub;
      await sub.subscribe(this.#channel, (message) => this.#receive(message));
    } catch (error) {
      this.#subscriber?.destroy();
      throw new RedisScopesError(
        `Cannot create Redis scopes as Redis failed: ${
          error instanceof Error ? error.message : String(error)
        }`,
        "connect",
        [],
        { cause: error },
      );
    }
  }

  #receive(raw: string): void {
    if (raw.startsWith(RELEASE_MESSAGE)) {
      if (!raw.startsWith(this.#ownRelease)) this.#receiveRelease(raw);
      return;
    }
    let message: SharedMessage;
    try {
      message = JSON.parse(raw) as SharedMessage;
    } catch {
      return; // not ours: somebody else publishes on the channel
    }
    if (typeof message !== "object" || message === null || message.from === this.processId) return;
    if (message.type === "backoff" && typeof message.scope === "string") {
      this.#messages.next(message);
      this.#backoffs.next(message);
    }
  }

  /**
   * Another process's release (see RELEASE_MESSAGE): hands over what it
   * handed this process, wakes the scopes it names this process for, or
   * nobody, and only then decodes the whole message, for `messages$`.
   */
  #receiveRelease(raw: string): void {
    const from = raw.indexOf("\n", RELEASE_MESSAGE.length);
    const at = raw.indexOf("\n", from + 1);
    if (from < 0 || at < 0) return;
    let free: unknown;
    let mine: unknown = [];
    try {
      const freeLine = lineAt(raw, at + 1);
      free = JSON.parse(freeLine);
      const own = raw.indexOf(this.#ownLine, at + 1 + freeLine.length);
      if (own >= 0) mine = JSON.parse(lineAt(raw, own + this.#ownLine.length));
    } catch {
      return; // not ours
    }
    if (!isStrings(free) || !isStrings(mine)) return;
    let wake = free;
    const grantedAt = raw.slice(from + 1, at);
    for (let i = 0; i + 2 < mine.length; i += 3) {
      const scope = mine[i]!;
      const lease = mine[i + 1]!;
      if (lease === "") {
        if (wake === free) wake = [...free];
        wake.push(scope);
      } else this.#hand(scope, lease, mine[i + 2], grantedAt);
    }
    if (wake.length > 0) this.#released.next(wake);
    if (!this.#messages.observed) return;
    let message: SharedReleaseMessage | undefined;
    try {
      message = decodeRelease(raw);
    } catch {
      return;
    }
    if (message !== undefined) this.#messages.next(message);
  }

  /**
   * The released scopes this process's waiting requests should ask for: those
   * whose turn is this process's, or nobody's (no process queued). `heads`
   * is what the release script answered (per scope, the process first in the
   * queue, '' for none); anything else wakes every scope.
   */
  #myTurn(
    scopes: readonly string[],
    heads: unknown,
    handed?: readonly boolean[],
  ): readonly string[] {
    if (!Array.isArray(heads)) return scopes;
    return scopes.filter((_, i) => {
      // Handed over: the parked ask has its lease, nothing to ask.
      if (handed?.[i] === true) return false;
      const head: unknown = heads[i];
      return typeof head !== "string" || head === "" || head === this.processId;
    });
  }

  /** A release took a lease for this process's parked ask of `scope`. */
  #hand(scope: string, id: string, parked: unknown, at: unknown): void {
    const grantedAt = Number(at);
    this.#handed.next({
      lease: { id, scopes: [scope], grantedAt, expiresAt: grantedAt + this.leaseMs },
      parked: typeof parked === "string" && parked !== "" ? parked : undefined,
    });
  }

  #leaseKey(scope: string): string {
    return `${this.prefix}lease:${scope}`;
  }

  #stateKey(scope: string): string {
    return `${this.prefix}state:${scope}`;
  }

  /**
   * This turn's batch: everything asked in one turn goes to Redis in one
   * script call at its end (releases first), so a process that releases and
   * acquires at once pays one round trip, and a release wakes the others once
   * per turn, not once per lease.
   */
  #openBatch(): Batch {
    let batch = this.#batch;
    if (batch === undefined) {
      const fresh = new Batch();
      batch = fresh;
      this.#batch = fresh;
      queueMicrotask(() => this.#send(fresh));
    }
    return batch;
  }

  /** Adds an operation whose arguments are written; a full batch goes as it is. */
  #add(
    batch: Batch,
    into: BatchOp[],
    leaseId: string,
    scopes: readonly string[],
  ): Promise<unknown> {
    if (batch.releases.length + batch.acquires.length + 1 >= MAX_BATCH) this.#batch = undefined;
    return new Promise((resolve, reject) => into.push({ leaseId, scopes, resolve, reject }));
  }

  #enqueueRelease(leaseId: string, scopes: readonly string[], kind = "r"): Promise<unknown> {
    const batch = this.#openBatch();
    batch.releaseArgs.push(kind, String(scopes.length), leaseId, ...scopes);
    return this.#add(batch, batch.releases, leaseId, scopes);
  }

  #send(batch: Batch): void {
    if (this.#batch === batch) this.#batch = undefined;
    const { releases, acquires } = batch;
    let reply: Promise<unknown>;
    try {
      reply = this.#run(
        "batch",
        NO_KEYS,
        this.#batchHead.concat(batch.releaseArgs, batch.acquireArgs),
      );
    } catch (error) {
      reply = Promise.reject(error);
    }
    reply.then(
      (replies) => {
        const each = replies as readonly unknown[];
        const r = releases.length;
        for (let i = 0; i < r; i++) releases[i]!.resolve(each[i]);
        for (let i = 0; i < acquires.length; i++) acquires[i]!.resolve(each[r + i]);
      },
      (error) => {
        for (const op of releases) op.reject(error);
        for (const op of acquires) op.reject(error);
        // The call may have run in Redis all the same (a client's time-out,
        // a connection lost after sending): give back what its acquires may
        // have been granted. Releasing a lease that was never granted does
        // nothing; a failure here is the same failure again.
        for (const op of acquires) this.#enqueueRelease(op.leaseId, op.scopes).catch(() => {});
      },
    );
  }

  #run(name: ScriptName, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    // After SCRIPT FLUSH or a restart of Redis: EVAL caches the script again.
    return runScript(this.#client, this.#shas.get(name)!, SCRIPTS[name], keys, args);
  }

  async acquire(
    scopes: readonly string[],
    limits: readonly ScopeLimits[],
    options: AcquireOptions = {},
  ): Promise<AcquireResult> {
    if (scopes.length === 0 || limits.length !== scopes.length) {
      throw new RangeError(
        `Cannot acquire a lease as 'limits' must have one entry per scope (at least one): current value is ${limits.length} for ${scopes.length} scopes`,
      );
    }
    const patienceMs = options.patienceMs ?? 2_000;
    if (!(patienceMs >= 0) || !Number.isFinite(patienceMs)) {
      throw new RangeError(
        `Cannot acquire a lease as 'patienceMs' must be a finite number >= 0: current value is ${patienceMs}`,
      );
    }
    // Checked before anything is written into the batch.
    let quotas = false;
    for (let i = 0; i < scopes.length; i++) {
      const { concurrency, delayMs, quota } = limits[i]!;
      if (!(concurrency >= 1) || !(delayMs >= 0) || !Number.isFinite(delayMs)) {
        throw new RangeError(
          `Cannot acquire a lease as 'limits[${i}]' must have concurrency >= 1 and a finite delayMs >= 0: current value is ${
            JSON.stringify(limits[i])
          }`,
        );
      }
      if (quota === undefined) continue;
      if (
        !(quota.limit > 0 && quota.limit < Infinity) ||
        !(quota.windowMs > 0 && quota.windowMs < Infinity) ||
        !(quota.amount >= 0 && quota.amount < Infinity)
      ) {
        throw new RangeError(
          `Cannot acquire a lease as 'limits[${i}].quota' must have a finite limit > 0, windowMs > 0 and amount >= 0: current value is ${
            JSON.stringify(quota)
          }`,
        );
      }
      if (quota.amount > 0) quotas = true;
    }
    const again = options.lease;
    const number = again ?? String(++this.#leases);
    const batch = this.#openBatch();
    const args = batch.acquireArgs;
    const kind = quotas ? "q" : options.park === true && scopes.length === 1 ? "p" : "a";
    args.push(
      options.more === true ? kind.toUpperCase() : kind,
      String(scopes.length),
      number,
      String(patienceMs),
    );
    for (let i = 0; i < scopes.length; i++) {
      const { concurrency, delayMs, quota } = limits[i]!;
      args.push(scopes[i]!, String(Math.floor(concurrency)), String(delayMs));
      if (!quotas) continue;
      if (quota === undefined || quota.amount === 0) args.push("0", "0", "0");
      else args.push(String(quota.limit), String(quota.windowMs), String(quota.amount));
    }
    const leaseId = again ?? `${this.processId}:${number}`;
    let reply: unknown;
    try {
      reply = await this.#add(batch, batch.acquires, leaseId, scopes);
    } catch (error) {
      throw RedisScopesError.from("acquire", scopes, error);
    }
    const r = reply as readonly (string | number)[];
    if (Number(r[0]) === 1) {
      return {
        ok: true,
        lease: {
          id: leaseId,
          scopes: [...scopes],
          grantedAt: Number(r[1]),
          expiresAt: Number(r[2]),
        },
        queued: Number(r[3]) === 1,
        parked: r[4] !== undefined && r[4] !== "" ? String(r[4]) : undefined,
        handed: Number(r[5]) === 1,
      };
    }
    const expiry = Number(r[3]);
    return {
      ok: false,
      waitMs: Number(r[1]),
      full: Number(r[2]) === 1,
      expiresInMs: expiry >= 0 ? expiry : undefined,
      parked: r[4] !== undefined ? String(r[4]) : undefined,
    };
  }

  async release(lease: ScopeLease): Promise<void> {
    let reply: unknown;
    try {
      reply = await this.#enqueueRelease(lease.id, lease.scopes);
    } catch (error) {
      throw RedisScopesError.from("release", lease.scopes, error);
    }
    this.#afterRelease(lease.scopes, reply);
  }

  async unpark(leaseId: string, scope: string): Promise<void> {
    const scopes = [scope];
    let reply: unknown;
    try {
      reply = await this.#enqueueRelease(leaseId, scopes, "u");
    } catch (error) {
      throw RedisScopesError.from("release", scopes, error);
    }
    this.#afterRelease(scopes, reply);
  }

  /**
   * A release's reply: per scope the process whose turn it is, and, when it
   * handed a slot to this process's own parked ask, `[heads, at, mine]`
   * (`mine`: scope, lease id, parked id, for each).
   */
  #afterRelease(scopes: readonly string[], reply: unknown): void {
    let heads = reply;
    let handed: boolean[] | undefined;
    if (Array.isArray(reply) && Array.isArray(reply[0])) {
      heads = reply[0];
      const mine = reply[2] as readonly string[];
      for (let i = 0; i + 2 < mine.length; i += 3) {
        const k = scopes.indexOf(mine[i]!);
        if (k >= 0) (handed ??= [])[k] = true;
        this.#hand(mine[i]!, mine[i + 1]!, mine[i + 2], reply[1]);
      }
    }
    const wake = this.#myTurn(scopes, heads, handed);
    if (wake.length > 0) this.#released.next(wake);
  }

  async renew(lease: ScopeLease): Promise<boolean> {
    try {
      const n = await this.#run(
        "renew",
        lease.scopes.map((s) => this.#leaseKey(s)),
        [lease.id, String(this.leaseMs), String(this.#idleTtlMs)],
      );
      return Number(n) === lease.scopes.length;
    } catch (error) {
      throw RedisScopesError.from("renew", lease.scopes, error);
    }
  }

  async publishBackoff(backoff: Omit<SharedBackoffMessage, "type" | "from">): Promise<void> {
    const message: SharedBackoffMessage = {
      type: "backoff",
      from: this.processId,
      scope: backoff.scope,
      level: backoff.level,
      delayMs: backoff.delayMs,
      cause: backoff.cause,
      hold: backoff.hold,
    };
    const holdMs = backoff.hold !== undefined && backoff.hold.ms > 0 ? backoff.hold.ms : 0;
    try {
      await this.#run("publish", [this.#stateKey(backoff.scope)], [
        holdMs.toFixed(3),
        String(this.#idleTtlMs),
        this.#channel,
        JSON.stringify(message),
      ]);
    } catch (error) {
      throw RedisScopesError.from("publish", [backoff.scope], error);
    }
  }

  async close(): Promise<void> {
    const sub = this.#subscriber;
    this.#subscriber = undefined;
    this.#messages.complete();
    this.#released.complete();
    this.#handed.complete();
    this.#backoffs.complete();
    if (sub === undefined) return;
    try {
      await sub.close();
    } catch {
      sub.destroy(); // already broken: nothing to wait for
    }
  }
}
