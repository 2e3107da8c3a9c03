-- Appends an audit event after the chain's head, if the head is still the
-- one the event was sealed after (compare-and-set: the caller reads the
-- head, seals, and retries when another instance appended first).
-- KEYS[1] the chain's head ("seq hash"), KEYS[2] the principal's sorted
-- set of events, KEYS[3] the index of principals with events.
-- ARGV[1] the head expected ('' for none), ARGV[2] the new head,
-- ARGV[3] the member (link and event), ARGV[4] the event's time (ms),
-- ARGV[5] how long the keys live (ms), ARGV[6] the principal.
-- Returns 1 when appended, 0 when the head moved.
local head = redis.call('GET', KEYS[1]) or ''
if head ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[6])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
return 1
