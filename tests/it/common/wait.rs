//! Waiting for something to happen instead of sleeping for a guessed time:
//! a passing test waits only as long as the condition takes, a failing one
//! says what never happened.

use std::future::Future;
use std::time::Duration;

/// How long a condition may take before the test fails: generous, for a
/// loaded machine (a condition that holds is seen within [`POLL`]).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often a condition is looked at.
pub const POLL: Duration = Duration::from_millis(10);

/// Polls `probe` until it gives `Ok`, and returns that value; fails the
/// test after [`PATIENCE`], naming `what` was awaited and the last `Err`
/// (what was seen instead).
pub async fn until_ok<T, F>(what: &str, mut probe: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(seen) => assert!(
                tokio::time::Instant::now() < deadline,
                "waited {PATIENCE:?} for {what}, in vain; last seen: {seen}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `ready` until it holds; fails the test after [`PATIENCE`], naming
/// `what` was awaited.
pub async fn until<F>(what: &str, mut ready: impl FnMut() -> F)
where
    F: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !ready().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}, in vain"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`until`] for a condition that needs no `await` (an atomic, a flag).
pub async fn until_true(what: &str, mut ready: impl FnMut() -> bool) {
    until(what, || std::future::ready(ready())).await;
}

/// [`until`] for a test without a runtime: blocks the thread between looks.
pub fn until_blocking(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}, in vain"
        );
        std::thread::sleep(POLL);
    }
}
