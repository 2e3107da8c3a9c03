//! Rate limits (`limits`): turns and tool calls per minute per principal,
//! calls per minute per tool, and streams at once per principal.
//!
//! Two backends behind one [`Limiter`]: in process (`governor`'s keyed
//! GCRA) for a store one process owns, and in Redis when instances share
//! the store, so N instances enforce one limit: the same GCRA in one Lua
//! script per check, and a lease per stream that its instance renews (a
//! dead instance's streams lapse). In process, streams at once are counted
//! by the transport's registry of turns in flight.
//!
//! A per-minute limit of N admits a burst of N, then one more every 60/N
//! seconds: GCRA, not a fixed window, so a burst cannot straddle a window's
//! edge and double.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::call::QualifiedName;
use crate::store::{RedisStore, StoreError};

pub(super) mod redis;

/// How long a stream's lease lasts in Redis without renewal: a stream of an
/// instance that died stops counting this long after.
pub const LEASE: Duration = Duration::from_secs(30);

/// How often an instance renews the leases of its streams.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// What a client over `concurrentStreams` is told to wait: when a stream
/// ends cannot be known.
const STREAMS_RETRY: Duration = Duration::from_secs(5);

/// The configured limits; `None`: unlimited.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    pub turns_per_minute: Option<NonZeroU32>,
    pub tool_calls_per_minute: Option<NonZeroU32>,
    pub concurrent_streams: Option<NonZeroU32>,
    /// Calls per minute of each tool (all principals together), by
    /// qualified name, with the name the config gave it.
    pub tools: BTreeMap<QualifiedName, (String, NonZeroU32)>,
}

/// Which limit refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    TurnsPerMinute,
    ConcurrentStreams,
    ToolCallsPerMinute,
    /// `limits.tools.<name>.callsPerMinute`, with the name as configured.
    Tool(String),
}

impl Limit {
    /// A bounded label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Limit::TurnsPerMinute => "turns_per_minute",
            Limit::ConcurrentStreams => "concurrent_streams",
            Limit::ToolCallsPerMinute => "tool_calls_per_minute",
            Limit::Tool(_) => "tool_calls_per_minute_of_tool",
        }
    }
}

/// Refused by a limit; try again after `retry_after`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{limit}")]
pub struct Limited {
    pub limit: Limit,
    pub retry_after: Duration,
}

impl Limited {
    /// Over `concurrentStreams`.
    pub fn streams() -> Self {
        Limited {
            limit: Limit::ConcurrentStreams,
            retry_after: STREAMS_RETRY,
        }
    }

    /// Whole seconds to wait, at least one (for `Retry-After`).
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        secs.max(1)
    }
}

/// The fixed text a client reads: the limit, never the principal or a count.
impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::TurnsPerMinute => {
                f.write_str("rate limited: too many turns per minute (limits.turnsPerMinute)")
            }
            Limit::ConcurrentStreams => {
                f.write_str("rate limited: too many streams at once (limits.concurrentStreams)")
            }
            Limit::ToolCallsPerMinute => f.write_str(
                "rate limited: too many tool calls per minute (limits.toolCallsPerMinute); the call did not run",
            ),
            Limit::Tool(name) => write!(
                f,
                "rate limited: too many calls of `{name}` per minute (limits.tools.{name}.callsPerMinute); the call did not run"
            ),
        }
    }
}

/// Why a check did not admit.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error(transparent)]
    Limited(#[from] Limited),
    /// The shared store could not be asked: nothing is admitted.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Checks the limits; cheap to clone.
#[derive(Clone, Default)]
pub struct Limiter {
    rates: Arc<Rates>,
    backend: Backend,
}

#[derive(Clone, Default)]
enum Backend {
    /// No limit is configured.
    #[default]
    Off,
    Local(Arc<Local>),
    Redis(Arc<Shared>),
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = match self.backend {
            Backend::Off => "off",
            Backend::Local(_) => "local",
            Backend::Redis(_) => "redis",
        };
        f.debug_struct("Limiter")
            .field("rates", &self.rates)
            .field("backend", &backend)
            .finish()
    }
}

/// The in-process limiters, one per configured limit.
struct Local {
    turns: Option<DefaultKeyedRateLimiter<String>>,
    tool_calls: Option<DefaultKeyedRateLimiter<String>>,
    tools: BTreeMap<QualifiedName, DefaultDirectRateLimiter>,
}

/// The Redis backend: the store's connection and prefix, and where the
/// stream leases' renewals run.
struct Shared {
    store: Arc<RedisStore>,
    tasks: TaskTracker,
    /// Names this instance's leases.
    instance: String,
    next_lease: AtomicU64,
}

/// A stream's place under `concurrentStreams`, held while the turn runs;
/// dropping it gives the place back.
#[derive(Default)]
pub struct Lease {
    _release: Option<DropGuard>,
}

impl Limiter {
    /// In process (a store one process owns).
    pub fn local(rates: Rates) -> Self {
        let keyed = |n: Option<NonZeroU32>| n.map(|n| RateLimiter::keyed(Quota::per_minute(n)));
        let local = Local {
            turns: keyed(rates.turns_per_minute),
            tool_calls: keyed(rates.tool_calls_per_minute),
            tools: rates
                .tools
                .iter()
                .map(|(tool, (_, n))| (tool.clone(), RateLimiter::direct(Quota::per_minute(*n))))
                .collect(),
        };
        Self::with(rates, Backend::Local(Arc::new(local)))
    }

    /// Shared through Redis, under the store's key prefix; stream leases
    /// are renewed on `tasks` and named by `instance`.
    pub fn redis(
        rates: Rates,
        store: Arc<RedisStore>,
        tasks: TaskTracker,
        instance: impl Into<String>,
    ) -> Self {
        let shared = Shared {
            store,
            tasks,
            instance: instance.into(),
            next_lease: AtomicU64::new(0),
        };
        Self::with(rates, Backend::Redis(Arc::new(shared)))
    }

    fn with(rates: Rates, backend: Backend) -> Self {
        let unlimited = rates == Rates::default();
        Self {
            rates: Arc::new(rates),
            backend: if unlimited { Backend::Off } else { backend },
        }
    }

    pub fn rates(&self) -> &Rates {
        &self.rates
    }

    /// Counts a new turn of `principal` against `turnsPerMinute`.
    pub async fn turn(&self, principal: &str) -> Result<(), LimitError> {
        let Some(n) = self.rates.turns_per_minute else {
            return Ok(());
        };
        match &self.backend {
            Backend::Off => Ok(()),
            Backend::Local(local) => keyed(local.turns.as_ref(), principal, Limit::TurnsPerMinute),
            Backend::Redis(shared) => {
                let key = format!("turns:{principal}");
                shared.rate(&key, n, Limit::TurnsPerMinute).await
            }
        }
    }

    /// Counts a call of `tool` by `principal` that is about to run: first
    /// against the principal's `toolCallsPerMinute`, then against the
    /// tool's own limit. A call the tool's limit refuses has still counted
    /// for the principal; one the principal's refuses has not counted for
    /// the tool, so a principal over its own limit cannot use up a tool's
    /// calls for everyone.
    pub async fn tool_call(&self, principal: &str, tool: &str) -> Result<(), LimitError> {
        let qualified = QualifiedName::of(tool);
        let per_tool = self.rates.tools.get(&qualified);
        match &self.backend {
            Backend::Off => Ok(()),
            Backend::Local(local) => {
                keyed(
                    local.tool_calls.as_ref(),
                    principal,
                    Limit::ToolCallsPerMinute,
                )?;
                match (local.tools.get(&qualified), per_tool) {
                    (Some(limiter), Some((name, _))) => {
                        limiter.check().map_err(|not_until| Limited {
                            limit: Limit::Tool(name.clone()),
                            retry_after: not_until.wait_time_from(DefaultClock::default().now()),
                        })?;
                        Ok(())
                    }
                    _ => Ok(()),
                }
            }
            Backend::Redis(shared) => {
                if let Some(n) = self.rates.tool_calls_per_minute {
                    let key = format!("tool-calls:{principal}");
                    shared.rate(&key, n, Limit::ToolCallsPerMinute).await?;
                }
                if let Some((name, n)) = per_tool {
                    let key = format!("tool:{qualified}");
                    shared.rate(&key, *n, Limit::Tool(name.clone())).await?;
                }
                Ok(())
            }
        }
    }

    /// A place for a stream of `principal` under `concurrentStreams`,
    /// shared by every instance (Redis). In process the registry of turns
    /// in flight counts streams, so this admits at once.
    pub async fn stream(&self, principal: &str) -> Result<Lease, LimitError> {
        let (Some(n), Backend::Redis(shared)) = (self.rates.concurrent_streams, &self.backend)
        else {
            return Ok(Lease::default());
        };
        shared.lease(principal, n).await
    }

    /// Forgets in-process state of principals idle for a minute or more
    /// (their limits are full again): keys stay bounded. Redis keys expire.
    pub fn prune(&self) {
        if let Backend::Local(local) = &self.backend {
            for limiter in [&local.turns, &local.tool_calls].into_iter().flatten() {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        }
    }
}

fn keyed(
    limiter: Option<&DefaultKeyedRateLimiter<String>>,
    principal: &str,
    limit: Limit,
) -> Result<(), LimitError> {
    let Some(limiter) = limiter else {
        return Ok(());
    };
    // The key is owned by the map: one allocation per check.
    limiter
        .check_key(&principal.to_owned())
        .map_err(|not_until| {
            LimitError::Limited(Limited {
                limit,
                retry_after: not_until.wait_time_from(DefaultClock::default().now()),
            })
        })
}

impl Shared {
    async fn rate(&self, key: &str, n: NonZeroU32, limit: Limit) -> Result<(), LimitError> {
        let wait = self.store.gcra(key, n).await?;
        match wait {
            None => Ok(()),
            Some(retry_after) => Err(Limited { limit, retry_after }.into()),
        }
    }

    async fn lease(self: &Arc<Self>, principal: &str, n: NonZeroU32) -> Result<Lease, LimitError> {
        let member = format!(
            "{}:{}",
            self.instance,
            self.next_lease.fetch_add(1, Ordering::Relaxed)
        );
        let key = format!("streams:{principal}");
        if !self.store.take_lease(&key, &member, n, LEASE).await? {
            return Err(Limited::streams().into());
        }
        // Renewed while held; given back when the lease is dropped (the
        // turn ended), on a tracked task, since a drop cannot wait.
        let held = CancellationToken::new();
        let (shared, released) = (self.clone(), held.clone());
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = released.cancelled() => break,
                    () = tokio::time::sleep(RENEW_EVERY) => {
                        if let Err(e) = shared.store.renew_lease(&key, &member, LEASE).await {
                            tracing::warn!("renewing a stream's lease failed: {e}");
                        }
                    }
                }
            }
            if let Err(e) = shared.store.drop_lease(&key, &member).await {
                tracing::warn!("giving back a stream's lease failed (it lapses on its own): {e}");
            }
        });
        Ok(Lease {
            _release: Some(held.drop_guard()),
        })
    }
}

#[cfg(test)]
mod tests;
