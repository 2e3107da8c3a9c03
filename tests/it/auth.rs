//! API keys: every route but /healthz needs one (`Authorization: Bearer`
//! or `X-API-Key`), each key acts for one principal, and one principal can
//! never answer another's confirmation.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;
use crate::common::from_json;

use common::{Server, api_keys, fixture, hashed, user_says};
use serde_json::{Value, json};
use toolgate::Config;

async fn server() -> Server {
    Server::from_yaml(&api_keys(&[("alice", "alice-key"), ("bob", "bob-key")])).await
}

/// Alice, with her key, asks to pay Hanako in `chat-pay`: the status and body.
async fn alice_pays(server: &Server) -> (u16, String) {
    let body = user_says("chat-pay", "Send 50 USD to Hanako");
    call(server, Some("alice-key"), "POST", "/stream", Some(body)).await
}

async fn call(
    server: &Server,
    key: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let client = reqwest::Client::new();
    let url = format!("{}{path}", server.url);
    let mut request = match method {
        "POST" => client
            .post(url)
            .header("content-type", "application/json")
            .body(body.unwrap_or(Value::Null).to_string()),
        "DELETE" => client.delete(url),
        _ => client.get(url),
    };
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let response = request.send().await.must();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

#[tokio::test]
async fn every_route_but_healthz_needs_a_valid_key() {
    let server = server().await;
    let no_key =
        r#"{"error":"an API key is needed: Authorization: Bearer <key> or X-API-Key: <key>"}"#;
    let bad_key = r#"{"error":"the API key is not valid"}"#;
    for (method, path) in [
        ("POST", "/stream"),
        ("POST", "/api/chat"),
        ("GET", "/api/tools"),
        ("GET", "/api/approvals"),
        ("DELETE", "/api/approvals/x"),
        ("GET", "/api/audit"),
        ("GET", "/api/confirmations?chatId=c"),
        ("POST", "/api/confirmations/x"),
    ] {
        let body = Some(user_says("c", "hi"));
        assert_eq!(
            call(&server, None, method, path, body.clone()).await,
            (401, no_key.into()),
            "{method} {path}"
        );
        assert_eq!(
            call(&server, Some("guess"), method, path, body).await,
            (401, bad_key.into()),
            "{method} {path}"
        );
    }
    assert_eq!(
        call(&server, None, "GET", "/healthz", None).await,
        (200, "ok".into())
    );
    assert_eq!(
        call(&server, Some("alice-key"), "GET", "/api/tools", None)
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn a_key_acts_for_its_principal_only() {
    let server = server().await;
    let (status, _) = alice_pays(&server).await;
    assert_eq!(status, 200);
    let (_, theirs) = call(
        &server,
        Some("bob-key"),
        "GET",
        "/api/confirmations?chatId=chat-pay",
        None,
    )
    .await;
    assert_eq!(theirs, "[]");
    assert_eq!(
        call(
            &server,
            Some("bob-key"),
            "POST",
            "/api/confirmations/adk-3",
            Some(json!({"approved": true}))
        )
        .await
        .0,
        404
    );
    // The approval in the chat: bob's is refused, then alice's runs.
    for (key, answered, payments) in [
        ("bob-key", "confirmation belongs to another user", 0),
        ("alice-key", r#""status":"completed""#, 1),
    ] {
        let approved = Some(fixture("pay_hanako_approved.json"));
        let (_, answer) = call(&server, Some(key), "POST", "/stream", approved).await;
        assert_contains(&answer, answered);
        assert_eq!(server.payments(), payments);
    }
}

/// A turn that asks in `chat`, sent with these key headers.
async fn ask(server: &Server, chat: &str, keys: &[(&str, &str)]) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/stream", server.url))
        .header("content-type", "application/json")
        .body(user_says(chat, "Send 50 USD to Hanako").to_string());
    for (name, value) in keys {
        request = request.header(*name, *value);
    }
    let response = request.send().await.must();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

/// How many open questions of `chat` `key`'s principal sees.
async fn open_for(server: &Server, chat: &str, key: &str) -> usize {
    let reply = server
        .get_with(
            &format!("/api/confirmations?chatId={chat}"),
            &[("x-api-key", key)],
        )
        .await;
    assert_eq!(reply.status, 200);
    let questions: Vec<Value> = from_json(&reply.body);
    questions.len()
}

#[tokio::test]
async fn x_api_key_is_a_key_like_the_bearer_one() {
    let server = server().await;
    let (status, body) = ask(&server, "c1", &[("x-api-key", "alice-key")]).await;
    assert_eq!(status, 200, "{body}");
    assert_contains(&body, "adk_request_confirmation");
    // The same principal, whichever header carries the key.
    let (status, questions) = call(
        &server,
        Some("alice-key"),
        "GET",
        "/api/confirmations?chatId=c1",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_contains(&questions, "process_payment");
    assert_eq!(open_for(&server, "c1", "alice-key").await, 1);
    assert_eq!(open_for(&server, "c1", "bob-key").await, 0);

    let both = [
        ("authorization", "Bearer bob-key"),
        ("x-api-key", "bob-key"),
    ];
    assert_eq!(ask(&server, "c2", &both).await.0, 200);
    assert_eq!(open_for(&server, "c2", "bob-key").await, 1);

    assert_eq!(
        ask(&server, "c3", &[("x-api-key", "guess")]).await,
        (401, r#"{"error":"the API key is not valid"}"#.into())
    );
    let disagree = [
        ("authorization", "Bearer alice-key"),
        ("x-api-key", "bob-key"),
    ];
    assert_eq!(
        ask(&server, "c3", &disagree).await,
        (
            401,
            r#"{"error":"Authorization and X-API-Key name different keys"}"#.into()
        )
    );
    assert_eq!(open_for(&server, "c3", "alice-key").await, 0);
    assert_eq!(open_for(&server, "c3", "bob-key").await, 0);
}

#[test]
fn keys_in_config_are_checked_at_load() {
    let cases = [
        (
            "auth:\n  apiKeys:\n    - {principal: a, sha256: 'xyz'}\n",
            "sha256 must be 64 hex digits",
        ),
        (
            "auth:\n  apiKeys:\n    - {principal: a, keyEnv: TOOLGATE_TEST_UNSET_VARIABLE}\n",
            "environment variable TOOLGATE_TEST_UNSET_VARIABLE is not set",
        ),
        (
            "auth:\n  apiKeys:\n    - {principal: a}\n",
            "give exactly one of sha256 and keyEnv",
        ),
    ];
    for (yaml, why) in cases {
        let err = toolgate::config::Settings::from_yaml(yaml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(why), "{yaml}: {err}");
    }
}

#[test]
fn without_keys_only_loopback() -> anyhow::Result<()> {
    let stderr = common::refused(&["serve", "--bind", "0.0.0.0:0"]);
    assert_contains(&stderr, "refusing to listen on 0.0.0.0:0 without API keys");
    Ok(())
}

#[tokio::test]
async fn an_operator_reads_and_revokes_for_everyone_others_get_403() -> anyhow::Result<()> {
    let yaml = format!(
        "auth:\n  apiKeys:\n    - {{principal: alice, sha256: '{}'}}\n    - {{principal: ops, sha256: '{}', admin: true}}\n",
        hashed("alice-key"),
        hashed("ops-key")
    );
    let server = Server::with_config(Config::from_yaml(&yaml)?).await;
    alice_pays(&server).await;
    let mut remember = fixture("pay_hanako_approved.json");
    remember["messages"][1]["parts"][1]["output"] =
        json!({"confirmed": true, "remember": "global"});
    call(
        &server,
        Some("alice-key"),
        "POST",
        "/stream",
        Some(remember),
    )
    .await;

    let forbidden = r#"{"error":"only an operator's key may read another principal's records"}"#;
    assert_eq!(
        call(
            &server,
            Some("alice-key"),
            "GET",
            "/api/approvals?principal=ops",
            None
        )
        .await,
        (403, forbidden.into())
    );
    assert_eq!(
        call(
            &server,
            Some("alice-key"),
            "GET",
            "/api/audit?principal=ops",
            None
        )
        .await,
        (403, forbidden.into())
    );

    let (status, listed) = call(
        &server,
        Some("ops-key"),
        "GET",
        "/api/approvals?principal=alice",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_str(&listed).unwrap_or_default();
    let id = listed[0]["id"].as_str().unwrap_or("").to_owned();
    assert_eq!(
        listed[0]["chatId"],
        Value::Null,
        "remembered for every chat"
    );
    assert_eq!(
        call(
            &server,
            Some("ops-key"),
            "DELETE",
            &format!("/api/approvals/{id}?principal=alice"),
            None
        )
        .await
        .0,
        204
    );

    let (status, log) = call(
        &server,
        Some("ops-key"),
        "GET",
        "/api/audit?principal=alice",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let last: Value = log
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    assert_eq!(
        (last["decision"].as_str(), last["by"].as_str()),
        (Some("revoked"), Some("operator ops"))
    );
    assert_eq!(last["tool"], "internal--process_payment");
    Ok(())
}
