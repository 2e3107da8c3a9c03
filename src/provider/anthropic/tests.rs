use super::*;
use sse_stream::Sse;

use crate::ids::Ids;
use crate::provider::http::Decoder;
use crate::provider::http::{
    self,
    testing::{decode_sse, finish},
};
use crate::provider::{ProviderEvent, ResultContent, StopReason};

fn run(text: &str) -> (Vec<ProviderEvent>, Option<ProviderError>) {
    decode_sse(Decode::new(Ids::sequential()), text.as_bytes())
}

fn decode_text(text: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
    match run(text) {
        (events, None) => Ok(events),
        (_, Some(e)) => Err(e),
    }
}

fn fixture(name: &str) -> String {
    String::from_utf8_lossy(&http::testing::fixture(PROVIDER, name)).into_owned()
}

fn text(delta: &str) -> ProviderEvent {
    ProviderEvent::TextDelta(delta.into())
}

fn start(id: &str) -> ProviderEvent {
    ProviderEvent::ToolCallStart {
        id: id.into(),
        name: "get_weather".into(),
        metadata: None,
    }
}

fn args(id: &str, delta: &str) -> ProviderEvent {
    ProviderEvent::ToolCallDelta {
        id: id.into(),
        delta: delta.into(),
    }
}

fn end(id: &str) -> ProviderEvent {
    ProviderEvent::ToolCallEnd { id: id.into() }
}

/// Text and thinking stream as they come, thinking ends with its
/// signature, and each tool call keeps its own fragments.
#[test]
fn fixtures_stream_as_they_come() {
    let cases = [
        (
            "text",
            vec![
                text("Bonjour"),
                text(" from the café "),
                text("☕"),
                finish(StopReason::Stop, 25, 12),
            ],
        ),
        (
            "after_tool",
            vec![
                text("It is sunny"),
                text(" in Paris."),
                finish(StopReason::Stop, 460, 8),
            ],
        ),
        (
            "thinking",
            vec![
                ProviderEvent::ReasoningDelta("The user wants the GCD of 1071 and 462.".into()),
                ProviderEvent::ReasoningDelta(
                    " 1071 = 2·462 + 147; 462 = 3·147 + 21; 147 = 7·21.".into(),
                ),
                ProviderEvent::ReasoningMetadata(Box::new(json!({"anthropic": {
                    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
                }}))),
                text("The GCD is 21."),
                finish(StopReason::Stop, 40, 58),
            ],
        ),
        (
            "tool_call",
            vec![
                text("Let me check the weather"),
                text(" in Paris."),
                start("toolu_01A"),
                args("toolu_01A", "{\"ci"),
                args("toolu_01A", "ty\": \"Pa"),
                args("toolu_01A", "ris\"}"),
                end("toolu_01A"),
                finish(StopReason::ToolCalls, 380, 54),
            ],
        ),
        (
            "parallel_tool_calls",
            vec![
                start("toolu_01A"),
                args("toolu_01A", "{\"city\": "),
                args("toolu_01A", "\"Paris\"}"),
                end("toolu_01A"),
                start("toolu_01B"),
                args("toolu_01B", "{\"city\""),
                args("toolu_01B", ": \"Rome\"}"),
                end("toolu_01B"),
                finish(StopReason::ToolCalls, 402, 96),
            ],
        ),
    ];
    for (name, expected) in cases {
        assert_eq!(
            decode_text(&fixture(name)).unwrap_or_default(),
            expected,
            "{name}"
        );
    }
}

#[test]
fn redacted_thinking_is_metadata_alone() {
    let events = decode_text(concat!(
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}"#,
        "\n\nevent: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n\nevent: message_stop\n",
        r#"data: {"type":"message_stop"}"#,
        "\n\n",
    ));
    assert_eq!(
        events.unwrap_or_default(),
        [
            ProviderEvent::ReasoningMetadata(Box::new(
                json!({"anthropic": {"redactedData": "EmwKAhgB"}})
            )),
            finish(StopReason::Stop, 0, 0),
        ]
    );
}

#[test]
fn an_error_event_is_the_upstreams_error() {
    let (events, failure) = run(&fixture("error"));
    assert_eq!(events, [text("Let me")]);
    assert!(matches!(
        failure,
        Some(ProviderError::Upstream { provider: "anthropic", message })
            if message == "overloaded_error: Overloaded"
    ));
}

#[test]
fn a_cut_stream_is_incomplete_unless_the_stop_reason_came() {
    let text_fixture = fixture("text");
    let cut = text_fixture
        .split_once("event: message_delta")
        .map(|(head, _)| head)
        .unwrap_or_default();
    assert!(matches!(
        decode_text(cut),
        Err(ProviderError::Incomplete {
            provider: "anthropic"
        })
    ));

    let tool_fixture = fixture("tool_call");
    let without_stop = tool_fixture
        .split_once("event: message_stop")
        .map(|(head, _)| head)
        .unwrap_or_default();
    let events = decode_text(without_stop).unwrap_or_default();
    assert_eq!(events.last(), Some(&finish(StopReason::ToolCalls, 380, 54)));
}

#[test]
fn a_stop_reason_without_message_stop_ends_open_calls() {
    let events = decode_text(concat!(
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01A","name":"get_weather","input":{"city":"Paris"}}}"#,
        "\n\nevent: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":7}}"#,
        "\n\n",
    ));
    assert_eq!(
        events.unwrap_or_default(),
        [
            start("toolu_01A"),
            args("toolu_01A", r#"{"city":"Paris"}"#),
            end("toolu_01A"),
            finish(StopReason::Length, 0, 7),
        ]
    );
}

#[test]
fn the_data_type_stands_in_for_a_missing_event_name() {
    let mut decode = Decode::new(Ids::sequential());
    let mut out = Vec::new();
    let events = [
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#,
        r#"{"type":"something_new","index":3}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"refusal"}}"#,
        r#"{"type":"message_stop"}"#,
    ];
    let mut done = false;
    for data in events {
        done = decode
            .event(Sse::default().data(data), &mut out)
            .unwrap_or_default();
    }
    assert!(done);
    assert_eq!(
        out,
        [
            text("Hi"),
            text("!"),
            finish(StopReason::ContentFilter, 0, 0)
        ]
    );
}

#[test]
fn broken_events_are_stream_errors() {
    let mut out = Vec::new();
    let malformed = Sse::default()
        .event("content_block_delta")
        .data("{not json");
    assert!(matches!(
        Decode::new(Ids::sequential()).event(malformed, &mut out),
        Err(ProviderError::Stream(message)) if message.contains("not JSON")
    ));
    let stray = Sse::default().event("content_block_delta").data(
        r#"{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}"#,
    );
    assert!(matches!(
        Decode::new(Ids::sequential()).event(stray, &mut out),
        Err(ProviderError::Stream(message)) if message.contains("block 4")
    ));
    assert!(out.is_empty());
}

#[test]
fn history_becomes_alternating_messages() {
    let request = http::testing::weather_request(vec![
        ModelMessage::System("Be brief.".into()),
        ModelMessage::User(vec![UserContent::Text("Weather in Paris?".into())]),
        ModelMessage::System("Use metric units.".into()),
        ModelMessage::Assistant(vec![
            AssistantContent::Reasoning {
                text: "I should ask the tool.".into(),
                metadata: Some(json!({"anthropic": {"signature": "sig-1"}})),
            },
            AssistantContent::Reasoning {
                text: "unsigned".into(),
                metadata: None,
            },
            AssistantContent::Reasoning {
                text: String::new(),
                metadata: Some(json!({"anthropic": {"redactedData": "EmwK"}})),
            },
            AssistantContent::Text("Checking.".into()),
            http::testing::weather_call("toolu_01A", None),
        ]),
        http::testing::weather_denied("toolu_01A"),
        ModelMessage::User(vec![UserContent::Text("Then guess.".into())]),
        ModelMessage::Assistant(vec![AssistantContent::Reasoning {
            text: "dropped".into(),
            metadata: None,
        }]),
    ]);
    let options = ModelOptions {
        model: "claude-sonnet-4-5".into(),
        temperature: Some(1.0),
        extra_body: http::testing::extra_body([(
            "thinking",
            json!({"type": "enabled", "budget_tokens": 1024}),
        )]),
        ..ModelOptions::default()
    };
    assert_eq!(
        http::testing::body_of::<Decode>(&options, &request),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "stream": true,
            "temperature": 1.0,
            "system": "Be brief.\n\nUse metric units.",
            "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should ask the tool.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "EmwK"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "User denied execution: not now", "is_error": true},
                    {"type": "text", "text": "Then guess."},
                ]},
            ],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        })
    );
}

#[test]
fn files_are_images_and_documents() {
    let request = |media_type: &str, url: &str| ModelRequest {
        messages: vec![
            ModelMessage::User(vec![
                UserContent::File {
                    media_type: media_type.into(),
                    url: url.into(),
                },
                UserContent::Text("What is this?".into()),
            ]),
            ModelMessage::Tool(vec![ToolResult {
                call_id: "toolu_01B".into(),
                tool_name: "get_weather".into(),
                outcome: ResultContent::Output(json!({"sky": "clear"})),
            }]),
        ],
        tools: Vec::new().into(),
    };
    let content = |media_type: &str, url: &str| {
        let body = Decode::body(&ModelOptions::default(), &request(media_type, url), None);
        body.map(|bytes| {
            let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            body["messages"][0]["content"].clone()
        })
    };
    assert_eq!(
        content("image/png", "data:image/png;base64,iVBORw0K").unwrap_or_default(),
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "{\"sky\":\"clear\"}"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}},
            {"type": "text", "text": "What is this?"},
        ])
    );
    assert_eq!(
        content("application/pdf", "https://example.com/a.pdf").unwrap_or_default()[1],
        json!({"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}})
    );
    assert!(matches!(
        content("text/csv", "data:text/csv;base64,YSxi"),
        Err(ProviderError::Request(message)) if message.contains("text/csv")
    ));
    assert!(matches!(
        content("image/png", "file:///etc/passwd"),
        Err(ProviderError::Request(_))
    ));
}

#[test]
fn declarations_written_in_are_the_body_serde_writes() {
    let keys = [
        "model",
        "max_tokens",
        "stream",
        "temperature",
        "tools",
        "messages",
    ];
    let options = crate::provider::http::testing::full_options();
    crate::provider::http::testing::check_declared_body::<Decode>(&options, &keys, None);
}
