//! A model's arguments fit the tool's input schema before any rule reads
//! them: a call that does not fit ends as `tool-input-error` and reaches
//! neither the policy nor the tool, for every kind of tool. A rule that
//! cannot read its argument holds (fails closed).

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::calls::Calls;
use common::{Reply, Server, asked, user_says};
use serde_json::{Value, json};
use toolgate::Config;

/// The one `tool-input-error`'s text, and that nothing else was said of the call.
fn input_error(reply: &Reply) -> String {
    let errors = reply.of_type("tool-input-error");
    assert_eq!(errors.len(), 1, "{}", reply.body);
    assert_eq!(asked(reply), 0, "nothing asked: {}", reply.body);
    assert!(
        reply.of_type("tool-output-available").is_empty(),
        "nothing ran: {}",
        reply.body
    );
    errors[0]["errorText"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_built_in_tool_refuses_arguments_of_the_wrong_type_before_its_rules() -> anyhow::Result<()>
{
    let yaml = "\
toolConfirmation:
  tools:
    process_payment: {deny: {when: \"amount > 5000\"}, confirm: never}
";
    let server = Server::from_yaml(yaml).await;
    for (args, misfit) in [
        (r#"{"amount": "9000", "recipient": "bob"}"#, "/amount"),
        (r#"{"amount": [9000], "recipient": "bob"}"#, "/amount"),
        (r#"{"recipient": "bob"}"#, "amount"),
        (
            r#"{"amount": 90, "recipient": "bob", "memo": "x"}"#,
            "additionalProperties",
        ),
    ] {
        let text = format!("use process_payment with {args}");
        let reply = server.says("chat-t", &text).await;
        let error = input_error(&reply);
        assert!(
            error.starts_with("the arguments do not fit the input schema of `process_payment`")
                && error.contains(misfit),
            "{args}: {error}"
        );
    }
    assert_eq!(server.payments(), 0);
    // The audit log says why, and that nobody was asked.
    let audit = server.get("/api/audit?chatId=chat-t").await;
    let refused = audit
        .json_lines()
        .iter()
        .filter(|e| e["decision"] == "refused" && e["by"] == "schema")
        .count();
    assert_eq!(refused, 4, "{}", audit.body);
    // A fitting call is judged by the rules as before: 9,000 is denied.
    let fits = r#"use process_payment with {"amount": 9000, "recipient": "bob"}"#;
    let denied = server.says("chat-t2", fits).await;
    let errors = denied.error_texts();
    assert!(errors[0].starts_with("denied by policy"), "{}", denied.body);
    Ok(())
}

/// An endpoint on 127.0.0.1:0 that counts the calls it gets.
async fn counting_endpoint() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/pay",
        axum::routing::post(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({"paid": true}))
            }
        }),
    );
    let (listener, url) = common::loopback().await;
    // A test's server: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}

/// An HTTP tool `pay` with `parameters` and `rule` as its policy.
async fn http_pay(parameters: &str, rule: &str) -> (Server, Arc<AtomicUsize>) {
    let (url, hits) = counting_endpoint().await;
    let yaml = format!(
        "auth: {{principalHeader: X-User}}\ntools:\n  http:\n    - name: pay\n      description: Pay\n      parameters: {parameters}\n      url: {url}/pay\ntoolConfirmation:\n  tools:\n    pay: {rule}\n"
    );
    let config = Config::from_yaml(&yaml)
        .map_err(|e| format!("{e}\n{yaml}"))
        .must();
    let server = Server::with(config, |app| app.with_provider(Calls)).await;
    (server, hits)
}

/// A turn of alice's (the HTTP tools' servers name their users).
async fn as_alice(server: &Server, body: &Value) -> Reply {
    server
        .post_with("/stream", &[("x-user", "alice")], body.to_string())
        .await
}

const NUMBER: &str = "{type: object, properties: {amount: {type: number}}, required: [amount]}";
/// A schema that lets `amount` be anything: only the rules stand.
const ANYTHING: &str = "{type: object, properties: {amount: {}}}";

#[tokio::test]
async fn an_http_tool_never_pays_a_string_amount_unasked() {
    let (server, hits) = http_pay(NUMBER, "{confirm: {when: \"amount > 100\"}}").await;
    for args in [r#"{"amount": "9000"}"#, r#"{"amount": [9000]}"#] {
        let reply = as_alice(&server, &user_says("chat-h", &format!("pay {args}"))).await;
        let error = input_error(&reply);
        assert_contains(&error, "/amount");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    // A fitting small amount runs unasked; a large one asks.
    let small = as_alice(&server, &user_says("chat-h", r#"pay {"amount": 50}"#)).await;
    assert_eq!(asked(&small), 0, "{}", small.body);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let large = as_alice(&server, &user_says("chat-h", r#"pay {"amount": 9000}"#)).await;
    assert_eq!(asked(&large), 1, "{}", large.body);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_rule_that_cannot_read_its_argument_holds() {
    // deny.when: a string, an array or no amount is denied.
    let (server, hits) = http_pay(
        ANYTHING,
        "{deny: {when: \"amount > 5000\"}, confirm: never}",
    )
    .await;
    for args in [r#"{"amount": "9000"}"#, r#"{"amount": [9000]}"#, "{}"] {
        let reply = as_alice(&server, &user_says("chat-d", &format!("pay {args}"))).await;
        let errors = reply.error_texts();
        assert!(
            errors
                .first()
                .is_some_and(|t| t.starts_with("denied by policy")),
            "{args}: {}",
            reply.body
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let fits = as_alice(&server, &user_says("chat-d", r#"pay {"amount": 50}"#)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 1, "{}", fits.body);

    // confirm.when: asks.
    let (server, hits) = http_pay(ANYTHING, "{confirm: {when: \"amount > 100\"}}").await;
    let reply = as_alice(&server, &user_says("chat-c", r#"pay {"amount": "50"}"#)).await;
    assert_eq!(asked(&reply), 1, "{}", reply.body);
    assert_eq!(hits.load(Ordering::SeqCst), 0);

    // escalate.when: the higher approvers.
    let (server, _) = http_pay(
        ANYTHING,
        "{approvers: [clerk], escalate: [{when: \"amount > 1000\", approvers: [cfo]}]}",
    )
    .await;
    let reply = as_alice(&server, &user_says("chat-e", r#"pay {"amount": "9000"}"#)).await;
    assert!(
        reply.body.contains("waiting for approval by cfo"),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn a_client_tool_is_never_handed_arguments_that_do_not_fit() -> anyhow::Result<()> {
    let yaml = "\
tools:
  client:
    - name: get_location
      description: Where the user is, from the browser.
      parameters: {type: object, properties: {precision: {type: string}}}
";
    let config = Config::from_yaml(yaml)?;
    let server = Server::with(config, |app| app.with_provider(Calls)).await;
    let reply = server
        .says("chat-l", r#"get_location {"precision": 5}"#)
        .await;
    let error = input_error(&reply);
    assert_contains(&error, "/precision");
    // The client's `onToolCall` sees no call to run.
    let handed = reply
        .of_type("tool-input-available")
        .into_iter()
        .filter(|c| c["toolName"] == "get_location")
        .count();
    assert_eq!(handed, 0, "{}", reply.body);
    Ok(())
}
