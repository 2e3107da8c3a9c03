//! A claim left by a process that no longer exists is answered at once as
//! outcome unknown, on `/stream` and `POST /api/confirmations/{id}` alike,
//! never after the tool timeout: after `kill -9` of the binary in the middle
//! of an approved call (SQLite), and for a Redis claim of a dead instance.

use crate::common;

use std::time::{Duration, Instant};

use common::{Binary, approval};
use serde_json::{Value, json};
use toolgate::confirm::OUTCOME_UNKNOWN;

/// The tools' timeout in these tests: the old rule waited past it.
const TOOL_TIMEOUT: Duration = Duration::from_secs(20);

/// A TCP endpoint that takes connections and never answers; each accepted
/// connection is reported on the channel.
async fn black_hole() -> (String, tokio::sync::mpsc::Receiver<()>) {
    let (listener, url) = common::loopback().await;
    let (accepted, calls) = tokio::sync::mpsc::channel(8);
    // A test's listener: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
            let _ = accepted.send(()).await;
        }
    });
    (url, calls)
}

fn confirmation_id(first: &common::Reply) -> String {
    first.of_type("tool-input-available")[0]["toolCallId"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn after_kill_9_during_an_approved_call_the_next_answer_is_immediate() -> anyhow::Result<()> {
    let (hang, mut calls) = black_hole().await;
    let state = tempfile::tempdir()?;
    let config = common::config_file(
        state.path(),
        format!(
            "store:\n  path: {}\ntoolConfirmation:\n  signingKeys: [test-signing-key-of-at-least-32-bytes]\ntools:\n  timeoutMs: {}\n  http:\n    - name: hang\n      description: Never answers\n      parameters: {{type: object}}\n      url: {hang}/hang\n      timeoutMs: 600000\n",
            state.path().join("db.sqlite3").display(),
            TOOL_TIMEOUT.as_millis(),
        ),
    );
    let start = || Binary::serve_with(&["--config", &config]);

    let server = start();
    let first = server.says("chat-kill", "use hang").await;
    let id = confirmation_id(&first);
    assert!(id.starts_with("adk-"), "{}", first.body);
    let approve = approval("chat-kill", &first);
    // Approved: the call is claimed and reaches the endpoint, then the process dies.
    let url = server.url.clone();
    let body = approve.to_string();
    // The approving client stays to read the stream (the call hangs, so until
    // the kill): this test is about a dying server, not a client that leaves.
    // A test's client: it lives until the test ends.
    #[allow(clippy::disallowed_methods)]
    let _approving = tokio::spawn(async move {
        if let Ok(response) = common::post_json(format!("{url}/stream"), body)
            .send()
            .await
        {
            let _ = response.text().await;
        }
    });
    tokio::time::timeout(Duration::from_secs(10), calls.recv())
        .await
        .unwrap_or_else(|_| panic!("the approved call never started"));
    drop(server); // SIGKILL

    let server = start();
    let started = Instant::now();
    let again = server.chat(&approve).await;
    assert!(
        started.elapsed() < TOOL_TIMEOUT,
        "answered after {:?}",
        started.elapsed()
    );
    let errors = again.of_type("tool-output-error");
    assert!(
        errors.iter().any(|c| c["errorText"] == OUTCOME_UNKNOWN),
        "{}",
        again.body
    );

    let started = Instant::now();
    let decided = common::post_json(
        format!("{}/api/confirmations/{id}", server.url),
        common::APPROVE,
    )
    .send()
    .await?;
    assert!(started.elapsed() < TOOL_TIMEOUT);
    assert_eq!(decided.status().as_u16(), 409);
    let body: Value =
        serde_json::from_str(&decided.text().await.unwrap_or_default()).unwrap_or(Value::Null);
    assert_eq!(body, json!({"error": OUTCOME_UNKNOWN}));
    assert!(calls.try_recv().is_err(), "the call never ran again");
    Ok(())
}

/// With the `redis-server` feature: a real Redis server.
#[cfg(feature = "redis-server")]
mod redis {
    use super::*;
    use common::Server;
    use toolgate::Config;
    use toolgate::store::{Claim, Store};

    /// Another instance, `instance-dead`, wins the claim of `id` (and dies
    /// before its heartbeat is ever renewed).
    async fn claimed_by_the_dead(store: &Store, server: &Server, id: &str) {
        assert_eq!(
            store
                .claim(id, server.clock.now_ms(), "instance-dead")
                .await
                .ok(),
            Some(Claim::Won)
        );
    }

    #[tokio::test]
    async fn a_redis_claim_of_a_dead_instance_is_answered_at_once() -> anyhow::Result<()> {
        let url = common::redis_url();
        let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
        let store = Store::redis(&url, &prefix).await?;
        let mut config = Config::default();
        config.tools.timeout_ms = u64::try_from(TOOL_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
        let server = Server::with(config, |app| {
            app.with_store(store.clone()).with_instance("instance-live")
        })
        .await;
        let first = server.says("chat-dead", "Send 50 USD to Hanako").await;
        let id = confirmation_id(&first);

        // Another instance claimed it, and died before its heartbeat was ever renewed.
        claimed_by_the_dead(&store, &server, &id).await;

        let started = Instant::now();
        let again = server.chat(&approval("chat-dead", &first)).await;
        assert!(started.elapsed() < TOOL_TIMEOUT);
        assert!(
            again
                .of_type("tool-output-error")
                .iter()
                .any(|c| c["errorText"] == OUTCOME_UNKNOWN),
            "{}",
            again.body
        );
        let started = Instant::now();
        let decided = server.approve(&id).await;
        assert!(started.elapsed() < TOOL_TIMEOUT);
        assert_eq!(decided.status, 409, "{}", decided.body);
        assert_eq!(server.payments(), 0, "never run by this instance");
        Ok(())
    }

    /// A held turn whose question a dead instance claimed (it approved it,
    /// then died before the outcome) ends with the outcome unknown, not
    /// after the question's whole life.
    #[tokio::test]
    async fn a_held_turn_whose_question_a_dead_instance_claimed_ends() -> anyhow::Result<()> {
        use common::body::read_to_end;
        let url = common::redis_url();
        let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
        let store = Store::redis(&url, &prefix).await?;
        let mut config =
            Config::from_yaml("toolConfirmation:\n  flow: hold\n  expirySecs: 3600\n")?;
        config.tools.timeout_ms = u64::try_from(TOOL_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
        let server = Server::with(config, |app| {
            app.with_store(store.clone()).with_instance("instance-live")
        })
        .await;
        let (mut body, mut seen) = server
            .open_until(
                &common::user_says("chat-held-dead", "Send 50 USD to Hanako"),
                |s| s.contains(r#""toolName":"adk_request_confirmation","input""#),
            )
            .await;
        let id = seen
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .find(|c| {
                c["type"] == "tool-input-available" && c["toolName"] == "adk_request_confirmation"
            })
            .and_then(|c| c["toolCallId"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no question: {seen}"));
        claimed_by_the_dead(&store, &server, &id).await;
        let started = Instant::now();
        read_to_end(&mut body, &mut seen).await;
        assert!(started.elapsed() < TOOL_TIMEOUT, "{:?}", started.elapsed());
        common::assert_contains(&seen, OUTCOME_UNKNOWN);
        assert_eq!(server.payments(), 0);
        Ok(())
    }
}
