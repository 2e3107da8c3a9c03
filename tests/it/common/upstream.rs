//! A model provider's HTTP API on 127.0.0.1:0: it replays SSE fixtures in
//! chosen pieces, fails in chosen ways, and records what it was sent.

use super::Must;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;
use tokio::sync::mpsc;

/// How a fixture's bytes are cut into writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Whole,
    /// One byte per write.
    Bytes,
    /// Inside every multi-byte character, inside JSON strings, and between
    /// every `data:` and its payload.
    Awkward,
}

/// One answer of the mock.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `200 text/event-stream` with these bytes, cut by `split`, `gap` apart.
    Sse {
        bytes: Vec<u8>,
        split: Split,
        gap: Duration,
    },
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Accepts the request and never answers.
    Hang,
    /// Sends `bytes`, then goes silent without closing.
    Stall { bytes: Vec<u8> },
    /// Sends `bytes`, then breaks the connection.
    Drop { bytes: Vec<u8> },
    /// A text delta every `gap` until the client goes away, which is reported
    /// on the mock's `gone` channel.
    Endless { event: Vec<u8>, gap: Duration },
}

impl Answer {
    pub fn sse(bytes: Vec<u8>) -> Self {
        Answer::Sse {
            bytes,
            split: Split::Whole,
            gap: Duration::ZERO,
        }
    }
}

/// A request the mock received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

pub struct Upstream {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    gone: Mutex<mpsc::Receiver<()>>,
}

struct State {
    answers: Mutex<VecDeque<Answer>>,
    cycle: bool,
    received: Arc<Mutex<Vec<Received>>>,
    gone: mpsc::Sender<()>,
}

impl Upstream {
    /// A mock that gives `answers` in turn, one per request; the last repeats.
    pub async fn start(answers: Vec<Answer>) -> Self {
        Self::serve(answers, false).await
    }

    /// A mock that gives `answers` in turn, over and over.
    pub async fn cycle(answers: Vec<Answer>) -> Self {
        Self::serve(answers, true).await
    }

    async fn serve(answers: Vec<Answer>, cycle: bool) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let (gone_tx, gone_rx) = mpsc::channel(16);
        let state = Arc::new(State {
            answers: Mutex::new(answers.into()),
            cycle,
            received: received.clone(),
            gone: gone_tx,
        });
        let app = axum::Router::new().fallback(post(answer)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.must();
        let url = format!("http://{}", listener.local_addr().must());
        // A test's upstream: it lives as long as the test's runtime.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url,
            received,
            gone: Mutex::new(gone_rx),
        }
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until an `Endless` answer's client went away.
    pub async fn client_gone(&self, within: Duration) -> bool {
        let mut gone = {
            let mut guard = self.gone.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *guard, mpsc::channel(1).1)
        };
        tokio::time::timeout(within, gone.recv()).await.is_ok()
    }
}

async fn answer(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state
        .received
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Received {
            path: uri.to_string(),
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
    let next = {
        let mut answers = state.answers.lock().unwrap_or_else(|e| e.into_inner());
        match answers.len() {
            0 => None,
            _ if state.cycle => {
                answers.rotate_left(1);
                answers.back().cloned()
            }
            1 => answers.front().cloned(),
            _ => answers.pop_front(),
        }
    };
    let Some(next) = next else {
        return status(500, &[], "the mock has no answer");
    };
    match next {
        Answer::Sse { bytes, split, gap } => {
            let pieces = cut(&bytes, split);
            let body = async_stream::stream! {
                for piece in pieces {
                    if !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                    yield Ok::<_, Infallible>(Bytes::from(piece));
                }
            };
            event_stream(Body::from_stream(body))
        }
        Answer::Status {
            status: code,
            headers,
            body,
        } => status(code, &headers, &body),
        Answer::Hang => {
            std::future::pending::<()>().await;
            status(500, &[], "unreachable")
        }
        Answer::Stall { bytes } => {
            let body = async_stream::stream! {
                yield Ok::<_, Infallible>(Bytes::from(bytes));
                std::future::pending::<()>().await;
            };
            event_stream(Body::from_stream(body))
        }
        Answer::Drop { bytes } => {
            let body = async_stream::stream! {
                yield Ok::<_, std::io::Error>(Bytes::from(bytes));
                // The bytes go out on their own before the break, on purpose.
                tokio::time::sleep(Duration::from_millis(20)).await;
                yield Err(std::io::Error::other("the mock breaks the connection"));
            };
            event_stream(Body::from_stream(body))
        }
        Answer::Endless { event, gap } => {
            let guard = Gone(state.gone.clone());
            let body = async_stream::stream! {
                let _guard = guard;
                loop {
                    yield Ok::<_, Infallible>(Bytes::from(event.clone()));
                    tokio::time::sleep(gap).await;
                }
            };
            event_stream(Body::from_stream(body))
        }
    }
}

/// Reports when the body it lives in is dropped: the client went away.
struct Gone(mpsc::Sender<()>);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = self.0.try_send(());
    }
}

fn event_stream(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .must()
}

fn status(code: u16, headers: &[(&'static str, String)], body: &str) -> Response {
    let mut response = Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json");
    for (name, value) in headers {
        response = response.header(*name, value.as_str());
    }
    response.body(Body::from(body.to_owned())).must()
}

/// Cuts `bytes` into the pieces `split` asks for.
pub fn cut(bytes: &[u8], split: Split) -> Vec<Vec<u8>> {
    let points: Vec<usize> = match split {
        Split::Whole => Vec::new(),
        Split::Bytes => (1..bytes.len()).collect(),
        Split::Awkward => awkward_points(bytes),
    };
    let mut pieces = Vec::with_capacity(points.len() + 1);
    let mut from = 0;
    for at in points {
        if at > from && at < bytes.len() {
            pieces.push(bytes[from..at].to_vec());
            from = at;
        }
    }
    pieces.push(bytes[from..].to_vec());
    pieces
}

/// Where a careless parser breaks: inside a UTF-8 character, two bytes into
/// a JSON string, and right after `data:`.
fn awkward_points(bytes: &[u8]) -> Vec<usize> {
    let mut points = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        // A continuation byte: the character started before it.
        if b & 0b1100_0000 == 0b1000_0000 {
            points.push(i);
        }
        if b == b'"' && i + 2 < bytes.len() {
            points.push(i + 2);
        }
        if bytes[i..].starts_with(b"data:") {
            points.push(i + 5);
        }
    }
    points.sort_unstable();
    points.dedup();
    points
}

/// A fixture from `tests/fixtures/providers/`.
pub fn sse_fixture(provider: &str, name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/providers/{provider}/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
