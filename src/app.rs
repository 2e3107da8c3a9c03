//! Wiring: settings → gate, model and routes; and serving them.
//!
//! - `app.rs`: [`App`], what an embedding application replaces.
//! - `build.rs`: the gate, the model, the store's jobs and the routes, made
//!   from the [`Settings`].
//! - `serve.rs`: serving them, the drain and stop, and opening the
//!   configured store.
//! - `chores.rs`: the store's background chores (purging, checkpoints).
//! - `accept.rs`: the accept loop (header timeout, connection caps).

mod accept;
mod build;
mod chores;
mod serve;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;

use crate::config::Settings;
use crate::confirm::{Gate, Inventory, Signer};
use crate::faces::ANONYMOUS;
use crate::faces::mcp::{StdioError, serve_stdio};
use crate::ids::{Clock, Ids};
use crate::policy::Policy;
use crate::provider::ModelProvider;
use crate::store::Store;
use crate::tools::mcp::{self, McpServer};
use crate::tools::{Registry, Toolbox};

pub use serve::open_store;

/// A toolgate server, built from its [`Settings`]. Embedding applications
/// replace parts (tools, model, ids, clock) before calling [`App::router`].
pub struct App {
    settings: Settings,
    ids: Ids,
    clock: Clock,
    store: Store,
    provider: Option<Arc<dyn ModelProvider>>,
    signer: Option<Signer>,
    /// This process, as its claims name it.
    instance: String,
}

impl App {
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            ids: Ids::random(),
            clock: Clock::system(),
            store: Store::memory(),
            provider: None,
            signer: None,
            instance: uuid::Uuid::new_v4().simple().to_string(),
        }
    }
    /// Names this process's claims (a random id minted at start-up unless
    /// set): after a restart, a claim of the process before is known as
    /// orphaned and answered at once.
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = instance.into();
        self
    }

    pub fn with_ids(mut self, ids: Ids) -> Self {
        self.ids = ids;
        self
    }

    /// Every tool with its source, qualified name and effective policy, and
    /// each MCP server's state, once every server has had its first
    /// connection attempt (or its `connectTimeoutMs` has passed).
    pub async fn tools(self) -> Inventory {
        let servers = self.settings.mcp_servers;
        let wait = servers
            .iter()
            .map(McpServer::connect_timeout)
            .max()
            .unwrap_or_default();
        let toolbox = Toolbox::new(self.settings.registry);
        mcp::start(servers, &toolbox);
        let deadline = tokio::time::Instant::now() + wait + Duration::from_millis(500);
        while !toolbox.settled() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let gate = Gate::new(
            toolbox,
            self.store,
            self.clock,
            self.ids,
            Duration::ZERO,
            Duration::ZERO,
        )
        .with_policy(self.settings.policy);
        gate.inventory()
    }

    /// Decides with this policy (built from the settings unless set), for an
    /// application that adds its own deciders.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// Signs confirmations with these keys (see `toolConfirmation.signingKeys`).
    pub fn with_signer(mut self, signer: Option<Signer>) -> Self {
        self.signer = signer;
        self
    }

    /// Replaces the store (in memory unless set; `toolgate serve` opens the
    /// configured one with [`open_store`]).
    pub fn with_store(mut self, store: Store) -> Self {
        self.store = store;
        self
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the tools (the built-in ones included); the config's MCP
    /// servers add theirs to these.
    pub fn with_registry(mut self, registry: Registry) -> Self {
        self.settings.registry = registry;
        self
    }

    pub fn with_provider(mut self, provider: impl ModelProvider) -> Self {
        self.provider = Some(Arc::new(provider));
        self
    }

    /// Serves the MCP face over stdin and stdout (`toolgate mcp`) as
    /// `mcp.principal` (or `TOOLGATE_MCP_PRINCIPAL`, else `anonymous`),
    /// until the client closes them; a call it claimed runs to its end.
    pub async fn serve_mcp_stdio(self) -> Result<(), StdioError> {
        let principal = self.settings.mcp.principal.clone();
        let principal = principal.unwrap_or_else(|| ANONYMOUS.to_owned());
        let built = self.build(None);
        let Some(face) = built.mcp else {
            return Err(StdioError::Start("no key for MCP's requestState".into()));
        };
        let served = serve_stdio(face.as_principal(&principal)).await;
        built.gate.shutdown().await;
        served
    }

    /// The routes behind the Host and Origin checks; the bind address is
    /// the config's (a server that binds elsewhere lists its address in
    /// `server.allowedHosts`).
    pub fn router(self) -> Router {
        let bind = self.settings.bind.map(|addr| addr.ip());
        self.build(bind).router
    }
}
