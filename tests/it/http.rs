//! The HTTP surface: routes, headers, client errors, model and tool failures,
//! keep-alive and cancellation.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Server, user_says, wait};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use toolgate::Config;
use toolgate::provider::{
    ModelMessage, ModelProvider, ModelRequest, ProviderError, ProviderEvent, StopReason, Usage,
};

const HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

fn finish() -> ProviderEvent {
    ProviderEvent::Finish {
        reason: StopReason::Stop,
        usage: Usage::default(),
    }
}

#[tokio::test]
async fn both_routes_stream_with_the_five_headers() -> anyhow::Result<()> {
    let server = Server::start().await;
    for path in ["/stream", "/api/chat"] {
        let reply = server.post(path, user_says("c", "hi").to_string()).await;
        assert_eq!(reply.status, 200);
        for (name, value) in HEADERS {
            assert_eq!(
                reply.headers.get(name).and_then(|v| v.to_str().ok()),
                Some(value),
                "{path} {name}"
            );
        }
        assert!(reply.body.ends_with("data: [DONE]\n\n"));
    }
    let health = reqwest::get(format!("{}/healthz", server.url)).await?;
    assert_eq!(health.status(), 200);
    Ok(())
}

#[tokio::test]
async fn client_mistakes_get_a_clear_json_error() {
    let mut config = Config::default();
    config.stream.max_body_bytes = 4096;
    let server = Server::with_config(config).await;
    let deep = format!(
        r#"{{"messages": [{{"role": "user", "parts": [{{"type": "text", "text": "x", "input": {}{}}}]}}]}}"#,
        "[".repeat(1500),
        "]".repeat(1500)
    );
    let cases: [(String, u16, &str); 7] = [
        ("{".into(), 400, "invalid JSON body: EOF while parsing an object at line 1 column 1"),
        ("{}".into(), 400, "invalid JSON body: missing field `messages` at line 1 column 2"),
        (r#"{"messages": "x"}"#.into(), 400, "invalid JSON body: invalid type: string \"x\", expected a sequence at line 1 column 16"),
        (r#"{"messages": [{"role": "user", "parts": [{"type": "tool-x", "state": "output-available"}]}]}"#.into(), 400, "invalid request: messages[0].parts[0]: missing `toolCallId`"),
        (deep, 400, "invalid JSON body: recursion limit exceeded at line 1 column 203"),
        ("x".repeat(5000), 413, "request body is larger than 4096 bytes"),
        (r#"{"messages": [{"role": "user", "content": 5}]}"#.into(), 400, "invalid JSON body: data did not match any variant of untagged enum RawContent at line 1 column 44"),
    ];
    for (body, status, error) in cases {
        let reply = server.post("/stream", body).await;
        assert_eq!(reply.status, status, "{}", reply.body);
        assert_eq!(
            reply
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&reply.body).ok(),
            Some(json!({"error": error}))
        );
    }
}

/// Answers one text delta, then the upstream breaks.
struct Broken;

impl ModelProvider for Broken {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        futures::stream::iter([
            Ok(ProviderEvent::TextDelta("Hel".into())),
            Err(ProviderError::Stream("connection reset".into())),
        ])
        .boxed()
    }
}

#[tokio::test]
async fn a_failing_model_is_an_error_chunk_then_the_end() {
    let server = Server::with(Config::default(), |app| app.with_provider(Broken)).await;
    let reply = server.says("c", "hi").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        concat!(
            "data: {\"type\":\"start\",\"messageId\":\"msg-1\"}\n\n",
            "data: {\"type\":\"start-step\"}\n\n",
            "data: {\"type\":\"text-start\",\"id\":\"txt-2\"}\n\n",
            "data: {\"type\":\"text-delta\",\"id\":\"txt-2\",\"delta\":\"Hel\"}\n\n",
            "data: {\"type\":\"error\",\"errorText\":\"model stream broke: connection reset\"}\n\n",
            "data: [DONE]\n\n",
        )
    );
}

/// Calls a tool nobody registered, then answers whatever it is told.
struct CallsUnknownTool;

impl ModelProvider for CallsUnknownTool {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let events = match request.messages.last() {
            Some(ModelMessage::Tool(results)) => vec![
                ProviderEvent::TextDelta(format!("{:?}", results[0].outcome).into()),
                finish(),
            ],
            _ => vec![
                ProviderEvent::ToolCallStart {
                    id: "call-x".into(),
                    name: "delete_everything".into(),
                    metadata: None,
                },
                ProviderEvent::ToolCallDelta {
                    id: "call-x".into(),
                    delta: "{}".into(),
                },
                ProviderEvent::ToolCallEnd {
                    id: "call-x".into(),
                },
                ProviderEvent::Finish {
                    reason: StopReason::ToolCalls,
                    usage: Usage::default(),
                },
            ],
        };
        futures::stream::iter(events.into_iter().map(Ok)).boxed()
    }
}

#[tokio::test]
async fn an_unknown_tool_is_a_tool_error_and_the_model_goes_on() {
    let server = Server::with(Config::default(), |app| app.with_provider(CallsUnknownTool)).await;
    let reply = server.says("c", "hi").await;
    assert_eq!(
        reply.of_type("tool-output-error"),
        [
            json!({"type": "tool-output-error", "toolCallId": "call-x", "errorText": "unknown tool `delete_everything`"})
        ]
    );
    assert_eq!(reply.text(), r#"Error("unknown tool `delete_everything`")"#);
    // Refused, it runs nowhere: the client's `onToolCall` skips a provider-executed call.
    let shown = reply.of_type("tool-input-available");
    assert_eq!(shown.len(), 1, "{}", reply.body);
    assert_eq!(shown[0]["providerExecuted"], true, "{}", reply.body);
    assert_eq!(
        reply.of_type("finish"),
        [json!({"type": "finish", "finishReason": "stop"})]
    );
}

/// Streams deltas until dropped, and says when it was.
struct Endless {
    dropped: Arc<AtomicBool>,
    delay: Duration,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl ModelProvider for Endless {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let guard = SetOnDrop(self.dropped.clone());
        let delay = self.delay;
        async_stream::stream! {
            let _guard = guard;
            loop {
                // The model's pace: slow on purpose.
                tokio::time::sleep(delay).await;
                yield Ok(ProviderEvent::TextDelta("x".into()));
            }
        }
        .boxed()
    }
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_model() {
    let dropped = Arc::new(AtomicBool::new(false));
    let provider = Endless {
        dropped: dropped.clone(),
        delay: Duration::from_millis(5),
    };
    let server = Server::with(Config::default(), |app| app.with_provider(provider)).await;
    let mut body = Box::pin(server.open(&user_says("c", "hi")).await);
    assert!(body.next().await.is_some());
    assert!(!dropped.load(Ordering::SeqCst));
    drop(body);
    wait::until_true(
        "the model stream to be dropped after the client went away",
        || dropped.load(Ordering::SeqCst),
    )
    .await;
}

#[tokio::test]
async fn idle_streams_get_keep_alive_comments() {
    let mut config = Config::default();
    config.stream.keep_alive_secs = 1;
    let dropped = Arc::new(AtomicBool::new(false));
    let provider = Endless {
        dropped,
        delay: Duration::from_millis(2500),
    };
    let server = Server::with(config, |app| app.with_provider(provider)).await;
    let mut body = Box::pin(server.open(&user_says("c", "hi")).await);
    let mut seen = String::new();
    while !seen.contains(": keep-alive\n\n") {
        let Some(Ok(bytes)) = body.next().await else {
            panic!("stream ended: {seen}")
        };
        seen.push_str(&String::from_utf8_lossy(&bytes));
        assert!(
            !seen.contains("text-delta"),
            "no keep-alive before the first delta: {seen}"
        );
    }
}

#[tokio::test]
async fn count_to_a_hundred_thousand_streams_every_delta() {
    let server = Server::start().await;
    let reply = server.says("c", "count to 100000").await;
    let deltas = reply.of_type("text-delta");
    assert_eq!(deltas.len(), 100_000);
    assert_eq!(deltas[0]["delta"], "1");
    assert_eq!(deltas[99_999]["delta"], " 100000");
}

#[tokio::test]
async fn a_continuation_keeps_the_message_id() {
    let server = Server::start().await;
    let body = json!({
        "id": "c", "trigger": "submit-message", "messageId": "a1",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather in Oslo"}]},
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-get_weather", "toolCallId": "w1", "state": "output-available", "input": {"city": "Oslo"}, "output": {"city": "Oslo", "condition": "rainy", "temperatureC": 3}}
            ]}
        ]
    });
    let reply = server.chat(&body).await;
    let chunks = reply.chunks();
    assert_eq!(chunks[0], json!({"type": "start", "messageId": "a1"}));
    assert_eq!(chunks[1], json!({"type": "start-step"}));
    assert_eq!(reply.text(), "It is rainy and 3 °C in Oslo.");
}

/// Counts model calls; always asks for the weather again, with the same call id.
struct Loops(Arc<AtomicUsize>);

impl ModelProvider for Loops {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let id = "w".to_owned();
        futures::stream::iter(
            [
                ProviderEvent::ToolCallStart {
                    id: id.clone(),
                    name: "get_weather".into(),
                    metadata: None,
                },
                ProviderEvent::ToolCallDelta {
                    id: id.clone(),
                    delta: r#"{"city":"Rome"}"#.into(),
                },
                ProviderEvent::ToolCallEnd { id },
                ProviderEvent::Finish {
                    reason: StopReason::ToolCalls,
                    usage: Usage::default(),
                },
            ]
            .map(Ok),
        )
        .boxed()
    }
}

#[tokio::test]
async fn the_step_limit_stops_a_model_that_never_stops() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut config = Config::default();
    config.stream.max_steps = 3;
    let provider = Loops(calls.clone());
    let server = Server::with(config, |app| app.with_provider(provider)).await;
    let reply = server.says("c", "hi").await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(reply.of_type("start-step").len(), 3);
    // A reused provider id is renamed: toolCallIds stay unique in the message.
    let ids: Vec<Value> = reply
        .of_type("tool-input-start")
        .iter()
        .map(|c| c["toolCallId"].clone())
        .collect();
    assert_eq!(ids, [json!("w"), json!("call-2"), json!("call-3")]);
    assert_eq!(
        reply.of_type("finish"),
        [json!({"type": "finish", "finishReason": "tool-calls"})]
    );
}

#[tokio::test]
async fn a_model_making_too_many_calls_in_one_step_is_stopped() {
    let server = Server::start().await;
    let clauses = |n: usize| {
        (0..n)
            .map(|i| format!("weather in c{i}"))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    let ok = server.says("c", &clauses(128)).await;
    assert_eq!(ok.of_type("tool-output-available").len(), 128);
    let reply = server.says("c", &clauses(129)).await;
    assert_eq!(
        reply.of_type("error"),
        [
            json!({"type": "error", "errorText": "the model made more than 128 tool calls in one step"})
        ]
    );
}

#[tokio::test]
async fn oversized_tool_arguments_are_a_tool_input_error() {
    let server = Server::start().await;
    let name = "x".repeat(1_100_000);
    let reply = server.says("c", &format!("Send 5 USD to {name}")).await;
    let errors = reply.of_type("tool-input-error");
    assert_eq!(errors.len(), 1, "{}", &reply.body[..300]);
    assert_eq!(
        errors[0]["errorText"],
        "tool call arguments exceed 1048576 bytes"
    );
    assert_eq!(
        reply.of_type("finish"),
        [json!({"type": "finish", "finishReason": "stop"})]
    );
    assert_eq!(server.payments(), 0);
}
