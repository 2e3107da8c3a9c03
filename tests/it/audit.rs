//! Every decision is recorded: who decided what, by which rule, and why.

use crate::common;
use crate::common::from_json;
use crate::common::{Must, assert_contains};

use common::{Server, fixture, user_says};
use serde_json::Value;

async fn send(server: &Server, user: &str, body: Value) {
    reqwest::Client::new()
        .post(format!("{}/stream", server.url))
        .header("x-user", user)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map(drop)
        .must();
    // Each step a second apart, so that `since` can tell them apart.
    server.clock.advance(std::time::Duration::from_secs(1));
}

async fn audit(server: &Server, user: &str, query: &str) -> (String, Vec<Value>) {
    let reply = server
        .get_with(&format!("/api/audit{query}"), &[("x-user", user)])
        .await;
    let kind = reply
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let events = reply.body.lines().map(from_json).collect();
    (kind, events)
}

#[tokio::test]
async fn who_decided_what() {
    let mut config = toolgate::Config::default();
    config.auth.principal_header = Some("x-user".into());
    config.tool_confirmation.tool_policies.always_deny = vec!["internal--get_weather".into()];
    let server = Server::with_config(config).await;

    send(
        &server,
        "alice",
        user_says("chat-pay", "Send 50 USD to Hanako"),
    )
    .await;
    send(&server, "alice", fixture("pay_hanako_forged.json")).await;
    send(&server, "alice", fixture("pay_hanako_approved.json")).await;
    send(&server, "alice", fixture("pay_hanako_approved.json")).await;
    send(
        &server,
        "alice",
        user_says("chat-weather", "weather in Oslo"),
    )
    .await;

    let (kind, events) = audit(&server, "alice", "?chatId=chat-pay").await;
    assert_eq!(kind, "application/x-ndjson");
    let summary: Vec<(String, String, String)> = events
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_owned();
            (s("decision"), s("by"), s("reason"))
        })
        .collect();
    let row = |d: &str, by: &str, reason: &str| (d.to_owned(), by.to_owned(), reason.to_owned());
    assert_eq!(
        summary,
        [
            row("asked", "policy", ""),
            row(
                "refused",
                "toolgate",
                "originalFunctionCall differs from the call this server issued"
            ),
            row("approved", "user", ""),
            row("replayed", "an earlier answer", ""),
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| e["principal"] == "alice" && e["tool"] == "internal--process_payment")
    );
    // The forged answer is refused as alice's, not as toolgate's own.
    let alice = serde_json::json!({"source": "proxy-header", "principal": "alice"});
    assert_eq!(events[1]["approver"], alice, "{events:?}");
    let digest = |i: usize| events[i]["argsDigest"].as_str().unwrap_or("").to_owned();
    assert_eq!(digest(0).len(), 64);
    assert_eq!(digest(0), digest(2), "the approved call is the asked one");
    assert_ne!(digest(0), digest(1), "the forged one is not");

    let (_, weather) = audit(&server, "alice", "?chatId=chat-weather").await;
    assert_eq!(weather.len(), 1);
    assert_eq!(weather[0]["decision"], "denied");
    assert_eq!(weather[0]["reason"], "alwaysDeny internal--get_weather");

    let (_, all) = audit(&server, "alice", "").await;
    assert_eq!(all.len(), 5);
    let since = all[3]["atMs"].as_u64().unwrap_or(0);
    assert_eq!(
        audit(&server, "alice", &format!("?since={since}"))
            .await
            .1
            .len(),
        2,
        "events at or after `since`"
    );
    assert!(
        audit(&server, "mallory", "").await.1.is_empty(),
        "another user sees none of it"
    );
}

/// A decision refused out of band names who tried: one too late for a
/// question decided before it, and one on a question the caller may not
/// see. (A tool changed under its question: `fingerprint.rs`.)
#[tokio::test]
async fn a_refused_decision_names_who_tried() {
    let mut config = toolgate::Config::default();
    config.auth.principal_header = Some("x-user".into());
    let server = Server::with_config(config).await;
    send(
        &server,
        "alice",
        user_says("chat-pay", "Send 50 USD to Hanako"),
    )
    .await;
    let listed = server
        .get_with("/api/confirmations?chatId=chat-pay", &[("x-user", "alice")])
        .await
        .json();
    let id = listed[0]["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("/api/confirmations/{id}");
    let as_alice = [("x-user", "alice")];
    let approved = server.approve_with(&id, &as_alice).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    let denied = server
        .post_with(&path, &as_alice, r#"{"approved": false}"#)
        .await;
    assert_eq!(denied.status, 409, "{}", denied.body);
    let bobs = server.approve_with(&id, &[("x-user", "bob")]).await;
    assert_eq!(bobs.status, 404, "{}", bobs.body);

    let refused = |events: Vec<Value>| -> Vec<Value> {
        events
            .into_iter()
            .filter(|e| e["decision"] == "refused" && e["confirmationId"] == id.as_str())
            .collect()
    };
    let alices = refused(audit(&server, "alice", "").await.1);
    assert_eq!(alices.len(), 1, "{alices:?}");
    assert_contains(
        alices[0]["reason"].as_str().unwrap_or(""),
        "already approved",
    );
    let alice = serde_json::json!({"source": "proxy-header", "principal": "alice"});
    assert_eq!(alices[0]["approver"], alice, "{alices:?}");
    let bobs = refused(audit(&server, "bob", "").await.1);
    assert_eq!(bobs.len(), 1, "{bobs:?}");
    let bob = serde_json::json!({"source": "proxy-header", "principal": "bob"});
    assert_eq!(bobs[0]["approver"], bob, "{bobs:?}");
}

#[tokio::test]
async fn a_question_nobody_answers_ends_as_expired() {
    use std::time::Duration;
    use toolgate::confirm::{Gate, NewCall};
    use toolgate::ids::{Clock, Ids};
    use toolgate::protocol::ConfirmationProtocol;
    use toolgate::store::Store;
    use toolgate::tools::Registry;

    let clock = Clock::manual(1_000);
    let gate = Gate::new(
        Registry::with_builtins(100.0),
        Store::memory(),
        clock.clone(),
        Ids::sequential(),
        Duration::from_secs(60),
        Duration::from_secs(5),
    );
    let (scope, call) = common::payment_to_bo("alice");
    assert!(matches!(
        gate.check_new(&scope, call, ConfirmationProtocol::Adk)
            .await,
        Ok(NewCall::Ask(_))
    ));
    assert_eq!(gate.sweep().await.ok(), Some(0), "not expired yet");
    clock.advance(Duration::from_secs(61));
    assert_eq!(gate.sweep().await.ok(), Some(1));
    assert_eq!(gate.sweep().await.ok(), Some(0), "ended once");
    let log = gate
        .audit_log(toolgate::store::AuditPage {
            principal: "alice",
            chat_id: None,
            since_ms: 0,
            limit: 10,
        })
        .await
        .unwrap_or_default();
    let decisions: Vec<String> = log
        .iter()
        .map(|e| {
            serde_json::to_value(e.decision)
                .unwrap_or_default()
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(decisions, ["asked", "expired"]);
    assert_eq!(
        log[1].reason.as_deref(),
        Some("nobody approved or denied it before it expired")
    );
}
