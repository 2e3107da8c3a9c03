//! A client that hangs up right after its approval is sent loses nothing:
//! the approved call runs once, its `approved` event is written, and the
//! same answer sent again reports the recorded outcome at once.

use crate::common;

use common::{Server, approval, transaction, user_says};
use futures::StreamExt;
use serde_json::Value;
use toolgate::Config;
use toolgate::store::Store;

const CHATS: usize = 50;

#[tokio::test]
async fn fifty_approvals_whose_connection_closes_after_the_first_chunk_all_run_once()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // SQLite: its claim runs on the blocking pool, where a dropped request
    // cannot stop it, so a hang-up at the claim is what this test provokes.
    let store = Store::sqlite(&dir.path().join("db.sqlite3"))?;
    let server = Server::with(Config::default(), |app| app.with_store(store)).await;
    let chat = |i: usize| format!("chat-{i}");

    let asks: Vec<Value> = (0..CHATS)
        .map(|i| user_says(&chat(i), "Send 50 USD to Hanako"))
        .collect();
    let asked = futures::future::join_all(asks.iter().map(|ask| server.chat(ask))).await;
    let approvals: Vec<Value> = asked
        .iter()
        .enumerate()
        .map(|(i, first)| approval(&chat(i), first))
        .collect();

    // Every approval at once; each connection closes after its first chunk.
    futures::future::join_all(approvals.iter().map(|body| async {
        let mut stream = Box::pin(server.open(body).await);
        assert!(stream.next().await.is_some(), "no first chunk");
    }))
    .await;

    // The same answers again: each reports the one payment its approval made.
    let replays = futures::future::join_all(approvals.iter().map(|body| server.chat(body))).await;
    for replay in &replays {
        assert!(transaction(replay).is_some(), "{}", replay.body);
    }
    assert_eq!(server.payments(), CHATS, "each approval paid exactly once");

    let audit = server.get("/api/audit").await;
    let approved = audit
        .json_lines()
        .iter()
        .filter(|event| event["decision"] == "approved")
        .count();
    assert_eq!(approved, CHATS, "one `approved` event per approval");
    Ok(())
}
