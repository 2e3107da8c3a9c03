//! The inbox: `GET /api/confirmations` without `chatId` lists every open
//! question the caller may decide, in every chat, and
//! `/api/confirmations/events` sends it again as it changes; on every
//! store backend: memory, SQLite and, with the `redis-server` feature,
//! Redis.

use crate::common;
use crate::common::Must;

use std::time::Duration;

use common::{Server, user_says};
use futures::StreamExt;
use serde_json::{Value, json};
use toolgate::Config;

/// Payments need a finance approver, four eyes; `lead` has the role.
/// Questions expire after two minutes.
const FINANCE: &str = "\
auth:
  principalHeader: X-User
  roles: {finance: [lead]}
toolConfirmation:
  timeout: 120000
  tools:
    process_payment: {approvers: [role:finance], requireDistinctApprover: true}
";

/// A server with [`FINANCE`] on a fresh store of the given kind. The
/// temporary folder lives as long as the server.
async fn server(kind: &str) -> (Server, Option<tempfile::TempDir>) {
    Server::on_backend(kind, Config::from_yaml(FINANCE).must()).await
}

fn as_user(who: &str) -> [(&'static str, &str); 1] {
    [("x-user", who)]
}

/// The lead decides question `id` with `decision` through the API.
async fn lead_decides(server: &Server, id: &str, decision: Value) -> common::Reply {
    let path = format!("/api/confirmations/{id}");
    server
        .post_with(&path, &as_user("lead"), decision.to_string())
        .await
}

/// `who` asks to pay in `chat`, a second after the question before.
async fn pays(server: &Server, who: &str, chat: &str, text: &str) {
    server.clock.advance(Duration::from_secs(1));
    let body = user_says(chat, text).to_string();
    let reply = server.post_with("/stream", &as_user(who), body).await;
    assert_eq!(
        reply.of_type("tool-input-available").len(),
        1,
        "{}",
        reply.body
    );
}

async fn inbox(server: &Server, who: &str, query: &str) -> Vec<Value> {
    let reply = server
        .get_with(&format!("/api/confirmations{query}"), &as_user(who))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json().as_array().cloned().unwrap_or_default()
}

/// Who asked what, in order: `(principal, chat)`.
fn asked(list: &[Value]) -> Vec<(String, String)> {
    list.iter()
        .map(|q| {
            let text = |key: &str| q[key].as_str().unwrap_or_default().to_owned();
            (text("principal"), text("chatId"))
        })
        .collect()
}

fn pair(principal: &str, chat: &str) -> (String, String) {
    (principal.to_owned(), chat.to_owned())
}

async fn an_approver_sees_every_users_questions_in_every_chat(kind: &str) {
    let (server, _dir) = server(kind).await;
    pays(&server, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    pays(&server, "clerk", "chat-b", "Pay 20 EUR to Taro").await;
    pays(&server, "bob", "chat-c", "Send 5 USD to Hanako").await;

    let lead = inbox(&server, "lead", "").await;
    assert_eq!(
        asked(&lead),
        [
            pair("clerk", "chat-a"),
            pair("clerk", "chat-b"),
            pair("bob", "chat-c")
        ],
        "oldest first"
    );
    let first = &lead[0];
    assert_eq!(first["tool"], "internal--process_payment");
    assert_eq!(first["originalFunctionCall"]["name"], "process_payment");
    assert_eq!(
        first["originalFunctionCall"]["args"],
        json!({"amount": 50, "recipient": "Hanako", "currency": "USD"})
    );
    assert_eq!(first["approvers"], json!(["role:finance"]));
    assert_eq!(first["requireDistinctApprover"], true);
    assert_eq!(first["mayApprove"], true);
    assert_eq!(first["protocol"], "adk");
    assert!(first["expiresInMs"].as_u64().is_some_and(|ms| ms > 0));
    assert!(
        first["hint"]
            .as_str()
            .is_some_and(|h| h.contains("waiting for approval"))
    );

    // The askers see their own, which they may deny but not approve.
    let clerk = inbox(&server, "clerk", "").await;
    assert_eq!(
        asked(&clerk),
        [pair("clerk", "chat-a"), pair("clerk", "chat-b")]
    );
    assert!(clerk.iter().all(|q| q["mayApprove"] == false));
    // Anyone else sees nothing.
    assert!(inbox(&server, "mallory", "").await.is_empty());

    // `?chatId=` is the caller's own questions in that chat, as before.
    let chat = inbox(&server, "clerk", "?chatId=chat-b").await;
    assert_eq!(chat.len(), 1);
    assert!(chat[0].get("principal").is_none(), "{}", chat[0]);
    assert!(inbox(&server, "lead", "?chatId=chat-b").await.is_empty());
}

async fn filters_and_limit(kind: &str) {
    let (server, _dir) = server(kind).await;
    pays(&server, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    pays(&server, "bob", "chat-b", "Send 5 USD to Hanako").await;
    pays(&server, "clerk", "chat-c", "Pay 20 EUR to Taro").await;

    let of = |query: &'static str, who: &'static str| {
        let server = &server;
        async move { asked(&inbox(server, who, query).await) }
    };
    assert_eq!(
        of("?principal=clerk", "lead").await,
        [pair("clerk", "chat-a"), pair("clerk", "chat-c")]
    );
    assert_eq!(of("?tool=process_payment", "lead").await.len(), 3);
    assert_eq!(of("?tool=internal--process_payment", "lead").await.len(), 3);
    assert!(of("?tool=get_weather", "lead").await.is_empty());
    assert!(
        of("?mine=true", "lead").await.is_empty(),
        "lead asked nothing"
    );
    assert_eq!(of("?mine=true", "bob").await, [pair("bob", "chat-b")]);
    assert_eq!(
        of("?limit=2", "lead").await,
        [pair("clerk", "chat-a"), pair("bob", "chat-b")]
    );
    assert_eq!(of("?limit=0", "lead").await.len(), 1, "at least one");
    assert_eq!(of("?limit=100000", "lead").await.len(), 3, "at most 1000");
    let bad = server
        .get_with("/api/confirmations?limit=many", &as_user("lead"))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("limit")),
        "{}",
        bad.body
    );
    // A chat's listing reads no other key, as before.
    let chat = server
        .get_with(
            "/api/confirmations?chatId=chat-a&limit=many",
            &as_user("clerk"),
        )
        .await;
    assert_eq!(chat.status, 200, "{}", chat.body);
    assert_eq!(chat.json().as_array().map(Vec::len), Some(1));
}

async fn decided_and_expired_questions_leave(kind: &str) {
    let (server, _dir) = server(kind).await;
    pays(&server, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    pays(&server, "clerk", "chat-b", "Pay 20 EUR to Taro").await;
    let lead = inbox(&server, "lead", "").await;
    let first = lead[0]["id"].as_str().unwrap_or_default().to_owned();

    let approved = lead_decides(&server, &first, json!({"approved": true})).await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(server.payments(), 1);
    assert_eq!(
        asked(&inbox(&server, "lead", "").await),
        [pair("clerk", "chat-b")]
    );

    // Past its deadline nobody may decide it.
    server.clock.advance(Duration::from_secs(121));
    assert!(inbox(&server, "lead", "").await.is_empty());
    assert!(inbox(&server, "clerk", "").await.is_empty());
}

/// An inbox stream of `who`'s: its `data:` events, parsed, one at a time.
struct Events {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    async fn open(server: &Server, who: &str) -> Self {
        Self::open_query(server, who, "").await
    }

    async fn open_query(server: &Server, who: &str, query: &str) -> Self {
        let response = reqwest::Client::new()
            .get(format!("{}/api/confirmations/events{query}", server.url))
            .header("x-user", who)
            .send()
            .await
            .must();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "an SSE stream"
        );
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next listing, skipping keep-alive comments.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(data) = event.trim_end().strip_prefix("data: ") {
                    return serde_json::from_str(data).unwrap_or_else(|e| panic!("{data}: {e}"));
                }
                continue;
            }
            let more = tokio::time::timeout(common::wait::PATIENCE, self.body.next())
                .await
                .unwrap_or_else(|_| panic!("no event in {:?}", common::wait::PATIENCE))
                .unwrap_or_else(|| panic!("the stream ended"))
                .must();
            self.buffer.push_str(&String::from_utf8_lossy(&more));
        }
    }

    /// Listings until one has `n` questions (changes may come in several).
    async fn until(&mut self, n: usize) -> Vec<Value> {
        loop {
            let event = self.next().await;
            let list = event["confirmations"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("not a listing: {event}"));
            if list.len() == n {
                return list;
            }
        }
    }
}

async fn the_stream_follows_questions_asked_and_decided(kind: &str) {
    let (server, _dir) = server(kind).await;
    let mut lead = Events::open(&server, "lead").await;
    let mut mallory = Events::open(&server, "mallory").await;
    assert!(lead.until(0).await.is_empty(), "at once, what is open now");
    assert!(mallory.until(0).await.is_empty());

    pays(&server, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    let listed = lead.until(1).await;
    assert_eq!(asked(&listed), [pair("clerk", "chat-a")]);
    assert_eq!(listed[0]["mayApprove"], true);

    let id = listed[0]["id"].as_str().unwrap_or_default().to_owned();
    let denied = lead_decides(
        &server,
        &id,
        json!({"approved": false, "reason": "not today"}),
    )
    .await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    assert!(lead.until(0).await.is_empty(), "decided: gone");
    // Mallory's stream may have looked again, and found nothing of hers.
    assert!(mallory.until(0).await.is_empty());
}

macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test] async fn $name() { super::$name("memory").await })*
        }
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name("sqlite").await })*
        }
        #[cfg(feature = "redis-server")]
        mod redis {
            $(#[tokio::test] async fn $name() { super::$name("redis").await })*
        }
    };
}

on_every_backend!(
    an_approver_sees_every_users_questions_in_every_chat,
    filters_and_limit,
    decided_and_expired_questions_leave,
    the_stream_follows_questions_asked_and_decided,
);

/// Opens an inbox stream of `who`'s: its status and, when refused, its body.
async fn open_stream(server: &Server, who: &str) -> (u16, Option<reqwest::Response>, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}/api/confirmations/events", server.url))
        .header("x-user", who)
        .send()
        .await
        .must();
    let status = response.status().as_u16();
    if status == 200 {
        return (status, Some(response), Value::Null);
    }
    let body = response.text().await.unwrap_or_default();
    (
        status,
        None,
        serde_json::from_str(&body).unwrap_or(Value::Null),
    )
}

/// Inbox streams count: four per user, and (here) six in all; beyond, 429
/// with a JSON error and `Retry-After`; a closed stream frees its place.
#[tokio::test]
async fn inbox_streams_are_capped_per_user_and_in_total() -> anyhow::Result<()> {
    // A keep-alive each second: a closed stream is seen at the next one.
    let yaml = format!("{FINANCE}stream:\n  maxInboxStreams: 6\n  keepAliveSecs: 1\n");
    let server = Server::from_yaml(&yaml).await;
    let mut mallory = Vec::new();
    for _ in 0..4 {
        let (status, stream, body) = open_stream(&server, "mallory").await;
        assert_eq!(status, 200, "{body}");
        mallory.push(stream);
    }
    let (status, _, body) = open_stream(&server, "mallory").await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({"error": "too many inbox streams for this user (at most 4); close one and try again"})
    );
    let response = reqwest::Client::new()
        .get(format!("{}/api/confirmations/events", server.url))
        .header("x-user", "mallory")
        .send()
        .await?;
    assert!(response.headers().contains_key("retry-after"));
    drop(response);

    // Others still get theirs, up to the total.
    let lead = [
        open_stream(&server, "lead").await,
        open_stream(&server, "lead").await,
    ];
    assert!(lead.iter().all(|(status, ..)| *status == 200));
    let (status, _, body) = open_stream(&server, "clerk").await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({"error": "too many inbox streams (at most 6); try again later"})
    );

    // One of mallory's closed: its place is free again (once the server
    // has seen the connection go).
    mallory.pop();
    common::wait::until_ok("a place freed", || async {
        match open_stream(&server, "clerk").await {
            (200, stream, _) => Ok(stream),
            (status, _, body) => Err(format!("{status} {body}")),
        }
    })
    .await;
    Ok(())
}

/// The store's `open_all` operations so far (each reads one page).
async fn listings(server: &Server) -> f64 {
    let reply = server.get_with("/metrics", &as_user("lead")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let series =
        "toolgate_store_operations_total{store=\"memory\",op=\"open_all\",outcome=\"ok\"} ";
    reply
        .body
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .map_or(0.0, |v| v.parse().unwrap_or_else(|e| panic!("{v}: {e}")))
}

/// Eight streams of the same user with the same filter read one listing:
/// the store is listed once at the start and once per change, not once
/// per stream.
#[tokio::test]
async fn the_streams_of_one_user_share_one_listing_per_change() -> anyhow::Result<()> {
    let yaml = format!("{FINANCE}stream:\n  maxInboxStreamsPerUser: 9\n");
    let server = Server::from_yaml(&yaml).await;
    let mut streams = Vec::new();
    for _ in 0..8 {
        let mut stream = Events::open(&server, "lead").await;
        assert!(stream.until(0).await.is_empty());
        streams.push(stream);
    }
    assert_eq!(
        listings(&server).await,
        1.0,
        "one listing for eight streams"
    );

    pays(&server, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    for stream in &mut streams {
        assert_eq!(asked(&stream.until(1).await), [pair("clerk", "chat-a")]);
    }
    assert_eq!(listings(&server).await, 2.0, "one more for the change");

    // Another filter is another listing, shared by its own streams.
    let mut mine = Events::open_query(&server, "lead", "?mine=true").await;
    assert!(mine.until(0).await.is_empty());
    assert_eq!(listings(&server).await, 3.0);
    Ok(())
}

/// A stream that joins a feed listed a while ago reads each question's
/// `expiresInMs` as of now, not as of that listing.
#[tokio::test]
async fn a_stream_opened_later_reads_expiry_as_of_now() -> anyhow::Result<()> {
    let server = Server::from_yaml(FINANCE).await;
    pays(&server, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    let mut first = Events::open(&server, "lead").await;
    let listed = first.until(1).await;
    assert_eq!(listed[0]["expiresInMs"], 120_000);
    server.clock.advance(Duration::from_secs(30));
    let mut later = Events::open(&server, "lead").await;
    let listed = later.until(1).await;
    assert_eq!(listed[0]["expiresInMs"], 90_000, "{}", listed[0]);
    Ok(())
}

/// A user no rule names among the approvers may decide only their own
/// questions: their inbox reads only theirs from the store, one page,
/// however many other users' wait (here 257, past a page of 256).
#[tokio::test]
async fn a_user_who_may_decide_nothing_reads_only_their_own() -> anyhow::Result<()> {
    let server = Server::from_yaml(FINANCE).await;
    for i in 0..257 {
        let body = user_says(&format!("chat-{i}"), "Send 50 USD to Hanako").to_string();
        let reply = server.post_with("/stream", &as_user("clerk"), body).await;
        assert_eq!(
            reply.of_type("tool-input-available").len(),
            1,
            "{}",
            reply.body
        );
    }
    let before = listings(&server).await;
    assert!(inbox(&server, "mallory", "").await.is_empty());
    assert_eq!(
        listings(&server).await - before,
        1.0,
        "one page, of hers alone"
    );
    assert!(inbox(&server, "lead", "?mine=true").await.is_empty());
    assert_eq!(
        listings(&server).await - before,
        2.0,
        "?mine=true: one page too"
    );
    // An approver still sees everyone's.
    assert_eq!(inbox(&server, "lead", "?limit=1000").await.len(), 257);
    Ok(())
}

/// With Redis, a stream on one instance hears of questions asked and
/// decided on another that shares the store.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn the_stream_hears_of_another_instances_questions() -> anyhow::Result<()> {
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let instance = || async {
        let store = toolgate::store::Store::redis(&common::redis_url(), &prefix)
            .await
            .must();
        let config = Config::from_yaml(FINANCE).must();
        Server::with(config, move |app| app.with_store(store)).await
    };
    let (here, there) = (instance().await, instance().await);
    let mut lead = Events::open(&here, "lead").await;
    assert!(lead.until(0).await.is_empty());

    pays(&there, "clerk", "chat-a", "Send 50 USD to Hanako").await;
    let listed = lead.until(1).await;
    assert_eq!(asked(&listed), [pair("clerk", "chat-a")]);

    let id = listed[0]["id"].as_str().unwrap_or_default().to_owned();
    let denied = lead_decides(&there, &id, json!({"approved": false})).await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    assert!(lead.until(0).await.is_empty(), "decided there: gone here");
    Ok(())
}
