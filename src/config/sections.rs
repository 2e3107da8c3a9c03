//! The sections of the file, as serde reads them: every field optional,
//! an unknown key an error that names it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::faces::LiveDialect;
use crate::policy::{Mode, NotifyTarget, RedactionConfig, ToolPolicies, ToolRule};
use crate::protocol::{ConfirmationFlow, ConfirmationProtocol, DeniedAs};
use crate::tools::client::ClientToolConfig;
use crate::tools::http::HttpToolConfig;

/// `demo`: the React chat of `frontend-demo/`, built into the binary.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolLimitConfig {
    /// Calls of this tool per minute, all principals together.
    pub calls_per_minute: i64,
}

/// `telemetry`: what the traces keep (they are exported when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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

/// `cors`: browser origins other than toolgate's own that may act through it.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CorsConfig {
    /// Origins (`https://app.example.com`) whose pages may send requests
    /// and open `/live`. `*`: any (needs `auth.apiKeys`).
    pub allowed_origins: Vec<String>,
}

/// `live`: the WebSocket at `/live` (its rates are in `stream`).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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

/// `mcp`: toolgate as an MCP server (`/mcp`, `toolgate mcp`).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct McpConfig {
    /// Serve MCP at `POST`/`GET`/`DELETE /mcp` beside the chat.
    pub enabled: bool,
    /// Protocol 2026-07-28: how long (ms) a retry of an undecided call
    /// waits for the decision before it is told to retry again (at most
    /// 60000).
    pub retry_wait_ms: u64,
    /// Older protocols, a client that cannot be asked: how long (seconds)
    /// a call is held, with progress notifications, before an error that
    /// names its question (at least 1, at most 3600).
    pub hold_seconds: u64,
    /// `toolgate mcp` (stdio): who is asking. `TOOLGATE_MCP_PRINCIPAL`
    /// wins; unset, `anonymous`.
    pub principal: Option<String>,
    /// Sessions of older clients (`Mcp-Session-Id`) one user may hold
    /// open at once; an `initialize` beyond gets 429.
    pub max_sessions_per_user: usize,
    /// Sessions of older clients open at once, all users together.
    pub max_sessions: usize,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retry_wait_ms: 2_000,
            hold_seconds: 60,
            principal: None,
            max_sessions_per_user: 8,
            max_sessions: 1_000,
        }
    }
}

/// Dexto's `allowedToolsStorage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AllowedToolsStorage {
    #[default]
    Storage,
    Memory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
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

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
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
    /// Redis: of those, the turns of one principal (a resume finds only
    /// its caller's turns), so that one user's resumes never take every
    /// other user's room; a resume beyond is refused with 429 (default 4).
    /// Holds for every principal the server tells apart; a server that
    /// tells no one apart has only the total.
    pub max_followed_turns_per_user: Option<usize>,
}

/// `audit`: the audit log's evidence. Every event is chained to the one
/// before it in the store whatever is set here (docs/guides/audit.md).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuditConfig {
    /// The Ed25519 key that signs every audit event: the path of a file
    /// holding a PKCS#8 PEM private key (`openssl genpkey -algorithm
    /// ed25519`) or its 32-byte seed in base64; `env:NAME` reads either
    /// from the environment variable NAME. Unset: the chain is kept
    /// unsigned (anyone who can write the store can rewrite it whole).
    pub signing_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProtocolConfig {
    /// The `ai` version the frontend pins; chunks are fitted to it. Unset:
    /// the newest this server knows (a strict older client must set it). Read
    /// by [`Settings::new`](super::Settings::new); one that cannot be read stops start-up.
    pub client_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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
    /// The key names whose values no person is shown, in every call's
    /// arguments (a tool's own pointers are its `sensitive`).
    pub redaction: RedactionConfig,
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
            redaction: RedactionConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
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
    /// People signed in with an OpenID Connect provider: a bearer JWT its
    /// keys signed, for `audience`, names its principal (`principalClaim`)
    /// and roles (its `groupsClaim`, mapped by `roles`). API keys and the
    /// principal header keep working beside it.
    pub oidc: Option<OidcConfig>,
}

/// `auth.oidc`.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcConfig {
    /// The issuer, exactly as its tokens' `iss` says: `https://` (or
    /// `http://` on this host). Its keys are found through
    /// `{issuer}/.well-known/openid-configuration`.
    pub issuer: String,
    /// The `aud` a token must carry (toolgate's client id at the provider).
    pub audience: String,
    /// The issuer's key set, instead of discovering it.
    pub jwks_uri: Option<String>,
    /// The claim that names the principal (default `sub`; `email` or
    /// `preferred_username` read better in the audit log).
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// The claim that lists the user's groups (default `groups`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Roles by name, each with the groups that hold it
    /// (`finance: [finance-approvers]`), for `approvers: [role:finance]`.
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<String>>,
    /// Seconds of clock skew allowed on `exp` and `nbf` (default 30, at most 300).
    #[serde(default = "default_leeway_secs")]
    pub leeway_secs: u64,
    /// The fewest seconds between two fetches of the issuer's keys (default
    /// 60, from 1 to 3600): a token with a key id the kept set lacks fetches
    /// it again at most this often.
    #[serde(default = "default_jwks_refetch_secs")]
    pub jwks_refetch_secs: u64,
}

fn default_principal_claim() -> String {
    "sub".to_owned()
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

fn default_leeway_secs() -> u64 {
    30
}

fn default_jwks_refetch_secs() -> u64 {
    60
}

/// One API key: its SHA-256 (hex), or the environment variable holding it.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
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

impl StoreConfig {
    /// The SQLite file: `path`, else in the user's data directory.
    pub fn sqlite_path(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(|| {
            dirs::data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("toolgate")
                .join("toolgate.sqlite3")
        })
    }
}
