use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use toolgate::App;
use toolgate::app::open_store;
use toolgate::config::ProviderKind;
use toolgate::config::{Config, Settings};
use toolgate::confirm::Signer;
use toolgate::policy::Mode;
use toolgate::tools::ToolSource;
use toolgate::tools::mcp::ServerState as McpState;

#[derive(Parser)]
#[command(version, about = "A human gate in front of an AI agent's tool calls")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the UI message stream on POST /stream and /api/chat.
    Serve {
        /// YAML config file; every field is optional.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Address to listen on [default: 127.0.0.1:8080]; port 0 picks one.
        #[arg(long)]
        bind: Option<SocketAddr>,
        /// Approve every call that would ask (toolPolicies.alwaysDeny still holds).
        #[arg(long)]
        auto_approve: bool,
        /// The model provider (config: model.provider).
        #[arg(long, value_enum)]
        provider: Option<ProviderKind>,
        /// The upstream model name, e.g. gpt-4o-mini (config: model.model).
        #[arg(long)]
        model: Option<String>,
        /// The provider's API base URL (config: model.baseUrl).
        #[arg(long)]
        base_url: Option<String>,
        /// With --provider adk: the ADK app to run (config: model.app).
        #[arg(long)]
        adk_app: Option<String>,
        /// Also answer to this host name, e.g. the one a proxy forwards
        /// (adds to server.allowedHosts); repeatable.
        #[arg(long = "allowed-host", value_name = "HOST")]
        allowed_hosts: Vec<String>,
        /// Also let pages of this origin call toolgate, e.g.
        /// http://localhost:3000 (adds to cors.allowedOrigins); repeatable.
        #[arg(long = "cors-origin", value_name = "ORIGIN")]
        cors_origins: Vec<String>,
    },
    /// Serve MCP over stdin and stdout, for MCP clients that launch their
    /// servers: the same tools, policy and store as `serve` (decide its
    /// questions from a `serve` on the same store). The principal is
    /// `mcp.principal`, or TOOLGATE_MCP_PRINCIPAL, else `anonymous`.
    Mcp {
        /// YAML config file; every field is optional.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// List every tool with its qualified name and effective policy.
    Tools {
        /// YAML config file; every field is optional.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Check a config file, or print the JSON Schema of one.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Export the audit log's hash chain, or verify an export offline.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Write the configured store's audit chain as JSON Lines, one event a
    /// line with its seq, prev, hash and signature, oldest first.
    Export {
        /// YAML config file (its `store` is read).
        #[arg(long)]
        config: Option<PathBuf>,
        /// From the first event at or after: RFC 3339
        /// (2026-11-01T09:00:00Z), a date (2026-11-01, UTC), an age (7d,
        /// 12h, 30m) or milliseconds since the epoch. Default: all.
        #[arg(long)]
        since: Option<String>,
        /// Write here rather than to standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Check an export: each event after the one before it, its hash, and
    /// its signature; names the first broken link (then exits with 1).
    Verify {
        /// The export (JSON Lines).
        file: PathBuf,
        /// A public key the events must be signed with: a PEM file, or
        /// the key's 32 bytes in base64; repeatable (keys rotated).
        #[arg(
            long = "public-key",
            value_name = "KEY",
            required_unless_present = "unsigned"
        )]
        public_keys: Vec<String>,
        /// Check the chain only, not signatures: anyone who could write
        /// the store could have rewritten an unsigned chain whole.
        #[arg(long, conflicts_with = "public_keys")]
        unsigned: bool,
    },
    /// Print the public key of `audit.signingKey` (PEM), for `verify`.
    PublicKey {
        /// YAML config file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective settings of FILE (secrets redacted), or what is
    /// wrong with it (then exit with status 1).
    Check {
        /// The YAML config file.
        file: PathBuf,
    },
    /// Print the JSON Schema of the config file (`toolgate.schema.json`).
    Schema,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = match toolgate::telemetry::init() {
        Ok(telemetry) => telemetry,
        Err(e) => return failed(&e.into()),
    };
    let result = run(cli).await;
    // After serving, so that a stopped server still sends its last spans.
    telemetry.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

/// Prints `error: ` and the error once: each cause that its message does
/// not already say is added after a colon (no "Caused by:" list repeating
/// the message, no backtrace).
fn failed(error: &anyhow::Error) -> ExitCode {
    let mut message = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !message.contains(&cause) {
            message.push_str(": ");
            message.push_str(&cause);
        }
    }
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Config {
            command: ConfigCommand::Schema,
        } => {
            std::io::stdout().write_all(toolgate::config::schema().as_bytes())?;
        }
        Command::Config {
            command: ConfigCommand::Check { file },
        } => {
            let settings = Settings::load(&file)?;
            write!(std::io::stdout(), "{settings}")?;
        }
        Command::Audit { command } => audit(command).await?,
        Command::Tools { config } => {
            let app = App::new(Settings::new(load(config.as_deref())?)?);
            let mut stdout = std::io::stdout();
            let inventory = app.tools().await;
            for tool in &inventory.tools {
                let source = match &tool.source {
                    ToolSource::Builtin => "built-in".to_owned(),
                    ToolSource::Http => "http".to_owned(),
                    ToolSource::Client => "client".to_owned(),
                    ToolSource::Mcp { server } => format!("mcp server {server}"),
                    ToolSource::Application => "application".to_owned(),
                };
                writeln!(
                    stdout,
                    "{}\t({source}) {}\n    {}",
                    tool.qualified_name, tool.description, tool.policy
                )?;
            }
            for server in &inventory.mcp_servers {
                let state = match &server.state {
                    McpState::Connecting => "connecting".to_owned(),
                    McpState::Available { tools } => format!("available, {tools} tools"),
                    McpState::Unavailable { reason, .. } => format!("unavailable: {reason}"),
                    McpState::Restarting { attempt, reason } => {
                        format!("restarting (attempt {attempt}) after: {reason}")
                    }
                };
                writeln!(
                    stdout,
                    "mcp server {} ({}): {state}",
                    server.name, server.transport
                )?;
            }
        }
        Command::Mcp { config } => {
            let settings = Settings::new(load(config.as_deref())?)?;
            let (store, where_) = open_store(&settings.store)
                .await
                .context("cannot open the store")?;
            tracing::info!("MCP over stdio; state: {where_}");
            let signer = Signer::new(settings.signing_keys.clone());
            // Boxed: the stdio server's future is deep, and `run` is one future.
            let serve = App::new(settings)
                .with_store(store)
                .with_signer(signer)
                .serve_mcp_stdio();
            Box::pin(serve).await?;
        }
        Command::Serve {
            config,
            bind,
            auto_approve,
            provider,
            model,
            base_url,
            adk_app,
            allowed_hosts,
            cors_origins,
        } => {
            let mut config = load(config.as_deref())?;
            if auto_approve {
                config.tool_confirmation.mode = Mode::AutoApprove;
            }
            if let Some(provider) = provider {
                config.model.provider = provider;
            }
            config.model.model = model.or(config.model.model);
            config.model.base_url = base_url.or(config.model.base_url);
            config.model.app = adk_app.or(config.model.app);
            config.server.allowed_hosts.extend(allowed_hosts);
            config.cors.allowed_origins.extend(cors_origins);
            let settings = Settings::new(config)?;
            // OIDC tokens, like keys, are needed on every route.
            let keyless = settings.auth.api_keys.is_empty() && settings.auth.oidc.is_none();
            let addr = bind
                .or(settings.bind)
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
            if keyless && !addr.ip().is_loopback() {
                anyhow::bail!(
                    "refusing to listen on {addr} without API keys: add auth.apiKeys to the config, or bind to loopback"
                );
            }
            // The metrics listener answers without a key: the same rule.
            if let Some(metrics) = settings.metrics.bind
                && keyless
                && !metrics.ip().is_loopback()
            {
                anyhow::bail!(
                    "refusing to serve metrics on {metrics} without API keys: add auth.apiKeys to the config, or bind metrics.bind to loopback"
                );
            }
            raise_open_files_limit();
            let (store, where_) = open_store(&settings.store)
                .await
                .context("cannot open the store")?;
            let signer = Signer::new(settings.signing_keys.clone());
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot bind {addr}"))?;
            let local = listener.local_addr()?;
            let mut stdout = std::io::stdout();
            writeln!(stdout, "listening on http://{local}")?;
            stdout.flush()?;
            tracing::info!("state: {where_}");
            if keyless {
                tracing::info!("no API keys configured: listening on loopback only");
            }
            if signer.is_some() {
                tracing::info!("confirmations are signed");
            }
            if store.signs_audit() {
                tracing::info!("audit events are chained and signed");
            } else {
                tracing::warn!(
                    "audit events are chained but unsigned: set audit.signingKey to sign them"
                );
            }
            // The first signal drains; a second one ends the process at once.
            let mut signals = Signals::new();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let serve = App::new(settings)
                .with_store(store)
                .with_signer(signer)
                .serve_until(listener, async {
                    let _ = stopped.await;
                });
            tokio::pin!(serve);
            let mut stop = Some(stop);
            loop {
                tokio::select! {
                    served = &mut serve => break served?,
                    () = signals.next() => match stop.take() {
                        Some(stop) => {
                            tracing::info!("stopping (a second Ctrl-C or SIGTERM stops at once)");
                            let _ = stop.send(());
                        }
                        None => {
                            tracing::warn!("stopped at once: turns and calls in flight are cut off");
                            std::process::exit(1);
                        }
                    },
                }
            }
        }
    }
    Ok(())
}

/// Every connection, upstream request and MCP server takes a file
/// descriptor; the usual soft limit (1,024) is far below what the hard
/// limit allows.
fn raise_open_files_limit() {
    #[cfg(unix)]
    match rlimit::getrlimit(rlimit::Resource::NOFILE) {
        Ok((soft, hard)) => match rlimit::increase_nofile_limit(hard) {
            Ok(now) => tracing::info!("open files limit: {now} (was {soft}, hard limit {hard})"),
            Err(e) => tracing::warn!("open files limit stays {soft} (hard limit {hard}): {e}"),
        },
        Err(e) => tracing::warn!("cannot read the open files limit: {e}"),
    }
}

/// Ctrl-C and SIGTERM (systemd, Docker and Kubernetes stop a service with
/// it), each listened for once for the whole run, so that a second one is
/// heard too.
struct Signals {
    #[cfg(unix)]
    listened: Vec<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listened = [
                ("Ctrl-C", SignalKind::interrupt()),
                ("SIGTERM", SignalKind::terminate()),
            ]
            .into_iter()
            .filter_map(|(name, kind)| {
                signal(kind)
                    .inspect_err(|e| tracing::warn!("cannot listen for {name}: {e}"))
                    .ok()
            })
            .collect();
            Self { listened }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next Ctrl-C or SIGTERM.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            if self.listened.is_empty() {
                std::future::pending::<()>().await;
            }
            let next = self.listened.iter_mut().map(|s| Box::pin(s.recv()));
            futures::future::select_all(next).await;
        }
        #[cfg(not(unix))]
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!("cannot listen for Ctrl-C: {e}");
            std::future::pending::<()>().await;
        }
    }
}

/// `toolgate audit …`.
async fn audit(command: AuditCommand) -> anyhow::Result<()> {
    use toolgate::config::{StoreBackend, StoreSettings};
    use toolgate::store::chain;
    match command {
        AuditCommand::Export {
            config,
            since,
            output,
        } => {
            let store_settings = StoreSettings::from_config(&load(config.as_deref())?)?;
            if store_settings.backend == StoreBackend::Memory {
                anyhow::bail!(
                    "the memory store lives inside its server: there is no audit log to export (set store.kind to sqlite or redis)"
                );
            }
            let since = match since {
                Some(since) => since_ms(&since)?,
                None => 0,
            };
            let (store, _) = open_store(&store_settings)
                .await
                .context("cannot open the store")?;
            let events = store.audit_chain(since).await?;
            let mut out: Box<dyn Write> = match &output {
                Some(path) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("cannot write {}", path.display()))?,
                )),
                None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            };
            for event in &events {
                writeln!(out, "{}", event.line()?)?;
            }
            out.flush()?;
            let signed = events.iter().filter(|e| e.link.sig.is_some()).count();
            let span = match (events.first(), events.last()) {
                (Some(a), Some(b)) => format!(", seq {} to {}", a.link.seq, b.link.seq),
                _ => String::new(),
            };
            eprintln!(
                "{} events{span}; {}",
                events.len(),
                match signed {
                    0 if events.is_empty() => "none to sign".to_owned(),
                    0 => "unsigned (no audit.signingKey): the chain shows order, not authorship"
                        .to_owned(),
                    n if n == events.len() => "all signed".to_owned(),
                    n => format!("{n} signed, the rest from before a key was set"),
                }
            );
        }
        AuditCommand::Verify {
            file,
            public_keys,
            unsigned,
        } => {
            let keys = public_keys
                .iter()
                .map(|key| {
                    let text = match std::fs::read_to_string(key) {
                        Ok(text) => text,
                        Err(_) => key.clone(),
                    };
                    chain::parse_public(&text).with_context(|| format!("--public-key {key}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let reader = std::io::BufReader::new(
                std::fs::File::open(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?,
            );
            let checked = (!unsigned).then_some(keys.as_slice());
            let verified = chain::verify(std::io::BufRead::lines(reader), checked)?;
            let mut stdout = std::io::stdout();
            match (verified.first, verified.last_seq) {
                (Some((first, prev)), Some(last)) => {
                    let start = if first == 1 {
                        "from the chain's first event".to_owned()
                    } else {
                        format!("from seq {first}, after an event whose hash is {prev}")
                    };
                    let signatures = if verified.signatures_checked {
                        "every signature valid"
                    } else {
                        "signatures NOT checked (--unsigned)"
                    };
                    writeln!(
                        stdout,
                        "intact: {} events, seq {first} to {last} ({start}); {signatures}",
                        verified.events
                    )?;
                }
                _ => anyhow::bail!("{} holds no audit events", file.display()),
            }
        }
        AuditCommand::PublicKey { config } => {
            let store_settings = StoreSettings::from_config(&load(config.as_deref())?)?;
            let Some(key) = store_settings.audit_key else {
                anyhow::bail!("no audit.signingKey in the config: the chain is unsigned");
            };
            write!(std::io::stdout(), "{}", key.public_pem())?;
        }
    }
    Ok(())
}

/// `--since`: RFC 3339, a date (UTC), an age (`7d`, `12h`, `30m`) or
/// milliseconds since the epoch.
fn since_ms(since: &str) -> anyhow::Result<u64> {
    let bad = || {
        anyhow::anyhow!(
            "--since {since}: expected RFC 3339 (2026-11-01T09:00:00Z), a date (2026-11-01), an age (7d, 12h, 30m) or milliseconds"
        )
    };
    if let Ok(ms) = since.parse::<u64>() {
        return Ok(ms);
    }
    let unit = match since.chars().last() {
        Some('d') => Some(86_400_000u64),
        Some('h') => Some(3_600_000),
        Some('m') => Some(60_000),
        _ => None,
    };
    if let Some(unit) = unit
        && let Ok(n) = since[..since.len() - 1].parse::<u64>()
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        return Ok(now.saturating_sub(n.saturating_mul(unit)));
    }
    let at = chrono::DateTime::parse_from_rfc3339(since)
        .map(|t| t.timestamp_millis())
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(since, "%Y-%m-%d")
                .map_err(|_| bad())
                .and_then(|d| d.and_hms_opt(0, 0, 0).ok_or_else(bad))
                .map(|t| t.and_utc().timestamp_millis())
        })?;
    u64::try_from(at).map_err(|_| bad())
}

fn load(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    })
}
