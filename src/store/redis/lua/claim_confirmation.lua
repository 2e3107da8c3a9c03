-- Claims the confirmation KEYS[1] for the time ARGV[1] and the instance ARGV[2];
-- the claim that wins takes it out of the open index KEYS[2] and publishes
-- ARGV[3] on the inbox channel KEYS[3]. Returns {'won'}, {'missing'},
-- {'done', outcome} or {'claimed', since, by}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
local outcome = redis.call('HGET', KEYS[1], 'outcome')
if outcome then return {'done', outcome} end
local since = redis.call('HGET', KEYS[1], 'claimed_at')
if since then return {'claimed', since, redis.call('HGET', KEYS[1], 'claimed_by') or ''} end
redis.call('HSET', KEYS[1], 'claimed_at', ARGV[1], 'claimed_by', ARGV[2])
local open = redis.call('HGET', KEYS[1], 'open')
if open then redis.call('ZREM', KEYS[2], open) end
redis.call('PUBLISH', KEYS[3], ARGV[3])
return {'won'}
