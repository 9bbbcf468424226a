--[[
  Pop the executions that are due, judged by the Redis server's own clock (TIME), never a
  client's, so a replica with a skewed clock cannot pop early. Range and removal happen in one
  script, so two workers never pop the same member. A pop confers no ownership: the worker must
  still claim the execution in Postgres.

  KEYS[1]  delay queue: sorted set, member = execution id, score = due time (ms since Unix epoch)
  KEYS[2]  epoch marker: string set by the daemon; missing means Redis lost its data
  KEYS[3]  circuit breakers: hash, field = breaker key, value = "state|failures|opened_ms|probe_at_ms";
           holds only breakers that are open, half open or counting failures (empty when all is well)
  ARGV[1]  most members to pop (integer, 1..5000)

  Returns: { popped ids (array, earliest first),
             score of the earliest member left (ms) or false when the queue is empty,
             the Redis server's now (ms),
             the epoch marker's value or false when it is missing,
             the breakers hash flattened (field, value, ...): the worker parks what they guard }
  Errors:  "ERR pop_due: limit" when ARGV[1] is not an integer in 1..5000
]]
local limit = tonumber(ARGV[1])
if not limit or limit < 1 or limit > 5000 then
  return redis.error_reply("ERR pop_due: limit")
end

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, limit)
-- unpack() is bounded by Lua's C stack: remove in chunks.
for i = 1, #ids, 500 do
  redis.call('ZREM', KEYS[1], unpack(ids, i, math.min(i + 499, #ids)))
end

local next_due = false
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #head > 0 then next_due = head[2] end

local epoch = redis.call('GET', KEYS[2])
return { ids, next_due, now_ms, epoch, redis.call('HGETALL', KEYS[3]) }
