-- Revokes a narrowed grant unless it was revoked already.
-- KEYS[1]: the principal's grants (see redeem_grant.lua).
-- ARGV[1]: the grant's id; ARGV[2]: now (ms).
-- Returns 1 when revoked now, else 0 (no such grant, or revoked before).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
return redis.call('HSETNX', KEYS[1], ARGV[1] .. '\31revoked', ARGV[2])
