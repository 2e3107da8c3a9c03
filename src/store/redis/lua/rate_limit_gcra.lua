-- GCRA over KEYS[1], which holds the theoretical arrival time (us, Redis's
-- clock): ARGV[1] is the interval between calls, ARGV[2] the period (a
-- burst of period / interval). Returns 0 when admitted (and moves the time
-- on), else the us to wait. The key lives until the limit is full again.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat + interval - tonumber(ARGV[2]) - now
if wait > 0 then return wait end
local next = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.ceil((next - now) / 1000))
return 0
