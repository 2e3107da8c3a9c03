use super::*;
use crate::provider::http;
use crate::provider::http::testing::{decode_data, lone_call};

fn decode(events: &[&str]) -> Result<Vec<ProviderEvent>, ProviderError> {
    decode_data(Decode::new(Ids::sequential()), events)
}

/// Each call's (id, name, joined arguments), in order.
fn calls(events: &[ProviderEvent]) -> Vec<(String, String, String)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for event in events {
        match event {
            ProviderEvent::ToolCallStart { id, name, .. } => {
                calls.push((id.clone(), name.clone(), String::new()))
            }
            ProviderEvent::ToolCallDelta { id, delta } => {
                match calls.iter_mut().find(|c| &c.0 == id) {
                    Some(call) => call.2.push_str(delta),
                    None => panic!("a delta for unstarted `{id}`"),
                }
            }
            _ => {}
        }
    }
    calls
}

fn call(id: &str, name: &str, args: &str) -> (String, String, String) {
    (id.into(), name.into(), args.into())
}

#[test]
fn fragments_without_index_join_by_id_then_position() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"q\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{"}}]}}]}"#,
        // By id: back to `a`.
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":":1}"}}]}}]}"#,
        // Neither: the newest call.
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
        // Two at once, neither: by position.
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":""}},{"function":{"arguments":" "}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        calls(&events.unwrap_or_default()),
        [call("a", "x", "{\"q\":1}"), call("b", "y", "{} ")]
    );
}

/// Some servers send every parallel call at index 0; an id of its own
/// starts a call.
#[test]
fn a_reused_index_with_a_new_id_is_a_new_call() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"get_time","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"process_payment","arguments":"{\"amount\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"50}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(
        calls(&events.unwrap_or_default()),
        [
            call("call_a", "get_time", ""),
            call("call_b", "process_payment", "{\"amount\":50}")
        ]
    );
}

#[test]
fn both_reasoning_names_in_one_delta_are_one_delta() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"reasoning":"Hm.","reasoning_content":"Hm."},"finish_reason":"stop"}]}"#,
    ]);
    let reasoning = events
        .unwrap_or_default()
        .into_iter()
        .filter(|e| matches!(e, ProviderEvent::ReasoningDelta(_)))
        .count();
    assert_eq!(reasoning, 1);
}

#[test]
fn unnamed_calls_cannot_grow_without_bound() {
    let chunk = format!(
        r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"{}"}}}}]}}}}]}}"#,
        "x".repeat(MAX_ARGS_BYTES / 2 + 1)
    );
    let events = decode(&[&chunk, &chunk]);
    assert!(
        matches!(events, Err(ProviderError::Stream(_))),
        "{events:?}"
    );
    let many: Vec<String> = (0..=MAX_CALLS_PER_STEP)
        .map(|i| format!(r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":{i},"function":{{"arguments":""}}}}]}}}}]}}"#))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(matches!(decode(&many), Err(ProviderError::Stream(_))));
}

#[test]
fn a_name_that_comes_late_still_starts_the_call() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"x"}}]},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(
        lone_call(&events.unwrap_or_default()),
        Some(("call-1", "x", None, "{}"))
    );
}

#[test]
fn a_call_that_never_gets_a_name_is_an_error() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    assert!(matches!(events, Err(ProviderError::Stream(_))));
}

#[test]
fn an_end_without_a_finish_is_incomplete() {
    let events = decode(&[r#"{"choices":[{"delta":{"content":"Hel"}}]}"#]);
    assert!(matches!(events, Err(ProviderError::Incomplete { .. })));
    assert!(matches!(
        decode(&[r#"{"error":{"message":"overloaded"}}"#]),
        Err(ProviderError::Upstream { message, .. }) if message == "overloaded"
    ));
    assert!(matches!(
        decode(&["{not json"]),
        Err(ProviderError::Stream(_))
    ));
}

#[test]
fn history_becomes_chat_messages() {
    let request = http::testing::weather_request(vec![
        ModelMessage::System("be brief".into()),
        ModelMessage::User(vec![UserContent::Text("weather?".into())]),
        // Reasoning alone has nothing Chat Completions takes back.
        ModelMessage::Assistant(vec![AssistantContent::Reasoning {
            text: "cut off".into(),
            metadata: None,
        }]),
        ModelMessage::Assistant(vec![
            AssistantContent::Reasoning {
                text: "hm".into(),
                metadata: None,
            },
            http::testing::weather_call("c1", None),
        ]),
        http::testing::weather_denied("c1"),
    ]);
    // A model that wants `max_completion_tokens` instead.
    let options = ModelOptions {
        model: "m".into(),
        max_tokens: Some(100),
        extra_body: http::testing::extra_body([
            ("max_tokens", Value::Null),
            ("max_completion_tokens", 100.into()),
        ]),
        ..ModelOptions::default()
    };
    assert_eq!(
        http::testing::body_of::<Decode>(&options, &request),
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "User denied execution: not now"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
                            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}}],
            "max_completion_tokens": 100,
        })
    );
    // Written straight to bytes, it is what serde_json writes for its
    // values, key for key.
    let options = ModelOptions {
        extra_body: Default::default(),
        ..options
    };
    let bytes = http::testing::body_bytes::<Decode>(&options, &request);
    let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&serde_json::to_vec(&body).unwrap_or_default()),
        String::from_utf8_lossy(&bytes)
    );
    let tool = &body["messages"][3];
    let keys: Vec<&str> = tool
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["role", "tool_call_id", "content"]);
}

#[test]
fn declarations_written_in_are_the_body_serde_writes() {
    let keys = [
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "temperature",
        "max_tokens",
    ];
    let options = http::testing::full_options();
    http::testing::check_declared_body::<Decode>(&options, &keys, None);
    // An extra `tools` takes their place; an extra key goes last.
    let replaced = json!({"mine": true});
    let options = ModelOptions {
        extra_body: http::testing::extra_body([("tools", replaced.clone()), ("extra", 1.into())]),
        ..options
    };
    let mut keys = keys.to_vec();
    keys.push("extra");
    http::testing::check_declared_body::<Decode>(&options, &keys, Some(&replaced));
}

#[test]
fn files_are_content_parts() {
    let content = |media_type: &str, url: &str| {
        let request = ModelRequest {
            messages: vec![ModelMessage::User(vec![
                UserContent::File {
                    media_type: media_type.into(),
                    url: url.into(),
                },
                UserContent::Text("What is this?".into()),
            ])],
            tools: Vec::new().into(),
        };
        Decode::body(&ModelOptions::default(), &request, None).map(|bytes| {
            let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            body["messages"][0]["content"].clone()
        })
    };
    assert_eq!(
        content("image/png", "https://example.com/a.png").unwrap_or_default(),
        json!([
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "text", "text": "What is this?"},
        ])
    );
    assert_eq!(
        content(
            "application/pdf",
            "data:application/pdf;base64,JVBERi0xLjQ="
        )
        .unwrap_or_default()[0],
        json!({"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQ="}})
    );
    assert!(matches!(
        content("application/pdf", "https://example.com/a.pdf"),
        Err(ProviderError::Request(_))
    ));
    assert!(matches!(
        content("audio/wav", "data:audio/wav;base64,UklGR"),
        Err(ProviderError::Request(_))
    ));
}
