//! The audit chain, held to the same guarantees by every backend: the
//! export verifies, tampering with it is named, and appends made at once
//! never fork it.

use super::*;
use crate::store::chain::{AuditKey, Chained, verify};

fn event(at_ms: u64, principal: &str) -> AuditEvent {
    AuditEvent {
        at_ms,
        principal: principal.into(),
        chat_id: "c".into(),
        tool: "internal--pay".into(),
        call_id: format!("call-{at_ms}"),
        args_digest: "00".into(),
        issued_args_digest: None,
        decision: AuditDecision::Approved,
        by: "alice".into(),
        reason: None,
        confirmation_id: Some("adk-1".into()),
        client: None,
        fingerprint: None,
        // The chain covers who decided as it covers the rest.
        approver: Some(crate::identity::Approver {
            source: crate::identity::Source::Oidc,
            principal: Some("alice".into()),
            issuer: Some("https://idp.example".into()),
            subject: Some("a-1".into()),
        }),
    }
}

/// The export lines of `chain`.
pub fn lines(chain: &[Chained]) -> Vec<String> {
    chain
        .iter()
        .map(|c| c.line().unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Where `lines` first break, checked against `key`.
fn broken_at(lines: &[String], key: &AuditKey) -> Option<usize> {
    verify(lines.iter().cloned().map(Ok), Some(&[key.public()]))
        .err()
        .map(|b| b.line)
}

async fn export(store: &Store, since_ms: u64) -> Vec<String> {
    lines(
        &store
            .audit_chain(since_ms)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
}

pub async fn chains_its_audit_log(store: Store) {
    let key = AuditKey::from_seed([3; 32]);
    let store = store.with_audit_key(Some(key.clone()));
    for (at, who) in [
        (10, "alice"),
        (20, "bob"),
        (30, "alice"),
        (40, "carol"),
        (50, "bob"),
    ] {
        store
            .audit(event(at, who))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let all = export(&store, 0).await;
    assert_eq!(all.len(), 5);
    let verified = verify(all.iter().cloned().map(Ok), Some(&[key.public()]));
    assert_eq!(verified.map(|v| (v.events, v.last_seq)), Ok((5, Some(5))));
    // From a time on: from the first event since then, whoever's.
    let since = export(&store, 25).await;
    assert_eq!(since, all[2..]);
    // The audit log reads as before.
    let read = store
        .audit_log(AuditPage {
            principal: "bob",
            chat_id: None,
            since_ms: 0,
            limit: 10,
        })
        .await
        .unwrap_or_default();
    assert_eq!(read, [event(20, "bob"), event(50, "bob")]);

    let mut deleted = all.clone();
    deleted.remove(1);
    assert_eq!(broken_at(&deleted, &key), Some(2));
    let mut altered = all.clone();
    altered[3] = altered[3].replacen("carol", "carql", 1);
    assert_eq!(broken_at(&altered, &key), Some(4));
    let mut swapped = all.clone();
    swapped.swap(2, 3);
    assert_eq!(broken_at(&swapped, &key), Some(3));

    // Pruned, the chain goes on from what is left.
    store
        .prune_audit(30)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(export(&store, 0).await, all[2..]);
    store
        .audit(event(60, "alice"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let now = export(&store, 0).await;
    assert_eq!(now.len(), 4);
    assert_eq!(broken_at(&now, &key), None);
}

/// Appends made at once by many tasks (and, through `others`, by other
/// instances on the same state) make one chain without a gap or a fork.
pub async fn chains_appends_made_at_once(store: Store, others: Vec<Store>) {
    let key = AuditKey::from_seed([4; 32]);
    let stores: Vec<Store> = std::iter::once(store)
        .chain(others)
        .map(|s| s.with_audit_key(Some(key.clone())))
        .collect();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, store) in stores.iter().enumerate() {
        for n in 0..10u64 {
            let store = store.clone();
            let who = format!("p{i}");
            tasks.spawn(async move { store.audit(event(100 + n, &who)).await });
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let all = export(&stores[0], 0).await;
    assert_eq!(all.len(), 10 * stores.len());
    let verified = verify(all.iter().cloned().map(Ok), Some(&[key.public()]));
    assert_eq!(
        verified.map(|v| v.last_seq),
        Ok(Some(10 * stores.len() as u64))
    );
}
