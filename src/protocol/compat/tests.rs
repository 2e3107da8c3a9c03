use super::*;
use serde_json::{Value, json};

fn wire(version: &str, chunk: UiChunk) -> Vec<Value> {
    let version: ClientVersion = version.parse().unwrap_or(ClientVersion::LATEST);
    version
        .fit(chunk)
        .map(|c| serde_json::to_value(c).unwrap_or_default())
        .collect()
}

#[test]
fn what_every_client_takes_as_is_is_not_fitted() {
    let id = crate::protocol::BlockId::from("b");
    let metadata = || Some(Box::new(json!({"p": {"k": 1}})));
    let chunks = [
        UiChunk::text_delta(&id, "hi".into()),
        UiChunk::TextDelta {
            id: id.clone(),
            delta: "hi".into(),
            provider_metadata: metadata(),
        },
        UiChunk::ReasoningDelta {
            id: id.clone(),
            delta: "hm".into(),
            provider_metadata: metadata(),
        },
        UiChunk::TextStart {
            id: id.clone(),
            provider_metadata: metadata(),
        },
        UiChunk::TextEnd {
            id: id.clone(),
            provider_metadata: metadata(),
        },
        UiChunk::ReasoningStart {
            id: id.clone(),
            provider_metadata: metadata(),
        },
        UiChunk::ReasoningEnd {
            id,
            provider_metadata: metadata(),
        },
        UiChunk::ToolInputDelta {
            tool_call_id: "c".into(),
            input_text_delta: "{".into(),
        },
        UiChunk::StartStep,
        UiChunk::FinishStep,
    ];
    for version in ["5.0.0", "5.0.91", "6.0.0", "6.0.119", "7.0.0", "7.0.173"] {
        let version: ClientVersion = version.parse().unwrap_or(ClientVersion::LATEST);
        for chunk in &chunks {
            assert!(ClientVersion::takes_as_is(chunk), "{chunk:?}");
            let fitted: Vec<UiChunk> = version.fit(chunk.clone()).collect();
            assert_eq!(fitted, std::slice::from_ref(chunk), "{version}");
        }
    }
    let finish = UiChunk::finish(FinishReason::Interrupted);
    assert!(!ClientVersion::takes_as_is(&finish));
}

#[test]
fn finish_reason_from_5_0_92() {
    let finish = || UiChunk::finish(FinishReason::ToolCalls);
    assert_eq!(wire("5.0.0", finish()), [json!({"type": "finish"})]);
    assert_eq!(wire("5.0.91", finish()), [json!({"type": "finish"})]);
    for version in ["5.0.92", "5.0.216", "6.0.0", "7.0.0", "7.0.173"] {
        assert_eq!(
            wire(version, finish()),
            [json!({"type": "finish", "finishReason": "tool-calls"})],
            "{version}"
        );
    }
    let interrupted = || UiChunk::finish(FinishReason::Interrupted);
    assert_eq!(
        wire("7.0.148", interrupted()),
        [json!({"type": "finish", "finishReason": "other"})]
    );
    assert_eq!(
        wire("7.0.149", interrupted()),
        [json!({"type": "finish", "finishReason": "interrupted"})]
    );
}

#[test]
fn optional_keys_follow_each_release() {
    let abort = || UiChunk::Abort {
        reason: Some("stop".into()),
    };
    assert_eq!(wire("5.0.216", abort()), [json!({"type": "abort"})]);
    assert_eq!(
        wire("5.0.217", abort()),
        [json!({"type": "abort", "reason": "stop"})]
    );
    assert_eq!(wire("6.0.14", abort()), [json!({"type": "abort"})]);
    assert_eq!(
        wire("6.0.15", abort()),
        [json!({"type": "abort", "reason": "stop"})]
    );
    let start = || UiChunk::ToolInputStart {
        tool_call_id: "c".into(),
        tool_name: "t".into(),
        extras: ToolExtras {
            provider_metadata: Some(Box::new(json!({}))),
            title: Some("T".into()),
            ..ToolExtras::default()
        },
    };

    assert_eq!(
        wire("5.0.216", start()),
        [json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t"})]
    );
    assert_eq!(
        wire("6.0.38", start()),
        [json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "title": "T"})]
    );
    assert_eq!(
        wire("6.0.39", start()),
        [
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "providerMetadata": {}, "title": "T"})
        ]
    );
    let output = || UiChunk::ToolOutputAvailable {
        tool_call_id: "c".into(),
        output: Box::new(Value::Null),
        provider_executed: None,
        provider_metadata: Some(Box::new(json!({}))),
        dynamic: None,
        preliminary: Some(true),
    };
    assert_eq!(
        wire("5.0.10", output()),
        [json!({"type": "tool-output-available", "toolCallId": "c", "output": null})]
    );
    assert_eq!(
        wire("6.0.119", output()),
        [
            json!({"type": "tool-output-available", "toolCallId": "c", "output": null, "preliminary": true})
        ]
    );
    assert_eq!(
        wire("6.0.120", output()),
        [
            json!({"type": "tool-output-available", "toolCallId": "c", "output": null, "providerMetadata": {}, "preliminary": true})
        ]
    );
}

#[test]
fn newer_chunk_types_only_reach_clients_that_know_them() {
    assert_eq!(wire("7.0.69", UiChunk::ResetStep), Vec::<Value>::new());
    assert_eq!(
        wire("7.0.70", UiChunk::ResetStep),
        [json!({"type": "reset-step"})]
    );
    let custom = || UiChunk::Custom {
        kind: "acme.ping".into(),
        provider_metadata: None,
    };
    assert_eq!(wire("6.0.326", custom()), Vec::<Value>::new());
    assert_eq!(
        wire("7.0.0", custom()),
        [json!({"type": "custom", "kind": "acme.ping"})]
    );
}

#[test]
fn tool_input_error_before_5_0_7_is_said_with_older_chunks() {
    let error = || UiChunk::ToolInputError {
        tool_call_id: "c".into(),
        tool_name: "t".into(),
        input: Box::new(json!("{bad")),
        error_text: "invalid".into(),
        extras: ToolExtras::default(),
    };
    assert_eq!(
        wire("5.0.6", error()),
        [
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": "{bad"}),
            json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "invalid"}),
        ]
    );
    assert_eq!(
        wire("5.0.7", error()),
        [
            json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "t", "input": "{bad", "errorText": "invalid"})
        ]
    );
}

#[test]
fn versions_parse_and_order() {
    let v = ClientVersion::new;
    let read: [(&str, Option<ClientVersion>); 34] = [
        ("7", Some(v(7, 0, 0))),
        ("v6.0", Some(v(6, 0, 0))),
        ("5.0.216", Some(v(5, 0, 216))),
        (" 7.0.173 ", Some(v(7, 0, 173))),
        // A pre-release or build of X.Y.Z is fitted as X.Y.Z.
        ("6.0.0-beta.148", Some(v(6, 0, 0))),
        ("v6.0.0-beta.148", Some(v(6, 0, 0))),
        ("6.0.0-canary.0", Some(v(6, 0, 0))),
        ("7.0.0-rc.1+build.5", Some(v(7, 0, 0))),
        ("7.0.0+20260101", Some(v(7, 0, 0))),
        ("7.0.0+001", Some(v(7, 0, 0))),
        ("6.0.0-x-y.1-2", Some(v(6, 0, 0))),
        ("6.0.0-0", Some(v(6, 0, 0))),
        ("6.0.0-beta.01", None),
        ("6.0.0-", None),
        ("6.0.0-beta..1", None),
        ("6.0.0-beta.", None),
        ("6.0.0-beta_1", None),
        ("6.0.0+", None),
        ("6.0.0+a+b", None),
        ("6.0.0-beta.148+", None),
        ("6.0-beta.1", None),
        ("6-beta.1", None),
        ("6.0+b", None),
        ("6.x", None),
        ("5.x", None),
        ("1.2.3.4", None),
        ("", None),
        ("v", None),
        ("6.", None),
        ("+6.0.0", None),
        ("6.+1.0", None),
        ("vv6", None),
        ("4294967296", None),
        ("latest", None),
    ];
    for (text, expected) in read {
        assert_eq!(text.parse::<ClientVersion>().ok(), expected, "{text}");
    }
    assert_eq!(
        "6.0.0-beta.01".parse::<ClientVersion>(),
        Err(BadVersion("6.0.0-beta.01".into()))
    );
    assert!(ClientVersion::new(5, 0, 216) < ClientVersion::new(5, 1, 0));
}

#[test]
fn a_pre_release_gets_what_its_release_gets() {
    let chunks = || {
        [
            UiChunk::finish(FinishReason::ToolCalls),
            UiChunk::Abort {
                reason: Some("stop".into()),
            },
            UiChunk::ToolInputStart {
                tool_call_id: "c".into(),
                tool_name: "t".into(),
                extras: ToolExtras {
                    provider_metadata: Some(Box::new(json!({}))),
                    title: Some("T".into()),
                    ..ToolExtras::default()
                },
            },
        ]
    };
    let all = |version: &str| -> Vec<Value> {
        chunks()
            .into_iter()
            .flat_map(|chunk| wire(version, chunk))
            .collect()
    };
    assert_eq!(all("6.0.0-beta.148"), all("6.0.0"));
    assert_eq!(
        all("6.0.0-beta.148"),
        [
            json!({"type": "finish", "finishReason": "tool-calls"}),
            json!({"type": "abort"}),
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "title": "T"}),
        ]
    );
    assert!(
        "6.0.0-beta.148"
            .parse::<ClientVersion>()
            .is_ok_and(ClientVersion::has_approvals)
    );
}
