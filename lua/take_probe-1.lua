--[[
  Circuit breakers: let one execution through an open breaker whose wait is over (half open), so
  exactly one replica probes the target. A half-open breaker whose probe went silent (its worker
  died) allows a new probe once ARGV[2] has passed. Judged by the Redis server's clock (TIME).

  KEYS[1]  breakers hash (see record_outcomes-1.lua)
  ARGV[1]  breaker key
  ARGV[2]  how long the probe may take before another is allowed (ms)

  Returns: { 1 when the caller holds the probe else 0, probe_at_ms (when the next probe may run),
             the Redis server's now (ms) }
]]
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return { 1, 0, now_ms } end  -- closed meanwhile: run it
local state, failures, opened_ms, probe_at_ms = string.match(value, '^([%a_]+)|(%d+)|(%d+)|(%d+)$')
if not state or state == 'closed' then return { 1, 0, now_ms } end
if now_ms < tonumber(probe_at_ms) then return { 0, tonumber(probe_at_ms), now_ms } end
local next_probe = now_ms + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], 'half_open|' .. failures .. '|' .. opened_ms .. '|' .. next_probe)
return { 1, next_probe, now_ms }
