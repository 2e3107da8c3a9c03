//! The suite's cases that list: a chat's open questions, every chat's,
//! the expired ones, and each record's kind as listed.

use super::{ME, insert_all, issued};
use crate::store::{Claim, Cursor, Issued, Outcome, Page, RecordKind, Status, Store, StoreError};

pub async fn lists_open_confirmations(store: Store) {
    let with = |id: &str, chat: &str, principal: &str| Issued {
        chat_id: chat.into(),
        principal: principal.into(),
        ..issued(id)
    };
    for (id, chat, who) in [
        ("o1", "chat", "anonymous"),
        ("o2", "chat", "anonymous"),
        ("o3", "other", "anonymous"),
        ("o4", "chat", "bob"),
    ] {
        store
            .insert(with(id, chat, who))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(store.claim("o2", 5, ME).await.ok(), Some(Claim::Won));
    let ids = |v: Vec<Issued>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.open("anonymous", "chat", 5).await.unwrap_or_default()),
        ["o1"]
    );
    assert_eq!(
        ids(store.open("bob", "chat", 5).await.unwrap_or_default()),
        ["o4"]
    );
    assert!(
        store
            .open("anonymous", "chat", 11)
            .await
            .unwrap_or_default()
            .is_empty(),
        "expired at 10"
    );
}

/// Open questions across principals and chats, oldest first (ties by id),
/// paged with a cursor; taken and expired ones are not listed.
pub async fn lists_open_confirmations_everywhere(store: Store) {
    let with = |id: &str, chat: &str, principal: &str, at: u64, until: u64| Issued {
        chat_id: chat.into(),
        principal: principal.into(),
        issued_at_ms: at,
        expires_at_ms: until,
        kind: RecordKind::Question,
        ..issued(id)
    };
    for question in [
        with("e5", "chat", "anonymous", 3, 100),
        with("e2", "other", "bob", 1, 100),
        with("e1", "chat", "carol", 1, 100),
        with("e3", "chat", "anonymous", 2, 100),
        with("taken", "chat", "bob", 2, 100),
        with("decided", "chat", "bob", 2, 100),
        with("expired", "chat", "anonymous", 2, 4),
    ] {
        store
            .insert(question)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(store.claim("taken", 5, ME).await.ok(), Some(Claim::Won));
    assert_eq!(store.claim("decided", 5, ME).await.ok(), Some(Claim::Won));
    store
        .finish("decided", Outcome::Denied { reason: None })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ids = |v: Vec<Issued>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
    let listed = |asker: Option<&'static str>, after: Option<Cursor>, limit| {
        let store = store.clone();
        async move {
            let page = Page {
                now_ms: 5,
                after: after.as_ref(),
                limit,
                asker,
            };
            store.open_all(page).await.unwrap_or_else(|e| panic!("{e}"))
        }
    };
    let page = |after, limit| listed(None, after, limit);
    assert_eq!(ids(page(None, 10).await), ["e1", "e2", "e3", "e5"]);
    // Only one user's: paged the same way, over theirs alone.
    let of = |asker, after, limit| listed(Some(asker), after, limit);
    assert_eq!(ids(of("anonymous", None, 10).await), ["e3", "e5"]);
    let first = of("anonymous", None, 1).await;
    let after = first.last().map(Cursor::after);
    assert_eq!(ids(first), ["e3"]);
    assert_eq!(ids(of("anonymous", after, 1).await), ["e5"]);
    assert_eq!(
        ids(of("bob", None, 10).await),
        ["e2"],
        "not the taken or decided"
    );
    assert!(of("nobody", None, 10).await.is_empty());
    let first = page(None, 2).await;
    let after = first.last().map(Cursor::after);
    assert_eq!(ids(first), ["e1", "e2"]);
    assert_eq!(ids(page(after, 2).await), ["e3", "e5"]);
    let last = Cursor {
        issued_at_ms: 3,
        id: "e5".into(),
    };
    assert!(page(Some(last), 2).await.is_empty());
    // Nothing lists the expired one later, either.
    assert_eq!(ids(page(None, 10).await), ["e1", "e2", "e3", "e5"]);
    assert_eq!(
        store.get("expired").await.ok().flatten().map(|i| i.id),
        Some("expired".to_owned()),
        "still there, only not open"
    );
    assert_eq!(
        ids(store.open_all(all(101)).await.unwrap_or_default()),
        Vec::<String>::new(),
        "all expired at 100"
    );
}

/// `issued()` expires at 10 ms.
pub async fn lists_unanswered_expired_until_decided(store: Store) {
    insert_all(&store, &["unanswered", "answered", "later"]).await;
    assert_eq!(store.claim("answered", 5, ME).await.ok(), Some(Claim::Won));
    let ids = |v: Result<Vec<Issued>, StoreError>| {
        let mut ids: Vec<String> = v.unwrap_or_default().into_iter().map(|i| i.id).collect();
        ids.sort();
        ids
    };
    assert!(
        ids(store.expired(10, 10).await).is_empty(),
        "not expired yet"
    );
    assert_eq!(ids(store.expired(11, 10).await), ["later", "unanswered"]);
    assert_eq!(store.expired(11, 1).await.map(|v| v.len()).ok(), Some(1));
    // The gate ends one as expired through the claim: no longer due.
    assert_eq!(
        store.claim("unanswered", 11, ME).await.ok(),
        Some(Claim::Won)
    );
    store
        .finish("unanswered", Outcome::Expired)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(store.expired(12, 10).await), ["later"]);
    assert_eq!(
        store.status("unanswered").await.ok().flatten(),
        Some(Status::Done(Outcome::Expired))
    );
}

/// A record's kind is kept: read back, listed open and expired as it was
/// written.
pub async fn keeps_each_records_kind(store: Store) {
    let kinds = [
        ("question", RecordKind::Question),
        ("hand-off", RecordKind::HandOff),
        ("client-result", RecordKind::ClientResult),
    ];
    for (id, kind) in kinds {
        store
            .insert(Issued { kind, ..issued(id) })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let of = |list: Vec<Issued>| {
        let mut kinds: Vec<(String, RecordKind)> =
            list.into_iter().map(|i| (i.id, i.kind)).collect();
        kinds.sort_by(|a, b| a.0.cmp(&b.0));
        kinds
    };
    let mut expected: Vec<(String, RecordKind)> = kinds
        .iter()
        .map(|(id, kind)| ((*id).to_owned(), *kind))
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    for (id, kind) in kinds {
        let got = store.get(id).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.map(|i| i.kind), Some(kind), "{id}");
    }
    let open = store.open("anonymous", "chat", 0).await;
    assert_eq!(of(open.unwrap_or_else(|e| panic!("{e}"))), expected);
    let everywhere = store.open_all(all(0)).await;
    assert_eq!(of(everywhere.unwrap_or_else(|e| panic!("{e}"))), expected);
    let expired = store.expired(11, 10).await;
    assert_eq!(of(expired.unwrap_or_else(|e| panic!("{e}"))), expected);
}

/// The first 10 open at `now_ms`, whoever asked.
fn all(now_ms: u64) -> Page<'static> {
    Page {
        now_ms,
        after: None,
        limit: 10,
        asker: None,
    }
}
