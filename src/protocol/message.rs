//! UI messages as `useChat` holds them: every part type and tool-part state.

use serde::Deserialize;
use serde_json::Value;

use super::request::RequestError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UiMessage {
    pub id: String,
    pub role: Role,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    Reasoning {
        text: String,
        /// What the model needs back with it (an Anthropic thinking signature).
        provider_metadata: Option<Value>,
    },
    StepStart,
    File {
        media_type: String,
        url: String,
        filename: Option<String>,
    },
    SourceUrl {
        source_id: String,
        url: String,
    },
    SourceDocument {
        source_id: String,
        title: String,
    },
    Data {
        name: String,
        data: Value,
    },
    Tool(ToolPart),
    /// A part type newer than this server; kept out of the model's view.
    Other(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolPart {
    pub tool_call_id: String,
    pub tool_name: String,
    /// `dynamic-tool` rather than `tool-<name>`.
    pub dynamic: bool,
    pub input: Value,
    pub state: ToolState,
    pub provider_executed: bool,
    pub call_provider_metadata: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolState {
    InputStreaming,
    InputAvailable,
    ApprovalRequested { approval_id: String },
    ApprovalResponded(Approval),
    OutputAvailable { output: Value, preliminary: bool },
    OutputError { error_text: String },
    OutputDenied(Option<Approval>),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Approval {
    pub id: String,
    #[serde(default)]
    pub approved: Option<bool>,
    #[serde(default)]
    pub reason: Option<String>,
}

impl ToolPart {
    /// A part that already carries its final result.
    pub fn is_resolved(&self) -> bool {
        match &self.state {
            ToolState::OutputAvailable { preliminary, .. } => !preliminary,
            ToolState::OutputError { .. } | ToolState::OutputDenied(_) => true,
            ToolState::InputStreaming
            | ToolState::InputAvailable
            | ToolState::ApprovalRequested { .. }
            | ToolState::ApprovalResponded(_) => false,
        }
    }
}

/// A part as it arrives: one flat shape, checked and typed by [`RawPart::into_part`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    state: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    input: Option<Value>,
    output: Option<Value>,
    error_text: Option<String>,
    approval: Option<Approval>,
    preliminary: Option<bool>,
    provider_executed: Option<bool>,
    call_provider_metadata: Option<Value>,
    provider_metadata: Option<Value>,
    media_type: Option<String>,
    url: Option<String>,
    filename: Option<String>,
    source_id: Option<String>,
    title: Option<String>,
    data: Option<Value>,
}

fn required<T>(value: Option<T>, path: &str, key: &str) -> Result<T, RequestError> {
    value.ok_or_else(|| RequestError::Invalid(format!("{path}: missing `{key}`")))
}

impl RawPart {
    pub(crate) fn into_part(self, path: &str) -> Result<Part, RequestError> {
        let part = match self.kind.as_str() {
            "text" => Part::Text(required(self.text, path, "text")?),
            "reasoning" => Part::Reasoning {
                text: required(self.text, path, "text")?,
                provider_metadata: self.provider_metadata,
            },
            "step-start" => Part::StepStart,
            "file" => Part::File {
                media_type: required(self.media_type, path, "mediaType")?,
                url: required(self.url, path, "url")?,
                filename: self.filename,
            },
            "source-url" => Part::SourceUrl {
                source_id: required(self.source_id, path, "sourceId")?,
                url: required(self.url, path, "url")?,
            },
            "source-document" => Part::SourceDocument {
                source_id: required(self.source_id, path, "sourceId")?,
                title: self.title.unwrap_or_default(),
            },
            "dynamic-tool" => {
                let name = required(self.tool_name.clone(), path, "toolName")?;
                Part::Tool(self.into_tool_part(name, true, path)?)
            }
            kind => {
                if let Some(name) = kind.strip_prefix("tool-") {
                    let name = name.to_owned();
                    Part::Tool(self.into_tool_part(name, false, path)?)
                } else if let Some(name) = kind.strip_prefix("data-") {
                    Part::Data {
                        name: name.to_owned(),
                        data: self.data.unwrap_or(Value::Null),
                    }
                } else {
                    Part::Other(kind.to_owned())
                }
            }
        };
        Ok(part)
    }

    fn into_tool_part(
        self,
        name: String,
        dynamic: bool,
        path: &str,
    ) -> Result<ToolPart, RequestError> {
        let tool_call_id = required(self.tool_call_id, path, "toolCallId")?;
        let state = required(self.state, path, "state")?;
        let state = match state.as_str() {
            "input-streaming" => ToolState::InputStreaming,
            "input-available" => ToolState::InputAvailable,
            "approval-requested" => ToolState::ApprovalRequested {
                approval_id: required(self.approval, path, "approval")?.id,
            },
            "approval-responded" => {
                ToolState::ApprovalResponded(required(self.approval, path, "approval")?)
            }
            "output-available" => ToolState::OutputAvailable {
                output: self.output.unwrap_or(Value::Null),
                preliminary: self.preliminary.unwrap_or(false),
            },
            "output-error" => ToolState::OutputError {
                error_text: self.error_text.unwrap_or_default(),
            },
            "output-denied" => ToolState::OutputDenied(self.approval),
            other => {
                return Err(RequestError::Invalid(format!(
                    "{path}: unknown tool state `{other}`"
                )));
            }
        };
        Ok(ToolPart {
            tool_call_id,
            tool_name: name,
            dynamic,
            input: self.input.unwrap_or(Value::Null),
            state,
            provider_executed: self.provider_executed.unwrap_or(false),
            call_provider_metadata: self.call_provider_metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn part(value: Value) -> Result<Part, RequestError> {
        let raw: RawPart =
            serde_json::from_value(value).map_err(|e| RequestError::Invalid(e.to_string()))?;
        raw.into_part("p")
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
}
