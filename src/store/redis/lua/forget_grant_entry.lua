-- Drops the principal's index entry ARGV[1] from KEYS[1] of an approval
-- whose record KEYS[2] is gone, only while it is still gone: one
-- remembered again meanwhile keeps its entry. Returns what SREM does.
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
return redis.call('SREM', KEYS[1], ARGV[1])
