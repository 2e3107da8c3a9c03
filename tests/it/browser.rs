//! The React demo (`frontend-demo/`) in a real headless Chromium against
//! the real binary, a page on another origin calling a second one
//! (started by `e2e/cross-origin.test.mjs` with `--cors-origin`), and two
//! users, a clerk and an approver, on a third (started by
//! `e2e/inbox.test.mjs` with a principal header), and the demo's workflow
//! mode through a proxy that cuts its held turn (`e2e/workflow.test.mjs`):
//! the flows of
//! `frontend-demo/e2e/`. Compiled with the
//! `browser` feature; needs Node.js, `npm ci --prefix frontend-demo` and
//! Debian's `chromium` (scripts/test installs them), and fails without them.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::Binary;

/// The flows of `frontend-demo/e2e/`: 12 in `demo.test.mjs`, 3 in
/// `cross-origin.test.mjs`, 1 in `inbox.test.mjs`, 2 in `workflow.test.mjs`.
const FLOWS: usize = 18;

#[test]
fn the_demo_works_in_a_real_browser() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("frontend-demo");
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "the demo's packages are not installed: run `npm ci --prefix frontend-demo` (scripts/test does)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "no Chromium at {chromium}: install Debian's `chromium` (scripts/test does) or set CHROMIUM"
    );
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser/toolgate.yaml");
    let server = Binary::serve_with(&["--config", &config.display().to_string()]);
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("frontend-demo");
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "e2e/"])
        .current_dir(&dir)
        .env("TOOLGATE_URL", &server.url)
        .env("TOOLGATE_BIN", env!("CARGO_BIN_EXE_toolgate"))
        .env("TOOLGATE_E2E_ARTIFACTS", &artifacts)
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the browser tests failed:\n{report}"
    );
    // Every flow ran: a `describe`-less file reports one line per test.
    let passed = report
        .lines()
        .find_map(|l| l.trim().strip_prefix("ℹ pass "))
        .and_then(|n| n.trim().parse::<usize>().ok());
    assert_eq!(passed, Some(FLOWS), "{report}");
    // Which Chromium ran, for a failure that only one version shows.
    let browser = report
        .lines()
        .find(|l| l.starts_with("browser: Chromium "))
        .unwrap_or_else(|| panic!("the browser tests did not say which Chromium ran:\n{report}"));
    println!("{browser}; screenshots in {}", artifacts.display());
}
