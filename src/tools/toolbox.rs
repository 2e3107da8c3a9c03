//! The tools as they are now: a fixed base (built-in, HTTP, application
//! tools) and the tools of each MCP server, which come and go at run time.
//!
//! Readers take the current [`Registry`] as one `Arc` (a turn offers the
//! model one snapshot; the gate looks a call's tool up when it runs). A
//! change builds a new registry and swaps it in; no lock is held across an
//! `.await`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Registry, Tool};

#[derive(Clone)]
pub struct Toolbox {
    inner: Arc<Inner>,
}

struct Inner {
    base: Registry,
    current: RwLock<Arc<Registry>>,
    servers: Mutex<BTreeMap<String, Server>>,
    /// Cancelled by [`Toolbox::shutdown`] or when the last handle goes: the
    /// MCP supervisors then stop and their servers' processes with them.
    stop: CancellationToken,
    /// The MCP supervisors, for [`Toolbox::shutdown`] to wait for.
    supervisors: TaskTracker,
}

struct Server {
    transport: &'static str,
    state: ServerState,
    tools: Vec<Arc<dyn Tool>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.current().fmt(f)
    }
}

impl From<Registry> for Toolbox {
    fn from(base: Registry) -> Self {
        Self::new(base)
    }
}

impl Toolbox {
    pub fn new(base: Registry) -> Self {
        Self {
            inner: Arc::new(Inner {
                current: RwLock::new(Arc::new(base.clone())),
                base,
                servers: Mutex::new(BTreeMap::new()),
                stop: CancellationToken::new(),
                supervisors: TaskTracker::new(),
            }),
        }
    }

    /// The tools now: cheap (an `Arc` clone).
    pub fn current(&self) -> Arc<Registry> {
        self.inner
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Each MCP server and its state, by name.
    pub fn servers(&self) -> Vec<ServerView> {
        let servers = self.lock_servers();
        servers
            .iter()
            .map(|(name, server)| ServerView {
                name: name.clone(),
                transport: server.transport,
                state: server.state.clone(),
            })
            .collect()
    }

    /// Whether every MCP server has come past its first connection attempt.
    pub fn settled(&self) -> bool {
        self.lock_servers()
            .values()
            .all(|s| !matches!(s.state, ServerState::Connecting))
    }

    pub(crate) fn downgrade(&self) -> WeakToolbox {
        WeakToolbox(Arc::downgrade(&self.inner))
    }

    pub(crate) fn stopped(&self) -> CancellationToken {
        self.inner.stop.clone()
    }

    pub(crate) fn track(
        &self,
        supervisor: impl std::future::Future<Output = ()> + Send + 'static,
        runtime: &tokio::runtime::Handle,
    ) {
        self.inner.supervisors.spawn_on(supervisor, runtime);
    }

    /// Stops every MCP server and waits until each is closed (a stdio
    /// server's input ended, its process group killed if it lingers).
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        self.inner.supervisors.close();
        self.inner.supervisors.wait().await;
    }

    pub(crate) fn add_server(&self, name: &str, transport: &'static str) {
        self.lock_servers().insert(
            name.to_owned(),
            Server {
                transport,
                state: ServerState::Connecting,
                tools: Vec::new(),
            },
        );
    }

    pub(crate) fn set_state(&self, name: &str, state: ServerState) {
        if let Some(server) = self.lock_servers().get_mut(name) {
            server.state = state;
        }
    }

    /// Replaces `name`'s tools and publishes the new set.
    pub(crate) fn set_tools(&self, name: &str, tools: Vec<Arc<dyn Tool>>) {
        let mut servers = self.lock_servers();
        if let Some(server) = servers.get_mut(name) {
            server.tools = tools;
        }
        let registry = Registry::extended(
            &self.inner.base,
            servers.values().flat_map(|s| s.tools.iter().cloned()),
        );
        // Published under the servers' lock: two changes cannot swap in out of order.
        *self
            .inner
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(registry);
    }

    fn lock_servers(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Server>> {
        self.inner
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A supervisor's handle: it does not keep the toolbox alive.
#[derive(Clone)]
pub(crate) struct WeakToolbox(Weak<Inner>);

impl WeakToolbox {
    pub(crate) fn upgrade(&self) -> Option<Toolbox> {
        self.0.upgrade().map(|inner| Toolbox { inner })
    }
}

/// A server's state, as `GET /api/tools` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum ServerState {
    /// The first attempt is under way.
    Connecting,
    Available {
        tools: usize,
    },
    /// Down; the next attempt is in `retry_in_ms`.
    #[serde(rename_all = "camelCase")]
    Unavailable {
        reason: String,
        retry_in_ms: u64,
    },
    /// Reconnecting after `reason`.
    #[serde(rename_all = "camelCase")]
    Restarting {
        attempt: u32,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerView {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    #[serde(flatten)]
    pub state: ServerState,
}
