//! A page on another origin that `cors.allowedOrigins` (or `--cors-origin`)
//! names gets its preflights answered, before authentication, and reads
//! toolgate's answers; any other page gets no CORS header, and by default
//! no page does.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use common::{Binary, Server, user_says};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

const APP: &str = "http://localhost:3000";
const EVIL: &str = "https://evil.example";

/// Keys for alice and bob, and the app's origin allowed.
async fn keyed() -> Server {
    let keys = common::api_keys(&[("alice", "alice-key"), ("bob", "bob-key")]);
    Server::from_yaml(&format!("{keys}cors:\n  allowedOrigins: ['{APP}']\n")).await
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The comma-separated entries of a header, lowercase.
    fn list(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_ascii_lowercase())
            .collect()
    }

    fn cors_headers(&self) -> Vec<&str> {
        self.headers
            .keys()
            .map(|name| name.as_str())
            .filter(|name| name.starts_with("access-control-"))
            .collect()
    }
}

async fn send(
    url: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Answer {
    let mut request = reqwest::Client::new().request(method, format!("{url}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.body(body.to_string());
    }
    let response = request.send().await.must();
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap_or_default(),
    }
}

/// What a browser asks before a page's JSON POST with a key.
async fn preflight(url: &str, path: &str, origin: &str, method: &str) -> Answer {
    let headers = [
        ("origin", origin),
        ("access-control-request-method", method),
        (
            "access-control-request-headers",
            "authorization,content-type,x-api-key",
        ),
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-mode", "cors"),
    ];
    send(url, Method::OPTIONS, path, &headers, None).await
}

fn assert_preflight_allows(answer: &Answer, origin: &str, what: &str) {
    assert!(
        matches!(answer.status, 200 | 204),
        "{what}: {} {}",
        answer.status,
        answer.body
    );
    assert_eq!(
        answer.header("access-control-allow-origin"),
        origin,
        "{what}"
    );
    let methods = answer.list("access-control-allow-methods");
    for method in ["get", "post", "delete", "options"] {
        assert!(methods.iter().any(|m| m == method), "{what}: {methods:?}");
    }
    let headers = answer.list("access-control-allow-headers");
    for header in ["authorization", "x-api-key", "content-type"] {
        assert!(headers.iter().any(|h| h == header), "{what}: {headers:?}");
    }
    assert!(answer.list("vary").iter().any(|v| v == "origin"), "{what}");
}

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_is_answered_before_authentication() {
    let server = keyed().await;
    for (path, method) in [
        ("/stream", "POST"),
        ("/api/chat", "POST"),
        ("/stream/c/stream", "GET"),
        ("/api/confirmations/x", "POST"),
        ("/api/confirmations?chatId=c", "GET"),
        ("/api/approvals/x", "DELETE"),
        ("/api/audit", "GET"),
        ("/api/tools", "GET"),
        ("/live", "GET"),
    ] {
        let answer = preflight(&server.url, path, APP, method).await;
        assert_preflight_allows(&answer, APP, path);
    }
    // The principal header is the proxy's to set, not a page's.
    let asks_principal = [
        ("origin", APP),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "x-user"),
    ];
    let answer = send(
        &server.url,
        Method::OPTIONS,
        "/stream",
        &asks_principal,
        None,
    )
    .await;
    assert!(
        !answer
            .list("access-control-allow-headers")
            .contains(&"x-user".to_owned())
    );
}

#[tokio::test]
async fn a_preflight_from_another_origin_or_to_another_host_gets_no_cors_headers() {
    let server = keyed().await;
    for origin in [
        EVIL,
        "http://localhost:3001",
        "http://127.0.0.1:3000",
        "null",
    ] {
        let answer = preflight(&server.url, "/stream", origin, "POST").await;
        assert_eq!(answer.cors_headers(), Vec::<&str>::new(), "{origin}");
        assert_ne!(answer.status, 200, "{origin}");
    }
    // The guard's Host check comes first, for a preflight too.
    let rebound = [
        ("host", "rebind.evil.example"),
        ("origin", APP),
        ("access-control-request-method", "POST"),
    ];
    let answer = send(&server.url, Method::OPTIONS, "/stream", &rebound, None).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert_eq!(answer.cors_headers(), Vec::<&str>::new());
}

#[tokio::test]
async fn an_allowed_page_streams_a_turn_and_reads_its_errors() {
    let server = keyed().await;
    let turn = user_says("c", "hello");
    let page = [
        ("origin", APP),
        ("content-type", "application/json"),
        ("sec-fetch-site", "cross-site"),
        ("x-api-key", "alice-key"),
    ];
    let answer = send(&server.url, Method::POST, "/stream", &page, Some(&turn)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.header("access-control-allow-origin"), APP);
    assert!(
        answer
            .list("access-control-expose-headers")
            .contains(&"x-vercel-ai-ui-message-stream".to_owned())
    );
    assert_eq!(answer.header("x-vercel-ai-ui-message-stream"), "v1");
    assert!(answer.body.contains("text-delta"), "{}", answer.body);
    assert!(answer.body.ends_with("data: [DONE]\n\n"), "{}", answer.body);

    // A refusal past the guard is readable by the page.
    let wrong = [page[0], page[1], page[2], ("x-api-key", "guess")];
    let answer = send(&server.url, Method::POST, "/stream", &wrong, Some(&turn)).await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    assert_eq!(answer.header("access-control-allow-origin"), APP);

    // Another page: refused by the guard, and nothing to read it with.
    let evil = [("origin", EVIL), page[1], page[2], page[3]];
    let answer = send(&server.url, Method::POST, "/stream", &evil, Some(&turn)).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert_eq!(answer.cors_headers(), Vec::<&str>::new());
    // A read from another page: served, but the browser shows the page nothing.
    let read = [("origin", EVIL), ("x-api-key", "alice-key")];
    let answer = send(&server.url, Method::GET, "/api/tools", &read, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.cors_headers(), Vec::<&str>::new());
    assert!(answer.list("vary").contains(&"origin".to_owned()));
}

#[tokio::test]
async fn by_default_no_origin_gets_cors_headers() {
    let server = Server::start().await;
    let answer = preflight(&server.url, "/stream", APP, "POST").await;
    assert_eq!(answer.cors_headers(), Vec::<&str>::new());
    let page = [("origin", APP), ("content-type", "application/json")];
    let answer = send(
        &server.url,
        Method::POST,
        "/stream",
        &page,
        Some(&user_says("c", "hello")),
    )
    .await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert_eq!(answer.cors_headers(), Vec::<&str>::new());
    let answer = send(&server.url, Method::GET, "/api/tools", &page[..1], None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.cors_headers(), Vec::<&str>::new());
    assert_eq!(
        answer.header("vary"),
        "",
        "no CORS, nothing varies by origin"
    );
}

#[tokio::test]
async fn cors_origin_on_the_command_line_allows_a_page() {
    let server = Binary::serve(&[
        "--cors-origin",
        APP,
        "--cors-origin",
        "https://app.example.com",
    ]);
    for origin in [APP, "https://app.example.com"] {
        let answer = preflight(&server.url, "/stream", origin, "POST").await;
        assert_preflight_allows(&answer, origin, origin);
    }
    let page = [("origin", APP), ("content-type", "application/json")];
    let turn = user_says("c", "hello");
    let answer = send(&server.url, Method::POST, "/stream", &page, Some(&turn)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.header("access-control-allow-origin"), APP);
    let evil = [("origin", EVIL), ("content-type", "application/json")];
    let answer = send(&server.url, Method::POST, "/stream", &evil, Some(&turn)).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
}

#[test]
fn any_origin_without_api_keys_is_refused_on_the_command_line() -> anyhow::Result<()> {
    let stderr = common::refused(&["serve", "--bind", "127.0.0.1:0", "--cors-origin", "*"]);
    assert_contains(&stderr, "`*` in cors.allowedOrigins needs auth.apiKeys");
    let stderr = common::refused(&[
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--cors-origin",
        "localhost:3000",
    ]);
    assert_contains(&stderr, "is not an origin like");
    Ok(())
}

/// `/live` from a page: opened from an allowed origin only (the guard's
/// check, on the same list), the key in the frame's headers in either form.
#[tokio::test]
async fn live_opens_from_an_allowed_origin_with_the_key_in_its_frames() -> anyhow::Result<()> {
    let server = keyed().await;
    let url = format!("{}/live", server.url.replacen("http", "ws", 1));
    for (origin, accepted) in [(APP, true), (EVIL, false), ("http://localhost:3001", false)] {
        let mut request = url.as_str().into_client_request()?;
        let value = HeaderValue::from_str(origin)?;
        request.headers_mut().insert("origin", value);
        let mut socket = match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => {
                assert!(accepted, "{origin} was let in");
                socket
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert!(!accepted, "{origin}: {}", response.status());
                assert_eq!(response.status(), 403);
                continue;
            }
            Err(e) => panic!("{origin}: {e}"),
        };
        for (n, (headers, works)) in [
            (json!({"X-Api-Key": "alice-key"}), true),
            (json!({"Authorization": "Bearer alice-key"}), true),
            (json!({"x-api-key": "guess"}), false),
            (
                json!({"authorization": "Bearer alice-key", "x-api-key": "bob-key"}),
                false,
            ),
            (json!({}), false),
        ]
        .into_iter()
        .enumerate()
        {
            let request = format!("r{n}");
            let mut frame = common::ws::turn(&request, &user_says(&format!("c{n}"), "hello"));
            frame["headers"] = headers.clone();
            common::ws::send(&mut socket, frame).await;
            let mut frames = Vec::new();
            common::ws::until_end(&mut socket, &mut frames, &request).await;
            let ended = frames.last().map(|f| f["type"].clone());
            assert_eq!(
                ended,
                Some(json!(if works { "end" } else { "error" })),
                "{headers}: {frames:?}"
            );
        }
    }
    Ok(())
}
