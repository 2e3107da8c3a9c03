//! The real AI SDK client against the real binary, for every client version
//! toolgate claims: each release validates every chunk with its own
//! `uiMessageChunkSchema` through `readUIMessageStream`, and the approve and
//! deny flows are asserted on its final messages. Compiled with the
//! `conformance` feature; needs Node.js and `npm ci --prefix conformance`
//! (scripts/test does both), and fails without them.

use crate::common;
use crate::common::assert_contains;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::upstream::{Answer, Upstream, sse_fixture};
use common::{Binary, assert_none};

/// `(npm package alias, confirmation protocol)`: each an installed `ai`
/// release (or pre-release: 6.0.0-beta.148, which frontends pin).
const RUNS: [(&str, &str); 12] = [
    ("ai", "adk"),
    ("ai", "ai-sdk"),
    ("ai-7.0.0", "adk"),
    ("ai-7.0.0", "ai-sdk"),
    ("ai-6.0.326", "adk"),
    ("ai-6.0.326", "ai-sdk"),
    ("ai-6.0.0", "adk"),
    ("ai-6.0.0", "ai-sdk"),
    ("ai-6.0.0-beta.148", "adk"),
    ("ai-6.0.0-beta.148", "ai-sdk"),
    ("ai-5.0.216", "adk"),
    ("ai-5.0.60", "adk"),
];

/// The client-side tools the `client-*` flows use: one allowed, one that
/// asks, one the policy denies.
const CLIENT_TOOLS: &str = "tools:
  client:
    - name: get_location
      description: Where the user is, from the browser.
    - name: pick_file
      description: A file the user picks.
      needsConfirmation: true
    - name: read_clipboard
      description: What the user copied.
toolConfirmation:
  signingKeys: [test-signing-key-of-at-least-32-bytes]
  toolPolicies:
    alwaysDeny: [internal--read_clipboard]
";

/// `conformance/`, with its npm packages installed (or the test fails).
pub(crate) fn installed() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    assert!(
        dir.join("node_modules/ai").is_dir(),
        "the AI SDK client is not installed: run `npm ci --prefix conformance` (scripts/test does)"
    );
    dir
}

/// Fails the test with the report of every run that did not pass.
pub(crate) fn all_passed(runs: impl Iterator<Item = (bool, String)>) {
    let failures: Vec<String> = runs
        .filter(|(passed, _)| !passed)
        .map(|(_, report)| report)
        .collect();
    assert_none("conformance failed", &failures);
}

/// Runs chat.mjs with `client` and `protocol`; `flows` may carry more
/// options (`--transport ws`). Whether every flow passed, and the report.
pub(crate) fn run(
    dir: &Path,
    url: &str,
    client: &str,
    protocol: &str,
    flows: &[&str],
) -> (bool, String) {
    let output = Command::new("node")
        .arg(dir.join("chat.mjs"))
        .args([url, "--client", client, "--protocol", protocol])
        .args(flows)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let passed = output.status.success() && stdout.contains(" passed, 0 failed");
    (passed, format!("{client} {protocol}:\n{stdout}\n{stderr}"))
}

#[test]
fn every_claimed_client_completes_every_flow() -> anyhow::Result<()> {
    let dir = installed();
    // Its own config: the flows need a `toolConfirmation` rule.
    let state = tempfile::tempdir()?;
    let db = state.path().join("toolgate.sqlite3");
    let yaml = format!("store:\n  path: {}\n{CLIENT_TOOLS}", db.display());
    let config = common::config_file(state.path(), yaml);
    let server = Binary::serve_with(&["--config", &config]);
    all_passed(
        RUNS.iter()
            .map(|(client, protocol)| run(&dir, &server.url, client, protocol, &[])),
    );
    Ok(())
}

/// `toolConfirmation.deniedAs: output-error`: every client with native
/// approvals takes a `tool-output-error` for a part whose approval it
/// answered, and shows the denial text.
#[test]
fn a_native_denial_as_an_error_reaches_every_native_client() -> anyhow::Result<()> {
    let dir = installed();
    let state = tempfile::tempdir()?;
    let yaml = format!("store:\n  kind: memory\n{CLIENT_TOOLS}  deniedAs: output-error\n");
    let config = common::config_file(state.path(), yaml);
    let server = Binary::serve_with(&["--config", &config]);
    let flows = [
        "--denied-as",
        "output-error",
        "native-deny",
        "native-two",
        "client-deny",
    ];
    all_passed(
        RUNS.iter()
            .filter(|(_, protocol)| *protocol == "ai-sdk")
            .map(|(client, protocol)| run(&dir, &server.url, client, protocol, &flows)),
    );
    Ok(())
}

#[test]
fn a_strict_old_client_fails_when_the_server_is_told_the_wrong_version() {
    // Proves that fitting matters: ai 5.0.60 rejects `finishReason`, which a
    // 7.x client gets.
    let dir = installed();
    let server = Binary::serve(&[]);
    let output = Command::new("node")
        .arg(dir.join("chat.mjs"))
        .args([
            &server.url,
            "--client",
            "ai-5.0.60",
            "--claim-version",
            "7.0.173",
            "text",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert_contains(&stdout, "0 passed, 1 failed");
}

/// What the real providers add to the stream (reasoning with a signature,
/// calls with a thought signature, minted ids) passes every client's schema
/// and state machine, with the provider picked by the command-line flags.
#[tokio::test(flavor = "multi_thread")]
async fn provider_streams_pass_every_claimed_client() -> anyhow::Result<()> {
    let dir = installed();
    let answers = |provider: &str, names: &[&str]| -> Vec<Answer> {
        names
            .iter()
            .map(|name| Answer::sse(sse_fixture(provider, name)))
            .collect()
    };
    let cases = [
        ("openai", answers("openai", &["reasoning"])),
        ("anthropic", answers("anthropic", &["thinking"])),
        ("gemini", answers("gemini", &["tool_call", "after_tool"])),
    ];
    let mut failures = Vec::new();
    for (provider, answers) in cases {
        let upstream = Upstream::cycle(answers).await;
        let server = Binary::serve(&[
            "--provider",
            provider,
            "--model",
            "test-model",
            "--base-url",
            &upstream.url,
        ]);
        let clients = RUNS.iter().filter(|(_, protocol)| *protocol == "adk");
        for (client, _) in clients {
            let (dir, url, client) = (dir.clone(), server.url.clone(), client.to_string());
            let (passed, report) =
                tokio::task::spawn_blocking(move || run(&dir, &url, &client, "adk", &["text"]))
                    .await?;
            if !passed {
                failures.push(format!("{provider}: {report}"));
            }
        }
        assert!(
            !upstream.received().is_empty(),
            "{provider}: the model was never asked"
        );
    }
    assert_none("conformance failed", &failures);
    Ok(())
}

/// The client's own `WebSocketChatTransport` (ai 7.x) on `/live`: every
/// flow of both protocols, and an abort, against a model slow enough to be
/// stopped mid-answer.
#[test]
fn the_websocket_transport_completes_every_flow() -> anyhow::Result<()> {
    let dir = installed();
    let state = tempfile::tempdir()?;
    let config = common::config_file(
        state.path(),
        format!("model:\n  deltaDelayMs: 2\nstore:\n  kind: memory\n{CLIENT_TOOLS}"),
    );
    let server = Binary::serve_with(&["--config", &config]);
    all_passed(
        ["adk", "ai-sdk"]
            .iter()
            .map(|protocol| run(&dir, &server.url, "ai", protocol, &["--transport", "ws"])),
    );
    Ok(())
}

/// `@ai-sdk/workflow`'s `WorkflowChatTransport` (`conformance/workflow.mjs`),
/// unmodified, through a proxy that cuts a held turn's POST after its
/// question: it reconnects from the chunk it had, the approval completes
/// on the resumed stream, and it sees every chunk of the turn once.
#[test]
fn workflow_chat_transport_reads_a_cut_turn_on_from_where_it_was() {
    let dir = installed();
    let server = Binary::serve(&[]);
    let output = Command::new("node")
        .arg(dir.join("workflow.mjs"))
        .arg(&server.url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("workflow: passed"),
        "{stdout}\n{stderr}"
    );
}
