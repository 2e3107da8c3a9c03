-- Revokes the approval KEYS[1] (and its index entry ARGV[2] in KEYS[2]),
-- only if it still holds ARGV[1]: a newer one remembered meanwhile under
-- the same chat and tool stays. Returns 1 when revoked, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1
