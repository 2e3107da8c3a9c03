-- Records the confirmation KEYS[1] once (issued at ARGV[1]), with its entry
-- ARGV[2] in the open index KEYS[2], publishes its id ARGV[3] on the inbox
-- channel KEYS[3], adds it to the expiries KEYS[4] (at ARGV[4]) and the
-- chat's index KEYS[5], and gives the record and the index ARGV[5] ms of
-- life: in one script, so an instance killed half-way leaves no record that
-- never expires. Returns 1, or 0 when it was already recorded.
if redis.call('HSETNX', KEYS[1], 'issued', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'open', ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[3])
redis.call('SADD', KEYS[5], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[5], ARGV[5])
redis.call('PUBLISH', KEYS[3], ARGV[3])
return 1
