//! The Redis side of [`super`]: every instance sharing the store
//! checks the same keys (`<prefix>limit:…`), each in one Lua script on
//! Redis's clock, so the instances' clocks need not agree. Every key
//! expires once it no longer limits anything.

use std::num::NonZeroU32;
use std::sync::LazyLock;
use std::time::Duration;

use crate::store::redis::millis;
use crate::store::{RedisStore, StoreError};

/// GCRA rate limit on Redis's clock: `redis/lua/rate_limit_gcra.lua` (KEYS and ARGV in its header).
pub(in crate::store) const GCRA: &str = include_str!("../redis/lua/rate_limit_gcra.lua");

/// Takes a stream's lease while fewer than the limit are live: `redis/lua/take_stream_lease.lua` (KEYS and ARGV in its header).
pub(in crate::store) const TAKE_LEASE: &str = include_str!("../redis/lua/take_stream_lease.lua");

/// Renews a stream's lease: `redis/lua/renew_stream_lease.lua` (KEYS and ARGV in its header).
pub(in crate::store) const RENEW_LEASE: &str = include_str!("../redis/lua/renew_stream_lease.lua");

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
            .map_err(crate::store::redis::backend)?;
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
            .map_err(crate::store::redis::backend)
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
            .map_err(crate::store::redis::backend)?;
        Ok(())
    }

    pub(super) async fn drop_lease(&self, key: &str, member: &str) -> Result<(), StoreError> {
        use redis::AsyncCommands;
        let mut conn = self.conn.clone();
        let _: i64 = conn
            .zrem(self.limit_key(key), member)
            .await
            .map_err(crate::store::redis::backend)?;
        Ok(())
    }
}
