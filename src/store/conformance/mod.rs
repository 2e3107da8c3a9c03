//! The suite every backend passes, run against each with one line:
//! `conformance::suite!(fresh, purges);` in its tests (see [`suite`]).

mod chain;
mod grants;
mod listing;

use serde_json::json;

pub use chain::{chains_appends_made_at_once, chains_its_audit_log};
pub use grants::keeps_narrowed_grants;
pub use listing::{
    keeps_each_records_kind, lists_open_confirmations, lists_open_confirmations_everywhere,
    lists_unanswered_expired_until_decided,
};

use super::*;
use crate::call::{Fingerprint, ToolCall};
use crate::protocol::ConfirmationProtocol;

/// The whole suite against one backend: a test per case, each on a store
/// of its own that `$fresh().await` makes, as `(keep, store)` (`keep`
/// lives as long as the case: a temporary folder, say). `purges`: the
/// backend forgets what expired when asked to (Redis expires records by
/// itself, so it runs the suite without).
macro_rules! suite {
    ($fresh:path) => {
        $crate::store::conformance::suite!(@cases $fresh;
            claims_exactly_once,
            knows_orphaned_claims,
            remembers_and_budgets,
            remembers_windows,
            keeps_an_audit_log,
            chains_its_audit_log,
            lists_open_confirmations,
            lists_open_confirmations_everywhere,
            lists_unanswered_expired_until_decided,
            keeps_each_records_kind,
            keeps_narrowed_grants,
        );
    };
    ($fresh:path, purges) => {
        $crate::store::conformance::suite!($fresh);
        $crate::store::conformance::suite!(@cases $fresh;
            purges_what_expired_unless_running,
            purges_lapsed_windows,
        );
    };
    (@cases $fresh:path; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (_keep, store) = $fresh().await;
                $crate::store::conformance::$case(store).await;
            }
        )+
    };
}
pub(crate) use suite;

/// What a claim of a call already running since `since_ms` finds.
pub fn in_flight(since_ms: u64, orphaned: bool) -> Option<Claim> {
    Some(Claim::InFlight { since_ms, orphaned })
}

/// Inserts `issued(id)` for each of `ids`.
pub async fn insert_all(store: &Store, ids: &[&str]) {
    for id in ids {
        store
            .insert(issued(id))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The ids of alice's approvals that last at `now_ms`, in the store's order.
async fn remembered_ids(store: &Store, now_ms: u64) -> Vec<String> {
    store
        .list_remembered("alice", now_ms)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// The instance the suite claims as.
pub const ME: &str = "instance-me";

pub fn issued(id: &str) -> Issued {
    Issued {
        id: id.into(),
        chat_id: "chat".into(),
        principal: "anonymous".into(),
        call: ToolCall {
            id: "call-1".into(),
            name: "process_payment".into(),
            args: json!({"amount": 1}),
        },
        hint: "ok?".into(),
        protocol: ConfirmationProtocol::Adk,
        issued_at_ms: 0,
        expires_at_ms: 10,
        kind: RecordKind::Question,
        // Kept as given: every case reads it back.
        fingerprint: Some(Fingerprint {
            definition: "d".repeat(64),
            call: "c".repeat(64),
        }),
    }
}

pub async fn claims_exactly_once(store: Store) {
    store
        .insert(issued("a"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        store.insert(issued("a")).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(store.get("a").await.ok().flatten(), Some(issued("a")));
    assert_eq!(store.get("b").await.ok().flatten(), None);
    assert_eq!(store.claim("a", 5, ME).await.ok(), Some(Claim::Won));
    assert_eq!(store.claim("a", 5, ME).await.ok(), in_flight(5, false));
    let outcome = Outcome::Output {
        output: json!(1),
        ran_with: None,
        responded: false,
    };
    // A test's waiter, awaited below.
    #[allow(clippy::disallowed_methods)]
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .wait_outcome("a", Duration::from_secs(5))
                .await
                .ok()
                .flatten()
        })
    };
    store
        .finish("a", outcome.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(waiter.await.ok().flatten(), Some(outcome.clone()));
    assert_eq!(
        store.claim("a", 5, ME).await.ok(),
        Some(Claim::Done(outcome))
    );
    assert!(matches!(
        store
            .finish(
                "b",
                Outcome::Error {
                    message: "x".into(),
                    ran_with: None,
                }
            )
            .await,
        Err(StoreError::NotClaimed(_))
    ));
    assert_eq!(
        store
            .wait_outcome("b", Duration::from_millis(10))
            .await
            .ok()
            .flatten(),
        None
    );
    assert_eq!(
        store.status("a").await.ok().flatten(),
        Some(Status::Done(Outcome::Output {
            output: json!(1),
            ran_with: None,
            responded: false
        }))
    );
    assert_eq!(store.status("b").await.ok().flatten(), None);
}

/// A claim held by this instance is alive (its call runs here); one held
/// by an instance that is gone is orphaned, at once.
pub async fn knows_orphaned_claims(store: Store) {
    insert_all(&store, &["mine", "theirs"]).await;
    store.heartbeat(ME).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(store.claim("mine", 5, ME).await.ok(), Some(Claim::Won));
    assert_eq!(
        store.claim("mine", 6, ME).await.ok(),
        in_flight(5, false),
        "this instance's own claim is running here"
    );
    // Claimed by an instance that never beat (or crashed): orphaned for everyone.
    assert_eq!(
        store.claim("theirs", 5, "instance-gone").await.ok(),
        Some(Claim::Won)
    );
    assert_eq!(store.claim("theirs", 6, ME).await.ok(), in_flight(5, true));
    // Its outcome, if one ever comes, still counts.
    let outcome = Outcome::Denied { reason: None };
    store
        .finish("theirs", outcome.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        store.claim("theirs", 7, ME).await.ok(),
        Some(Claim::Done(outcome))
    );
}

/// `issued()` expires at 10 ms.
pub async fn purges_what_expired_unless_running(store: Store) {
    insert_all(&store, &["pending", "running", "done"]).await;
    for id in ["running", "done"] {
        assert_eq!(store.claim(id, 5, ME).await.ok(), Some(Claim::Won));
    }
    store
        .finish("done", Outcome::Denied { reason: None })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Kept for a while after expiry, so a late answer learns how it ended.
    let kept = u64::try_from(super::KEPT_AFTER_EXPIRY.as_millis()).unwrap_or(u64::MAX);
    assert_eq!(store.purge_expired(11).await.ok(), Some(0));
    assert_eq!(store.purge_expired(10 + kept).await.ok(), Some(0));
    assert_eq!(store.purge_expired(11 + kept).await.ok(), Some(2));
    assert_eq!(store.get("pending").await.ok().flatten(), None);
    assert_eq!(store.get("done").await.ok().flatten(), None);
    assert!(store.get("running").await.ok().flatten().is_some());
}

pub async fn remembers_and_budgets(store: Store) {
    let approval = |id: &str, chat: Option<&str>, tool: &str| Remembered {
        id: id.into(),
        principal: "alice".into(),
        chat_id: chat.map(str::to_owned),
        tool: tool.into(),
        created_at_ms: 1,
        expires_at_ms: None,
        // Granted before toolgate kept digests.
        definition: None,
    };
    let ok = |r: Result<(), StoreError>| r.unwrap_or_else(|e| panic!("{e}"));
    let found = |who: &'static str, chat: &'static str, tool: &'static str| {
        let store = store.clone();
        async move {
            store
                .remembered(
                    Calls {
                        principal: who,
                        chat_id: chat,
                        tool,
                    },
                    2,
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .map(|r| r.id)
        }
    };
    ok(store.remember(approval("r1", None, "internal--pay")).await);
    ok(store
        .remember(approval("r2", Some("chat"), "internal--pay"))
        .await);
    for (who, chat, tool, want) in [
        ("alice", "chat", "internal--pay", Some("r2")),
        ("alice", "other", "internal--pay", Some("r1")),
        ("bob", "chat", "internal--pay", None),
        ("alice", "chat", "internal--weather", None),
    ] {
        assert_eq!(
            found(who, chat, tool).await.as_deref(),
            want,
            "{who} {chat} {tool}"
        );
    }
    // The same scope again replaces, and keeps one entry.
    ok(store
        .remember(approval("r3", Some("chat"), "internal--pay"))
        .await);
    let mut ids = remembered_ids(&store, 2).await;
    ids.sort();
    assert_eq!(ids, ["r1", "r3"]);
    assert_eq!(
        store.revoke("bob", "r3").await.ok(),
        Some(false),
        "another user cannot revoke it"
    );
    assert_eq!(store.revoke("alice", "r3").await.ok(), Some(true));
    assert_eq!(store.revoke("alice", "r3").await.ok(), Some(false));
    assert_eq!(
        found("alice", "chat", "internal--pay").await.as_deref(),
        Some("r1")
    );

    let take = |chat: &'static str| {
        let store = store.clone();
        async move { store.take_budget("alice", chat, "internal--pay").await.ok() }
    };
    assert_eq!(take("chat").await, Some(false));
    ok(store
        .grant_budget("alice", "chat", "internal--pay", 2)
        .await);
    for (n, (chat, want)) in [
        ("other", false),
        ("chat", true),
        ("chat", true),
        ("chat", false),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(take(chat).await, Some(want), "take {n} in {chat}");
    }
}

/// Alice's approval of `internal--pay` (`chat` `None`: every chat), made
/// at `created`, lapsing at `expires` if that is given.
pub fn grant(id: &str, chat: Option<&str>, created: u64, expires: Option<u64>) -> Remembered {
    Remembered {
        id: id.into(),
        principal: "alice".into(),
        chat_id: chat.map(str::to_owned),
        tool: "internal--pay".into(),
        created_at_ms: created,
        expires_at_ms: expires,
        definition: Some("d".repeat(64)),
    }
}

/// A window grant applies in every chat until its window ends, then is
/// neither found nor listed; it takes the place of the approval for every
/// chat (and the reverse), never of one for a single chat.
pub async fn remembers_windows(store: Store) {
    let ok = |r: Result<(), StoreError>| r.unwrap_or_else(|e| panic!("{e}"));
    let found = |chat: &'static str, now: u64| {
        let store = store.clone();
        async move {
            store
                .remembered(
                    Calls {
                        principal: "alice",
                        chat_id: chat,
                        tool: "internal--pay",
                    },
                    now,
                )
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .map(|r| r.id)
        }
    };
    let listed = |now: u64| {
        let store = store.clone();
        async move {
            store
                .list_remembered("alice", now)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };

    ok(store.remember(grant("w1", None, 1_000, Some(61_000))).await);
    assert_eq!(found("a", 1_000).await.as_deref(), Some("w1"));
    assert_eq!(
        found("b", 60_999).await.as_deref(),
        Some("w1"),
        "every chat"
    );
    assert_eq!(
        listed(60_999).await,
        [grant("w1", None, 1_000, Some(61_000))],
        "listed with its end"
    );
    assert_eq!(found("a", 61_000).await, None, "its window is over");
    assert_eq!(listed(61_000).await, []);
    assert!(
        store
            .list_remembered("bob", 1_000)
            .await
            .unwrap_or_default()
            .is_empty(),
        "alice's only"
    );

    // This chat's approval comes first; the window still covers the others.
    ok(store.remember(grant("c1", Some("a"), 2_000, None)).await);
    assert_eq!(found("a", 2_000).await.as_deref(), Some("c1"));
    assert_eq!(found("b", 2_000).await.as_deref(), Some("w1"));
    assert_eq!(found("a", 61_000).await.as_deref(), Some("c1"));

    // One for every chat replaces the window, and a window replaces it.
    ok(store.remember(grant("g1", None, 3_000, None)).await);
    assert_eq!(found("b", 61_000).await.as_deref(), Some("g1"), "no end");
    ok(store.remember(grant("w2", None, 4_000, Some(64_000))).await);
    assert_eq!(remembered_ids(&store, 4_000).await, ["c1", "w2"]);
    assert_eq!(found("b", 63_999).await.as_deref(), Some("w2"));
    assert_eq!(found("b", 64_000).await, None);
    assert_eq!(found("a", 64_000).await.as_deref(), Some("c1"));

    // Revoked while it lasts.
    ok(store.remember(grant("w3", None, 6_000, Some(66_000))).await);
    assert_eq!(store.revoke("alice", "w3").await.ok(), Some(true));
    assert_eq!(found("b", 6_000).await, None);
}

/// The purge forgets approvals whose window is over (not others), and
/// counts them.
pub async fn purges_lapsed_windows(store: Store) {
    let ok = |r: Result<(), StoreError>| r.unwrap_or_else(|e| panic!("{e}"));
    ok(store.remember(grant("w1", None, 1_000, Some(2_000))).await);
    ok(store.remember(grant("c1", Some("a"), 1_000, None)).await);
    assert_eq!(store.purge_expired(1_999).await.ok(), Some(0));
    assert_eq!(store.purge_expired(2_000).await.ok(), Some(1));
    // Listed as of before its end: forgotten, not only filtered.
    assert_eq!(remembered_ids(&store, 1_500).await, ["c1"]);
}

pub async fn keeps_an_audit_log(store: Store) {
    let event = |at_ms: u64, principal: &str, chat: &str| AuditEvent {
        at_ms,
        principal: principal.into(),
        chat_id: chat.into(),
        tool: "internal--pay".into(),
        call_id: "call-1".into(),
        args_digest: "00".into(),
        issued_args_digest: None,
        decision: AuditDecision::Asked,
        by: "mode event-based".into(),
        reason: None,
        confirmation_id: Some("adk-1".into()),
        client: None,
        fingerprint: Some("f".repeat(64)),
        approver: Some(
            crate::identity::Identity::new("alice", crate::identity::Source::Key).approver(),
        ),
    };
    for (at, who, chat) in [
        (10, "alice", "a"),
        (20, "bob", "a"),
        (30, "alice", "b"),
        (40, "alice", "a"),
    ] {
        store
            .audit(event(at, who, chat))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let times = |chat: Option<&'static str>, since: u64, most: usize| {
        let store = store.clone();
        async move {
            store
                .audit_log(AuditPage {
                    principal: "alice",
                    chat_id: chat,
                    since_ms: since,
                    limit: most,
                })
                .await
                .unwrap_or_default()
                .into_iter()
                .map(|e| e.at_ms)
                .collect::<Vec<_>>()
        }
    };
    for (chat, since, most, want) in [
        (None, 0, 100, vec![10, 30, 40]),
        (Some("a"), 0, 100, vec![10, 40]),
        (None, 30, 100, vec![30, 40]),
        (None, 0, 2, vec![10, 30]),
    ] {
        assert_eq!(
            times(chat, since, most).await,
            want,
            "{chat:?} {since} {most}"
        );
    }
    assert_eq!(
        store
            .audit_log(AuditPage {
                principal: "alice",
                chat_id: None,
                since_ms: 0,
                limit: 100,
            })
            .await
            .unwrap_or_default()[0],
        event(10, "alice", "a")
    );
    assert_eq!(store.prune_audit(30).await.ok(), Some(2));
    assert_eq!(times(None, 0, 100).await, [30, 40]);
}
