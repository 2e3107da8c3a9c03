//! Grants that narrow, never widen: an approval with `grant` decides later
//! calls only inside the scope its approver gave it (pinned and capped
//! arguments, a window, a number of uses); every call outside is asked as
//! usual. Its state is listed in `GET /api/grants`, and `DELETE
//! /api/grants/{id}` revokes it (audited). A grant is refused where
//! `remember` would be, and where it does not cover the call it approves.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{self, Reply, Server, asked};
use crate::grants::{FOUR_EYES, as_user, decide, open_question, says, server_config, status};

const USERS: &str = "auth: {principalHeader: X-User}\n";

/// A server whose users name themselves (`X-User`).
async fn server() -> Server {
    Server::with_config(server_config(USERS)).await
}

/// Asks for `text` in `chat` as alice and approves it through the API with
/// `grant`: the approval's reply.
async fn approve_with(server: &Server, chat: &str, text: &str, grant: Value) -> Reply {
    let first = says(server, "alice", chat, text).await;
    assert_eq!(asked(&first), 1, "{}", first.body);
    let id = open_question(server, "alice", chat).await;
    decide(
        server,
        "alice",
        &id,
        json!({"approved": true, "grant": grant}),
    )
    .await
}

async fn grants(server: &Server, who: &str) -> Value {
    server.get_with("/api/grants", &as_user(who)).await.json()
}

async fn revoke(server: &Server, who: &str, id: &str) -> Reply {
    let path = format!("/api/grants/{id}");
    server.delete_with(&path, &as_user(who)).await
}

/// Whether `text` in `chat` runs without asking (else it is asked).
async fn runs(server: &Server, chat: &str, text: &str) -> bool {
    let before = server.payments();
    let reply = says(server, "alice", chat, text).await;
    match asked(&reply) {
        0 => {
            assert_eq!(server.payments(), before + 1, "{text}: {}", reply.body);
            true
        }
        _ => {
            assert_eq!(server.payments(), before, "{text}: {}", reply.body);
            false
        }
    }
}

#[tokio::test]
async fn pins_and_caps_hold_and_a_call_outside_them_is_asked() {
    let server = server().await;
    let grant = json!({"pins": {"recipient": "Hanako", "/currency": "USD"}, "max": {"amount": 60}});
    let approved = approve_with(&server, "chat-a", "Send 50 USD to Hanako", grant).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);

    assert!(runs(&server, "chat-a", "Send 60 USD to Hanako").await);
    assert!(runs(&server, "chat-a", "Send 12.5 USD to Hanako").await);
    // Over the cap, another recipient, another currency, another chat: asked.
    assert!(!runs(&server, "chat-a", "Send 61 USD to Hanako").await);
    assert!(!runs(&server, "chat-b2", "Send 20 USD to Bob").await);
    assert!(!runs(&server, "chat-a", "Send 20 EUR to Hanako").await);
    assert!(!runs(&server, "chat-b", "Send 20 USD to Hanako").await);
    // Another user's calls are never the grant's.
    let bob = says(&server, "bob", "chat-a", "Send 20 USD to Hanako").await;
    assert_eq!(asked(&bob), 1, "{}", bob.body);

    let mine = grants(&server, "alice").await;
    assert_eq!(mine.as_array().map(Vec::len), Some(1), "{mine}");
    let grant = &mine[0];
    assert_eq!(grant["state"], "active");
    assert_eq!(grant["used"], 2);
    assert_eq!(grant["chatId"], "chat-a");
    assert_eq!(grant["tool"], "internal--process_payment");
    assert_eq!(grant["scope"]["pins"]["recipient"], "Hanako");
    assert_eq!(grant["scope"]["max"]["amount"], 60);
    assert_eq!(grants(&server, "bob").await, json!([]));

    // The audit log names the grant that decided each call.
    let audit = server.get_with("/api/audit", &as_user("alice")).await;
    let by = format!("narrowed grant {}", grant["id"].as_str().unwrap_or("?"));
    assert_eq!(audit.body.matches(&by).count(), 3, "{}", audit.body);
}

#[tokio::test]
async fn a_grant_with_n_uses_decides_n_calls_then_they_are_asked() {
    let server = server().await;
    let grant = json!({"uses": 2, "everyChat": true});
    let approved = approve_with(&server, "chat-a", "Send 50 USD to Hanako", grant).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert!(runs(&server, "chat-b", "Send 10 USD to Bob").await);
    assert!(runs(&server, "chat-c", "Send 20 USD to Carol").await);
    assert!(!runs(&server, "chat-d", "Send 30 USD to Dave").await);
    let mine = grants(&server, "alice").await;
    assert_eq!(mine[0]["state"], "redeemed", "{mine}");
    assert_eq!(mine[0]["used"], 2);
    assert_eq!(server.payments(), 3);
}

#[tokio::test]
async fn a_grants_window_ends_on_the_servers_clock() {
    let server = server().await;
    let grant = json!({"minutes": 10});
    let approved = approve_with(&server, "chat-a", "Send 50 USD to Hanako", grant).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    server.clock.advance(Duration::from_secs(9 * 60));
    assert!(runs(&server, "chat-a", "Send 10 USD to Bob").await);
    server.clock.advance(Duration::from_secs(60));
    assert!(!runs(&server, "chat-a", "Send 10 USD to Bob").await);
    let mine = grants(&server, "alice").await;
    assert_eq!(mine[0]["state"], "expired", "{mine}");
}

#[tokio::test]
async fn a_revoked_grant_decides_nothing_and_the_revocation_is_audited() {
    let server = server().await;
    let grant = json!({"pins": {"recipient": "Bob"}});
    let approved = approve_with(&server, "chat-a", "Send 50 USD to Bob", grant).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert!(runs(&server, "chat-a", "Send 10 USD to Bob").await);
    let id = grants(&server, "alice").await[0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // Only its user revokes it.
    let by_mallory = revoke(&server, "mallory", &id).await;
    assert_eq!(by_mallory.status, 404, "{}", by_mallory.body);
    assert_eq!(
        by_mallory.json()["error"],
        format!("no grant `{id}`"),
        "{}",
        by_mallory.body
    );
    let revoked = revoke(&server, "alice", &id).await;
    assert_eq!(revoked.status, 204, "{}", revoked.body);
    assert!(!runs(&server, "chat-a", "Send 10 USD to Bob").await);

    let again = revoke(&server, "alice", &id).await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert_eq!(
        again.json()["error"],
        format!("grant `{id}` is already revoked")
    );
    let none = revoke(&server, "alice", "grant-404").await;
    assert_eq!(none.status, 404, "{}", none.body);
    let mine = grants(&server, "alice").await;
    assert_eq!(mine[0]["state"], "revoked", "{mine}");
    assert!(mine[0]["revokedAtMs"].is_u64(), "{mine}");

    let audit = server.get_with("/api/audit", &as_user("alice")).await;
    let revocation: Vec<Value> = audit
        .body
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["decision"] == "revoked")
        .collect();
    assert_eq!(revocation.len(), 1, "{}", audit.body);
    assert_eq!(revocation[0]["confirmationId"], id.as_str());
    assert_eq!(revocation[0]["by"], "user");
}

#[tokio::test]
async fn a_grant_is_given_in_the_chats_answer_too() {
    let server = server().await;
    let text = "Send 50 USD to Hanako";
    let first = says(&server, "alice", "chat-a", text).await;
    let mut answer = common::approval("chat-a", &first);
    answer["messages"][1]["parts"][1]["output"] =
        json!({"confirmed": true, "grant": {"pins": {"recipient": "Hanako"}, "uses": 1}});
    let approved = server
        .post_with("/stream", &as_user("alice"), answer.to_string())
        .await;
    assert_eq!(server.payments(), 1, "{}", approved.body);
    assert!(runs(&server, "chat-a", "Send 5 USD to Hanako").await);
    assert!(!runs(&server, "chat-a", "Send 6 USD to Hanako").await);
}

#[tokio::test]
async fn a_grant_never_widens_who_approves_nor_what_was_shown() {
    // An approver who is not the asker grants nothing.
    let server = Server::with_config(server_config(FOUR_EYES)).await;
    says(&server, "alice", "chat-a", "Send 50 USD to Hanako").await;
    let id = open_question(&server, "alice", "chat-a").await;
    let refused = decide(
        &server,
        "bob",
        &id,
        json!({"approved": true, "grant": {"pins": {"recipient": "Hanako"}, "uses": 1}}),
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(
        refused.json()["error"],
        "invalid request: `grant` is only for calls the user who asked approves alone; this call \
         needs role:finance, not the user who asked: decide it without one"
    );
    assert_eq!(status(&server, "alice", &id).await, "open");
    assert_eq!(grants(&server, "alice").await, json!([]));
    assert_eq!(grants(&server, "bob").await, json!([]));

    // The asker's own grant must cover the call it approves, and be well formed.
    let server = self::server().await;
    says(&server, "alice", "chat-a", "Send 50 USD to Hanako").await;
    let id = open_question(&server, "alice", "chat-a").await;
    let cases = [
        (
            json!({"approved": true, "grant": {"max": {"amount": 40}}}),
            "invalid request: the grant does not cover the call it approves: `amount` exceeds its cap",
        ),
        (
            json!({"approved": true, "grant": {"pins": {"recipient": "Bob"}}}),
            "invalid request: the grant does not cover the call it approves: `recipient` differs from its pinned value",
        ),
        (
            json!({"approved": true, "grant": {"pins": {"/to/iban": "X"}}}),
            "invalid request: the grant does not cover the call it approves: `/to/iban` is not there",
        ),
        (
            json!({"approved": true, "grant": {"uses": 0}}),
            "invalid request: invalid `grant`: `uses` is 1 to 10000",
        ),
        (
            json!({"approved": true, "grant": {"uses": 2}, "remember": "global"}),
            "invalid request: invalid answer: `grant` does not go with `remember` or `approveNext`",
        ),
        (
            json!({"approved": false, "grant": {"uses": 2}}),
            "invalid request: invalid answer: `grant` comes only with an approval",
        ),
    ];
    for (body, error) in cases {
        let refused = decide(&server, "alice", &id, body.clone()).await;
        assert_eq!(refused.status, 400, "{body}: {}", refused.body);
        assert_eq!(refused.json()["error"], error, "{body}");
        assert_eq!(status(&server, "alice", &id).await, "open", "{body}");
    }
    let unknown = decide(
        &server,
        "alice",
        &id,
        json!({"approved": true, "grant": {"uses": 1, "forever": true}}),
    )
    .await;
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert!(
        unknown.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown field `forever`")),
        "{}",
        unknown.body
    );
    assert_eq!(server.payments(), 0);
    assert_eq!(grants(&server, "alice").await, json!([]));
}

/// Two instances on one Redis: a grant made on one decides on the other,
/// its uses are counted once for both, and revoked on one it decides
/// nothing on the other.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn a_grant_revoked_on_one_instance_decides_nothing_on_another() {
    use crate::common::Must;

    let url = std::env::var("TOOLGATE_TEST_REDIS_URL").unwrap_or_default();
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let instance = || async {
        let store = toolgate::store::Store::redis(&url, &prefix).await.must();
        // Random ids: both instances write questions to one Redis.
        let ids = toolgate::ids::Ids::random();
        Server::with(server_config(USERS), move |app| {
            app.with_store(store).with_ids(ids)
        })
        .await
    };
    let (a, b) = (instance().await, instance().await);
    let grant = json!({"pins": {"recipient": "Bob"}, "uses": 3, "everyChat": true});
    let approved = approve_with(&a, "chat-a", "Send 50 USD to Bob", grant).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert!(runs(&b, "chat-b", "Send 10 USD to Bob").await);
    assert!(runs(&a, "chat-c", "Send 10 USD to Bob").await);
    let id = grants(&b, "alice").await[0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(grants(&a, "alice").await[0]["used"], 2);
    let revoked = revoke(&a, "alice", &id).await;
    assert_eq!(revoked.status, 204, "{}", revoked.body);
    assert!(!runs(&b, "chat-d", "Send 10 USD to Bob").await);
    assert_eq!(grants(&b, "alice").await[0]["state"], "revoked");
}

/// `/live`'s `confirm` frame carries a grant as the API does.
#[tokio::test]
async fn a_grant_is_given_in_a_live_confirm_frame() {
    use crate::common::ws::{asking, send, until_end};

    let server = Server::start().await;
    let (mut socket, mut frames) = asking(&server, "chat-hold").await;
    let grant = json!({"pins": {"recipient": "Hanako"}, "uses": 1});
    send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": "adk-3", "confirmed": true,
               "grant": grant, "requestId": "r1"}),
    )
    .await;
    until_end(&mut socket, &mut frames, "r1").await;
    assert_eq!(server.payments(), 1);
    assert!(runs(&server, "chat-hold", "Send 5 USD to Hanako").await);
    assert!(!runs(&server, "chat-hold", "Send 5 USD to Hanako").await);
    let mine = grants(&server, "anonymous").await;
    assert_eq!(mine[0]["state"], "redeemed", "{mine}");
}
