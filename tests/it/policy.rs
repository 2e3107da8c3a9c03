//! The confirmation policy through HTTP: Dexto's keys, per-tool rules, the
//! mode, and a rule added after a question was asked.

use crate::common;
use crate::common::Must;

use std::time::Duration;

use common::{Binary, Server, fixture};
use serde_json::json;
use toolgate::Config;
use toolgate::config::Settings;
use toolgate::store::Store;

fn config(name: &str) -> Config {
    let path = format!(
        "{}/tests/fixtures/config/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Config::load(std::path::Path::new(&path)).must()
}

fn asked(reply: &common::Reply) -> Vec<serde_json::Value> {
    reply
        .of_type("tool-input-available")
        .into_iter()
        .filter(|c| c["toolName"] == "adk_request_confirmation")
        .collect()
}

#[test]
fn dextos_documented_block_works_unchanged() {
    let config = config("dexto-schema.yaml");
    let window = Settings::new(config.clone()).map(|settings| settings.confirmation.window);
    assert_eq!(window.ok(), Some(Duration::from_millis(30_000)));
    assert_eq!(
        config.tool_confirmation.tool_policies.always_deny,
        ["mcp--filesystem--delete_file"]
    );
}

#[tokio::test]
async fn rules_allow_ask_and_deny() {
    let server = Server::with_config(config("payments.yaml")).await;

    let small = server.says("c1", "Send 50 USD to Hanako").await;
    assert!(asked(&small).is_empty(), "{}", small.body);
    assert_eq!(
        server.payments(),
        1,
        "amount > 100 is false: it runs without asking"
    );

    let large = server.says("c2", "Send 500 USD to Hanako").await;
    let question = asked(&large);
    assert_eq!(question.len(), 1);
    assert_eq!(
        question[0]["input"]["toolConfirmation"]["hint"],
        "Pay Hanako 500 USD?"
    );

    let huge = server.says("c3", "Send 9000 USD to Hanako").await;
    assert!(asked(&huge).is_empty());
    assert_eq!(
        huge.error_texts(),
        ["denied by policy: payments over 5000 need a bank transfer"]
    );
    assert_eq!(
        huge.text(),
        "The process_payment call failed: denied by policy: payments over 5000 need a bank transfer."
    );

    let weather = server.says("c4", "weather in Oslo").await;
    assert_eq!(
        weather.error_texts(),
        ["denied by policy: alwaysDeny internal--get_weather"]
    );
    assert_eq!(server.payments(), 1);
}

#[tokio::test]
async fn dextos_timeout_is_the_answer_window() {
    let server = Server::with_config(config("payments.yaml")).await;
    server.says("chat-pay", "Send 500 USD to Hanako").await;
    server.clock.advance(Duration::from_millis(120_001));
    let mut late = fixture("pay_hanako_approved.json");
    late["messages"][0]["parts"][0]["text"] = json!("Send 500 USD to Hanako");
    late["messages"][1]["parts"][1]["input"]["originalFunctionCall"]["args"]["amount"] = json!(500);
    let expired = "The request to run process_payment expired without an answer; nobody approved or denied it.";
    assert_eq!(server.chat(&late).await.error_texts(), [expired, expired]);
    assert_eq!(server.payments(), 0);
}

#[tokio::test]
async fn a_rule_added_after_the_question_still_denies() {
    let store = Store::memory();
    let before = Server::with(Config::default(), {
        let store = store.clone();
        move |app| app.with_store(store)
    })
    .await;
    before.says("chat-pay", "Send 50 USD to Hanako").await;
    let mut strict = Config::default();
    strict.tool_confirmation.tool_policies.always_deny = vec!["internal--process_payment".into()];
    let after = Server::with(strict, move |app| app.with_store(store)).await;
    let reply = after.chat(&fixture("pay_hanako_approved.json")).await;
    assert_eq!(
        reply.error_texts(),
        ["denied by policy: alwaysDeny internal--process_payment"]
    );
    assert_eq!(after.payments() + before.payments(), 0);
}

#[tokio::test]
async fn auto_approve_runs_what_would_ask_but_honours_always_deny() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = common::config_file(
        dir.path(),
        "store: {kind: memory}\ntoolConfirmation:\n  toolPolicies:\n    alwaysDeny: [internal--get_weather]\n",
    );
    let server = Binary::serve_with(&["--config", &path, "--auto-approve"]);
    let paid = server.says("c", "Send 50 USD to Hanako").await;
    assert!(asked(&paid).is_empty());
    assert!(common::transaction(&paid).is_some(), "{}", paid.body);
    let weather = server.says("c", "weather in Oslo").await;
    assert_eq!(
        weather.error_texts(),
        ["denied by policy: alwaysDeny internal--get_weather"]
    );
    Ok(())
}

#[tokio::test]
async fn the_tools_and_their_effective_policy() -> anyhow::Result<()> {
    let server = Server::with_config(config("payments.yaml")).await;
    let tools: serde_json::Value = reqwest::get(format!("{}/api/tools", server.url))
        .await?
        .text()
        .await
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    assert_eq!(tools["mcpServers"], serde_json::json!([]));
    assert_eq!(tools["tools"][0]["source"], "builtin");
    let summary: Vec<(String, String)> = tools["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["qualifiedName"].as_str().unwrap_or("").into(),
                t["policy"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "internal--process_payment".to_owned(),
                "never runs when amount > 5000; otherwise runs unless amount > 100; otherwise asks (mode event-based)".to_owned()
            ),
            ("internal--get_weather".to_owned(), "never runs (alwaysDeny internal--get_weather)".to_owned()),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn writing_a_number_as_a_float_does_not_get_around_a_rule() -> anyhow::Result<()> {
    let server = Server::from_yaml("toolConfirmation:\n  tools:\n    process_payment:\n      deny: {when: \"amount == 5000\", reason: \"no 5000s\"}\n",).await;
    for text in ["Send 5000 USD to Bob", "Send 5000.0 USD to Bob"] {
        let reply = server.says("c", text).await;
        assert_eq!(
            reply.error_texts(),
            ["denied by policy: no 5000s"],
            "{text}"
        );
    }
    assert_eq!(server.payments(), 0);
    Ok(())
}
