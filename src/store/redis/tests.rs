use crate::store::backend::{Approvals, Calls, Confirmations};
use crate::store::{Backend, Store, conformance};

/// The server the tests run against: `scripts/test` starts one and sets
/// `TOOLGATE_TEST_REDIS_URL`. Missing, the tests fail.
pub fn url() -> String {
    std::env::var("TOOLGATE_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            panic!("no Redis server: set TOOLGATE_TEST_REDIS_URL (scripts/test starts one)")
        })
}

/// A Redis store of its own key prefix on the test server.
pub async fn redis_store() -> std::sync::Arc<super::RedisStore> {
    let Backend::Redis(store) = open(&fresh_prefix()).await.backend else {
        panic!("not redis")
    };
    store
}

/// Keys of its own on the test server, for each case of the suite.
async fn fresh() -> ((), Store) {
    ((), open(&fresh_prefix()).await)
}

/// A key prefix no other case uses.
fn fresh_prefix() -> String {
    format!("test-{}:", uuid::Uuid::new_v4().simple())
}

/// A store on the test server under `prefix`: opened twice with the same
/// prefix, two instances sharing their records.
async fn open(prefix: &str) -> Store {
    Store::redis(&url(), prefix)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

conformance::suite!(fresh);

/// Three instances on one Redis append to one chain: each append that
/// another came before reads the head again.
#[tokio::test]
async fn instances_append_to_one_chain() {
    let prefix = fresh_prefix();
    conformance::chains_appends_made_at_once(
        open(&prefix).await,
        vec![open(&prefix).await, open(&prefix).await],
    )
    .await;
}

/// An outcome recorded through another connection (another instance)
/// wakes a waiter through pub/sub, well before the polling fallback
/// would: five times in a row under a fifth of [`super::confirmations::POLL`].
#[tokio::test]
async fn another_instance_outcome_wakes_a_waiter_at_once() {
    use crate::store::Outcome;
    let prefix = fresh_prefix();
    let (waiter, other) = (open(&prefix).await, open(&prefix).await);
    for n in 0..5 {
        let id = format!("wake-{n}");
        waiter
            .insert(conformance::issued(&id))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let wait = waiter.wait_outcome(&id, std::time::Duration::from_secs(5));
        let decide = async {
            // Let the waiter subscribe and look first.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            other
                .claim(&id, 1, conformance::ME)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let started = std::time::Instant::now();
            let outcome = Outcome::Denied { reason: None };
            other
                .finish(&id, outcome)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            started
        };
        let (woken, started) = tokio::join!(wait, decide);
        assert!(
            matches!(woken, Ok(Some(Outcome::Denied { .. }))),
            "{woken:?}"
        );
        assert!(
            started.elapsed() < super::confirmations::POLL / 5,
            "woken after {:?}: by polling, not by pub/sub",
            started.elapsed()
        );
    }
}

/// The waiters of one instance share one subscription to outcomes:
/// twenty of them are one subscriber of the channel (each was one),
/// and each is woken by its own outcome.
#[tokio::test]
async fn waiters_share_one_subscription() {
    use crate::store::Outcome;
    let store = open(&fresh_prefix()).await;
    let Backend::Redis(redis) = &store.backend else {
        panic!("not redis")
    };
    let ids: Vec<String> = (0..20).map(|n| format!("shared-{n}")).collect();
    for id in &ids {
        store
            .insert(conformance::issued(id))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let conn = redis.conn.clone();
    let subscribers = || {
        let mut conn = conn.clone();
        let channel = redis.channel();
        async move {
            let counts: (String, usize) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            counts.1
        }
    };
    let waits = futures::future::join_all(
        ids.iter()
            .map(|id| store.wait_outcome(id, std::time::Duration::from_secs(10))),
    );
    let decide = async {
        let mut seen = 0;
        for _ in 0..500 {
            seen = subscribers().await;
            if seen > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(seen, 1, "subscribers of the outcomes channel");
        // For half a second, while every waiter looks and waits.
        for _ in 0..50 {
            assert_eq!(subscribers().await, 1, "a subscription per waiter");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        for id in &ids {
            assert_eq!(
                store.claim(id, 1, conformance::ME).await.ok(),
                Some(crate::store::Claim::Won)
            );
            store
                .finish(id, Outcome::Denied { reason: None })
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
    };
    let (woken, ()) = tokio::join!(waits, decide);
    for outcome in woken {
        assert!(
            matches!(outcome, Ok(Some(Outcome::Denied { .. }))),
            "{outcome:?}"
        );
    }
}

/// Another instance hears of each question asked and taken; the one
/// taken leaves the open index at once.
#[tokio::test]
async fn another_instance_hears_of_questions_asked_and_taken() {
    use futures::StreamExt;
    use redis::AsyncCommands;
    let prefix = fresh_prefix();
    let (one, other) = (open(&prefix).await, open(&prefix).await);
    let mut changes = other
        .changes()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("a shared store has changes"));
    async fn heard(changes: &mut futures::stream::BoxStream<'static, ()>) -> Option<()> {
        tokio::time::timeout(std::time::Duration::from_secs(5), changes.next())
            .await
            .ok()
            .flatten()
    }
    one.insert(conformance::issued("q"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(heard(&mut changes).await, Some(()), "asked");
    let Backend::Redis(redis) = &one.backend else {
        panic!("not redis")
    };
    let mut conn = redis.conn.clone();
    let entries: usize = conn.zcard(redis.open_key()).await.unwrap_or_default();
    assert_eq!(entries, 1);
    assert_eq!(
        one.claim("q", 1, conformance::ME).await.ok(),
        Some(crate::store::Claim::Won)
    );
    assert_eq!(heard(&mut changes).await, Some(()), "taken");
    let entries: usize = conn.zcard(redis.open_key()).await.unwrap_or_default();
    assert_eq!(entries, 0, "taken out of the open index by its claim");
}

/// Another instance's claim lives as long as its heartbeat does.
#[tokio::test]
async fn a_claim_is_orphaned_when_its_instance_stops_beating() {
    use crate::store::Claim;
    use redis::AsyncCommands;
    let store = open(&fresh_prefix()).await;
    store
        .insert(conformance::issued("shared"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    store
        .heartbeat("instance-other")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        store.claim("shared", 5, "instance-other").await.ok(),
        Some(Claim::Won)
    );
    let seen = || store.claim("shared", 6, conformance::ME);
    assert_eq!(
        seen().await.ok(),
        conformance::in_flight(5, false),
        "alive: its call may still record an outcome"
    );
    // Its heartbeat lapses (deleted here, as its TTL would).
    let Backend::Redis(redis) = &store.backend else {
        panic!("not redis")
    };
    let mut conn = redis.conn.clone();
    let _: i64 = conn
        .del(redis.heartbeat_key("instance-other"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen().await.ok(), conformance::in_flight(5, true));
}

/// A window grant's record expires itself with its window; one
/// without a window replacing it does not; the index entry of a record
/// that expired goes at the next listing.
#[tokio::test]
async fn window_grants_expire_themselves() {
    use redis::AsyncCommands;
    let store = redis_store().await;
    let key = store.approval_key("alice", &super::approvals::field("", "internal--pay"));
    let mut conn = store.conn.clone();
    let window = conformance::grant("w1", None, 1_000, Some(61_000));
    store
        .remember(window.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let left: i64 = conn.pttl(&key).await.unwrap_or_else(|e| panic!("{e}"));
    assert!((1..=60_000).contains(&left), "{left}");
    store
        .remember(conformance::grant("g1", None, 2_000, None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let left: i64 = conn.pttl(&key).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(left, -1, "no window, no expiry");

    store
        .remember(window)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Its window ends (deleted here, as its expiry would).
    let _: i64 = conn.del(&key).await.unwrap_or_else(|e| panic!("{e}"));
    let index = store.approvals_key("alice");
    let entries: Vec<String> = conn.smembers(&index).await.unwrap_or_default();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        store.list_remembered("alice", 1_000).await.ok(),
        Some(vec![])
    );
    let entries: Vec<String> = conn.smembers(&index).await.unwrap_or_default();
    assert!(entries.is_empty(), "{entries:?}");
    assert_eq!(
        store
            .remembered(
                Calls {
                    principal: "alice",
                    chat_id: "chat",
                    tool: "internal--pay",
                },
                1_000
            )
            .await
            .ok(),
        Some(None)
    );
}

/// A chat's grant lives at most the retention, one for every chat as
/// long as it is not revoked; the index of a user's approvals loses
/// the entry of a grant that is gone when another is remembered, so it
/// is as large as the live grants, however many chats came and went.
#[tokio::test]
async fn a_chats_grants_expire_and_their_index_stays_small() {
    use redis::AsyncCommands;
    let store = redis_store().await;
    let store = (*store)
        .clone()
        .with_retention(std::time::Duration::from_secs(3600));
    let mut conn = store.conn.clone();
    let ttl = |chat: &str| {
        let key = store.approval_key("alice", &super::approvals::field(chat, "internal--pay"));
        let mut conn = store.conn.clone();
        async move {
            conn.pttl::<_, i64>(key)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    for (n, chat) in ["c1", "c2", "c3"].into_iter().enumerate() {
        store
            .remember(conformance::grant(
                &format!("g{n}"),
                Some(chat),
                1_000,
                None,
            ))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let left = ttl(chat).await;
        assert!((1..=3_600_000).contains(&left), "{chat}: {left}");
        // Its life ends (deleted here, as its expiry would), but c3's.
        if chat != "c3" {
            let key = store.approval_key("alice", &super::approvals::field(chat, "internal--pay"));
            let _: i64 = conn.del(key).await.unwrap_or_else(|e| panic!("{e}"));
        }
    }
    store
        .remember(conformance::grant("g", None, 1_000, None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ttl("").await, -1, "one for every chat: until revoked");
    let mut entries: Vec<String> = conn
        .smembers(store.approvals_key("alice"))
        .await
        .unwrap_or_default();
    entries.sort();
    assert_eq!(
        entries,
        [
            super::approvals::field("", "internal--pay"),
            super::approvals::field("c3", "internal--pay")
        ]
    );
}

#[tokio::test]
async fn records_expire_with_their_confirmation() {
    use redis::AsyncCommands;
    let store = redis_store().await;
    let mut issued = conformance::issued("ttl");
    issued.expires_at_ms = issued.issued_at_ms + 60_000;
    store.insert(issued).await.unwrap_or_else(|e| panic!("{e}"));
    let mut conn = store.conn.clone();
    let ttl: i64 = conn
        .pttl(store.key("ttl"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        (60_000..=60_000 + super::confirmations::LINGER_MS as i64).contains(&ttl),
        "{ttl}"
    );
}
