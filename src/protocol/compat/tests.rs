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

/// What each version gets of `chunk`.
#[track_caller]
fn check(chunk: UiChunk, cases: &[(&str, Vec<Value>)]) {
    for (version, expected) in cases {
        assert_eq!(&wire(version, chunk.clone()), expected, "{version}");
    }
}

/// A `tool-input-start` with a title and provider metadata.
fn titled_start() -> UiChunk {
    UiChunk::ToolInputStart {
        tool_call_id: "c".into(),
        tool_name: "t".into(),
        extras: ToolExtras {
            provider_metadata: Some(Box::new(json!({}))),
            title: Some("T".into()),
            ..ToolExtras::default()
        },
    }
}

#[test]
fn finish_reason_from_5_0_92() {
    let without = || vec![json!({"type": "finish"})];
    let with = || vec![json!({"type": "finish", "finishReason": "tool-calls"})];
    check(
        UiChunk::finish(FinishReason::ToolCalls),
        &[
            ("5.0.0", without()),
            ("5.0.91", without()),
            ("5.0.92", with()),
            ("5.0.216", with()),
            ("6.0.0", with()),
            ("7.0.0", with()),
            ("7.0.173", with()),
        ],
    );
    check(
        UiChunk::finish(FinishReason::Interrupted),
        &[
            (
                "7.0.148",
                vec![json!({"type": "finish", "finishReason": "other"})],
            ),
            (
                "7.0.149",
                vec![json!({"type": "finish", "finishReason": "interrupted"})],
            ),
        ],
    );
}

#[test]
fn optional_keys_follow_each_release() {
    let without = || vec![json!({"type": "abort"})];
    let with = || vec![json!({"type": "abort", "reason": "stop"})];
    check(
        UiChunk::Abort {
            reason: Some("stop".into()),
        },
        &[
            ("5.0.216", without()),
            ("5.0.217", with()),
            ("6.0.14", without()),
            ("6.0.15", with()),
        ],
    );
    check(
        titled_start(),
        &[
            (
                "5.0.216",
                vec![json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t"})],
            ),
            (
                "6.0.38",
                vec![
                    json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "title": "T"}),
                ],
            ),
            (
                "6.0.39",
                vec![
                    json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "t", "providerMetadata": {}, "title": "T"}),
                ],
            ),
        ],
    );
    check(
        UiChunk::ToolOutputAvailable {
            tool_call_id: "c".into(),
            output: Box::new(Value::Null),
            provider_executed: None,
            provider_metadata: Some(Box::new(json!({}))),
            dynamic: None,
            preliminary: Some(true),
        },
        &[
            (
                "5.0.10",
                vec![json!({"type": "tool-output-available", "toolCallId": "c", "output": null})],
            ),
            (
                "6.0.119",
                vec![
                    json!({"type": "tool-output-available", "toolCallId": "c", "output": null, "preliminary": true}),
                ],
            ),
            (
                "6.0.120",
                vec![
                    json!({"type": "tool-output-available", "toolCallId": "c", "output": null, "providerMetadata": {}, "preliminary": true}),
                ],
            ),
        ],
    );
}

#[test]
fn newer_chunk_types_only_reach_clients_that_know_them() {
    check(
        UiChunk::ResetStep,
        &[
            ("7.0.69", vec![]),
            ("7.0.70", vec![json!({"type": "reset-step"})]),
        ],
    );
    check(
        UiChunk::Custom {
            kind: "acme.ping".into(),
            provider_metadata: None,
        },
        &[
            ("6.0.326", vec![]),
            (
                "7.0.0",
                vec![json!({"type": "custom", "kind": "acme.ping"})],
            ),
        ],
    );
}

#[test]
fn tool_input_error_before_5_0_7_is_said_with_older_chunks() {
    check(
        UiChunk::ToolInputError {
            tool_call_id: "c".into(),
            tool_name: "t".into(),
            input: Box::new(json!("{bad")),
            error_text: "invalid".into(),
            extras: ToolExtras::default(),
        },
        &[
            (
                "5.0.6",
                vec![
                    json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": "{bad"}),
                    json!({"type": "tool-output-error", "toolCallId": "c", "errorText": "invalid"}),
                ],
            ),
            (
                "5.0.7",
                vec![
                    json!({"type": "tool-input-error", "toolCallId": "c", "toolName": "t", "input": "{bad", "errorText": "invalid"}),
                ],
            ),
        ],
    );
}

#[test]
fn versions_parse_and_order() {
    let v = ClientVersion::new;
    // A pre-release or build of X.Y.Z is fitted as X.Y.Z.
    let read: [(Option<ClientVersion>, &[&str]); 5] = [
        (Some(v(5, 0, 216)), &["5.0.216"]),
        (
            Some(v(6, 0, 0)),
            &[
                "v6.0",
                "6.0.0-beta.148",
                "v6.0.0-beta.148",
                "6.0.0-canary.0",
                "6.0.0-x-y.1-2",
                "6.0.0-0",
            ],
        ),
        (
            Some(v(7, 0, 0)),
            &["7", "7.0.0-rc.1+build.5", "7.0.0+20260101", "7.0.0+001"],
        ),
        (Some(v(7, 0, 173)), &[" 7.0.173 "]),
        (
            None,
            &[
                "6.0.0-beta.01",
                "6.0.0-",
                "6.0.0-beta..1",
                "6.0.0-beta.",
                "6.0.0-beta_1",
                "6.0.0+",
                "6.0.0+a+b",
                "6.0.0-beta.148+",
                "6.0-beta.1",
                "6-beta.1",
                "6.0+b",
                "6.x",
                "5.x",
                "1.2.3.4",
                "",
                "v",
                "6.",
                "+6.0.0",
                "6.+1.0",
                "vv6",
                "4294967296",
                "latest",
            ],
        ),
    ];
    for (expected, texts) in read {
        for text in texts {
            assert_eq!(text.parse::<ClientVersion>().ok(), expected, "{text}");
        }
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
            titled_start(),
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
