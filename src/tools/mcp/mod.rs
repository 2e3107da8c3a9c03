//! MCP servers as tool sources (`mcpServers` in the config), through the
//! official SDK (`rmcp`): stdio servers (a child process) and streamable-HTTP
//! servers.
//!
//! One supervisor task per server connects in the background, lists the
//! tools (every page), relists when the server announces a change, and
//! reconnects with a bounded exponential back-off when the server fails to
//! start, hangs or goes away; meanwhile its tools are not offered. Each tool
//! is offered as `mcp--<server>--<tool>` and runs only through the gate,
//! like any tool. What a server says about itself (names, schemas,
//! annotations, results) is untrusted: names that cannot be represented are
//! skipped, sizes are bounded, and annotations only set the tool's own
//! declaration, which every rule in the config outranks.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, Implementation, ListToolsRequest, PaginatedRequestParams, ProtocolVersion,
    ServerResult,
};
use rmcp::service::{NotificationContext, Peer, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde::Deserialize;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::toolbox::WeakToolbox;
pub use super::toolbox::{ServerState, ServerView};
use super::{Tool, ToolContext, ToolError, ToolSource, Toolbox, secret, secret_header};

mod process;
mod redact;
mod supervise;
#[cfg(test)]
mod tests;
mod tool;

use process::*;
use redact::*;
pub use supervise::start;
pub use tool::McpTool;

/// Tools kept per server; the rest are left out (and logged).
pub const MAX_TOOLS: usize = 256;
/// `tools/list` pages read per listing.
const MAX_PAGES: usize = 64;
/// A tool whose schemas (input and output together) are larger is left out.
const MAX_SCHEMA_BYTES: usize = 64 << 10;
/// All of a server's schemas together; tools past this are left out.
const MAX_SERVER_SCHEMA_BYTES: usize = 1 << 20;
/// Longer descriptions are cut.
const MAX_DESCRIPTION_CHARS: usize = 4_096;
/// A larger result is the call's error.
pub const MAX_RESULT_BYTES: usize = 4 << 20;
/// The longest model-facing tool name (OpenAI's limit).
const MAX_NAME_CHARS: usize = 64;
/// Back-off between connection attempts: doubles from the first to the last.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A connection that lasted this long starts the back-off over.
const STABLE: Duration = Duration::from_secs(30);
/// Longest stderr line logged; the rest of the line is dropped.
const MAX_STDERR_LINE: usize = 4_096;
/// Stderr lines logged per second per server; the rest are counted, not logged.
const STDERR_LINES_PER_SEC: u32 = 20;
/// The longest text of a server (an error message, a reason) toolgate passes on.
pub const MAX_MESSAGE_BYTES: usize = 4 << 10;
/// Relists after `list_changed` are at least this far apart (changes in between coalesce).
const RELIST_EVERY: Duration = Duration::from_secs(1);
/// How long a stopping toolgate lets a server close before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Variables a stdio server inherits from toolgate; everything else it gets
/// only through `env` (toolgate's own secrets stay with toolgate).
const INHERITED_ENV: &[&str] = &["PATH", "HOME", "USER", "LANG", "TMPDIR", "SYSTEMROOT"];

/// `mcpServers.<name>` in the config: `command` (stdio) or `url` (streamable HTTP).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program of a stdio server.
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The stdio server's environment (beyond PATH, HOME, USER, LANG,
    /// TMPDIR); a value `env:NAME` is read from toolgate's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The stdio server's working directory.
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable-HTTP server.
    pub url: Option<String>,
    /// Sent with every HTTP request; a value `env:NAME` is read from the environment.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Tools the server marks `readOnlyHint` (and not `destructiveHint`)
    /// run without asking, unless a rule says otherwise. Default false.
    #[serde(default)]
    pub allow_read_only: bool,
    /// Starting, the handshake and each listing (default 10000).
    pub connect_timeout_ms: Option<u64>,
    /// One call (default: `tools.timeoutMs`, which bounds every call anyway).
    pub timeout_ms: Option<u64>,
    /// `/readyz` answers 503 while this server is not available (default false).
    #[serde(default)]
    pub required: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum McpConfigError {
    #[error("mcpServers `{server}`: {why}")]
    Invalid { server: String, why: String },
}

/// A server from the config, checked and with its secrets read.
#[derive(Clone)]
pub struct McpServer {
    name: String,
    transport: Transport,
    redactor: Redactor,
    allow_read_only: bool,
    connect_timeout: Duration,
    call_timeout: Option<Duration>,
}

#[derive(Clone)]
enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: HashMap<HeaderName, HeaderValue>,
    },
}

impl Transport {
    fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// Letters, digits, `_` and `-`; no `--` (it separates the parts of a
/// qualified name) and no `-` at either end.
fn valid_part(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("--")
        && !name.starts_with('-')
        && !name.ends_with('-')
}

impl McpServer {
    pub fn new(name: &str, config: &McpServerConfig) -> Result<Self, McpConfigError> {
        let bad = |why: String| McpConfigError::Invalid {
            server: name.to_owned(),
            why,
        };
        if !valid_part(name) || name.len() > 32 {
            return Err(bad(
                "a name is 1 to 32 letters, digits, `_` or `-`, without `--` and not starting or ending with `-`".into(),
            ));
        }
        let transport = match (&config.command, &config.url) {
            (Some(command), None) => {
                if !config.headers.is_empty() {
                    return Err(bad("headers are for a `url` server".into()));
                }
                let env = config
                    .env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), secret(v)?)))
                    .collect::<Result<_, String>>()
                    .map_err(bad)?;
                Transport::Stdio {
                    command: command.clone(),
                    args: config.args.clone(),
                    env,
                    cwd: config.cwd.clone(),
                }
            }
            (None, Some(url)) => {
                if !config.args.is_empty() || !config.env.is_empty() || config.cwd.is_some() {
                    return Err(bad("args, env and cwd are for a `command` server".into()));
                }
                let parsed =
                    reqwest::Url::parse(url).map_err(|_| bad(format!("`{url}` is not a URL")))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(bad(format!(
                        "`{}` is not an http(s) URL",
                        Redactor::for_url(url, &parsed).apply(url)
                    )));
                }
                let headers = (config.headers.iter())
                    .map(|(name, value)| secret_header(name, value))
                    .collect::<Result<HashMap<_, _>, _>>()
                    .map_err(bad)?;
                Transport::Http {
                    url: url.clone(),
                    headers,
                }
            }
            _ => return Err(bad("give exactly one of `command` and `url`".into())),
        };
        let ms = |v: Option<u64>, key: &str| match v {
            Some(0) => Err(bad(format!("{key} must be positive"))),
            v => Ok(v.map(Duration::from_millis)),
        };
        let redactor = match &transport {
            Transport::Http { url, .. } => reqwest::Url::parse(url)
                .map(|parsed| Redactor::for_url(url, &parsed))
                .unwrap_or_default(),
            Transport::Stdio { .. } => Redactor::default(),
        };
        Ok(Self {
            name: name.to_owned(),
            transport,
            redactor,
            allow_read_only: config.allow_read_only,
            connect_timeout: ms(config.connect_timeout_ms, "connectTimeoutMs")?
                .unwrap_or(Duration::from_secs(10)),
            call_timeout: ms(config.timeout_ms, "timeoutMs")?,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// A text about this server as toolgate may show and log it: without
    /// the secrets of its URL, and at most [`MAX_MESSAGE_BYTES`].
    fn said(&self, text: &str) -> String {
        capped(&self.redactor.apply(text))
    }
}

/// Every server of the config, checked.
pub fn servers(
    config: &BTreeMap<String, McpServerConfig>,
) -> Result<Vec<McpServer>, McpConfigError> {
    config
        .iter()
        .map(|(name, server)| McpServer::new(name, server))
        .collect()
}
