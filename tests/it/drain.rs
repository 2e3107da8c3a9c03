//! Stopping the real binary: SIGTERM drains (`/readyz` says `draining` at
//! once, the stream and the approved call in flight finish, the call's
//! outcome is recorded once, exit 0); a held turn ends its message with its
//! question open, answerable after a restart; a second signal stops at once.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::body::{read_to, read_to_end};
use common::{Binary, Reply, approval, transaction, user_says, wait};
use serde_json::{Value, json};
use tokio::sync::watch;

/// Well below `server.drainSecs` (30): the server did not wait it out.
const PROMPTLY: Duration = Duration::from_secs(15);

/// An HTTP tool's endpoint that answers only once the test lets it:
/// its URL, how often it was called, and the switch that lets it answer.
async fn slow_endpoint() -> (String, Arc<AtomicUsize>, watch::Sender<bool>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let (answer, answering) = watch::channel(false);
    let counted = calls.clone();
    let app = axum::Router::new().route(
        "/job",
        axum::routing::post(move || {
            let (calls, mut answering) = (counted.clone(), answering.clone());
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let _ = answering.wait_for(|go| *go).await;
                axum::Json(json!({"job": "done"}))
            }
        }),
    );
    let (listener, url) = common::loopback().await;
    // A test's endpoint: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, calls, answer)
}

/// A free loopback address (bound, then let go).
fn free_address() -> std::net::SocketAddr {
    let free = std::net::TcpListener::bind("127.0.0.1:0").must();
    free.local_addr().must()
}

/// Writes `yaml` (after a SQLite store in `state`) as the config; its path.
fn config(state: &tempfile::TempDir, yaml: &str) -> String {
    let path = state.path().join("toolgate.yaml");
    let db = state.path().join("toolgate.sqlite3");
    std::fs::write(
        &path,
        format!("store:\n  kind: sqlite\n  path: {}\n{yaml}", db.display()),
    )
    .must();
    path.display().to_string()
}

type Body = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

async fn open(url: &str, body: &Value) -> Body {
    let response = common::post_json(format!("{url}/stream"), body)
        .send()
        .await
        .must();
    assert_eq!(response.status(), 200);
    Box::pin(response.bytes_stream())
}

fn reply(body: String) -> Reply {
    Reply {
        status: 200,
        headers: Default::default(),
        body,
    }
}

#[tokio::test]
async fn sigterm_lets_the_stream_and_the_approved_call_finish() -> anyhow::Result<()> {
    let (endpoint, calls, answer) = slow_endpoint().await;
    let probes = free_address();
    let state = tempfile::tempdir()?;
    let config = config(
        &state,
        &format!(
            "model: {{deltaDelayMs: 50}}\nmetrics: {{bind: '{probes}'}}\ntools:\n  http:\n    - name: slow_job\n      description: A job that takes a while\n      parameters: {{type: object, properties: {{}}}}\n      url: {endpoint}/job\n"
        ),
    );
    let mut server = Binary::serve_with(&["--config", &config]);

    // A call approved and running: the endpoint has it, and waits.
    let first = server.says("chat-job", "use slow_job").await;
    assert_eq!(
        first.of_type("tool-input-available").len(),
        1,
        "{}",
        first.body
    );
    let approve = approval("chat-job", &first);
    let mut job = open(&server.url, &approve).await;
    wait::until_true("the approved call to start", || {
        calls.load(Ordering::SeqCst) == 1
    })
    .await;
    // A text turn streaming.
    let mut text = open(&server.url, &user_says("chat-text", "count to 60")).await;
    let mut counted = String::new();
    read_to(&mut text, &mut counted, "text-delta").await;

    server.signal("TERM");
    let ready = wait::until_ok("/readyz to say draining", || async {
        let response = reqwest::get(format!("http://{probes}/readyz"))
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response.text().await.map_err(|e| e.to_string())?;
        match body.as_str() {
            "draining" => Ok(status),
            _ => Err(format!("{status} {body}")),
        }
    })
    .await;
    assert_eq!(ready, 503);
    wait::until("the main port to take no new connection", || async {
        reqwest::get(format!("{}/livez", server.url)).await.is_err()
    })
    .await;

    // Both streams finish normally, the call with its output.
    answer.send_replace(true);
    let mut ran = String::new();
    assert!(read_to_end(&mut job, &mut ran).await, "cut off: {ran}");
    assert_contains(&ran, r#""output":{"job":"done"}"#);
    assert!(
        ran.contains(r#""type":"finish""#) && ran.ends_with("data: [DONE]\n\n"),
        "{ran}"
    );
    assert!(
        read_to_end(&mut text, &mut counted).await,
        "cut off: {counted}"
    );
    let counted = reply(counted);
    assert!(counted.text().contains("60"), "{}", counted.body);
    assert!(
        counted.body.ends_with("data: [DONE]\n\n"),
        "{}",
        counted.body
    );

    let exit = server.exit_within(PROMPTLY).await;
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");

    // After a restart the outcome is there, once, and nothing runs again.
    let server = Binary::serve_with(&["--config", &config]);
    let replay = server.chat(&approve).await;
    assert!(
        replay.body.contains(r#""output":{"job":"done"}"#),
        "{}",
        replay.body
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let audit = reqwest::get(format!("{}/api/audit?chatId=chat-job", server.url))
        .await?
        .text()
        .await
        .unwrap_or_default();
    let decisions: Vec<String> = audit
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| event["decision"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        decisions.iter().filter(|d| *d == "approved").count(),
        1,
        "{audit}"
    );
    Ok(())
}

#[tokio::test]
async fn a_held_turn_ends_its_message_and_its_question_outlives_the_restart() -> anyhow::Result<()>
{
    let state = tempfile::tempdir()?;
    let config = config(&state, "");
    let mut server = Binary::serve_with(&["--config", &config]);
    let mut ask = user_says("chat-held", "Send 50 USD to Hanako");
    ask["toolgate"] = json!({"flow": "hold"});
    let mut held = open(&server.url, &ask).await;
    let mut seen = String::new();
    read_to(
        &mut held,
        &mut seen,
        r#""toolName":"adk_request_confirmation","input""#,
    )
    .await;

    server.signal("TERM");
    assert!(read_to_end(&mut held, &mut seen).await, "cut off: {seen}");
    assert_contains(&seen, r#""finishReason":"tool-calls""#);
    assert!(seen.ends_with("data: [DONE]\n\n"), "{seen}");
    let exit = server.exit_within(PROMPTLY).await;
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");

    let server = Binary::serve_with(&["--config", &config]);
    let paid = server.chat(&approval("chat-held", &reply(seen))).await;
    assert!(
        transaction(&paid).is_some_and(|t| t.starts_with("tx-")),
        "{}",
        paid.body
    );
    Ok(())
}

#[tokio::test]
async fn a_second_signal_stops_at_once() {
    let mut server = Binary::serve_yaml("model: {deltaDelayMs: 60000}\n", &[]);
    // A stream that would keep the drain waiting for its whole window.
    let mut slow = open(&server.url, &user_says("chat-slow", "count to 3")).await;
    let mut seen = String::new();
    read_to(&mut slow, &mut seen, r#""type":"start""#).await;

    server.signal("TERM");
    wait::until("the main port to take no new connection", || async {
        reqwest::get(format!("{}/livez", server.url)).await.is_err()
    })
    .await;
    server.signal("TERM");
    let exit = server.exit_within(PROMPTLY).await;
    assert!(exit.is_some_and(|e| e.code() == Some(1)), "{exit:?}");
}
