-- Saves a held turn's state ARGV[2] in the chat's hash KEYS[1] while the
-- instance ARGV[1] runs it, marks it waiting, and keeps the hash and its
-- stream KEYS[2] at least ARGV[3] ms. Returns 1, 0 when another instance
-- owns it, or -1 when the hash no longer names KEYS[2].
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'stream') ~= KEYS[2] then return -1 end
redis.call('HSET', KEYS[1], 'held', ARGV[2], 'waiting', 1)
for _, key in ipairs({KEYS[1], KEYS[2]}) do
  if redis.call('PTTL', key) < tonumber(ARGV[3]) then redis.call('PEXPIRE', key, ARGV[3]) end
end
return 1
