-- tokenplane admission counters: one script, one call per operation, atomic
-- across every scope of a request. Mirrors tokenplane/admission/book.py exactly
-- (same raw answers). KEYS[1] reservations hash, KEYS[2] deadlines zset,
-- KEYS[3] tenant clock; every other key is built from the payload's base "b",
-- which carries the tenant hash tag {t:<tenant>} so all keys share one slot.
-- ARGV[1] = op, ARGV[2] = JSON payload {b, rid, now, ttl, ls, v, l} (renew:
-- {b, now, ls, rids}). Time is the caller's `now` (ms), clamped so a tenant's clock
-- never runs backwards. Gauge units are leases: zset `ls` holds rid -> lease
-- deadline; a lease past its deadline lapses (its gauge units are given back) when
-- the tenant's counters are next read; `renew` extends leases (or takes the units
-- of a lapsed one again while its reservation is open).
local RES, EXP, CLK = KEYS[1], KEYS[2], KEYS[3]
local op = ARGV[1]
local p = cjson.decode(ARGV[2])
local base = p.b
local LS = base .. 'ls'

local function I(x) return string.format('%d', x) end

local function amount(v, u)
  if u == 4 then return v[2] + v[3] end
  if u == 5 then return v[4] end
  return v[u]
end

local function clock(now)
  local last = tonumber(redis.call('GET', CLK))
  if last and now < last then return last end
  redis.call('SET', CLK, I(now), 'PX', 3000000000)
  return now
end

-- sliding windows: zset member -> time, hash member -> amount and '_t' -> total
local function wprune(key, now, W)
  local zk, ak = base .. 'w:' .. key, base .. 'wa:' .. key
  local total = tonumber(redis.call('HGET', ak, '_t')) or 0
  while true do
    local old = redis.call('ZRANGEBYSCORE', zk, '-inf', I(now - W), 'LIMIT', 0, 256)
    if #old == 0 then break end
    local amts = redis.call('HMGET', ak, unpack(old))
    for i = 1, #old do total = total - (tonumber(amts[i]) or 0) end
    redis.call('HDEL', ak, unpack(old))
    redis.call('ZREM', zk, unpack(old))
    redis.call('HSET', ak, '_t', I(total))
    if #old < 256 then break end
  end
  return total
end

local function wretry(key, total, n, limit, now, W)
  if n > limit then return -1 end
  local zk, ak = base .. 'w:' .. key, base .. 'wa:' .. key
  local excess = total + n - limit
  local freed = 0
  local items = redis.call('ZRANGE', zk, 0, -1, 'WITHSCORES')
  for i = 1, #items, 2 do
    freed = freed + (tonumber(redis.call('HGET', ak, items[i])) or 0)
    if freed >= excess then return tonumber(items[i + 1]) + W - now end
  end
  return W
end

local function wadd(key, member, n, now, W)
  if n <= 0 then return end
  local zk, ak = base .. 'w:' .. key, base .. 'wa:' .. key
  redis.call('ZADD', zk, 'NX', I(now), member)
  redis.call('HINCRBY', ak, member, I(n))
  redis.call('HINCRBY', ak, '_t', I(n))
  redis.call('PEXPIRE', zk, I(W + 600000))
  redis.call('PEXPIRE', ak, I(W + 600000))
end

-- calendar windows: hash win / used / held
local function cload(key, win)
  local h = redis.call('HMGET', base .. 'c:' .. key, 'win', 'used', 'held')
  local s = {win = tonumber(h[1]) or -1, used = tonumber(h[2]) or 0, held = tonumber(h[3]) or 0}
  if win > s.win then s.win, s.used, s.held = win, 0, 0 end
  return s
end

-- Key expiry is relative (Redis' own clock) and generous: `now` is the caller's.
local function csave(key, s, wend, now)
  local ck = base .. 'c:' .. key
  redis.call('HSET', ck, 'win', I(s.win), 'used', I(s.used), 'held', I(s.held))
  if wend < 4000000000000 then
    redis.call('PEXPIRE', ck, I(math.max(0, wend - now) + 86400000))
  end
end

-- gauges: a plain integer
local function gadd(key, n, ttl)
  local gk = base .. 'g:' .. key
  local v = tonumber(redis.call('INCRBY', gk, I(n)))
  if v < 0 then redis.call('SET', gk, '0'); v = 0 end
  redis.call('PEXPIRE', gk, I(2 * ttl))
  return v
end

local function load(w, now)
  local kind = w[2]
  if kind == 'w' then return {used = wprune(w[1], now, w[5]), held = 0} end
  if kind == 'c' then return cload(w[1], w[5]) end
  return {used = tonumber(redis.call('GET', base .. 'g:' .. w[1])) or 0}
end

local function check(s, w, n, now)
  local limit = w[4]
  if n <= 0 or s.used + n <= limit then return nil end
  local rem = math.max(0, limit - s.used)
  if w[2] == 'w' then return {rem, wretry(w[1], s.used, n, limit, now, w[5])} end
  if w[2] == 'c' then
    if n > limit then return {rem, -1} end
    return {rem, math.max(0, w[6] - now)}
  end
  return {rem, -1}
end

local function alerts(out, i, before, after, limit)
  if limit <= 0 then return end
  for _, pct in ipairs({50, 80, 100}) do
    if before * 100 < pct * limit and pct * limit <= after * 100 then
      out[#out + 1] = i; out[#out + 1] = pct; out[#out + 1] = after
    end
  end
end

local function worst_of(L, v, now)
  local states, worst = {}, nil
  for i, w in ipairs(L) do
    local s = load(w, now)
    states[i] = s
    local r = check(s, w, amount(v, w[3]), now)
    if r and (worst == nil or (worst[4] ~= -1 and (r[2] == -1 or r[2] > worst[4]))) then
      worst = {0, i, r[1], r[2]}
    end
  end
  return states, worst
end

local function sweep(now)
  local due = redis.call('ZRANGEBYSCORE', EXP, '-inf', I(now), 'LIMIT', 0, 64)
  for _, rid in ipairs(due) do
    local raw = redis.call('HGET', RES, rid)
    if raw then
      local rec = cjson.decode(raw)
      for _, e in ipairs(rec.e) do
        if e[2] == 'g' then
          gadd(e[1], -e[4], rec.ttl)
        elseif e[2] == 'c' then
          local ck = base .. 'c:' .. e[1]
          if tonumber(redis.call('HGET', ck, 'win')) == e[5] then
            local held = tonumber(redis.call('HGET', ck, 'held')) or 0
            redis.call('HSET', ck, 'held', I(math.max(0, held - e[4])))
          end
        end
      end
      redis.call('HDEL', RES, rid)
      redis.call('HINCRBY', base .. 'stats', 'expired', 1)
    end
    redis.call('ZREM', EXP, rid)
    redis.call('ZREM', LS, rid)
  end
end

local function lapse(now)
  local due = redis.call('ZRANGEBYSCORE', LS, '-inf', I(now), 'LIMIT', 0, 64)
  for _, rid in ipairs(due) do
    local raw = redis.call('HGET', RES, rid)
    if raw then
      local rec = cjson.decode(raw)
      for _, e in ipairs(rec.e) do
        if e[2] == 'g' and e[4] > 0 then gadd(e[1], -e[4], rec.ttl); e[4] = 0 end
      end
      redis.call('HSET', RES, rid, cjson.encode(rec))
      redis.call('HINCRBY', base .. 'stats', 'lapsed', 1)
    end
    redis.call('ZREM', LS, rid)
  end
end

if op == 'renew' then
  local now = clock(p.now)
  local d, renewed, back = I(now + p.ls), 0, 0
  for _, rid in ipairs(p.rids) do
    if redis.call('ZSCORE', LS, rid) then
      redis.call('ZADD', LS, d, rid)
      renewed = renewed + 1
    else
      local raw = redis.call('HGET', RES, rid)
      if raw then
        local rec = cjson.decode(raw)
        if rec.ls == 1 then
          local g = {}
          for j = 1, 4 do g[j] = rec.r[j] + rec.b[j] end
          for _, e in ipairs(rec.e) do
            if e[2] == 'g' then
              local full = amount(g, e[3])
              if full > e[4] then gadd(e[1], full - e[4], rec.ttl); e[4] = full end
            end
          end
          redis.call('HSET', RES, rid, cjson.encode(rec))
          redis.call('ZADD', LS, d, rid)
          back = back + 1
        end
      end
    end
  end
  return {renewed, back}
end

local L, v = p.l, p.v

if op == 'reserve' then
  local now = clock(p.now)
  sweep(now)
  lapse(now)
  if redis.call('HEXISTS', RES, p.rid) == 1 then return {-2} end
  local states, worst = worst_of(L, v, now)
  if worst then return worst end
  local out, al, entries = {1}, {}, {}
  for i, w in ipairs(L) do
    local s, n = states[i], amount(v, w[3])
    local before = s.used
    if w[2] == 'w' then
      wadd(w[1], p.rid, n, now, w[5]); s.used = s.used + n
    elseif w[2] == 'c' then
      s.used = s.used + n; s.held = s.held + n; csave(w[1], s, w[6], now)
      alerts(al, i, before, s.used, w[4])
    else
      s.used = gadd(w[1], n, p.ttl)
    end
    entries[i] = {w[1], w[2], w[3], n, (w[2] == 'c') and s.win or 0}
    out[#out + 1] = w[4] - s.used
  end
  local deadline = now + p.ttl
  local leased = 0
  if (p.ls or 0) > 0 then
    for _, w in ipairs(L) do if w[2] == 'g' then leased = 1 end end
  end
  redis.call('HSET', RES, p.rid, cjson.encode(
    {d = deadline, ttl = p.ttl, e = entries, r = v, b = {0, 0, 0, 0}, n = 0, ls = leased}))
  redis.call('ZADD', EXP, I(deadline), p.rid)
  if leased == 1 then redis.call('ZADD', LS, I(now + p.ls), p.rid) end
  for _, x in ipairs(al) do out[#out + 1] = x end
  return out
end

if op == 'debit' then
  if redis.call('HEXISTS', RES, p.rid) == 0 then return {-1} end
  local now = clock(p.now)
  lapse(now)
  local rec = cjson.decode(redis.call('HGET', RES, p.rid))
  local states, worst = worst_of(L, v, now)
  if worst then return worst end
  rec.n = rec.n + 1
  local member = p.rid .. '#' .. I(rec.n)
  local out, al = {1}, {}
  for i, w in ipairs(L) do
    local s, e, n = states[i], rec.e[i], amount(v, w[3])
    local before = s.used
    if w[2] == 'w' then
      wadd(w[1], member, n, now, w[5]); s.used = s.used + n
    elseif w[2] == 'c' then
      s.used = s.used + n; s.held = s.held + n; csave(w[1], s, w[6], now)
      if e[5] == s.win then e[4] = e[4] + n else e[5] = s.win; e[4] = n end
      alerts(al, i, before, s.used, w[4])
    else
      s.used = gadd(w[1], n, rec.ttl); e[4] = e[4] + n
    end
    out[#out + 1] = w[4] - s.used
  end
  for j = 1, 4 do rec.b[j] = rec.b[j] + v[j] end
  rec.d = now + rec.ttl
  redis.call('HSET', RES, p.rid, cjson.encode(rec))
  redis.call('ZADD', EXP, I(rec.d), p.rid)
  for _, x in ipairs(al) do out[#out + 1] = x end
  return out
end

if op == 'reconcile' then
  local raw = redis.call('HGET', RES, p.rid)
  if not raw then return {0} end
  local rec = cjson.decode(raw)
  redis.call('HDEL', RES, p.rid)
  redis.call('ZREM', EXP, p.rid)
  redis.call('ZREM', LS, p.rid)
  local now = clock(p.now)
  local g = {}
  for j = 1, 4 do g[j] = rec.r[j] + rec.b[j] end
  local out = {1}
  for i, w in ipairs(L) do
    local e = rec.e[i]
    local a, total = amount(v, w[3]), amount(g, w[3])
    if w[2] == 'w' then
      wprune(w[1], now, w[5])
      if a < total then
        local ak = base .. 'wa:' .. w[1]
        local main = tonumber(redis.call('HGET', ak, p.rid)) or 0
        local back = math.min(total - a, main)
        if back > 0 then
          redis.call('HINCRBY', ak, p.rid, I(-back))
          redis.call('HINCRBY', ak, '_t', I(-back))
        end
      elseif a > total then
        wadd(w[1], p.rid .. '#x', a - total, now, w[5])
      end
    elseif w[2] == 'c' then
      local s = cload(w[1], w[5])
      local before = s.used
      if e[5] == s.win then
        local share = math.max(0, a - (total - e[4]))
        s.used = s.used + share - e[4]
        s.held = math.max(0, s.held - e[4])
      else
        s.used = s.used + math.max(0, a - total)
      end
      csave(w[1], s, w[6], now)
      alerts(out, i, before, s.used, w[4])
    else
      gadd(w[1], -e[4], rec.ttl)
    end
  end
  return out
end

if op == 'status' then
  local now = clock(p.now)
  lapse(now)
  local out = {}
  for _, w in ipairs(L) do
    local s = load(w, now)
    if w[2] == 'w' then
      out[#out + 1] = s.used; out[#out + 1] = 0
    elseif w[2] == 'c' then
      out[#out + 1] = s.used; out[#out + 1] = s.held
    else
      out[#out + 1] = s.used; out[#out + 1] = s.used
    end
  end
  return out
end

return redis.error_reply('tokenplane: unknown admission op ' .. tostring(op))
