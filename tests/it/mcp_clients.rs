//! The MCP face driven by the official SDK clients, unmodified, against the
//! real binary: the Python `mcp` package (2.3.0) over Streamable HTTP
//! (2026-07-28 with `input_required` round trips, and the older session
//! with `elicitation/create`) and over stdio (`toolgate mcp`), and the
//! TypeScript `@modelcontextprotocol/sdk` (1.32.2, a 2025-11-25 session).
//! The programs are `mcp-clients/call.py` and `mcp-clients/call.mjs`; each
//! calls `transfer`, an HTTP tool whose endpoint here records what ran, and
//! prints what it saw. Compiled with the `mcp-clients` feature; needs
//! `TOOLGATE_TEST_MCP_PYTHON` (the Python of a virtualenv with `mcp`, which
//! scripts/test makes), Node.js and `npm ci --prefix mcp-clients`, and
//! fails without them.

use crate::common::{Binary, Must, wait};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::process::Command;

/// Alice's API key: the HTTP clients send it as `Authorization: Bearer`.
const KEY: &str = "mcp-clients-key-of-alice-0123456789";

/// What the endpoint of `transfer` answers.
const SENT: &str = "txn-hanako";

/// The endpoint of `transfer`: the body of every call that ran.
#[derive(Clone, Default)]
struct Ran(Arc<Mutex<Vec<Value>>>);

impl Ran {
    fn bodies(&self) -> Vec<Value> {
        self.0.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// How many calls with `amount` ran.
    fn times(&self, amount: u64) -> usize {
        let bodies = self.bodies();
        bodies.iter().filter(|b| b["amount"] == amount).count()
    }
}

/// An endpoint on 127.0.0.1:0 for `transfer`: it records the body and
/// answers with a transaction id.
async fn endpoint() -> (String, Ran) {
    let ran = Ran::default();
    let seen = ran.clone();
    let app = axum::Router::new().route(
        "/transfer",
        axum::routing::post(move |body: String| async move {
            let got: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if let Ok(mut bodies) = seen.0.lock() {
                bodies.push(got.clone());
            }
            axum::Json(json!({"transaction": SENT, "amount": got["amount"]}))
        }),
    );
    let (listener, url) = crate::common::loopback().await;
    // A test's server: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, ran)
}

/// toolgate serving MCP: `transfer` asks before it runs, alice has a key,
/// the state is in SQLite (shared with `toolgate mcp` on the same config).
struct Gate {
    binary: Binary,
    ran: Ran,
    config: String,
    _state: tempfile::TempDir,
}

async fn gate() -> Gate {
    let (url, ran) = endpoint().await;
    let state = tempfile::tempdir().must();
    let db = state.path().join("toolgate.sqlite3");
    let yaml = format!(
        "store:
  path: {db}
toolConfirmation:
  signingKeys: [test-signing-key-of-at-least-32-bytes]
auth:
  apiKeys:
    - {{principal: alice, keyEnv: TOOLGATE_TEST_ALICE_KEY}}
tools:
  http:
    - name: transfer
      description: Send money to someone
      parameters: {{type: object, properties: {{amount: {{type: integer}}, to: {{type: string}}}}, required: [amount, to]}}
      url: {url}/transfer
      needsConfirmation: true
mcp:
  retryWaitMs: 200
  holdSeconds: 2
  principal: alice
",
        db = db.display()
    );
    let config = crate::common::config_file(state.path(), yaml);
    let binary =
        Binary::serve_with_env(&["--config", &config], &[("TOOLGATE_TEST_ALICE_KEY", KEY)]);
    Gate {
        binary,
        ran,
        config,
        _state: state,
    }
}

/// The name toolgate lists `transfer` under, and its qualified name (the
/// policy's and the audit log's).
const TOOL: &str = "transfer";
const QUALIFIED: &str = "internal--transfer";

/// The arguments of a transfer of `amount` to Hanako.
fn args(amount: u64) -> String {
    json!({"amount": amount, "to": "Hanako"}).to_string()
}

/// `mcp-clients/`, with the TypeScript SDK installed (or the test fails).
fn clients() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-clients");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript MCP SDK is not installed: run `npm ci --prefix mcp-clients` (scripts/test does)"
    );
    dir
}

impl Gate {
    fn mcp_url(&self) -> String {
        format!("{}/mcp", self.binary.url)
    }

    /// `call.py` over HTTP with alice's key: `mode`, then the flow's options.
    fn python(&self, mode: &str, amount: u64, answer: &str) -> Command {
        let mut command = python();
        command.args(["--url", &self.mcp_url(), "--token", KEY, "--mode", mode]);
        command.args(["--tool", TOOL, "--args", &args(amount), "--answer", answer]);
        command
    }

    /// `call.py` over stdio: it launches `toolgate mcp` on this gate's config
    /// (and store), as alice.
    fn python_stdio(&self, amount: u64, answer: &str) -> Command {
        let mut command = python();
        command.args([
            "--stdio",
            env!("CARGO_BIN_EXE_toolgate"),
            "--config",
            &self.config,
        ]);
        command.args(["--tool", TOOL, "--args", &args(amount), "--answer", answer]);
        command.env("TOOLGATE_MCP_PRINCIPAL", "alice");
        command
    }

    /// `call.mjs` (the TypeScript SDK) with alice's key.
    fn typescript(&self, amount: u64, answer: &str) -> Command {
        let mut command = Command::new("node");
        command.arg(clients().join("call.mjs")).arg(self.mcp_url());
        command.args(["--token", KEY, "--tool", TOOL, "--args", &args(amount)]);
        command.args(["--answer", answer]);
        command
    }

    /// A GET or POST of toolgate's API as alice: the JSON it answered.
    async fn api(&self, path: &str, post: Option<Value>) -> (u16, String) {
        let url = format!("{}{path}", self.binary.url);
        let http = reqwest::Client::new();
        let request = match post {
            Some(body) => http
                .post(url)
                .header("content-type", "application/json")
                .body(body.to_string()),
            None => http.get(url),
        };
        let response = request.bearer_auth(KEY).send().await.must();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    }

    /// Alice's audit log: one JSON value per event.
    async fn audit(&self) -> Vec<Value> {
        let (status, body) = self.api("/api/audit", None).await;
        assert_eq!(status, 200, "{body}");
        body.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The audit events of `decision` (`approved`, `rejected`) about `transfer`.
    async fn decisions(&self, decision: &str) -> Vec<Value> {
        let events = self.audit().await;
        events
            .into_iter()
            .filter(|e| e["decision"] == decision && e["tool"] == QUALIFIED)
            .collect()
    }
}

/// The Python with `mcp` installed, running `call.py`.
fn python() -> Command {
    let python = std::env::var("TOOLGATE_TEST_MCP_PYTHON").unwrap_or_else(|_| {
        panic!(
            "TOOLGATE_TEST_MCP_PYTHON is not set: the Python of a virtualenv with mcp 2.3.0 (scripts/test makes one)"
        )
    });
    let mut command = Command::new(python);
    command.arg(clients().join("call.py"));
    command.env("TOOLGATE_TEST_ALICE_KEY", KEY);
    command
}

/// What a client program printed: its protocol, the tools it was shown,
/// the forms it was asked and the call's result.
struct Called(Value);

impl Called {
    fn result(&self) -> &Value {
        assert!(
            self.0.get("error").is_none(),
            "the client failed: {}",
            self.0
        );
        &self.0["result"]
    }

    fn is_error(&self) -> bool {
        self.result()["isError"] == true
    }

    /// The text of the result's content.
    fn text(&self) -> String {
        let content = self.result()["content"].as_array().cloned();
        content
            .unwrap_or_default()
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn asked(&self) -> Vec<Value> {
        self.0["asked"].as_array().cloned().unwrap_or_default()
    }

    fn protocol(&self) -> &str {
        self.0["protocol"].as_str().unwrap_or("")
    }

    /// Whether `transfer` was among the tools listed.
    fn listed(&self) -> bool {
        let tools = self.0["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().any(|t| t == TOOL)
    }
}

/// Runs a client program to its end: what it printed last.
async fn run(command: Command) -> Called {
    finish(start(command)).await
}

/// Starts a client program, to [`finish`] later.
fn start(mut command: Command) -> tokio::process::Child {
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    command.kill_on_drop(true).spawn().must()
}

/// Waits for a client program's end: what it printed last.
async fn finish(child: tokio::process::Child) -> Called {
    let output = child.wait_with_output().await.must();
    Called(printed(&output))
}

/// The JSON line a client program printed last, or the test fails with
/// everything it wrote.
fn printed(output: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "the client printed no result ({}):\n{stdout}\n{stderr}",
                output.status
            )
        })
}

/// The form toolgate asked with: it names the tool, its arguments and asks
/// approve (with a reason).
fn assert_form(called: &Called) {
    let asked = called.asked();
    assert_eq!(asked.len(), 1, "{}", called.0);
    let message = asked[0]["message"].as_str().unwrap_or("");
    assert!(message.contains("transfer"), "{message}");
    assert!(message.contains("Hanako"), "{message}");
    let properties = &asked[0]["schema"]["properties"];
    assert!(properties.get("approve").is_some(), "{}", asked[0]);
    assert!(properties.get("reason").is_some(), "{}", asked[0]);
}

/// Every event names the client that asked, by its name and version.
fn assert_client(events: &[Value], name: &str) {
    assert!(!events.is_empty());
    for event in events {
        let client = event["client"].as_str().unwrap_or("");
        assert!(client.starts_with(name), "{event}");
    }
}

#[tokio::test]
async fn python_2026_approved_in_the_form_runs_once() {
    let gate = gate().await;
    let called = run(gate.python("auto", 50, "approve")).await;
    assert_eq!(called.protocol(), "2026-07-28", "{}", called.0);
    assert!(called.listed(), "{}", called.0);
    assert_form(&called);
    assert!(!called.is_error(), "{}", called.0);
    assert!(called.text().contains(SENT), "{}", called.0);
    assert_eq!(
        gate.ran.bodies(),
        vec![json!({"amount": 50, "to": "Hanako"})]
    );
    let approved = gate.decisions("approved").await;
    assert_eq!(approved.len(), 1, "{approved:?}");
    assert_client(&approved, "toolgate-test-python 2.3.0");
}

#[tokio::test]
async fn python_2026_denied_or_cancelled_in_the_form_runs_nothing() {
    let gate = gate().await;
    for (amount, answer) in [(51, "deny"), (52, "decline"), (53, "cancel")] {
        let called = run(gate.python("auto", amount, answer)).await;
        assert_form(&called);
        assert!(called.is_error(), "{answer}: {}", called.0);
        if answer == "deny" {
            assert!(called.text().contains("not this one"), "{}", called.0);
        }
    }
    assert_eq!(gate.ran.bodies(), Vec::<Value>::new());
    let rejected = gate.decisions("rejected").await;
    assert_eq!(rejected.len(), 3, "{rejected:?}");
    assert_client(&rejected, "toolgate-test-python");
    assert!(gate.decisions("approved").await.is_empty());
}

#[tokio::test]
async fn python_over_stdio_approved_runs_once_in_the_shared_store() {
    let gate = gate().await;
    let called = run(gate.python_stdio(60, "approve")).await;
    assert!(called.listed(), "{}", called.0);
    assert_form(&called);
    assert!(!called.is_error(), "{}", called.0);
    assert!(called.text().contains(SENT), "{}", called.0);
    assert_eq!(gate.ran.times(60), 1);
    // `serve` on the same store tells of the stdio client's decision.
    let approved = gate.decisions("approved").await;
    assert_eq!(approved.len(), 1, "{approved:?}");
    assert_eq!(approved[0]["principal"], "alice");
    assert_client(&approved, "toolgate-test-python");
}

#[tokio::test]
async fn python_legacy_session_approved_by_elicitation_runs_once() {
    let gate = gate().await;
    let called = run(gate.python("legacy", 70, "approve")).await;
    assert_ne!(called.protocol(), "2026-07-28", "{}", called.0);
    assert_form(&called);
    assert!(!called.is_error(), "{}", called.0);
    assert!(called.text().contains(SENT), "{}", called.0);
    assert_eq!(gate.ran.times(70), 1);
    assert_client(&gate.decisions("approved").await, "toolgate-test-python");
}

/// The open question of `transfer` of `amount` in alice's inbox: its id.
async fn open_question(gate: &Gate, amount: u64) -> String {
    wait::until_ok("the question in the inbox", || async {
        let (status, body) = gate.api("/api/confirmations", None).await;
        let listed: Value =
            serde_json::from_str(&body).map_err(|e| format!("{status} {body}: {e}"))?;
        let found = listed.as_array().and_then(|items| {
            items
                .iter()
                .find(|q| q["originalFunctionCall"]["args"]["amount"] == amount)
        });
        found
            .and_then(|q| q["id"].as_str().map(str::to_owned))
            .ok_or(body)
    })
    .await
}

#[tokio::test]
async fn python_without_elicitation_gets_the_result_once_approved_out_of_band() {
    let gate = gate().await;
    let client = start(gate.python("auto", 80, "none"));
    let id = open_question(&gate, 80).await;
    assert_eq!(gate.ran.times(80), 0, "nothing runs before the decision");
    let (status, body) = gate
        .api(
            &format!("/api/confirmations/{id}"),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let called = finish(client).await;
    assert!(called.asked().is_empty(), "{}", called.0);
    assert!(!called.is_error(), "{}", called.0);
    assert!(called.text().contains(SENT), "{}", called.0);
    assert_eq!(gate.ran.times(80), 1, "the retries ran it no more");
}

#[tokio::test]
async fn a_call_denied_out_of_band_or_never_answered_never_runs() {
    let gate = gate().await;
    // Denied through the API while the 2026-07-28 client retries.
    let client = start(gate.python("auto", 90, "none"));
    let id = open_question(&gate, 90).await;
    let (status, body) = gate
        .api(
            &format!("/api/confirmations/{id}"),
            Some(json!({"approved": false, "reason": "no"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let called = finish(client).await;
    assert!(called.is_error(), "{}", called.0);

    // Never answered: the 2026-07-28 client gives up retrying...
    let mut retries = gate.python("auto", 91, "none");
    retries.args(["--rounds", "3"]);
    let gave_up = run(retries).await.0;
    assert!(
        gave_up["error"]
            .as_str()
            .unwrap_or("")
            .contains("InputRequiredRoundsExceeded"),
        "{gave_up}"
    );
    // ...and the older session is held, then told which question waits.
    let held = run(gate.python("legacy", 92, "none")).await;
    assert!(held.is_error(), "{}", held.0);
    let question = open_question(&gate, 92).await;
    assert!(held.text().contains(&question), "{}", held.0);

    assert_eq!(gate.ran.bodies(), Vec::<Value>::new());
}

#[tokio::test]
async fn typescript_session_approved_runs_once_and_denied_runs_nothing() {
    let gate = gate().await;
    let approved = run(gate.typescript(100, "approve")).await;
    assert_eq!(approved.protocol(), "2025-11-25", "{}", approved.0);
    assert!(approved.listed(), "{}", approved.0);
    assert_form(&approved);
    assert!(!approved.is_error(), "{}", approved.0);
    assert!(approved.text().contains(SENT), "{}", approved.0);

    let denied = run(gate.typescript(101, "deny")).await;
    assert_form(&denied);
    assert!(denied.is_error(), "{}", denied.0);
    assert!(denied.text().contains("not this one"), "{}", denied.0);

    assert_eq!(gate.ran.times(100), 1);
    assert_eq!(gate.ran.times(101), 0);
    assert_client(
        &gate.decisions("approved").await,
        "toolgate-test-typescript 1.32.2",
    );
    assert_client(
        &gate.decisions("rejected").await,
        "toolgate-test-typescript",
    );
}
