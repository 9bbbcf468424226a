--[[
  Pop the due executions of ONE delay-queue shard, fairly across its tenants, judged by the Redis
  server's own clock (TIME), never a client's, so a replica with a skewed clock cannot pop early.
  Each tenant has its own queue; the due tenants (least recently served first) each get an equal
  share of the batch, and what a tenant leaves unused goes to those with more. One tenant's storm
  of 100,000 due executions therefore takes at most its share of every pop. Range and removal
  happen in one script, so two workers never pop the same member. A pop confers no ownership:
  the worker must still claim the execution in Postgres.

  Every key is declared (Redis Cluster routes by KEYS; all carry the shard's {hash tag}). The
  caller declares the tenants it expects at the head of the round: the `line` this script
  returned last time for the shard. A due tenant not declared is not served this time and keeps
  its place (first in line); `skipped` counts them, and the caller pops again declaring them.

  KEYS[1]  tenants: sorted set, member = tenant, score = at or before its queue's earliest due
           time (ms); a tenant served by this script is moved to "now", behind the due tenants
           not yet served: round robin. A tenant whose queue is empty is removed.
  KEYS[2]  epoch marker: string set by the daemon; missing means Redis lost this shard's data
  KEYS[3..] the queue of tenant ARGV[3..] (same order): sorted set, member = execution id,
           score = due time (ms since the Unix epoch)
  ARGV[1]  most members to pop (integer, 1..5000)
  ARGV[2]  most tenants to return in `line` (integer, 1..1000)
  ARGV[3..] tenant names, one per KEYS[3..]

  Returns: { popped ids (array),
             the tenant of each popped id (array, same order),
             the earliest tenant score left (ms; may be early, never late) or false when none,
             the Redis server's now (ms),
             the epoch marker's value or false when it is missing,
             line: the first tenants of the round after this pop (array, at most ARGV[2]),
             skipped: due tenants not served because their key was not declared (integer) }
  Errors:  "ERR pop_due: limit" when ARGV[1] is not an integer in 1..5000 or ARGV[2] not in 1..1000
           "ERR pop_due: keys" when KEYS[3..] and ARGV[3..] differ in length
]]
local limit = tonumber(ARGV[1])
local line_max = tonumber(ARGV[2])
if not limit or limit < 1 or limit > 5000 or not line_max or line_max < 1 or line_max > 1000 then
  return redis.error_reply("ERR pop_due: limit")
end
if #KEYS ~= #ARGV then
  return redis.error_reply("ERR pop_due: keys")
end
local declared = {}
for i = 3, #KEYS do declared[ARGV[i]] = KEYS[i] end

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local ids, owners = {}, {}
local function take(tenant, count)
  local key = declared[tenant]
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
local serving, skipped = {}, 0
for _, tenant in ipairs(due) do
  if declared[tenant] then serving[#serving + 1] = tenant else skipped = skipped + 1 end
end
if #serving > 0 then
  local share = math.max(1, math.floor(limit / #serving))
  local hungry, served = {}, {}
  for _, tenant in ipairs(serving) do
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
    local head = redis.call('ZRANGE', declared[tenant], 0, 0, 'WITHSCORES')
    if #head == 0 then
      redis.call('ZREM', KEYS[1], tenant)
    else
      redis.call('ZADD', KEYS[1], math.max(tonumber(head[2]), now_ms), tenant)
    end
  end
end

local first = redis.call('ZRANGE', KEYS[1], 0, line_max - 1, 'WITHSCORES')
local line, next_due = {}, false
for i = 1, #first, 2 do line[#line + 1] = first[i] end
if #first > 0 then next_due = first[2] end

return { ids, owners, next_due, now_ms, redis.call('GET', KEYS[2]), line, skipped }
