//! Traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, the binary sends its
//! spans over OTLP/HTTP (protobuf) to a collector, here one in the test.
//! A turn continues the caller's `traceparent` (with
//! `telemetry.trustTraceparent`); the model call, the tool
//! call and the confirmation decision are in it with OpenTelemetry's GenAI
//! names; a call's arguments and result only with `telemetry.recordContent`.

use crate::common;

use std::collections::HashMap;

use common::receiver::Receiver;
use common::{Binary, Reply, approval, transaction, user_says, wait};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::Value;

/// The caller's trace and span, as its `traceparent` names them.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// Every span the collector got.
fn spans(collector: &Receiver) -> Vec<Span> {
    collector
        .got()
        .iter()
        .flat_map(|got| {
            let request = ExportTraceServiceRequest::decode(&got.body[..])
                .unwrap_or_else(|e| panic!("not an OTLP trace request: {e}"));
            request.resource_spans
        })
        .flat_map(|resource| resource.scope_spans)
        .flat_map(|scope| scope.spans)
        .collect()
}

/// Attributes as text, by key.
fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(AnyValue::StringValue(s)) => s.clone(),
                Some(AnyValue::IntValue(i)) => i.to_string(),
                Some(AnyValue::BoolValue(b)) => b.to_string(),
                Some(AnyValue::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

async fn chat(server: &Binary, body: &Value) -> Reply {
    let parent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    server.chat_with(body, &[("traceparent", &parent)]).await
}

/// Asks to pay, approves, and returns the spans of both turns once the
/// collector has them all.
async fn paid(yaml: &str) -> Vec<Span> {
    let collector = Receiver::start(&[200]).await;
    let server = Binary::serve_yaml_env(
        yaml,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()),
            // Sent every 10 ms: the test polls instead of stopping the server.
            ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ],
    );
    let first = chat(&server, &user_says("chat-traced", "Send 50 USD to Hanako")).await;
    let paid = chat(&server, &approval("chat-traced", &first)).await;
    assert!(transaction(&paid).is_some(), "{}", paid.body);
    wait::until_ok("both turns, the model calls and the payment", || {
        let spans = spans(&collector);
        let seen: Vec<String> = spans.iter().map(|s| s.name.clone()).collect();
        let done = named(&spans, "invoke_agent toolgate").len() == 2
            && named(&spans, "execute_tool process_payment").len() == 1
            && named(&spans, "chat scripted").len() >= 2;
        std::future::ready(match done {
            true => Ok(spans),
            false => Err(format!("{seen:?}")),
        })
    })
    .await
}

#[tokio::test]
async fn a_paid_turn_is_traced_with_genai_names_and_no_content() {
    let spans = paid("telemetry:\n  trustTraceparent: true\n").await;
    let turns = named(&spans, "invoke_agent toolgate");
    for turn in &turns {
        assert_eq!(hex(&turn.trace_id), TRACE_ID, "the caller's trace goes on");
        assert_eq!(hex(&turn.parent_span_id), PARENT_ID);
        let attrs = attributes(&turn.attributes);
        assert_eq!(attrs["gen_ai.operation.name"], "invoke_agent");
        assert_eq!(attrs["gen_ai.conversation.id"], "chat-traced");
    }
    let turn_ids: Vec<&[u8]> = turns.iter().map(|t| t.span_id.as_slice()).collect();

    let model = named(&spans, "chat scripted");
    for call in &model {
        let attrs = attributes(&call.attributes);
        assert_eq!(attrs["gen_ai.operation.name"], "chat");
        assert_eq!(attrs["gen_ai.provider.name"], "scripted");
        assert_eq!(attrs["gen_ai.request.model"], "scripted");
        assert!(
            turn_ids.contains(&call.parent_span_id.as_slice()),
            "in a turn"
        );
    }

    let tool = named(&spans, "execute_tool process_payment")[0];
    let attrs = attributes(&tool.attributes);
    assert_eq!(attrs["gen_ai.operation.name"], "execute_tool");
    assert_eq!(attrs["gen_ai.tool.name"], "process_payment");
    assert!(!attrs["gen_ai.tool.call.id"].is_empty(), "{attrs:?}");
    assert_eq!(
        tool.parent_span_id,
        turns_second(&turns).span_id,
        "the approved call runs in the turn that approved it"
    );
    assert!(!attrs.contains_key("gen_ai.tool.call.arguments"));
    assert!(!attrs.contains_key("gen_ai.tool.call.result"));

    // The question in the first turn, the approval in the second.
    let decisions: Vec<HashMap<String, String>> = turns
        .iter()
        .flat_map(|t| &t.events)
        .filter(|e| e.name == "toolgate.confirmation")
        .map(|e| attributes(&e.attributes))
        .collect();
    let words: Vec<&str> = decisions
        .iter()
        .map(|d| d["toolgate.confirmation.decision"].as_str())
        .collect();
    assert!(words.contains(&"asked"), "{decisions:?}");
    let approved = decisions
        .iter()
        .find(|d| d["toolgate.confirmation.decision"] == "approved")
        .unwrap_or_else(|| panic!("no approval among {decisions:?}"));
    assert_eq!(approved["toolgate.confirmation.by"], "user");
    assert_eq!(approved["toolgate.confirmation.principal"], "anonymous");
    assert_eq!(
        approved["toolgate.confirmation.tool"],
        "internal--process_payment"
    );
    assert_eq!(
        approved["gen_ai.tool.call.id"],
        attrs["gen_ai.tool.call.id"]
    );

    // Nothing of the arguments, anywhere.
    for value in every_value(&spans) {
        assert!(
            !value.contains("Hanako") && !value.contains("USD"),
            "content in a span: {value}"
        );
    }
}

/// By default a client's `traceparent` is not taken: any client could
/// otherwise put its turns into a trace of its choosing.
#[tokio::test]
async fn a_clients_traceparent_is_ignored_unless_trusted() {
    let spans = paid("").await;
    let turns = named(&spans, "invoke_agent toolgate");
    assert_eq!(turns.len(), 2);
    for turn in &turns {
        assert_ne!(hex(&turn.trace_id), TRACE_ID, "a trace of its own");
        assert!(turn.parent_span_id.is_empty(), "a root span");
    }
}

#[tokio::test]
async fn record_content_keeps_arguments_and_result() {
    let spans = paid("telemetry:\n  recordContent: true\n").await;
    let tool = named(&spans, "execute_tool process_payment")[0];
    let attrs = attributes(&tool.attributes);
    let arguments = &attrs["gen_ai.tool.call.arguments"];
    assert!(
        arguments.contains("Hanako") && arguments.contains("USD"),
        "{arguments}"
    );
    assert!(
        attrs["gen_ai.tool.call.result"].contains("completed"),
        "{attrs:?}"
    );
}

// Two workers: the collector answers while the test blocks on the exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_sends_the_spans_it_held() -> anyhow::Result<()> {
    let collector = Receiver::start(&[200]).await;
    // The batch is sent every 5 s by default: the stop sends it sooner.
    let endpoint = [("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str())];
    let mut server = Binary::serve_yaml_env("", &[], &endpoint);
    let reply = chat(&server, &user_says("chat-stopped", "hello")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()?;
    assert!(status.success());
    assert!(
        server.exited_within(wait::PATIENCE),
        "toolgate did not stop on SIGTERM"
    );
    let spans = spans(&collector);
    assert_eq!(named(&spans, "invoke_agent toolgate").len(), 1, "{spans:?}");
    Ok(())
}

/// The turn that ran the payment: the one whose events say `approved`.
fn turns_second<'a>(turns: &[&'a Span]) -> &'a Span {
    turns
        .iter()
        .find(|t| {
            t.events.iter().any(|e| {
                attributes(&e.attributes)
                    .get("toolgate.confirmation.decision")
                    .is_some_and(|d| d == "approved")
            })
        })
        .copied()
        .unwrap_or_else(|| panic!("no turn approved the payment"))
}

/// Every attribute value of every span and event, and every status message.
fn every_value(spans: &[Span]) -> Vec<String> {
    let mut values = Vec::new();
    for span in spans {
        values.extend(attributes(&span.attributes).into_values());
        for event in &span.events {
            values.push(event.name.clone());
            values.extend(attributes(&event.attributes).into_values());
        }
        if let Some(status) = &span.status {
            values.push(status.message.clone());
        }
    }
    values
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
