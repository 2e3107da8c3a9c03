//! Ids and time, injected so that tests are exact without redaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Mints ids such as `msg-…`, `call-…`, `adk-…`.
#[derive(Clone, Debug)]
pub struct Ids(Arc<IdSource>);

#[derive(Debug)]
enum IdSource {
    Random,
    Sequential(AtomicU64),
}

impl Ids {
    /// `prefix-<uuid v4, simple>`: the production source.
    pub fn random() -> Self {
        Self(Arc::new(IdSource::Random))
    }

    /// `prefix-1`, `prefix-2`, …, one counter across prefixes: for tests.
    pub fn sequential() -> Self {
        Self(Arc::new(IdSource::Sequential(AtomicU64::new(0))))
    }

    pub fn next(&self, prefix: &str) -> String {
        match &*self.0 {
            // Written directly: through `format!` an id cost about 900
            // instructions, and a turn makes several.
            IdSource::Random => {
                let mut buf = uuid::Uuid::encode_buffer();
                let uuid = uuid::Uuid::new_v4().simple().encode_lower(&mut buf);
                let mut id = String::with_capacity(prefix.len() + 1 + uuid.len());
                id.push_str(prefix);
                id.push('-');
                id.push_str(uuid);
                id
            }
            IdSource::Sequential(n) => {
                format!("{prefix}-{}", n.fetch_add(1, Ordering::Relaxed) + 1)
            }
        }
    }
}

/// Wall-clock time in milliseconds since the Unix epoch.
#[derive(Clone, Debug)]
pub struct Clock(Arc<ClockSource>);

#[derive(Debug)]
enum ClockSource {
    System,
    Manual(AtomicU64),
}

impl Clock {
    pub fn system() -> Self {
        Self(Arc::new(ClockSource::System))
    }

    /// A clock that moves only when told to.
    pub fn manual(start_ms: u64) -> Self {
        Self(Arc::new(ClockSource::Manual(AtomicU64::new(start_ms))))
    }

    pub fn now_ms(&self) -> u64 {
        match &*self.0 {
            ClockSource::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            ClockSource::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }

    /// Moves a manual clock forward; a system clock ignores it.
    pub fn advance(&self, by: Duration) {
        if let ClockSource::Manual(ms) = &*self.0 {
            let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
            ms.fetch_add(by, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_and_manual_clock() {
        let ids = Ids::sequential();
        assert_eq!(ids.next("msg"), "msg-1");
        assert_eq!(ids.clone().next("call"), "call-2");
        let clock = Clock::manual(1000);
        clock.advance(Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3000);
    }

    /// `prefix-` and a v4 UUID's 32 lowercase hex digits, new each time.
    #[test]
    fn random_ids() {
        let ids = Ids::random();
        let (a, b) = (ids.next("txt"), ids.next("txt"));
        assert_ne!(a, b);
        let uuid = a.strip_prefix("txt-").unwrap_or_default();
        assert_eq!(uuid.len(), 32, "{a}");
        assert!(
            uuid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{a}"
        );
        let parsed = uuid::Uuid::try_parse(uuid).map(|u| u.get_version_num());
        assert_eq!(parsed.ok(), Some(4), "{a}");
    }
}
