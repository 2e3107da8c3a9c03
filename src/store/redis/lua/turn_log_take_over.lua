-- A resume's look at the chat's turn KEYS[1] for this instance ARGV[1]
-- (only if it is the stream ARGV[5], unless that is empty), as its caller
-- read it: the stream KEYS[2], run by the instance whose heartbeat is
-- KEYS[3] (ARGV[2] is what every heartbeat key starts with); {'moved'} when
-- the hash says otherwise by now (its caller reads it again). Otherwise:
-- {'none'}; {'live'} (run here, or by an instance whose heartbeat is alive,
-- or ended: read it as it is); {'taken', stream, held} (its owner died while
-- it waited for a human: this instance owns it now, exactly one wins); or
-- {'ended', stream} (its owner died otherwise: the stream ends with the
-- chunk ARGV[3], unless its last chunk is the message's `finish`, and is
-- kept ARGV[4] ms). Every key it touches is in KEYS.
local h = redis.call('HMGET', KEYS[1], 'stream', 'owner', 'waiting', 'held', 'ended')
local stream, owner, waiting, held, ended = h[1], h[2], h[3], h[4], h[5]
if not stream or (ARGV[5] ~= '' and stream ~= ARGV[5]) then return {'none'} end
if stream ~= KEYS[2] or ARGV[2] .. (owner or '') ~= KEYS[3] then return {'moved'} end
if ended == '1' or owner == ARGV[1] or redis.call('EXISTS', KEYS[3]) == 1 then
  return {'live'}
end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  return {'none'}
end
if waiting == '1' and held then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1])
  return {'taken', KEYS[2], held}
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local entry = last[1]
if entry and entry[2][1] ~= 'end' then
  local next = 0
  local finished = false
  if entry[2][1] ~= 'open' then
    next = tonumber(string.match(entry[1], '^(%d+)-')) - 1 + #entry[2] / 2
    -- The message was whole (its `finish` written, not yet the end): no error after it.
    finished = string.sub(entry[2][#entry[2]], 1, 16) == '{"type":"finish"'
  end
  if not finished then
    next = next + 1
    redis.call('XADD', KEYS[2], next .. '-0', 'c', ARGV[3])
  end
  redis.call('XADD', KEYS[2], (next + 1) .. '-0', 'end', '')
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
redis.call('DEL', KEYS[1])
return {'ended', KEYS[2]}
