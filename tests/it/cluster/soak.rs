//! The soak: three instances on one Redis behind HAProxy, `concurrency`
//! users for `secs` seconds, each sending turns one after another (a text
//! turn, then a payment through an HTTP tool it approves through the
//! balancer, and again), while one instance is `kill -9`'d and restarted
//! on its port every `kill_every` seconds. A user whose stream is cut
//! resumes through the balancer. It checks that every turn finished or
//! ended with the honest error (none hung, none lost), that every approved
//! payment ran exactly once (the HTTP tool's endpoint counts them), and
//! that every key under the soak's prefix expires (Redis stays bounded).
//! A run explains itself: it prints each kill and restart, and for each
//! turn that hung, was lost or ended unexpectedly, what it saw (each
//! request, the instance that served it (`x-served-by`) and its status,
//! each stream's chunk types), at seconds since the start.
//!
//! Not in `./scripts/test` (it runs minutes):
//!
//! ```sh
//! TOOLGATE_TEST_REDIS_URL=redis://127.0.0.1:6379/ \
//!   cargo test --features cluster --test it cluster::soak -- --ignored --nocapture
//! ```
//!
//! `TOOLGATE_SOAK_SECS` (300), `TOOLGATE_SOAK_CONCURRENCY` (64),
//! `TOOLGATE_SOAK_KILL_EVERY_SECS` (30) and `TOOLGATE_SOAK_SETTLE_SECS` (0:
//! how long to wait after the run for keys to expire; a question's record
//! lives its expiry and an hour more, so at least 3,800) change it.

use crate::common::Must;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use super::{Owned, asked, balancer, chunks_of, free_port, question};
use crate::common::{redis_url, wait};
use toolgate::run::OWNER_DIED;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How long a turn may take, takeovers and restarts included, before it
/// counts as hung.
const HUNG: Duration = Duration::from_secs(90);

/// How a user's turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum End {
    Finished,
    /// Its instance died while it was not waiting: the honest error.
    OwnerDied,
    /// Cut and not resumable, without its end seen.
    Lost,
    /// No end within [`HUNG`].
    Hung,
    /// Refused or failed before it started (an instance just killed).
    NotStarted,
    /// Anything else: a bug.
    Unexpected,
}

/// The HTTP tool's endpoint: how many times each payment `n` ran.
type Ran = Arc<Mutex<HashMap<u64, u32>>>;

async fn counter() -> (String, Ran) {
    let ran: Ran = Arc::default();
    let counted = ran.clone();
    let app = axum::Router::new().route(
        "/pay",
        axum::routing::post(move |body: String| {
            let counted = counted.clone();
            async move {
                let got: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let n = got["n"].as_u64().unwrap_or(u64::MAX);
                *counted
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(n)
                    .or_default() += 1;
                axum::Json(json!({"paid": n}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.must();
    let url = format!("http://{}/pay", listener.local_addr().must());
    // The soak's endpoint: it lives as long as the test's runtime.
    #[allow(clippy::disallowed_methods)]
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, ran)
}

/// One instance on a fixed port (the balancer's config names it), started
/// again there after it is killed.
struct Instance {
    port: u16,
    config: std::path::PathBuf,
    child: Option<Owned>,
}

impl Instance {
    fn start(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["serve", "--bind", &format!("127.0.0.1:{}", self.port)])
            .arg("--config")
            .arg(&self.config)
            .env("RUST_LOG", "toolgate=error")
            .stdout(Stdio::null())
            .spawn()
            .must();
        self.child = Some(Owned(child));
    }

    fn kill(&mut self) {
        if let Some(Owned(child)) = self.child.as_ref() {
            let _ = Command::new("kill")
                .args(["-KILL", &child.id().to_string()])
                .status();
        }
        self.child = None;
    }

    async fn up(&self) -> bool {
        reqwest::get(format!("http://127.0.0.1:{}/livez", self.port))
            .await
            .is_ok_and(|r| r.status() == 200)
    }
}

/// What a read of a stream came to.
enum Read {
    /// `[DONE]` came.
    Done,
    /// The condition held.
    Seen,
    /// The connection ended without `[DONE]`.
    Cut,
    /// Past the deadline.
    Late,
}

async fn read(
    body: &mut (impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    seen: &mut String,
    until: impl Fn(&str) -> bool,
    deadline: Instant,
) -> Read {
    loop {
        if seen.ends_with("data: [DONE]\n\n") {
            return Read::Done;
        }
        if until(seen) {
            return Read::Seen;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, body.next()).await {
            Err(_) => return Read::Late,
            Ok(Some(Ok(piece))) => seen.push_str(&String::from_utf8_lossy(&piece)),
            Ok(None | Some(Err(_))) => return Read::Cut,
        }
    }
}

/// How a stream that ended with `[DONE]` ended.
fn ended(seen: &str) -> End {
    let last = chunks_of(seen).pop().unwrap_or(Value::Null);
    match last["type"].as_str() {
        Some("finish") => End::Finished,
        Some("error") if last["errorText"] == OWNER_DIED => End::OwnerDied,
        _ => End::Unexpected,
    }
}

type Body = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// What one turn saw, for a turn that hung or was lost: each request with
/// the instance that served it (`x-served-by`) and its status, and the
/// chunk types each stream brought, at seconds since the soak started.
struct Trace {
    started: Instant,
    events: Vec<String>,
}

impl Trace {
    fn new(started: Instant) -> Self {
        Self {
            started,
            events: Vec::new(),
        }
    }

    fn note(&mut self, what: String) {
        let at = self.started.elapsed().as_secs_f64();
        self.events.push(format!("{at:.1}s {what}"));
    }

    /// A request's reply: who served it and with what status.
    fn reply(&mut self, what: &str, reply: &reqwest::Result<reqwest::Response>) {
        match reply {
            Ok(reply) => {
                let by = reply
                    .headers()
                    .get("x-served-by")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("?");
                self.note(format!("{what} {by} {}", reply.status().as_u16()));
            }
            Err(e) => self.note(format!("{what} failed: {e}")),
        }
    }

    /// The chunk types of one stream as read so far, runs folded (`text-delta×30`).
    fn chunks(&mut self, how: &str, seen: &str) {
        let mut runs: Vec<(String, usize)> = Vec::new();
        for chunk in chunks_of(seen) {
            let kind = chunk["type"].as_str().unwrap_or("?").to_owned();
            match runs.last_mut() {
                Some((last, n)) if *last == kind => *n += 1,
                _ => runs.push((kind, 1)),
            }
        }
        let kinds: Vec<String> = runs
            .into_iter()
            .map(|(kind, n)| if n > 1 { format!("{kind}×{n}") } else { kind })
            .collect();
        let done = if seen.ends_with("data: [DONE]\n\n") {
            " [DONE]"
        } else {
            ""
        };
        self.note(format!("{how}: {}{done}", kinds.join(" ")));
    }
}

/// A resume through the balancer, tried again while instances restart:
/// the replay's stream, or `None` (204: nothing to resume).
async fn resume(
    client: &reqwest::Client,
    url: &str,
    chat: &str,
    deadline: Instant,
    trace: &mut Trace,
) -> Option<Body> {
    while Instant::now() < deadline {
        let reply = client
            .get(format!("{url}/api/chat/{chat}/stream"))
            .send()
            .await;
        trace.reply("resume", &reply);
        if let Ok(reply) = reply {
            match reply.status().as_u16() {
                200 => return Some(Box::pin(reply.bytes_stream())),
                204 => return None,
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// Approves question `id` through the balancer, tried again while an
/// instance restarts; whether the payment ran, by its reply.
async fn approve(
    client: &reqwest::Client,
    url: &str,
    id: &str,
    n: u64,
    deadline: Instant,
    trace: &mut Trace,
) -> bool {
    while Instant::now() < deadline {
        let reply = client
            .post(format!("{url}/api/confirmations/{id}"))
            .header("content-type", "application/json")
            .body(json!({"approved": true}).to_string())
            .send()
            .await;
        trace.reply("approve", &reply);
        if let Ok(reply) = reply
            && reply.status().as_u16() < 500
        {
            let text = reply.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let paid = body["outcome"]["output"]["paid"] == n;
            if !paid {
                trace.note(format!("approve said {text}"));
            }
            return paid;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// One turn of one user: sent, read (resumed through the balancer when its
/// stream is cut), and for a payment (`pay`) its question approved.
async fn turn(
    client: &reqwest::Client,
    url: &str,
    chat: &str,
    pay: Option<u64>,
    trace: &mut Trace,
) -> (End, bool) {
    let deadline = Instant::now() + HUNG;
    let text = match pay {
        Some(n) => format!(r#"use pay_counter with {{"n": {n}}}"#),
        None => "count to 30".to_owned(),
    };
    let sent = client
        .post(format!("{url}/stream"))
        .header("content-type", "application/json")
        .body(crate::common::user_says(chat, &text).to_string())
        .send()
        .await;
    trace.reply("post", &sent);
    let mut body: Body = match sent {
        Ok(reply) if reply.status() == 200 => Box::pin(reply.bytes_stream()),
        _ => return (End::NotStarted, false),
    };
    let mut seen = String::new();
    let mut paid = false;
    let mut approved = false;
    loop {
        let wants_question = pay.is_some() && !approved;
        let until = |s: &str| wants_question && asked(s);
        match read(&mut body, &mut seen, until, deadline).await {
            Read::Done => {
                trace.chunks("done", &seen);
                return (ended(&seen), paid);
            }
            Read::Late => {
                trace.chunks("late", &seen);
                return (End::Hung, paid);
            }
            Read::Seen => {
                trace.chunks("asked", &seen);
                let n = pay.unwrap_or_default();
                paid = approve(client, url, &question(&seen), n, deadline, trace).await;
                approved = true;
            }
            Read::Cut => {
                trace.chunks("cut", &seen);
                let finished = chunks_of(&seen).iter().any(|c| c["type"] == "finish");
                match resume(client, url, chat, deadline, trace).await {
                    Some(again) => {
                        body = again;
                        // The replay starts from the turn's first chunk.
                        seen.clear();
                    }
                    None if finished => return (End::Finished, paid),
                    None if Instant::now() >= deadline => return (End::Hung, paid),
                    None => return (End::Lost, paid),
                }
            }
        }
    }
}

/// Every key under `prefix`: how many, which never expire, and Redis's
/// memory in use.
async fn keys(redis: &str, prefix: &str) -> (usize, Vec<String>, String) {
    let client = redis::Client::open(redis).must();
    let mut conn = client.get_multiplexed_async_connection().await.must();
    let mut all: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .must();
        all.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let mut forever = Vec::new();
    for keys in all.chunks(1000) {
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("PTTL").arg(key);
        }
        let ttls: Vec<i64> = pipe.query_async(&mut conn).await.must();
        for (key, ttl) in keys.iter().zip(ttls) {
            if ttl == -1 {
                forever.push(key.trim_start_matches(prefix).to_owned());
            }
        }
    }
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .must();
    let used = info
        .lines()
        .find(|l| l.starts_with("used_memory_human:"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    (all.len(), forever, used)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "minutes long: cargo test --features cluster --test it cluster::soak -- --ignored"]
async fn soak() -> anyhow::Result<()> {
    let secs = env_or("TOOLGATE_SOAK_SECS", 300);
    let concurrency = env_or("TOOLGATE_SOAK_CONCURRENCY", 64);
    let kill_every = Duration::from_secs(env_or("TOOLGATE_SOAK_KILL_EVERY_SECS", 30));
    let settle = Duration::from_secs(env_or("TOOLGATE_SOAK_SETTLE_SECS", 0));
    let redis = redis_url();
    let prefix = format!("soak-{}:", uuid::Uuid::new_v4().simple());
    let dir = tempfile::tempdir()?;
    let (pay_url, ran) = counter().await;
    let yaml = format!(
        "store:\n  kind: redis\n  url: {redis}\n  keyPrefix: '{prefix}'\n\
         toolConfirmation:\n  signingKeys: [shared-signing-key-of-at-least-32-bytes]\n  flow: hold\n  expirySecs: 120\n\
         model:\n  deltaDelayMs: 30\n\
         stream:\n  maxTurns: 1024\n  maxTurnsPerUser: 1024\n\
         tools:\n  http:\n    - name: pay_counter\n      description: Pay, counted\n      \
         parameters: {{type: object, properties: {{n: {{type: integer}}}}}}\n      url: {pay_url}\n"
    );
    let mut instances: Vec<Instance> = (0..3)
        .map(|i| {
            let config = dir.path().join(format!("{i}.yaml"));
            std::fs::write(&config, &yaml).must();
            Instance {
                port: free_port(),
                config,
                child: None,
            }
        })
        .collect();
    for instance in &mut instances {
        instance.start();
    }
    for instance in &instances {
        wait::until("an instance to serve", || instance.up()).await;
    }
    let addrs: Vec<String> = instances
        .iter()
        .map(|i| format!("127.0.0.1:{}", i.port))
        .collect();
    let (_haproxy, url) = balancer(dir.path(), &addrs).await;

    let started = Instant::now();
    let until = started + Duration::from_secs(secs);
    let next_payment = Arc::new(AtomicU64::new(1));
    let users = (0..concurrency).map(|user| {
        let (url, next_payment) = (url.clone(), next_payment.clone());
        async move {
            let client = reqwest::Client::new();
            let mut ends: Vec<(End, Option<(u64, bool)>)> = Vec::new();
            let mut i = 0u64;
            while Instant::now() < until {
                let chat = format!("soak-{user}-{i}");
                let pay = (i % 2 == 1).then(|| next_payment.fetch_add(1, Ordering::Relaxed));
                let mut trace = Trace::new(started);
                let (end, paid) = turn(&client, &url, &chat, pay, &mut trace).await;
                if matches!(end, End::Lost | End::Hung | End::Unexpected) {
                    println!("soak: {end:?} {chat}:\n  {}", trace.events.join("\n  "));
                }
                ends.push((end, pay.map(|n| (n, paid))));
                i += 1;
            }
            ends
        }
    });
    let killer = async {
        let mut kills = 0usize;
        loop {
            let at = started + kill_every * (u32::try_from(kills).unwrap_or(u32::MAX) + 1);
            if at >= until {
                return kills;
            }
            tokio::time::sleep_until(at.into()).await;
            let instance = &mut instances[kills % 3];
            println!(
                "soak: {:.1}s kill -9 s{} ({} kills so far)",
                started.elapsed().as_secs_f64(),
                kills % 3,
                kills
            );
            instance.kill();
            instance.start();
            let instance = &*instance;
            wait::until("a killed instance to serve again", || instance.up()).await;
            println!(
                "soak: {:.1}s s{} serves again",
                started.elapsed().as_secs_f64(),
                kills % 3
            );
            kills += 1;
        }
    };
    let (ends, kills) = tokio::join!(futures::future::join_all(users), killer);
    let elapsed = started.elapsed();

    let mut counts: HashMap<End, usize> = HashMap::new();
    let (mut approved_and_ran, mut payments) = (Vec::new(), Vec::new());
    for (end, pay) in ends.iter().flatten() {
        *counts.entry(*end).or_default() += 1;
        if let Some((n, paid)) = pay {
            payments.push(*n);
            if *paid {
                approved_and_ran.push(*n);
            }
        }
    }
    let ran = ran.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let twice: Vec<(&u64, &u32)> = ran.iter().filter(|(_, times)| **times > 1).collect();
    let not_run: Vec<&u64> = approved_and_ran
        .iter()
        .filter(|n| ran.get(n).copied() != Some(1))
        .collect();
    let (keys_after, forever, used) = keys(&redis, &prefix).await;
    println!(
        "soak: {} s, {concurrency} users, {kills} kills: {} turns ({} payments, {} approved and \
         ran, {} executions): {counts:?}; Redis: {keys_after} keys under the prefix, {} without \
         a TTL {forever:?}, {used}",
        elapsed.as_secs(),
        counts.values().sum::<usize>(),
        payments.len(),
        approved_and_ran.len(),
        ran.values().sum::<u32>(),
        forever.len(),
    );
    for instance in &mut instances {
        instance.kill();
    }
    if !settle.is_zero() {
        tokio::time::sleep(settle).await;
        let (left, _, used) = keys(&redis, &prefix).await;
        println!(
            "soak: {left} keys under the prefix {} s after the run, {used}",
            settle.as_secs()
        );
        assert!(left <= forever.len(), "keys did not expire: {left}");
    }
    assert!(twice.is_empty(), "payments run more than once: {twice:?}");
    assert!(
        not_run.is_empty(),
        "approved, reported paid, not run once: {not_run:?}"
    );
    for bad in [End::Lost, End::Hung, End::Unexpected] {
        assert_eq!(counts.get(&bad), None, "{bad:?}: {counts:?}");
    }
    assert!(
        counts.get(&End::Finished).copied().unwrap_or(0) > 0,
        "nothing finished: {counts:?}"
    );
    // Every key but the bounded ones (the audit log and the like) expires.
    assert!(forever.len() <= 16, "keys that never expire: {forever:?}");
    Ok(())
}
