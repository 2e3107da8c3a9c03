//! toolgate's load generator: SSE-aware, against a toolgate it starts (the
//! release binary next to this example) or one at `--url`.
//!
//! ```sh
//! cargo build --release --bin toolgate --example load
//! target/release/examples/load w1 --concurrency 1,64,256
//! target/release/examples/load w2 --concurrency 64
//! target/release/examples/load w2 --store sqlite --concurrency 1
//! target/release/examples/load w3 --streams 10000
//! target/release/examples/load w4 --streams 1000
//! target/release/examples/load w4 --streams 1,4,100 --deltas 64 --gap-ms 20 --secs 60
//! taskset -c 1 target/release/examples/load --server-cpus 0 w4 --streams 1
//! target/release/examples/load w5 --concurrency 1,64,256
//! ```
//!
//! Each run prints one JSON line per measurement: turns/s, chunks/s, time
//! to first chunk and to `[DONE]` (p50, p99, p99.9, max, in ms), for W2 from
//! sending the approval to the tool's result, errors, and the server's
//! peak RSS.

// A load generator is a client with no shutdown to wait for: its workers
// are joined or dropped with its runtime.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Body;
use axum::response::Response;
use clap::{Parser, Subcommand};
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    workload: Workload,
    /// A running toolgate to load instead of starting one (W1, W2 only).
    #[arg(long, global = true)]
    url: Option<String>,
    /// Seconds each measurement runs.
    #[arg(long, global = true, default_value_t = 10)]
    secs: u64,
    /// The CPUs the server under test runs on (`taskset -c`, e.g. `0`):
    /// with the load generator on the others (`taskset -c 1 load …`), the
    /// two do not take each other's core. The W4 mock runs beside the
    /// load generator, as the world outside the server does.
    #[arg(long, global = true)]
    server_cpus: Option<String>,
}

#[derive(Subcommand)]
enum Workload {
    /// `count to 100`, as fast as the server answers.
    W1 {
        #[arg(long, value_delimiter = ',', default_value = "1,64,256")]
        concurrency: Vec<usize>,
    },
    /// The confirmation round trip: the request, then the approving follow-up.
    W2 {
        #[arg(long, value_delimiter = ',', default_value = "64")]
        concurrency: Vec<usize>,
        /// The store the confirmations are kept in: memory, or sqlite (a
        /// file in the temporary directory, made afresh).
        #[arg(long, default_value = "memory")]
        store: String,
    },
    /// Open streams on a slow model, held: server memory per open stream.
    W3 {
        #[arg(long, default_value_t = 10_000)]
        streams: usize,
    },
    /// Proxy overhead: an OpenAI-compatible mock, directly, through
    /// toolgate and through a bare axum + reqwest proxy, interleaved. The
    /// anchors' method (added time to first token, a mock sending 64
    /// deltas 20 ms apart): `--deltas 64 --gap-ms 20`.
    W4 {
        /// Streams open at once; one run per value.
        #[arg(long, value_delimiter = ',', default_value = "1000")]
        streams: Vec<usize>,
        /// Text deltas in each of the mock's answers.
        #[arg(long, default_value_t = 20)]
        deltas: u32,
        /// Milliseconds between two of the mock's deltas (the first at once).
        #[arg(long, default_value_t = 50)]
        gap_ms: u64,
        /// Seconds left out at the start of each run (connections opening).
        #[arg(long, default_value_t = 2)]
        warm_up: u64,
        /// The bare proxy's client: `reqwest` (as toolgate's), or `hyper`.
        #[arg(long, default_value = "reqwest")]
        bare_client: String,
    },
    /// The ceiling: a bare axum handler streaming W1's bytes, pre-serialized.
    W5 {
        #[arg(long, value_delimiter = ',', default_value = "1,64,256")]
        concurrency: Vec<usize>,
    },
    /// The protocol's floor: a bare axum handler doing the work any server
    /// of the protocol does for W1's request, and nothing else: it reads
    /// the request's JSON, makes each chunk, serializes each as an event
    /// and streams them.
    W6 {
        #[arg(long, value_delimiter = ',', default_value = "1,64,256")]
        concurrency: Vec<usize>,
    },
    /// (internal) The W5 and W3 baseline server.
    #[command(hide = true)]
    Baseline,
    /// (internal) The W6 server.
    #[command(hide = true)]
    Floor,
    /// (internal) W4's bare proxy: an axum handler that posts to the mock
    /// and streams its answer back as it comes.
    #[command(hide = true)]
    BareProxy {
        #[arg(long)]
        upstream: String,
        /// `reqwest`, or `hyper` (hyper-util's pooled client alone).
        #[arg(long, default_value = "reqwest")]
        client: String,
    },
    /// (internal) The W4 upstream: an OpenAI-compatible stream of text deltas.
    #[command(hide = true)]
    MockOpenai {
        #[arg(long, default_value_t = 20)]
        deltas: u32,
        #[arg(long, default_value_t = 50)]
        gap_ms: u64,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let secs = Duration::from_secs(cli.secs);
    let pin = cli.server_cpus.as_deref();
    match cli.workload {
        Workload::Baseline => serve(baseline()).await,
        Workload::Floor => serve(floor()).await,
        Workload::MockOpenai { deltas, gap_ms } => {
            serve(mock_openai(deltas, Duration::from_millis(gap_ms))).await
        }
        Workload::BareProxy { upstream, client } => match client.as_str() {
            "reqwest" => serve(bare_proxy(upstream)?).await,
            "hyper" => serve(bare_hyper_proxy(upstream)?).await,
            other => bail!("unknown client `{other}`: reqwest or hyper"),
        },
        Workload::W1 { concurrency } => {
            let server = Target::toolgate(cli.url, "store:\n  kind: memory\n", pin)?;
            count_to_100(&server, "w1", concurrency, secs).await;
            Ok(())
        }
        Workload::W2 { concurrency, store } => {
            let config = match store.as_str() {
                "memory" => "store:\n  kind: memory\n".to_owned(),
                "sqlite" => {
                    let file = std::env::temp_dir()
                        .join(format!("toolgate-load-{}.sqlite3", std::process::id()));
                    let _ = std::fs::remove_file(&file);
                    format!("store:\n  kind: sqlite\n  path: {}\n", file.display())
                }
                other => bail!("unknown store `{other}`: memory or sqlite"),
            };
            let server = Target::toolgate(cli.url, &config, pin)?;
            for c in concurrency {
                let mut report = drive(&server.url, c, secs, |_| Turn::RoundTrip).await;
                report.print(&format!("w2-{store}"), c, server.peak_rss_kib());
            }
            Ok(())
        }
        Workload::W5 { concurrency } => {
            let server = Target::spawn_self(&["baseline"], pin)?;
            count_to_100(&server, "w5", concurrency, secs).await;
            Ok(())
        }
        Workload::W6 { concurrency } => {
            let server = Target::spawn_self(&["floor"], pin)?;
            count_to_100(&server, "w6", concurrency, secs).await;
            Ok(())
        }
        Workload::W3 { streams } => {
            // Every stream comes from this one address: the default cap per
            // peer (a quarter of the connection cap) would close the rest.
            let config = format!(
                "store:\n  kind: memory\nmodel:\n  deltaDelayMs: 1000\nstream:\n  maxTurnsPerUser: 1000000\n  maxTurns: 1000000\nserver:\n  maxConnectionsPerPeer: {}\n",
                streams + 64
            );
            let toolgate = Target::toolgate(cli.url, &config, pin)?;
            let per = held_streams(&toolgate, streams, "/stream").await?;
            let baseline = Target::spawn_self(&["baseline"], pin)?;
            let bare = held_streams(&baseline, streams, "/hold").await?;
            println!(
                "{}",
                json!({"workload": "w3", "streams": streams, "toolgateKiBPerStream": per, "bareAxumKiBPerStream": bare})
            );
            Ok(())
        }
        Workload::W4 {
            streams,
            deltas,
            gap_ms,
            warm_up,
            bare_client,
        } => {
            let mock = Mock { deltas, gap_ms };
            for n in streams {
                let warm_up = Duration::from_secs(warm_up);
                w4(n, &mock, secs, warm_up, &bare_client, pin).await?;
            }
            Ok(())
        }
    }
}

/// What one worker sends, again and again.
#[derive(Clone)]
enum Turn {
    One(Value),
    RoundTrip,
}

fn say(text: &str) -> Value {
    json!({
        "id": format!("load-{}", uuid_like()),
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]
    })
}

fn uuid_like() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{:x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// One streamed answer as the client saw it.
struct Seen {
    first: Duration,
    done: Duration,
    /// To the first bytes of a tool's result (`tool-output-available`).
    output: Option<Duration>,
    chunks: usize,
    body: Vec<u8>,
}

/// What a tool's result arrives in.
const OUTPUT: &[u8] = b"\"type\":\"tool-output-available\"";

/// POSTs `body` as JSON.
async fn send_json(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
) -> reqwest::Result<reqwest::Response> {
    let request = client.post(url).header("content-type", "application/json");
    request.body(body.to_string()).send().await
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> anyhow::Result<Seen> {
    let start = Instant::now();
    let response = send_json(client, url, body).await?;
    if !response.status().is_success() {
        bail!("HTTP {}", response.status());
    }
    let mut stream = response.bytes_stream();
    let (mut first, mut output) = (None, None);
    let mut body = Vec::new();
    while let Some(piece) = stream.next().await {
        let piece = piece?;
        first.get_or_insert_with(|| start.elapsed());
        // Looked for in what arrived, from just before this piece.
        let from = body.len().saturating_sub(OUTPUT.len());
        body.extend_from_slice(&piece);
        if output.is_none() && body[from..].windows(OUTPUT.len()).any(|w| w == OUTPUT) {
            output = Some(start.elapsed());
        }
    }
    let done = start.elapsed();
    if !body.ends_with(b"data: [DONE]\n\n") {
        bail!("the stream did not end with [DONE]");
    }
    let chunks = body.windows(6).filter(|w| w == b"data: ").count() - 1;
    Ok(Seen {
        first: first.unwrap_or(done),
        done,
        output,
        chunks,
        body,
    })
}

/// The follow-up that approves the question a first answer asked.
fn approval(chat: &str, first: &[u8]) -> anyhow::Result<Value> {
    let text = String::from_utf8_lossy(first);
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let message_id = chunks
        .iter()
        .find(|c| c["type"] == "start")
        .map(|c| c["messageId"].clone())
        .context("no start chunk")?;
    let ask = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .context("no question")?;
    Ok(json!({
        "id": chat, "messageId": message_id,
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]},
            {"id": message_id, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-adk_request_confirmation", "toolCallId": ask["toolCallId"], "state": "output-available",
                 "input": ask["input"], "output": {"confirmed": true}, "callProviderMetadata": ask["providerMetadata"]}
            ]}
        ]
    }))
}

async fn one_turn(client: &reqwest::Client, url: &str, turn: &Turn) -> anyhow::Result<Seen> {
    let stream = format!("{url}/stream");
    match turn {
        Turn::One(body) => {
            let mut body = body.clone();
            body["id"] = json!(format!("load-{}", uuid_like()));
            post(client, &stream, &body).await
        }
        Turn::RoundTrip => {
            let chat = format!("load-{}", uuid_like());
            let mut ask = say("Send 50 USD to Hanako");
            ask["id"] = json!(chat);
            let first = post(client, &stream, &ask).await?;
            let second = post(client, &stream, &approval(&chat, &first.body)?).await?;
            if !String::from_utf8_lossy(&second.body).contains("\"status\":\"completed\"") {
                bail!("the approved payment did not complete");
            }
            Ok(Seen {
                first: first.first,
                done: first.done + second.done,
                // From sending the approval to its tool's result.
                output: second.output,
                chunks: first.chunks + second.chunks,
                body: Vec::new(),
            })
        }
    }
}

#[derive(Default)]
struct Report {
    turns: usize,
    chunks: usize,
    errors: usize,
    first: Vec<Duration>,
    output: Vec<Duration>,
    done: Vec<Duration>,
    elapsed: Duration,
    first_error: Option<String>,
    /// The server's user and system CPU time over the run, in clock ticks
    /// (`/proc`'s hundredths of a second), when this run started it.
    server_cpu: Option<(u64, u64)>,
}

impl Report {
    fn print(&mut self, workload: &str, concurrency: usize, rss: Option<u64>) {
        let secs = self.elapsed.as_secs_f64();
        println!(
            "{}",
            json!({
                "workload": workload,
                "concurrency": concurrency,
                "turns": self.turns,
                "turnsPerSec": round(self.turns as f64 / secs),
                "chunksPerSec": round(self.chunks as f64 / secs),
                "firstChunkMs": percentiles(&mut self.first),
                "doneMs": percentiles(&mut self.done),
                "approvalToToolResultMs": percentiles(&mut self.output),
                "errors": self.errors,
                "firstError": self.first_error,
                "serverPeakRssKiB": rss,
                "serverCpuUsPerTurn": self.server_cpu.map(|(user, sys)| {
                    let per = |ticks: u64| round(ticks as f64 * 1e4 / self.turns.max(1) as f64);
                    json!({"user": per(user), "sys": per(sys)})
                }),
            })
        );
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn percentiles(samples: &mut [Duration]) -> Value {
    if samples.is_empty() {
        return Value::Null;
    }
    samples.sort_unstable();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        (samples[i].as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
    };
    json!({"p50": at(0.5), "p99": at(0.99), "p999": at(0.999), "max": at(1.0)})
}

/// `concurrency` workers sending `turn` for `secs`.
async fn drive(
    url: &str,
    concurrency: usize,
    secs: Duration,
    turn: impl Fn(usize) -> Turn,
) -> Report {
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap_or_default();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|i| {
            let (client, url, stop, turn) = (client.clone(), url.to_owned(), stop.clone(), turn(i));
            tokio::spawn(async move {
                let mut report = Report::default();
                while !stop.load(Ordering::Relaxed) {
                    match one_turn(&client, &url, &turn).await {
                        Ok(seen) => {
                            report.turns += 1;
                            report.chunks += seen.chunks;
                            report.first.push(seen.first);
                            report.done.push(seen.done);
                            report.output.extend(seen.output);
                        }
                        Err(e) => {
                            report.errors += 1;
                            report.first_error.get_or_insert(e.to_string());
                        }
                    }
                }
                report
            })
        })
        .collect();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let mut total = Report::default();
    for worker in workers {
        if let Ok(report) = worker.await {
            total.turns += report.turns;
            total.chunks += report.chunks;
            total.errors += report.errors;
            total.first.extend(report.first);
            total.done.extend(report.done);
            total.output.extend(report.output);
            if total.first_error.is_none() {
                total.first_error = report.first_error;
            }
        }
    }
    total.elapsed = started.elapsed();
    total
}

/// Opens `n` streams at `path`, waits until each has its first bytes, and
/// returns the server's memory growth per stream in KiB.
async fn held_streams(server: &Target, n: usize, path: &str) -> anyhow::Result<f64> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A server at --url: the streams are held, but its memory is not read.
    let before = server.rss_kib().unwrap_or(0);
    let url = format!("{}{path}", server.url);
    let (opened, mut open) = tokio::sync::mpsc::channel(n.max(1));
    let mut holders = Vec::with_capacity(n);
    // Streams at once are connections at once: HTTP/1.1 holds one per stream.
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    for i in 0..n {
        let (url, opened, client) = (url.clone(), opened.clone(), client.clone());
        holders.push(tokio::spawn(async move {
            let mut body = say("count to 100000");
            body["id"] = json!(format!("held-{i}"));
            let Ok(response) = send_json(&client, &url, &body).await else {
                let _ = opened.send(false).await;
                return;
            };
            let mut stream = response.bytes_stream();
            let first = stream.next().await.is_some_and(|p| p.is_ok());
            let _ = opened.send(first).await;
            // Keep reading, as a client would, until dropped.
            while stream.next().await.is_some() {}
        }));
    }
    let mut ok = 0;
    for _ in 0..n {
        if open.recv().await == Some(true) {
            ok += 1;
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = server.rss_kib().unwrap_or(0);
    for holder in holders {
        holder.abort();
    }
    if ok < n {
        bail!("only {ok} of {n} streams opened");
    }
    Ok(round((after.saturating_sub(before)) as f64 / n as f64))
}

/// The W4 mock's answer: `deltas` text deltas, the first at once, then
/// one every `gap_ms`.
struct Mock {
    deltas: u32,
    gap_ms: u64,
}

/// W4: time to the first text through toolgate and through the bare proxy
/// against directly, on the same mock upstream, `streams` workers taking
/// the three in turn. The bare proxy runs where toolgate does
/// (`--server-cpus`): what a proxy costs on this machine before it does
/// anything of its own.
async fn w4(
    streams: usize,
    mock: &Mock,
    secs: Duration,
    warm_up: Duration,
    bare_client: &str,
    pin: Option<&str>,
) -> anyhow::Result<()> {
    let (deltas, gap) = (mock.deltas.to_string(), mock.gap_ms.to_string());
    let args = ["mock-openai", "--deltas", &deltas, "--gap-ms", &gap];
    let mock_server = Target::spawn_self(&args, None)?;
    let config = format!(
        "store:\n  kind: memory\nmodel:\n  provider: openai\n  model: mock\n  baseUrl: {}/v1\nstream:\n  maxTurnsPerUser: 1000000\n  maxTurns: 1000000\n",
        mock_server.url
    );
    let toolgate = Target::toolgate(None, &config, pin)?;
    let bare = Target::spawn_self(
        &[
            "bare-proxy",
            "--upstream",
            &mock_server.url,
            "--client",
            bare_client,
        ],
        pin,
    )?;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(streams * 3)
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));
    // What an OpenAI client would send the mock itself.
    let direct_body =
        json!({"model": "mock", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let workers: Vec<_> = (0..streams)
        .map(|i| {
            let client = client.clone();
            let stop = stop.clone();
            let direct = format!("{}/v1/chat/completions", mock_server.url);
            let through = format!("{}/stream", toolgate.url);
            let proxied_bare = format!("{}/stream", bare.url);
            let direct_body = direct_body.clone();
            tokio::spawn(async move {
                // Streams open one by one over the first second; what the
                // warm-up measures (connections opening) is left out.
                tokio::time::sleep(Duration::from_secs(1) * i as u32 / streams as u32).await;
                let warm = Instant::now() + warm_up;
                let mut sides: [Vec<Duration>; 3] = Default::default();
                let mut errors = 0usize;
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let mut body = say("hi");
                    body["id"] = json!(format!("w4-{i}-{n}"));
                    let side = n % 3;
                    let result = match side {
                        0 => first_text(&client, &direct, &direct_body, b"\"content\":\"").await,
                        1 => first_text(&client, &through, &body, b"text-delta").await,
                        _ => first_text(&client, &proxied_bare, &body, b"\"content\":\"").await,
                    };
                    match result {
                        Ok(took) if Instant::now() > warm => sides[side].push(took),
                        Ok(_) => {}
                        Err(_) => errors += 1,
                    }
                }
                (sides, errors)
            })
        })
        .collect();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let (mut plain, mut proxied, mut bare_proxied, mut errors) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    for worker in workers {
        if let Ok(([a, b, c], e)) = worker.await {
            plain.extend(a);
            proxied.extend(b);
            bare_proxied.extend(c);
            errors += e;
        }
    }
    let direct = percentiles(&mut plain);
    let through = percentiles(&mut proxied);
    let through_bare = percentiles(&mut bare_proxied);
    let added_by = |side: &Value, q: &str| {
        let ms = side[q].as_f64().unwrap_or(0.0) - direct[q].as_f64().unwrap_or(0.0);
        (ms * 1000.0).round() / 1000.0
    };
    let added = |q: &str| added_by(&through, q);
    let added_bare = |q: &str| added_by(&through_bare, q);
    println!(
        "{}",
        json!({
            "workload": "w4", "streams": streams, "deltas": mock.deltas, "gapMs": mock.gap_ms,
            "directFirstTextMs": direct, "throughToolgateFirstTextMs": through,
            "addedMs": {"p50": added("p50"), "p99": added("p99"), "p999": added("p999")},
            "bareProxyClient": bare_client,
            "throughBareProxyFirstTextMs": through_bare,
            "bareProxyAddedMs": {"p50": added_bare("p50"), "p99": added_bare("p99"), "p999": added_bare("p999")},
            "samples": {"direct": plain.len(), "throughToolgate": proxied.len(), "throughBareProxy": bare_proxied.len()},
            "errors": errors,
            "serverPeakRssKiB": toolgate.peak_rss_kib(),
        })
    );
    Ok(())
}

/// One turn each, "count to 100", at each concurrency in turn (W1, W5).
async fn count_to_100(server: &Target, name: &str, concurrency: Vec<usize>, secs: Duration) {
    for c in concurrency {
        let body = say("count to 100");
        let before = server.cpu_ticks();
        let mut report = drive(&server.url, c, secs, move |_| Turn::One(body.clone())).await;
        report.server_cpu = before
            .zip(server.cpu_ticks())
            .map(|((u0, s0), (u1, s1))| (u1.saturating_sub(u0), s1.saturating_sub(s0)));
        report.print(name, c, server.peak_rss_kib());
    }
}

/// Time until the body holds `marker`; the rest is read and dropped.
async fn first_text(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    marker: &[u8],
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let response = send_json(client, url, body).await?;
    let mut stream = response.bytes_stream();
    let mut seen = Vec::new();
    let mut at = None;
    while let Some(piece) = stream.next().await {
        let piece = piece?;
        if at.is_none() {
            seen.extend_from_slice(&piece);
            if seen.windows(marker.len()).any(|w| w == marker) {
                at = Some(start.elapsed());
            }
        }
    }
    at.context("no text in the answer")
}

/// A server process this run started (killed on drop), or a URL.
struct Target {
    url: String,
    child: Option<Child>,
}

impl Target {
    fn toolgate(url: Option<String>, config: &str, pin: Option<&str>) -> anyhow::Result<Self> {
        if let Some(url) = url {
            return Ok(Self { url, child: None });
        }
        let dir = std::env::temp_dir().join(format!("toolgate-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{}.yaml", uuid_like()));
        std::fs::write(&path, config)?;
        let exe = sibling("toolgate")?;
        Self::spawn(
            pinned(exe, pin)
                .args(["serve", "--bind", "127.0.0.1:0", "--config"])
                .arg(path),
        )
    }

    fn spawn_self(args: &[&str], pin: Option<&str>) -> anyhow::Result<Self> {
        Self::spawn(pinned(std::env::current_exe()?, pin).args(args))
    }

    fn spawn(command: &mut Command) -> anyhow::Result<Self> {
        let mut child = command
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start the server (build it first: cargo build --release)")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .with_context(|| format!("unexpected first line {line:?}"))?
            .to_owned();
        Ok(Self {
            url,
            child: Some(child),
        })
    }

    fn status(&self, key: &str) -> Option<u64> {
        let pid = self.child.as_ref()?.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// User and system CPU time so far, in clock ticks (`/proc/<pid>/stat`).
    fn cpu_ticks(&self) -> Option<(u64, u64)> {
        let pid = self.child.as_ref()?.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command's name, which may hold spaces; the
        // state is the first, utime and stime the 12th and 13th.
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
        let user = fields.next()?.parse().ok()?;
        let sys = fields.next()?.parse().ok()?;
        Some((user, sys))
    }

    fn rss_kib(&self) -> Option<u64> {
        self.status("VmRSS:")
    }

    fn peak_rss_kib(&self) -> Option<u64> {
        self.status("VmHWM:")
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `exe`, on the CPUs `pin` names (`taskset -c`), if any.
fn pinned(exe: std::path::PathBuf, pin: Option<&str>) -> Command {
    match pin {
        Some(cpus) => {
            let mut command = Command::new("taskset");
            command.args(["-c", cpus]).arg(exe);
            command
        }
        None => Command::new(exe),
    }
}

/// A binary built next to this example (`target/release/toolgate`).
fn sibling(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(|examples| examples.parent())
        .context("no target directory")?;
    let path = dir.join(name);
    if !path.exists() {
        bail!(
            "{} is missing: cargo build --release --bin toolgate",
            path.display()
        );
    }
    Ok(path)
}

/// Serves `router` on a free port, printing the address as toolgate does.
async fn serve(router: axum::Router) -> anyhow::Result<()> {
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on http://{}", listener.local_addr()?);
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router).await?;
    Ok(())
}

/// W4's bare proxy: what any gateway in Rust does at least, and nothing
/// else. It reads the request's JSON, posts a chat request to the mock
/// with reqwest (pooled, `TCP_NODELAY`) and streams the answer's bytes
/// back as they come: what toolgate adds beyond it is its own.
fn bare_proxy(upstream: String) -> anyhow::Result<axum::Router> {
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let url = reqwest::Url::parse(&format!("{upstream}/v1/chat/completions"))?;
    let handler = move |body: axum::body::Bytes| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let Some(upstream) = bare_upstream_body(&body) else {
                return bare_status(400);
            };
            let sent = client
                .post(url)
                .header("content-type", "application/json")
                .body(upstream)
                .send()
                .await;
            match sent {
                Ok(answer) => bare_answer(Body::from_stream(answer.bytes_stream())),
                Err(_) => bare_status(502),
            }
        }
    };
    Ok(axum::Router::new().route("/stream", axum::routing::post(handler)))
}

/// The bare proxy on hyper-util's pooled client alone: what a proxy
/// costs without reqwest's layers (its redirect policy, the URL parsed
/// again for each request and its response, its timeouts).
fn bare_hyper_proxy(upstream: String) -> anyhow::Result<axum::Router> {
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Body> =
        Client::builder(TokioExecutor::new()).build(connector);
    let uri: axum::http::Uri = format!("{upstream}/v1/chat/completions").parse()?;
    let handler = move |body: axum::body::Bytes| {
        let (client, uri) = (client.clone(), uri.clone());
        async move {
            let Some(upstream) = bare_upstream_body(&body) else {
                return bare_status(400);
            };
            let Ok(outgoing) = axum::http::Request::post(uri)
                .header("content-type", "application/json")
                .body(Body::from(upstream))
            else {
                return bare_status(500);
            };
            match client.request(outgoing).await {
                Ok(answer) => bare_answer(Body::new(answer.into_body())),
                Err(_) => bare_status(502),
            }
        }
    };
    Ok(axum::Router::new().route("/stream", axum::routing::post(handler)))
}

/// The chat request the bare proxy sends for a `useChat` body: its first
/// message's text, to the mock's model; `None` if the body is not JSON.
fn bare_upstream_body(body: &[u8]) -> Option<String> {
    let request = serde_json::from_slice::<Value>(body).ok()?;
    let text = request["messages"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    let upstream = json!({"model": "mock", "stream": true,
        "messages": [{"role": "user", "content": text}]});
    Some(upstream.to_string())
}

/// The upstream's answer, streamed back as it comes.
fn bare_answer(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap_or_default()
}

fn bare_status(status: u16) -> Response {
    Response::builder()
        .status(status)
        .body(Body::empty())
        .unwrap_or_default()
}

/// W1's answer, byte for byte as toolgate streams it, served from memory;
/// and `/hold`, a stream of one small chunk a second (W3's bare baseline).
fn baseline() -> axum::Router {
    use toolgate::protocol::sse::{DONE, SseEncoder};
    let mut encoder = SseEncoder::new();
    count_to_100_chunks("txt-1", "msg-1", |chunk| encoder.push(chunk));
    encoder.push_raw(DONE);
    let bytes = encoder.take();
    axum::Router::new()
        .route(
            "/stream",
            axum::routing::post(move || {
                let bytes = bytes.clone();
                async move { with_headers(Body::from(bytes)) }
            }),
        )
        .route(
            "/hold",
            axum::routing::post(move || async move {
                let ticks = futures::stream::unfold(0u64, |n| async move {
                    if n > 0 {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    let chunk = format!(
                        "data: {{\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\" {n}\"}}\n\n"
                    );
                    Some((Ok::<_, std::convert::Infallible>(chunk), n + 1))
                });
                with_headers(Body::from_stream(ticks))
            }),
        )
}

/// W6's server: for each request, what any server of the protocol does
/// to answer W1's, with toolgate's own chunk encoder and nothing else: the
/// request's JSON read and its last text found, each chunk made (the
/// deltas counted with `format!`, the ids fresh) and serialized into one
/// buffer, streamed (chunked, as toolgate streams them).
fn floor() -> axum::Router {
    use toolgate::protocol::sse::{DONE, EventWriter, SseEncoder};
    let turn = |body: axum::body::Bytes| async move {
        let Ok(request) = serde_json::from_slice::<Value>(&body) else {
            return bare_status(400);
        };
        let asked = request["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .and_then(|last| last["parts"].as_array())
            .and_then(|parts| parts.iter().find_map(|part| part["text"].as_str()));
        if asked != Some("count to 100") {
            return bare_status(400);
        }
        let mut events = EventWriter::default();
        let (id, message) = (
            format!("txt-{}", uuid_like()),
            format!("msg-{}", uuid_like()),
        );
        count_to_100_chunks(&id, &message, |chunk| events.push(chunk));
        let mut encoder = SseEncoder::new();
        for event in events.take() {
            encoder.push_event(&event);
        }
        encoder.push_raw(DONE);
        let events = futures::stream::iter([Ok::<_, std::convert::Infallible>(encoder.take())]);
        with_headers(Body::from_stream(events))
    };
    axum::Router::new().route("/stream", axum::routing::post(turn))
}

/// W1's chunks, made one by one and handed to `each`: the message and
/// the text block named as given, the deltas counted with `format!`.
fn count_to_100_chunks(
    id: &str,
    message: &str,
    mut each: impl FnMut(&toolgate::protocol::UiChunk),
) {
    use toolgate::protocol::{BlockId, FinishReason, UiChunk};
    let id = BlockId::from(id);
    each(&UiChunk::Start {
        message_id: Some(message.to_owned()),
        message_metadata: None,
    });
    each(&UiChunk::StartStep);
    each(&UiChunk::TextStart {
        id: id.clone(),
        provider_metadata: None,
    });
    for n in 1..=100 {
        let delta = if n == 1 { "1".into() } else { format!(" {n}") };
        each(&UiChunk::text_delta(&id, delta.into()));
    }
    each(&UiChunk::TextEnd {
        id,
        provider_metadata: None,
    });
    each(&UiChunk::FinishStep);
    each(&UiChunk::finish(FinishReason::Stop));
}

/// A response with the UI message stream's headers.
fn with_headers(body: Body) -> Response {
    let mut response = Response::new(body);
    for (name, value) in toolgate::protocol::sse::HEADERS {
        response.headers_mut().insert(
            axum::http::HeaderName::from_static(name),
            axum::http::HeaderValue::from_static(value),
        );
    }
    response
}

/// An OpenAI-compatible upstream: the first of `deltas` text deltas at
/// once, the rest `gap` apart, then the finish and `[DONE]`. W4's default
/// (20, 50 ms) is a second-long answer, as a model's are, so that its
/// streams stay open side by side; the anchors' is 64, 20 ms.
fn mock_openai(deltas: u32, gap: Duration) -> axum::Router {
    axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || async move {
            let events = futures::stream::unfold(0u32, move |n| async move {
                if n > deltas {
                    return None;
                }
                if n > 0 {
                    tokio::time::sleep(gap).await;
                }
                let event = if n == deltas {
                    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".to_owned()
                } else {
                    format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word{n} \"}}}}]}}\n\n")
                };
                Some((Ok::<_, std::convert::Infallible>(event), n + 1))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(events))
                .unwrap_or_default()
        }),
    )
}
