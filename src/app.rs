//! Wiring: config → gate, model and routes; and serving them.

mod accept;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::Agent;
use crate::config::{AllowedToolsStorage, Config, ProviderKind, StoreConfig, StoreKind};
use crate::config::{ConfigError, ModelConfig};
use crate::confirm::{Gate, Inventory, Signer};
use crate::ids::{Clock, Ids};
use crate::metrics::Metrics;
use crate::notify::{Links, Notifier};
use crate::policy::{Mode, Policy, ToolPolicies};
use crate::provider::adk::Adk;
use crate::provider::anthropic::Anthropic;
use crate::provider::gemini::Gemini;
use crate::provider::http::Upstream;
use crate::provider::measured::Measured;
use crate::provider::openai::OpenAi;
use crate::provider::{ModelProvider, ModelRequest, ProviderError, ProviderEvent, ScriptedModel};
use crate::run::{Limits as RunLimits, Runs};
use crate::store::{BackendError, Limiter, Store, StoreError};
use crate::tools::mcp::{self, McpServer};
use crate::tools::{Registry, Toolbox};
use crate::transport::{HttpState, MetricsRoute, router};
use futures::stream::BoxStream;

/// How long a stopping server waits, once its connections are closed, for
/// the turns it then stops and the sockets' writers to end.
const STOP: Duration = Duration::from_secs(5);
/// Open connections at most on `metrics.bind`: scrapers and probes, a
/// quarter of them from one address.
const METRICS_CONNECTIONS: usize = 64;

/// A toolgate server, built from a config. Embedding applications replace
/// parts (tools, model, ids, clock) before calling [`App::router`].
pub struct App {
    config: Config,
    ids: Ids,
    clock: Clock,
    store: Store,
    registry: Registry,
    provider: Option<Arc<dyn ModelProvider>>,
    signer: Option<Signer>,
    policy: Policy,
    /// This process, as its claims name it.
    instance: String,
}

impl App {
    pub fn new(config: Config) -> Self {
        // A config that parsed has a valid policy; one built in code might
        // not, and then nothing runs unasked.
        let policy = config.policy().unwrap_or_else(|e| {
            tracing::error!("{e}: every call that would ask is denied");
            Policy::new(Mode::AutoDeny, &ToolPolicies::default(), Default::default())
                .unwrap_or_default()
        });
        // A config that loaded has valid tools; one built in code might not.
        let registry = config.tools.registry().unwrap_or_else(|e| {
            tracing::error!("{e}: only the built-in tools are offered");
            Registry::with_builtins(config.tools.payment_limit)
        });
        Self {
            config,
            ids: Ids::random(),
            clock: Clock::system(),
            store: Store::memory(),
            registry,
            provider: None,
            signer: None,
            policy,
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
        let servers = self.mcp_servers();
        let wait = servers
            .iter()
            .map(McpServer::connect_timeout)
            .max()
            .unwrap_or_default();
        let toolbox = Toolbox::new(self.registry);
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
        .with_policy(self.policy);
        gate.inventory()
    }

    /// The config's MCP servers; a config that loaded has valid ones, one
    /// built in code might not (then none is started).
    fn mcp_servers(&self) -> Vec<McpServer> {
        self.config.mcp_servers().unwrap_or_else(|e| {
            tracing::error!("{e}: no MCP server is started");
            Vec::new()
        })
    }

    /// Decides with this policy (built from the config unless set), for an
    /// application that adds its own deciders.
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
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
        self.registry = registry;
        self
    }

    pub fn with_provider(mut self, provider: impl ModelProvider) -> Self {
        self.provider = Some(Arc::new(provider));
        self
    }

    /// The routes behind the Host and Origin checks; the bind address is
    /// the config's (a server that binds elsewhere lists its address in
    /// `server.allowedHosts`).
    pub fn router(self) -> Router {
        let bind = self.config.bind.map(|addr| addr.ip());
        self.build(bind).router
    }

    /// Who is told about each question (`toolConfirmation.notify`), its
    /// links signed with the first signing key, else with a random key made
    /// now (links then die with a restart).
    fn notifier(&self) -> Option<Notifier> {
        // `serve` checked the config; an embedding application did not.
        let plan = match self.config.notify_plan() {
            Ok(plan) => plan?,
            Err(e) => {
                tracing::error!("{e}: nobody is notified");
                return None;
            }
        };
        let keys = self.config.signing_keys().unwrap_or_else(|e| {
            tracing::error!("{e}: notification links get a random key");
            Vec::new()
        });
        let links = match Links::new(keys) {
            Some(links) => links,
            None => {
                tracing::info!(
                    "notification links are signed with a key made at start: they stop working when toolgate restarts (set toolConfirmation.signingKeys to keep them)"
                );
                Links::random()
                    .inspect_err(|e| tracing::error!("{e}: nobody is notified"))
                    .ok()?
            }
        };
        Notifier::new(plan, links, self.clock.clone())
            .inspect_err(|e| tracing::error!("{e}: nobody is notified"))
            .ok()
    }

    /// The routes, and what serving them runs; `bind` is the address served.
    fn build(self, bind: Option<IpAddr>) -> Built {
        let servers = self.mcp_servers();
        let notifier = self.notifier();
        let links = notifier.as_ref().map(|n| n.links().clone());
        let metrics = Metrics::new();
        let (provider_label, system) = match self.provider {
            Some(_) => ("application", "application"),
            None => (
                provider_name(self.config.model.provider),
                provider_system(self.config.model.provider),
            ),
        };
        let model = self.config.model.model.as_deref().unwrap_or(system).into();
        let provider = self.provider.unwrap_or_else(|| {
            model_provider(&self.config.model, self.ids.clone()).unwrap_or_else(|e| {
                // Reported on every turn, where the user sees it.
                tracing::error!("{e}");
                Arc::new(Unavailable(e.to_string()))
            })
        });
        let provider: Arc<dyn ModelProvider> = Arc::new(Measured {
            inner: provider,
            metrics: metrics.clone(),
            provider: provider_label,
            system,
            model,
        });
        let adk = adk_agent(&self.config.model).unwrap_or_else(|e| {
            // `serve` checked the config; an embedding application did not.
            tracing::error!("{e}");
            None
        });
        let toolbox = Toolbox::new(self.registry);
        mcp::start(servers, &toolbox);
        let tasks = TaskTracker::new();
        let store = self
            .store
            .with_retention(self.config.store.audit_retention())
            .with_tasks(&tasks)
            .with_metrics(&metrics);
        // A config that loaded has valid limits; if not, none holds.
        let rates = self.config.limits.rates().unwrap_or_else(|e| {
            tracing::error!("{e}: no rate limit holds");
            Default::default()
        });
        let limiter = store.limiter(rates, tasks.clone(), &self.instance);
        let turn_logs = store
            .turn_logs(&self.instance)
            .map(|logs| logs.following(tasks.clone(), self.config.store.max_followed_turns()));
        let gate = Gate::new(
            toolbox,
            store.clone(),
            self.clock,
            self.ids.clone(),
            self.config.confirmation_window(),
            Duration::from_millis(self.config.tools.timeout_ms),
        )
        .with_signer(self.signer)
        .with_policy(self.policy)
        .with_result_retention(self.config.store.audit_retention())
        .with_instance(self.instance)
        .with_roles(self.config.roles())
        .with_notifier(notifier)
        .with_metrics(metrics.clone())
        .with_limiter(limiter.clone())
        .with_record_content(self.config.telemetry.record_content);
        let gate = match self.config.tool_confirmation.allowed_tools_storage {
            AllowedToolsStorage::Storage => gate,
            AllowedToolsStorage::Memory => {
                gate.with_remembered_store(Store::memory().with_metrics(&metrics))
            }
        };
        let gate = match adk {
            Some(_) => gate.with_upstream(),
            None => gate,
        };
        let agent = Agent {
            gate: gate.clone(),
            provider,
            ids: self.ids,
            max_steps: self.config.stream.max_steps.max(1),
            denied_as: self.config.tool_confirmation.denied_as,
            upstream: adk.map(Arc::new),
            turn_logs: turn_logs.clone(),
        };
        let agent = Arc::new(agent);
        // A config that loaded has a readable version; if not, the
        // newest (said in the log, as the config check says at start).
        let client_version = self.config.client_version().unwrap_or_else(|e| {
            tracing::error!("{e}: chunks are fitted to the newest client");
            crate::protocol::ClientVersion::LATEST
        });
        if turn_logs.is_some() {
            // Its turns are its own while it beats (a lease others judge).
            gate.keep_beating();
        }
        let draining = Arc::new(AtomicBool::new(false));
        // `limits.concurrentStreams` is this cap, when set.
        let per_principal = match limiter.rates().concurrent_streams {
            Some(n) => usize::try_from(n.get()).unwrap_or(usize::MAX),
            None => self.config.stream.max_turns_per_user.max(1),
        };
        let runs = Arc::new(
            Runs::new(RunLimits {
                per_principal,
                total: self.config.stream.max_turns.max(1),
                stall: Duration::from_secs(self.config.stream.stalled_reader_secs.max(1)),
                held: Duration::from_secs(self.config.stream.held_turn_secs.max(1)),
            })
            .with_tasks(tasks.clone())
            .with_turn_logs(turn_logs)
            .with_takeover(crate::run::continue_held(
                agent.clone(),
                client_version,
                metrics.clone(),
            )),
        );
        let state = HttpState {
            agent: agent.clone(),
            keep_alive: self.config.keep_alive(),
            max_body_bytes: self.config.stream.max_body_bytes,
            principal_header: self.config.auth.principal_header.clone(),
            // A config that loaded has valid keys; if not, nobody gets in.
            api_keys: Arc::new(self.config.api_keys().unwrap_or_else(|e| {
                tracing::error!("{e}: every request is refused");
                vec![crate::transport::ApiKey {
                    principal: String::new(),
                    sha256: [0; 32],
                    admin: false,
                }]
            })),
            turns: Arc::new(crate::run::Turns {
                agent: agent.clone(),
                runs: runs.clone(),
                limiter: limiter.clone(),
                metrics: metrics.clone(),
                protocol: self.config.tool_confirmation.protocol,
                flow: self.config.tool_confirmation.flow,
                client_version,
                trust_traceparent: self.config.telemetry.trust_traceparent,
            }),
            live: crate::transport::LiveLimits {
                idle: Duration::from_secs(self.config.stream.live_idle_secs.max(1)),
                frames_per_sec: self.config.stream.live_frames_per_sec,
                dialect: self.config.live.dialect,
                key_deadline: Duration::from_secs(self.config.live.key_deadline_secs.max(1)),
                keyless_frame_bytes: self.config.live.keyless_frame_bytes,
            },
            tasks: tasks.clone(),
            links,
            metrics: metrics.clone(),
            metrics_route: match &self.config.metrics {
                m if !m.enabled || m.bind.is_some() => MetricsRoute::Off,
                m if m.public => MetricsRoute::Public,
                _ => MetricsRoute::Keyed,
            },
            draining: draining.clone(),
            required_mcp: self
                .config
                .mcp_servers
                .iter()
                .filter(|(_, server)| server.required)
                .map(|(name, _)| name.clone())
                .collect(),
            inbox_feeds: Arc::new(crate::transport::InboxFeeds::new(
                crate::transport::FeedLimits {
                    per_principal: self.config.stream.max_inbox_streams_per_user,
                    total: self.config.stream.max_inbox_streams,
                },
            )),
        };
        let metrics_routes = crate::transport::metrics_routes(state.clone());
        let router = router(state);
        let router = if self.config.demo.enabled {
            router.merge(crate::transport::demo::routes())
        } else {
            router
        };
        // A config that loaded has a valid guard; if not, only loopback
        // names and toolgate's own origin get in.
        let guard = self.config.guard().unwrap_or_else(|e| {
            tracing::error!("{e}: only localhost is served, to its own origin");
            crate::transport::guard::Guard::default()
        });
        // The metrics listener's guard serves its own address instead.
        let metrics_guard = guard.clone();
        let guard = match bind {
            Some(bind) => guard.with_bind(bind),
            None => guard,
        };
        let body = crate::transport::BodyTimes {
            silence: self.config.server.body_read(),
            total: self.config.server.body_total(),
        };
        let router = crate::transport::protect(router, guard, body);
        Built {
            router,
            metrics_routes,
            metrics_guard,
            body,
            gate,
            store,
            tasks,
            runs,
            draining,
            limiter,
        }
    }

    /// Serves until the process is stopped. Accepted sockets get
    /// `TCP_NODELAY`: with Nagle on, each short streamed response stalls
    /// about 40 ms on a delayed ACK.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        self.serve_until(listener, std::future::pending()).await
    }

    /// Serves until `shutdown` completes, then drains and stops:
    ///
    /// 1. At once: no new connections, `/readyz` answers 503 `draining`
    ///    (also on `metrics.bind`, which serves until step 3), and held
    ///    turns stop waiting (their messages end as the finish flow's do,
    ///    the question open in the store for the client's next request).
    /// 2. Up to `server.drainSecs` (default 30) for the requests and turns
    ///    in flight to end on their own; then every connection and turn
    ///    left is closed.
    /// 3. Up to [`STOP`] for the server's tasks (sockets' writers); then
    ///    [`Gate::shutdown`] waits for the calls claimed after an approval to
    ///    record their outcomes (at most the tool timeout and a grace), and
    ///    every MCP server is closed (stdio servers' processes ended).
    ///
    /// Request heads must arrive within `server.headerReadSecs`; at most
    /// `server.maxConnections` are open.
    pub async fn serve_until(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let bind = listener.local_addr()?.ip();
        let max_connections = accept::max_connections(
            self.config.server.max_connections,
            accept::open_files_limit(),
        );
        let limits = accept::Limits {
            header_read: self.config.server.header_read(),
            max_connections,
            per_peer: accept::per_peer(
                self.config.server.max_connections_per_peer,
                max_connections,
            ),
        };
        tracing::info!(
            "serving at most {} connections, {} from one address",
            limits.max_connections,
            limits.per_peer
        );
        let retention = self.config.store.audit_retention();
        let drain = self.config.server.drain();
        let clock = self.clock.clone();
        let metrics_bind = Some(&self.config.metrics)
            .filter(|m| m.enabled)
            .and_then(|m| m.bind);
        let Built {
            router,
            metrics_routes,
            metrics_guard,
            body,
            gate,
            store,
            tasks,
            runs,
            draining,
            limiter,
        } = self.build(Some(bind));
        let toolbox = gate.toolbox().clone();
        let purge = tasks.spawn(purge_expired(
            gate.clone(),
            store.clone(),
            clock,
            retention,
            limiter,
        ));
        let checkpoints = tasks.spawn(checkpoint(store));
        // Scraped until the main port has drained.
        let scraping = CancellationToken::new();
        if let Some(at) = metrics_bind {
            let listener = TcpListener::bind(at).await?;
            let local = listener.local_addr()?;
            tracing::info!("metrics at http://{local}/metrics");
            // The main port's Host and Origin checks and accept loop: the
            // header timeout and a connection cap of its own (a scraper
            // needs few).
            let routes = crate::transport::protect(
                metrics_routes,
                metrics_guard.with_bind(local.ip()),
                body,
            );
            let max_connections = METRICS_CONNECTIONS.min(limits.max_connections);
            let limits = accept::Limits {
                header_read: limits.header_read,
                max_connections,
                per_peer: accept::per_peer(None, max_connections),
            };
            let stop = scraping.clone();
            tasks.spawn(accept::serve(
                listener,
                routes,
                limits,
                stop.cancelled_owned(),
                Duration::from_secs(1),
            ));
        }
        let held = gate.clone();
        let began = Arc::new(std::sync::OnceLock::new());
        let begin = began.clone();
        let shutdown = async move {
            shutdown.await;
            begin.get_or_init(tokio::time::Instant::now);
            tracing::info!(
                "draining: up to {} s for the turns in flight",
                drain.as_secs()
            );
            // `/readyz` says so from the moment the server starts to stop.
            draining.store(true, Ordering::Relaxed);
            // Nobody can decide here any more: held turns end their
            // messages with the question open, kept in the store.
            held.release_held();
        };
        accept::serve(listener, router, limits, shutdown, drain).await;
        // What is left of the window goes to the turns no connection
        // waited for: a socket's.
        let end = began.get().map(|at| *at + drain);
        let left = end.map_or(Duration::ZERO, |end| {
            end.saturating_duration_since(tokio::time::Instant::now())
        });
        if tokio::time::timeout(left, runs.idle()).await.is_err() {
            tracing::warn!("turns still running after {} s: stopped", drain.as_secs());
        }
        scraping.cancel();
        // No connection is left to read a turn or resume a held one.
        purge.abort();
        checkpoints.abort();
        runs.stop();
        tasks.close();
        if tokio::time::timeout(STOP, tasks.wait()).await.is_err() {
            tracing::warn!(
                "{} tasks still running after {} s; stopping without them",
                tasks.len(),
                STOP.as_secs()
            );
        }
        gate.shutdown().await;
        toolbox.shutdown().await;
        Ok(())
    }
}

/// The routes, and what serving them runs.
struct Built {
    router: Router,
    /// `/metrics`, `/livez` and `/readyz` alone, for `metrics.bind`.
    metrics_routes: Router,
    /// The Host and Origin checks for `metrics.bind`, given its address.
    metrics_guard: crate::transport::guard::Guard,
    body: crate::transport::BodyTimes,
    gate: Gate,
    /// The gate's store, counted in the app's metrics.
    store: Store,
    /// The turns', sockets' and purge tasks.
    tasks: TaskTracker,
    runs: Arc<Runs>,
    /// Set when serving starts to stop.
    draining: Arc<AtomicBool>,
    limiter: Limiter,
}

/// Moves the store's write-ahead log into its file once a second, so that
/// no request waits for it (SQLite otherwise does it in the write that
/// fills the log).
async fn checkpoint(store: Store) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        if let Err(e) = store.checkpoint().await {
            tracing::warn!("checkpointing the store failed: {e}");
        }
    }
}

/// Forgets expired confirmations and remembered approvals whose window is
/// over, audit events past `retention`, and the limits of principals idle
/// for a minute, once a minute.
async fn purge_expired(
    gate: Gate,
    store: Store,
    clock: Clock,
    retention: Duration,
    limiter: Limiter,
) {
    let mut every = tokio::time::interval(Duration::from_secs(60));
    loop {
        every.tick().await;
        limiter.prune();
        if let Err(e) = gate.sweep().await {
            tracing::warn!("logging timed-out confirmations failed: {e}");
        }
        match store.purge_expired(clock.now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!("forgot {n} expired confirmations and approval windows"),
            Err(e) => tracing::warn!("purging expired confirmations failed: {e}"),
        }
        let cutoff = clock
            .now_ms()
            .saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX));
        if let Err(e) = store.prune_audit(cutoff).await {
            tracing::warn!("pruning the audit log failed: {e}");
        }
    }
}

/// Opens the store the config names, and says what it is.
pub async fn open_store(config: &StoreConfig) -> Result<(Store, String), StoreError> {
    match config.kind {
        StoreKind::Memory => Ok((
            Store::memory(),
            "memory (nothing survives a restart)".to_owned(),
        )),
        StoreKind::Sqlite => {
            let path = config.sqlite_path();
            Ok((
                Store::sqlite(&path)?,
                format!("sqlite at {}", path.display()),
            ))
        }
        StoreKind::Redis => {
            let url = config.url.as_deref().ok_or_else(|| {
                StoreError::Backend(BackendError::Config(
                    "store.kind redis needs store.url".into(),
                ))
            })?;
            let prefix = config.key_prefix.as_deref().unwrap_or("toolgate:");
            // Credentials stay out of the log.
            let shown = match (url.find("://"), url.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}***{}", &url[..scheme + 3], &url[at..])
                }
                _ => url.to_owned(),
            };
            Ok((
                Store::redis(url, prefix).await?,
                format!("redis at {shown}, keys {prefix}*"),
            ))
        }
    }
}

/// A provider's name as metrics label it.
fn provider_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Scripted => "scripted",
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Gemini => "gemini",
        ProviderKind::Adk => "adk",
    }
}

/// A provider's `gen_ai.provider.name` (OpenTelemetry's GenAI conventions).
fn provider_system(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Scripted => "scripted",
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Gemini => "gcp.gemini",
        ProviderKind::Adk => "adk",
    }
}

/// The model the config names.
pub fn model_provider(
    config: &ModelConfig,
    ids: Ids,
) -> Result<Arc<dyn ModelProvider>, ConfigError> {
    let Some((upstream, options)) = config.upstream()? else {
        let delay = Duration::from_millis(config.delta_delay_ms);
        return Ok(Arc::new(ScriptedModel::new(ids).with_delta_delay(delay)));
    };
    let upstream = Upstream::new(upstream).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    Ok(match config.provider {
        ProviderKind::Openai => Arc::new(OpenAi::new(upstream, options, ids)),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(upstream, options, ids)),
        ProviderKind::Gemini => Arc::new(Gemini::new(upstream, options, ids)),
        ProviderKind::Scripted => Arc::new(ScriptedModel::new(ids)),
        // The agent runs its own model: a turn never asks this one.
        ProviderKind::Adk => Arc::new(Unavailable("the ADK agent runs its own model".into())),
    })
}

/// The ADK agent the config names, if it names one.
pub fn adk_agent(config: &ModelConfig) -> Result<Option<Adk>, ConfigError> {
    if config.provider != ProviderKind::Adk {
        return Ok(None);
    }
    let Some((upstream, options)) = config.upstream()? else {
        return Ok(None);
    };
    let upstream = Upstream::new(upstream).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    Ok(Some(Adk::new(upstream, options.model)))
}

/// A model that could not be set up: every turn says why.
struct Unavailable(String);

impl ModelProvider for Unavailable {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let error = ProviderError::Request(self.0.clone());
        Box::pin(futures::stream::once(async move { Err(error) }))
    }
}
