//! The Redis side of [`super::limits`]: every instance sharing the store
//! checks the same keys (`<prefix>limit:…`), each in one Lua script on
//! Redis's clock, so the instances' clocks need not agree. Every key
//! expires once it no longer limits anything.

use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::Duration;

use super::redis::millis;
use super::{RedisStore, StoreError};

/// GCRA over one key holding the theoretical arrival time (µs, Redis's
/// clock): ARGV[1] is the interval between calls, ARGV[2] the period (a
/// burst of period / interval). Returns 0 when admitted (and moves the
/// time on), else the µs to wait. The key lives until the limit is full again.
pub(super) const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat + interval - tonumber(ARGV[2]) - now
if wait > 0 then return wait end
local next = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.ceil((next - now) / 1000))
return 0
";

/// A stream's lease: a member (ARGV[2]) of the sorted set KEYS[1] scored by
/// its expiry (ms, Redis's clock), taken only while fewer than ARGV[1]
/// leases are live. ARGV[3]: the lease's length. Lapsed leases go first.
pub(super) const TAKE_LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
";

/// Renews the lease ARGV[1] in KEYS[1] for ARGV[2] ms (the set outlives
/// every lease in it).
pub(super) const RENEW_LEASE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
";

static SCRIPTS: LazyLock<[redis::Script; 3]> = LazyLock::new(|| {
    [
        redis::Script::new(GCRA),
        redis::Script::new(TAKE_LEASE),
        redis::Script::new(RENEW_LEASE),
    ]
});

const MINUTE_US: u64 = 60_000_000;

impl RedisStore {
    fn limit_key(&self, key: &str) -> String {
        format!("{}limit:{key}", self.prefix)
    }

    /// One call against `n` per minute on `key`: `None` when admitted, else
    /// how long until one would be.
    pub(super) async fn gcra(
        &self,
        key: &str,
        n: NonZeroU32,
    ) -> Result<Option<Duration>, StoreError> {
        let interval = MINUTE_US / u64::from(n.get());
        let mut conn = self.conn.clone();
        let wait: u64 = SCRIPTS[0]
            .key(self.limit_key(key))
            .arg(interval.max(1))
            .arg(MINUTE_US)
            .invoke_async(&mut conn)
            .await
            .map_err(super::redis::backend)?;
        Ok((wait > 0).then(|| Duration::from_micros(wait)))
    }

    /// Takes a lease `member` on `key` for `lease` if fewer than `n` are live.
    pub(super) async fn take_lease(
        &self,
        key: &str,
        member: &str,
        n: NonZeroU32,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        SCRIPTS[1]
            .key(self.limit_key(key))
            .arg(n.get())
            .arg(member)
            .arg(millis(lease))
            .invoke_async(&mut conn)
            .await
            .map_err(super::redis::backend)
    }

    pub(super) async fn renew_lease(
        &self,
        key: &str,
        member: &str,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let _: i64 = SCRIPTS[2]
            .key(self.limit_key(key))
            .arg(member)
            .arg(millis(lease))
            .invoke_async(&mut conn)
            .await
            .map_err(super::redis::backend)?;
        Ok(())
    }

    pub(super) async fn drop_lease(&self, key: &str, member: &str) -> Result<(), StoreError> {
        use redis::AsyncCommands;
        let mut conn = self.conn.clone();
        let _: i64 = conn
            .zrem(self.limit_key(key), member)
            .await
            .map_err(super::redis::backend)?;
        Ok(())
    }
}
