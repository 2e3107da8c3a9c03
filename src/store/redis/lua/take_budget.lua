-- Takes one call from the approve-next budget KEYS[1] (a count).
-- Returns 1 when one was left, else 0.
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
if left > 0 then
  redis.call('DECR', KEYS[1])
  return 1
end
return 0
