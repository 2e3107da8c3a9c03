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
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::toolbox::WeakToolbox;
use super::{Tool, ToolContext, ToolError, ToolSource, Toolbox};

/// Tools kept per server; the rest are left out (and logged).
pub const MAX_TOOLS: usize = 256;
/// `tools/list` pages read per listing.
const MAX_PAGES: usize = 64;
/// A tool whose schema is larger is left out.
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
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

fn secret(value: &str) -> Result<String, String> {
    match value.strip_prefix("env:") {
        Some(var) => {
            std::env::var(var).map_err(|_| format!("environment variable {var} is not set"))
        }
        None => Ok(value.to_owned()),
    }
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
                let mut headers = HashMap::new();
                for (name, value) in &config.headers {
                    let value = secret(value).map_err(bad)?;
                    let name = HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| bad(format!("invalid header name `{name}`")))?;
                    let mut value = HeaderValue::from_str(&value)
                        .map_err(|_| bad(format!("invalid value for header `{name}`")))?;
                    value.set_sensitive(true);
                    headers.insert(name, value);
                }
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

/// Hides what in a server's URL may be a secret (user, password, query,
/// fragment) wherever an error of the HTTP stack repeats the URL.
#[derive(Clone, Default)]
struct Redactor {
    /// What to replace and by what, longest first.
    replacements: Vec<(String, String)>,
}

/// Shorter parts are not searched for (they would cut up unrelated words).
const MIN_SECRET_CHARS: usize = 4;

impl Redactor {
    fn for_url(raw: &str, url: &reqwest::Url) -> Self {
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        let hidden = url.query().is_some() || url.fragment().is_some();
        shown.set_query(None);
        shown.set_fragment(None);
        let mut shown = shown.to_string();
        if hidden {
            shown.push_str("?[redacted]");
        }
        let mut replacements: Vec<(String, String)> = Vec::new();
        if shown != raw {
            replacements.push((raw.to_owned(), shown.clone()));
            replacements.push((url.as_str().to_owned(), shown));
        }
        let raw_query = raw.split_once('?').map(|(_, q)| q.to_owned());
        let mut parts: Vec<String> = [
            raw_query,
            url.query().map(str::to_owned),
            url.fragment().map(str::to_owned),
            url.password().map(str::to_owned),
            Some(url.username().to_owned()),
        ]
        .into_iter()
        .flatten()
        .collect();
        parts.extend(url.query_pairs().map(|(_, v)| v.into_owned()));
        parts.extend(
            url.query()
                .into_iter()
                .flat_map(|q| q.split('&'))
                .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.to_owned())),
        );
        replacements.extend(
            parts
                .into_iter()
                .filter(|p| p.chars().count() >= MIN_SECRET_CHARS)
                .map(|p| (p, "[redacted]".to_owned())),
        );
        replacements.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        replacements.dedup_by(|a, b| a.0 == b.0);
        Self { replacements }
    }

    fn apply(&self, text: &str) -> String {
        self.replacements
            .iter()
            .fold(text.to_owned(), |text, (from, to)| text.replace(from, to))
    }
}

/// At most [`MAX_MESSAGE_BYTES`] of `text`, cut on a character boundary.
fn capped(text: &str) -> String {
    if text.len() <= MAX_MESSAGE_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
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

/// Registers each server with `toolbox` and starts its supervisor. Needs a
/// Tokio runtime; without one the servers stay unavailable.
pub fn start(servers: Vec<McpServer>, toolbox: &Toolbox) {
    for server in servers {
        toolbox.add_server(&server.name, server.transport.kind());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let supervisor = supervise(server, toolbox.downgrade(), toolbox.stopped());
                toolbox.track(supervisor, &runtime);
            }
            Err(_) => toolbox.set_state(
                &server.name,
                ServerState::Unavailable {
                    reason: "no async runtime to connect from".into(),
                    retry_in_ms: 0,
                },
            ),
        }
    }
}

/// Tells the supervisor that the server's tool list changed.
struct Handler {
    changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        // Pinned to the handshake lifecycle: its change notifications need no subscription.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

type Connection = RunningService<RoleClient, Handler>;

async fn supervise(server: McpServer, toolbox: WeakToolbox, stop: CancellationToken) {
    let name = server.name.clone();
    let mut failures: u32 = 0;
    loop {
        let lost = connected(&server, &toolbox, failures, &stop).await;
        let Some((reason, lasted)) = lost else { return };
        let reason = server.said(&reason);
        let Some(tools) = toolbox.upgrade() else {
            return;
        };
        tools.set_tools(&name, Vec::new());
        if lasted >= STABLE {
            failures = 0;
        }
        let wait = BACKOFF_FIRST
            .saturating_mul(2u32.saturating_pow(failures.min(16)))
            .min(BACKOFF_MAX);
        failures = failures.saturating_add(1);
        tracing::warn!(server = %name, "MCP server unavailable: {reason}; retrying in {} ms", wait.as_millis());
        tools.set_state(
            &name,
            ServerState::Unavailable {
                reason: reason.clone(),
                retry_in_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            },
        );
        drop(tools);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => return,
        }
        let Some(tools) = toolbox.upgrade() else {
            return;
        };
        tools.set_state(
            &name,
            ServerState::Restarting {
                attempt: failures,
                reason,
            },
        );
    }
}

/// One connection, from start to loss: why it was lost and how long it
/// lasted; `None` once the toolbox is gone or stopped. Stopped, a
/// connection is closed (a stdio server sees its input end) and given
/// [`CLOSE_GRACE`]; whatever is left of a stdio server is killed when its
/// transport goes.
async fn connected(
    server: &McpServer,
    toolbox: &WeakToolbox,
    failures: u32,
    stop: &CancellationToken,
) -> Option<(String, Duration)> {
    let began = tokio::time::Instant::now();
    let changed = Arc::new(Notify::new());
    let handler = Handler {
        changed: changed.clone(),
    };
    let connecting = tokio::time::timeout(server.connect_timeout, connect(server, handler));
    let connection = tokio::select! {
        connecting = connecting => match connecting {
            Ok(Ok(connection)) => connection,
            Ok(Err(why)) => return Some((why, began.elapsed())),
            Err(_) => {
                return Some((
                    format!(
                        "no answer to initialize within {} ms",
                        server.connect_timeout.as_millis()
                    ),
                    began.elapsed(),
                ));
            }
        },
        () = stop.cancelled() => return None,
    };
    let peer = connection.peer().clone();
    let cancel = connection.cancellation_token();
    let closed = connection.waiting();
    tokio::pin!(closed);
    let first = tokio::select! {
        listed = refresh(server, &peer, toolbox) => listed?,
        () = stop.cancelled() => {
            cancel.cancel();
            let _ = tokio::time::timeout(CLOSE_GRACE, closed).await;
            return None;
        }
    };
    if let Err(why) = first {
        return Some((why, began.elapsed()));
    }
    if failures > 0 {
        tracing::info!(server = %server.name, "MCP server available again");
    }
    // Armed by a change announcement; announcements until it fires coalesce.
    let relist = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(relist);
    let mut armed = false;
    let mut listed_at = tokio::time::Instant::now();
    loop {
        tokio::select! {
            quit = &mut closed => {
                let why = match quit {
                    Ok(reason) => format!("the connection ended ({reason:?})"),
                    Err(e) => format!("the connection failed: {e}"),
                };
                return Some((why, began.elapsed()));
            }
            () = stop.cancelled() => {
                cancel.cancel();
                let _ = tokio::time::timeout(CLOSE_GRACE, closed).await;
                return None;
            }
            () = changed.notified(), if !armed => {
                relist.as_mut().reset(listed_at + RELIST_EVERY);
                armed = true;
            }
            () = &mut relist, if armed => {
                armed = false;
                listed_at = tokio::time::Instant::now();
                if let Err(why) = refresh(server, &peer, toolbox).await? {
                    return Some((why, began.elapsed()));
                }
            }
        }
    }
}

/// Lists the tools and publishes them; the outer `None` once the toolbox is gone.
async fn refresh(
    server: &McpServer,
    peer: &Peer<RoleClient>,
    toolbox: &WeakToolbox,
) -> Option<Result<(), String>> {
    let listed = match tokio::time::timeout(server.connect_timeout, list(server, peer)).await {
        Ok(Ok(listed)) => listed,
        Ok(Err(e)) => return Some(Err(format!("tools/list failed: {e}"))),
        Err(_) => {
            return Some(Err(format!(
                "no answer to tools/list within {} ms",
                server.connect_timeout.as_millis()
            )));
        }
    };
    let toolbox = toolbox.upgrade()?;
    let count = listed.len();
    toolbox.set_tools(&server.name, listed);
    toolbox.set_state(&server.name, ServerState::Available { tools: count });
    tracing::info!(server = %server.name, tools = count, "MCP server tools listed");
    Some(Ok(()))
}

async fn connect(server: &McpServer, handler: Handler) -> Result<Connection, String> {
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).env_clear().kill_on_drop(true);
            for var in INHERITED_ENV {
                if let Some(value) = std::env::var_os(var) {
                    cmd.env(var, value);
                }
            }
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let (process, stderr) = TokioChildProcess::builder(in_own_group(cmd))
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(server.name.clone(), stderr));
            }
            handler
                .serve(process)
                .await
                .map_err(|e| format!("initialize failed: {e}"))
        }
        Transport::Http { url, headers } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers.clone());
            handler
                .serve(StreamableHttpClientTransport::from_config(config))
                .await
                .map_err(|e| format!("initialize failed: {e}"))
        }
    }
}

/// The stdio server's command, started as the leader of its own process
/// group: what it starts (`npx` starting `node`, a shell's children) is in
/// the group too, and the whole group is killed when the transport goes.
#[cfg(unix)]
fn in_own_group(cmd: tokio::process::Command) -> process_wrap::tokio::CommandWrap {
    let mut cmd = process_wrap::tokio::CommandWrap::from(cmd);
    cmd.wrap(process_wrap::tokio::ProcessGroup::leader())
        .wrap(KillGroupOnDrop);
    cmd
}

#[cfg(not(unix))]
fn in_own_group(cmd: tokio::process::Command) -> process_wrap::tokio::CommandWrap {
    cmd.into()
}

/// Kills the process group (see [`in_own_group`]) when the child is
/// dropped, whether or not its leader has exited: a leader that exits on
/// end of input may leave children behind. Synchronous (one `killpg`), so
/// it holds when the runtime itself is going away.
#[cfg(unix)]
#[derive(Debug)]
struct KillGroupOnDrop;

#[cfg(unix)]
impl process_wrap::tokio::CommandWrapper for KillGroupOnDrop {
    fn wrap_child(
        &mut self,
        inner: Box<dyn process_wrap::tokio::ChildWrapper>,
        _core: &process_wrap::tokio::CommandWrap,
    ) -> std::io::Result<Box<dyn process_wrap::tokio::ChildWrapper>> {
        Ok(Box::new(GroupChild(Some(inner))))
    }
}

/// `None` only on the way out of [`ChildWrapper::into_inner`], where
/// nothing can look at it.
///
/// [`ChildWrapper::into_inner`]: process_wrap::tokio::ChildWrapper::into_inner
#[cfg(unix)]
#[derive(Debug)]
struct GroupChild(Option<Box<dyn process_wrap::tokio::ChildWrapper>>);

#[cfg(unix)]
impl process_wrap::tokio::ChildWrapper for GroupChild {
    fn inner(&self) -> &dyn process_wrap::tokio::ChildWrapper {
        self.0.as_deref().unwrap_or(self)
    }
    fn inner_mut(&mut self) -> &mut dyn process_wrap::tokio::ChildWrapper {
        match self.0 {
            Some(ref mut child) => child.as_mut(),
            None => self,
        }
    }
    fn into_inner(mut self: Box<Self>) -> Box<dyn process_wrap::tokio::ChildWrapper> {
        // Whoever takes the child takes the duty to end its group.
        match self.0.take() {
            Some(child) => child,
            None => self,
        }
    }
}

#[cfg(unix)]
impl Drop for GroupChild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            // SIGKILL to the whole group (the process-group child's `start_kill`).
            let _ = child.start_kill();
        }
    }
}

/// The server's stderr, line by line, into the log: control characters
/// escaped, at most [`STDERR_LINES_PER_SEC`] lines a second.
async fn log_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut line = Vec::new();
    let mut chunk = [0u8; 1024];
    let mut limit = LineLimit::new(tokio::time::Instant::now().into_std());
    let mut emit = |line: &[u8]| {
        let (dropped, admitted) = limit.admit(std::time::Instant::now());
        if let Some(n) = dropped {
            tracing::warn!(server = %server, "stderr: {n} lines not logged (more than {STDERR_LINES_PER_SEC} a second)");
        }
        if admitted {
            tracing::info!(server = %server, "stderr: {}", printable(line));
        }
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in chunk.iter().take(n) {
            if byte == b'\n' {
                emit(&line);
                line.clear();
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        emit(&line);
    }
    if let Some(n) = limit.flush() {
        tracing::warn!(server = %server, "stderr: {n} lines not logged (more than {STDERR_LINES_PER_SEC} a second)");
    }
}

/// A line of a server as a log line: lossy UTF-8, control characters (ANSI
/// escapes, carriage returns) and bidirectional overrides escaped.
fn printable(line: &[u8]) -> String {
    let mut out = String::with_capacity(line.len());
    for c in String::from_utf8_lossy(line).chars() {
        let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\t') || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// At most [`STDERR_LINES_PER_SEC`] lines per one-second window; the
/// lines over are counted and reported when the next window starts.
struct LineLimit {
    window: std::time::Instant,
    in_window: u32,
    dropped: u64,
}

impl LineLimit {
    fn new(now: std::time::Instant) -> Self {
        Self {
            window: now,
            in_window: 0,
            dropped: 0,
        }
    }

    /// Lines dropped in the windows before (to report), and whether this line is logged.
    fn admit(&mut self, now: std::time::Instant) -> (Option<u64>, bool) {
        let mut report = None;
        if now.saturating_duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.in_window = 0;
            report = self.flush();
        }
        if self.in_window < STDERR_LINES_PER_SEC {
            self.in_window += 1;
            (report, true)
        } else {
            self.dropped += 1;
            (report, false)
        }
    }

    fn flush(&mut self) -> Option<u64> {
        Some(std::mem::take(&mut self.dropped)).filter(|&n| n > 0)
    }
}

/// Every page of `tools/list`, as tools toolgate can offer.
async fn list(
    server: &McpServer,
    peer: &Peer<RoleClient>,
) -> Result<Vec<Arc<dyn Tool>>, ServiceError> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut schema_bytes = 0usize;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        // Straight to the server: the SDK's list cache could answer with the old list.
        let request = ClientRequest::ListToolsRequest(ListToolsRequest {
            method: Default::default(),
            params: Some(PaginatedRequestParams::default().with_cursor(cursor)),
            extensions: Default::default(),
        });
        let ServerResult::ListToolsResult(page) = peer.send_request(request).await? else {
            return Err(ServiceError::UnexpectedResponse);
        };
        for tool in page.tools {
            if tools.len() == MAX_TOOLS {
                tracing::warn!(server = %server.name, "more than {MAX_TOOLS} tools: the rest are left out");
                return Ok(tools);
            }
            match McpTool::new(server, tool, peer.clone()) {
                Ok(tool) if schema_bytes + tool.schema_bytes > MAX_SERVER_SCHEMA_BYTES => {
                    tracing::warn!(server = %server.name, "tool left out: `{}` would take the server's schemas past {MAX_SERVER_SCHEMA_BYTES} bytes", tool.tool);
                }
                Ok(tool) => {
                    schema_bytes += tool.schema_bytes;
                    tools.push(Arc::new(tool));
                }
                Err(why) => {
                    tracing::warn!(server = %server.name, "tool left out: {}", capped(&why))
                }
            }
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    tracing::warn!(server = %server.name, "more than {MAX_PAGES} pages of tools: the rest are left out");
    Ok(tools)
}

/// A tool of an MCP server, offered as `mcp--<server>--<tool>`.
pub struct McpTool {
    qualified: String,
    server: String,
    tool: String,
    description: String,
    schema: Value,
    schema_bytes: usize,
    asks: bool,
    timeout: Option<Duration>,
    peer: Peer<RoleClient>,
    redactor: Redactor,
}

impl McpTool {
    fn new(
        server: &McpServer,
        tool: rmcp::model::Tool,
        peer: Peer<RoleClient>,
    ) -> Result<Self, String> {
        let name = tool.name.as_ref();
        let qualified = format!("mcp--{}--{name}", server.name);
        if !valid_part(name) || qualified.len() > MAX_NAME_CHARS {
            return Err(format!(
                "`{}` is not a name toolgate can offer (letters, digits, `_`, `-`, no `--`, at most {MAX_NAME_CHARS} characters qualified)",
                name.escape_debug()
            ));
        }
        let schema = Value::Object((*tool.input_schema).clone());
        let schema_bytes = schema.to_string().len();
        if schema_bytes > MAX_SCHEMA_BYTES {
            return Err(format!(
                "`{name}`'s schema is larger than {MAX_SCHEMA_BYTES} bytes"
            ));
        }
        let description: String = tool
            .description
            .as_deref()
            .unwrap_or_default()
            .chars()
            .take(MAX_DESCRIPTION_CHARS)
            .collect();
        Ok(Self {
            asks: asks(server.allow_read_only, tool.annotations.as_ref()),
            server: server.name.clone(),
            tool: name.to_owned(),
            qualified,
            description,
            schema,
            schema_bytes,
            timeout: server.call_timeout,
            peer,
            redactor: server.redactor.clone(),
        })
    }

    async fn call(&self, args: Value) -> Result<Value, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidArgs(format!(
                    "arguments must be an object, not {other}"
                )));
            }
        };
        let request = CallToolRequestParams::new(self.tool.clone()).with_arguments(arguments);
        // Dropping the call (cancelled, timed out) tells the server `notifications/cancelled`.
        let call = self.peer.call_tool_once(request);
        let response = match self.timeout {
            Some(limit) => tokio::time::timeout(limit, call).await.map_err(|_| {
                ToolError::TimedOut(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
            })?,
            None => call.await,
        };
        match response {
            Ok(CallToolResponse::Complete(result)) => output(result),
            Ok(_) => Err(ToolError::Failed(
                "the MCP server asked for more than toolgate supports (input or a task)".into(),
            )),
            Err(ServiceError::McpError(e)) => Err(ToolError::Failed(format!(
                "MCP error {}: {}",
                e.code.0, e.message
            ))),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => Err(
                ToolError::Failed(format!("MCP server `{}` is not connected", self.server)),
            ),
            Err(e) => Err(ToolError::Failed(format!("MCP call failed: {e}"))),
        }
    }
}

/// A call's error as the stream, the model and the history get it: the
/// server's text and the HTTP stack's (which may repeat the URL) without
/// the URL's secrets, and bounded.
fn passed_on(redactor: &Redactor, error: ToolError) -> ToolError {
    match error {
        ToolError::Failed(message) => ToolError::Failed(capped(&redactor.apply(&message))),
        ToolError::InvalidArgs(message) => ToolError::InvalidArgs(capped(&message)),
        other => other,
    }
}

/// Whether calls ask, from the server's annotations: only a read-only,
/// non-destructive tool on a server with `allowReadOnly` does not. No
/// annotations, ask (fail closed).
fn asks(allow_read_only: bool, annotations: Option<&rmcp::model::ToolAnnotations>) -> bool {
    let Some(a) = annotations else { return true };
    let read_only = a.read_only_hint == Some(true);
    let destructive = a.destructive_hint == Some(true);
    !(allow_read_only && read_only && !destructive)
}

/// The tool output: the structured content if any, else the text (or the
/// content blocks as JSON when not all are text). `isError` is the call's error.
fn output(result: CallToolResult) -> Result<Value, ToolError> {
    let texts: Option<Vec<&str>> = result
        .content
        .iter()
        .map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let value = match (&result.structured_content, texts) {
        (Some(structured), _) if result.is_error != Some(true) => structured.clone(),
        (_, Some(texts)) => Value::String(texts.join("\n")),
        (_, None) => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    };
    let size = match &value {
        Value::String(s) => s.len(),
        other => other.to_string().len(),
    };
    if size > MAX_RESULT_BYTES {
        return Err(ToolError::Failed(format!(
            "the result is larger than {MAX_RESULT_BYTES} bytes"
        )));
    }
    if result.is_error == Some(true) {
        let message = match value {
            Value::String(s) if !s.is_empty() => s,
            Value::String(_) => "the MCP tool failed".to_owned(),
            other => other.to_string(),
        };
        return Err(ToolError::Failed(message));
    }
    Ok(value)
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.qualified
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn needs_confirmation(&self, _: &Value) -> bool {
        self.asks
    }

    fn may_need_confirmation(&self) -> bool {
        self.asks
    }

    fn confirmation_hint(&self, args: &Value) -> String {
        format!(
            "Run {} on MCP server {} with {args}?",
            self.tool, self.server
        )
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp {
            server: self.server.clone(),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let result = tokio::select! {
            result = self.call(args) => result,
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        };
        result.map_err(|e| passed_on(&self.redactor, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, ToolAnnotations};
    use serde_json::json;

    fn config(yaml: &str) -> Result<McpServer, McpConfigError> {
        let config: McpServerConfig = yaml_serde::from_str(yaml).unwrap_or_else(|e| panic!("{e}"));
        McpServer::new("fs", &config)
    }

    #[test]
    fn names_that_cannot_be_qualified_are_refused() {
        for name in ["fs", "my_server-2", "A"] {
            assert!(valid_part(name), "{name}");
        }
        for name in ["", "a--b", "-a", "a-", "a b", "a.b", "ä", "a/b"] {
            assert!(!valid_part(name), "{name}");
        }
        let server: McpServerConfig =
            yaml_serde::from_str("command: x").unwrap_or_else(|e| panic!("{e}"));
        assert!(McpServer::new("a--b", &server).is_err());
        assert!(McpServer::new(&"a".repeat(33), &server).is_err());
    }

    #[test]
    fn a_server_is_a_command_or_a_url() {
        assert!(config("command: x").is_ok());
        assert!(config("url: http://127.0.0.1:1/mcp").is_ok());
        let error = |yaml: &str| {
            config(yaml)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            error("{command: x, url: 'http://h/'}"),
            "mcpServers `fs`: give exactly one of `command` and `url`"
        );
        assert_eq!(
            error("{}"),
            "mcpServers `fs`: give exactly one of `command` and `url`"
        );
        assert!(error("url: ftp://h/").contains("not an http(s) URL"));
        assert!(error("{url: 'http://h/', args: [a]}").contains("for a `command` server"));
        assert!(error("{command: x, headers: {a: b}}").contains("for a `url` server"));
        assert!(
            error("{command: x, env: {T: 'env:TOOLGATE_SURELY_UNSET'}}")
                .contains("TOOLGATE_SURELY_UNSET")
        );
        assert!(error("{command: x, timeoutMs: 0}").contains("timeoutMs must be positive"));
    }

    #[test]
    fn only_a_read_only_tool_on_a_trusting_server_runs_unasked() {
        let ro = ToolAnnotations::new().read_only(true);
        let ro_destructive = ToolAnnotations::new().read_only(true).destructive(true);
        let destructive = ToolAnnotations::new().destructive(true);
        let cases = [
            (true, None, true),
            (true, Some(&ro), false),
            (false, Some(&ro), true),
            (true, Some(&ro_destructive), true),
            (true, Some(&destructive), true),
            (true, Some(&ToolAnnotations::new()), true),
        ];
        for (allow, annotations, expected) in cases {
            assert_eq!(
                asks(allow, annotations),
                expected,
                "{allow} {annotations:?}"
            );
        }
    }

    #[test]
    fn the_secrets_of_a_url_are_hidden_in_any_text() {
        let raw = "https://me:hunter22@mcp.example.com/mcp?token=SUPERSECRET&v=2#frag-secret";
        let url = reqwest::Url::parse(raw).unwrap_or_else(|e| panic!("{e}"));
        let redactor = Redactor::for_url(raw, &url);
        let error = format!(
            "error sending request for url ({raw}): connection refused; token=SUPERSECRET; Basic me:hunter22"
        );
        let shown = redactor.apply(&error);
        for secret in ["SUPERSECRET", "hunter22", "frag-secret"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.starts_with("error sending request for url (https://mcp.example.com/mcp?[redacted]): connection refused"),
            "{shown}"
        );
        // A call's error gets the same, and is bounded.
        let failed = passed_on(
            &redactor,
            ToolError::Failed(format!("{error}{}", "x".repeat(10_000))),
        );
        assert!(
            matches!(&failed, ToolError::Failed(m) if !m.contains("SUPERSECRET") && m.len() < MAX_MESSAGE_BYTES + 32),
            "{failed:?}"
        );
        assert_eq!(
            passed_on(&redactor, ToolError::TimedOut(5)),
            ToolError::TimedOut(5)
        );
        // Nothing to hide: the text stays as it is.
        let plain = reqwest::Url::parse("http://127.0.0.1:1/mcp").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Redactor::for_url("http://127.0.0.1:1/mcp", &plain).apply(&error),
            error
        );
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        assert_eq!(capped("short"), "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = capped(&long);
        let (kept, rest) = cut.split_once('…').unwrap_or_default();
        assert_eq!(kept.len(), MAX_MESSAGE_BYTES);
        assert_eq!(
            rest,
            format!(" ({} more bytes)", long.len() - MAX_MESSAGE_BYTES)
        );
    }

    #[test]
    fn stderr_lines_are_escaped_and_rate_limited() {
        assert_eq!(
            printable(b"\x1b[31mred\x1b[0m\rover\ttab \xe2\x80\xae"),
            "\\u{1b}[31mred\\u{1b}[0m\\rover\ttab \\u{202e}"
        );
        let start = std::time::Instant::now();
        let mut limit = LineLimit::new(start);
        let admitted = (0..25).filter(|_| limit.admit(start).1).count();
        assert_eq!(admitted, STDERR_LINES_PER_SEC as usize);
        assert_eq!(
            limit.admit(start + Duration::from_millis(1000)),
            (Some(5), true)
        );
        assert_eq!(limit.flush(), None);
        limit.admit(start + Duration::from_millis(1001));
        assert_eq!(limit.flush(), None);
    }

    #[test]
    fn results_map_to_outputs_and_errors() {
        let text = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(output(text), Ok(json!("a\nb")));
        let structured = CallToolResult::structured(json!({"n": 1}));
        assert_eq!(output(structured), Ok(json!({"n": 1})));
        let failed = CallToolResult::error(vec![ContentBlock::text("no disk")]);
        assert_eq!(output(failed), Err(ToolError::Failed("no disk".into())));
        let empty = CallToolResult::error(Vec::new());
        assert_eq!(
            output(empty),
            Err(ToolError::Failed("the MCP tool failed".into()))
        );
        let huge =
            CallToolResult::success(vec![ContentBlock::text("x".repeat(MAX_RESULT_BYTES + 1))]);
        assert!(matches!(output(huge), Err(ToolError::Failed(m)) if m.contains("larger than")));
    }
}
