use serde_json::json;

use super::*;
use crate::provider::http::testing::{decode_sse, fixture};

/// The events of a recorded `/run_sse` body, in words.
fn summary(name: &str) -> (Vec<String>, Option<String>) {
    let (events, error) = decode_sse(Decode::new(), &fixture("adk", name));
    let words = events
        .iter()
        .map(|event| match event {
            AdkEvent::Step => "step".to_owned(),
            AdkEvent::TextDelta(text) => format!("text {text}"),
            AdkEvent::ReasoningDelta(text) => format!("reasoning {text}"),
            AdkEvent::Call(call) => format!("call {} {}", call.name, call.args),
            AdkEvent::Output { name, output, .. } => format!("output {name} {output}"),
            AdkEvent::Confirm(c) => format!("confirm {} {}", c.original.name, c.original.args),
        })
        .collect();
    (words, error.map(|e| e.to_string()))
}

#[test]
fn recorded_streams() {
    let summary_text = "text Summary: ";
    let cases: &[(&str, &[&str])] = &[
        (
            "text-stream",
            &[
                "step",
                "text You said: hello.",
                "text  I am a",
                "text  scripted model.",
            ],
        ),
        (
            "text-nostream",
            &["step", "text You said: hello. I am a scripted model."],
        ),
        (
            "think-stream",
            &["step", "reasoning Let me think.", "text Thought about it."],
        ),
        (
            "think-nostream",
            &["step", "reasoning Let me think.", "text Thought about it."],
        ),
        (
            "weather-stream",
            &[
                "step",
                r#"call get_weather {"city":"Tokyo"}"#,
                r#"output get_weather {"city":"Tokyo","weather":"sunny"}"#,
                "step",
                "text Summary: ",
                "text get_weather returned {'city': 'Tokyo', 'weather': 'sunny'}.",
            ],
        ),
        (
            "pay-stream.1",
            &[
                "step",
                r#"call process_payment {"amount":500,"currency":"USD","recipient":"Alice"}"#,
                r#"confirm process_payment {"amount":500,"currency":"USD","recipient":"Alice"}"#,
            ],
        ),
        (
            "pay-nostream.1",
            &[
                "step",
                r#"call process_payment {"amount":500,"currency":"USD","recipient":"Alice"}"#,
                r#"confirm process_payment {"amount":500,"currency":"USD","recipient":"Alice"}"#,
            ],
        ),
        (
            "deny-stream.2",
            &[
                r#"output process_payment {"error":"This tool call is rejected."}"#,
                "step",
                "text Summary: ",
                "text process_payment returned {'error': 'This tool call is rejected.'}.",
            ],
        ),
        (
            "mixed.1",
            &[
                "step",
                r#"call process_payment {"amount":30,"currency":"USD","recipient":"Saburo"}"#,
                r#"call get_weather {"city":"Tokyo"}"#,
                r#"output get_weather {"city":"Tokyo","weather":"sunny"}"#,
                r#"confirm process_payment {"amount":30,"currency":"USD","recipient":"Saburo"}"#,
            ],
        ),
        (
            "two.1",
            &[
                "step",
                r#"call process_payment {"amount":10,"currency":"USD","recipient":"Taro"}"#,
                r#"call process_payment {"amount":20,"currency":"USD","recipient":"Jiro"}"#,
                r#"confirm process_payment {"amount":10,"currency":"USD","recipient":"Taro"}"#,
                r#"confirm process_payment {"amount":20,"currency":"USD","recipient":"Jiro"}"#,
            ],
        ),
        (
            "payload.1",
            &[
                "step",
                r#"call book_days {"days":5}"#,
                r#"confirm book_days {"days":5}"#,
                "step",
                "text Summary: ",
                "text book_days returned {'status': 'Manager approval is required.'}.",
            ],
        ),
    ];
    for (name, expected) in cases {
        let (words, error) = summary(name);
        assert_eq!(error, None, "{name}");
        assert_eq!(words, *expected, "{name}");
    }
    let (words, _) = summary("pay-approve-stream.2");
    assert!(
        words[0].starts_with(r#"output process_payment {"status":"success""#),
        "{words:?}"
    );
    assert!(words[2].starts_with(summary_text), "{words:?}");
}

#[test]
fn a_confirmation_names_its_call_and_the_tools_own_question() {
    let (events, _) = decode_sse(Decode::new(), &fixture("adk", "payload.1"));
    let call = events.iter().find_map(|e| match e {
        AdkEvent::Call(call) => Some(call.clone()),
        _ => None,
    });
    let asked = events.iter().find_map(|e| match e {
        AdkEvent::Confirm(c) => Some(c.clone()),
        _ => None,
    });
    let (Some(call), Some(asked)) = (call, asked) else {
        panic!("{events:?}")
    };
    assert_eq!(asked.original, call);
    assert_ne!(asked.id, call.id);
    assert!(asked.id.starts_with("adk-"));
    assert_eq!(asked.hint.as_deref(), Some("Approve up to 5 days."));
    assert_eq!(asked.payload, Some(json!({"approved_days": 0})));
}

#[test]
fn failures_tell_the_error_type_only() {
    for name in ["fail-stream", "fail-nostream", "unknown-id"] {
        let (words, error) = summary(name);
        assert!(words.iter().all(|w| w == "step"), "{name}: {words:?}");
        assert_eq!(
            error.as_deref(),
            Some("ADK reported an error: the agent failed (ValueError)"),
            "{name}"
        );
    }
    let cases = [
        (
            r#"{"error": "boom at /srv/agents/x.py"}"#,
            "the agent failed (error)",
        ),
        (
            r#"{"error": "x", "error_details": {"error_type": "a b/c"}}"#,
            "the agent failed (error)",
        ),
        (
            r#"{"errorCode": "ValidationError", "errorMessage": "1 validation error", "invocationId": "e-1"}"#,
            "the agent failed (ValidationError)",
        ),
    ];
    for (data, text) in cases {
        let error = crate::provider::http::testing::decode_data(Decode::new(), &[data]).err();
        let shown = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(shown.ends_with(text), "{data}: {shown}");
        assert!(!shown.contains("/srv"), "{shown}");
    }
}

#[test]
fn unreadable_confirmations_and_calls_are_errors() {
    let cases = [
        r#"{"id":"e","content":{"parts":[{"functionCall":{"name":"get_weather","args":{}}}]}}"#,
        r#"{"id":"e","content":{"parts":[{"functionCall":{"id":"c","name":"adk_request_confirmation","args":{"toolConfirmation":{}}}}]}}"#,
        r#"{"id":"e","content":{"parts":[{"functionCall":{"id":"c","name":"adk_request_confirmation","args":{"originalFunctionCall":{"name":"pay","args":{}}}}}]}}"#,
        r#"{"id":"e","content":{"parts":[{"functionCall":{"id":"c","name":"adk_request_confirmation","args":{"originalFunctionCall":{"id":"d","name":"adk_request_confirmation","args":{}}}}}]}}"#,
        "not json",
    ];
    for data in cases {
        let result = crate::provider::http::testing::decode_data(Decode::new(), &[data]);
        assert!(result.is_err(), "{data}: {result:?}");
    }
}
