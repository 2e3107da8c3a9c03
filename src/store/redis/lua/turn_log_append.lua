-- Appends a batch (ARGV[6..]) as one entry with id ARGV[1] to the stream
-- KEYS[1], trims it to ids from ARGV[2] (unless empty), refreshes its life
-- (ARGV[3] ms; while the turn waits, only ever lengthened), and, while the
-- chat's hash KEYS[2] still names this stream, sets there whether the turn
-- waits for a human (ARGV[4]). Returns 1, or 0 when another instance took
-- the turn over from this one (ARGV[5]).
local named = redis.call('HGET', KEYS[2], 'stream') == KEYS[1]
if named and redis.call('HGET', KEYS[2], 'owner') ~= ARGV[5] then return 0 end
if #ARGV > 5 then
  local fields = {}
  for i = 6, #ARGV do
    fields[#fields + 1] = 'c'
    fields[#fields + 1] = ARGV[i]
  end
  redis.call('XADD', KEYS[1], ARGV[1], unpack(fields))
end
if ARGV[2] ~= '' then redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2]) end
local function live(key)
  if ARGV[4] ~= '1' or redis.call('PTTL', key) < tonumber(ARGV[3]) then
    redis.call('PEXPIRE', key, ARGV[3])
  end
end
live(KEYS[1])
if named then
  redis.call('HSET', KEYS[2], 'waiting', ARGV[4])
  live(KEYS[2])
end
return 1
