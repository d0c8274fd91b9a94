/**
 * The Lua scripts and key names of the Redis-backed request queue
 * (`redis_request_queue.ts`). Private: their shapes change with the queue.
 *
 * Keys of a job, all under one hash tag (`{job1:}q:...`) so a Redis Cluster
 * keeps a job on one slot (the scripts reach the per-scope-set keys they find
 * in `ready`, which only works when every key is on the node the script runs
 * on: the hash tag is what makes that so):
 *
 * - `seq`: the job's request counter (its existence says the job was seeded).
 * - `req`: hash, id -> record `[set key, score, serialized request]`.
 * - `ready`: zset, scope-set key -> score of its best queued request.
 * - `set:<scope-set key>`: zset, id -> score (-priority); ties go by id,
 *   which encodes start/regular and the enqueue order (LIFO or FIFO).
 * - `leases`: zset, id -> expiry (Redis server time, ms).
 * - `takes`: hash, id -> attempts: times handed out, and retries within a
 *   take (kept across expired leases).
 * - `seen`: set of compact fingerprints (dedupe).
 * - `counts`: hash: queued, done, failed, filtered, limited, reclaimed.
 * - `scopes`: hash, `d:<set key>` / `f:<set key>` -> done / failed per scope set.
 * - `later`: zset, id -> when (Redis server time, ms) a request held for its
 *   `meta.throttlingDelayMs` goes into its scope set (queued, not takeable).
 *
 * @module
 */
import { type RedisCommandSender, runScript, scriptSha } from "./_redis_script.ts";
import type { QueueScopes } from "../queue/request_queue.ts";

/** The key base of a job: the prefix inside a hash tag, unless it already has one. */
export function queueKeyBase(prefix: string): string {
  return /\{[^}]+\}/.test(prefix) ? `${prefix}q:` : `{${prefix}}q:`;
}

/**
 * A scope set's key: its scopes sorted, joined by NUL; when the request
 * carries quota amounts, SOH and the amounts in the same order (NUL between,
 * '' for a scope without). Requests of one set then share their amounts, so
 * the head a take checks against the worker's throttler has the amounts of
 * every request behind it (as `RequestQueue` checks its head's amounts).
 * A set without amounts keeps the key of a job queued before amounts were
 * part of it.
 *
 * @param s The request's scopes and amounts.
 * @returns The key.
 */
export function scopeSetKey(s: QueueScopes): string {
  const { scopes, amounts } = s;
  const some = amounts !== undefined && amounts.some((a) => a !== undefined && a > 0);
  if (scopes.length === 1) return some ? `${scopes[0]!}\u0001${amounts![0]}` : scopes[0]!;
  const order = scopes.map((_, i) => i).sort((a, b) => scopes[a]! < scopes[b]! ? -1 : 1);
  const names = order.map((i) => scopes[i]!).join("\u0000");
  return some ? `${names}\u0001${order.map((i) => amounts![i] ?? "").join("\u0000")}` : names;
}

/**
 * The scopes and amounts of a scope set's key ({@link scopeSetKey}).
 *
 * @param key A scope set's key.
 * @returns Its scopes, and its amounts when it has them.
 */
export function parseScopeSetKey(key: string): QueueScopes {
  const soh = key.indexOf("\u0001");
  if (soh < 0) return { scopes: key.split("\u0000") };
  return {
    scopes: key.slice(0, soh).split("\u0000"),
    amounts: key.slice(soh + 1).split("\u0000").map((a) => a === "" ? undefined : Number(a)),
  };
}

/** The fixed keys every script is given, in this order. */
export function queueKeys(base: string): string[] {
  return ["seq", "req", "ready", "leases", "takes", "seen", "counts", "scopes", "later"].map((k) =>
    base + k
  );
}

const PRELUDE = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local function fmt(x) return string.format('%.3f', x) end
local T = ARGV[1]
local SEQ, REQ, READY, LEASES, TAKES, SEEN, COUNTS, SCOPES, LATER =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local function setKey(s) return T .. 'set:' .. s end
-- A scope set's place in READY is the score of its best request, or none.
local function rehead(s)
  local head = redis.call('ZRANGE', setKey(s), 0, 0, 'WITHSCORES')
  if head[1] then redis.call('ZADD', READY, head[2], s) else redis.call('ZREM', READY, s) end
end
-- Back into its scope set, at its old place (an expired lease, an unsent request).
local function requeue(id, rec)
  local r = cjson.decode(rec)
  redis.call('ZADD', setKey(r[1]), r[2], id)
  redis.call('ZADD', READY, 'LT', r[2], r[1])
  redis.call('HINCRBY', COUNTS, 'queued', 1)
end
`;

/**
 * ARGV: key base, the job's most requests in all ('' for no limit), then per
 * request: fingerprint ('' for none), scope-set key, score, kind ('s' start,
 * 'f' FIFO, 'r' LIFO), record, delay ms ('' for none: a request with a delay
 * waits in LATER until then, queued but not takeable, as `RequestQueue`
 * holds it aside). Answers 1 (added), 0 (a duplicate) or 2 (past
 * the limit: dropped, its fingerprint not marked seen) per request. `seq`
 * counts the requests ever added, so the limit holds across workers; start
 * requests count but are never dropped (the input is never dropped).
 */
const ENQUEUE = PRELUDE + `local added = {}
local n, dup, over = 0, 0, 0
local limit = tonumber(ARGV[2])
local count = limit and tonumber(redis.call('GET', SEQ) or '0') or 0
local i = 3
while i <= #ARGV do
  local fp, s, score, kind, rec = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local delay = ARGV[i + 5]
  i = i + 6
  if limit and kind ~= 's' and count >= limit and (fp == '' or redis.call('SISMEMBER', SEEN, fp) == 0) then
    over = over + 1
    added[#added + 1] = 2
  elseif fp ~= '' and redis.call('SADD', SEEN, fp) == 0 then
    dup = dup + 1
    added[#added + 1] = 0
  else
    local seq = redis.call('INCR', SEQ)
    local id
    if kind == 's' then id = '1' .. string.format('%015d', seq)
    elseif kind == 'f' then id = '0' .. string.format('%015d', seq)
    else id = '0' .. string.format('%015d', 999999999999999 - seq) end
    redis.call('HSET', REQ, id, rec)
    if delay ~= '' then
      redis.call('ZADD', LATER, fmt(now + tonumber(delay)), id)
    else
      redis.call('ZADD', setKey(s), score, id)
      redis.call('ZADD', READY, 'LT', score, s)
    end
    n = n + 1
    count = count + 1
    added[#added + 1] = 1
  end
end
if n > 0 then redis.call('HINCRBY', COUNTS, 'queued', n) end
if dup > 0 then redis.call('HINCRBY', COUNTS, 'filtered', dup) end
if over > 0 then redis.call('HINCRBY', COUNTS, 'limited', over) end
return added
`;

/**
 * ARGV: key base, lease ms, most to take, heads wanted, this take's offset,
 * the next take's offset, then the scope-set keys this worker's throttler
 * blocks. Expired leases go back to the queue first. Then at most one
 * request per scope set, from the window of READY at this take's offset,
 * skipping the blocked ones, each leased until now + lease ms (server clock).
 * Requests whose delay has passed go from LATER into their scope sets first.
 * Answers {taken, queued, leased, job exists, the window at the next take's
 * offset (the heads its blocked sets are picked from), {id, record, takes}...,
 * ms until LATER's next request is due (-1: none)}.
 *
 * The window: when more scope sets share the best priority than a take looks
 * at, it starts at the offset among them (each worker turns its own), so
 * equal sets are served in turn and workers spread over them; otherwise it
 * is READY's first sets in order.
 */
const TAKE = PRELUDE + `local leaseMs = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local nheads = tonumber(ARGV[4])
local offNow, offNext = tonumber(ARGV[5]), tonumber(ARGV[6])
local ex = {}
for i = 7, #ARGV do ex[ARGV[i]] = true end
local nex = #ARGV - 6
local function window(off, span)
  local top = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
  if not top[1] then return {} end
  local b = top[2]
  local n = redis.call('ZCOUNT', READY, b, b)
  if n <= span then return redis.call('ZRANGE', READY, 0, span - 1) end
  local w = redis.call('ZRANGEBYSCORE', READY, b, b, 'LIMIT', off % n, span)
  if #w < span then
    for _, s in ipairs(redis.call('ZRANGEBYSCORE', READY, b, b, 'LIMIT', 0, span - #w)) do
      w[#w + 1] = s
    end
  end
  return w
end
local expired = redis.call('ZRANGEBYSCORE', LEASES, '-inf', fmt(now), 'LIMIT', 0, 256)
for _, id in ipairs(expired) do
  redis.call('ZREM', LEASES, id)
  local rec = redis.call('HGET', REQ, id)
  if rec then
    requeue(id, rec)
    redis.call('HINCRBY', COUNTS, 'reclaimed', 1)
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', LATER, '-inf', fmt(now), 'LIMIT', 0, 256)) do
  redis.call('ZREM', LATER, id)
  local rec = redis.call('HGET', REQ, id)
  if rec then
    local r = cjson.decode(rec)
    redis.call('ZADD', setKey(r[1]), r[2], id)
    redis.call('ZADD', READY, 'LT', r[2], r[1])
  end
end
local out = {}
local taken = 0
if want > 0 then
  local cands = window(offNow, nex + want)
  for _, s in ipairs(cands) do
    if taken >= want then break end
    if not ex[s] then
      local p = redis.call('ZPOPMIN', setKey(s))
      if p[1] then
        local id = p[1]
        local rec = redis.call('HGET', REQ, id)
        if rec then
          redis.call('ZADD', LEASES, fmt(now + leaseMs), id)
          out[#out + 1] = {id, rec, redis.call('HINCRBY', TAKES, id, 1)}
          taken = taken + 1
        end
      end
      rehead(s)
    end
  end
  if taken > 0 then redis.call('HINCRBY', COUNTS, 'queued', -taken) end
end
local queued = tonumber(redis.call('HGET', COUNTS, 'queued') or '0')
local heads = window(offNext, nex + nheads)
local due = redis.call('ZRANGE', LATER, 0, 0, 'WITHSCORES')
local dueIn = '-1'
if due[2] then dueIn = fmt(math.max(0, tonumber(due[2]) - now)) end
return {taken, queued, redis.call('ZCARD', LEASES), redis.call('EXISTS', SEQ), heads, out, dueIn}
`;

/**
 * ARGV: key base, then per request: id, 'd' (done) or 'f' (failed),
 * scope-set key. A request whose lease expired and went back to the queue is
 * taken out of it again: a finished request is never handed out again.
 * Answers the number of requests finished now (an ack repeated after a lost
 * reply counts nothing).
 */
const ACK = PRELUDE + `local done, failed = 0, 0
local i = 2
while i <= #ARGV do
  local id, how, s = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  if redis.call('HDEL', REQ, id) == 1 then
    redis.call('HDEL', TAKES, id)
    if redis.call('ZREM', LEASES, id) == 0 and redis.call('ZREM', setKey(s), id) == 1 then
      redis.call('HINCRBY', COUNTS, 'queued', -1)
      rehead(s)
    end
    if how == 'f' then
      failed = failed + 1
      redis.call('HINCRBY', SCOPES, 'f:' .. s, 1)
    else
      done = done + 1
      redis.call('HINCRBY', SCOPES, 'd:' .. s, 1)
    end
  end
end
if done > 0 then redis.call('HINCRBY', COUNTS, 'done', done) end
if failed > 0 then redis.call('HINCRBY', COUNTS, 'failed', failed) end
return done + failed
`;

/** ARGV: key base, then ids. Leased requests go back to the queue, their take not counted. */
const UNSENT = PRELUDE + `local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('ZREM', LEASES, id) == 1 then
    local rec = redis.call('HGET', REQ, id)
    if rec then
      requeue(id, rec)
      redis.call('HINCRBY', TAKES, id, -1)
      n = n + 1
    end
  end
end
return n
`;

/**
 * ARGV: key base, then ids. Each is being attempted again within its take (a
 * retry): its `takes` count goes up, so a worker that takes it after this
 * one died counts the attempts made (not for a request already done).
 */
const TRIED = PRELUDE + `local n = 0
for i = 2, #ARGV do
  if redis.call('HEXISTS', REQ, ARGV[i]) == 1 then
    redis.call('HINCRBY', TAKES, ARGV[i], 1)
    n = n + 1
  end
end
return n
`;

/** ARGV: key base, lease ms, then ids. Pushes their leases on; answers the ids no longer leased. */
const RENEW = PRELUDE + `local leaseMs = tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', LEASES, ARGV[i]) then
    redis.call('ZADD', LEASES, 'XX', fmt(now + leaseMs), ARGV[i])
  else
    lost[#lost + 1] = ARGV[i]
  end
end
return lost
`;

/** The scripts by name. */
export const QUEUE_SCRIPTS = {
  enqueue: ENQUEUE,
  take: TAKE,
  ack: ACK,
  unsent: UNSENT,
  tried: TRIED,
  renew: RENEW,
} as const;

/** A script's name. */
export type QueueScriptName = keyof typeof QUEUE_SCRIPTS;

const SHAS = new Map<QueueScriptName, string>(
  (Object.keys(QUEUE_SCRIPTS) as QueueScriptName[]).map((name) => [
    name,
    scriptSha(QUEUE_SCRIPTS[name]),
  ]),
);

/**
 * Run a queue script by its SHA, sending its text once when Redis does not
 * have it (first use, `SCRIPT FLUSH`, a restarted Redis).
 */
export function runQueueScript(
  client: RedisCommandSender,
  name: QueueScriptName,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  return runScript(client, SHAS.get(name)!, QUEUE_SCRIPTS[name], keys, args);
}
