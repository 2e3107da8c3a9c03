//! An AG-UI frontend in a real browser against the real binary:
//! assistant-ui's AG-UI runtime (`@assistant-ui/react-ag-ui` 0.0.57 around
//! `@ag-ui/client` 1.0.0's `HttpAgent`, both unmodified) in Debian's headless
//! Chromium, through a confirmation. The user sends a message; the
//! interrupt shows through assistant-ui's own interrupt hooks; the user
//! approves in the page, the payment runs once and its result shows; in a
//! second thread the user denies with a reason. The page is
//! `agui-clients/web/`, built by Vite and driven by
//! `agui-clients/browser.mjs`, which also passes `/ag-ui` on to toolgate
//! as a trusted proxy does. Compiled with the `agui-browser` feature; needs
//! Node.js, `npm ci --prefix agui-clients` and Chromium (`CHROMIUM`), and
//! fails without them.

use crate::agui_clients::{Gate, clients, gate, printed};
use crate::common::Must;

use std::path::Path;

use serde_json::Value;
use tokio::process::Command;

const PAY: &str = "internal--process_payment";

/// `browser.mjs` as alice: what the page showed in each thread.
async fn in_the_browser(gate: &Gate) -> Value {
    let dir = clients();
    assert!(
        dir.join("node_modules/@assistant-ui/react-ag-ui").is_dir()
            && dir.join("node_modules/playwright-core").is_dir(),
        "assistant-ui is not installed: run `npm ci --prefix agui-clients` (scripts/test does)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "no Chromium at {chromium}: install Debian's `chromium` (scripts/test does) or set CHROMIUM"
    );
    let mut node = Command::new("node");
    node.arg(dir.join("browser.mjs"))
        .args([&gate.binary.url, "alice"])
        .env("CHROMIUM", &chromium);
    printed("browser.mjs", node).await
}

/// How many times the payment tool ran, by toolgate's own count.
async fn payments_run(gate: &Gate) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("{}/metrics", gate.binary.url))
        .header("x-user", "alice")
        .send()
        .await
        .must()
        .text()
        .await
        .must();
    text.lines()
        .filter(|l| l.starts_with(&format!("toolgate_tool_calls_total{{tool=\"{PAY}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The thread's two requests: the message, then the resume that answered
/// the question the server asked (its id in the audit log).
fn resumed<'a>(thread: &'a Value, audit: &[Value]) -> &'a Value {
    let requests = thread["requests"].as_array().cloned().unwrap_or_default();
    assert_eq!(requests.len(), 2, "{thread}");
    assert_eq!(requests[0]["resume"], Value::Null, "{thread}");
    let resume = &thread["requests"][1]["resume"];
    assert_eq!(resume.as_array().map(Vec::len), Some(1), "{thread}");
    let asked = audit
        .iter()
        .find(|e| e["decision"] == "asked" && e["chatId"] == thread["requests"][0]["threadId"])
        .unwrap_or_else(|| panic!("no question in the audit log for {thread}"));
    assert_eq!(
        resume[0]["interruptId"], asked["confirmationId"],
        "{thread}"
    );
    assert_eq!(resume[0]["status"], "resolved");
    assert!(
        thread["asked"]
            .as_str()
            .is_some_and(|m| m.contains("process_payment") && m.contains("\"amount\":50")),
        "the confirmation says what runs: {thread}"
    );
    assert_eq!(thread["problems"], serde_json::json!([]), "{thread}");
    assert_eq!(thread["statusAsked"], "requires-action", "{thread}");
    assert_eq!(thread["toolCalls"], 1, "the call shows once: {thread}");
    &resume[0]["payload"]
}

#[tokio::test]
async fn assistant_ui_approves_and_denies_in_chromium() {
    let gate = gate(3600);
    let seen = in_the_browser(&gate).await;
    let audit = gate.audit().await;

    let approved = &seen["approved"];
    assert_eq!(
        resumed(approved, &audit),
        &serde_json::json!({"approved": true})
    );
    let result = approved["result"].as_str().unwrap_or_default();
    assert!(result.contains("\"status\":\"completed\""), "{approved}");
    let reply = approved["texts"][0].as_str().unwrap_or_default();
    assert!(reply.starts_with("Sent 50 USD to Hanako"), "{approved}");

    let denied = &seen["denied"];
    assert_eq!(
        resumed(denied, &audit),
        &serde_json::json!({"approved": false, "reason": "not today"})
    );
    assert_eq!(denied["result"], "The user denied this call.", "{denied}");
    let reply = denied["texts"][0].as_str().unwrap_or_default();
    assert!(reply.contains("denied: not today"), "{denied}");

    // On the server: one approval, one denial with its reason, one run.
    assert_eq!(gate.approved_payments().await, 1, "{audit:?}");
    let rejected: Vec<&Value> = audit
        .iter()
        .filter(|e| e["decision"] == "rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{audit:?}");
    assert_eq!(rejected[0]["reason"], "not today");
    assert_eq!(
        payments_run(&gate).await,
        1.0,
        "the approved payment ran once"
    );
    println!("{}", seen["browser"]);
}
