//! The suite's case for narrowed grants: kept as made, each use and each
//! revocation atomic, a state every backend reads alike.

use serde_json::json;

use super::super::{Grant, GrantState, Store};
use crate::protocol::grant::GrantScope;

fn grant(id: &str, principal: &str, uses: Option<u32>, until: Option<u64>) -> Grant {
    let scope = json!({
        "pins": {"recipient": "Bob", "/to/bank": {"iban": "X", "n": 1.5}},
        "max": {"amount": 100},
    });
    let mut scope: GrantScope = serde_json::from_value(scope).unwrap_or_else(|e| panic!("{e}"));
    scope.uses = uses;
    Grant {
        id: id.into(),
        principal: principal.into(),
        chat_id: Some("chat".into()),
        tool: "internal--pay".into(),
        definition: Some("d".repeat(64)),
        scope,
        confirmation_id: "q1".into(),
        created_at_ms: 1,
        expires_at_ms: until,
        used: 0,
        revoked_at_ms: None,
    }
}

async fn alices(store: &Store) -> Vec<Grant> {
    store
        .grants("alice")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn redeem(store: &Store, grant: &Grant, now_ms: u64) -> bool {
    store
        .redeem_grant(grant, now_ms)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn revoke(store: &Store, principal: &str, id: &str, now_ms: u64) -> bool {
    store
        .revoke_grant(principal, id, now_ms)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

pub async fn keeps_narrowed_grants(store: Store) {
    let two_uses = grant("g1", "alice", Some(2), None);
    let window = grant("g2", "alice", None, Some(5_000));
    let bobs = grant("g3", "bob", None, None);
    for made in [&two_uses, &window, &bobs] {
        store
            .add_grant(made.clone())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // Kept as made, the user's own only, oldest first.
    assert_eq!(alices(&store).await, [two_uses.clone(), window.clone()]);

    // Uses: two, then none.
    assert!(redeem(&store, &two_uses, 10).await);
    assert!(redeem(&store, &two_uses, 10).await);
    assert!(!redeem(&store, &two_uses, 10).await, "its uses are spent");
    let listed = alices(&store).await;
    assert_eq!(listed[0].used, 2);
    assert_eq!(listed[0].state(10), GrantState::Redeemed);

    // A window: up to its end, not at it.
    assert!(redeem(&store, &window, 4_999).await);
    assert!(!redeem(&store, &window, 5_000).await, "its window is over");

    // Revoked once, by its own user only; then it decides nothing.
    assert!(!revoke(&store, "alice", "g3", 20).await, "bob's");
    assert!(!revoke(&store, "alice", "nope", 20).await);
    assert!(revoke(&store, "alice", "g2", 20).await);
    assert!(!revoke(&store, "alice", "g2", 21).await, "revoked already");
    assert!(!redeem(&store, &window, 30).await, "revoked");
    let listed = alices(&store).await;
    assert_eq!(listed[1].revoked_at_ms, Some(20));
    assert_eq!(listed[1].used, 1);
    assert_eq!(listed[1].state(30), GrantState::Revoked);
    assert!(redeem(&store, &bobs, 30).await, "bob's is untouched");

    // Uses spent at once: exactly as many as it has.
    let three = grant("g4", "alice", Some(3), None);
    store
        .add_grant(three.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let tries = (0..12).map(|_| redeem(&store, &three, 40));
    let spent = futures::future::join_all(tries).await;
    assert_eq!(spent.iter().filter(|spent| **spent).count(), 3);
}
