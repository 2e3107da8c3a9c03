use super::*;
use serde_json::json;

fn part(value: Value) -> Result<Part, RequestError> {
    let raw: RawPart =
        serde_json::from_value(value).map_err(|e| RequestError::Invalid(e.to_string()))?;
    raw.into_part(&"p")
}

#[test]
fn ids_are_printable_and_bounded() {
    let long = "a".repeat(MAX_ID_BYTES + 1);
    #[rustfmt::skip]
    let cases: &[(&str, bool)] = &[
        // The AI SDK's own: nanoid-like and UUIDs.
        ("V1StGXR8_Z5jdHi6B-myT", true),
        ("msg-aBcD1234eFgH5678", true),
        ("6f1c2f9e-3d4b-4a5e-9c7d-0e1f2a3b4c5d", true),
        ("chat with spaces and ünïcödé ✓", true),
        (&long[1..], true),
        (&long, false),
        ("x\nFAKE LOG LINE", false),
        ("x\r\nFAKE", false),
        ("x\ty", false),
        ("\u{1b}[31mred", false),
        ("x\u{85}y", false),
        ("x\u{2028}y", false),
        ("x\0", false),
    ];
    for (id, valid) in cases {
        assert_eq!(check_id("id", id).is_ok(), *valid, "{id:?}");
    }
    let refused = check_id("`id` (the chat)", "x\nFAKE").map_err(|e| e.to_string());
    assert!(
        refused.is_err_and(|text| !text.contains('\n') && !text.contains("FAKE")),
        "the refusal does not repeat the id"
    );
}

#[test]
fn every_tool_state() {
    let cases = [
        (
            json!({"state":"input-streaming"}),
            ToolState::InputStreaming,
        ),
        (
            json!({"state":"input-available"}),
            ToolState::InputAvailable,
        ),
        (
            json!({"state":"approval-requested","approval":{"id":"a"}}),
            ToolState::ApprovalRequested {
                approval_id: "a".into(),
            },
        ),
        (
            json!({"state":"approval-responded","approval":{"id":"a","approved":true,"reason":"ok"}}),
            ToolState::ApprovalResponded(Approval {
                id: "a".into(),
                approved: Some(true),
                reason: Some("ok".into()),
            }),
        ),
        (
            json!({"state":"output-available","output":{"x":1},"preliminary":true}),
            ToolState::OutputAvailable {
                output: json!({"x":1}),
                preliminary: true,
            },
        ),
        (
            json!({"state":"output-error","errorText":"bad"}),
            ToolState::OutputError {
                error_text: "bad".into(),
            },
        ),
        (
            json!({"state":"output-denied","approval":{"id":"a","approved":false}}),
            ToolState::OutputDenied(Some(Approval {
                id: "a".into(),
                approved: Some(false),
                reason: None,
            })),
        ),
    ];
    for (mut value, state) in cases {
        value["type"] = json!("tool-get_weather");
        value["toolCallId"] = json!("c1");
        value["input"] = json!({"city":"Oslo"});
        let Ok(Part::Tool(tool)) = part(value) else {
            panic!("not a tool part")
        };
        assert_eq!(tool.tool_name, "get_weather");
        assert_eq!(tool.state, state);
    }
}

#[test]
fn dynamic_data_and_unknown_parts() {
    let dynamic = part(
        json!({"type":"dynamic-tool","toolName":"x","toolCallId":"c","state":"input-available","input":{}}),
    );
    assert!(matches!(
        dynamic,
        Ok(Part::Tool(ToolPart { dynamic: true, .. }))
    ));
    let data = part(json!({"type":"data-weather","data":{"t":1}}));
    assert_eq!(
        data.ok(),
        Some(Part::Data {
            name: "weather".into(),
            data: json!({"t":1})
        })
    );
    let other = part(json!({"type":"reasoning-file","whatever":1}));
    assert_eq!(other.ok(), Some(Part::Other("reasoning-file".into())));
}

#[test]
fn one_judgment_of_an_answer() {
    let keys = |output: Value| AnswerKeys::of_output(&output).map_err(|e| e.to_string());
    assert_eq!(
        keys(
            json!({"confirmed": true, "remember": "session", "approveNext": 3, "remembered": true})
        ),
        Ok(AnswerKeys {
            remember: Some(Remember::Chat),
            approve_next: Some(3),
            ..AnswerKeys::default()
        })
    );
    let remembered = [
        (json!("once"), None),
        (json!(null), None),
        (json!("session"), Some(Remember::Chat)),
        (json!("global"), Some(Remember::Everywhere)),
        (
            json!({"scope": "window", "minutes": 60}),
            Some(Remember::Window { minutes: 60 }),
        ),
        (
            json!({"minutes": 1, "scope": "window"}),
            Some(Remember::Window { minutes: 1 }),
        ),
        (
            json!({"scope": "window", "minutes": 43_200}),
            Some(Remember::Window { minutes: 43_200 }),
        ),
    ];
    for (remember, expected) in remembered {
        assert_eq!(
            keys(json!({"confirmed": true, "remember": remember})).map(|k| k.remember),
            Ok(expected),
            "{remember}"
        );
    }
    let respond = |output: Value| AnswerKeys {
        decision: Some(DecisionWord::Respond),
        output: Some(output),
        ..AnswerKeys::default()
    };
    let responses = [
        json!({"decision": "respond", "output": {"policy": "30 days"}}),
        json!({"confirmed": true, "decision": "respond", "output": {"policy": "30 days"}}),
        json!({"confirmed": null, "decision": "respond", "output": {"policy": "30 days"}, "reason": null}),
    ];
    for output in responses {
        assert_eq!(
            keys(output.clone()),
            Ok(respond(json!({"policy": "30 days"}))),
            "{output}"
        );
    }
    assert_eq!(
        keys(json!({"decision": "respond", "output": "x".repeat(MAX_ARGS_BYTES - 2)})),
        Ok(respond(json!("x".repeat(MAX_ARGS_BYTES - 2)))),
        "an output at the limit"
    );
    assert_eq!(keys(json!("yes")), Ok(AnswerKeys::default()));
    assert_eq!(
        keys(json!({"reason": null, "approveNext": null})),
        Ok(AnswerKeys::default())
    );
    let refused = [
        json!({"confirmed": true, "approveNext": -1}),
        json!({"confirmed": true, "approveNext": 1e30}),
        json!({"confirmed": true, "approveNext": "3"}),
        json!({"confirmed": true, "approveNext": 4_294_967_296_u64}),
        json!({"confirmed": true, "remember": "forever"}),
        json!({"confirmed": true, "remember": "Session"}),
        json!({"confirmed": true, "remember": 60}),
        json!({"confirmed": true, "remember": ["session"]}),
        json!({"confirmed": true, "remember": {"scope": "window"}}),
        json!({"confirmed": true, "remember": {"minutes": 60}}),
        json!({"confirmed": true, "remember": {"scope": "window", "minutes": 0}}),
        json!({"confirmed": true, "remember": {"scope": "window", "minutes": 43_201}}),
        json!({"confirmed": true, "remember": {"scope": "window", "minutes": -5}}),
        json!({"confirmed": true, "remember": {"scope": "window", "minutes": 1.5}}),
        json!({"confirmed": true, "remember": {"scope": "window", "minutes": "60"}}),
        json!({"confirmed": true, "remember": {"scope": "window", "minutes": 60, "chat": "x"}}),
        json!({"confirmed": true, "remember": {"scope": "session", "minutes": 60}}),
        json!({"confirmed": false, "reason": 5}),
        json!({"confirmed": false, "decision": "respond", "output": 1}),
        json!({"confirmed": "true", "decision": "respond", "output": 1}),
        json!({"decision": "respond"}),
        json!({"decision": "respond", "output": null}),
        json!({"decision": "respond", "output": "x".repeat(MAX_ARGS_BYTES - 1)}),
        json!({"decision": "Respond", "output": 1}),
        json!({"decision": "approve"}),
        json!({"confirmed": true, "decision": "maybe", "output": 1}),
        json!({"confirmed": true, "decision": 1}),
        json!({"confirmed": true, "output": 1}),
        json!({"output": 1}),
        json!({"decision": "respond", "output": 1, "reason": "x"}),
        json!({"decision": "respond", "output": 1, "payload": {}}),
        json!({"decision": "respond", "output": 1, "remember": "session"}),
        json!({"decision": "respond", "output": 1, "approveNext": 2}),
        json!({"decision": "respond", "output": 1, "editedArgs": {}}),
    ];
    for output in refused {
        assert!(keys(output.clone()).is_err(), "{output}");
        let mut raw = json!({"type": "tool-adk_request_confirmation", "toolCallId": "adk-1", "state": "output-available"});
        raw["output"] = output.clone();
        assert!(part(raw).is_err(), "{output} in a part");
    }
}

#[test]
fn long_ids_are_refused_without_being_repeated() {
    let long = "x".repeat(300);
    let err = part(json!({"type":"tool-x","toolCallId": long,"state":"input-available"}))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("300 bytes"), "{err}");
    assert!(!err.contains(&"x".repeat(40)), "{err}");
    let approval = json!({"type":"tool-x","toolCallId":"c","state":"approval-responded","approval":{"id": long, "approved": true}});
    assert!(part(approval).is_err());
    let fits =
        part(json!({"type":"tool-x","toolCallId": "x".repeat(256),"state":"input-available"}));
    assert!(fits.is_ok());
}

#[test]
fn clear_errors() {
    let err = part(json!({"type":"tool-x","state":"input-available"})).err();
    assert_eq!(
        err.map(|e| e.to_string()),
        Some("invalid request: p: missing `toolCallId`".into())
    );
    let err = part(json!({"type":"tool-x","toolCallId":"c","state":"bogus"})).err();
    assert_eq!(
        err.map(|e| e.to_string()),
        Some("invalid request: p: unknown tool state `bogus`".into())
    );
}
