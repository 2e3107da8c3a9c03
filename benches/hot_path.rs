//! Micro benchmarks of the hot path. Run: `cargo bench --bench hot_path`.
//!
//! - encoding UI chunks to SSE bytes (chunks/s and bytes/s);
//! - parsing a `useChat` body with a 200-message history;
//! - one policy decision with per-tool rules.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate::policy::{CallInfo, Mode, Policy, ToolInfo, ToolPolicies, ToolRule};
use toolgate::protocol::ChatRequest;
use toolgate::protocol::sse::{EventWriter, SseEncoder};
use toolgate::protocol::{BlockId, UiChunk};

/// Chunks to the SSE bytes sent, as a turn does: serialized in batches of
/// 64 into shared events (the turn's log), then copied into the response.
fn encoding(c: &mut Criterion) {
    const BATCH: u64 = 1024;
    let id = BlockId::from("txt-1");
    let chunks: Vec<UiChunk> = (0..BATCH)
        .map(|i| UiChunk::text_delta(&id, format!(" {i}").into()))
        .collect();
    let mut events = EventWriter::default();
    let mut encoder = SseEncoder::new();
    let mut encode = |chunks: &[UiChunk]| {
        for batch in chunks.chunks(64) {
            for chunk in batch {
                events.push(black_box(chunk));
            }
            for event in events.take() {
                encoder.push_event(&event);
            }
        }
        encoder.take()
    };
    let bytes = encode(&chunks).len() as u64;
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("text-delta chunks", |b| {
        b.iter(|| black_box(encode(&chunks)));
    });
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("text-delta bytes", |b| {
        b.iter(|| black_box(encode(&chunks)));
    });
    group.finish();
}

/// A 200-message chat: user questions, assistant answers with a tool call each.
fn long_history() -> Vec<u8> {
    let messages: Vec<Value> = (0..100)
        .flat_map(|i| {
            [
                json!({"id": format!("u{i}"), "role": "user", "parts": [{"type": "text", "text": format!("What is the weather in city number {i}?")}]}),
                json!({"id": format!("a{i}"), "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "tool-get_weather", "toolCallId": format!("call-{i}"), "state": "output-available",
                     "input": {"city": format!("City {i}")}, "output": {"city": format!("City {i}"), "condition": "sunny", "temperatureC": 21}},
                    {"type": "step-start"},
                    {"type": "text", "text": format!("It is sunny and 21 °C in City {i}."), "state": "done"}
                ]}),
            ]
        })
        .collect();
    json!({"id": "chat", "trigger": "submit-message", "messages": messages})
        .to_string()
        .into_bytes()
}

fn parsing(c: &mut Criterion) {
    let body = long_history();
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("useChat body, 200 messages", |b| {
        b.iter(|| {
            ChatRequest::from_slice(black_box(&body))
                .map(|r| r.messages.len())
                .unwrap_or(0)
        });
    });
    group.finish();
}

fn deciding(c: &mut Criterion) {
    let rules: BTreeMap<String, ToolRule> = yaml_serde::from_str(
        r#"
process_payment:
  deny: {when: "amount > 5000"}
  confirm: {when: ["amount > 100", "recipient not in [\"Hanako\", \"Bob\"]"]}
"#,
    )
    .unwrap_or_default();
    let lists = ToolPolicies {
        always_allow: vec!["mcp--filesystem--read_*".into()],
        always_deny: vec!["mcp--filesystem--delete_*".into(), "mcp--git--push".into()],
    };
    let Ok(policy) = Policy::new(Mode::EventBased, &lists, rules) else {
        return;
    };
    let args = json!({"amount": 50, "recipient": "Hanako", "currency": "USD"});
    let tool = ToolInfo {
        name: "process_payment",
        qualified: "internal--process_payment",
        tool_may_ask: true,
    };
    c.bench_function("policy decision", |b| {
        b.iter(|| {
            policy.decide(black_box(&CallInfo {
                tool,
                args: &args,
                tool_asks: true,
                chat_id: "c",
                principal: "p",
            }))
        });
    });
}

/// A recorded OpenAI-compatible stream (the tool-call fixture, its text
/// deltas repeated to 200 events) through the SSE parser and the decoder.
fn provider_stream(c: &mut Criterion) {
    use futures::StreamExt;
    use toolgate::ids::Ids;
    use toolgate::provider::http::Decoder;
    use toolgate::provider::openai::Decode;
    let text = r#"data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}

"#;
    let fixture = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/providers/openai/tool_call.sse"
    ))
    .unwrap_or_default();
    let mut bytes = text.repeat(200).into_bytes();
    bytes.extend_from_slice(&fixture);
    // As the network hands them over: 1460-byte reads.
    let reads: Vec<bytes::Bytes> = bytes
        .chunks(1460)
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    let mut group = c.benchmark_group("provider");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("openai stream, 209 events", |b| {
        b.iter(|| {
            let events = sse_stream::SseByteStream::new(futures::stream::iter(
                reads.iter().cloned().map(Ok::<_, std::io::Error>),
            ));
            let mut decode = Decode::new(Ids::sequential());
            let mut out = Vec::with_capacity(256);
            futures::executor::block_on(async {
                let mut events = std::pin::pin!(events);
                while let Some(Ok(event)) = events.next().await {
                    if decode.event(event, &mut out).unwrap_or(true) {
                        break;
                    }
                }
            });
            out.len()
        })
    });
    group.finish();
}

criterion_group!(benches, encoding, parsing, deciding, provider_stream);
criterion_main!(benches);
