--[[
  Pop the due executions of ONE delay-queue shard, fairly across its tenants and, within a
  tenant's share, highest priority first, judged by the Redis server's own clock (TIME), never a
  client's, so a replica with a skewed clock cannot pop early.
  Each tenant has its own queue, split into bands by priority (core/priority.py): the band of
  priority 5 is named after the tenant, another band "<tenant>#<priority>" (a tenant's name has
  no '#'). The due tenants (least recently served first) each get an equal share of the batch,
  and what a tenant leaves unused goes to those with more; a tenant's share is taken from its due
  bands highest priority first, each band in due order. So a not-yet-due member never goes before
  a due one, and one tenant's storm of 100,000 due executions takes at most its share of every
  pop. With every execution at priority 5 each tenant is one band and the pop is what it was
  before bands. Range and removal happen in one script, so two workers never pop the same
  member. A pop confers no ownership: the worker must still claim the execution in Postgres.

  Every key is declared (Redis Cluster routes by KEYS; all carry the shard's {hash tag}). The
  caller declares the bands it expects at the head of the round: the `line` this script returned
  last time for the shard. A due tenant with a due band not declared is not served this time and
  keeps its place (first in line), so a new high band is never passed over for a lower one;
  `skipped` counts those bands, and the caller pops again declaring them.

  KEYS[1]  tenants: sorted set, member = band (a tenant's name, or "<tenant>#<priority>"), score =
           at or before that band's earliest due time (ms); a band served by this script is moved
           to "now", behind the due bands not yet served: round robin. A band whose queue is
           empty is removed.
  KEYS[2]  epoch marker: string set by the daemon; missing means Redis lost this shard's data
  KEYS[3..] the queue of band ARGV[3..] (same order): sorted set, member = execution id,
           score = due time (ms since the Unix epoch)
  ARGV[1]  most members to pop (integer, 1..5000)
  ARGV[2]  most bands to return in `line` (integer, 1..1000)
  ARGV[3..] band names, one per KEYS[3..]

  Returns: { popped ids (array),
             the band of each popped id (array, same order; its tenant and priority by the name),
             the earliest band score left (ms; may be early, never late) or false when none,
             the Redis server's now (ms),
             the epoch marker's value or false when it is missing,
             line: the first bands of the round after this pop (array, at most ARGV[2]),
             skipped: due bands not served because their key was not declared (integer) }
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
-- "acme#9" -> "acme", 9; "acme" -> "acme", 5 (core/priority.py of_band).
local function tenant_of(band)
  local tenant, digit = string.match(band, '^(.*)#(%d)$')
  if tenant then return tenant, tonumber(digit) end
  return band, 5
end

-- The declared bands; and, for tenants with a band other than 5 declared, all of theirs.
local declared, declared_of = {}, {}
for i = 3, #KEYS do
  local band = ARGV[i]
  declared[band] = KEYS[i]
  if string.find(band, '#', 1, true) then
    local tenant = tenant_of(band)
    local list = declared_of[tenant] or {}
    list[#list + 1] = band
    declared_of[tenant] = list
  end
end

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local ids, owners = {}, {}
local function take_band(band, count)
  local key = declared[band]
  local got = redis.call('ZRANGEBYSCORE', key, '-inf', now_ms, 'LIMIT', 0, count)
  -- unpack() is bounded by Lua's C stack: remove in chunks.
  for i = 1, #got, 500 do
    redis.call('ZREM', key, unpack(got, i, math.min(i + 499, #got)))
  end
  for i = 1, #got do
    ids[#ids + 1] = got[i]
    owners[#owners + 1] = band
  end
  return #got
end

-- A tenant's due bands, highest priority first: take from each in turn until count is met.
local function take(bands, count)
  local taken = 0
  for _, band in ipairs(bands) do
    if taken >= count then break end
    taken = taken + take_band(band, count - taken)
  end
  return taken
end

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, limit)
-- Group the due bands by tenant, tenants in the order of their first due band.
local order, bands_of, priority_of, undeclared, skipped = {}, {}, {}, {}, 0
for _, band in ipairs(due) do
  local tenant, priority = tenant_of(band)
  if not bands_of[tenant] then
    bands_of[tenant] = {}
    order[#order + 1] = tenant
  end
  local bands = bands_of[tenant]
  bands[#bands + 1] = band
  priority_of[band] = priority
  if not declared[band] then
    undeclared[tenant] = true
    skipped = skipped + 1
  end
end
local serving = {}
for _, tenant in ipairs(order) do
  if not undeclared[tenant] then
    local bands = bands_of[tenant]
    -- The due-tenant range above is cut at `limit` bands: a tenant's other due bands may lie
    -- past the cut. Its declared ones are looked up, so its share still goes highest first
    -- (with every execution at 5 no tenant has any: nothing more is read).
    local others = declared_of[tenant]
    if others then
      if declared[tenant] then others[#others + 1] = tenant end
      for _, band in ipairs(others) do
        if not priority_of[band] then
          local score = redis.call('ZSCORE', KEYS[1], band)
          if score and tonumber(score) <= now_ms then
            bands[#bands + 1] = band
            priority_of[band] = select(2, tenant_of(band))
          end
        end
      end
    end
    if #bands > 1 then
      table.sort(bands, function(a, b) return priority_of[a] > priority_of[b] end)
    end
    serving[#serving + 1] = tenant
  end
end
if #serving > 0 then
  local share = math.max(1, math.floor(limit / #serving))
  local hungry, served = {}, {}
  for _, tenant in ipairs(serving) do
    if #ids >= limit then break end  -- the rest keep their place: first in line next pop
    served[#served + 1] = tenant
    if take(bands_of[tenant], math.min(share, limit - #ids)) == share then hungry[#hungry + 1] = tenant end
  end
  -- Shares left unused (tenants with less due) go to the tenants that had more.
  for _, tenant in ipairs(hungry) do
    if #ids >= limit then break end
    take(bands_of[tenant], limit - #ids)
  end
  for _, tenant in ipairs(served) do
    for _, band in ipairs(bands_of[tenant]) do
      local head = redis.call('ZRANGE', declared[band], 0, 0, 'WITHSCORES')
      if #head == 0 then
        redis.call('ZREM', KEYS[1], band)
      else
        redis.call('ZADD', KEYS[1], math.max(tonumber(head[2]), now_ms), band)
      end
    end
  end
end

local first = redis.call('ZRANGE', KEYS[1], 0, line_max - 1, 'WITHSCORES')
local line, next_due = {}, false
for i = 1, #first, 2 do line[#line + 1] = first[i] end
if #first > 0 then next_due = first[2] end

return { ids, owners, next_due, now_ms, redis.call('GET', KEYS[2]), line, skipped }
