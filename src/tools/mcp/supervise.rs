//! One supervisor task per server: connect, list, relist on change, reconnect with back-off.

use super::*;

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
pub(super) struct Handler {
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

pub(super) type Connection = RunningService<RoleClient, Handler>;

pub(super) async fn supervise(server: McpServer, toolbox: WeakToolbox, stop: CancellationToken) {
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
pub(super) async fn connected(
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
    let connecting =
        tokio::time::timeout(server.connect_timeout, connect(server, handler, toolbox));
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
pub(super) async fn refresh(
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

pub(super) async fn connect(
    server: &McpServer,
    handler: Handler,
    toolbox: &WeakToolbox,
) -> Result<Connection, String> {
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
            // Tracked with the supervisors, so `Toolbox::shutdown` waits for
            // it; it ends when the process (killed on drop) closes stderr.
            // With the toolbox gone nobody is left to log for.
            if let (Some(stderr), Some(toolbox)) = (stderr, toolbox.upgrade()) {
                let runtime = tokio::runtime::Handle::current();
                toolbox.track(log_stderr(server.name.clone(), stderr), &runtime);
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

/// Every page of `tools/list`, as tools toolgate can offer.
pub(super) async fn list(
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
