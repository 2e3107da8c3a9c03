//! Three toolgate processes on one Redis behind a real HAProxy (round
//! robin, no stickiness): a resume lands on another instance and gets
//! every chunk once; the instance holding a waiting turn is killed
//! (`kill -9`) and the turn is approved, taken over and finished through
//! the balancer, its call run once (also when a resume, over SSE or
//! `/live`, was already following it or came at once after the kill); 100 racing approvals through the
//! balancer run one call; a Redis restarted under the instances is a clear
//! 503, then works again. Compiled with the `cluster` feature; needs
//! `haproxy` and `redis-server` on the PATH (`scripts/test` installs them).

use crate::common::Must;
use crate::common::from_json;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common::body::{asked, chunks_of, question};
use crate::common::{self, Binary, redis_url, wait};

mod soak;

/// A free loopback port (bound, then let go for a child to take).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").must();
    listener.local_addr().must().port()
}

/// A child process killed with the test.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// HAProxy in front of the instances at `addrs` (`host:port`), its
/// config in `dir`: the process and its URL, once it serves.
async fn balancer(dir: &std::path::Path, addrs: &[String]) -> (Owned, String) {
    let port = free_port();
    let servers: String = addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| format!("  server s{i} {addr} check inter 200ms fall 1 rise 1\n"))
        .collect();
    // Round robin, no stickiness; SSE streams stay open as long as they
    // last (`timeout tunnel` does not apply to them: they are HTTP
    // responses, so `timeout server`/`client` are long).
    let config = format!(
        "global\n  maxconn 2048\ndefaults\n  mode http\n  timeout connect 2s\n  \
         timeout client 5m\n  timeout server 5m\n  timeout tunnel 1h\n  \
         option redispatch\n  retries 3\n\
         frontend toolgate\n  bind 127.0.0.1:{port}\n  default_backend instances\n\
         backend instances\n  balance roundrobin\n  option httpchk\n  \
         http-check send meth GET uri /livez ver HTTP/1.1 hdr host localhost\n  \
         http-response set-header x-served-by %[srv_name]\n{servers}"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).must();
    let child = Command::new("haproxy")
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdout(Stdio::null())
        // It says so when a killed instance goes down.
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("haproxy: {e}"));
    let url = format!("http://127.0.0.1:{port}");
    let livez = format!("{url}/livez");
    wait::until("the balancer to serve", || {
        let livez = livez.clone();
        async move { reqwest::get(livez).await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    (Owned(child), url)
}

/// Instances of toolgate on one Redis key prefix, and the balancer.
struct Cluster {
    dir: tempfile::TempDir,
    redis: String,
    prefix: String,
    instances: Vec<Option<Binary>>,
    /// More config for every instance.
    yaml: String,
    _haproxy: Owned,
    /// The balancer's URL.
    url: String,
}

impl Cluster {
    async fn start(redis: &str, n: usize) -> Self {
        Self::start_with(redis, n, "").await
    }

    /// Like [`Cluster::start`], each instance with more config.
    async fn start_with(redis: &str, n: usize, yaml: &str) -> Self {
        let dir = tempfile::tempdir().must();
        let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
        let mut cluster = Self {
            dir,
            redis: redis.to_owned(),
            prefix,
            instances: Vec::new(),
            yaml: yaml.to_owned(),
            _haproxy: Owned(Command::new("true").spawn().must()),
            url: String::new(),
        };
        for i in 0..n {
            let instance = cluster.instance(i);
            cluster.instances.push(Some(instance));
        }
        let addrs: Vec<String> = cluster
            .instances
            .iter()
            .flatten()
            .map(|b| b.url.trim_start_matches("http://").to_owned())
            .collect();
        let (haproxy, url) = balancer(cluster.dir.path(), &addrs).await;
        cluster._haproxy = haproxy;
        cluster.url = url;
        cluster
    }

    fn instance(&self, i: usize) -> Binary {
        let config = self.dir.path().join(format!("{i}.yaml"));
        std::fs::write(
            &config,
            format!(
                "store:\n  kind: redis\n  url: {}\n  keyPrefix: '{}'\n\
                 toolConfirmation:\n  signingKeys: [shared-signing-key-of-at-least-32-bytes]\n  flow: hold\n{}",
                self.redis, self.prefix, self.yaml
            ),
        )
        .must();
        Binary::serve_with(&["--config", &config.display().to_string()])
    }

    /// The instance haproxy calls `s{i}`.
    fn served_by(reply: &reqwest::Response) -> usize {
        reply
            .headers()
            .get("x-served-by")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix('s'))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no x-served-by: {:?}", reply.headers()))
    }

    /// `kill -9` of instance `i`.
    fn kill(&mut self, i: usize) {
        if let Some(binary) = self.instances[i].as_ref() {
            let killed = Command::new("kill")
                .args(["-KILL", &binary.pid().to_string()])
                .status()
                .unwrap_or_else(|e| panic!("kill: {e}"));
            assert!(killed.success());
        }
        self.instances[i] = None;
    }

    /// How many instances keep a heartbeat in Redis.
    fn heartbeats(&self) -> usize {
        let out = Command::new("redis-cli")
            .args(["-u", &self.redis, "--scan", "--pattern"])
            .arg(format!("{}instance:*", self.prefix))
            .output()
            .unwrap_or_else(|e| panic!("redis-cli: {e}"));
        String::from_utf8_lossy(&out.stdout).lines().count()
    }

    /// POSTs `body` through the balancer, on a connection of its own.
    async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        common::post_json(format!("{}{path}", self.url), body)
            .send()
            .await
            .must()
    }

    /// GETs `path` through the balancer, on a connection of its own.
    async fn get(&self, path: &str) -> reqwest::Response {
        reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .must()
    }
}

async fn body_of(reply: reqwest::Response) -> Value {
    let text = reply.text().await.must();
    from_json(&text)
}

/// Reads `body` into `seen` until `done` holds or it ends.
async fn read_until(
    body: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    seen: &mut String,
    done: impl Fn(&str) -> bool,
) {
    use futures::StreamExt;
    let read = async {
        while !done(seen) {
            match body.next().await {
                Some(Ok(piece)) => seen.push_str(&String::from_utf8_lossy(&piece)),
                None => return,
                Some(Err(e)) => panic!("the body failed after {seen}: {e}"),
            }
        }
    };
    tokio::time::timeout(wait::PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("timed out in {seen}"));
}

fn transactions(sse: &str) -> Vec<String> {
    chunks_of(sse)
        .into_iter()
        .filter(|c| c["type"] == "tool-output-available" && c["output"]["status"] == "completed")
        .filter_map(|c| c["output"]["transactionId"].as_str().map(str::to_owned))
        .collect()
}

/// Approves question `id` through the balancer; the payment's transaction.
async fn approve_and_pay(cluster: &Cluster, id: &str) -> String {
    let decided = cluster
        .post(
            &format!("/api/confirmations/{id}"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(decided.status(), 200);
    let decided = body_of(decided).await;
    decided["outcome"]["output"]["transactionId"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("not paid: {decided}"))
}

/// `sse`, a taken-over turn read to its end: one message (replayed or
/// followed, then continued), the payment `paid` once, the model's
/// follow-up, the `finish`; and a resume through the balancer replays the
/// ended turn to its end, for a client cut before it read it.
async fn finished_once(cluster: &Cluster, chat: &str, sse: &str, paid: &str) {
    let chunks = chunks_of(sse);
    let starts = chunks.iter().filter(|c| c["type"] == "start").count();
    assert_eq!(starts, 1, "one message: {sse}");
    assert_eq!(transactions(sse), [paid], "{sse}");
    assert!(
        chunks.iter().any(|c| c["type"] == "text-delta"),
        "the model's follow-up: {sse}"
    );
    assert_eq!(
        chunks.last().map(|c| c["type"].clone()),
        Some(json!("finish")),
        "{sse}"
    );
    let replay = cluster.get(&format!("/api/chat/{chat}/stream")).await;
    assert_eq!(replay.status(), 200);
    let replay = replay.text().await.unwrap_or_default();
    assert_eq!(chunks_of(&replay), chunks, "{replay}");
}

/// A held turn started through the balancer: its stream, the instance
/// that runs it, and what it said until it asked.
async fn held_turn(
    cluster: &Cluster,
    chat: &str,
) -> (
    impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
    usize,
    String,
) {
    let response = cluster
        .post("/stream", &common::user_says(chat, "Send 50 USD to Hanako"))
        .await;
    assert_eq!(response.status(), 200);
    let owner = Cluster::served_by(&response);
    let mut stream = Box::pin(response.bytes_stream());
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, asked).await;
    (stream, owner, seen)
}

/// A resume through the balancer that lands on another instance replays
/// the held turn from its start, every chunk once, and follows it to its
/// end once it is decided through the balancer.
#[tokio::test]
async fn a_resume_through_the_balancer_lands_elsewhere_and_gets_every_chunk_once() {
    let cluster = Cluster::start(&redis_url(), 3).await;
    let (mut on_owner, owner, mut seen) = held_turn(&cluster, "chat-lb-resume").await;
    // Round robin: within three requests one lands on another instance.
    let mut resumed = None;
    for _ in 0..6 {
        let response = cluster.get("/api/chat/chat-lb-resume/stream").await;
        assert_eq!(response.status(), 200);
        if Cluster::served_by(&response) != owner {
            resumed = Some(response);
            break;
        }
    }
    let resumed = resumed.unwrap_or_else(|| panic!("every resume landed on the owner"));
    let mut on_other = Box::pin(resumed.bytes_stream());
    let mut other = String::new();
    read_until(&mut on_other, &mut other, asked).await;
    let id = question(&seen);
    let decided = cluster
        .post(
            &format!("/api/confirmations/{id}"),
            &json!({"approved": true}),
        )
        .await;
    assert_eq!(decided.status(), 200);
    read_until(&mut on_owner, &mut seen, |_| false).await;
    read_until(&mut on_other, &mut other, |_| false).await;
    assert!(seen.ends_with("data: [DONE]\n\n"), "{seen}");
    assert_eq!(chunks_of(&other), chunks_of(&seen), "the resume elsewhere");
    assert_eq!(transactions(&seen).len(), 1, "{seen}");
}

/// `kill -9` of the instance holding a waiting turn; the question is
/// approved through the balancer, and a resume through it takes the turn
/// over: the call ran once (the approval's outcome is the one the turn
/// reports) and the turn finishes with the model's follow-up.
#[tokio::test]
async fn the_owner_of_a_held_turn_killed_the_turn_is_taken_over_and_finishes() {
    let mut cluster = Cluster::start(&redis_url(), 3).await;
    let (on_owner, owner, seen) = held_turn(&cluster, "chat-lb-kill").await;
    let id = question(&seen);
    // The reader leaves; the turn stays, waiting for a human.
    drop(on_owner);
    cluster.kill(owner);
    // The lease: the dead instance's heartbeat lapses.
    wait::until("the dead instance's heartbeat to lapse", || async {
        cluster.heartbeats() == 2
    })
    .await;
    let paid = approve_and_pay(&cluster, &id).await;
    let resumed = cluster.get("/api/chat/chat-lb-kill/stream").await;
    assert_eq!(resumed.status(), 200);
    let mut stream = Box::pin(resumed.bytes_stream());
    let mut again = String::new();
    read_until(&mut stream, &mut again, |_| false).await;
    finished_once(&cluster, "chat-lb-kill", &again, &paid).await;
}

/// A resume already following a held turn on another instance when the
/// turn's instance is killed (`kill -9`): the question is approved through
/// the balancer at once, and that same resume, once the dead instance's
/// heartbeat lapsed, takes the turn over and gets the rest; the call ran
/// once.
#[tokio::test]
async fn a_resume_following_a_held_turn_whose_owner_is_killed_gets_the_rest() {
    let mut cluster = Cluster::start(&redis_url(), 3).await;
    let (on_owner, owner, seen) = held_turn(&cluster, "chat-lb-follow").await;
    drop(on_owner);
    let id = question(&seen);
    let mut resumed = None;
    for _ in 0..6 {
        let response = cluster.get("/api/chat/chat-lb-follow/stream").await;
        assert_eq!(response.status(), 200);
        if Cluster::served_by(&response) != owner {
            resumed = Some(response);
            break;
        }
    }
    let resumed = resumed.unwrap_or_else(|| panic!("every resume landed on the owner"));
    let mut following = Box::pin(resumed.bytes_stream());
    let mut again = String::new();
    read_until(&mut following, &mut again, asked).await;
    cluster.kill(owner);
    // Before the dead instance's heartbeat lapses.
    let paid = approve_and_pay(&cluster, &id).await;
    read_until(&mut following, &mut again, |_| false).await;
    assert!(again.ends_with("data: [DONE]\n\n"), "{again}");
    finished_once(&cluster, "chat-lb-follow", &again, &paid).await;
}

/// A `/live` `resume` frame through the balancer right after the held
/// turn's instance was killed: the socket's instance takes the turn over
/// once the heartbeat lapsed, a `confirm` frame on it approves, and the
/// resume gets the rest, every chunk once.
#[tokio::test]
async fn a_live_resume_after_the_owner_is_killed_gets_the_taken_over_turn() {
    use crate::common::ws;
    let mut cluster = Cluster::start(&redis_url(), 3).await;
    let (on_owner, owner, seen) = held_turn(&cluster, "chat-lb-live").await;
    drop(on_owner);
    let id = question(&seen);
    cluster.kill(owner);
    let mut socket = ws::connect_to(&cluster.url).await;
    ws::send(
        &mut socket,
        json!({"type": "resume", "requestId": "r1", "id": "chat-lb-live", "headers": {}}),
    )
    .await;
    let mut frames = Vec::new();
    loop {
        let frame = next_frame(&mut socket).await;
        let found = frame["chunk"].to_string().contains("originalFunctionCall");
        assert_ne!(frame["type"], "no-active", "{frame}");
        frames.push(frame);
        if found {
            break;
        }
    }
    ws::send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": id, "confirmed": true}),
    )
    .await;
    loop {
        let frame = next_frame(&mut socket).await;
        let done =
            frame["requestId"] == "r1" && matches!(frame["type"].as_str(), Some("end" | "error"));
        frames.push(frame);
        if done {
            break;
        }
    }
    ws::check_sequence(&frames, "r1");
    let chunks: Vec<Value> = frames
        .iter()
        .filter(|f| f["type"] == "chunk" && f["requestId"] == "r1")
        .map(|f| f["chunk"].clone())
        .collect();
    let lines = ws::lines(&frames);
    assert_eq!(
        chunks.iter().filter(|c| c["type"] == "start").count(),
        1,
        "{lines}"
    );
    let paid: Vec<&Value> = chunks
        .iter()
        .filter(|c| c["type"] == "tool-output-available" && c["output"]["status"] == "completed")
        .collect();
    assert_eq!(paid.len(), 1, "{lines}");
    assert_eq!(
        frames.last().map(|f| f["type"].clone()),
        Some(json!("end")),
        "{lines}"
    );
    assert_eq!(
        chunks.last().map(|c| c["type"].clone()),
        Some(json!("finish")),
        "{lines}"
    );
}

/// The next frame, waiting as long as a takeover may take (the dead
/// instance's heartbeat lapsing).
async fn next_frame(socket: &mut crate::common::ws::Socket) -> Value {
    crate::common::ws::next_within(socket, wait::PATIENCE)
        .await
        .unwrap_or_else(|| panic!("no frame"))
}

/// `kill -9` of the instance streaming a model's answer: a resume through
/// the balancer replays what it said and ends honestly, with an error
/// that says so; the model step is not run again.
#[tokio::test]
async fn the_owner_of_a_streaming_turn_killed_a_resume_ends_with_an_honest_error() {
    let mut cluster = Cluster::start_with(&redis_url(), 2, "model:\n  deltaDelayMs: 20\n").await;
    let response = cluster
        .post("/stream", &common::user_says("chat-lb-cut", "count to 500"))
        .await;
    let owner = Cluster::served_by(&response);
    let mut stream = Box::pin(response.bytes_stream());
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, |s| s.contains("text-delta")).await;
    drop(stream);
    cluster.kill(owner);
    wait::until("the dead instance's heartbeat to lapse", || async {
        cluster.heartbeats() == 1
    })
    .await;
    let resumed = cluster.get("/api/chat/chat-lb-cut/stream").await;
    assert_eq!(resumed.status(), 200);
    let mut stream = Box::pin(resumed.bytes_stream());
    let mut again = String::new();
    read_until(&mut stream, &mut again, |_| false).await;
    let chunks = chunks_of(&again);
    assert_eq!(
        chunks.first().map(|c| c["type"].clone()),
        Some(json!("start"))
    );
    assert_eq!(
        chunks.last(),
        Some(&json!({"type": "error", "errorText": toolgate::run::OWNER_DIED})),
        "{again}"
    );
    assert!(again.ends_with("data: [DONE]\n\n"), "{again}");
    assert_eq!(
        cluster.get("/api/chat/chat-lb-cut/stream").await.status(),
        204
    );
}

/// A resume following a streaming turn on the other instance when the
/// turn's instance is killed: once its heartbeat lapsed, that resume ends
/// with the honest error instead of waiting for a stream nobody writes.
#[tokio::test]
async fn a_resume_following_a_streaming_turn_whose_owner_is_killed_ends_honestly() {
    let mut cluster = Cluster::start_with(&redis_url(), 2, "model:\n  deltaDelayMs: 20\n").await;
    let response = cluster
        .post(
            "/stream",
            &common::user_says("chat-lb-cut2", "count to 5000"),
        )
        .await;
    let owner = Cluster::served_by(&response);
    // The owner's own reader stays: it keeps the turn going.
    let mut on_owner = Box::pin(response.bytes_stream());
    let mut seen = String::new();
    read_until(&mut on_owner, &mut seen, |s| s.contains("text-delta")).await;
    let mut resumed = None;
    for _ in 0..4 {
        let response = cluster.get("/api/chat/chat-lb-cut2/stream").await;
        assert_eq!(response.status(), 200);
        if Cluster::served_by(&response) != owner {
            resumed = Some(response);
            break;
        }
    }
    let resumed = resumed.unwrap_or_else(|| panic!("every resume landed on the owner"));
    let mut following = Box::pin(resumed.bytes_stream());
    let mut again = String::new();
    read_until(&mut following, &mut again, |s| s.contains("text-delta")).await;
    cluster.kill(owner);
    drop(on_owner);
    read_until(&mut following, &mut again, |_| false).await;
    let chunks = chunks_of(&again);
    assert_eq!(
        chunks.last(),
        Some(&json!({"type": "error", "errorText": toolgate::run::OWNER_DIED})),
        "{again}"
    );
    assert!(again.ends_with("data: [DONE]\n\n"), "{again}");
}

/// 100 approvals of one question at once through the balancer: one call.
#[tokio::test]
async fn a_hundred_racing_approvals_through_the_balancer_run_one_call() {
    let cluster = Cluster::start(&redis_url(), 3).await;
    let (_held, _, seen) = held_turn(&cluster, "chat-lb-race").await;
    let id = question(&seen);
    let path = format!("/api/confirmations/{id}");
    let replies = futures::future::join_all((0..100).map(|_| async {
        let reply = cluster.post(&path, &json!({"approved": true})).await;
        let by = Cluster::served_by(&reply);
        let body = body_of(reply).await;
        (by, body["outcome"]["output"]["transactionId"].clone())
    }))
    .await;
    let instances: std::collections::BTreeSet<usize> = replies.iter().map(|(by, _)| *by).collect();
    assert_eq!(instances.len(), 3, "spread over every instance");
    let paid: std::collections::BTreeSet<String> =
        replies.iter().map(|(_, t)| t.to_string()).collect();
    assert_eq!(paid.len(), 1, "one payment: {paid:?}");
    assert!(replies[0].1.is_string(), "{:?}", replies[0]);
}

/// Redis restarted under the instances: requests get a clear 503, and
/// work again once it is back.
#[tokio::test]
async fn redis_restarted_is_a_clear_503_then_works_again() {
    let port = free_port();
    let redis = |port: u16| {
        Owned(
            Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("redis-server: {e}")),
        )
    };
    let mut server = redis(port);
    let url = format!("redis://127.0.0.1:{port}/");
    let up = || async {
        Command::new("redis-cli")
            .args(["-p", &port.to_string(), "ping"])
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"PONG"))
    };
    wait::until("redis to start", up).await;
    let cluster = Cluster::start(&url, 2).await;
    let list = "/api/confirmations?chatId=chat-lb-redis";
    assert_eq!(cluster.get(list).await.status(), 200);

    drop(server);
    wait::until_ok("a 503 while Redis is down", || async {
        let reply = cluster.get(list).await;
        let status = reply.status();
        let body = reply.text().await.unwrap_or_default();
        match status == 503 && body.contains("storage unavailable") {
            true => Ok(()),
            false => Err(format!("{status} {body}")),
        }
    })
    .await;

    server = redis(port);
    wait::until("every instance to work again", || async {
        let mut ok = true;
        for _ in 0..2 {
            ok &= cluster.get(list).await.status() == 200;
        }
        ok
    })
    .await;
    let (_held, _, seen) = held_turn(&cluster, "chat-lb-redis").await;
    assert!(asked(&seen));
    drop(server);
}
