//! [`Settings`]: the config, checked and read once into what the app runs
//! with. Every default, floor and environment variable is resolved here;
//! nothing downstream reads the [`Config`] again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::faces::guard::Guard;
use crate::faces::{ApiKey, LiveDialect, MetricsRoute};
use crate::notify::Plan as NotifyPlan;
use crate::policy::{Mode, Policy};
use crate::protocol::{ClientVersion, ConfirmationFlow, ConfirmationProtocol, DeniedAs};
use crate::provider::ModelOptions;
use crate::provider::http::Upstream;
use crate::store::Rates;
use crate::tools::Registry;
use crate::tools::mcp::McpServer;

use super::checks;
use super::{AllowedToolsStorage, Config, ConfigError, ProviderKind, TelemetryConfig};

/// What a toolgate server runs with, made from a [`Config`] by
/// [`Settings::new`], which checks every key once.
pub struct Settings {
    /// The address to listen on, if the config names one.
    pub bind: Option<SocketAddr>,
    pub model: ModelSettings,
    pub stream: StreamSettings,
    pub live: LiveSettings,
    /// The built-in, HTTP and client-side tools.
    pub registry: Registry,
    /// `tools.timeoutMs`: how long one tool call may run.
    pub tool_timeout: Duration,
    pub mcp_servers: Vec<McpServer>,
    /// The MCP servers `/readyz` waits for (`required: true`).
    pub required_mcp: Vec<String>,
    pub confirmation: ConfirmationSettings,
    pub policy: Policy,
    /// Who is told about each question; `None` when nobody is.
    pub notify: Option<NotifyPlan>,
    /// `toolConfirmation.signingKeys`, `env:NAME` ones read; the first signs.
    pub signing_keys: Vec<String>,
    pub auth: AuthSettings,
    /// The Host and Origin checks.
    pub guard: Guard,
    pub server: ServerSettings,
    pub store: StoreSettings,
    pub metrics: MetricsSettings,
    /// `limits`.
    pub rates: Rates,
    pub telemetry: TelemetryConfig,
    /// `protocol.clientVersion`; unset, the newest release known.
    pub client_version: ClientVersion,
    /// `demo.enabled`: serve the demo chat at `/`.
    pub demo: bool,
    pub mcp: McpSettings,
}

/// `mcp`: toolgate as an MCP server.
#[derive(Debug, Clone)]
pub struct McpSettings {
    pub enabled: bool,
    pub retry_wait: Duration,
    pub hold: Duration,
    /// stdio's principal: `TOOLGATE_MCP_PRINCIPAL`, else `mcp.principal`.
    pub principal: Option<String>,
    /// `mcp.maxSessionsPerUser` and `mcp.maxSessions`.
    pub sessions: crate::run::ShareLimits,
}

/// `model`: what answers a turn.
#[derive(Debug)]
pub struct ModelSettings {
    pub provider: ProviderKind,
    /// `model.model`, as metrics and traces name it (unset: the provider's
    /// system name).
    pub name: Option<String>,
    /// The upstream and what to ask it; `None` for `scripted`.
    pub upstream: Option<(Upstream, ModelOptions)>,
    /// `scripted` only: the pause before each delta.
    pub delta_delay: Duration,
}

/// `stream`, each value at its floor.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    pub keep_alive: Duration,
    pub max_body_bytes: usize,
    pub max_steps: usize,
    /// Turns in flight per principal: `limits.concurrentStreams`, else
    /// `stream.maxTurnsPerUser`.
    pub max_turns_per_user: usize,
    pub max_turns: usize,
    pub stalled_reader: Duration,
    pub held_turn: Duration,
    pub max_inbox_streams_per_user: usize,
    pub max_inbox_streams: usize,
}

/// `live` and the `/live` rates of `stream`.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    pub dialect: LiveDialect,
    pub idle: Duration,
    pub frames_per_sec: u32,
    pub key_deadline: Duration,
    pub keyless_frame_bytes: usize,
}

/// `toolConfirmation`, less its policy and notification targets.
#[derive(Debug, Clone)]
pub struct ConfirmationSettings {
    pub protocol: ConfirmationProtocol,
    pub flow: ConfirmationFlow,
    pub denied_as: DeniedAs,
    pub mode: Mode,
    /// How long an issued confirmation can be answered (`timeout`, else
    /// `expirySecs`).
    pub window: Duration,
    pub allowed_tools_storage: AllowedToolsStorage,
}

/// `auth`.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub principal_header: Option<String>,
    pub api_keys: Vec<ApiKey>,
    /// Each principal's roles, from `auth.roles` and the keys' `roles`.
    pub roles: HashMap<String, Vec<String>>,
    /// `auth.oidc`, checked.
    pub oidc: Option<crate::faces::OidcSettings>,
}

/// `server`, each timeout at its floor.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub header_read: Duration,
    pub body_read: Duration,
    pub body_total: Duration,
    pub max_connections: Option<usize>,
    pub max_connections_per_peer: Option<usize>,
    pub drain: Duration,
}

/// `store`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    pub backend: StoreBackend,
    /// How long the audit log keeps an event (and, with Redis, a chat's
    /// remembered approvals).
    pub audit_retention: Duration,
    /// Redis: turns of other instances followed at once for resumes, in
    /// all and of one principal.
    pub followed: crate::store::FollowLimits,
    /// `audit.signingKey`: what signs the audit chain; `None`: unsigned.
    pub audit_key: Option<crate::store::chain::AuditKey>,
}

/// Where the store keeps its state.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreBackend {
    Memory,
    Sqlite { path: PathBuf },
    Redis { url: String, key_prefix: String },
}

/// `metrics`.
#[derive(Debug, Clone, Copy)]
pub struct MetricsSettings {
    /// `/metrics` on the main port.
    pub route: MetricsRoute,
    /// A listener of its own for `/metrics`, when enabled there.
    pub bind: Option<SocketAddr>,
}

impl Settings {
    /// Reads, parses and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::new(Config::load(path)?)
    }

    /// Parses and checks a config's text.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        Self::new(Config::from_yaml(text)?)
    }

    /// Checks every key of `config`, reads the environment variables it
    /// names, and fills in the defaults.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        let rates = checks::rates(&config.limits)?;
        let client_version = checks::client_version(&config)?;
        let confirmation = &config.tool_confirmation;
        let policy = Policy::new(
            confirmation.mode,
            &confirmation.tool_policies,
            confirmation.tools.clone(),
        )
        .and_then(|policy| policy.with_redaction(&confirmation.redaction))
        .map_err(ConfigError::Policy)?;
        let notify = crate::notify::plan(
            &confirmation.notify,
            &confirmation.tools,
            confirmation.public_url.as_deref(),
        )
        .map_err(ConfigError::Notify)?;
        let signing_keys = checks::signing_keys(&confirmation.signing_keys)?;
        let model = model(&config)?;
        let registry = checks::registry(&config.tools)?;
        let mcp_servers =
            crate::tools::mcp::servers(&config.mcp_servers).map_err(ConfigError::Mcp)?;
        let api_keys = checks::api_keys(&config.auth.api_keys)?;
        let oidc = checks::oidc(config.auth.oidc.as_ref())?;
        checks::approver_identity(&confirmation.tools, &config.auth)?;
        let guard = Guard::new(
            &config.server.allowed_hosts,
            &config.cors.allowed_origins,
            !config.auth.api_keys.is_empty() || oidc.is_some(),
        )
        .map_err(ConfigError::Guard)?;
        let store = store(&config)?;
        let secs = |secs: u64| Duration::from_secs(secs.max(1));
        let s = &config.stream;
        let stream = StreamSettings {
            keep_alive: secs(s.keep_alive_secs),
            max_body_bytes: s.max_body_bytes,
            max_steps: s.max_steps.max(1),
            max_turns_per_user: match rates.concurrent_streams {
                Some(n) => usize::try_from(n.get()).unwrap_or(usize::MAX),
                None => s.max_turns_per_user.max(1),
            },
            max_turns: s.max_turns.max(1),
            stalled_reader: secs(s.stalled_reader_secs),
            held_turn: secs(s.held_turn_secs),
            max_inbox_streams_per_user: s.max_inbox_streams_per_user,
            max_inbox_streams: s.max_inbox_streams,
        };
        let live = LiveSettings {
            dialect: config.live.dialect,
            idle: secs(s.live_idle_secs),
            frames_per_sec: s.live_frames_per_sec,
            key_deadline: secs(config.live.key_deadline_secs),
            keyless_frame_bytes: config.live.keyless_frame_bytes,
        };
        let mcp = McpSettings {
            principal: checks::mcp(&config.mcp, std::env::var("TOOLGATE_MCP_PRINCIPAL").ok())?,
            enabled: config.mcp.enabled,
            retry_wait: Duration::from_millis(config.mcp.retry_wait_ms),
            hold: Duration::from_secs(config.mcp.hold_seconds),
            sessions: crate::run::ShareLimits {
                per_principal: config.mcp.max_sessions_per_user,
                total: config.mcp.max_sessions,
            },
        };
        let server = &config.server;
        let server = ServerSettings {
            header_read: secs(server.header_read_secs),
            body_read: secs(server.body_read_secs),
            body_total: secs(server.body_total_secs),
            max_connections: server.max_connections,
            max_connections_per_peer: server.max_connections_per_peer,
            // `0` is allowed: connections are closed at once.
            drain: Duration::from_secs(server.drain_secs),
        };
        let m = &config.metrics;
        let metrics = MetricsSettings {
            route: match m {
                m if !m.enabled || m.bind.is_some() => MetricsRoute::Off,
                m if m.public => MetricsRoute::Public,
                _ => MetricsRoute::Keyed,
            },
            bind: m.bind.filter(|_| m.enabled),
        };
        let confirmation = ConfirmationSettings {
            protocol: confirmation.protocol,
            flow: confirmation.flow,
            denied_as: confirmation.denied_as,
            mode: confirmation.mode,
            window: match confirmation.timeout {
                Some(ms) => Duration::from_millis(ms),
                None => Duration::from_secs(confirmation.expiry_secs),
            },
            allowed_tools_storage: confirmation.allowed_tools_storage,
        };
        Ok(Self {
            bind: config.bind,
            model,
            stream,
            live,
            registry,
            tool_timeout: Duration::from_millis(config.tools.timeout_ms),
            required_mcp: config
                .mcp_servers
                .iter()
                .filter(|(_, server)| server.required)
                .map(|(name, _)| name.clone())
                .collect(),
            mcp_servers,
            confirmation,
            policy,
            notify,
            signing_keys,
            auth: AuthSettings {
                principal_header: config.auth.principal_header.clone(),
                api_keys,
                roles: checks::roles(&config.auth),
                oidc,
            },
            guard,
            server,
            store,
            metrics,
            rates,
            telemetry: config.telemetry.clone(),
            client_version,
            demo: config.demo.enabled,
            mcp,
        })
    }
}

/// `model`: the upstream's client made, its key read.
fn model(config: &Config) -> Result<ModelSettings, ConfigError> {
    let m = &config.model;
    let upstream = match m.upstream()? {
        Some((upstream, options)) => Some((
            Upstream::new(upstream).map_err(ConfigError::Model)?,
            options,
        )),
        None => None,
    };
    Ok(ModelSettings {
        provider: m.provider,
        name: m.model.clone(),
        upstream,
        delta_delay: Duration::from_millis(m.delta_delay_ms),
    })
}

impl StoreSettings {
    /// `store` and `audit.signingKey` alone: what `toolgate audit` needs.
    /// The rest of the config is not checked and its environment is not
    /// read, so an operator exporting the audit log needs no API key's or
    /// signing key's secret of the server.
    pub fn from_config(config: &Config) -> Result<Self, ConfigError> {
        store(config)
    }
}

/// `store`: the backend and where it is.
fn store(config: &Config) -> Result<StoreSettings, ConfigError> {
    use super::StoreKind;
    let s = &config.store;
    let backend = match s.kind {
        StoreKind::Memory => StoreBackend::Memory,
        StoreKind::Sqlite => StoreBackend::Sqlite {
            path: s.sqlite_path(),
        },
        StoreKind::Redis => StoreBackend::Redis {
            url: s
                .url
                .clone()
                .ok_or_else(|| ConfigError::invalid("store.url", "store.kind redis needs it"))?,
            key_prefix: s.key_prefix.clone().unwrap_or_else(|| "toolgate:".into()),
        },
    };
    Ok(StoreSettings {
        backend,
        audit_retention: checks::retention(s.audit_retention_days),
        followed: crate::store::FollowLimits {
            total: s
                .max_followed_turns
                .unwrap_or(crate::store::FOLLOWED)
                .max(1),
            per_principal: s
                .max_followed_turns_per_user
                .unwrap_or(crate::store::FOLLOWED_PER_USER)
                .max(1),
        },
        audit_key: checks::audit_key(&config.audit)?,
    })
}
