--[[
  Pop the executions that are due, fairly across tenants, judged by the Redis server's own clock
  (TIME), never a client's, so a replica with a skewed clock cannot pop early. Each tenant has its
  own delay queue; the due tenants (at most ARGV[1] of them, least recently served first) each get
  an equal share of the batch, and what a tenant leaves unused goes to those with more. One
  tenant's storm of 100,000 due executions therefore takes at most its share of every pop.
  Range and removal happen in one script, so two workers never pop the same member. A pop
  confers no ownership: the worker must still claim the execution in Postgres.

  Tenant queue keys are ARGV[2] .. tenant name: they carry the same {hash tag} as KEYS, so every
  key of a deployment lives in one Redis Cluster slot.

  KEYS[1]  tenants: sorted set, member = tenant, score = at or before its queue's earliest due
           time (ms); a tenant served by this script is moved to "now", behind the due tenants
           not yet served: round robin. A tenant whose queue is empty is removed.
  KEYS[2]  epoch marker: string set by the daemon; missing means Redis lost its data
  KEYS[3]  circuit breakers: hash, field = breaker key, value = "state|failures|opened_ms|probe_at_ms";
           holds only breakers that are open, half open or counting failures (empty when all is well)
  ARGV[1]  most members to pop (integer, 1..5000)
  ARGV[2]  tenant queue key prefix: "{prefix}:queue:"; sorted set per tenant, member = execution id,
           score = due time (ms since the Unix epoch)

  Returns: { popped ids (array),
             the earliest tenant score left (ms; may be early, never late) or false when none,
             the Redis server's now (ms),
             the epoch marker's value or false when it is missing,
             the breakers hash flattened (field, value, ...): the worker parks what they guard,
             the tenant of each popped id (array, same order) }
  Errors:  "ERR pop_due: limit" when ARGV[1] is not an integer in 1..5000
]]
local limit = tonumber(ARGV[1])
if not limit or limit < 1 or limit > 5000 then
  return redis.error_reply("ERR pop_due: limit")
end
local prefix = ARGV[2]

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local ids, owners = {}, {}
local function take(tenant, count)
  local key = prefix .. tenant
  local got = redis.call('ZRANGEBYSCORE', key, '-inf', now_ms, 'LIMIT', 0, count)
  -- unpack() is bounded by Lua's C stack: remove in chunks.
  for i = 1, #got, 500 do
    redis.call('ZREM', key, unpack(got, i, math.min(i + 499, #got)))
  end
  for i = 1, #got do
    ids[#ids + 1] = got[i]
    owners[#owners + 1] = tenant
  end
  return #got
end

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, limit)
if #due > 0 then
  local share = math.max(1, math.floor(limit / #due))
  local hungry, served = {}, {}
  for _, tenant in ipairs(due) do
    if #ids >= limit then break end  -- the rest keep their place: first in line next pop
    served[#served + 1] = tenant
    if take(tenant, math.min(share, limit - #ids)) == share then hungry[#hungry + 1] = tenant end
  end
  -- Shares left unused (tenants with less due) go to the tenants that had more.
  for _, tenant in ipairs(hungry) do
    if #ids >= limit then break end
    take(tenant, limit - #ids)
  end
  for _, tenant in ipairs(served) do
    local head = redis.call('ZRANGE', prefix .. tenant, 0, 0, 'WITHSCORES')
    if #head == 0 then
      redis.call('ZREM', KEYS[1], tenant)
    else
      redis.call('ZADD', KEYS[1], math.max(tonumber(head[2]), now_ms), tenant)
    end
  end
end

local next_due = false
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then next_due = first[2] end

local epoch = redis.call('GET', KEYS[2])
return { ids, next_due, now_ms, epoch, redis.call('HGETALL', KEYS[3]), owners }
