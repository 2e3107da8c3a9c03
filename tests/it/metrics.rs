//! `/metrics` after known flows: exact counter values, one server each
//! (the metrics are the app's own, not the process's). `/livez` and
//! `/readyz`, with a store that works and one that fails.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use crate::common::assert_contains;

use common::{Server, approval};
use toolgate::Config;

const PAY: &str = "internal--process_payment";

/// The value of the sample `series` (name and labels, as exported), or 0
/// when it is not there yet.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| {
            v.parse().unwrap_or_else(|e| panic!("{series}: {e}"))
        })
}

async fn scrape(server: &Server) -> String {
    let reply = server.get("/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

/// Asks to pay in `chat` and returns the answer that approves it.
async fn ask(server: &Server, chat: &str) -> Value {
    let first = server.says(chat, "Send 50 USD to Hanako").await;
    assert_eq!(
        first.of_type("tool-input-available").len(),
        1,
        "{}",
        first.body
    );
    approval(chat, &first)
}

fn answered(mut body: Value, output: Value) -> Value {
    if let Some(slot) = body.pointer_mut("/messages/1/parts/1/output") {
        *slot = output;
    }
    body
}

#[tokio::test]
async fn known_flows_are_counted_exactly() {
    let server = Server::start().await;

    // A text turn.
    let text = server.says("chat-text", "Hello").await;
    assert_eq!(text.status, 200);

    // Asked and approved: the payment runs.
    let approve = ask(&server, "chat-approve").await;
    server.chat(&approve).await;
    assert_eq!(server.payments(), 1);

    // Asked and denied.
    let deny = ask(&server, "chat-deny").await;
    server
        .chat(&answered(deny, json!({"confirmed": false})))
        .await;

    // A forged answer: other arguments than the ones asked about.
    let mut forged = ask(&server, "chat-forged").await;
    if let Some(args) = forged.pointer_mut("/messages/1/parts/1/input/originalFunctionCall/args") {
        args["amount"] = json!(5000);
    }
    server.chat(&forged).await;

    // Nobody answered in time: the late approval ends it as expired (and is refused).
    let late = ask(&server, "chat-late").await;
    server.clock.advance(Duration::from_secs(24 * 60 * 60 + 1));
    server.chat(&late).await;
    assert_eq!(server.payments(), 1);

    let text = scrape(&server).await;
    let confirmations = |outcome: &str| {
        sample(
            &text,
            &format!("toolgate_confirmations_total{{tool=\"{PAY}\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(confirmations("approved"), 1.0, "{text}");
    assert_eq!(confirmations("denied"), 1.0, "{text}");
    assert_eq!(confirmations("refused"), 2.0, "{text}");
    assert_eq!(confirmations("expired"), 1.0, "{text}");
    assert_eq!(confirmations("auto_approved"), 0.0, "{text}");
    // Approved, denied and expired each waited.
    assert_eq!(
        sample(&text, "toolgate_confirmation_wait_seconds_count"),
        3.0,
        "{text}"
    );
    let calls = sample(
        &text,
        &format!("toolgate_tool_calls_total{{tool=\"{PAY}\",source=\"builtin\",outcome=\"ok\"}}"),
    );
    assert_eq!(calls, 1.0, "{text}");
    // Every turn: the text, four questions, four answers.
    assert_eq!(
        sample(
            &text,
            "toolgate_turns_total{transport=\"sse\",outcome=\"finished\"}"
        ),
        9.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "toolgate_streams_open{transport=\"sse\"}"),
        0.0,
        "{text}"
    );
    assert!(
        sample(&text, "toolgate_time_to_first_chunk_seconds_count") >= 1.0,
        "{text}"
    );
    assert!(
        sample(&text, "toolgate_overhead_seconds_count") >= 1.0,
        "{text}"
    );
    assert!(
        sample(
            &text,
            "toolgate_model_requests_total{provider=\"application\",status=\"ok\"}"
        ) + sample(
            &text,
            "toolgate_model_requests_total{provider=\"scripted\",status=\"ok\"}"
        ) >= 1.0,
        "{text}"
    );
    assert_contains(&text, "toolgate_mcp_servers{state=\"available\"} 0");

    // Another server counts apart.
    let other = Server::start().await;
    let text = scrape(&other).await;
    assert_eq!(
        sample(&text, "toolgate_confirmation_wait_seconds_count"),
        0.0,
        "{text}"
    );
}

#[tokio::test]
async fn metrics_need_a_key_when_keys_are_on_unless_public() -> anyhow::Result<()> {
    let keyed = common::api_keys(&[("alice", "k1")]);
    let server = Server::from_yaml(&keyed).await;
    assert_eq!(server.get("/metrics").await.status, 401);
    let reply = server
        .get_with("/metrics", &[("authorization", "Bearer k1")])
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let public = format!("{keyed}metrics:\n  public: true\n");
    let server = Server::with_config(Config::from_yaml(&public)?).await;
    assert_eq!(server.get("/metrics").await.status, 200);

    let off = "metrics:\n  enabled: false\n";
    let server = Server::with_config(Config::from_yaml(off)?).await;
    assert_eq!(server.get("/metrics").await.status, 404);
    Ok(())
}

#[tokio::test]
async fn live_and_ready_until_the_store_fails() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("toolgate.sqlite3");
    let server = Server::on_sqlite(&path).await;
    assert_eq!(server.get("/livez").await.status, 200);
    assert_eq!(server.get("/healthz").await.status, 200);
    let ready = server.get("/readyz").await;
    assert_eq!((ready.status, ready.body.as_str()), (200, "ok"));

    let conn = rusqlite::Connection::open(&path)?;
    conn.execute_batch("DROP TABLE confirmations;")?;

    let ready = server.get("/readyz").await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (503, "storage unavailable")
    );
    assert_eq!(server.get("/livez").await.status, 200);
    let text = scrape(&server).await;
    let ping = |outcome: &str| {
        sample(
            &text,
            &format!(
                "toolgate_store_operations_total{{store=\"sqlite\",op=\"ping\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!((ping("ok"), ping("error")), (1.0, 1.0), "{text}");
    Ok(())
}

/// `metrics.bind`: `/metrics` on a listener of its own, without a key,
/// and no longer on the main port.
#[tokio::test]
async fn metrics_bind_serves_them_apart() -> anyhow::Result<()> {
    let free = std::net::TcpListener::bind("127.0.0.1:0")?;
    let at = free.local_addr()?;
    drop(free);
    let server = Server::from_yaml(&format!("metrics: {{bind: '{at}'}}\n")).await;
    server.says("c1", "hello there").await;
    assert_eq!(
        server.get("/metrics").await.status,
        404,
        "not on the main port"
    );
    let scraped = common::wait::until_ok("the metrics listener", || async {
        match reqwest::get(format!("http://{at}/metrics")).await {
            Ok(response) if response.status() == 200 => {
                response.text().await.map_err(|e| e.to_string())
            }
            Ok(response) => Err(format!("status {}", response.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(
        sample(
            &scraped,
            r#"toolgate_turns_total{transport="sse",outcome="finished"}"#
        ) >= 1.0,
        "{scraped}"
    );
    Ok(())
}

/// `metrics.bind` goes through the main port's guard and accept loop: a
/// Host it does not serve is refused (a DNS-rebinding page read the
/// metrics before), and a head that never ends is closed.
#[tokio::test]
async fn the_metrics_listener_has_the_guard_and_the_header_timeout() -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let free = std::net::TcpListener::bind("127.0.0.1:0")?;
    let at = free.local_addr()?;
    drop(free);
    let config = Config::from_yaml(&format!(
        "metrics: {{bind: '{at}'}}\nserver: {{headerReadSecs: 1}}\n"
    ))?;
    let _server = Server::with_config(config).await;
    let url = format!("http://{at}");
    common::wait::until_ok("the metrics listener", || async {
        reqwest::get(format!("{url}/livez"))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    let rebound = format!("rebind.evil.example:{}", at.port());
    for path in ["/metrics", "/readyz"] {
        let reply = common::raw::send(&url, "GET", path, &[("host", &rebound)], "").await;
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
    }
    let reply = common::raw::send(&url, "GET", "/metrics", &[], "").await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let mut half_sent = tokio::net::TcpStream::connect(at).await?;
    half_sent
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nx-")
        .await?;
    let mut rest = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(20), half_sent.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the half-sent head is still open");
    Ok(())
}

/// A keyless server refuses to serve its metrics (which need no key there)
/// on a non-loopback address, as it refuses `--bind`.
#[test]
fn metrics_bind_off_loopback_needs_api_keys() -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let config = common::config_file(
        state.path(),
        "store: {kind: memory}\nmetrics: {bind: '0.0.0.0:0'}\n",
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // The old server served on: it is stopped, and the test fails.
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    let exited = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            _ if std::time::Instant::now() > give_up => break None,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    if exited.is_none() {
        let _ = child.kill();
    }
    let output = child.wait_with_output()?;
    assert!(exited.is_some_and(|status| !status.success()), "it served");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_contains(
        &stderr,
        "refusing to serve metrics on 0.0.0.0:0 without API keys",
    );
    Ok(())
}

/// A required MCP server that is not there keeps the instance unready.
#[tokio::test]
async fn a_required_mcp_server_down_is_not_ready() -> anyhow::Result<()> {
    let yaml =
        "mcpServers:\n  gone:\n    command: /nonexistent/toolgate-mcp-server\n    required: true\n";
    let server = Server::from_yaml(yaml).await;
    assert_eq!(server.get("/livez").await.status, 200);
    let ready = server.get("/readyz").await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (503, "a required MCP server is unavailable")
    );
    Ok(())
}

/// Every store operation is counted once, by backend, operation and
/// outcome: one question asked and approved, on the memory store.
#[tokio::test]
async fn store_operations_are_counted_exactly() {
    let server = Server::start().await;
    // The purge's first round runs at start: wait for it, so that it is
    // not counted halfway.
    let series = |op: &str| {
        format!("toolgate_store_operations_total{{store=\"memory\",op=\"{op}\",outcome=\"ok\"}}")
    };
    common::wait::until_ok("the first purge", || async {
        let text = scrape(&server).await;
        match sample(&text, &series("prune_audit")) {
            1.0 => Ok(()),
            n => Err(format!("{n}")),
        }
    })
    .await;
    let approve = ask(&server, "chat-store").await;
    server.chat(&approve).await;
    assert_eq!(server.payments(), 1);

    let text = scrape(&server).await;
    let mut counted: Vec<(String, f64)> = text
        .lines()
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let labels = series.strip_prefix("toolgate_store_operations_total")?;
            let value: f64 = value.parse().ok()?;
            (value > 0.0).then(|| (labels.to_owned(), value))
        })
        .collect();
    counted.sort_by(|a, b| a.0.cmp(&b.0));
    let ok = |op: &str, n: f64| {
        (
            format!("{{store=\"memory\",op=\"{op}\",outcome=\"ok\"}}"),
            n,
        )
    };
    let expected = vec![
        // The approval: the question read, claimed, its outcome recorded
        // and audited.
        ok("audit", 2.0),
        ok("claim", 1.0),
        // The purge: expired questions, expired records, old audit events.
        ok("expired", 1.0),
        ok("finish", 1.0),
        ok("get", 1.0),
        // The question: a remembered approval, a narrowed grant and an
        // approval budget looked for first, then it is stored and audited.
        ok("grants", 1.0),
        ok("insert", 1.0),
        ok("prune_audit", 1.0),
        ok("purge_expired", 1.0),
        ok("remembered", 1.0),
        ok("take_budget", 1.0),
    ];
    assert_eq!(counted, expected, "{text}");
}
