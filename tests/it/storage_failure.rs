//! A store that fails after start: every API route answers 503 with
//! exactly `{"error":"storage unavailable"}`, a turn's stream ends with an
//! `error` chunk, and no body or chunk repeats the driver's words (SQL,
//! table names, the file's path).
//!
//! The store is SQLite in a temporary folder; the test drops its tables
//! through a second connection, so every query fails with "no such table"
//! — deterministic, and the kind of text a client must never read.

use crate::common;
use crate::common::Must;

use common::{Server, approval, user_says};

const UNAVAILABLE: &str = r#"{"error":"storage unavailable"}"#;
/// The `error` chunk's text once a stream has started: the gate's own
/// fixed words for a failed store.
const IN_STREAM: &str = "the confirmation store is unavailable; try again";

/// Words that would mean a driver's error, or the store's path, reached a client.
fn assert_no_internals(text: &str, path: &str) {
    let lower = text.to_lowercase();
    for word in [
        "no such table",
        "sqlite",
        "sql",
        "select",
        "insert",
        "confirmations (",
        "store failed",
        "database",
        "redis",
    ] {
        assert!(!lower.contains(word), "`{word}` reached a client: {text}");
    }
    assert!(
        !text.contains(path),
        "the store's path reached a client: {text}"
    );
}

/// Breaks the store under the running server: every table is gone.
fn break_store(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).must();
    conn.execute_batch(
        "DROP TABLE confirmations; DROP TABLE remembered; DROP TABLE budgets; DROP TABLE audit;",
    )
    .must();
}

#[tokio::test]
async fn a_failing_store_is_storage_unavailable_and_nothing_more() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("toolgate.sqlite3");
    let server = Server::on_sqlite(&path).await;
    let shown = dir.path().display().to_string();

    // A question issued while the store works, answered after it broke.
    let first = server.says("chat-1", "Send 50 USD to Hanako").await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(
        first.of_type("tool-input-available").len(),
        1,
        "{}",
        first.body
    );
    let answer = approval("chat-1", &first);

    break_store(&path);

    let client = reqwest::Client::new();
    let revoke = client
        .delete(format!("{}/api/approvals/remembered-1", server.url))
        .send()
        .await?;
    let revoked = (revoke.status().as_u16(), revoke.text().await?);
    let replies = [
        ("audit", server.get("/api/audit").await),
        ("approvals", server.get("/api/approvals").await),
        (
            "open confirmations",
            server.get("/api/confirmations?chatId=chat-1").await,
        ),
        (
            "a decision",
            server
                .post("/api/confirmations/confirmation-1", r#"{"approved":true}"#)
                .await,
        ),
    ];
    for (route, reply) in replies {
        assert_eq!(reply.status, 503, "{route}: {}", reply.body);
        assert_eq!(reply.body, UNAVAILABLE, "{route}");
    }
    assert_eq!(revoked, (503, UNAVAILABLE.to_owned()), "revoking");

    // Once a stream has started, the failure is an `error` chunk.
    for (what, body) in [
        ("a new turn", user_says("chat-2", "Send 50 USD to Hanako")),
        ("an approval", answer),
    ] {
        let reply = server.chat(&body).await;
        assert_eq!(reply.status, 200, "{what}: {}", reply.body);
        let errors = reply.of_type("error");
        assert!(!errors.is_empty(), "{what}: no error chunk: {}", reply.body);
        for error in &errors {
            assert_eq!(error["errorText"], IN_STREAM, "{what}");
        }
        assert_no_internals(&reply.body, &shown);
        assert_eq!(server.payments(), 0, "{what}: a payment ran");
    }
    Ok(())
}
