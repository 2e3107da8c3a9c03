//! The real AI SDK client (`ai`, pinned in conformance/package.json) against
//! the real binary: every chunk validated with `uiMessageChunkSchema` through
//! `readUIMessageStream`, approve and deny flows asserted on the final
//! messages. Needs `npm ci --prefix conformance` (scripts/test does it).

mod common;

use std::path::Path;
use std::process::Command;

use common::Binary;

#[test]
fn the_ai_sdk_client_completes_every_flow() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    assert!(
        dir.join("node_modules/ai").is_dir(),
        "the AI SDK client is not installed: run `npm ci --prefix conformance` (scripts/test does)"
    );
    let server = Binary::serve(&[]);
    let output = Command::new("node")
        .arg(dir.join("chat.mjs"))
        .arg(&server.url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "conformance failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("5 passed, 0 failed"), "{stdout}");
}
