//! Redaction: a call with a sensitive value (a configured pointer and a
//! default key name) goes through every surface toolgate shows a person
//! or writes — the stream, `/api/confirmations`, the inbox, a webhook
//! notification, a link's page, `toolgate audit export` and an OTLP
//! export — and no captured byte holds the secret, while the tool got it.

use crate::common;
use crate::common::{Must, assert_contains};

use std::process::Command;
use std::sync::{Arc, Mutex};

use common::receiver::{PUBLIC_URL, Receiver, SECRET_ENV};
use common::{Binary, Reply, approval_of, wait};
use serde_json::{Value, json};

/// Said by the default key name `password`.
const PASSWORD: &str = "hunter2-SECRET-A";
/// Said by the tool's pointer `/account/number`.
const ACCOUNT: &str = "ACCT-SECRET-B";
const MARKER: &str = toolgate::call::redact::MARKER;

/// An endpoint for the HTTP tool that keeps every body it got.
async fn vault() -> (String, Arc<Mutex<Vec<String>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    let app = axum::Router::new().route(
        "/login",
        axum::routing::post(move |body: String| {
            let keep = keep.clone();
            async move {
                keep.lock().unwrap_or_else(|e| e.into_inner()).push(body);
                axum::Json(json!({"session": "opened"}))
            }
        }),
    );
    let (listener, url) = common::loopback().await;
    // A test's server: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

async fn get(url: &str) -> String {
    let response = reqwest::get(url).await.must();
    assert_eq!(response.status().as_u16(), 200, "{url}");
    response.text().await.must()
}

#[tokio::test]
async fn a_sensitive_value_reaches_the_tool_and_no_person() {
    let (endpoint, tool_got) = vault().await;
    let webhook = Receiver::start(&[200]).await;
    let collector = Receiver::start(&[200]).await;
    let state = tempfile::tempdir().must();
    let dir = state.path();
    let config = common::config_file(
        dir,
        format!(
            r#"store:
  kind: sqlite
  path: {db}
telemetry:
  recordContent: true
tools:
  http:
    - name: vault_login
      description: Log in to the vault
      parameters: {{type: object, properties: {{user: {{type: string}}, password: {{type: string}}, account: {{type: object}}}}}}
      url: {endpoint}/login
      timeoutMs: 5000
toolConfirmation:
  signingKeys: [test-signing-key-of-at-least-32-bytes]
  publicUrl: {PUBLIC_URL}
  notify:
    - {{webhook: '{hook}/hook', secretEnv: {SECRET_ENV}}}
  tools:
    vault_login:
      sensitive: [/account/number]
      hint: "Log {{user}} in with {{password}}?"
"#,
            db = dir.join("db.sqlite3").display(),
            hook = webhook.url,
        ),
    );
    let server = Binary::serve_with_env(
        &["--config", &config],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    let mut captured: Vec<(String, String)> = Vec::new();

    let said = format!(
        r#"use vault_login with {{"user": "ann", "password": "{PASSWORD}", "account": {{"number": "{ACCOUNT}", "bank": "B1"}}}}"#
    );
    let first = server.says("chat-r", &said).await;
    let ask = first.of_type("tool-input-available");
    let card = &ask[0]["input"];
    assert_eq!(
        card["originalFunctionCall"]["args"],
        json!({"user": "ann", "password": MARKER, "account": {"number": MARKER, "bank": "B1"}}),
        "{}",
        first.body
    );
    assert_eq!(
        card["toolConfirmation"]["hint"],
        format!("Log ann in with {MARKER}?")
    );
    let id = ask[0]["toolCallId"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", first.body))
        .to_owned();
    captured.push(("the first stream".into(), first.body.clone()));

    let one = get(&format!("{}/api/confirmations/{id}", server.url)).await;
    assert_contains(&one, MARKER);
    captured.push(("/api/confirmations/{id}".into(), one));
    let inbox = get(&format!("{}/api/confirmations", server.url)).await;
    assert_contains(&inbox, &id);
    captured.push(("the inbox".into(), inbox));

    let delivered = webhook.until(1).await;
    let body = delivered[0].json();
    assert_eq!(body["call"]["args"]["password"], MARKER, "{body}");
    let page_path = body["links"]["approve"]
        .as_str()
        .and_then(|link| link.strip_prefix(PUBLIC_URL))
        .unwrap_or_else(|| panic!("no link in {body}"));
    let page = get(&format!("{}{page_path}", server.url)).await;
    assert_contains(&page, MARKER);
    captured.push(("the link's page".into(), page));
    for got in &delivered {
        captured.push((
            "a notification".into(),
            String::from_utf8_lossy(&got.body).into(),
        ));
    }

    // Approved in the chat as it was shown: the masked values come back as
    // markers, and the call that runs is the real one.
    let second: Reply = server.chat(&approval_of("chat-r", &said, &first)).await;
    assert!(
        !second.of_type("tool-output-available").is_empty(),
        "{}",
        second.body
    );
    captured.push(("the second stream".into(), second.body.clone()));
    let sent = tool_got.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(sent.len(), 1, "the tool ran once: {sent:?}");
    let sent: Value = serde_json::from_str(&sent[0]).must();
    assert_eq!(
        sent,
        json!({"user": "ann", "password": PASSWORD, "account": {"number": ACCOUNT, "bank": "B1"}})
    );

    let export = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["audit", "export", "--config", &config])
        .env("RUST_LOG", "toolgate=warn")
        .output()
        .must();
    assert!(export.status.success(), "{export:?}");
    let export = String::from_utf8_lossy(&export.stdout).into_owned();
    assert!(export.lines().count() >= 2, "asked and approved: {export}");
    captured.push(("the audit export".into(), export));

    let spans = wait::until_ok("the tool's span", || {
        let bodies: Vec<_> = collector.got().into_iter().map(|g| g.body).collect();
        let all: Vec<u8> = bodies.concat();
        let text = String::from_utf8_lossy(&all).into_owned();
        std::future::ready(match text.contains("execute_tool vault_login") {
            true => Ok(text),
            false => Err("no execute_tool span yet".to_owned()),
        })
    })
    .await;
    assert_contains(&spans, "gen_ai.tool.call.arguments");
    assert_contains(&spans, MARKER);
    captured.push(("the OTLP export".into(), spans));

    for (what, bytes) in &captured {
        for secret in [PASSWORD, ACCOUNT] {
            assert!(!bytes.contains(secret), "{secret} in {what}: {bytes}");
        }
    }
}

/// `process_payment` with its recipient sensitive and editable.
async fn payments(protocol: &str) -> common::Server {
    let yaml = format!(
        "toolConfirmation:\n  protocol: {protocol}\n  tools:\n    process_payment:\n      editable: true\n      sensitive: [/recipient]\n"
    );
    common::Server::with_config(toolgate::Config::from_yaml(&yaml).must()).await
}

/// Native approvals: the call's input is masked, never streamed as the
/// model writes it, and the approval sent back with the masked input as
/// shown runs the real call.
#[tokio::test]
async fn a_native_approval_of_a_masked_call_runs_the_real_one() {
    let server = payments("ai-sdk").await;
    let first = server.says("chat-n", "Send 50 USD to Hanako").await;
    assert!(!first.body.contains("Hanako"), "{}", first.body);
    assert!(
        first.of_type("tool-input-delta").is_empty(),
        "{}",
        first.body
    );
    let input = first.of_type("tool-input-available")[0].clone();
    assert_eq!(input["input"]["recipient"], MARKER, "{}", first.body);
    let question = first.of_type("tool-approval-request")[0].clone();
    let answer = |recipient: &str| {
        let mut shown = input["input"].clone();
        shown["recipient"] = json!(recipient);
        json!({
            "id": "chat-n", "trigger": "submit-message",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]},
                {"id": first.of_type("start")[0]["messageId"], "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "tool-process_payment", "toolCallId": question["toolCallId"],
                     "input": shown, "state": "approval-responded",
                     "approval": {"id": question["approvalId"], "approved": true}}
                ]}
            ]
        })
    };
    // Another value where the mask was is another call: refused.
    let other = server.chat(&answer("Mallory")).await;
    assert_eq!(server.payments(), 0, "{}", other.body);
    let paid = server.chat(&answer(MARKER)).await;
    assert_eq!(server.payments(), 1, "{}", paid.body);
    let output = paid.of_type("tool-output-available");
    assert_eq!(output[0]["output"]["recipient"], "Hanako", "{}", paid.body);
}

/// An edit out of band keeps the real value of a masked field left as
/// shown, takes a new one the approver wrote, and answers masked.
#[tokio::test]
async fn an_edit_keeps_a_masked_value_left_as_shown() {
    let server = payments("adk").await;
    for (chat, recipient, paid_to) in [("chat-e1", MARKER, "Hanako"), ("chat-e2", "Taro", "Taro")] {
        let first = server.says(chat, "Send 50 USD to Hanako").await;
        let asked = common::asked_call(&first);
        assert_eq!(asked["args"]["recipient"], MARKER, "{}", first.body);
        let id = first.of_type("tool-input-available")[0]["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let edit = json!({"approved": true, "editedArgs": {"amount": 60, "currency": "USD", "recipient": recipient}});
        let decided = server.decide(&id, edit.to_string()).await.json();
        let outcome = &decided["outcome"];
        assert_eq!(outcome["output"]["recipient"], paid_to, "{decided}");
        assert_eq!(outcome["output"]["amount"], 60, "{decided}");
        assert_eq!(outcome["ranWith"]["recipient"], MARKER, "{decided}");
        assert_eq!(outcome["ranWith"]["amount"], 60, "{decided}");
    }
    assert_eq!(server.payments(), 2);
}

/// An HTTP tool `transfer` (never reached: every call here misfits) with
/// `/account/number` sensitive and its arguments editable, asked in the
/// ADK form.
async fn transfers() -> common::Server {
    let yaml = "\
tools:
  http:
    - name: transfer
      description: Transfer money
      parameters:
        type: object
        properties:
          amount: {type: number}
          account:
            type: object
            properties: {number: {type: string, maxLength: 16}, bank: {type: string}}
            maxProperties: 2
      url: http://127.0.0.1:9/transfer
toolConfirmation:
  protocol: adk
  tools:
    transfer:
      editable: true
      sensitive: [/account/number]
";
    common::Server::from_yaml(yaml).await
}

/// No `secret` in any of `captured`.
fn none_holds(secret: &str, captured: &[(&str, &str)]) {
    for (what, bytes) in captured {
        assert!(!bytes.contains(secret), "{secret} in {what}: {bytes}");
    }
}

/// An approver shown the masked account edits the object around it so it
/// breaks the schema: the masked value is put back before the check, and
/// neither the refusal nor the audit log quotes the object with it.
#[tokio::test]
async fn an_edit_that_misfits_around_a_masked_value_quotes_no_value() {
    let server = transfers().await;
    let said = format!(
        r#"use transfer with {{"amount": 5, "account": {{"number": "{ACCOUNT}", "bank": "B1"}}}}"#
    );
    let first = server.says("chat-m1", &said).await;
    let asked = common::asked_call(&first);
    assert_eq!(asked["args"]["account"]["number"], MARKER, "{}", first.body);
    let id = first.of_type("tool-input-available")[0]["toolCallId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let edit = json!({"approved": true, "editedArgs": {
        "amount": 5,
        "account": {"number": MARKER, "bank": "B1", "branch": "B2"}
    }});
    let refused = server.decide(&id, edit.to_string()).await;
    let audit = server.get("/api/audit?chatId=chat-m1").await;
    none_holds(
        ACCOUNT,
        &[
            ("the first stream", &first.body),
            ("the refusal", &refused.body),
            ("/api/audit", &audit.body),
        ],
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.json(),
        json!({"error": "invalid request: edited arguments are not valid: /account breaks the `maxProperties` rule"})
    );
    assert_contains(&audit.body, "/account breaks the `maxProperties` rule");
}

/// A model's call whose masked value misfits the schema: the input error
/// the stream says (and the model reads back) and the audit log name where
/// and which rule, not the value.
#[tokio::test]
async fn a_call_whose_masked_value_misfits_quotes_no_value() {
    const LONG: &str = "ACCT-SECRET-TOO-LONG-C";
    let server = transfers().await;
    let said = format!(r#"use transfer with {{"amount": 5, "account": {{"number": "{LONG}"}}}}"#);
    let reply = server.says("chat-m2", &said).await;
    let audit = server.get("/api/audit?chatId=chat-m2").await;
    none_holds(
        LONG,
        &[("the stream", &reply.body), ("/api/audit", &audit.body)],
    );
    let errors = reply.of_type("tool-input-error");
    assert_eq!(errors.len(), 1, "{}", reply.body);
    assert_eq!(
        errors[0]["errorText"],
        "the arguments do not fit the input schema of `transfer`: \
         /account/number breaks the `maxLength` rule",
        "{}",
        reply.body
    );
    assert_contains(&audit.body, "/account/number breaks the `maxLength` rule");
}
