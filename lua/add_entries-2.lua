--[[
  Add executions to ONE tenant's queue of one delay-queue shard and index the tenant in that
  shard's tenants set, in one step: an entry is never left in a queue whose tenant no pop finds
  (two commands could be split by a broken connection or a failover). Both keys carry the
  shard's {hash tag}, so on a Redis Cluster they live in one slot.

  The tenant's score is set to at most its queue's earliest score after the add (ZADD LT: it
  only moves earlier), so it may be early, never late (pop_due-4.lua fixes an early one). Taking
  the queue's head, not only the added scores, also re-indexes a tenant whose index was lost.

  KEYS[1]  tenants: sorted set of the shard, member = tenant, score = at or before its queue's
           earliest due time (ms); see pop_due-4.lua
  KEYS[2]  the tenant's queue: sorted set, member = execution id, score = due time (ms)
  ARGV[1]  the tenant (its member in KEYS[1])
  ARGV[2]  "nx": a member already queued keeps its score; "set": its score is replaced (a retry
           moves its execution to the new due time)
  ARGV[3..] score, member pairs (score: due time in whole ms since the Unix epoch)

  Returns: the number of members that were not queued before (integer)
  Errors:  "ERR add_entries: args" when ARGV[2] is neither "nx" nor "set", or ARGV[3..] is
           empty or not pairs
]]
local n = #ARGV - 2
if (ARGV[2] ~= 'nx' and ARGV[2] ~= 'set') or n < 2 or n % 2 ~= 0 then
  return redis.error_reply("ERR add_entries: args")
end
local added = 0
-- unpack() is bounded by Lua's C stack: add in chunks of 500 pairs.
for i = 3, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  if ARGV[2] == 'nx' then
    added = added + redis.call('ZADD', KEYS[2], 'NX', unpack(ARGV, i, last))
  else
    added = added + redis.call('ZADD', KEYS[2], unpack(ARGV, i, last))
  end
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #head > 0 then
  redis.call('ZADD', KEYS[1], 'LT', head[2], ARGV[1])
end
return added
