//! Several instances sharing one Redis: a confirmation issued by one is
//! answered on another, and 100 concurrent approvals across both run the
//! call exactly once. Compiled with the `redis-server` feature; needs a
//! Redis server (`scripts/test` starts one and sets
//! TOOLGATE_TEST_REDIS_URL), and fails without one.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use common::body::{Body, asked, chunks_of, question, read_to_end, read_until};
use common::{Binary, approval, redis_url, transaction};
use serde_json::json;

fn instance(dir: &std::path::Path, name: &str, url: &str, prefix: &str) -> Binary {
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!("store:\n  kind: redis\n  url: {url}\n  keyPrefix: '{prefix}'\ntoolConfirmation:\n  signingKeys: [shared-signing-key-of-at-least-32-bytes]\n"),
    )
    .must();
    Binary::serve_with(&["--config", &config.display().to_string()])
}

/// Two instances, `a` and `b`, on the test Redis under a fresh key prefix,
/// their configs in `dir`.
fn two_instances(dir: &std::path::Path) -> (Binary, Binary) {
    let url = redis_url();
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let a = instance(dir, "a", &url, &prefix);
    (a, instance(dir, "b", &url, &prefix))
}

#[tokio::test]
async fn issued_on_one_instance_answered_on_another_runs_exactly_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (a, b) = two_instances(dir.path());

    let first = a.chat( &json!({
        "id": "chat-shared",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    }))
    .await;
    let approve = approval("chat-shared", &first);

    // 100 identical approvals at once, half on each instance.
    let replies = futures::future::join_all((0..100).map(|i| {
        let url = if i % 2 == 0 { &a } else { &b };
        url.chat(&approve)
    }))
    .await;
    let transactions: std::collections::BTreeSet<Option<String>> =
        replies.iter().map(transaction).collect();
    assert_eq!(
        transactions.len(),
        1,
        "every reply reports the one payment: {transactions:?}"
    );
    assert!(
        transactions.iter().all(Option::is_some),
        "{}",
        replies[0].body
    );
    Ok(())
}

/// A held stream on one instance goes on as soon as another instance
/// records the decision (Redis pub/sub wakes it).
#[tokio::test]
async fn a_decision_on_another_instance_wakes_a_held_stream() -> anyhow::Result<()> {
    use futures::StreamExt;
    let dir = tempfile::tempdir()?;
    let (a, b) = two_instances(dir.path());
    let body = json!({
        "id": "chat-held", "toolgate": {"flow": "hold"},
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]}]
    });
    let response = common::post_json(format!("{}/stream", a.url), body)
        .send()
        .await?;
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    let id = loop {
        let piece = stream
            .next()
            .await
            .unwrap_or_else(|| panic!("ended: {seen}"));
        seen.push_str(&String::from_utf8_lossy(&piece.unwrap_or_default()));
        let asked = seen.split("\n\n").find_map(|frame| {
            let chunk: serde_json::Value =
                serde_json::from_str(frame.strip_prefix("data: ")?).ok()?;
            (chunk["toolName"] == "adk_request_confirmation"
                && chunk["type"] == "tool-input-available")
                .then(|| chunk["toolCallId"].as_str().map(str::to_owned))?
        });
        if let Some(id) = asked {
            break id;
        }
    };
    let decided = common::post_json(format!("{}/api/confirmations/{id}", b.url), common::APPROVE)
        .send()
        .await?;
    assert_eq!(decided.status(), 200);
    let rest = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(piece) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&piece.unwrap_or_default()));
        }
    })
    .await;
    assert!(rest.is_ok(), "the held stream was not woken: {seen}");
    assert!(
        seen.contains(r#""status":"completed""#) && seen.ends_with("data: [DONE]\n\n"),
        "{seen}"
    );
    Ok(())
}

/// Two in-process servers on one Redis, each with its own connection.
async fn pair(yaml: &str) -> (common::Server, common::Server) {
    let url = redis_url();
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let server = || async {
        let store = toolgate::store::Store::redis(&url, &prefix).await.must();
        let config = toolgate::Config::from_yaml(yaml).must();
        common::Server::with(config, move |app| app.with_store(store)).await
    };
    (server().await, server().await)
}

/// Reads `body` into `seen` until the confirmation question has come;
/// the question's id.
async fn read_to_question(body: &mut impl Body, seen: &mut String) -> String {
    read_until(body, seen, asked).await;
    question(seen)
}

/// A turn streaming on A is resumed on B, over SSE and over `/live`: each
/// replays it from its start and follows it to its end, every chunk once,
/// in order, ending as A's stream does.
#[tokio::test]
async fn a_turn_on_one_instance_is_resumed_on_another() {
    use common::ws;
    let (a, b) = pair("model:\n  deltaDelayMs: 20\n").await;
    let (mut on_a, mut seen) = a
        .open_until(&common::user_says("chat-slow", "count to 100"), |s| {
            s.contains("text-delta")
        })
        .await;

    let mut socket = ws::connect(&b).await;
    let resume = json!({"type": "resume", "requestId": "r1", "id": "chat-slow", "headers": {}});
    ws::send(&mut socket, resume).await;
    let on_b = b.get("/api/chat/chat-slow/stream").await;
    let mut frames = Vec::new();
    ws::until_end(&mut socket, &mut frames, "r1").await;
    read_to_end(&mut on_a, &mut seen).await;

    assert_eq!(on_b.status, 200);
    assert!(seen.ends_with("data: [DONE]\n\n"), "{seen}");
    assert!(on_b.body.ends_with("data: [DONE]\n\n"), "{}", on_b.body);
    let chunks = chunks_of(&seen);
    assert_eq!(
        chunks.last().map(|c| c["type"].clone()),
        Some(json!("finish"))
    );
    assert_eq!(chunks_of(&on_b.body), chunks, "SSE resume on B");
    let live: Vec<serde_json::Value> = frames
        .iter()
        .filter(|f| f["type"] == "chunk")
        .map(|f| f["chunk"].clone())
        .collect();
    assert_eq!(live, chunks, "/live resume on B");
    assert_eq!(frames.last().map(|f| f["type"].clone()), Some(json!("end")));

    // Over: for a few seconds a resume on either instance replays the
    // ended turn to its end (a client cut as its instance died may not
    // have read it), then nothing is left to resume.
    for instance in [&a, &b] {
        let replay = instance.get("/api/chat/chat-slow/stream").await;
        assert_eq!(replay.status, 200);
        assert_eq!(chunks_of(&replay.body), chunks, "the ended turn's replay");
        assert!(replay.body.ends_with("data: [DONE]\n\n"), "{}", replay.body);
    }
}

/// Another principal resumes nothing of a turn in flight on another instance.
#[tokio::test]
async fn a_resume_elsewhere_finds_only_the_callers_turn() -> anyhow::Result<()> {
    let (a, b) = pair("model:\n  deltaDelayMs: 20\nauth:\n  principalHeader: x-user\n").await;
    let body = common::user_says("chat-mine", "count to 200");
    let response = reqwest::Client::new()
        .post(format!("{}/stream", a.url))
        .header("content-type", "application/json")
        .header("x-user", "alice")
        .body(body.to_string())
        .send()
        .await?;
    let mut on_a = Box::pin(response.bytes_stream());
    let mut seen = String::new();
    read_until(&mut on_a, &mut seen, |s| s.contains("text-delta")).await;
    let path = "/api/chat/chat-mine/stream";
    assert_eq!(b.get_with(path, &[("x-user", "mallory")]).await.status, 204);
    let own = b.get_with(path, &[("x-user", "alice")]).await;
    assert_eq!(own.status, 200);
    assert!(own.body.ends_with("data: [DONE]\n\n"), "{}", own.body);
    Ok(())
}

/// A held turn on A, decided through B's API, goes on on A, and a resume
/// on B replays the question and follows the rest to the end.
#[tokio::test]
async fn a_held_turn_decided_and_resumed_on_another_instance() -> anyhow::Result<()> {
    let (a, b) = pair("toolConfirmation:\n  flow: hold\n").await;
    let mut on_a = Box::pin(
        a.open(&common::user_says("chat-held", "Send 50 USD to Hanako"))
            .await,
    );
    let mut seen = String::new();
    let question = read_to_question(&mut on_a, &mut seen).await;

    let mut on_b = Box::pin(
        reqwest::get(format!("{}/api/chat/chat-held/stream", b.url))
            .await?
            .bytes_stream(),
    );
    let mut resumed = String::new();
    read_until(&mut on_b, &mut resumed, asked).await;
    let decided = b.approve(&question).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    read_to_end(&mut on_a, &mut seen).await;
    read_to_end(&mut on_b, &mut resumed).await;

    assert_contains(&seen, r#""status":"completed""#);
    assert!(seen.ends_with("data: [DONE]\n\n"), "{seen}");
    assert_eq!(chunks_of(&resumed), chunks_of(&seen));
    assert_eq!(a.payments() + b.payments(), 1);
    Ok(())
}

/// What a user can multiply in Redis expires: a chat's remembered
/// approval and its approve-next budget (new chats are free to make), the
/// audit log's keys and their index. Each kind is found, and each has a
/// time to live (none had one).
#[tokio::test]
async fn what_a_user_can_multiply_expires() -> anyhow::Result<()> {
    use redis::AsyncCommands;
    let url = redis_url();
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let store = toolgate::store::Store::redis(&url, &prefix).await?;
    let config = toolgate::Config::from_yaml("store: {auditRetentionDays: 7}\n")?;
    let server = common::Server::with(config, move |app| app.with_store(store)).await;
    for (chat, answer) in [
        ("chat-remember", json!({"remember": "session"})),
        ("chat-budget", json!({"approveNext": 3})),
    ] {
        let first = server
            .chat(&common::user_says(chat, "Send 50 USD to Hanako"))
            .await;
        let mut approve = approval(chat, &first);
        let output = &mut approve["messages"][1]["parts"][1]["output"];
        for (key, value) in answer.as_object().into_iter().flatten() {
            output[key] = value.clone();
        }
        let paid = server.chat(&approve).await;
        assert!(transaction(&paid).is_some(), "{}", paid.body);
    }
    let client = redis::Client::open(url.as_str())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let keys: Vec<String> = conn.keys(format!("{prefix}*")).await?;
    let week = 7 * 24 * 3600 * 1000;
    let mut seen = std::collections::BTreeMap::new();
    for key in &keys {
        let rest = &key[prefix.len()..];
        let kind = ["budget:", "approval:", "audit:", "audit-index"]
            .into_iter()
            .find(|kind| rest.starts_with(kind));
        let Some(kind) = kind else { continue };
        let ttl: i64 = conn.pttl(key).await?;
        assert!((1..=week).contains(&ttl), "{rest}: {ttl} ms to live");
        *seen.entry(kind).or_insert(0) += 1;
    }
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        ["approval:", "audit-index", "audit:", "budget:"],
        "{keys:?}"
    );
    Ok(())
}

/// A Redis server of the test's own on a free loopback port, stopped
/// with it: its limits are changed (`maxclients`), which no other test
/// may see.
struct OwnRedis {
    child: std::process::Child,
    url: String,
}

impl OwnRedis {
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .must()
            .port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server: {e}"));
        let url = format!("redis://127.0.0.1:{port}/");
        let client = redis::Client::open(url.as_str()).must();
        common::wait::until("redis to start", || async {
            client.get_multiplexed_async_connection().await.is_ok()
        })
        .await;
        Self { child, url }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The clients Redis has connected now.
async fn connected_clients(conn: &mut redis::aio::MultiplexedConnection) -> usize {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(conn)
        .await
        .must();
    info.lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{info}"))
}

/// A turn of `user`'s on `server` that asks to pay and waits for the
/// answer (held): its body as it streams, and the question's id.
async fn held_question(
    server: &common::Server,
    user: &str,
    chat: &str,
) -> (
    impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + use<>,
    String,
    String,
) {
    let mut body = streamed(
        reqwest::Client::new()
            .post(format!("{}/stream", server.url))
            .header("content-type", "application/json")
            .header("x-user", user)
            .body(common::user_says(chat, "Send 50 USD to Hanako").to_string()),
    )
    .await;
    let mut seen = String::new();
    let id = read_to_question(&mut body, &mut seen).await;
    (body, id, seen)
}

/// The body of `request`'s answer as it streams; the answer is a 200.
async fn streamed(request: reqwest::RequestBuilder) -> impl Body + use<> {
    let response = request.send().await.must();
    assert_eq!(response.status(), 200);
    Box::pin(response.bytes_stream())
}

/// 80 resumes on B of a turn A runs hold one Redis connection on B, not
/// 80: with Redis' `maxclients` at 64, another user's held turn on B is
/// still decided and runs (it failed: "the confirmation store is
/// unavailable"), and the clients Redis counts stay few. When Redis
/// refuses new connections, B's `/readyz` says so (it said 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_resumes_of_a_remote_turn_hold_one_connection() -> anyhow::Result<()> {
    let redis = OwnRedis::start().await;
    let client = redis::Client::open(redis.url.as_str())?;
    let mut admin = client.get_multiplexed_async_connection().await?;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(64)
        .query_async(&mut admin)
        .await?;
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let yaml = "toolConfirmation: {flow: hold}\nauth: {principalHeader: x-user}\n";
    let server = || async {
        let store = toolgate::store::Store::redis(&redis.url, &prefix)
            .await
            .must();
        let config = toolgate::Config::from_yaml(yaml).must();
        // Ids of their own: two questions are asked, one on each.
        common::Server::with(config, move |app| {
            app.with_store(store).with_ids(toolgate::ids::Ids::random())
        })
        .await
    };
    let (a, b) = (server().await, server().await);
    let (_alice, _, _) = held_question(&a, "alice", "chat-alice").await;

    let http = reqwest::Client::new();
    let resumes = futures::future::join_all((0..80).map(|_| async {
        let mut body = streamed(
            http.get(format!("{}/api/chat/chat-alice/stream", b.url))
                .header("x-user", "alice"),
        )
        .await;
        let mut seen = String::new();
        read_until(&mut body, &mut seen, asked).await;
        body
    }))
    .await;
    assert_eq!(resumes.len(), 80);
    let clients = connected_clients(&mut admin).await;
    assert!(clients <= 16, "{clients} Redis clients for 80 resumes");

    // Bob's turn on B waits for his answer, given on A, and goes on.
    let (bob, id, mut seen) = held_question(&b, "bob", "chat-bob").await;
    let mut bob = Box::pin(bob);
    let decided = a.approve_with(id, &[("x-user", "bob")]).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    read_to_end(&mut bob, &mut seen).await;
    assert_contains(&seen, r#""status":"completed""#);
    assert_eq!(b.get("/readyz").await.status, 200);

    // Redis refuses every new connection: B is not ready.
    let now = connected_clients(&mut admin).await;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg(now)
        .query_async(&mut admin)
        .await?;
    let ready = b.get("/readyz").await;
    assert_eq!(ready.status, 503, "{}", ready.body);
    drop(resumes);
    Ok(())
}

/// A resume that would make an instance follow more turns of other
/// instances than `store.maxFollowedTurns` is refused with a clear 503;
/// more resumes of a turn it follows already are not.
#[tokio::test]
async fn followed_turns_are_capped_per_instance() -> anyhow::Result<()> {
    let yaml = "toolConfirmation: {flow: hold}\nstore: {maxFollowedTurns: 1}\n";
    let (a, b) = pair(yaml).await;
    let mut held = Vec::new();
    for chat in ["chat-1", "chat-2"] {
        let (body, _) = a
            .open_until(&common::user_says(chat, "Send 50 USD to Hanako"), |s| {
                s.contains("adk_request_confirmation")
            })
            .await;
        held.push(body);
    }
    let follow = |chat: &'static str| {
        let url = format!("{}/api/chat/{chat}/stream", b.url);
        async move {
            let response = reqwest::get(url).await.must();
            (response.status(), Box::pin(response.bytes_stream()))
        }
    };
    let first = follow("chat-1").await;
    let again = follow("chat-1").await;
    assert_eq!((first.0.as_u16(), again.0.as_u16()), (200, 200));
    let refused = b.get("/api/chat/chat-2/stream").await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(
        refused.json(),
        json!({"error": "too many turns of other instances followed at once (1); try again later"})
    );
    drop((first, again, held));
    Ok(())
}

/// One user's resumes on B of turns held on A take at most their share
/// of B's followed turns (429 beyond, as a user's other caps are), so
/// another user's resume there still goes through.
#[tokio::test]
async fn one_user_takes_only_their_share_of_the_followed_turns() -> anyhow::Result<()> {
    let yaml = "toolConfirmation: {flow: hold}\nauth: {principalHeader: x-user}\n\
                store: {maxFollowedTurns: 3, maxFollowedTurnsPerUser: 2}\n";
    let (a, b) = pair(yaml).await;
    let mut held = Vec::new();
    for (user, chat) in [
        ("mallory", "chat-m1"),
        ("mallory", "chat-m2"),
        ("mallory", "chat-m3"),
        ("alice", "chat-a"),
    ] {
        held.push(held_question(&a, user, chat).await.0);
    }
    let follow = |user: &'static str, chat: &'static str| {
        let request = reqwest::Client::new()
            .get(format!("{}/api/chat/{chat}/stream", b.url))
            .header("x-user", user);
        async move {
            let response = request.send().await.must();
            (response.status(), Box::pin(response.bytes_stream()))
        }
    };
    let mut following = Vec::new();
    // A second resume of a turn B follows takes no more of the share.
    for chat in ["chat-m1", "chat-m1", "chat-m2"] {
        let resumed = follow("mallory", chat).await;
        assert_eq!(resumed.0.as_u16(), 200, "{chat}");
        following.push(resumed);
    }
    // Its status first: a turn followed after all would stream on.
    let refused = follow("mallory", "chat-m3").await;
    assert_eq!(refused.0.as_u16(), 429);
    let refused = b
        .get_with("/api/chat/chat-m3/stream", &[("x-user", "mallory")])
        .await;
    assert!(refused.headers.contains_key("retry-after"));
    assert_eq!(
        refused.json(),
        json!({"error": "too many of this user's turns of other instances followed at once (at most 2); close one and try again"})
    );
    let alice = follow("alice", "chat-a").await;
    assert_eq!(alice.0.as_u16(), 200, "another user's resume goes through");
    drop((following, alice, held));
    Ok(())
}
