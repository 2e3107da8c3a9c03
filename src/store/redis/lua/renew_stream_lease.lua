-- Renews the lease ARGV[1] in the sorted set KEYS[1] for ARGV[2] ms (the set
-- outlives every lease in it). Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
