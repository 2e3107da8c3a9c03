//! HTTP tools from the config, against an in-process endpoint: the
//! arguments go out as JSON, the JSON answer is the output, an error status
//! or a slow endpoint is the call's error, and the policy gates them.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use std::time::Duration;

use axum::http::HeaderMap;
use common::calls::Calls;
use common::{Server, user_says};
use serde_json::{Value, json};
use toolgate::Config;

/// What the user says: the model calls `lookup_order {"id": 7}`.
const LOOKUP: &str = r#"lookup_order {"id": 7}"#;

/// An endpoint on 127.0.0.1:0 answering `/ok` (the body and token it got),
/// `/fail` (500 with a message) and `/slow` (after 5 s).
async fn endpoint() -> String {
    let app = axum::Router::new()
        .route(
            "/ok",
            axum::routing::post(|headers: HeaderMap, body: String| async move {
                let token = headers
                    .get("x-token")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                let got: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                axum::Json(json!({"order": got["id"], "status": "shipped", "token": token}))
            }),
        )
        .route(
            "/fail",
            axum::routing::post(|| async {
                (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    axum::Json(json!({"error": {"message": "orders database is down"}})),
                )
            }),
        )
        .route(
            "/slow",
            axum::routing::post(|| async {
                // Slower than the tool's timeout, on purpose.
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.must();
    let url = format!("http://{}", listener.local_addr().must());
    // A test's server: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn server(path: &str, extra: &str) -> Server {
    let url = endpoint().await;
    let yaml = format!(
        "tools:\n  http:\n    - name: lookup_order\n      description: Look an order up\n      parameters: {{type: object, properties: {{id: {{type: integer}}}}}}\n      url: {url}{path}\n      headers: {{x-token: secret-7}}\n      timeoutMs: 300\n{extra}"
    );
    let config = Config::from_yaml(&yaml).must();
    Server::with(config, |app| app.with_provider(Calls)).await
}

#[tokio::test]
async fn an_approved_call_posts_the_arguments_and_returns_the_answer() {
    let server = server("/ok", "").await;
    let first = server.says("chat-h", LOOKUP).await;
    assert_eq!(common::asked_call(&first)["args"], json!({"id": 7}));
    let second = server
        .chat(&common::approval_of("chat-h", LOOKUP, &first))
        .await;
    let output = second.of_type("tool-output-available");
    let answer = output
        .iter()
        .find(|c| c["toolCallId"] == common::calls::CALL_ID)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        answer["output"],
        json!({"order": 7, "status": "shipped", "token": "secret-7"}),
        "{}",
        second.body
    );
}

/// A tool that needs no confirmation runs at once; its failures are the
/// call's errors, told to the model.
#[tokio::test]
async fn an_error_status_is_the_calls_error_with_the_message() {
    let server = server("/fail", "      needsConfirmation: false\n").await;
    let reply = server.says("chat-f", LOOKUP).await;
    let errors = reply.of_type("tool-output-error");
    assert_eq!(
        errors[0]["errorText"], "HTTP 500: orders database is down",
        "{}",
        reply.body
    );
    assert_eq!(reply.text(), "HTTP 500: orders database is down");
}

#[tokio::test]
async fn a_slow_endpoint_times_out() {
    let server = server("/slow", "      needsConfirmation: false\n").await;
    let reply = tokio::time::timeout(
        Duration::from_secs(4),
        server.chat(&user_says("chat-s", LOOKUP)),
    )
    .await
    .unwrap_or_else(|_| panic!("the slow endpoint held the turn"));
    let errors = reply.error_texts();
    assert_eq!(
        errors[0], "tool call timed out after 300 ms",
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn a_deny_rule_keeps_the_call_from_the_endpoint() {
    let rule = "toolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--lookup_order]\n";
    let server = server("/ok", &format!("      needsConfirmation: false\n{rule}")).await;
    let reply = server.says("chat-d", LOOKUP).await;
    let errors = reply.error_texts();
    assert!(errors[0].starts_with("denied by policy"), "{}", reply.body);
}

#[test]
fn a_secret_header_from_an_unset_variable_is_a_config_error() {
    let yaml = "tools:\n  http:\n    - name: t\n      description: d\n      url: http://127.0.0.1:1/x\n      headers: {authorization: 'env:TOOLGATE_SURELY_UNSET'}\n";
    let error = toolgate::config::Settings::from_yaml(yaml)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_contains(&error, "TOOLGATE_SURELY_UNSET");
}
