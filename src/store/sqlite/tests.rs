use super::super::conformance::ME;
use super::super::{Claim, Status, Store, conformance};
use super::confirmations::OPEN_ALL;
use super::*;
use crate::store::RecordKind;
use rusqlite::params;

fn file() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("nested/toolgate.sqlite3");
    (dir, path)
}

/// A file of its own in a folder of its own (kept as long as the case),
/// for each case of the suite.
async fn fresh() -> (tempfile::TempDir, Store) {
    let (dir, path) = file();
    (dir, Store::sqlite(&path).unwrap_or_else(|e| panic!("{e}")))
}

conformance::suite!(fresh, purges);

/// Two stores on one file (`serve` and `toolgate mcp`, say) append to one chain.
#[tokio::test]
async fn chains_appends_made_at_once() {
    let (_dir, path) = file();
    let open = || Store::sqlite(&path).unwrap_or_else(|e| panic!("{e}"));
    conformance::chains_appends_made_at_once(open(), vec![open(), open()]).await;
}

/// Writes stay in the log until a checkpoint moves them into the file:
/// none runs inside a write (below the bound; 1,000 inserts write more
/// than SQLite's default of 1,000 pages), and `checkpoint` does.
#[tokio::test]
async fn a_checkpoint_moves_the_log_into_the_file() {
    let (_dir, path) = file();
    let store = Store::sqlite(&path).unwrap_or_else(|e| panic!("{e}"));
    let len = || std::fs::metadata(&path).map_or(0, |m| m.len());
    let before = len();
    for i in 0..1_000 {
        store
            .insert(conformance::issued(&format!("c{i}")))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(len(), before, "no write checkpoints");
    store.checkpoint().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(len() > before, "{} bytes after the checkpoint", len());
    assert!(matches!(store.get("c999").await, Ok(Some(_))));
}

/// The inbox reads open rows through their index, never the table.
#[test]
fn open_questions_are_read_through_their_index() {
    let (_dir, path) = file();
    let store = SqliteStore::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let conn = store.conn.lock().unwrap_or_else(PoisonError::into_inner);
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {OPEN_ALL}"))
        .and_then(|mut s| {
            s.query_map(params![0, "", 0, 10, "alice"], |row| {
                row.get::<_, String>(3)
            })?
            .collect()
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        plan.iter()
            .any(|step| step.contains("USING INDEX confirmations_open (")),
        "{plan:?}"
    );
    assert!(
        !plan.iter().any(|step| step.contains("TEMP B-TREE")),
        "sorted by the index, not afterwards: {plan:?}"
    );
}

/// Rows written before records had a kind get one from their ids:
/// hand-offs (`handoff-…`) and taken client results (`…/result`) ask
/// nobody; every other row is a question.
#[tokio::test]
async fn old_rows_get_their_kind_from_their_ids() {
    let (_dir, path) = file();
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut conn = Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
    Migrations::from_slice(&MIGRATIONS[..6])
        .to_latest(&mut conn)
        .unwrap_or_else(|e| panic!("{e}"));
    for id in ["c-1", "handoff-7", "handoff-7/result"] {
        conn.execute(
            "INSERT INTO confirmations (id, chat_id, principal, call_id, tool_name, args, hint, protocol, issued_at_ms, expires_at_ms)
             VALUES (?1, 'chat', 'anonymous', 'call-1', 't', '{}', '', 'adk', 0, 10)",
            [id],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    drop(conn);
    let store = Store::sqlite(&path).unwrap_or_else(|e| panic!("{e}"));
    for (id, kind) in [
        ("c-1", RecordKind::Question),
        ("handoff-7", RecordKind::HandOff),
        ("handoff-7/result", RecordKind::ClientResult),
    ] {
        let got = store.get(id).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.map(|i| i.kind), Some(kind), "{id}");
    }
}

#[tokio::test]
async fn everything_survives_reopening() {
    let (_dir, path) = file();
    let store = Store::sqlite(&path).unwrap_or_else(|e| panic!("{e}"));
    for id in ["pending", "claimed", "done"] {
        store
            .insert(conformance::issued(id))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(store.claim("claimed", 7, ME).await.ok(), Some(Claim::Won));
    assert_eq!(store.claim("done", 7, ME).await.ok(), Some(Claim::Won));
    store
        .finish(
            "done",
            Outcome::Denied {
                reason: Some("no".into()),
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let window = conformance::grant("w1", None, 1_000, Some(61_000));
    store
        .remember(window.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    drop(store);

    let store = Store::sqlite(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        store.get("pending").await.ok().flatten(),
        Some(conformance::issued("pending"))
    );
    assert_eq!(
        store.status("pending").await.ok().flatten(),
        Some(Status::Pending)
    );
    assert_eq!(
        store.status("claimed").await.ok().flatten(),
        Some(Status::Claimed { since_ms: 7 })
    );
    assert_eq!(
        store.claim("claimed", 8, "instance-next").await.ok(),
        Some(Claim::InFlight {
            since_ms: 7,
            orphaned: true
        }),
        "the claim of the process before is orphaned"
    );
    assert_eq!(
        store.list_remembered("alice", 1_000).await.ok(),
        Some(vec![window])
    );
    assert_eq!(
        store.claim("done", 8, ME).await.ok(),
        Some(Claim::Done(Outcome::Denied {
            reason: Some("no".into())
        }))
    );
}
