-- Spends one use of a narrowed grant, if it is active: not revoked, not
-- over, uses left. One script, so two instances never spend the same use.
-- KEYS[1]: the principal's grants, a hash: id -> the grant as made,
--          id .. "\31used" -> uses spent, id .. "\31revoked" -> when revoked.
-- ARGV[1]: the grant's id; ARGV[2]: its uses (0: any number);
-- ARGV[3]: the first moment it is over (0: never); ARGV[4]: now (ms).
-- Returns 1 when a use was spent, else 0.
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], id) == 0 then
  return 0
end
if redis.call('HEXISTS', KEYS[1], id .. '\31revoked') == 1 then
  return 0
end
local over = tonumber(ARGV[3])
if over > 0 and tonumber(ARGV[4]) >= over then
  return 0
end
local uses = tonumber(ARGV[2])
local used = tonumber(redis.call('HGET', KEYS[1], id .. '\31used') or '0')
if uses > 0 and used >= uses then
  return 0
end
redis.call('HINCRBY', KEYS[1], id .. '\31used', 1)
return 1
