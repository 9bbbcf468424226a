--[[
  The shard drain's removal: take out of ONE tenant's queue of a retired shard the entries the
  drain has copied into their new shard, each only if its score is still the one copied (an old
  replica may have moved it meanwhile: that entry stays, and the drain copies it again, replacing
  the score it wrote), and drop the tenant from the shard's tenants set only when its queue is
  empty, in the same step, so no entry is ever left in a queue whose tenant no pop finds. Both
  keys carry the retired shard's {hash tag}.

  KEYS[1]  tenants: sorted set of the retired shard (see pop_due-4.lua)
  KEYS[2]  the tenant's queue in the retired shard: sorted set, member = execution id,
           score = due time (ms)
  ARGV[1]  the tenant (its member in KEYS[1])
  ARGV[2..] member, score pairs as copied (score in whole ms); none: only drop an empty tenant

  Returns: { how many entries were removed (integer),
             the members still queued with another score than copied (array) }
  Errors:  "ERR remove_moved: args" when ARGV[2..] is not pairs
]]
if (#ARGV - 1) % 2 ~= 0 then
  return redis.error_reply("ERR remove_moved: args")
end
local removed, moved = 0, {}
for i = 2, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[2], ARGV[i])
  if score then
    if tonumber(score) == tonumber(ARGV[i + 1]) then
      removed = removed + redis.call('ZREM', KEYS[2], ARGV[i])
    else
      moved[#moved + 1] = ARGV[i]
    end
  end
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return { removed, moved }
