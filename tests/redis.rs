//! Several instances sharing one Redis: a confirmation issued by one is
//! answered on another, and 100 concurrent approvals across both run the
//! call exactly once. Needs a Redis server (`scripts/test` starts one and
//! sets TOOLGATE_TEST_REDIS_URL); says SKIPPED without one.

mod common;

use common::{Binary, Reply};
use serde_json::{Value, json};

fn redis_url() -> Option<String> {
    let url = std::env::var("TOOLGATE_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!(
            "SKIPPED: no Redis server (set TOOLGATE_TEST_REDIS_URL; scripts/test starts one)"
        );
    }
    url
}

fn instance(dir: &std::path::Path, name: &str, url: &str, prefix: &str) -> Binary {
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!("store:\n  kind: redis\n  url: {url}\n  keyPrefix: '{prefix}'\ntoolConfirmation:\n  signingKeys: [shared-key]\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Binary::serve_with(&["--config", &config.display().to_string()])
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> Reply {
    let response = client
        .post(format!("{url}/stream"))
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap_or_default(),
    }
}

/// The follow-up `useChat` sends after approving the question in `first`.
fn approval(first: &Reply) -> Value {
    let message_id = first.of_type("start")[0]["messageId"].clone();
    let ask = first.of_type("tool-input-available")[0].clone();
    json!({
        "id": "chat-shared", "trigger": "submit-message", "messageId": message_id,
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]},
            {"id": message_id, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-adk_request_confirmation", "toolCallId": ask["toolCallId"], "state": "output-available",
                 "input": ask["input"], "output": {"confirmed": true}, "callProviderMetadata": ask["providerMetadata"]}
            ]}
        ]
    })
}

fn transaction(reply: &Reply) -> Option<String> {
    reply
        .of_type("tool-output-available")
        .into_iter()
        .find(|c| c["output"]["status"] == "completed")
        .and_then(|c| c["output"]["transactionId"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn issued_on_one_instance_answered_on_another_runs_exactly_once() {
    let Some(url) = redis_url() else { return };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let a = instance(dir.path(), "a", &url, &prefix);
    let b = instance(dir.path(), "b", &url, &prefix);
    let client = reqwest::Client::new();

    let first = post(&client, &a.url, &json!({
        "id": "chat-shared",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    }))
    .await;
    let approve = approval(&first);

    // 100 identical approvals at once, half on each instance.
    let replies = futures::future::join_all((0..100).map(|i| {
        let url = if i % 2 == 0 { &a.url } else { &b.url };
        post(&client, url, &approve)
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
