//! The MCP face beyond one stateless call: the session generation
//! (`initialize`, `elicitation/create`, a held call picked up later),
//! racing retries, an expired state, a restart between question and
//! answer, the guard in front of `/mcp`, and its metrics.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::{Binary, Must, Server, raw};
use crate::mcp_face::{Client, Present, is_error, messages, pay, request_state, text_of};

/// The session generation.
const OLD: &str = "2025-11-25";

impl Client {
    /// `initialize` and `notifications/initialized`: a session of the old
    /// generation, elicitation declared or not.
    pub(crate) async fn initialize(&mut self) {
        let (status, messages, headers) = self.post(OLD, &self.hello()).await;
        assert_eq!(status, 200, "{messages:?}");
        let session = headers
            .get("mcp-session-id")
            .map(|v| v.to_str().must().to_owned());
        self.session = Some(session.present());
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, _) = self.post(OLD, &done).await;
        assert!(status == 202 || status == 200, "{status}");
    }

    /// An `initialize` that may be refused: its status and body.
    pub(crate) async fn try_initialize(&self) -> (u16, String) {
        let response = self.request(OLD, &self.hello()).send().await.must();
        let status = response.status().as_u16();
        (status, response.text().await.must())
    }

    fn hello(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.next(), "method": "initialize", "params": {
            "protocolVersion": OLD,
            "capabilities": self.capabilities(),
            "clientInfo": {"name": "old-client", "version": "0.9"},
        }})
    }

    /// A `tools/call` in the session, each `elicitation/create` on its
    /// stream answered with `answer`; the call's response.
    pub(crate) async fn call_in_session(&self, tool: &str, args: Value, answer: Value) -> Value {
        let id = self.next();
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": args, "_meta": {"progressToken": "p1"},
        }});
        let response = self.request(OLD, &message).send().await.must();
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut seen = String::new();
        let mut answered = 0;
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.must()));
            let all = messages(&seen);
            for asked in all
                .iter()
                .filter(|m| m["method"] == "elicitation/create")
                .skip(answered)
            {
                answered += 1;
                let reply = json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer});
                let (status, _, _) = self.post(OLD, &reply).await;
                assert!(status == 202 || status == 200, "{status}");
            }
            if let Some(done) = all
                .iter()
                .find(|m| m["id"] == json!(id) && m.get("result").is_some())
            {
                return done.clone();
            }
        }
        panic!("the call's stream ended without its response: {seen}")
    }
}

fn approve() -> Value {
    json!({"action": "accept", "content": {"approve": true}})
}

#[tokio::test]
async fn a_session_client_is_asked_through_elicitation_create() {
    let server = Server::start().await;
    let mut client = Client::new(&server);
    client.initialize().await;
    let paid = client
        .call_in_session("process_payment", pay(5), approve())
        .await;
    assert!(!is_error(&paid), "{paid}");
    assert!(text_of(&paid).contains("completed"), "{paid}");
    assert_eq!(server.payments(), 1);
    let denied = json!({"action": "decline"});
    let refused = client
        .call_in_session("process_payment", pay(6), denied)
        .await;
    assert!(is_error(&refused), "{refused}");
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn a_session_client_that_cannot_elicit_is_held_then_picks_up_the_decision() {
    let server = Server::from_yaml("mcp:\n  holdSeconds: 1\n").await;
    let mut client = Client::new(&server).without_elicitation();
    client.initialize().await;
    let held = client
        .call_in_session("process_payment", pay(8), Value::Null)
        .await;
    assert!(is_error(&held), "{held}");
    assert!(text_of(&held).contains("approval-1"), "{held}");
    assert_eq!(server.payments(), 0);
    // Called again while undecided: the same question, not a new one.
    let again = client
        .call_in_session("process_payment", pay(8), Value::Null)
        .await;
    assert!(text_of(&again).contains("approval-1"), "{again}");
    assert_eq!(server.approve("approval-1").await.status, 200);
    assert_eq!(server.payments(), 1);
    let picked = client
        .call_in_session("process_payment", pay(8), Value::Null)
        .await;
    assert!(text_of(&picked).contains("completed"), "{picked}");
    assert_eq!(server.payments(), 1);
    // That it went back is a fact of its own in the audit log.
    let audit = server.get("/api/audit").await;
    let delivered: Vec<_> = audit
        .json_lines()
        .into_iter()
        .filter(|e| e["decision"] == "delivered")
        .collect();
    assert_eq!(delivered.len(), 1, "{}", audit.body);
    assert_eq!(delivered[0]["confirmationId"], "approval-1");
    assert!(delivered[0].get("approver").is_none(), "{}", audit.body);
    // Its outcome went back: the next call like it asks anew.
    let anew = client
        .call_in_session("process_payment", pay(8), Value::Null)
        .await;
    let text = text_of(&anew);
    assert!(
        text.contains("waiting for approval") && !text.contains("approval-1 "),
        "{anew}"
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn racing_retries_run_the_call_once() {
    let server = Server::start().await;
    let client = Client::new(&server);
    let first = client.call("process_payment", pay(9), json!({})).await;
    let state = request_state(&first);
    let answer = json!({"requestState": state, "inputResponses": {"approval": approve()}});
    let retries = (0..4).map(|_| client.call("process_payment", pay(9), answer.clone()));
    let replies = futures::future::join_all(retries).await;
    let texts: Vec<String> = replies.iter().map(text_of).collect();
    assert!(
        texts
            .iter()
            .all(|t| t == &texts[0] && t.contains("completed")),
        "{texts:?}"
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn an_expired_state_runs_nothing() {
    let server = Server::start().await;
    let client = Client::new(&server);
    let first = client.call("process_payment", pay(4), json!({})).await;
    let state = request_state(&first);
    server.clock.advance(Duration::from_secs(25 * 60 * 60));
    let answer = json!({"requestState": state, "inputResponses": {"approval": approve()}});
    let late = client.call("process_payment", pay(4), answer).await;
    assert!(is_error(&late), "{late}");
    assert!(text_of(&late).contains("requestState"), "{late}");
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_question_asked_before_a_restart_is_answered_after_it() {
    let state = tempfile::tempdir().must();
    let config = crate::common::config_file(
        state.path(),
        format!(
            "store:\n  kind: sqlite\n  path: {}\ntoolConfirmation:\n  signingKeys: [mcp-restart-key-of-at-least-32-bytes!]\n",
            state.path().join("db.sqlite3").display()
        ),
    );
    let start = || Binary::serve_with(&["--config", &config]);
    let server = start();
    let first = Client::at(&server.url)
        .call("process_payment", pay(3), json!({}))
        .await;
    let request_state = request_state(&first);
    drop(server); // SIGKILL
    let server = start();
    let client = Client::at(&server.url);
    let answer = json!({"requestState": request_state, "inputResponses": {"approval": approve()}});
    let paid = client.call("process_payment", pay(3), answer.clone()).await;
    assert!(text_of(&paid).contains("completed"), "{paid}");
    drop(server);
    let server = start();
    let replay = Client::at(&server.url)
        .call("process_payment", pay(3), answer)
        .await;
    assert_eq!(
        text_of(&replay),
        text_of(&paid),
        "the recorded outcome, not a second run"
    );
}

#[tokio::test]
async fn mcp_stands_behind_the_guard() {
    let server = Server::start().await;
    let port = server.url.rsplit(':').next().unwrap_or_default().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let json = ("content-type", "application/json");
    let rebound = format!("rebind.evil.example:{port}");
    let cases: [(&[(&str, &str)], u16); 3] = [
        (&[("host", &rebound), json], 400),
        (&[json, ("origin", "https://evil.example")], 403),
        (&[("content-type", "text/plain")], 415),
    ];
    for (headers, status) in cases {
        let reply = raw::send(&server.url, "POST", "/mcp", headers, &list).await;
        assert_eq!(reply.status, status, "{headers:?}: {}", reply.body);
    }
}

#[tokio::test]
async fn mcp_calls_are_counted_as_their_own_transport() {
    let server = Server::start().await;
    let client = Client::new(&server);
    let reply = client
        .call("get_weather", json!({"city": "Oslo"}), json!({}))
        .await;
    assert!(!is_error(&reply), "{reply}");
    let asked = client.call("process_payment", pay(2), json!({})).await;
    assert_eq!(asked["result"]["resultType"], "input_required");
    let text = server.get("/metrics").await.body;
    for series in [
        "toolgate_turns_total{transport=\"mcp\",outcome=\"finished\"} 1",
        "toolgate_turns_total{transport=\"mcp\",outcome=\"waiting\"} 1",
        "toolgate_streams_open{transport=\"mcp\"} 0",
    ] {
        assert!(text.contains(series), "{series}\n{text}");
    }
}

#[tokio::test]
async fn toolgate_mcp_serves_the_same_over_stdio() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let state = tempfile::tempdir().must();
    let config = crate::common::config_file(
        state.path(),
        format!(
            "store:\n  kind: sqlite\n  path: {}\nmcp:\n  principal: carol\n",
            state.path().join("db.sqlite3").display()
        ),
    );
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["mcp", "--config", &config])
        .env("RUST_LOG", "toolgate=warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .must();
    let mut stdin = child.stdin.take().present();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().present()).lines();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": OLD, "capabilities": {},
            "clientInfo": {"name": "stdio-client", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "get_weather", "arguments": {"city": "Lima"}}}),
    ];
    for message in messages {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .must();
    }
    stdin.flush().await.must();
    let reply = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.must() {
            let message: Value = serde_json::from_str(&line).must();
            if message["id"] == json!(2) {
                return message;
            }
        }
        panic!("stdout closed")
    })
    .await
    .must();
    assert!(text_of(&reply).contains("Lima"), "{reply}");
}

/// Two instances on one Redis: the retry lands on the other instance,
/// which takes the answer and runs the call once; a replay on the first
/// reports the same outcome.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn the_retry_may_land_on_another_instance() {
    let url = crate::common::redis_url();
    let dir = tempfile::tempdir().must();
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let config = crate::common::config_file(
        dir.path(),
        format!(
            "store:\n  kind: redis\n  url: {url}\n  keyPrefix: '{prefix}'\ntoolConfirmation:\n  signingKeys: [shared-signing-key-of-at-least-32-bytes]\n"
        ),
    );
    let a = Binary::serve_with(&["--config", &config]);
    let b = Binary::serve_with(&["--config", &config]);
    let first = Client::at(&a.url)
        .call("process_payment", pay(6), json!({}))
        .await;
    let state = request_state(&first);
    let answer = json!({"requestState": state, "inputResponses": {"approval": approve()}});
    let paid = Client::at(&b.url)
        .call("process_payment", pay(6), answer.clone())
        .await;
    assert!(text_of(&paid).contains("completed"), "{paid}");
    let replay = Client::at(&a.url)
        .call("process_payment", pay(6), answer)
        .await;
    assert_eq!(text_of(&replay), text_of(&paid));
}
