//! A web page cannot act through toolgate, and slow clients cannot stop it.
//!
//! Browsers' requests are written by hand (a foreign `Host`, an `Origin`,
//! `Sec-Fetch-Site`, a `text/plain` body); each refused one is checked to
//! have changed nothing: no payment, no audit event, the question still open.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;
use crate::common::from_json;

use std::time::Duration;

use common::raw::{self, authority};
use common::{Server, user_says};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use toolgate::Config;

const PAY: &str = "Send 50 USD to Hanako";
const JSON: (&str, &str) = ("content-type", "application/json");
const EVIL: (&str, &str) = ("origin", "https://evil.example");
const CROSS_SITE: (&str, &str) = ("sec-fetch-site", "cross-site");

fn config(yaml: &str) -> Config {
    Config::from_yaml(yaml).must()
}

async fn audit(server: &Server) -> String {
    let reply = server.get("/api/audit").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

/// The open questions of chat `c`.
async fn open(server: &Server) -> Vec<Value> {
    let reply = server.get("/api/confirmations?chatId=c").await;
    from_json(&reply.body)
}

fn error(body: &str) -> String {
    let json = body.find('{').map(|at| &body[at..]).unwrap_or(body);
    let value: Value = from_json(json);
    value["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_host_toolgate_does_not_serve_is_refused_before_anything_else() {
    let server = Server::start().await;
    let port = authority(&server.url)
        .rsplit(':')
        .next()
        .unwrap_or_default();
    let rebound = format!("rebind.evil.example:{port}");
    for (method, path, body) in [
        ("GET", "/api/audit", ""),
        ("GET", "/api/confirmations?chatId=c", ""),
        ("GET", "/", ""),
        ("GET", "/no-such-route", ""),
        ("POST", "/stream", &user_says("c", PAY).to_string()[..]),
    ] {
        let reply = raw::send(&server.url, method, path, &[("host", &rebound), JSON], body).await;
        assert_eq!(reply.status, 400, "{method} {path}: {}", reply.body);
        assert_eq!(
            error(&reply.body),
            "this server does not answer to that host name (see server.allowedHosts)"
        );
    }
    assert_eq!(audit(&server).await, "", "nothing ran");
    // The names toolgate serves, on any port.
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "127.0.0.1".into(),
    ] {
        let reply = raw::send(&server.url, "GET", "/healthz", &[("host", &host)], "").await;
        assert_eq!(reply.status, 200, "{host}");
    }
}

#[tokio::test]
async fn a_cross_site_post_to_stream_runs_nothing() {
    let server = Server::start().await;
    let turn = user_says("c", PAY).to_string();
    let refused: &[(&[(&str, &str)], u16)] = &[
        // What a page's fetch() or form sends with no preflight.
        (&[("content-type", "text/plain"), EVIL, CROSS_SITE], 403),
        (&[("content-type", "text/plain;charset=UTF-8")], 415),
        (
            &[("content-type", "application/x-www-form-urlencoded")],
            415,
        ),
        (&[], 415),
        // A JSON POST from another origin (it would need a preflight, but
        // a server must not rely on the browser asking).
        (&[JSON, EVIL], 403),
        (&[JSON, EVIL, CROSS_SITE], 403),
        (&[JSON, CROSS_SITE], 403),
        (&[JSON, ("origin", "null")], 403),
    ];
    for (headers, status) in refused {
        for path in ["/stream", "/api/chat"] {
            let reply = raw::send(&server.url, "POST", path, headers, &turn).await;
            assert_eq!(reply.status, *status, "{path} {headers:?}: {}", reply.body);
        }
    }
    assert_eq!(audit(&server).await, "", "no turn ran");
    assert!(open(&server).await.is_empty(), "nothing was asked");

    // The same turn from toolgate's own page, or from a client that is no
    // browser, runs: the audit log would have shown the ones above.
    let own = format!("http://{}", authority(&server.url));
    let same_origin = [JSON, ("origin", &own), ("sec-fetch-site", "same-origin")];
    let reply = raw::send(&server.url, "POST", "/stream", &same_origin, &turn).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("adk_request_confirmation"));
    assert_ne!(audit(&server).await, "");
    let reply = raw::send(&server.url, "POST", "/stream", &[JSON], &turn).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn a_cross_site_approval_is_refused_and_the_question_stays_open() {
    let server = Server::start().await;
    assert_eq!(server.says("c", PAY).await.status, 200);
    let questions = open(&server).await;
    let id = questions[0]["id"].as_str().unwrap_or_default().to_owned();
    let path = format!("/api/confirmations/{id}");
    let before = audit(&server).await;
    let approve = r#"{"approved":true,"remember":"global"}"#;
    let refused: &[(&[(&str, &str)], u16)] = &[
        (&[("content-type", "text/plain"), EVIL, CROSS_SITE], 403),
        (&[("content-type", "text/plain")], 415),
        (&[JSON, EVIL], 403),
        (&[JSON, ("origin", "http://localhost:1")], 403),
        (&[JSON, CROSS_SITE], 403),
        (&[JSON, ("origin", "null")], 403),
    ];
    for (headers, status) in refused {
        let reply = raw::send(&server.url, "POST", &path, headers, approve).await;
        assert_eq!(reply.status, *status, "{headers:?}: {}", reply.body);
    }
    // Revoking is state-changing too.
    let reply = raw::send(&server.url, "DELETE", "/api/approvals/x", &[EVIL], "").await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(audit(&server).await, before, "nothing was decided");
    assert_eq!(open(&server).await, questions, "the question is still open");
    assert!(server.get("/api/approvals").await.body.starts_with("[]"));

    let own = format!("http://{}", authority(&server.url));
    let reply = raw::send(
        &server.url,
        "POST",
        &path,
        &[JSON, ("origin", &own)],
        approve,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_ne!(audit(&server).await, before);
}

#[tokio::test]
async fn live_is_opened_from_toolgate_s_own_origin_only() -> anyhow::Result<()> {
    let server = Server::start().await;
    let url = format!("{}/live", server.url.replacen("http", "ws", 1));
    let own = format!("http://{}", authority(&server.url));
    for (origin, accepted) in [
        (Some("https://evil.example"), false),
        (Some("null"), false),
        (Some(&own[..]), true),
        (None, true),
    ] {
        let mut request = url.as_str().into_client_request()?;
        if let Some(origin) = origin {
            let value = HeaderValue::from_str(origin)?;
            request.headers_mut().insert("origin", value);
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((mut socket, _)) => {
                assert!(accepted, "{origin:?} was let in");
                let frame = common::ws::turn("r1", &user_says("c", "hello"));
                common::ws::send(&mut socket, frame).await;
                let mut frames = Vec::new();
                common::ws::until_end(&mut socket, &mut frames, "r1").await;
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert!(!accepted, "{origin:?}: {}", response.status());
                assert_eq!(response.status(), 403);
            }
            Err(e) => panic!("{origin:?}: {e}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn hosts_and_origins_from_the_config_are_served() {
    let server = Server::with_config(config(
        "server: {allowedHosts: [toolgate.example.com]}\ncors: {allowedOrigins: ['https://app.example.com']}\n",
    ))
    .await;
    let turn = user_says("c", "hello").to_string();
    let proxied = [("host", "toolgate.example.com"), JSON];
    let reply = raw::send(&server.url, "POST", "/stream", &proxied, &turn).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    // The proxy's public origin is toolgate's own.
    let behind_tls = [
        ("host", "toolgate.example.com"),
        ("origin", "https://toolgate.example.com"),
        JSON,
    ];
    let reply = raw::send(&server.url, "POST", "/stream", &behind_tls, &turn).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let app = [("origin", "https://app.example.com"), CROSS_SITE, JSON];
    let reply = raw::send(&server.url, "POST", "/stream", &app, &turn).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let other = [("origin", "https://other.example.com"), JSON];
    let reply = raw::send(&server.url, "POST", "/stream", &other, &turn).await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    let reply = raw::send(
        &server.url,
        "GET",
        "/healthz",
        &[("host", "other.example.com")],
        "",
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
}

#[test]
fn any_host_without_api_keys_is_a_config_error() -> anyhow::Result<()> {
    let stderr = common::refused(&["serve", "--bind", "127.0.0.1:0", "--allowed-host", "*"]);
    assert_contains(&stderr, "`*` in server.allowedHosts needs auth.apiKeys");
    Ok(())
}

/// A `toolgate` process `command` starts, logging at info: its URL, and
/// its log as a thread reads it.
struct Logged {
    child: std::process::Child,
    url: String,
    log: std::thread::JoinHandle<String>,
    /// Kept open: the server writes more lines after the first.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Logged {
    fn start(mut command: std::process::Command) -> Self {
        use std::io::Read;
        let mut child = command
            .env("RUST_LOG", "toolgate=info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .must();
        let mut stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let log = std::thread::spawn(move || {
            let mut log = String::new();
            let _ = stderr.read_to_string(&mut log);
            log
        });
        let mut stdout =
            std::io::BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("no stdout")));
        let url = common::listening_on(&mut stdout);
        Self {
            child,
            url,
            log,
            _stdout: stdout,
        }
    }

    /// Stops the process; all it logged.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log.join().unwrap_or_default()
    }
}

/// Reads from `stream` until the server closes it; `None` if it is still
/// open after `limit` (a safety bound, far above the timeout under test).
async fn closed_within(stream: &mut tokio::net::TcpStream, limit: Duration) -> Option<String> {
    let mut reply = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut reply))
        .await
        .ok()
        .map(|_| String::from_utf8_lossy(&reply).into_owned())
}

#[tokio::test]
async fn a_request_whose_head_never_ends_is_closed() -> anyhow::Result<()> {
    let server = Server::with_config(config("server: {headerReadSecs: 1}")).await;
    let mut half_sent = tokio::net::TcpStream::connect(authority(&server.url)).await?;
    half_sent
        .write_all(b"POST /stream HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-")
        .await?;
    let mut silent = tokio::net::TcpStream::connect(authority(&server.url)).await?;
    for stream in [&mut half_sent, &mut silent] {
        let closed = closed_within(stream, Duration::from_secs(30)).await;
        assert!(closed.is_some(), "the connection is still open");
    }
    Ok(())
}

#[tokio::test]
async fn a_body_that_stops_coming_is_408_and_a_slow_stream_is_not_cut() -> anyhow::Result<()> {
    let server = Server::with_config(config(
        "server: {headerReadSecs: 1, bodyReadSecs: 1}\nmodel: {deltaDelayMs: 400}\n",
    ))
    .await;
    let mut stream = tokio::net::TcpStream::connect(authority(&server.url)).await?;
    let head = "POST /stream HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\":";
    stream.write_all(head.as_bytes()).await?;
    let reply = closed_within(&mut stream, Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("still waiting for the body"));
    let reply = raw::parse(&reply);
    assert_eq!(reply.status, 408, "{}", reply.body);
    assert_eq!(
        error(&reply.body),
        "the request body did not arrive in time"
    );

    // A response that streams longer than both timeouts, with pauses
    // longer than neither, is read to its end.
    let reply = server.says("c", "count to 8").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.ends_with("data: [DONE]\n\n"), "{}", reply.body);
    Ok(())
}

/// The binary with the usual open-files limit of 1,024 (soft and hard),
/// 1,100 connections that sent half a request head and went silent, and
/// then a user's turn: it is served once the half-sent ones time out
/// (`headerReadSecs: 5`, long enough for all 1,100 to arrive before the
/// first ones time out); those beyond one address's share of the connection cap are closed at
/// once, and the log says so.
#[tokio::test]
async fn a_thousand_half_sent_requests_do_not_stop_a_normal_turn() -> anyhow::Result<()> {
    // This process holds the 1,100 sockets.
    let ours = rlimit::increase_nofile_limit(4096).unwrap_or(0);
    if ours < 1_200 {
        eprintln!("SKIPPED: this process may open only {ours} files");
        return Ok(());
    }
    let state = tempfile::tempdir()?;
    let config = common::config_file(
        state.path(),
        "store: {kind: memory}\nserver: {headerReadSecs: 5}\n",
    );
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(r#"ulimit -n 1024 && exec "$0" serve --bind 127.0.0.1:0 --config "$1""#)
        .arg(env!("CARGO_BIN_EXE_toolgate"))
        .arg(&config);
    let server = Logged::start(command);
    let url = server.url.clone();

    let mut half_sent = Vec::new();
    for _ in 0..1_100 {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(authority(&url)).await {
            // Refused connections may already be closed: the write may fail.
            let _ = stream
                .write_all(b"POST /stream HTTP/1.1\r\nHost: 127.")
                .await;
            half_sent.push(stream);
        }
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    // A safety bound, not a timing claim: the old server never answered.
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    let body = loop {
        let sent = client
            .post(format!("{url}/stream"))
            .header("content-type", "application/json")
            .body(user_says("c", PAY).to_string())
            .send()
            .await;
        let failure = match sent {
            Ok(response) => match response.text().await {
                Ok(body) => break body,
                Err(e) => e,
            },
            Err(e) => e,
        };
        assert!(
            std::time::Instant::now() < give_up,
            "the turn was never served: {failure}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_contains(&body, "adk_request_confirmation");
    drop(half_sent);
    let log = server.stop();
    assert_contains(&log, "open files limit: 1024 (was 1024, hard limit 1024)");
    assert_contains(
        &log,
        "serving at most 896 connections, 224 from one address",
    );
    // All from one address: its share is what it fills.
    assert_contains(&log, "connections: 224 are open from one address");
    Ok(())
}

/// toolgate speaks plain HTTP: a page at `https://127.0.0.1:PORT` is another
/// origin (another server could answer TLS for that host), not its own.
#[tokio::test]
async fn toolgate_s_own_host_over_https_is_another_origin() -> anyhow::Result<()> {
    let server = Server::start().await;
    let turn = user_says("c", PAY).to_string();
    let https = format!("https://{}", authority(&server.url));
    let reply = raw::send(
        &server.url,
        "POST",
        "/stream",
        &[JSON, ("origin", &https)],
        &turn,
    )
    .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(audit(&server).await, "", "no turn ran");
    let mut request =
        format!("{}/live", server.url.replacen("http", "ws", 1)).into_client_request()?;
    let value = HeaderValue::from_str(&https)?;
    request.headers_mut().insert("origin", value);
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
        }
        Ok(_) => panic!("the socket was opened for {https}"),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// `server.bodyTotalSecs`: a body that never pauses long enough for
/// `bodyReadSecs`, a byte at a time, is cut at its total deadline.
#[tokio::test]
async fn a_body_that_trickles_in_is_cut_at_its_total_deadline() -> anyhow::Result<()> {
    let server = Server::with_config(config(
        "server: {headerReadSecs: 30, bodyReadSecs: 30, bodyTotalSecs: 1}\n",
    ))
    .await;
    let mut stream = tokio::net::TcpStream::connect(authority(&server.url)).await?;
    let head = "POST /stream HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    // A byte every 100 ms would take 100 s; the old server read on.
    let (mut read, mut write) = stream.into_split();
    let trickle = async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b" ").await.is_err() {
                break;
            }
        }
        std::future::pending::<Vec<u8>>().await
    };
    let reading = async move {
        let mut reply = Vec::new();
        let _ = read.read_to_end(&mut reply).await;
        reply
    };
    // A safety bound far above the deadline under test.
    let reply = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::select! {
            reply = reading => reply,
            reply = trickle => reply,
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the body was still being read"));
    let reply = raw::parse(&String::from_utf8_lossy(&reply));
    assert_eq!(reply.status, 408, "{}", reply.body);
    assert_eq!(
        error(&reply.body),
        "the request body did not arrive in time"
    );
    Ok(())
}

/// `server.maxConnectionsPerPeer`: one address holds at most its share of
/// `maxConnections`; the next connection from it is closed at once, and a
/// closed one gives its place back.
#[tokio::test]
async fn one_address_holds_at_most_its_share_of_the_connections() -> anyhow::Result<()> {
    let server = Server::with_config(config(
        "server: {headerReadSecs: 30, maxConnections: 8, maxConnectionsPerPeer: 2}\n",
    ))
    .await;
    let connect = || async {
        tokio::net::TcpStream::connect(authority(&server.url))
            .await
            .must()
    };
    let mut first = connect().await;
    let mut second = connect().await;
    let mut third = connect().await;
    let closed = closed_within(&mut third, Duration::from_secs(10)).await;
    assert_eq!(closed.as_deref(), Some(""), "the third was kept open");
    // The two within the share are served.
    for stream in [&mut first, &mut second] {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
            .await?;
        let reply = closed_within(stream, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("no answer"));
        assert_eq!(raw::parse(&reply).status, 200, "{reply}");
    }
    // Both closed: their places are free again.
    common::wait::until_ok("a place for a new connection", || async {
        let reply = reqwest::get(format!("{}/healthz", server.url))
            .await
            .map_err(|e| e.to_string())?;
        match reply.status().as_u16() {
            200 => Ok(()),
            status => Err(format!("status {status}")),
        }
    })
    .await;
    Ok(())
}

/// A control character in an id is refused at the edge (400), and a value a
/// client sent that reaches the log anyway (a refused `trigger`) is written
/// escaped: no client can forge a line of the log.
#[tokio::test]
async fn a_newline_in_an_id_forges_no_log_line() -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let config = common::config_file(state.path(), "store: {kind: memory}\n");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    command
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config);
    let server = Logged::start(command);
    let url = server.url.clone();

    let forged = "x\nFAKE LOG LINE";
    let mut chat_id = user_says("c", PAY);
    chat_id["id"] = forged.into();
    let mut call_id = common::fixture("pay_hanako_approved.json");
    call_id["messages"][1]["parts"][1]["toolCallId"] = forged.into();
    let mut trigger = user_says("c", PAY);
    trigger["trigger"] = "x\nFAKE TRIGGER LINE".into();
    let client = reqwest::Client::new();
    for (what, body) in [
        ("chat id", &chat_id),
        ("tool call id", &call_id),
        ("trigger", &trigger),
    ] {
        let reply = client
            .post(format!("{url}/stream"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await?;
        assert_eq!(reply.status(), 400, "{what}");
        let text = reply.text().await.unwrap_or_default();
        assert!(!text.contains("FAKE LOG LINE"), "{what}: {text}");
    }
    for path in [
        "/api/confirmations/x%0AFAKE%20LOG%20LINE",
        "/stream/x%0AFAKE%20LOG%20LINE/stream",
    ] {
        let method = if path.starts_with("/api") {
            "POST"
        } else {
            "GET"
        };
        let reply = raw::send(&url, method, path, &[JSON], r#"{"approved":true}"#).await;
        assert_eq!(reply.status, 400, "{path}: {}", reply.body);
    }
    let log = server.stop();
    for line in log.lines() {
        assert!(
            !line.trim_start().starts_with("FAKE"),
            "a forged line: {log}"
        );
    }
    assert!(
        log.contains("unknown trigger `x\\nFAKE TRIGGER LINE`"),
        "the refusal is logged, escaped: {log}"
    );
    Ok(())
}
