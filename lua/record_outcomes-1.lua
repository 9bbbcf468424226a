--[[
  Circuit breakers: fold a batch of attempt outcomes into each breaker's state, atomically, so
  replicas share one state. Judged by the Redis server's clock (TIME).

  States: closed (counting consecutive failures) -> open after ARGV[1] of them (nothing runs
  until probe_at_ms) -> half_open (one probe let through by take_probe) -> closed when any
  attempt succeeds, or open again (for ARGV[2] ms more) when the probe fails.

  KEYS[1]  breakers hash: field = breaker key, value = "state|failures|opened_ms|probe_at_ms";
           a closed breaker with no failures is deleted (absent = closed)
  ARGV[1]  consecutive failures that open a breaker (integer >= 1)
  ARGV[2]  how long a breaker stays open before a probe may run (ms)
  ARGV[3..] triples per breaker key, in outcome order: key, saw_success (0 | 1: some attempt in
           the batch succeeded), trailing_failures (failures after the last success, or all)

  Returns: flattened { key, new state, ... } for breakers whose state changed
  Errors:  "ERR record_outcomes: args" when ARGV is malformed
]]
local threshold = tonumber(ARGV[1])
local open_ms = tonumber(ARGV[2])
if not threshold or threshold < 1 or not open_ms or (#ARGV - 2) % 3 ~= 0 then
  return redis.error_reply("ERR record_outcomes: args")
end
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local changed = {}
for i = 3, #ARGV, 3 do
  local key, saw_success, trailing = ARGV[i], ARGV[i + 1] == '1', tonumber(ARGV[i + 2])
  local state, failures, opened_ms, probe_at_ms = 'closed', 0, 0, 0
  local value = redis.call('HGET', KEYS[1], key)
  if value then
    local s, f, o, p = string.match(value, '^([%a_]+)|(%d+)|(%d+)|(%d+)$')
    if s then state, failures, opened_ms, probe_at_ms = s, tonumber(f), tonumber(o), tonumber(p) end
  end
  local before = state
  if saw_success then
    state, failures = 'closed', trailing  -- the target answered: failures after it count afresh
  else
    failures = failures + trailing
  end
  if trailing > 0 and (state == 'half_open' or (state == 'closed' and failures >= threshold)) then
    state, opened_ms, probe_at_ms = 'open', now_ms, now_ms + open_ms
  end
  if state == 'closed' and failures == 0 then
    redis.call('HDEL', KEYS[1], key)
  else
    redis.call('HSET', KEYS[1], key, state .. '|' .. failures .. '|' .. opened_ms .. '|' .. probe_at_ms)
  end
  if state ~= before then
    table.insert(changed, key)
    table.insert(changed, state)
  end
end
return changed
