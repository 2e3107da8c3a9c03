//! `limits`: turns per minute and streams at once are refused before a
//! stream starts (429, `Retry-After`, a JSON error naming the limit), or as
//! the error of a `/live` turn; a tool call over its limit does not run and
//! ends as `tool-output-error` while the turn goes on. Per principal, and
//! per tool for everyone; with a Redis store, shared by every instance.
//! No test waits for a limit to refill: the `Retry-After` range is asserted.

use crate::common;
use crate::common::Must;

use common::ws::{connect, next_within, says, send, turn};
use common::{Reply, Server, approval, user_says};
use serde_json::json;
use std::time::Duration;
use toolgate::Config;

const TURNS: &str = "rate limited: too many turns per minute (limits.turnsPerMinute)";
const STREAMS: &str = "rate limited: too many streams at once (limits.concurrentStreams)";
const TOOL_CALLS: &str = "rate limited: too many tool calls per minute (limits.toolCallsPerMinute); the call did not run";
const PAYMENTS: &str = "rate limited: too many calls of `process_payment` per minute (limits.tools.process_payment.callsPerMinute); the call did not run";

fn config(yaml: &str) -> Config {
    Config::from_yaml(&format!("auth: {{principalHeader: x-user}}\n{yaml}")).must()
}

async fn chat_as(server: &Server, user: &str, body: &serde_json::Value) -> Reply {
    server
        .post_with("/stream", &[("x-user", user)], body.to_string())
        .await
}

/// A 429 naming `text`, with a `Retry-After` of whole seconds in `secs`.
fn refused(reply: &Reply, text: &str, secs: std::ops::RangeInclusive<u64>) {
    assert_eq!(reply.status, 429, "{}", reply.body);
    assert_eq!(reply.json(), json!({"error": text}));
    let after: u64 = reply
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {:?}", reply.headers));
    assert!(secs.contains(&after), "Retry-After {after}");
}

fn tool_errors(reply: &Reply) -> Vec<String> {
    reply
        .of_type("tool-output-error")
        .iter()
        .filter_map(|c| c["errorText"].as_str().map(str::to_owned))
        .collect()
}

/// A turn of `user`'s that asks to pay and waits for the answer (held
/// flow): in flight while its response is kept.
async fn hold_open(url: &str, user: &str) -> reqwest::Response {
    let held = json!({
        "id": "held", "toolgate": {"flow": "hold"},
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    });
    let response = reqwest::Client::new()
        .post(format!("{url}/stream"))
        .header("content-type", "application/json")
        .header("x-user", user)
        .body(held.to_string())
        .send()
        .await
        .must();
    assert_eq!(response.status(), 200);
    response
}

#[tokio::test]
async fn a_third_turn_in_a_minute_is_refused_before_it_streams() {
    let server = Server::with_config(config("limits: {turnsPerMinute: 2}")).await;
    for chat in ["c1", "c2"] {
        let reply = chat_as(&server, "alice", &user_says(chat, "hello")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let third = chat_as(&server, "alice", &user_says("c3", "hello")).await;
    // One more every 30 s.
    refused(&third, TURNS, 1..=30);
    // Another principal has a limit of its own.
    let bob = chat_as(&server, "bob", &user_says("c1", "hello")).await;
    assert_eq!(bob.status, 200, "{}", bob.body);
    // A resume is no new turn.
    let resume = server
        .get_with("/stream/c1/stream", &[("x-user", "alice")])
        .await;
    assert_eq!(resume.status, 204, "{}", resume.body);
    let metrics = server.get_with("/metrics", &[("x-user", "alice")]).await;
    assert!(
        metrics
            .body
            .contains("toolgate_rate_limited_total{limit=\"turns_per_minute\"} 1"),
        "{}",
        metrics.body
    );
}

#[tokio::test]
async fn a_live_turn_over_the_limit_ends_with_the_error() -> anyhow::Result<()> {
    let server = Server::with_config(Config::from_yaml("limits: {turnsPerMinute: 1}")?).await;
    let mut socket = connect(&server).await;
    send(&mut socket, turn("r1", &says("c1", "hello"))).await;
    send(&mut socket, turn("r2", &says("c2", "hello"))).await;
    let mut frames = Vec::new();
    let error = loop {
        match next_within(&mut socket, Duration::from_secs(5)).await {
            Some(frame) if frame["requestId"] == "r2" && frame["type"] == "error" => break frame,
            Some(frame) => frames.push(frame),
            None => panic!("no error for r2: {frames:?}"),
        }
    };
    assert_eq!(error["errorText"], TURNS);
    Ok(())
}

#[tokio::test]
async fn streams_at_once_are_counted_per_principal() {
    let server = Server::with_config(config("limits: {concurrentStreams: 1}")).await;
    // A turn held for an answer stays in flight.
    let response = hold_open(&server.url, "alice").await;
    let second = chat_as(&server, "alice", &user_says("other", "hello")).await;
    refused(&second, STREAMS, 1..=60);
    let bob = chat_as(&server, "bob", &user_says("other", "hello")).await;
    assert_eq!(bob.status, 200, "{}", bob.body);
    drop(response);
}

/// No principal is spared the per-user cap: one the principal header
/// names `anonymous` is capped like any other (it once was not, so a
/// caller choosing that name could hold every turn).
#[tokio::test]
async fn a_principal_named_anonymous_has_the_per_user_cap() {
    let server = Server::with_config(config("stream: {maxTurnsPerUser: 1}")).await;
    let response = hold_open(&server.url, "anonymous").await;
    let second = chat_as(&server, "anonymous", &user_says("other", "hello")).await;
    assert_eq!(second.status, 429, "{}", second.body);
    let bob = chat_as(&server, "bob", &user_says("other", "hello")).await;
    assert_eq!(bob.status, 200, "{}", bob.body);
    drop(response);
}

#[tokio::test]
async fn a_call_over_the_principals_limit_does_not_run_and_the_turn_goes_on() {
    let yaml = "limits: {toolCallsPerMinute: 1}\ntoolConfirmation: {toolPolicies: {alwaysAllow: [internal--process_payment]}}\n";
    let server = Server::with_config(config(yaml)).await;
    let reply = chat_as(
        &server,
        "alice",
        &user_says("c1", "Send 10 USD to Taro and 20 USD to Jiro"),
    )
    .await;
    assert_eq!(server.payments(), 1, "{}", reply.body);
    assert_eq!(tool_errors(&reply), [TOOL_CALLS]);
    assert_eq!(reply.of_type("finish").len(), 1, "{}", reply.body);
    // Bob's calls are his own.
    let bob = chat_as(&server, "bob", &user_says("c1", "Send 10 USD to Taro")).await;
    assert!(tool_errors(&bob).is_empty(), "{}", bob.body);
    assert_eq!(server.payments(), 2);
}

#[tokio::test]
async fn a_tools_limit_holds_for_everyone_and_an_approval_is_never_spent_on_it() {
    let server = Server::with_config(config(
        "limits: {tools: {process_payment: {callsPerMinute: 1}}}",
    ))
    .await;
    // Alice's call is counted as it is asked; Bob's, over the limit, is
    // refused at once: nobody is asked about it.
    let ask = chat_as(&server, "alice", &user_says("pay", "Send 50 USD to Hanako")).await;
    let bob = chat_as(&server, "bob", &user_says("pay", "Send 50 USD to Hanako")).await;
    assert_eq!(tool_errors(&bob), [PAYMENTS]);
    assert!(
        bob.body.find(common::confirmation_name()).is_none(),
        "{}",
        bob.body
    );
    // Alice's approval runs her call though the minute's calls are used up.
    let approve = approval("pay", &ask);
    let ran = chat_as(&server, "alice", &approve).await;
    assert!(tool_errors(&ran).is_empty(), "{}", ran.body);
    assert_eq!(server.payments(), 1);
    let replay = chat_as(&server, "alice", &approve).await;
    assert!(tool_errors(&replay).is_empty(), "{}", replay.body);
    assert_eq!(server.payments(), 1);
}

#[cfg(feature = "redis-server")]
mod shared {
    use super::*;
    use toolgate::store::Store;

    /// Two servers on one Redis (each its own connection and instance),
    /// keys under a prefix of their own.
    async fn pair(yaml: &str) -> (Server, Server) {
        let url = common::redis_url();
        let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
        let mut servers = Vec::new();
        for _ in 0..2 {
            let store = Store::redis(&url, &prefix).await.must();
            servers.push(Server::with(config(yaml), move |app| app.with_store(store)).await);
        }
        let b = servers.pop().unwrap_or_else(|| panic!("no server"));
        let a = servers.pop().unwrap_or_else(|| panic!("no server"));
        (a, b)
    }

    #[tokio::test]
    async fn two_instances_enforce_one_turn_limit() {
        let (a, b) = pair("limits: {turnsPerMinute: 2}").await;
        assert_eq!(
            chat_as(&a, "alice", &user_says("c1", "hi")).await.status,
            200
        );
        assert_eq!(
            chat_as(&b, "alice", &user_says("c2", "hi")).await.status,
            200
        );
        refused(
            &chat_as(&a, "alice", &user_says("c3", "hi")).await,
            TURNS,
            1..=30,
        );
        refused(
            &chat_as(&b, "alice", &user_says("c3", "hi")).await,
            TURNS,
            1..=30,
        );
        assert_eq!(chat_as(&b, "bob", &user_says("c1", "hi")).await.status, 200);
    }

    #[tokio::test]
    async fn two_instances_enforce_one_tool_limit() {
        let yaml = "limits: {tools: {process_payment: {callsPerMinute: 1}}}\ntoolConfirmation: {toolPolicies: {alwaysAllow: [internal--process_payment]}}\n";
        let (a, b) = pair(yaml).await;
        let first = chat_as(&a, "alice", &user_says("c1", "Send 10 USD to Taro")).await;
        assert!(tool_errors(&first).is_empty(), "{}", first.body);
        let second = chat_as(&b, "bob", &user_says("c1", "Send 10 USD to Taro")).await;
        assert_eq!(tool_errors(&second), [PAYMENTS]);
        assert_eq!(a.payments() + b.payments(), 1);
    }

    #[tokio::test]
    async fn a_stream_on_one_instance_counts_on_the_other_until_it_ends() {
        let (a, b) = pair("limits: {concurrentStreams: 1}").await;
        let response = hold_open(&a.url, "alice").await;
        refused(
            &chat_as(&b, "alice", &user_says("c1", "hi")).await,
            STREAMS,
            1..=60,
        );
        assert_eq!(chat_as(&b, "bob", &user_says("c1", "hi")).await.status, 200);
        // Denied elsewhere, the held turn ends and gives its place back.
        let id = common::wait::until_ok("the held question", || async {
            let open = a
                .get_with("/api/confirmations?chatId=held", &[("x-user", "alice")])
                .await;
            open.json()[0]["id"]
                .as_str()
                .map(str::to_owned)
                .ok_or(open.body)
        })
        .await;
        let denied = b
            .post_with(
                &format!("/api/confirmations/{id}"),
                &[("x-user", "alice")],
                json!({"approved": false}).to_string(),
            )
            .await;
        assert_eq!(denied.status, 200, "{}", denied.body);
        drop(response);
        common::wait::until("the stream's place to come back", || async {
            chat_as(&b, "alice", &user_says("c2", "hi")).await.status == 200
        })
        .await;
    }
}
