-- Takes the lease ARGV[2] in the sorted set KEYS[1] (scored by expiry, ms,
-- Redis's clock) while fewer than ARGV[1] leases are live; ARGV[3] is the
-- lease's length (ms). Lapsed leases go first. Returns 1 when taken, else 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
