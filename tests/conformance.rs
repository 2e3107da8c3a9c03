//! The real AI SDK client against the real binary, for every client version
//! toolgate claims: each release validates every chunk with its own
//! `uiMessageChunkSchema` through `readUIMessageStream`, and the approve and
//! deny flows are asserted on its final messages. Needs
//! `npm ci --prefix conformance` (scripts/test does it).

mod common;

use std::path::Path;
use std::process::Command;

use common::Binary;

/// `(npm package alias, confirmation protocol)`: each an installed `ai` release.
const RUNS: [(&str, &str); 10] = [
    ("ai", "adk"),
    ("ai", "ai-sdk"),
    ("ai-7.0.0", "adk"),
    ("ai-7.0.0", "ai-sdk"),
    ("ai-6.0.326", "adk"),
    ("ai-6.0.326", "ai-sdk"),
    ("ai-6.0.0", "adk"),
    ("ai-6.0.0", "ai-sdk"),
    ("ai-5.0.216", "adk"),
    ("ai-5.0.60", "adk"),
];

fn run(dir: &Path, url: &str, client: &str, protocol: &str) -> (bool, String) {
    let output = Command::new("node")
        .arg(dir.join("chat.mjs"))
        .args([url, "--client", client, "--protocol", protocol])
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let passed = output.status.success() && stdout.contains(" passed, 0 failed");
    (passed, format!("{client} {protocol}:\n{stdout}\n{stderr}"))
}

#[test]
fn every_claimed_client_completes_every_flow() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    assert!(
        dir.join("node_modules/ai").is_dir(),
        "the AI SDK client is not installed: run `npm ci --prefix conformance` (scripts/test does)"
    );
    let server = Binary::serve(&[]);
    let failures: Vec<String> = RUNS
        .iter()
        .map(|(client, protocol)| run(&dir, &server.url, client, protocol))
        .filter(|(passed, _)| !passed)
        .map(|(_, report)| report)
        .collect();
    assert!(
        failures.is_empty(),
        "conformance failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_strict_old_client_fails_when_the_server_is_told_the_wrong_version() {
    // Proves that fitting matters: ai 5.0.60 rejects `finishReason`, which a
    // 7.x client gets.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
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
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
}
