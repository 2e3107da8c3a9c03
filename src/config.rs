//! The YAML config file. Every field is optional; an unknown key is an error
//! that names it.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use reqwest::header::HeaderMap;

use crate::call::QualifiedName;
use crate::notify::{MIN_KEY_BYTES, Plan as NotifyPlan};
use crate::policy::{Mode, NotifyTarget, Policy, ToolPolicies, ToolRule};
use crate::protocol::{ClientVersion, ConfirmationFlow, ConfirmationProtocol, DeniedAs};
use crate::provider::ModelOptions;
pub use crate::provider::http::Secret;
use crate::provider::http::{UpstreamConfig, header};
use crate::store::Rates;
use crate::tools::Registry;
use crate::tools::client::{ClientTool, ClientToolConfig};
use crate::tools::http::HttpToolConfig;
use crate::tools::mcp::{McpServer, McpServerConfig};
use crate::transport::guard::Guard;
use crate::transport::{ApiKey, LiveDialect};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config: {0}")]
    Parse(#[from] yaml_serde::Error),
    #[error("invalid config: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on (default `127.0.0.1:8080`; `--bind` wins).
    pub bind: Option<SocketAddr>,
    pub model: ModelConfig,
    pub stream: StreamConfig,
    pub tools: ToolsConfig,
    pub tool_confirmation: ConfirmationConfig,
    pub protocol: ProtocolConfig,
    pub auth: AuthConfig,
    pub store: StoreConfig,
    pub demo: DemoConfig,
    pub server: ServerConfig,
    pub cors: CorsConfig,
    pub live: LiveConfig,
    pub metrics: MetricsConfig,
    pub limits: LimitsConfig,
    pub telemetry: TelemetryConfig,
    /// MCP servers whose tools are offered as `mcp--<server>--<tool>`.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
}

/// `demo`: the React chat of `frontend-demo/`, built into the binary.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DemoConfig {
    /// Serve it at `/` (default `true`).
    pub enabled: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// `metrics`: Prometheus metrics at `GET /metrics`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Export them (default `true`).
    pub enabled: bool,
    /// Serve `/metrics` on this address instead, with no API key (an
    /// internal network's); the main port then has none.
    pub bind: Option<SocketAddr>,
    /// On the main port, serve `/metrics` without an API key (default
    /// `false`: it needs one when `auth.apiKeys` are set).
    pub public: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            bind: None,
            public: false,
        }
    }
}

/// `limits`: rate limits per principal, and per tool (all principals
/// together). Each absent limit is no limit.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// New turns a principal may start per minute (a burst of as many).
    pub turns_per_minute: Option<i64>,
    /// Turns a principal may have in flight at once (streaming, or held
    /// for an answer); replaces `stream.maxTurnsPerUser`, and holds for
    /// `anonymous` too.
    pub concurrent_streams: Option<i64>,
    /// Tool calls a principal's turns may run per minute.
    pub tool_calls_per_minute: Option<i64>,
    /// Per tool, by name or qualified name as in `toolConfirmation.tools`.
    pub tools: BTreeMap<String, ToolLimitConfig>,
}

/// `limits.tools.<name>`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolLimitConfig {
    /// Calls of this tool per minute, all principals together.
    pub calls_per_minute: i64,
}

impl LimitsConfig {
    /// The limits, checked: each a whole number from 1.
    pub fn rates(&self) -> Result<Rates, ConfigError> {
        let positive = |value: i64, key: &str| {
            u32::try_from(value)
                .ok()
                .and_then(NonZeroU32::new)
                .ok_or_else(|| {
                    ConfigError::Invalid(format!(
                        "limits.{key} must be a whole number from 1 to {} (leave it out for no limit), not {value}",
                        u32::MAX
                    ))
                })
        };
        let optional = |value: Option<i64>, key: &str| value.map(|v| positive(v, key)).transpose();
        let mut tools = BTreeMap::new();
        for (name, limit) in &self.tools {
            let key = format!("tools.{name}.callsPerMinute");
            let n = positive(limit.calls_per_minute, &key)?;
            if tools
                .insert(QualifiedName::of(name), (name.clone(), n))
                .is_some()
            {
                return Err(ConfigError::Invalid(format!(
                    "limits.tools names `{name}` twice (by name and by qualified name)"
                )));
            }
        }
        Ok(Rates {
            turns_per_minute: optional(self.turns_per_minute, "turnsPerMinute")?,
            tool_calls_per_minute: optional(self.tool_calls_per_minute, "toolCallsPerMinute")?,
            concurrent_streams: optional(self.concurrent_streams, "concurrentStreams")?,
            tools,
        })
    }
}

/// `telemetry`: what the traces keep (they are exported when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set).
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Keep a tool call's arguments and result on its span, 4 KiB of each
    /// at most (default `false`: they may hold personal data).
    pub record_content: bool,
    /// Continue the trace a request's W3C `traceparent` names (default
    /// `false`: any client could put its turns into a trace of its
    /// choosing; set it when a trusted proxy or backend sets the header).
    pub trust_traceparent: bool,
}

/// `server`: which host names are served, and how long slow clients are waited for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Host names (or IPs) served besides `localhost`, `127.0.0.1`, `[::1]`
    /// and the bind address: the names a proxy forwards. `*`: any (needs
    /// `auth.apiKeys`).
    pub allowed_hosts: Vec<String>,
    /// Seconds a client has to send a request's headers; a keep-alive
    /// connection idle this long is closed.
    pub header_read_secs: u64,
    /// The longest silence while a request body is read.
    pub body_read_secs: u64,
    /// The longest a whole request body may take to arrive, however it
    /// trickles in.
    pub body_total_secs: u64,
    /// Open connections at most (WebSockets included); beyond, a new one is
    /// closed at once. Unset: below the open-files limit.
    pub max_connections: Option<usize>,
    /// Open connections from one client address at most (an IPv6 /64
    /// counts as one); beyond, a new one is closed at once. Unset: a
    /// quarter of `maxConnections`. Behind a proxy on the same host every
    /// connection comes from the proxy: raise it to `maxConnections` there
    /// and let the proxy limit its clients.
    pub max_connections_per_peer: Option<usize>,
    /// Seconds a stopping server gives the requests and streams in flight
    /// to finish before it closes their connections.
    pub drain_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            header_read_secs: 10,
            body_read_secs: 30,
            body_total_secs: 60,
            max_connections: None,
            max_connections_per_peer: None,
            drain_secs: 30,
        }
    }
}

impl ServerConfig {
    pub fn header_read(&self) -> Duration {
        Duration::from_secs(self.header_read_secs.max(1))
    }

    pub fn body_read(&self) -> Duration {
        Duration::from_secs(self.body_read_secs.max(1))
    }

    pub fn body_total(&self) -> Duration {
        Duration::from_secs(self.body_total_secs.max(1))
    }

    /// `0` is allowed: connections are closed at once.
    pub fn drain(&self) -> Duration {
        Duration::from_secs(self.drain_secs)
    }
}

/// `cors`: browser origins other than toolgate's own that may act through it.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CorsConfig {
    /// Origins (`https://app.example.com`) whose pages may send requests
    /// and open `/live`. `*`: any (needs `auth.apiKeys`).
    pub allowed_origins: Vec<String>,
}

/// `live`: the WebSocket at `/live` (its rates are in `stream`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LiveConfig {
    /// The frame protocol: `ai-sdk` (the AI SDK's `WebSocketChatTransport`)
    /// or `adk-stream-protocol` (that app's own transport).
    pub dialect: LiveDialect,
    /// With `auth.apiKeys`: seconds a socket opened without a key has to
    /// send a frame with a valid one before it is closed.
    pub key_deadline_secs: u64,
    /// With `auth.apiKeys`: the largest frame of a socket that has not yet
    /// presented a valid key (bytes); a larger one closes it unread.
    pub keyless_frame_bytes: usize,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            dialect: LiveDialect::default(),
            key_deadline_secs: 10,
            keyless_frame_bytes: 64 << 10,
        }
    }
}

/// Dexto's `allowedToolsStorage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AllowedToolsStorage {
    #[default]
    Storage,
    Memory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// Nothing survives a restart: tests and throwaway runs.
    Memory,
    /// One file; the default.
    #[default]
    Sqlite,
    /// Shared by several instances.
    Redis,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreConfig {
    pub kind: StoreKind,
    /// The SQLite file; default `toolgate.sqlite3` in the user's data
    /// directory (e.g. `~/.local/share/toolgate/`).
    pub path: Option<PathBuf>,
    /// The Redis server, e.g. `redis://127.0.0.1:6379/0`.
    pub url: Option<String>,
    /// Prefix of every Redis key (default `toolgate:`); instances of one
    /// deployment share it.
    pub key_prefix: Option<String>,
    /// Days the audit log keeps an event (default 90); with Redis also how
    /// long a chat's remembered approvals and approve-next budgets live.
    pub audit_retention_days: Option<u64>,
    /// Redis: turns of other instances this one follows at once for
    /// resumes (each holds one connection, whatever the number of resumes
    /// of it); a resume beyond is refused with 503 (default 32).
    pub max_followed_turns: Option<usize>,
}

impl StoreConfig {
    pub fn max_followed_turns(&self) -> usize {
        self.max_followed_turns
            .unwrap_or(crate::store::FOLLOWED)
            .max(1)
    }

    pub fn audit_retention(&self) -> Duration {
        Duration::from_secs(
            self.audit_retention_days
                .unwrap_or(90)
                .saturating_mul(24 * 60 * 60),
        )
    }
}

impl StoreConfig {
    pub fn sqlite_path(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(|| {
            dirs::data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("toolgate")
                .join("toolgate.sqlite3")
        })
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProtocolConfig {
    /// The `ai` version the frontend pins; chunks are fitted to it. Unset:
    /// the newest this server knows (a strict older client must set it). Read
    /// by [`Config::client_version`]; one that cannot be read stops start-up.
    pub client_version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// The embedded deterministic model: no key, no network.
    #[default]
    Scripted,
    /// OpenAI Chat Completions, or any server that speaks it.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini (`streamGenerateContent`).
    Gemini,
    /// An existing Google ADK agent (`adk api_server`): it runs the model
    /// and its tools; toolgate gates what it asks about.
    Adk,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelConfig {
    pub provider: ProviderKind,
    /// The upstream's model name, e.g. `gpt-4o-mini`.
    pub model: Option<String>,
    /// `adk` only: the ADK app (its agents directory's folder) to run.
    pub app: Option<String>,
    /// Default: the provider's public API.
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default
    /// `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`). The key
    /// itself never goes in the file.
    pub api_key_env: Option<String>,
    /// Sent with every upstream request.
    pub headers: BTreeMap<String, String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
    /// Merged into the request body (e.g. `reasoning_effort`).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Default 10.
    pub connect_timeout_secs: Option<f64>,
    /// The longest silence from the upstream, before its headers or
    /// between two reads (default 120).
    pub read_timeout_secs: Option<f64>,
    /// Retries of a request that never reached the model (default 2).
    pub retries: Option<u32>,
    /// The key, for an application that embeds toolgate; never read from a file.
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// `scripted` only: pause before each delta, to simulate a slow model.
    pub delta_delay_ms: u64,
}

/// How a provider is reached by default and how its key is sent.
struct ProviderDefaults {
    name: &'static str,
    base_url: &'static str,
    key_env: &'static str,
    /// The header carrying the key, and its value for a key.
    auth: fn(&str) -> (&'static str, String),
    /// Headers the API requires.
    fixed: &'static [(&'static str, &'static str)],
}

impl ModelConfig {
    fn defaults(&self) -> Option<ProviderDefaults> {
        use crate::provider::{adk, anthropic, gemini, openai};
        match self.provider {
            ProviderKind::Scripted => None,
            ProviderKind::Openai => Some(ProviderDefaults {
                name: "openai",
                base_url: openai::DEFAULT_BASE_URL,
                key_env: "OPENAI_API_KEY",
                auth: |key| ("authorization", format!("Bearer {key}")),
                fixed: &[],
            }),
            ProviderKind::Anthropic => Some(ProviderDefaults {
                name: "anthropic",
                base_url: anthropic::DEFAULT_BASE_URL,
                key_env: "ANTHROPIC_API_KEY",
                auth: |key| ("x-api-key", key.to_owned()),
                fixed: &[("anthropic-version", anthropic::API_VERSION)],
            }),
            ProviderKind::Gemini => Some(ProviderDefaults {
                name: "gemini",
                base_url: gemini::DEFAULT_BASE_URL,
                key_env: "GEMINI_API_KEY",
                auth: |key| ("x-goog-api-key", key.to_owned()),
                fixed: &[],
            }),
            ProviderKind::Adk => Some(ProviderDefaults {
                name: adk::PROVIDER,
                base_url: adk::DEFAULT_BASE_URL,
                key_env: "ADK_API_KEY",
                auth: |key| ("authorization", format!("Bearer {key}")),
                fixed: &[],
            }),
        }
    }

    /// How to reach the upstream model and what to ask it; `None` for `scripted`.
    pub fn upstream(&self) -> Result<Option<(UpstreamConfig, ModelOptions)>, ConfigError> {
        let Some(defaults) = self.defaults() else {
            return Ok(None);
        };
        let bad = |why: String| ConfigError::Invalid(format!("model: {why}"));
        let model = match (&self.model, &self.app) {
            // ADK's agent names its own model; the app is what to run.
            (_, Some(app)) if self.provider == ProviderKind::Adk && !app.is_empty() => app.clone(),
            _ if self.provider == ProviderKind::Adk => {
                return Err(bad(
                    "provider adk needs an app (model.app, --adk-app)".into()
                ));
            }
            (Some(model), _) if !model.is_empty() => model.clone(),
            _ => {
                return Err(bad(format!(
                    "provider {} needs a model name",
                    defaults.name
                )));
            }
        };
        // A named variable must be set; the default one may be absent (a local server).
        let key = match &self.api_key_env {
            _ if self.api_key.is_some() => self.api_key.as_ref().map(|k| k.0.clone()),
            Some(name) => match std::env::var(name) {
                Ok(key) if !key.is_empty() => Some(key),
                _ => {
                    return Err(bad(format!(
                        "environment variable {name} (apiKeyEnv) is not set"
                    )));
                }
            },
            None => std::env::var(defaults.key_env)
                .ok()
                .filter(|k| !k.is_empty()),
        };
        let mut headers = HeaderMap::new();
        let fixed = defaults
            .fixed
            .iter()
            .map(|(n, v)| (*n, v.to_string(), false));
        let auth = key.as_deref().map(|key| {
            let (name, value) = (defaults.auth)(key);
            (name, value, true)
        });
        let extra = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone(), false));
        for (name, value, sensitive) in fixed.chain(auth).chain(extra) {
            let (name, value) = header(name, &value, sensitive).map_err(|e| bad(e.to_string()))?;
            headers.insert(name, value);
        }
        let secs = |value: Option<f64>, default: f64, key: &str| {
            Duration::try_from_secs_f64(value.unwrap_or(default))
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| bad(format!("{key} must be a positive number of seconds")))
        };
        let upstream = UpstreamConfig {
            provider: defaults.name,
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| defaults.base_url.to_owned()),
            headers,
            secret: key.map(Secret),
            connect_timeout: secs(self.connect_timeout_secs, 10.0, "connectTimeoutSecs")?,
            read_timeout: secs(self.read_timeout_secs, 120.0, "readTimeoutSecs")?,
            retries: self.retries.unwrap_or(2),
        };
        let options = ModelOptions {
            model,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            extra_body: self.extra_body.clone(),
        };
        Ok(Some((upstream, options)))
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StreamConfig {
    /// Idle seconds before a `: keep-alive` comment.
    pub keep_alive_secs: u64,
    /// Largest request body; larger bodies get 413.
    pub max_body_bytes: usize,
    /// Model calls per turn.
    pub max_steps: usize,
    /// Turns in flight (streaming, or held for an answer) per user.
    pub max_turns_per_user: usize,
    /// Turns in flight in all.
    pub max_turns: usize,
    /// A reader that holds its turn back this long stops the turn.
    pub stalled_reader_secs: u64,
    /// A turn waiting for a human that nobody reads is kept this long; its
    /// question stays answerable by the next request.
    pub held_turn_secs: u64,
    /// `/live`: a socket silent this long is closed.
    pub live_idle_secs: u64,
    /// `/live`: frames a client may send per second (a burst of as many).
    pub live_frames_per_sec: u32,
    /// Inbox streams (`/api/confirmations/events`) open at once per user.
    pub max_inbox_streams_per_user: usize,
    /// Inbox streams open at once in all.
    pub max_inbox_streams: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            keep_alive_secs: 15,
            max_body_bytes: 4 << 20,
            max_steps: 8,
            max_turns_per_user: 16,
            max_turns: 10_000,
            stalled_reader_secs: 60,
            held_turn_secs: 600,
            live_idle_secs: 300,
            live_frames_per_sec: 20,
            max_inbox_streams_per_user: 4,
            max_inbox_streams: 256,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Largest amount `process_payment` accepts.
    pub payment_limit: f64,
    /// How long one tool call may run.
    pub timeout_ms: u64,
    /// Tools that POST their arguments to a URL.
    pub http: Vec<HttpToolConfig>,
    /// Tools the client runs (`onToolCall` / `addToolOutput`).
    pub client: Vec<ClientToolConfig>,
}

impl ToolsConfig {
    /// The built-in tools, the HTTP tools and the client-side tools.
    pub fn registry(&self) -> Result<Registry, ConfigError> {
        let mut registry = Registry::from_config(self.payment_limit, &self.http)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        for tool in &self.client {
            let tool =
                ClientTool::new(tool.clone()).map_err(|e| ConfigError::Invalid(e.to_string()))?;
            registry.register(tool);
        }
        Ok(registry)
    }
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            payment_limit: 10_000.0,
            timeout_ms: 30_000,
            http: Vec::new(),
            client: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ConfirmationConfig {
    /// How confirmations are asked: `adk` or `ai-sdk` (native approvals, ai 6+).
    pub protocol: ConfirmationProtocol,
    /// `finish` (the answer comes with the next request) or `hold` (the
    /// stream waits for a decision made elsewhere, or the timeout).
    pub flow: ConfirmationFlow,
    /// How a call denied through a native approval ends: `output-denied`
    /// (`tool-output-denied`) or `output-error` (`tool-output-error` with
    /// the denial text), for clients that render only errors.
    pub denied_as: DeniedAs,
    /// How long an issued confirmation can be answered.
    pub expiry_secs: u64,
    /// `event-based` (ask; the default), `auto-approve`, `auto-deny`.
    pub mode: Mode,
    /// Milliseconds a user has to answer (Dexto's `timeout`); unanswered
    /// confirmations then expire. Unset: `expirySecs`.
    pub timeout: Option<u64>,
    /// Where remembered approvals are kept: `storage` (the store) or `memory`.
    pub allowed_tools_storage: AllowedToolsStorage,
    pub tool_policies: ToolPolicies,
    /// Rules per tool, by name or qualified name.
    pub tools: BTreeMap<String, ToolRule>,
    /// HMAC keys for signed confirmations; signing is on when there is one.
    /// The first signs, every one verifies (rotation). `env:NAME` reads the
    /// key from the environment variable NAME.
    pub signing_keys: Vec<String>,
    /// Where each question is announced (`{webhook, secretEnv}` or
    /// `{slack}`), unless its tool has its own `notify`.
    pub notify: Vec<NotifyTarget>,
    /// toolgate's address as a browser reaches it: the base of the approve
    /// and deny links. Required with any notify target.
    pub public_url: Option<String>,
}

impl Default for ConfirmationConfig {
    fn default() -> Self {
        Self {
            protocol: ConfirmationProtocol::Adk,
            flow: ConfirmationFlow::Finish,
            denied_as: DeniedAs::OutputDenied,
            expiry_secs: 24 * 60 * 60,
            signing_keys: Vec::new(),
            mode: Mode::EventBased,
            timeout: None,
            allowed_tools_storage: AllowedToolsStorage::Storage,
            tool_policies: ToolPolicies::default(),
            tools: BTreeMap::new(),
            notify: Vec::new(),
            public_url: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuthConfig {
    /// A header, set by a trusted proxy in front of toolgate, naming the
    /// user. Requests without it get 401. Unset: every request is
    /// `anonymous` and confirmations are bound to the chat only.
    pub principal_header: Option<String>,
    /// API keys, sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`; each names the
    /// principal it acts for. With keys, every route but `/healthz` (and the
    /// notification links, whose token is the authority) needs
    /// one. Without, toolgate listens on loopback only.
    pub api_keys: Vec<ApiKeyConfig>,
    /// Roles by name, each with its principals (`finance: [carol]`), for
    /// `toolConfirmation.tools.<tool>.approvers: [role:finance]`; a key's
    /// own `roles` add to these.
    pub roles: BTreeMap<String, Vec<String>>,
}

/// One API key: its SHA-256 (hex), or the environment variable holding it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeyConfig {
    pub principal: String,
    pub sha256: Option<String>,
    pub key_env: Option<String>,
    /// An operator: may read and revoke other principals' remembered
    /// approvals and read their audit log (`?principal=`).
    #[serde(default)]
    pub admin: bool,
    /// The roles of this key's principal (see `toolConfirmation.tools.<tool>.approvers`).
    #[serde(default)]
    pub roles: Vec<String>,
}

impl Config {
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let config: Self = yaml_serde::from_str(text)?;
        config.check()?;
        Ok(config)
    }

    /// Settings that parse but cannot work together.
    fn check(&self) -> Result<(), ConfigError> {
        self.policy()?;
        self.model.upstream()?;
        self.tools.registry()?;
        self.mcp_servers()?;
        self.api_keys()?;
        self.guard()?;
        self.notify_plan()?;
        self.literal_signing_keys()?;
        self.limits.rates()?;
        let client = self.client_version()?;
        if self.tool_confirmation.protocol == ConfirmationProtocol::AiSdk && !client.has_approvals()
        {
            return Err(ConfigError::Invalid(format!(
                "toolConfirmation.protocol ai-sdk needs ai 6 or later, but protocol.clientVersion is {client}; use adk"
            )));
        }
        Ok(())
    }

    /// The confirmation policy the config describes.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        let c = &self.tool_confirmation;
        Policy::new(c.mode, &c.tool_policies, c.tools.clone())
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// Who is told about each question, with the webhooks' keys read from
    /// the environment; `None` when nobody is.
    pub fn notify_plan(&self) -> Result<Option<NotifyPlan>, ConfigError> {
        let c = &self.tool_confirmation;
        crate::notify::plan(&c.notify, &c.tools, c.public_url.as_deref())
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The MCP servers, checked, with their secrets read.
    pub fn mcp_servers(&self) -> Result<Vec<McpServer>, ConfigError> {
        crate::tools::mcp::servers(&self.mcp_servers)
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// How long an issued confirmation can be answered.
    pub fn confirmation_window(&self) -> Duration {
        match self.tool_confirmation.timeout {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs(self.tool_confirmation.expiry_secs),
        }
    }

    /// Each API key: its principal, SHA-256, and whether it is an operator's.
    pub fn api_keys(&self) -> Result<Vec<ApiKey>, ConfigError> {
        use sha2::Digest;
        self.auth
            .api_keys
            .iter()
            .map(|key| {
                let bad = |why: String| {
                    ConfigError::Invalid(format!("auth.apiKeys ({}): {why}", key.principal))
                };
                let hash: [u8; 32] = match (&key.sha256, &key.key_env) {
                    (Some(hex_hash), None) => hex::decode(hex_hash)
                        .ok()
                        .and_then(|h| h.try_into().ok())
                        .ok_or_else(|| bad("sha256 must be 64 hex digits".into()))?,
                    (None, Some(name)) => {
                        let key = std::env::var(name)
                            .map_err(|_| bad(format!("environment variable {name} is not set")))?;
                        if key.is_empty() {
                            return Err(bad(format!("environment variable {name} is empty")));
                        }
                        sha2::Sha256::digest(key.as_bytes()).into()
                    }
                    _ => return Err(bad("give exactly one of sha256 and keyEnv".into())),
                };
                if key.principal.is_empty() {
                    return Err(bad("principal is empty".into()));
                }
                Ok(ApiKey {
                    principal: key.principal.clone(),
                    sha256: hash,
                    admin: key.admin,
                })
            })
            .collect()
    }

    /// Each principal's roles, from `auth.roles` and the keys' `roles`.
    pub fn roles(&self) -> HashMap<String, Vec<String>> {
        let mut roles: HashMap<String, Vec<String>> = HashMap::new();
        let by_role = self.auth.roles.iter().flat_map(|(role, principals)| {
            principals.iter().map(move |p| (p.clone(), role.clone()))
        });
        let by_key = self.auth.api_keys.iter().flat_map(|key| {
            key.roles
                .iter()
                .map(|role| (key.principal.clone(), role.clone()))
        });
        for (principal, role) in by_role.chain(by_key) {
            let held = roles.entry(principal).or_default();
            if !held.contains(&role) {
                held.push(role);
            }
        }
        roles
    }

    /// The Host and Origin checks (`server.allowedHosts`, `cors.allowedOrigins`).
    pub fn guard(&self) -> Result<Guard, ConfigError> {
        Guard::new(
            &self.server.allowed_hosts,
            &self.cors.allowed_origins,
            !self.auth.api_keys.is_empty(),
        )
        .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The signing keys, with `env:NAME` entries read from the environment;
    /// each of at least [`MIN_KEY_BYTES`] bytes. An error names the key by
    /// its place (and variable), never its value.
    pub fn signing_keys(&self) -> Result<Vec<String>, ConfigError> {
        self.tool_confirmation
            .signing_keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let place = format!("toolConfirmation.signingKeys[{}]", i + 1);
                let (key, named) = match key.strip_prefix("env:") {
                    Some(name) => {
                        let key = std::env::var(name).map_err(|_| {
                            ConfigError::Invalid(format!(
                                "{place}: environment variable {name} is not set"
                            ))
                        })?;
                        (key, format!("{place} (environment variable {name})"))
                    }
                    None => (key.clone(), place),
                };
                short_key(&key, &named)?;
                Ok(key)
            })
            .collect()
    }

    /// The signing keys given in the config itself (not `env:NAME`) are
    /// long enough; the others are read, and checked, at start.
    fn literal_signing_keys(&self) -> Result<(), ConfigError> {
        let keys = self.tool_confirmation.signing_keys.iter().enumerate();
        for (i, key) in keys.filter(|(_, key)| !key.starts_with("env:")) {
            short_key(key, &format!("toolConfirmation.signingKeys[{}]", i + 1))?;
        }
        Ok(())
    }

    /// `protocol.clientVersion`, read; unset, the newest release known.
    pub fn client_version(&self) -> Result<ClientVersion, ConfigError> {
        match &self.protocol.client_version {
            Some(text) => text
                .parse()
                .map_err(|e| ConfigError::Invalid(format!("protocol.clientVersion: {e}"))),
            None => Ok(ClientVersion::LATEST),
        }
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    pub fn keep_alive(&self) -> Duration {
        Duration::from_secs(self.stream.keep_alive_secs.max(1))
    }
}

/// A signing key shorter than [`MIN_KEY_BYTES`], named by `place`.
fn short_key(key: &str, place: &str) -> Result<(), ConfigError> {
    if key.len() < MIN_KEY_BYTES {
        return Err(ConfigError::Invalid(format!(
            "{place} is too short: a signing key needs at least {MIN_KEY_BYTES} bytes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_optional() {
        assert_eq!(Config::from_yaml("").ok(), Some(Config::default()));
        assert_eq!(Config::from_yaml("{}").ok(), Some(Config::default()));
        let config =
            Config::from_yaml("stream:\n  keepAliveSecs: 3\ntoolConfirmation:\n  expirySecs: 60\n");
        let Ok(config) = config else {
            panic!("{config:?}")
        };
        assert_eq!(config.stream.keep_alive_secs, 3);
        assert_eq!(config.stream.max_steps, 8);
        assert_eq!(config.tool_confirmation.expiry_secs, 60);
    }

    #[test]
    fn native_approvals_need_a_client_that_has_them() {
        let config = Config::from_yaml(
            "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: '6.0.0'}\n",
        );
        assert_eq!(
            config.ok().and_then(|c| c.client_version().ok()),
            Some(ClientVersion::new(6, 0, 0))
        );
        let err = Config::from_yaml(
            "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: '5.0.216'}\n",
        );
        assert_eq!(
            err.err().map(|e| e.to_string()),
            Some("invalid config: toolConfirmation.protocol ai-sdk needs ai 6 or later, but protocol.clientVersion is 5.0.216; use adk".into())
        );
    }

    #[test]
    fn client_versions_are_read_or_named() {
        let version = |yaml: &str| Config::from_yaml(yaml).and_then(|c| c.client_version());
        assert_eq!(
            version("protocol: {clientVersion: '6.0.0-beta.148'}\n").ok(),
            Some(ClientVersion::new(6, 0, 0))
        );
        assert_eq!(
            version(
                "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: 6.0.0-beta.148}\n"
            )
            .ok(),
            Some(ClientVersion::new(6, 0, 0))
        );
        assert_eq!(version("").ok(), Some(ClientVersion::LATEST));
        for bad in ["6.0.0-beta.01", "6.0-beta.1", "six", "6.0.0+"] {
            let err = version(&format!("protocol: {{clientVersion: '{bad}'}}\n"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert_eq!(
                err,
                format!(
                    "invalid config: protocol.clientVersion: `{bad}` is not an ai version (expected e.g. 7.0.173, 6.0, 7 or 6.0.0-beta.148)"
                )
            );
        }
    }

    #[test]
    fn denials_end_as_configured() {
        let denied_as = |yaml: &str| Config::from_yaml(yaml).map(|c| c.tool_confirmation.denied_as);
        assert_eq!(denied_as("").ok(), Some(DeniedAs::OutputDenied));
        assert_eq!(
            denied_as("toolConfirmation: {deniedAs: output-error}\n").ok(),
            Some(DeniedAs::OutputError)
        );
        assert_eq!(
            denied_as("toolConfirmation: {deniedAs: output-denied}\n").ok(),
            Some(DeniedAs::OutputDenied)
        );
        let err = denied_as("toolConfirmation: {deniedAs: error}\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("toolConfirmation.deniedAs") && err.contains("unknown variant `error`"),
            "{err}"
        );
    }

    #[test]
    fn a_model_needs_a_name_and_sane_timeouts() {
        let error = |yaml: &str| Config::from_yaml(yaml).err().map(|e| e.to_string());
        assert_eq!(
            error("model: {provider: openai}"),
            Some("invalid config: model: provider openai needs a model name".into())
        );
        for secs in ["0", "-1", "1e300", ".nan"] {
            let yaml = format!("model: {{provider: openai, model: m, readTimeoutSecs: {secs}}}");
            assert_eq!(
                error(&yaml),
                Some(
                    "invalid config: model: readTimeoutSecs must be a positive number of seconds"
                        .into()
                ),
                "{secs}"
            );
        }
        let named = "model: {provider: anthropic, model: m, apiKeyEnv: TOOLGATE_SURELY_UNSET_KEY}";
        assert!(error(named).is_some_and(|e| e.contains("TOOLGATE_SURELY_UNSET_KEY")));
    }

    #[test]
    fn any_host_or_origin_needs_api_keys() {
        let error = |yaml: &str| Config::from_yaml(yaml).err().map(|e| e.to_string());
        assert_eq!(
            error("server: {allowedHosts: ['*']}"),
            Some("invalid config: `*` in server.allowedHosts needs auth.apiKeys: without keys, any web page could act through toolgate".into())
        );
        assert!(error("cors: {allowedOrigins: ['*']}").is_some());
        let keyed = "auth: {apiKeys: [{principal: a, sha256: '0000000000000000000000000000000000000000000000000000000000000000'}]}\n";
        assert_eq!(
            error(&format!("{keyed}server: {{allowedHosts: ['*']}}")),
            None
        );
        assert_eq!(
            error("server: {allowedHosts: ['https://x.example']}"),
            Some("invalid config: server.allowedHosts: `https://x.example` is not a host name or IP address (no scheme, port or path)".into())
        );
        let config = Config::from_yaml(
            "server: {allowedHosts: [toolgate.example.com], headerReadSecs: 2}\ncors: {allowedOrigins: ['https://app.example.com']}\n",
        );
        let Ok(config) = config else {
            panic!("{config:?}")
        };
        assert_eq!(config.server.header_read(), Duration::from_secs(2));
        assert_eq!(config.server.body_read(), Duration::from_secs(30));
        assert_eq!(config.server.drain(), Duration::from_secs(30));
        let config = Config::from_yaml("server: {drainSecs: 5}\n");
        let Ok(config) = config else {
            panic!("{config:?}")
        };
        assert_eq!(config.server.drain(), Duration::from_secs(5));
    }

    #[test]
    fn the_live_dialect_is_named() {
        let dialect = |yaml: &str| Config::from_yaml(yaml).map(|c| c.live.dialect).ok();
        assert_eq!(dialect(""), Some(LiveDialect::AiSdk));
        assert_eq!(
            dialect("live: {dialect: adk-stream-protocol}"),
            Some(LiveDialect::AdkStreamProtocol)
        );
        assert_eq!(dialect("live: {dialect: ai-sdk}"), Some(LiveDialect::AiSdk));
        assert_eq!(dialect("live: {dialect: bidi}"), None);
        let err = Config::from_yaml("live: {idleSecs: 3}")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown field `idleSecs`"), "{err}");
    }

    #[test]
    fn limits_are_positive_and_name_a_tool_once() {
        let rates = |yaml: &str| Config::from_yaml(yaml).and_then(|c| c.limits.rates());
        let error = |yaml: &str| rates(yaml).err().map(|e| e.to_string());
        let Ok(read) = rates(
            "limits: {turnsPerMinute: 2, concurrentStreams: 1, tools: {process_payment: {callsPerMinute: 3}, mcp--s--x: {callsPerMinute: 4}}}",
        ) else {
            panic!("limits did not read")
        };
        assert_eq!(read.turns_per_minute.map(NonZeroU32::get), Some(2));
        assert_eq!(read.concurrent_streams.map(NonZeroU32::get), Some(1));
        assert_eq!(read.tool_calls_per_minute, None);
        let tools: Vec<(&str, &str, u32)> = read
            .tools
            .iter()
            .map(|(q, (name, n))| (q.as_str(), name.as_str(), n.get()))
            .collect();
        assert_eq!(
            tools,
            [
                ("internal--process_payment", "process_payment", 3),
                ("mcp--s--x", "mcp--s--x", 4)
            ]
        );
        assert_eq!(rates("").ok(), Some(Rates::default()));
        for (yaml, key, value) in [
            ("limits: {turnsPerMinute: 0}", "turnsPerMinute", "0"),
            (
                "limits: {toolCallsPerMinute: -1}",
                "toolCallsPerMinute",
                "-1",
            ),
            (
                "limits: {concurrentStreams: 5000000000}",
                "concurrentStreams",
                "5000000000",
            ),
            (
                "limits: {tools: {pay: {callsPerMinute: 0}}}",
                "tools.pay.callsPerMinute",
                "0",
            ),
        ] {
            assert_eq!(
                error(yaml),
                Some(format!(
                    "invalid config: limits.{key} must be a whole number from 1 to 4294967295 (leave it out for no limit), not {value}"
                )),
                "{yaml}"
            );
        }
        assert_eq!(
            error(
                "limits: {tools: {pay: {callsPerMinute: 1}, internal--pay: {callsPerMinute: 2}}}"
            ),
            Some(
                "invalid config: limits.tools names `pay` twice (by name and by qualified name)"
                    .into()
            )
        );
        assert!(
            error("limits: {turnsPerMinute: 1.5}").is_some_and(|e| e.contains("turnsPerMinute")),
        );
        assert!(error("limits: {tools: {pay: {}}}").is_some_and(|e| e.contains("callsPerMinute")),);
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::from_yaml("stream:\n  keepAlive: 3\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown field `keepAlive`"), "{err}");
        let err = Config::from_yaml("modle: {}\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown field `modle`"), "{err}");
    }
}
