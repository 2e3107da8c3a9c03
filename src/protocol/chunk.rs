//! Every chunk of the UI message stream of `ai` 5–7, with its exact wire names.
//!
//! Keys the client requires even when null (`input`, `output`, `data`,
//! `messageMetadata`) are always serialized; optional keys are left out when
//! absent, because `ai` 5.0.0–5.0.216, 6.0.0–6.0.230 and 7.0.0–7.0.31 reject
//! keys they do not know.

use std::sync::Arc;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;

/// A text or reasoning block's id: shared, since every delta of the block
/// names it (a clone is a count, not a copy).
pub type BlockId = Arc<str>;

/// A text or reasoning delta: a model's deltas are mostly a token or a few,
/// held inline up to 24 bytes, so a delta costs no allocation of its own.
pub type DeltaText = compact_str::CompactString;

/// Why a model turn finished, as the client names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    Stop,
    Length,
    ContentFilter,
    ToolCalls,
    Error,
    Other,
    /// 7.x only.
    Interrupted,
}

/// Tool chunk fields shared by `tool-input-start`, `tool-input-available`
/// and `tool-input-error`.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ToolExtras {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_executed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_metadata: Option<Box<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// One chunk of the UI message stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum UiChunk {
    #[serde(rename_all = "camelCase")]
    Start {
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message_metadata: Option<Box<Value>>,
    },
    StartStep,
    FinishStep,
    #[serde(rename_all = "camelCase")]
    Finish {
        #[serde(skip_serializing_if = "Option::is_none")]
        finish_reason: Option<FinishReason>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message_metadata: Option<Box<Value>>,
    },
    Abort {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        error_text: String,
    },
    #[serde(rename_all = "camelCase")]
    MessageMetadata {
        message_metadata: Box<Value>,
    },
    #[serde(rename_all = "camelCase")]
    TextStart {
        id: BlockId,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    TextDelta {
        id: BlockId,
        delta: DeltaText,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    TextEnd {
        id: BlockId,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningStart {
        id: BlockId,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningDelta {
        id: BlockId,
        delta: DeltaText,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    ReasoningEnd {
        id: BlockId,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
        #[serde(flatten)]
        extras: ToolExtras,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputDelta {
        tool_call_id: String,
        input_text_delta: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Box<Value>,
        #[serde(flatten)]
        extras: ToolExtras,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputError {
        tool_call_id: String,
        tool_name: String,
        input: Box<Value>,
        error_text: String,
        #[serde(flatten)]
        extras: ToolExtras,
    },
    /// 6.0+.
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputAvailable {
        tool_call_id: String,
        output: Box<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        preliminary: Option<bool>,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        dynamic: Option<bool>,
    },
    /// 6.0+.
    #[serde(rename_all = "camelCase")]
    ToolOutputDenied {
        tool_call_id: String,
    },
    #[serde(rename_all = "camelCase")]
    SourceUrl {
        source_id: String,
        url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    SourceDocument {
        source_id: String,
        media_type: String,
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    #[serde(rename_all = "camelCase")]
    File {
        url: String,
        media_type: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    /// 7.0+.
    #[serde(rename_all = "camelCase")]
    ToolApprovalResponse {
        approval_id: String,
        approved: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_executed: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    /// 7.0+: `kind` is `<namespace>.<name>`.
    #[serde(rename_all = "camelCase")]
    Custom {
        kind: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    /// 7.0+.
    #[serde(rename_all = "camelCase")]
    ReasoningFile {
        url: String,
        media_type: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_metadata: Option<Box<Value>>,
    },
    /// 7.0.70+.
    ResetStep,
    /// 7.0.163+: `parts` are text and file parts.
    SteeringMessage {
        id: String,
        parts: Vec<Value>,
    },
    /// `data-<name>`: the type is built from the name, so it serializes itself.
    #[serde(untagged)]
    Data(Box<DataChunk>),
}

/// A `data-<name>` chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct DataChunk {
    pub name: String,
    pub id: Option<String>,
    pub data: Value,
    pub transient: Option<bool>,
}

impl Serialize for DataChunk {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 2 + usize::from(self.id.is_some()) + usize::from(self.transient.is_some());
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("type", &format_args!("data-{}", self.name))?;
        if let Some(id) = &self.id {
            map.serialize_entry("id", id)?;
        }
        map.serialize_entry("data", &self.data)?;
        if let Some(transient) = self.transient {
            map.serialize_entry("transient", &transient)?;
        }
        map.end()
    }
}

impl UiChunk {
    pub fn text_delta(id: &BlockId, delta: DeltaText) -> Self {
        UiChunk::TextDelta {
            id: id.clone(),
            delta,
            provider_metadata: None,
        }
    }

    pub fn tool_input_start(tool_call_id: &str, tool_name: &str) -> Self {
        UiChunk::ToolInputStart {
            tool_call_id: tool_call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            extras: ToolExtras::default(),
        }
    }

    pub fn tool_input_available(tool_call_id: &str, tool_name: &str, input: Value) -> Self {
        UiChunk::ToolInputAvailable {
            tool_call_id: tool_call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            input: Box::new(input),
            extras: ToolExtras::default(),
        }
    }

    pub fn tool_output(tool_call_id: &str, output: Value) -> Self {
        UiChunk::ToolOutputAvailable {
            tool_call_id: tool_call_id.to_owned(),
            output: Box::new(output),
            provider_executed: None,
            provider_metadata: None,
            dynamic: None,
            preliminary: None,
        }
    }

    pub fn tool_error(tool_call_id: &str, error_text: String) -> Self {
        UiChunk::ToolOutputError {
            tool_call_id: tool_call_id.to_owned(),
            error_text,
            provider_executed: None,
            provider_metadata: None,
            dynamic: None,
        }
    }

    pub fn finish(reason: FinishReason) -> Self {
        UiChunk::Finish {
            finish_reason: Some(reason),
            message_metadata: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 248 bytes before `provider_metadata`, `input`, `output` and `data` were boxed.
    const SIZE: usize = 120;

    fn wire(chunk: &UiChunk) -> String {
        serde_json::to_string(chunk).unwrap_or_default()
    }

    /// Every chunk is moved several times between the model and the SSE
    /// buffer: rare large fields are boxed to keep it small.
    #[test]
    fn a_chunk_is_small() {
        assert_eq!(std::mem::size_of::<UiChunk>(), SIZE);
    }

    #[test]
    fn names_and_required_keys() {
        let cases = [
            (UiChunk::StartStep, r#"{"type":"start-step"}"#),
            (
                UiChunk::Start {
                    message_id: Some("m".into()),
                    message_metadata: None,
                },
                r#"{"type":"start","messageId":"m"}"#,
            ),
            (
                UiChunk::finish(FinishReason::ToolCalls),
                r#"{"type":"finish","finishReason":"tool-calls"}"#,
            ),
            (
                UiChunk::tool_input_available("c", "t", Value::Null),
                r#"{"type":"tool-input-available","toolCallId":"c","toolName":"t","input":null}"#,
            ),
            (
                UiChunk::tool_output("c", Value::Null),
                r#"{"type":"tool-output-available","toolCallId":"c","output":null}"#,
            ),
            (
                UiChunk::MessageMetadata {
                    message_metadata: Box::new(Value::Null),
                },
                r#"{"type":"message-metadata","messageMetadata":null}"#,
            ),
            (
                UiChunk::ToolApprovalRequest {
                    approval_id: "a".into(),
                    tool_call_id: "c".into(),
                },
                r#"{"type":"tool-approval-request","approvalId":"a","toolCallId":"c"}"#,
            ),
            (UiChunk::ResetStep, r#"{"type":"reset-step"}"#),
            (
                UiChunk::ToolApprovalResponse {
                    approval_id: "a".into(),
                    approved: false,
                    reason: Some("no".into()),
                    provider_executed: None,
                    provider_metadata: None,
                },
                r#"{"type":"tool-approval-response","approvalId":"a","approved":false,"reason":"no"}"#,
            ),
            (
                UiChunk::SteeringMessage {
                    id: "s".into(),
                    parts: vec![json!({"type": "text", "text": "hi"})],
                },
                r#"{"type":"steering-message","id":"s","parts":[{"type":"text","text":"hi"}]}"#,
            ),
            (
                UiChunk::ToolOutputDenied {
                    tool_call_id: "c".into(),
                },
                r#"{"type":"tool-output-denied","toolCallId":"c"}"#,
            ),
            (
                UiChunk::Data(Box::new(DataChunk {
                    name: "weather".into(),
                    id: None,
                    data: Value::Null,
                    transient: Some(true),
                })),
                r#"{"type":"data-weather","data":null,"transient":true}"#,
            ),
            (
                UiChunk::ToolInputStart {
                    tool_call_id: "c".into(),
                    tool_name: "t".into(),
                    extras: ToolExtras {
                        dynamic: Some(true),
                        provider_metadata: Some(Box::new(json!({"x": 1}))),
                        ..ToolExtras::default()
                    },
                },
                r#"{"type":"tool-input-start","toolCallId":"c","toolName":"t","providerMetadata":{"x":1},"dynamic":true}"#,
            ),
        ];
        for (chunk, expected) in cases {
            assert_eq!(wire(&chunk), expected);
        }
    }
}
