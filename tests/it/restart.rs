//! Nothing a user was asked is lost when the server stops: a confirmation
//! issued before a SIGKILL is answered after the restart and runs once; the
//! ledger outlives the next restart too. A call claimed by a process that
//! died is reported as "outcome unknown" and never run again.

use crate::common;

use std::time::Duration;

use common::{Binary, approval, transaction};
use serde_json::json;
use toolgate::confirm::{Answer, Answered, Decision, Gate, OUTCOME_UNKNOWN};
use toolgate::identity::{Known, Source};
use toolgate::ids::{Clock, Ids};
use toolgate::protocol::ConfirmationProtocol;
use toolgate::store::{Claim, Store};
use toolgate::tools::Registry;

#[tokio::test]
async fn a_confirmation_survives_sigkill_and_runs_once() -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let config = common::config_file(
        state.path(),
        format!(
            "store:\n  kind: sqlite\n  path: {}\n",
            state.path().join("db.sqlite3").display()
        ),
    );
    let start = || Binary::serve_with(&["--config", &config]);

    let server = start();
    let first = server.chat(&json!({
        "id": "chat-restart",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    }))
    .await;
    let approve = approval("chat-restart", &first);
    drop(server); // SIGKILL

    let server = start();
    let paid = server.chat(&approve).await;
    let tx = transaction(&paid);
    assert!(
        tx.as_deref().is_some_and(|t| t.starts_with("tx-")),
        "{}",
        paid.body
    );
    let replay = server.chat(&approve).await;
    assert_eq!(
        transaction(&replay),
        tx,
        "a replay reports the recorded payment"
    );
    drop(server);

    let server = start();
    let replay = server.chat(&approve).await;
    assert_eq!(
        transaction(&replay),
        tx,
        "the ledger survives a restart too"
    );
    Ok(())
}

const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_claim_left_by_a_dead_process_is_outcome_unknown_at_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db.sqlite3");
    let clock = Clock::manual(1_000_000);
    let gate = |store: Store| {
        Gate::new(
            Registry::with_builtins(100.0),
            store,
            clock.clone(),
            Ids::sequential(),
            Duration::from_secs(3600),
            TOOL_TIMEOUT,
        )
    };
    let (scope, call) = common::payment_to_bo("anonymous");

    // The first process issues the confirmation, wins the claim, and dies.
    let store = Store::sqlite(&path)?;
    let issued = match gate(store.clone())
        .check_new(&scope, call.clone(), ConfirmationProtocol::Adk)
        .await
    {
        Ok(toolgate::confirm::NewCall::Ask(issued)) => issued,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        store
            .claim(&issued.id, clock.now_ms(), "instance-before")
            .await
            .ok(),
        Some(Claim::Won)
    );
    drop(store);

    // At once, the user answers again on a new process.
    let gate = gate(Store::sqlite(&path)?);
    let answer = Answer {
        confirmation_id: issued.id,
        original: Some(call),
        decision: Decision::Approve {
            payload: None,
            remember: None,
            approve_next: None,
            edited: None,
            grant: None,
        },
        protocol: ConfirmationProtocol::Adk,
        seal: None,
    };
    // Well before the 30 s tool timeout the old rule waited for.
    let answered = tokio::time::timeout(
        TOOL_TIMEOUT / 2,
        gate.check_answer(&scope, &Known::by(Source::Key), &answer),
    )
    .await
    .unwrap_or_else(|_| panic!("the answer waited for a claim of a dead process"));
    match answered {
        Ok(Answered::Rejected(why)) => assert_eq!(why, OUTCOME_UNKNOWN),
        Ok(Answered::Running { .. }) => panic!("ran again"),
        Ok(Answered::Client { .. }) => panic!("handed to a client"),
        Ok(Answered::Recorded { outcome, .. }) => panic!("recorded {outcome:?}"),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

#[tokio::test]
async fn a_remembered_approval_survives_sigkill() -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let config = common::config_file(
        state.path(),
        format!(
            "store:\n  path: {}\n",
            state.path().join("db.sqlite3").display()
        ),
    );
    let start = || Binary::serve_with(&["--config", &config]);
    let ask = |text: &str| json!({"id": "chat-restart", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]});

    let server = start();
    let first = server.chat(&ask("Send 50 USD to Hanako")).await;
    let mut remember = approval("chat-restart", &first);
    remember["messages"][1]["parts"][1]["output"] =
        json!({"confirmed": true, "remember": "session"});
    assert!(transaction(&server.chat(&remember).await).is_some());
    drop(server); // SIGKILL

    let server = start();
    let next = server.chat(&ask("Send 5 USD to Carol")).await;
    let asked = next
        .of_type("tool-input-available")
        .iter()
        .any(|c| c["toolName"] == "adk_request_confirmation");
    assert!(!asked, "the remembered approval still holds: {}", next.body);
    assert!(transaction(&next).is_some(), "{}", next.body);
    Ok(())
}

/// What the server stores only its account may read: the folders it
/// creates for the database are 0700, the database and its `-wal` and
/// `-shm` 0600 (they were 0755 and 0644 under the usual umask of 022).
#[cfg(unix)]
#[tokio::test]
async fn the_database_and_its_folder_are_private() -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let state = tempfile::tempdir()?;
    let data = state.path().join("data");
    let db = data.join("nested").join("db.sqlite3");
    let config = common::config_file(
        state.path(),
        format!("store:\n  kind: sqlite\n  path: {}\n", db.display()),
    );
    let server = Binary::serve_with(&["--config", &config]);
    // A turn that asks, so the log has been written.
    let first = server
        .chat(&json!({
            "id": "chat-modes",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
        }))
        .await;
    assert!(
        first.body.contains("tool-input-available"),
        "{}",
        first.body
    );
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let wal = db.with_extension("sqlite3-wal");
    let shm = db.with_extension("sqlite3-shm");
    let modes: Vec<String> = [&data, &data.join("nested")]
        .into_iter()
        .chain([&db, &wal, &shm])
        .map(|p| format!("{:o}", mode(p)))
        .collect();
    assert_eq!(modes, ["700", "700", "600", "600", "600"]);
    drop(server);
    Ok(())
}
