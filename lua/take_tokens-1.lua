--[[
  Rate limits: take one token per bucket for each request of a claim batch, all or nothing per
  request, atomically, judged by the Redis server's clock (TIME), so every replica counts against
  one limit. A bucket allows `limit` starts per `window`, refilled continuously, burst `limit`.
  The same arithmetic as schedulerd/core/rate.py take() (GCRA): a bucket is its theoretical
  arrival time tat (ms); a token is free when tat + window / limit - window <= now, and taking it
  moves tat to max(tat, now) + window / limit. A refused request takes nothing from any of its
  buckets and books the instant its tokens are due (booked, beside tat): the next one refused, in
  this call or a later one, from any replica, gets the instant after it, so a backlog comes back
  one token apart rather than all at once. A grant is judged by tat alone: a claim coming back at
  its booked instant finds its token; one that took a token booked for another displaces that one,
  which books again.

  Entries never outlive their use: a bucket whose booked instant is past is full, which is what an
  absent one means, so the hash expires when its last bucket is full again, and each call deletes
  the full buckets among a few fields of the hash (HSCAN from a cursor kept in field "#sweep"), so
  buckets nobody takes from any more (a host no longer called) go while others stay busy.

  KEYS[1]  buckets hash ({prefix}:tokens): field = bucket key ("task:<type>", "host:<host>"),
           value = "tat|booked" (ms since the Unix epoch, Redis clock, decimals)
  ARGV[1]  the first request's bucket count n (integer >= 1), then n times: bucket key, limit
           (starts per window, integer >= 1), window (ms, integer >= 1), cost (tokens, 1..limit);
           then the next request's count and buckets, and so on

  Returns: { Redis now (ms), then per request: 1 granted | 0 refused, the instant it may start
             (ms, Redis clock; now when granted) }
  Errors:  "ERR take_tokens: args" when ARGV is malformed
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000

local tats, booked, written = {}, {}, {}
local result = { math.floor(now) }
local i = 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  if not n or n < 1 or i + 4 * n > #ARGV then return redis.error_reply('ERR take_tokens: args') end
  local granted, at = true, now
  local seen = {}
  for b = 0, n - 1 do
    local j = i + 1 + 4 * b
    local key, limit, window, cost = ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
    if not limit or limit < 1 or not window or window < 1 or not cost or cost < 1 or cost > limit then
      return redis.error_reply('ERR take_tokens: args')
    end
    if tats[key] == nil then
      local tat, held = string.match(redis.call('HGET', KEYS[1], key) or '', '^([%d.]+)|([%d.]+)$')
      tats[key], booked[key] = tonumber(tat) or now, tonumber(held) or now
    end
    local step = window / limit * cost
    local tat = math.max(tats[key], now)
    local held = math.max(booked[key], tat)
    if tat + step - window > now then granted = false end
    at = math.max(at, held + step - window)
    seen[#seen + 1] = { key, step, tat, held }
  end
  for _, s in ipairs(seen) do
    local key, step, tat, held = s[1], s[2], s[3], s[4]
    if granted then
      tats[key], booked[key] = tat + step, math.max(held, tat + step)
    else
      tats[key], booked[key] = tat, math.max(held, at) + step
    end
    written[key] = true
  end
  result[#result + 1] = granted and 1 or 0
  result[#result + 1] = granted and math.floor(now) or math.ceil(at)
  i = i + 1 + 4 * n
end

local full_in = 0  -- ms until the last bucket written is full again
for key in pairs(written) do
  redis.call('HSET', KEYS[1], key, string.format('%.3f|%.3f', tats[key], booked[key]))
  full_in = math.max(full_in, math.ceil(booked[key] - now))
end
if full_in > 0 and redis.call('PTTL', KEYS[1]) < full_in then
  redis.call('PEXPIRE', KEYS[1], full_in)
end

local cursor = redis.call('HGET', KEYS[1], '#sweep') or '0'
local scan = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 16)
for k = 1, #scan[2], 2 do
  local field = scan[2][k]
  local held = tonumber(string.match(scan[2][k + 1], '|([%d.]+)$') or '')
  if field ~= '#sweep' and not written[field] and (held or 0) <= now then
    redis.call('HDEL', KEYS[1], field)
  end
end
if scan[1] == '0' then
  redis.call('HDEL', KEYS[1], '#sweep')
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], '#sweep', scan[1])
end
return result
