-- Records the outcome ARGV[1] of the claimed, undecided confirmation
-- KEYS[1] and publishes ARGV[2] on the outcomes channel KEYS[2].
-- Returns 1, or 0 when it is unclaimed or already decided.
if redis.call('HEXISTS', KEYS[1], 'claimed_at') == 0 or redis.call('HEXISTS', KEYS[1], 'outcome') == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'outcome', ARGV[1])
redis.call('PUBLISH', KEYS[2], ARGV[2])
return 1
