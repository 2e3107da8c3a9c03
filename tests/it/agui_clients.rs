//! The AG-UI face driven by AG-UI's own client, `@ag-ui/client`'s
//! `HttpAgent` (1.0.0), unmodified and validating every event, against the
//! real binary: text, a confirmation approved, denied, approved with edits,
//! cancelled, two answered together (a partial resume refused), input while
//! pending, an expired interrupt, a replayed resume, forged ids, and a new
//! run on a thread after a disconnect. The program is
//! `agui-clients/run.mjs`, one scenario per run, printing what the client
//! saw. Compiled with the `agui-clients` feature; needs Node.js and
//! `npm ci --prefix agui-clients`, and fails without them.

use crate::common::{Binary, Must};

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio::process::Command;

/// `agui-clients/`, with the client installed (or the test fails).
pub(crate) fn clients() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("agui-clients");
    assert!(
        dir.join("node_modules/@ag-ui/client").is_dir(),
        "@ag-ui/client is not installed: run `npm ci --prefix agui-clients` (scripts/test does)"
    );
    dir
}

/// toolgate with callers named by `x-user`, payments editable, questions
/// expiring after `expiry` seconds.
pub(crate) struct Gate {
    pub(crate) binary: Binary,
    _state: tempfile::TempDir,
}

pub(crate) fn gate(expiry: u64) -> Gate {
    let state = tempfile::tempdir().must();
    let db = state.path().join("toolgate.sqlite3");
    let yaml = format!(
        "store:
  path: {db}
auth:
  principalHeader: x-user
toolConfirmation:
  signingKeys: [test-signing-key-of-at-least-32-bytes]
  expirySecs: {expiry}
  tools:
    process_payment:
      editable: true
",
        db = db.display()
    );
    let config = crate::common::config_file(state.path(), yaml);
    Gate {
        binary: Binary::serve_with(&["--config", &config]),
        _state: state,
    }
}

impl Gate {
    /// `run.mjs` on `scenario` as alice: what the client saw.
    async fn scenario(&self, scenario: &str) -> Value {
        let mut node = Command::new("node");
        node.arg(clients().join("run.mjs"))
            .args([&self.binary.url, scenario]);
        printed(scenario, node).await
    }

    /// Alice's audit log, oldest first.
    pub(crate) async fn audit(&self) -> Vec<Value> {
        let response = reqwest::Client::new()
            .get(format!("{}/api/audit", self.binary.url))
            .header("x-user", "alice")
            .send()
            .await
            .must();
        let body = response.text().await.unwrap_or_default();
        body.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect()
    }

    /// How many of alice's payments were approved, as asked or edited
    /// (and so ran).
    pub(crate) async fn approved_payments(&self) -> usize {
        self.audit()
            .await
            .iter()
            .filter(|e| e["decision"] == "approved" || e["decision"] == "edited")
            .count()
    }
}

/// What a Node program of `agui-clients/` printed last, as JSON; it must
/// have succeeded.
pub(crate) async fn printed(what: &str, mut node: Command) -> Value {
    let output = node.output().await.must();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {stdout}\n{stderr}");
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what}: {e}: {stdout}\n{stderr}"))
}

fn text(run: &Value) -> &str {
    run["text"].as_str().unwrap_or_default()
}

fn error_code(run: &Value) -> &str {
    run["errors"][0]["code"].as_str().unwrap_or_default()
}

/// The first run asked once, about `process_payment`, on the call it showed.
fn assert_asked(first: &Value, count: usize) {
    assert_eq!(first["outcome"], "interrupt", "{first}");
    let interrupts = first["interrupts"].as_array().cloned().unwrap_or_default();
    assert_eq!(interrupts.len(), count, "{first}");
    for interrupt in &interrupts {
        assert_eq!(interrupt["reason"], "confirmation");
        assert!(interrupt["toolCallId"].is_string());
        assert!(interrupt["expiresAt"].is_string());
        assert_eq!(interrupt["responseSchema"]["required"][0], "approved");
    }
    let types = first["types"].as_array().cloned().unwrap_or_default();
    let tail: Vec<Value> = types.iter().rev().take(3).rev().cloned().collect();
    assert_eq!(
        tail,
        ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"],
        "{first}"
    );
}

/// The resumed run's one result, on the interrupt's original call.
fn result_on_call<'a>(first: &Value, second: &'a Value) -> &'a str {
    let results = second["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 1, "{second}");
    assert_eq!(
        second["results"][0]["toolCallId"], first["interrupts"][0]["toolCallId"],
        "{second}"
    );
    assert_eq!(second["outcome"], "success", "{second}");
    second["results"][0]["content"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn text_through_http_agent() {
    let gate = gate(3600);
    let seen = gate.scenario("text").await;
    assert_eq!(text(&seen["run"]), "You said: Hello there", "{seen}");
    assert_eq!(seen["run"]["outcome"], "success");
}

#[tokio::test]
async fn approved_denied_edited_and_cancelled() {
    let gate = gate(3600);
    let approved = gate.scenario("approved").await;
    assert_asked(&approved["first"], 1);
    let output = result_on_call(&approved["first"], &approved["second"]);
    assert!(output.contains("completed"), "{approved}");
    assert!(text(&approved["second"]).starts_with("Sent 50 USD to Hanako"));
    assert_eq!(gate.approved_payments().await, 1);

    let denied = gate.scenario("denied").await;
    result_on_call(&denied["first"], &denied["second"]);
    assert!(
        text(&denied["second"]).contains("denied: not today"),
        "{denied}"
    );

    let edited = gate.scenario("edited").await;
    let output = result_on_call(&edited["first"], &edited["second"]);
    assert!(output.contains("completed"), "{edited}");
    assert!(
        text(&edited["second"]).starts_with("Sent 20 USD to Hanako"),
        "{edited}"
    );

    let cancelled = gate.scenario("cancelled").await;
    result_on_call(&cancelled["first"], &cancelled["second"]);
    assert!(
        text(&cancelled["second"]).contains("cancelled"),
        "{cancelled}"
    );

    assert_eq!(
        gate.approved_payments().await,
        2,
        "the approved and the edited"
    );
}

#[tokio::test]
async fn two_interrupts_together_and_a_partial_resume_refused() {
    let gate = gate(3600);
    let seen = gate.scenario("two").await;
    assert_asked(&seen["first"], 2);
    let local = seen["local"]["thrown"].as_str().unwrap_or_default();
    assert!(local.contains("not addressed by resume"), "{seen}");
    assert_eq!(error_code(&seen["partial"]), "INVALID_RESUME", "{seen}");
    let both = &seen["both"];
    assert_eq!(both["outcome"], "success", "{seen}");
    let calls: Vec<&Value> = both["results"]
        .as_array()
        .map(|r| r.iter().map(|r| &r["toolCallId"]).collect())
        .unwrap_or_default();
    let asked: Vec<&Value> = seen["first"]["interrupts"]
        .as_array()
        .map(|i| i.iter().map(|i| &i["toolCallId"]).collect())
        .unwrap_or_default();
    assert_eq!(calls, asked);
    assert_eq!(gate.approved_payments().await, 1);
}

#[tokio::test]
async fn input_while_pending_forged_ids_and_a_replayed_resume() {
    let gate = gate(3600);
    let pending = gate.scenario("pending").await;
    assert_eq!(
        error_code(&pending["refused"]),
        "INTERRUPTS_PENDING",
        "{pending}"
    );

    let forged = gate.scenario("forged").await;
    assert_eq!(error_code(&forged["forged"]), "INVALID_RESUME", "{forged}");
    assert_eq!(error_code(&forged["theirs"]), "INVALID_RESUME", "{forged}");
    assert_eq!(gate.approved_payments().await, 0);

    let replayed = gate.scenario("replayed").await;
    let once = result_on_call(&replayed["first"], &replayed["second"]);
    let again = result_on_call(&replayed["first"], &replayed["again"]);
    assert_eq!(once, again, "the recorded outcome, not a second payment");
    assert_eq!(gate.approved_payments().await, 1);
}

#[tokio::test]
async fn an_expired_interrupt() {
    let gate = gate(2);
    let seen = gate.scenario("expired").await;
    assert_asked(&seen["first"], 1);
    let local = seen["local"]["thrown"].as_str().unwrap_or_default();
    assert!(local.contains("expired"), "{seen}");
    assert_eq!(error_code(&seen["refused"]), "INTERRUPT_EXPIRED", "{seen}");
    assert_eq!(gate.approved_payments().await, 0);
}

#[tokio::test]
async fn a_new_run_on_the_thread_after_a_disconnect() {
    let gate = gate(3600);
    let seen = gate.scenario("reload").await;
    assert!(text(&seen["cut"]).starts_with("1 2"), "{seen}");
    assert_eq!(
        seen["cut"]["outcome"],
        Value::Null,
        "cut before RUN_FINISHED"
    );
    assert_eq!(text(&seen["after"]), "You said: Hello again", "{seen}");
    assert_eq!(seen["after"]["outcome"], "success");
}
