//! MCP servers as tool sources, against the fixture server of
//! `tests/fixtures/mcp/` (over stdio as the `toolgate-mcp-fixture` binary,
//! over streamable HTTP in-process): listing, the confirmation flow, errors,
//! cancellation, restarts, and servers that never come up.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;
use crate::common::from_json;
#[allow(dead_code)]
#[path = "../fixtures/mcp/server.rs"]
mod fixture;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::calls::Calls;
use common::{Server, user_says, wait};
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::Config;

const FIXTURE: &str = env!("CARGO_BIN_EXE_toolgate-mcp-fixture");

/// A temporary directory with the fixture's journal.
pub(crate) struct Journal {
    dir: tempfile::TempDir,
}

impl Journal {
    pub(crate) fn new() -> Self {
        Self {
            dir: tempfile::tempdir().must(),
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("journal")
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.path())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn count(&self, prefix: &str) -> usize {
        self.lines()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

/// `mcpServers.notes` as the stdio fixture writing to `journal`.
pub(crate) fn stdio_server(journal: &Path, extra: &str) -> String {
    format!(
        "mcpServers:\n  notes:\n    command: {FIXTURE}\n    env: {{TOOLGATE_FIXTURE_JOURNAL: '{}'}}\n{extra}",
        journal.display()
    )
}

/// The fixture over streamable HTTP on 127.0.0.1:0; its URL.
async fn http_fixture(journal: &Path) -> String {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let journal = journal.to_owned();
    let service = StreamableHttpService::new(
        move || Ok(fixture::Fixture::new(Some(journal.clone()), false)),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.must();
    let url = format!("http://{}/mcp", listener.local_addr().must());
    // A test's server: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn serve(yaml: &str) -> Server {
    let config = Config::from_yaml(yaml)
        .map_err(|e| format!("{e}\n{yaml}"))
        .must();
    Server::with(config, |app| app.with_provider(Calls)).await
}

async fn inventory(server: &Server) -> Value {
    let reply = server.get("/api/tools").await;
    from_json(&reply.body)
}

fn state_of(inventory: &Value, server: &str) -> Value {
    inventory["mcpServers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == server)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Polls `GET /api/tools` until `ready` holds, and returns it.
pub(crate) async fn until(server: &Server, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    wait::until_ok(&format!("the tools to be {what}"), || async {
        let now = inventory(server).await;
        if ready(&now) {
            Ok(now)
        } else {
            Err(format!("{now:#}"))
        }
    })
    .await
}

/// Every MCP tool runs unasked: for tests of what happens after the gate.
const ALLOW_ALL: &str = "toolConfirmation:\n  toolPolicies:\n    alwaysAllow: ['mcp--*']\n";

/// The stdio server `notes` (with `extra` server keys), every tool allowed,
/// once it is available.
async fn notes_allowed(journal: &Journal, extra: &str) -> Server {
    let yaml = format!("{}{extra}{ALLOW_ALL}", stdio_server(&journal.path(), ""));
    let server = serve(&yaml).await;
    available(&server, "notes").await;
    server
}

/// `notes` over stdio and `web` over HTTP, every tool allowed, once both
/// are available.
async fn both_allowed(journal: &Journal) -> Server {
    let url = http_fixture(&journal.path()).await;
    let yaml = format!(
        "{}  web:\n    url: {url}\n{ALLOW_ALL}",
        stdio_server(&journal.path(), "")
    );
    let server = serve(&yaml).await;
    available(&server, "notes").await;
    available(&server, "web").await;
    server
}

pub(crate) async fn available(server: &Server, name: &str) -> Value {
    until(server, "available", |i| {
        state_of(i, name)["state"] == "available"
    })
    .await
}

pub(crate) fn tool<'a>(inventory: &'a Value, qualified: &str) -> Option<&'a Value> {
    inventory["tools"]
        .as_array()?
        .iter()
        .find(|t| t["qualifiedName"] == qualified)
}

pub(crate) fn outputs(reply: &common::Reply) -> Vec<Value> {
    reply
        .of_type("tool-output-available")
        .iter()
        .filter(|c| c["toolCallId"] == common::calls::CALL_ID)
        .map(|c| c["output"].clone())
        .collect()
}

#[tokio::test]
async fn every_page_of_tools_is_listed_with_qualified_names_sources_and_policies() {
    let journal = Journal::new();
    let server = serve(&stdio_server(&journal.path(), "    allowReadOnly: true\n")).await;
    let tools = available(&server, "notes").await;
    assert_eq!(
        state_of(&tools, "notes"),
        json!({"name": "notes", "transport": "stdio", "state": "available", "tools": 7})
    );
    let mcp: Vec<(String, String)> = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["source"] == "mcp")
        .map(|t| {
            assert_eq!(t["server"], "notes");
            (
                t["qualifiedName"].as_str().unwrap_or("").to_owned(),
                t["policy"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let asks = |tool: &str| {
        (
            format!("mcp--notes--{tool}"),
            format!(
                "mcp--notes--{tool} decides from its arguments whether to ask; otherwise asks (mode event-based)"
            ),
        )
    };
    // Nine tools over five pages; the two names toolgate cannot offer are left out.
    assert_eq!(
        mcp,
        [
            (
                "mcp--notes--read_note".to_owned(),
                "runs (mcp--notes--read_note never asks)".to_owned()
            ),
            asks("delete_note"),
            asks("slow"),
            asks("fail"),
            asks("broken"),
            asks("crash"),
            asks("grow"),
        ]
    );
    assert_eq!(
        tool(&tools, "internal--get_weather").map(|t| t["source"].clone()),
        Some(json!("builtin"))
    );
    let schema = tool(&tools, "mcp--notes--read_note").map(|t| t["parameters"].clone());
    assert_eq!(
        schema,
        Some(json!({"type": "object", "properties": {"path": {"type": "string"}}}))
    );
}

#[tokio::test]
async fn a_destructive_call_asks_and_runs_once_when_approved() {
    let journal = Journal::new();
    // allowReadOnly does not make a destructive tool run unasked.
    let server = serve(&stdio_server(&journal.path(), "    allowReadOnly: true\n")).await;
    available(&server, "notes").await;
    let text = r#"mcp--notes--delete_note {"path": "a.txt"}"#;
    let first = server.says("chat-d", text).await;
    assert_eq!(
        common::asked_call(&first)["name"],
        "mcp--notes--delete_note"
    );
    assert_eq!(journal.count("call"), 0, "ran before the approval");
    let approve = common::approval_of("chat-d", text, &first);
    let second = server.chat(&approve).await;
    assert_eq!(
        outputs(&second),
        [json!("deleted a.txt")],
        "{}",
        second.body
    );
    // The same approval again reports the recorded outcome; the tool does not run again.
    let replay = server.chat(&approve).await;
    assert_eq!(
        outputs(&replay),
        [json!("deleted a.txt")],
        "{}",
        replay.body
    );
    let calls: Vec<String> = journal
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("call"))
        .collect();
    assert_eq!(calls, [r#"call delete_note {"path":"a.txt"}"#.to_owned()]);
}

#[tokio::test]
async fn over_http_a_read_only_tool_runs_unasked_only_when_allowed_and_no_rule_says_otherwise() {
    let journal = Journal::new();
    let url = http_fixture(&journal.path()).await;
    let text = r#"mcp--web--read_note {"path": "todo"}"#;

    let allowed = serve(&format!(
        "mcpServers:\n  web:\n    url: {url}\n    allowReadOnly: true\n"
    ))
    .await;
    let tools = available(&allowed, "web").await;
    assert_eq!(state_of(&tools, "web")["transport"], "http");
    let reply = allowed.says("chat-r", text).await;
    assert_eq!(
        outputs(&reply),
        [json!({"path": "todo", "text": "buy milk"})],
        "{}",
        reply.body
    );
    assert_eq!(reply.text(), r#"{"path":"todo","text":"buy milk"}"#);

    let asked = serve(&format!("mcpServers:\n  web:\n    url: {url}\n")).await;
    available(&asked, "web").await;
    let reply = asked.says("chat-r", text).await;
    assert_eq!(
        reply.of_type("tool-input-available")[0]["toolName"],
        common::confirmation_name(),
        "{}",
        reply.body
    );

    let denied = serve(&format!(
        "mcpServers:\n  web:\n    url: {url}\n    allowReadOnly: true\ntoolConfirmation:\n  toolPolicies:\n    alwaysDeny: ['mcp--web--read_*']\n"
    ))
    .await;
    available(&denied, "web").await;
    let reply = denied.says("chat-r", text).await;
    assert_eq!(
        reply.error_texts(),
        ["denied by policy: alwaysDeny mcp--web--read_*"]
    );
    assert_eq!(journal.count("call read_note"), 1);
}

#[tokio::test]
async fn an_error_result_and_a_protocol_error_are_tool_output_errors() {
    let journal = Journal::new();
    let server = both_allowed(&journal).await;
    for name in ["notes", "web"] {
        let reply = server
            .says("chat-e", &format!("mcp--{name}--fail {{}}"))
            .await;
        assert_eq!(
            reply.error_texts(),
            ["the disk is on fire"],
            "{}",
            reply.body
        );
        assert_eq!(reply.text(), "the disk is on fire");
        let reply = server
            .says("chat-e", &format!("mcp--{name}--broken {{}}"))
            .await;
        assert_eq!(
            reply.error_texts(),
            ["MCP error -32602: no such note"],
            "{}",
            reply.body
        );
    }
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_call_on_the_server() {
    let journal = Journal::new();
    let server = both_allowed(&journal).await;
    for name in ["notes", "web"] {
        let before = journal.count("cancelled slow");
        let calls = journal.count("call slow");
        let mut body = server
            .open(&user_says(
                "chat-c",
                &format!(r#"mcp--{name}--slow {{"ms": 20000}}"#),
            ))
            .await;
        // Read until the call is under way, then hang up.
        let mut seen = String::new();
        while !seen.contains("tool-input-available") {
            match tokio::time::timeout(Duration::from_secs(5), body.next()).await {
                Ok(Some(Ok(bytes))) => seen.push_str(&String::from_utf8_lossy(&bytes)),
                other => panic!("stream ended early: {other:?} {seen}"),
            }
        }
        wait::until_true(&format!("{name} to be called"), || {
            journal.count("call slow") > calls
        })
        .await;
        drop(body);
        wait::until_ok(&format!("{name} to see the cancellation"), || async {
            if journal.count("cancelled slow") > before {
                Ok(())
            } else {
                Err(format!("{:?}", journal.lines()))
            }
        })
        .await;
    }
}

#[tokio::test]
async fn a_server_that_crashes_is_shown_unavailable_and_restarted() {
    let journal = Journal::new();
    let server = notes_allowed(&journal, "").await;
    let reply = server.says("chat-x", "mcp--notes--crash {}").await;
    assert_eq!(
        reply.error_texts(),
        ["MCP server `notes` is not connected"],
        "{}",
        reply.body
    );
    let down = until(&server, "unavailable", |i| {
        state_of(i, "notes")["state"] == "unavailable"
    })
    .await;
    assert!(
        state_of(&down, "notes")["reason"]
            .as_str()
            .is_some_and(|r| r.contains("connection ended")),
        "{down:#}"
    );
    assert_eq!(tool(&down, "mcp--notes--read_note"), None);
    // Meanwhile a call to its tool is refused, and the turn goes on.
    let reply = server
        .says("chat-x", r#"mcp--notes--read_note {"path": "a"}"#)
        .await;
    assert_eq!(
        reply.error_texts(),
        ["unknown tool `mcp--notes--read_note`"]
    );
    let up = available(&server, "notes").await;
    assert!(tool(&up, "mcp--notes--read_note").is_some());
    let reply = server
        .says("chat-x", r#"mcp--notes--read_note {"path": "a"}"#)
        .await;
    assert_eq!(outputs(&reply), [json!({"path": "a", "text": "buy milk"})]);
}

#[tokio::test]
async fn servers_that_fail_to_start_or_hang_block_neither_start_up_nor_other_tools() {
    let journal = Journal::new();
    let yaml = format!(
        "{}  gone:\n    command: /nonexistent/mcp-server\n  refuses:\n    command: {FIXTURE}\n    args: [--exit-at-start]\n  silent:\n    command: {FIXTURE}\n    args: [--silent]\n    connectTimeoutMs: 300\n",
        stdio_server(&journal.path(), "")
    );
    let started = tokio::time::Instant::now();
    let server = serve(&yaml).await;
    // Serving at once: the built-in tools work before any MCP server is up.
    let reply = server
        .says("chat-s", r#"get_weather {"city": "Oslo"}"#)
        .await;
    assert_eq!(outputs(&reply).len(), 1, "{}", reply.body);
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    let all = until(&server, "settled", |i| {
        ["gone", "refuses", "silent"]
            .iter()
            .all(|s| state_of(i, s)["state"] == "unavailable")
            && state_of(i, "notes")["state"] == "available"
    })
    .await;
    let reason = |s: &str| {
        state_of(&all, s)["reason"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert!(
        reason("gone").starts_with("cannot start `/nonexistent/mcp-server`"),
        "{all:#}"
    );
    assert!(
        reason("refuses").starts_with("initialize failed"),
        "{all:#}"
    );
    assert_eq!(reason("silent"), "no answer to initialize within 300 ms");
    assert!(tool(&all, "mcp--notes--read_note").is_some());
    // Retried with a growing back-off.
    let later = until(&server, "retried", |i| {
        state_of(i, "gone")["retryInMs"].as_u64() >= Some(1000)
    })
    .await;
    assert_eq!(state_of(&later, "gone")["state"], "unavailable");
}

#[tokio::test]
async fn a_tool_list_change_is_picked_up() {
    let journal = Journal::new();
    let server = notes_allowed(&journal, "").await;
    let before = available(&server, "notes").await;
    assert_eq!(tool(&before, "mcp--notes--extra"), None);
    let reply = server.says("chat-g", "mcp--notes--grow {}").await;
    assert_eq!(outputs(&reply), [json!("grown")], "{}", reply.body);
    until(&server, "grown", |i| tool(i, "mcp--notes--extra").is_some()).await;
    let reply = server.says("chat-g", "mcp--notes--extra {}").await;
    assert_eq!(outputs(&reply), [json!("extra ran")], "{}", reply.body);
}

#[test]
fn bad_servers_are_config_errors() {
    let error = |yaml: &str| {
        toolgate::config::Settings::from_yaml(yaml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(
        error("mcpServers:\n  a--b:\n    command: x\n").contains("mcpServers `a--b`: a name is"),
        "{}",
        error("mcpServers:\n  a--b:\n    command: x\n")
    );
    assert!(error("mcpServers:\n  a:\n    url: nope\n").contains("`nope` is not a URL"));
    assert!(
        error("mcpServers:\n  a:\n    command: x\n    color: red\n")
            .contains("unknown field `color`")
    );
    assert!(
        error("mcpServers:\n  a:\n    url: http://h/\n    headers: {authorization: 'env:TOOLGATE_SURELY_UNSET'}\n")
            .contains("TOOLGATE_SURELY_UNSET")
    );
}

#[test]
fn the_cli_lists_mcp_tools_and_server_states() -> anyhow::Result<()> {
    let journal = Journal::new();
    let config = journal.dir.path().join("toolgate.yaml");
    let yaml = format!(
        "{}    allowReadOnly: true\n  gone:\n    command: /nonexistent/mcp-server\n",
        stdio_server(&journal.path(), "")
    );
    std::fs::write(&config, yaml)?;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["tools", "--config"])
        .arg(&config)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert_contains(
        &stdout,
        "mcp--notes--read_note\t(mcp server notes) Read a note\n    runs (mcp--notes--read_note never asks)",
    );
    assert_contains(&stdout, "internal--get_weather\t(built-in)");
    assert_contains(&stdout, "mcp server notes (stdio): available, 7 tools");
    assert!(
        stdout.contains(
            "mcp server gone (stdio): unavailable: cannot start `/nonexistent/mcp-server`"
        ),
        "{stdout}"
    );
    Ok(())
}

#[tokio::test]
async fn a_call_that_hangs_times_out_and_is_cancelled_on_the_server() {
    let journal = Journal::new();
    let server = notes_allowed(&journal, "    timeoutMs: 300\n").await;
    let reply = server
        .says("chat-t", r#"mcp--notes--slow {"ms": 20000}"#)
        .await;
    assert_eq!(
        reply.error_texts(),
        ["tool call timed out after 300 ms"],
        "{}",
        reply.body
    );
    wait::until_ok("the server to see the timed-out call cancelled", || async {
        if journal.count("cancelled slow") > 0 {
            Ok(())
        } else {
            Err(format!("{:?}", journal.lines()))
        }
    })
    .await;
}

#[tokio::test]
async fn a_secret_in_the_url_shows_nowhere() -> anyhow::Result<()> {
    let yaml = "mcpServers:\n  closed:\n    url: 'http://user:PASSWORD1@127.0.0.1:1/mcp?token=SUPERSECRET'\n    connectTimeoutMs: 2000\n";
    let server = serve(yaml).await;
    let down = until(&server, "unavailable", |i| {
        state_of(i, "closed")["state"] == "unavailable"
    })
    .await;
    let reply = server.get("/api/tools").await;
    for secret in ["SUPERSECRET", "PASSWORD1", "token="] {
        assert!(!reply.body.contains(secret), "{}", reply.body);
    }
    let reason = state_of(&down, "closed")["reason"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(reason.starts_with("initialize failed"), "{reason}");
    // The log (at debug) and the CLI say no more.
    let journal = Journal::new();
    let config = common::config_file(journal.dir.path(), yaml);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["tools", "--config"])
        .arg(&config)
        .env("RUST_LOG", "toolgate=debug")
        .output()?;
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_contains(&all, "mcp server closed (http): unavailable");
    for secret in ["SUPERSECRET", "PASSWORD1"] {
        assert!(!all.contains(secret), "{all}");
    }
    Ok(())
}

#[tokio::test]
async fn a_huge_error_message_is_cut() {
    let journal = Journal::new();
    let server = notes_allowed(&journal, "").await;
    let reply = server
        .says("chat-h", r#"mcp--notes--broken {"repeat": 100000}"#)
        .await;
    let errors = reply.error_texts();
    assert_eq!(errors.len(), 1, "{}", reply.body.len());
    assert!(
        errors[0].starts_with("MCP error -32602: no such note no such note"),
        "{}",
        errors[0]
    );
    assert!(errors[0].len() < 4096 + 64, "{}", errors[0].len());
    assert!(errors[0].ends_with("more bytes)"), "{}", errors[0]);
}

#[tokio::test]
async fn a_storm_of_list_changes_is_one_relist_a_second() {
    let journal = Journal::new();
    let server = notes_allowed(&journal, "").await;
    assert_eq!(journal.count("list"), 1);
    let reply = server
        .says("chat-storm", r#"mcp--notes--grow {"times": 50}"#)
        .await;
    assert_eq!(outputs(&reply), [json!("grown")], "{}", reply.body);
    until(&server, "grown", |i| tool(i, "mcp--notes--extra").is_some()).await;
    // 50 announcements over about 0.6 s: at most one relist a second. The
    // window is the measure (relists that must not happen have no event to
    // wait for), so this sleep stays.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let lists = journal.count("list");
    assert!((2..=3).contains(&lists), "{lists} listings");
}

/// A call whose arguments do not fit the tool's `inputSchema` never reaches
/// the server, over stdio or HTTP: the model is told why.
#[tokio::test]
async fn arguments_that_do_not_fit_the_input_schema_never_reach_the_server() {
    let journal = Journal::new();
    let server = both_allowed(&journal).await;
    for name in ["notes", "web"] {
        let text = format!(r#"mcp--{name}--delete_note {{"path": ["/etc/passwd"]}}"#);
        let reply = server.says("chat-s", &text).await;
        let errors = reply.of_type("tool-input-error");
        assert!(
            errors
                .first()
                .and_then(|e| e["errorText"].as_str())
                .is_some_and(|t| {
                    t.starts_with("the arguments do not fit the input schema")
                        && t.contains("/path")
                }),
            "{}",
            reply.body
        );
        assert!(
            reply.of_type("tool-output-available").is_empty(),
            "{}",
            reply.body
        );
    }
    assert_eq!(
        journal.count("call delete_note"),
        0,
        "{:?}",
        journal.lines()
    );
}
