--[[
  Count one API request against its token's fixed window, for the per-token rate limit. The
  counter lives in Redis so every replica counts against one limit; it expires with its window,
  so an idle token leaves nothing behind.

  KEYS[1]  counter: string, requests seen in the current window; expires when the window ends
  ARGV[1]  window length (ms, integer >= 1)

  Returns: { requests counted in this window including this one (integer),
             ms until the window ends and the count starts again (integer) }
  Errors:  "ERR count_request: window" when ARGV[1] is not a positive integer
]]
local window_ms = tonumber(ARGV[1])
if not window_ms or window_ms < 1 then
  return redis.error_reply("ERR count_request: window")
end

local count = redis.call('INCR', KEYS[1])
local reset_ms = redis.call('PTTL', KEYS[1])
-- A new counter (or one whose expiry was lost) starts its window now.
if reset_ms < 0 then
  redis.call('PEXPIRE', KEYS[1], window_ms)
  reset_ms = window_ms
end
return { count, reset_ms }
