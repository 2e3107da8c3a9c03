//! A toolgate server on 127.0.0.1:0 with sequential ids and a manual clock,
//! and a counting wrapper that proves whether a tool ran.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use toolgate::config::Settings;
use toolgate::confirm::CONFIRMATION_TOOL;
use toolgate::ids::{Clock, Ids};
use toolgate::tools::{ProcessPayment, Tool, ToolContext, ToolError, ToolSource};
use toolgate::{App, Config};

#[cfg(feature = "adk")]
pub mod adk;
pub mod binary;
pub mod body;
pub mod calls;
pub mod raw;
pub mod receiver;
pub mod upstream;
pub mod wait;
pub mod ws;

pub use binary::{Binary, config_file, listening_on, loopback, refused};

/// The one way a helper (or a closure, or a task a test spawns) that cannot
/// use `?` fails on an error: a panic with the error's message and its causes,
/// reported at the caller's line. Test functions return `anyhow::Result<()>`
/// and use `?` instead.
pub trait Must<T> {
    fn must(self) -> T;
}

impl<T, E: std::fmt::Display> Must<T> for Result<T, E> {
    #[track_caller]
    fn must(self) -> T {
        match self {
            Ok(value) => value,
            Err(e) => panic!("{e:#}"),
        }
    }
}

/// `text` as JSON of type `T`; the test fails naming the text when it is not.
#[track_caller]
pub fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_json::from_str(text)
        .map_err(|e| format!("{e}: {text}"))
        .must()
}

/// Fails listing what was `found`, under the heading `what`, unless nothing was.
#[track_caller]
pub fn assert_none(what: &str, found: &[String]) {
    assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
}

/// `principal`'s call of `process_payment` (5 to Bo) in chat `c`, as the
/// gate is asked about it.
pub fn payment_to_bo(principal: &str) -> (toolgate::confirm::Scope, toolgate::call::ToolCall) {
    let scope = toolgate::confirm::Scope {
        chat_id: "c".into(),
        principal: principal.into(),
    };
    let call = toolgate::call::ToolCall {
        id: "call-1".into(),
        name: "process_payment".into(),
        args: serde_json::json!({"amount": 5, "recipient": "Bo"}),
    };
    (scope, call)
}

/// The body of a decision that approves.
pub const APPROVE: &str = r#"{"approved": true}"#;

/// A POST of `body` as JSON to `url`, on a connection of its own.
pub fn post_json(url: String, body: impl ToString) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
}

/// Fails showing `text` unless it holds `part`.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{text}");
}

pub struct Server {
    pub url: String,
    pub clock: Clock,
    pub payments: Arc<AtomicUsize>,
    client: reqwest::Client,
}

pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    async fn of(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.must();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_default()
    }

    /// The body's lines that are JSON (an audit log's events), in order.
    pub fn json_lines(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The JSON chunks of an SSE body, `[DONE]` and comments left out.
    pub fn chunks(&self) -> Vec<Value> {
        self.body
            .split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(from_json)
            .collect()
    }

    pub fn of_type(&self, kind: &str) -> Vec<Value> {
        self.chunks()
            .into_iter()
            .filter(|c| c["type"] == kind)
            .collect()
    }

    /// The `errorText` of each `tool-output-error` chunk.
    pub fn error_texts(&self) -> Vec<String> {
        self.of_type("tool-output-error")
            .iter()
            .map(|c| c["errorText"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// The streamed text, all deltas joined.
    pub fn text(&self) -> String {
        self.of_type("text-delta")
            .iter()
            .filter_map(|c| c["delta"].as_str())
            .collect()
    }
}

/// Counts its executions, then runs the wrapped tool.
pub struct Counting<T> {
    pub inner: T,
    pub count: Arc<AtomicUsize>,
}

#[toolgate::tools::async_trait]
impl<T: Tool> Tool for Counting<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    fn output_schema(&self) -> Option<Value> {
        self.inner.output_schema()
    }
    fn needs_confirmation(&self, args: &Value) -> bool {
        self.inner.needs_confirmation(args)
    }
    fn may_need_confirmation(&self) -> bool {
        self.inner.may_need_confirmation()
    }
    fn confirmation_hint(&self, args: &Value) -> String {
        self.inner.confirmation_hint(args)
    }
    fn runs_on_client(&self) -> bool {
        self.inner.runs_on_client()
    }

    fn source(&self) -> ToolSource {
        self.inner.source()
    }
    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.inner.execute(args, ctx).await
    }
}

pub const START_MS: u64 = 1_800_000_000_000;

impl Server {
    pub async fn start() -> Self {
        Self::with(Config::default(), |app| app).await
    }

    pub async fn with_config(config: Config) -> Self {
        Self::with(config, |app| app).await
    }

    /// A server whose tools are the demo tools with `process_payment` counted;
    /// `customize` may replace more.
    pub async fn with(config: Config, customize: impl FnOnce(App) -> App) -> Self {
        let payments = Arc::new(AtomicUsize::new(0));
        let payment_limit = config.tools.payment_limit;
        let settings = Settings::new(config).must();
        // The config's tools, with `process_payment` counted.
        let mut registry = settings.registry.clone();
        registry.register(Counting {
            inner: ProcessPayment::new(payment_limit),
            count: payments.clone(),
        });
        let clock = Clock::manual(START_MS);
        let app = App::new(settings)
            .with_ids(Ids::sequential())
            .with_clock(clock.clone())
            .with_registry(registry);
        let app = customize(app);
        let (listener, url) = loopback().await;
        // The server under test: it lives as long as the test's runtime.
        #[allow(clippy::disallowed_methods)]
        tokio::spawn(app.serve(listener));
        Self {
            url,
            clock,
            payments,
            client: reqwest::Client::new(),
        }
    }

    pub fn payments(&self) -> usize {
        self.payments.load(Ordering::SeqCst)
    }

    pub async fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> Reply {
        self.post_with(path, &[], body).await
    }

    /// A POST with these headers too (`X-User: clerk`).
    pub async fn post_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut request = self
            .client
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::of(request.body(body).send().await.must()).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.get_with(path, &[]).await
    }

    /// A GET with these headers too.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = self.client.get(format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::of(request.send().await.must()).await
    }

    /// A DELETE with these headers.
    pub async fn delete_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = self.client.delete(format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Reply::of(request.send().await.must()).await
    }

    /// Sends a turn and hands back the body as it streams.
    pub async fn open(
        &self,
        body: &Value,
    ) -> impl futures::Stream<Item = reqwest::Result<bytes::Bytes>> + use<> {
        self.client
            .post(format!("{}/stream", self.url))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .must()
            .bytes_stream()
    }

    pub async fn chat(&self, body: &Value) -> Reply {
        self.post("/stream", body.to_string()).await
    }

    /// A server of `config` on a fresh store of `kind` (`memory`, `sqlite`,
    /// or `redis` with the `redis-server` feature); the temporary folder of
    /// a SQLite store lives as long as the server.
    pub async fn on_backend(kind: &str, config: Config) -> (Self, Option<tempfile::TempDir>) {
        let (store, dir) = store_of(kind).await;
        (
            Server::with(config, move |app| app.with_store(store)).await,
            dir,
        )
    }

    /// Sends a turn and reads its body until `done` holds of what was read:
    /// the body, still open, and what was read.
    pub async fn open_until(
        &self,
        body: &Value,
        done: impl Fn(&str) -> bool,
    ) -> (body::Streaming, String) {
        let mut stream: body::Streaming = Box::pin(self.open(body).await);
        let mut seen = String::new();
        body::read_until(&mut stream, &mut seen, done).await;
        (stream, seen)
    }

    /// A server of the default config on the SQLite store at `path`.
    pub async fn on_sqlite(path: &std::path::Path) -> Self {
        let store = toolgate::store::Store::sqlite(path).must();
        Self::with(Config::default(), |app| app.with_store(store)).await
    }

    /// A server of the config `yaml`.
    pub async fn from_yaml(yaml: &str) -> Self {
        Self::with_config(Config::from_yaml(yaml).must()).await
    }

    /// The user's `text` in `chat`: `user_says`, sent as [`Server::chat`].
    pub async fn says(&self, chat: &str, text: &str) -> Reply {
        self.chat(&user_says(chat, text)).await
    }

    /// `POST /api/confirmations/{id}` approving the question `id`.
    pub async fn approve(&self, id: impl std::fmt::Display) -> Reply {
        self.approve_with(id, &[]).await
    }

    /// `POST /api/confirmations/{id}` with this decision.
    pub async fn decide(&self, id: &str, decision: impl Into<reqwest::Body>) -> Reply {
        self.post(&format!("/api/confirmations/{id}"), decision)
            .await
    }

    /// [`Server::approve`] with these headers too (`X-User: lead`).
    pub async fn approve_with(
        &self,
        id: impl std::fmt::Display,
        headers: &[(&str, &str)],
    ) -> Reply {
        let path = format!("/api/confirmations/{id}");
        self.post_with(&path, headers, APPROVE).await
    }
}

/// A fixture from `tests/fixtures/`.
pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `useChat` body of a first message.
pub fn user_says(chat: &str, text: &str) -> Value {
    serde_json::json!({
        "id": chat,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]
    })
}

/// Asserts a snapshot (an SSE body, a socket's frames) in the top-level
/// `snapshots/` folder, as `snapshots/{name}.snap`: the path is relative to
/// the file that invokes the macro, a group in `tests/it/`.
#[macro_export]
macro_rules! assert_sse {
    ($name:expr, $body:expr) => {
        insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, omit_expression => true}, {
            insta::assert_snapshot!($name, $body);
        });
    };
}

/// One test per answer to `question` (a JSON body): each starts a server,
/// sends the question and then the answer `fixture`, and checks the reply
/// against its `snapshot` and the number of payments made.
macro_rules! answer_snapshots {
    ($question:expr; $($name:ident: $fixture:literal => $snapshot:literal, $payments:literal;)*) => {$(
        #[tokio::test]
        async fn $name() {
            let (server, reply) = crate::common::answered(&$question, $fixture).await;
            assert_sse!($snapshot, reply.body);
            assert_eq!(server.payments(), $payments);
        }
    )*};
}

pub fn confirmation_name() -> &'static str {
    CONFIRMATION_TOOL
}

/// The original function call of the question `reply` asks; fails the test
/// when its first tool input is not a question.
pub fn asked_call(reply: &Reply) -> Value {
    let ask = reply.of_type("tool-input-available");
    assert_eq!(
        ask.first().map(|a| &a["toolName"]),
        Some(&Value::from(confirmation_name())),
        "{}",
        reply.body
    );
    ask[0]["input"]["originalFunctionCall"].clone()
}

/// How many times the reply asks for a confirmation (the confirmation
/// tool's `tool-input-available` chunks).
pub fn asked(reply: &Reply) -> usize {
    reply
        .of_type("tool-input-available")
        .iter()
        .filter(|c| c["toolName"] == confirmation_name())
        .count()
}

/// The follow-up `useChat` sends in chat `chat` after approving the question
/// "Send 50 USD to Hanako" that `first` asked (with its signature, if any).
pub fn approval(chat: &str, first: &Reply) -> Value {
    approval_of(chat, "Send 50 USD to Hanako", first)
}

/// The approval of the question in `first`, the answer to the user's `text`.
pub fn approval_of(chat: &str, text: &str, first: &Reply) -> Value {
    let message_id = first.of_type("start")[0]["messageId"].clone();
    let ask = first.of_type("tool-input-available")[0].clone();
    serde_json::json!({
        "id": chat, "trigger": "submit-message", "messageId": message_id,
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]},
            {"id": message_id, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-adk_request_confirmation", "toolCallId": ask["toolCallId"], "state": "output-available",
                 "input": ask["input"], "output": {"confirmed": true}, "callProviderMetadata": ask["providerMetadata"]}
            ]}
        ]
    })
}

/// The SHA-256 of an API key, in hex, as `auth.apiKeys[].sha256` takes it.
pub fn hashed(key: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))
}

/// `auth.apiKeys` with one key per `(principal, key)`.
pub fn api_keys(keys: &[(&str, &str)]) -> String {
    let keys: String = keys
        .iter()
        .map(|(principal, key)| {
            format!(
                "    - {{principal: {principal}, sha256: '{}'}}\n",
                hashed(key)
            )
        })
        .collect();
    format!("auth:\n  apiKeys:\n{keys}")
}

/// A server that asked `question`, and its reply to the fixture `answer`.
pub async fn answered(question: &Value, answer: &str) -> (Server, Reply) {
    let server = Server::start().await;
    server.chat(question).await;
    let reply = server.chat(&fixture(answer)).await;
    (server, reply)
}

/// What the model says once the payment to Hanako that `decided` (a decision
/// the API answered) ran.
pub fn paid_hanako(decided: &Value) -> String {
    format!(
        "Sent 50 USD to Hanako (transaction {}).",
        decided["outcome"]["output"]["transactionId"]
            .as_str()
            .unwrap_or("?")
    )
}

/// The transaction id of the payment a reply reports, if any.
pub fn transaction(reply: &Reply) -> Option<String> {
    reply
        .of_type("tool-output-available")
        .into_iter()
        .find(|c| c["output"]["status"] == "completed")
        .and_then(|c| c["output"]["transactionId"].as_str().map(str::to_owned))
}

/// The Redis server for the `redis-server` tests: `TOOLGATE_TEST_REDIS_URL`
/// (`scripts/test` starts one and sets it); the test fails without one.
#[cfg(feature = "redis-server")]
pub fn redis_url() -> String {
    std::env::var("TOOLGATE_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "no Redis server: set TOOLGATE_TEST_REDIS_URL (scripts/test starts one), \
                 or leave the `redis-server` feature off"
            )
        })
}

/// A fresh store of `kind` (`memory`, `sqlite`, or `redis` with the
/// `redis-server` feature) and the temporary folder a SQLite store lives in.
pub async fn store_of(kind: &str) -> (toolgate::store::Store, Option<tempfile::TempDir>) {
    match kind {
        "memory" => (toolgate::store::Store::memory(), None),
        "sqlite" => {
            let dir = tempfile::tempdir().must();
            (
                toolgate::store::Store::sqlite(&dir.path().join("db.sqlite3")).must(),
                Some(dir),
            )
        }
        #[cfg(feature = "redis-server")]
        "redis" => {
            let url = redis_url();
            let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
            (
                toolgate::store::Store::redis(&url, &prefix).await.must(),
                None,
            )
        }
        other => panic!("no store backend {other}"),
    }
}
