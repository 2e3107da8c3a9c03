-- Ends the stream KEYS[1] with an `end` entry (id ARGV[1]), keeps it
-- ARGV[2] ms, and, if the chat's hash KEYS[2] still names it, marks it
-- ended there for ARGV[3] ms more. Returns 1.
redis.call('XADD', KEYS[1], ARGV[1], 'end', '')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[2], 'stream') == KEYS[1] then
  redis.call('HDEL', KEYS[2], 'held')
  redis.call('HSET', KEYS[2], 'ended', 1, 'waiting', 0)
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
