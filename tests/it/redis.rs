//! Several instances sharing one Redis: a confirmation issued by one is
//! answered on another, and 100 concurrent approvals across both run the
//! call exactly once. Compiled with the `redis-server` feature; needs a
//! Redis server (`scripts/test` starts one and sets
//! TOOLGATE_TEST_REDIS_URL), and fails without one.

use crate::common;

use common::{Binary, approval, redis_url, transaction};
use serde_json::json;

fn instance(dir: &std::path::Path, name: &str, url: &str, prefix: &str) -> Binary {
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!("store:\n  kind: redis\n  url: {url}\n  keyPrefix: '{prefix}'\ntoolConfirmation:\n  signingKeys: [shared-key]\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Binary::serve_with(&["--config", &config.display().to_string()])
}

#[tokio::test]
async fn issued_on_one_instance_answered_on_another_runs_exactly_once() {
    let url = redis_url();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let a = instance(dir.path(), "a", &url, &prefix);
    let b = instance(dir.path(), "b", &url, &prefix);

    let first = a.chat( &json!({
        "id": "chat-shared",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    }))
    .await;
    let approve = approval("chat-shared", &first);

    // 100 identical approvals at once, half on each instance.
    let replies = futures::future::join_all((0..100).map(|i| {
        let url = if i % 2 == 0 { &a } else { &b };
        url.chat(&approve)
    }))
    .await;
    let transactions: std::collections::BTreeSet<Option<String>> =
        replies.iter().map(transaction).collect();
    assert_eq!(
        transactions.len(),
        1,
        "every reply reports the one payment: {transactions:?}"
    );
    assert!(
        transactions.iter().all(Option::is_some),
        "{}",
        replies[0].body
    );
}

/// A held stream on one instance goes on as soon as another instance
/// records the decision (Redis pub/sub wakes it).
#[tokio::test]
async fn a_decision_on_another_instance_wakes_a_held_stream() {
    use futures::StreamExt;
    let url = redis_url();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let a = instance(dir.path(), "a", &url, &prefix);
    let b = instance(dir.path(), "b", &url, &prefix);
    let body = json!({
        "id": "chat-held", "toolgate": {"flow": "hold"},
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    });
    let response = reqwest::Client::new()
        .post(format!("{}/stream", a.url))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    let id = loop {
        let piece = stream
            .next()
            .await
            .unwrap_or_else(|| panic!("ended: {seen}"));
        seen.push_str(&String::from_utf8_lossy(&piece.unwrap_or_default()));
        let asked = seen.split("\n\n").find_map(|frame| {
            let chunk: serde_json::Value =
                serde_json::from_str(frame.strip_prefix("data: ")?).ok()?;
            (chunk["toolName"] == "adk_request_confirmation"
                && chunk["type"] == "tool-input-available")
                .then(|| chunk["toolCallId"].as_str().map(str::to_owned))?
        });
        if let Some(id) = asked {
            break id;
        }
    };
    let decided = reqwest::Client::new()
        .post(format!("{}/api/confirmations/{id}", b.url))
        .header("content-type", "application/json")
        .body(r#"{"approved": true}"#)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decided.status(), 200);
    let rest = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(piece) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&piece.unwrap_or_default()));
        }
    })
    .await;
    assert!(rest.is_ok(), "the held stream was not woken: {seen}");
    assert!(
        seen.contains(r#""status":"completed""#) && seen.ends_with("data: [DONE]\n\n"),
        "{seen}"
    );
}
