use super::*;
use crate::provider::http;
use crate::provider::http::testing::{decode_data, decode_sse, finish, fixture, lone_call};

fn decode(events: &[&str]) -> Result<Vec<ProviderEvent>, ProviderError> {
    decode_data(Decode::new(Ids::sequential()), events)
}

fn decode_fixture(name: &str) -> (Vec<ProviderEvent>, Option<ProviderError>) {
    let name = name.trim_end_matches(".sse");
    decode_sse(Decode::new(Ids::sequential()), &fixture("gemini", name))
}

fn text_of(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn text_thoughts_and_usage() {
    let text = |delta: &str| ProviderEvent::TextDelta(delta.into());
    let cases: [(&[&str], Vec<ProviderEvent>); 3] = [
        // Text parts stream as text; a signature on text is not needed back.
        (
            &[
                r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"lo","thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2,"totalTokenCount":6}}"#,
            ],
            vec![text("Hel"), text("lo"), finish(StopReason::Stop, 4, 2)],
        ),
        // Thought parts are reasoning, and their tokens are output.
        (
            &[
                r#"{"candidates":[{"content":{"parts":[{"text":"Let me think.","thought":true}],"role":"model"}}]}"#,
                r#"{"candidates":[{"content":{"parts":[{"text":"Yes."}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"thoughtsTokenCount":5}}"#,
            ],
            vec![
                ProviderEvent::ReasoningDelta("Let me think.".into()),
                text("Yes."),
                finish(StopReason::Stop, 3, 7),
            ],
        ),
        // Token counts at the limit saturate.
        (
            &[
                r#"{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"candidatesTokenCount":18446744073709551615,"thoughtsTokenCount":1}}"#,
            ],
            vec![finish(StopReason::Stop, 0, u64::MAX)],
        ),
    ];
    for (events, expected) in cases {
        assert_eq!(decode(events).unwrap_or_default(), expected);
    }
}

/// A call without an id gets one; either way its signature rides along.
#[test]
fn a_call_keeps_its_id_or_gets_one() {
    let signature = json!({"google": {"thoughtSignature": "c2ln"}});
    let cases = [
        (
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP"}]}"#,
            (
                "call-1",
                "get_weather",
                Some(&signature),
                r#"{"city":"Paris"}"#,
            ),
        ),
        (
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"id":"g1","name":"now"}}],"role":"model"},"finishReason":"STOP"}]}"#,
            ("g1", "now", None, "{}"),
        ),
    ];
    for (event, expected) in cases {
        let events = decode(&[event]).unwrap_or_default();
        assert_eq!(lone_call(&events), Some(expected));
        assert_eq!(events.last(), Some(&finish(StopReason::ToolCalls, 0, 0)));
    }
}

#[test]
fn parallel_calls_in_one_event() {
    let events = decode(&[
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"w","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},{"functionCall":{"name":"w","args":{"city":"Rome"}}}],"role":"model"},"finishReason":"STOP"}]}"#,
    ]);
    let starts: Vec<_> = events
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallStart { id, metadata, .. } => Some((id, metadata.map(|m| *m))),
            ProviderEvent::ToolCallDelta { id, delta } => Some((id, Some(delta.into()))),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            (
                "call-1".into(),
                Some(json!({"google": {"thoughtSignature": "c2ln"}}))
            ),
            ("call-1".into(), Some(json!(r#"{"city":"Paris"}"#))),
            ("call-2".into(), None),
            ("call-2".into(), Some(json!(r#"{"city":"Rome"}"#))),
        ]
    );
}

#[test]
fn errors_truncation_and_blocks() {
    assert!(matches!(
        decode(&[
            r#"{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}"#,
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
        ]),
        Err(ProviderError::Upstream { provider: "gemini", message }) if message == "The model is overloaded."
    ));
    assert!(matches!(
        decode(&[r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}]}"#]),
        Err(ProviderError::Incomplete { provider: "gemini" })
    ));
    assert!(matches!(
        decode(&["{not json"]),
        Err(ProviderError::Stream(message)) if message.contains("gemini")
    ));
    assert!(matches!(
        decode(&[
            r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9}}"#
        ])
        .as_deref(),
        Ok([ProviderEvent::Finish {
            reason: StopReason::ContentFilter,
            ..
        }])
    ));
}

#[test]
fn finish_reasons() {
    for (expected, reasons) in [
        (StopReason::Length, &["MAX_TOKENS"][..]),
        (StopReason::ContentFilter, &["SAFETY", "RECITATION", "SPII"]),
        (StopReason::Other, &["MALFORMED_FUNCTION_CALL", "OTHER"]),
    ] {
        for reason in reasons {
            let event = format!(r#"{{"candidates":[{{"finishReason":"{reason}"}}]}}"#);
            assert!(
                matches!(decode(&[&event]).as_deref(), Ok([ProviderEvent::Finish { reason, .. }]) if *reason == expected),
                "{reason}"
            );
        }
    }
}

#[test]
fn fixtures_decode() {
    let (events, error) = decode_fixture("text.sse");
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "Bonjour ! Il fait beau à Paris ☀️.");
    assert!(matches!(
        events.last(),
        Some(ProviderEvent::Finish { reason: StopReason::Stop, usage }) if usage.input_tokens > 0 && usage.output_tokens > 0
    ));

    let (events, error) = decode_fixture("thinking.sse");
    assert!(error.is_none(), "{error:?}");
    assert!(matches!(
        events.first(),
        Some(ProviderEvent::ReasoningDelta(_))
    ));
    assert!(!text_of(&events).is_empty());

    let (events, error) = decode_fixture("tool_call.sse");
    assert!(error.is_none(), "{error:?}");
    assert!(matches!(
        lone_call(&events),
        Some(("call-1", "get_weather", Some(_), r#"{"city":"Paris"}"#))
    ));

    let (events, error) = decode_fixture("parallel_tool_calls.sse");
    assert!(error.is_none(), "{error:?}");
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDelta { id, delta } => Some((id.as_str(), delta.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        deltas,
        [
            ("call-1", r#"{"city":"Paris"}"#),
            ("call-2", r#"{"city":"Rome"}"#)
        ]
    );

    let (events, error) = decode_fixture("error.sse");
    assert!(!text_of(&events).is_empty());
    assert!(matches!(
        error,
        Some(ProviderError::Upstream { message, .. }) if message == "The model is overloaded."
    ));

    let (events, error) = decode_fixture("after_tool.sse");
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "It is sunny in Paris.");
}

#[test]
fn history_becomes_contents() {
    let request = http::testing::weather_request(vec![
        ModelMessage::System("be brief".into()),
        ModelMessage::System("answer in French".into()),
        ModelMessage::User(vec![
            UserContent::Text("weather here?".into()),
            UserContent::File {
                media_type: "image/png".into(),
                url: "data:image/png;base64,iVBORw0KGgo=".into(),
            },
            UserContent::File {
                media_type: "application/pdf".into(),
                url: "https://example.com/a.pdf".into(),
            },
        ]),
        ModelMessage::Assistant(vec![
            AssistantContent::Reasoning {
                text: "hm".into(),
                metadata: None,
            },
            AssistantContent::Text("Let me look.".into()),
            http::testing::weather_call(
                "call-7",
                Some(json!({"google": {"thoughtSignature": "c2ln"}})),
            ),
        ]),
        http::testing::weather_denied("call-7"),
        ModelMessage::User(vec![UserContent::Text("ok then".into())]),
    ]);
    let options = ModelOptions {
        model: "gemini-2.5-flash".into(),
        max_tokens: Some(100),
        extra_body: http::testing::extra_body([(
            "generationConfig",
            json!({"thinkingConfig": {"includeThoughts": true}}),
        )]),
        ..ModelOptions::default()
    };
    assert_eq!(
        http::testing::body_of::<Decode>(&options, &request),
        json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "weather here?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                    {"fileData": {"mimeType": "application/pdf", "fileUri": "https://example.com/a.pdf"}},
                ]},
                {"role": "model", "parts": [
                    {"text": "Let me look."},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"error": "User denied execution: not now"}}},
                    {"text": "ok then"},
                ]},
            ],
            "systemInstruction": {"parts": [{"text": "be brief\n\nanswer in French"}]},
            "tools": [{"functionDeclarations": [
                {"name": "get_weather", "description": "Weather", "parametersJsonSchema": {"type": "object"}}
            ]}],
            "generationConfig": {"maxOutputTokens": 100, "thinkingConfig": {"includeThoughts": true}},
        })
    );
}

#[test]
fn outputs_and_bare_options() {
    let request = ModelRequest {
        messages: vec![
            ModelMessage::User(vec![UserContent::File {
                media_type: "text/plain".into(),
                url: "data:text/plain,h%C3%A9llo".into(),
            }]),
            ModelMessage::Assistant(vec![AssistantContent::ToolCall {
                call: ToolCall {
                    id: "c".into(),
                    name: "now".into(),
                    args: Value::String("{broken".into()),
                },
                metadata: None,
            }]),
            ModelMessage::Tool(vec![ToolResult {
                call_id: "c".into(),
                tool_name: "now".into(),
                outcome: ResultContent::Output(json!({"t": 1})),
            }]),
        ],
        tools: Vec::new().into(),
    };
    let options = ModelOptions {
        model: "m".into(),
        ..ModelOptions::default()
    };
    assert_eq!(
        http::testing::body_of::<Decode>(&options, &request),
        json!({"contents": [
            {"role": "user", "parts": [{"inlineData": {"mimeType": "text/plain", "data": "aMOpbGxv"}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "now", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "now", "response": {"output": {"t": 1}}}}]},
        ]})
    );
}

/// Gemini checks the signature on a step's first call: a signed call
/// recorded after an unsigned one goes first, and so does its answer.
#[test]
fn the_signed_call_goes_first_with_its_answer() {
    let call = |id: &str, signed: bool| AssistantContent::ToolCall {
        call: ToolCall {
            id: id.into(),
            name: format!("tool_{id}"),
            args: json!({}),
        },
        metadata: signed
            .then(|| json!({"toolgate": {"seal": 1}, "google": {"thoughtSignature": "SIG"}})),
    };
    let result = |id: &str| ToolResult {
        call_id: id.into(),
        tool_name: format!("tool_{id}"),
        outcome: ResultContent::Output(json!(id)),
    };
    let request = ModelRequest {
        messages: vec![
            ModelMessage::User(vec![UserContent::Text("go".into())]),
            ModelMessage::Assistant(vec![
                AssistantContent::Text("ok".into()),
                call("a", false),
                call("b", true),
            ]),
            ModelMessage::Tool(vec![result("a"), result("b")]),
        ],
        tools: Vec::new().into(),
    };
    let options = ModelOptions::default();
    let body = http::testing::body_of::<Decode>(&options, &request);
    assert_eq!(
        body["contents"][1]["parts"],
        json!([
            {"text": "ok"},
            {"functionCall": {"name": "tool_b", "args": {}}, "thoughtSignature": "SIG"},
            {"functionCall": {"name": "tool_a", "args": {}}},
        ])
    );
    assert_eq!(
        body["contents"][2]["parts"],
        json!([
            {"functionResponse": {"name": "tool_b", "response": {"output": "b"}}},
            {"functionResponse": {"name": "tool_a", "response": {"output": "a"}}},
        ])
    );
}

#[test]
fn declarations_written_in_are_the_body_serde_writes() {
    let keys = ["contents", "tools", "generationConfig"];
    let options = http::testing::full_options();
    http::testing::check_declared_body::<Decode>(&options, &keys, None);
}
