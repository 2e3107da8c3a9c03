//! Request bodies: the `useChat` body (`id`, `messages: UIMessage[]`,
//! `trigger`, `messageId?`), and the model-message form (`role` + `content`)
//! that the ADK flow document posts. Both become the same [`ChatRequest`].

use std::fmt::Display;

use serde::Deserialize;
use serde_json::Value;

use super::chat_id::ChatId;
use super::compat::{ClientVersion, ConfirmationFlow, ConfirmationProtocol};
use super::message::{Part, RawPart, RequestError, Role, ToolPart, ToolState, UiMessage, check_id};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    SubmitMessage,
    RegenerateMessage,
}

/// The most parts one message may have (a long assistant turn has dozens).
pub const MAX_PARTS_PER_MESSAGE: usize = 1000;

/// The chat id used when a body names none (the model-message form often doesn't).
pub const DEFAULT_CHAT_ID: &str = "default";

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub chat_id: ChatId,
    pub messages: Vec<UiMessage>,
    pub trigger: Trigger,
    pub message_id: Option<String>,
    pub options: RequestOptions,
}

/// Per-request overrides of the server's config, sent as
/// `"toolgate": {"protocol": "ai-sdk", "clientVersion": "6.0.0"}` (for example
/// through the transport's `body` option).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestOptions {
    pub protocol: Option<ConfirmationProtocol>,
    pub client_version: Option<ClientVersion>,
    pub flow: Option<ConfirmationFlow>,
}

/// What a client reads when `toolgate.clientVersion` is not a version: a
/// fixed text, whatever was sent.
pub const BAD_CLIENT_VERSION: &str = "`toolgate.clientVersion` is not an ai version: expected MAJOR.MINOR.PATCH (or MAJOR, MAJOR.MINOR), optionally with a pre-release, e.g. 7.0.173 or 6.0.0-beta.148";

/// `toolgate` as sent; the version is read by [`ClientVersion`]'s parser.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOptions {
    protocol: Option<ConfirmationProtocol>,
    client_version: Option<String>,
    flow: Option<ConfirmationFlow>,
}

impl RawOptions {
    fn read(self) -> Result<RequestOptions, RequestError> {
        let client_version = match self.client_version {
            Some(text) => Some(
                text.parse()
                    .map_err(|_| RequestError::Invalid(BAD_CLIENT_VERSION.to_owned()))?,
            ),
            None => None,
        };
        Ok(RequestOptions {
            protocol: self.protocol,
            client_version,
            flow: self.flow,
        })
    }
}

impl ChatRequest {
    /// Parses either body form. Unknown top-level keys are ignored, as the
    /// AI SDK merges the transport's `body` into the request.
    pub fn from_slice(body: &[u8]) -> Result<Self, RequestError> {
        let raw: RawBody =
            serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
        raw.into_request()
    }

    /// The assistant message this request continues: the last message, when
    /// it is the assistant's.
    pub fn continued_message(&self) -> Option<&UiMessage> {
        self.messages.last().filter(|m| m.role == Role::Assistant)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBody {
    id: Option<String>,
    messages: Vec<RawMessage>,
    trigger: Option<String>,
    message_id: Option<String>,
    #[serde(default)]
    toolgate: RawOptions,
}

#[derive(Deserialize)]
struct RawMessage {
    id: Option<String>,
    role: String,
    parts: Option<Vec<RawPart>>,
    content: Option<RawContent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawContent {
    Text(String),
    Parts(Vec<RawContentPart>),
}

/// A part of a model message (`ai`'s `ModelMessage`, v4 and v5 key names).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawContentPart {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    input: Option<Value>,
    args: Option<Value>,
    result: Option<Value>,
    output: Option<Value>,
    is_error: Option<bool>,
    media_type: Option<String>,
    mime_type: Option<String>,
    data: Option<Value>,
    url: Option<String>,
}

impl RawBody {
    fn into_request(self) -> Result<ChatRequest, RequestError> {
        let options = self.toolgate.read()?;
        let trigger = match self.trigger.as_deref() {
            None | Some("submit-message") => Trigger::SubmitMessage,
            Some("regenerate-message") => Trigger::RegenerateMessage,
            Some(other) => {
                return Err(RequestError::Invalid(format!("unknown trigger `{other}`")));
            }
        };
        if self.messages.is_empty() {
            return Err(RequestError::Invalid("`messages` is empty".into()));
        }
        let chat_id = ChatId::parse(self.id.unwrap_or_else(|| DEFAULT_CHAT_ID.to_owned()))?;
        let mut messages: Vec<UiMessage> = Vec::with_capacity(self.messages.len());
        for (i, raw) in self.messages.into_iter().enumerate() {
            let path = Place::message(i);
            let id = raw.id.unwrap_or_else(|| format!("m{i}"));
            match (raw.parts, raw.content) {
                (Some(parts), _) if parts.len() > MAX_PARTS_PER_MESSAGE => {
                    return Err(RequestError::Invalid(format!(
                        "{path}: more than {MAX_PARTS_PER_MESSAGE} parts"
                    )));
                }
                (Some(parts), _) => {
                    let role = ui_role(&raw.role, &path)?;
                    // Not collected in place: that keeps the raw parts'
                    // allocation, several times a part's size, for the
                    // whole turn.
                    let mut typed = Vec::with_capacity(parts.len());
                    for (j, part) in parts.into_iter().enumerate() {
                        typed.push(part.into_part(&path.part("parts", j))?);
                    }
                    messages.push(UiMessage {
                        id,
                        role,
                        parts: typed,
                    });
                }
                (None, Some(content)) => {
                    push_model_message(&mut messages, id, &raw.role, content, path)?
                }
                (None, None) => {
                    return Err(RequestError::Invalid(format!(
                        "{path}: needs `parts` or `content`"
                    )));
                }
            }
        }
        Ok(ChatRequest {
            chat_id,
            messages,
            trigger,
            message_id: self.message_id,
            options,
        })
    }
}

/// Where a message or one of its parts is in the body, for an error's text:
/// written out only when there is an error, not for every part read.
#[derive(Debug, Clone, Copy)]
struct Place {
    message: usize,
    /// The list the part is in (`parts`, `content`) and its index.
    part: Option<(&'static str, usize)>,
}

impl Place {
    fn message(message: usize) -> Self {
        Self {
            message,
            part: None,
        }
    }

    fn part(self, list: &'static str, index: usize) -> Self {
        Self {
            part: Some((list, index)),
            ..self
        }
    }
}

impl Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "messages[{}]", self.message)?;
        match self.part {
            Some((list, index)) => write!(f, ".{list}[{index}]"),
            None => Ok(()),
        }
    }
}

fn ui_role(role: &str, path: &dyn Display) -> Result<Role, RequestError> {
    match role {
        "system" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        other => Err(RequestError::Invalid(format!(
            "{path}: unknown role `{other}`"
        ))),
    }
}

/// Appends a model message as UI message parts. Tool results are folded into
/// the tool part of the assistant message that made the call, so both body
/// forms reach the agent as the same history.
fn push_model_message(
    messages: &mut Vec<UiMessage>,
    id: String,
    role: &str,
    content: RawContent,
    path: Place,
) -> Result<(), RequestError> {
    let role = if role == "tool" {
        Role::User
    } else {
        ui_role(role, &path)?
    };
    let parts = match content {
        RawContent::Text(text) => vec![Part::Text(text)],
        RawContent::Parts(parts) if parts.len() > MAX_PARTS_PER_MESSAGE => {
            return Err(RequestError::Invalid(format!(
                "{path}: more than {MAX_PARTS_PER_MESSAGE} parts"
            )));
        }
        RawContent::Parts(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                let path = path.part("content", j);
                match part.kind.as_str() {
                    "tool-result" => attach_tool_result(messages, part, &path)?,
                    _ => out.push(model_part(part, &path)?),
                }
            }
            out
        }
    };
    if !parts.is_empty() {
        messages.push(UiMessage { id, role, parts });
    }
    Ok(())
}

fn model_part(part: RawContentPart, path: &dyn Display) -> Result<Part, RequestError> {
    let missing = |key: &str| RequestError::Invalid(format!("{path}: missing `{key}`"));
    Ok(match part.kind.as_str() {
        "text" => Part::Text(part.text.ok_or_else(|| missing("text"))?),
        "reasoning" => Part::Reasoning {
            text: part.text.ok_or_else(|| missing("text"))?,
            provider_metadata: None,
        },
        "tool-call" => Part::Tool(ToolPart {
            tool_call_id: part
                .tool_call_id
                .ok_or_else(|| missing("toolCallId"))
                .and_then(|id| check_id(&format!("{path}: toolCallId"), &id).map(|()| id))?,
            tool_name: part.tool_name.ok_or_else(|| missing("toolName"))?,
            dynamic: false,
            input: part.input.or(part.args).unwrap_or(Value::Null),
            state: ToolState::InputAvailable,
            provider_executed: false,
            call_provider_metadata: None,
        }),
        "file" | "image" => Part::File {
            media_type: part
                .media_type
                .or(part.mime_type)
                .unwrap_or_else(|| "application/octet-stream".into()),
            url: part
                .url
                .or_else(|| part.data.and_then(|d| d.as_str().map(str::to_owned)))
                .ok_or_else(|| missing("data"))?,
            filename: None,
        },
        other => Part::Other(other.to_owned()),
    })
}

fn attach_tool_result(
    messages: &mut [UiMessage],
    part: RawContentPart,
    path: &dyn Display,
) -> Result<(), RequestError> {
    let id = part
        .tool_call_id
        .ok_or_else(|| RequestError::Invalid(format!("{path}: missing `toolCallId`")))?;
    let state = match (part.result, part.output) {
        (Some(result), _) if part.is_error == Some(true) => ToolState::OutputError {
            error_text: result
                .as_str()
                .map_or_else(|| result.to_string(), str::to_owned),
        },
        (Some(result), _) => ToolState::OutputAvailable {
            output: result,
            preliminary: false,
        },
        (None, Some(output)) => v5_output_state(output),
        (None, None) => ToolState::OutputAvailable {
            output: Value::Null,
            preliminary: false,
        },
    };
    // A result answers a call of the latest assistant message.
    let tool = messages
        .iter_mut()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .into_iter()
        .flat_map(|m| m.parts.iter_mut())
        .find_map(|p| match p {
            Part::Tool(t) if t.tool_call_id == id => Some(t),
            _ => None,
        })
        .ok_or_else(|| {
            RequestError::Invalid(format!("{path}: tool result for unknown call `{id}`"))
        })?;
    tool.state = state;
    super::message::check_answer(tool, path)
}

/// `ai` 5's `output: {type: "json"|"text"|"error-text"|"error-json", value}`.
fn v5_output_state(output: Value) -> ToolState {
    let kind = output
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let value = output.get("value").cloned();
    match (kind.as_deref(), value) {
        (Some("json" | "text"), Some(value)) => ToolState::OutputAvailable {
            output: value,
            preliminary: false,
        },
        (Some("error-text" | "error-json"), Some(value)) => ToolState::OutputError {
            error_text: value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned),
        },
        _ => ToolState::OutputAvailable {
            output,
            preliminary: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<ChatRequest, RequestError> {
        ChatRequest::from_slice(value.to_string().as_bytes())
    }

    /// An error names the message and part it is about, in both body forms.
    #[test]
    fn errors_name_their_place() {
        let error = |messages: Value| match parse(json!({"messages": messages})) {
            Err(RequestError::Invalid(text)) => text,
            other => panic!("{other:?}"),
        };
        let text = json!({"role": "user", "parts": [{"type": "text", "text": "hi"}]});
        let cases = [
            (
                json!([text, {"role": "wizard", "parts": []}]),
                "messages[1]: unknown role `wizard`",
            ),
            (
                json!([text, {"role": "user", "parts": [text["parts"][0], {"type": "text"}]}]),
                "messages[1].parts[1]: missing `text`",
            ),
            (
                json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}]),
                "messages[0].content[1]: missing `text`",
            ),
        ];
        for (messages, expected) in cases {
            assert_eq!(error(messages), expected);
        }
    }

    /// A turn keeps its request's messages: each holds room for its own
    /// parts, not for the raw parts they were read from.
    #[test]
    fn messages_hold_only_their_parts() {
        let text = json!({"type": "text", "text": "hi"});
        for parts in [1, 2, 5] {
            let body = json!({
                "messages": [{"id": "u1", "role": "user", "parts": vec![text.clone(); parts]}]
            });
            let request = parse(body).map_err(|e| e.to_string());
            let held = request.map(|r| r.messages[0].parts.capacity());
            assert_eq!(held, Ok(parts));
        }
    }

    #[test]
    fn client_versions_per_request() {
        let body = |version: Value| {
            json!({
                "toolgate": {"clientVersion": version},
                "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]
            })
        };
        for (version, expected) in [
            ("6.0.0-beta.148", ClientVersion::new(6, 0, 0)),
            ("5.0.60", ClientVersion::new(5, 0, 60)),
            ("7", ClientVersion::new(7, 0, 0)),
        ] {
            let read = parse(body(json!(version))).map(|r| r.options.client_version);
            assert_eq!(read, Ok(Some(expected)), "{version}");
        }
        for version in ["6.0.0-beta..1", "6.0.0-beta.01", "beta", "", "6.0-rc.1"] {
            assert_eq!(
                parse(body(json!(version))).err(),
                Some(RequestError::Invalid(BAD_CLIENT_VERSION.into())),
                "{version}"
            );
        }
        assert!(parse(body(json!(6))).is_err());
    }

    #[test]
    fn use_chat_body_with_extra_keys() {
        let req = parse(json!({
            "id": "chat-1", "trigger": "submit-message", "messageId": "a1", "extra": {"x": 1},
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
                {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, {"type":"text","text":"yo","state":"done"}]}
            ]
        }));
        let Ok(req) = req else { panic!("{req:?}") };
        assert_eq!(req.chat_id.as_str(), "chat-1");
        assert_eq!(req.message_id.as_deref(), Some("a1"));
        assert_eq!(req.continued_message().map(|m| m.id.as_str()), Some("a1"));
    }

    #[test]
    fn model_message_form_folds_tool_results_into_the_call() {
        let req = parse(json!({"messages": [
            {"role": "user", "content": "Send 50 USD to Hanako"},
            {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "adk_request_confirmation", "args": {"x": 1}}]},
            {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "adk_request_confirmation", "result": {"confirmed": true}}]}
        ]}));
        let Ok(req) = req else { panic!("{req:?}") };
        assert_eq!(req.chat_id.as_str(), DEFAULT_CHAT_ID);
        assert_eq!(req.messages.len(), 2);
        let Some(Part::Tool(tool)) = req.continued_message().and_then(|m| m.parts.first()) else {
            panic!("no tool part")
        };
        assert_eq!(tool.input, json!({"x": 1}));
        assert_eq!(
            tool.state,
            ToolState::OutputAvailable {
                output: json!({"confirmed": true}),
                preliminary: false
            }
        );
    }

    #[test]
    fn rejects_with_a_reason() {
        let cases = [
            (
                json!({"messages": []}),
                "invalid request: `messages` is empty",
            ),
            (
                json!({"id": " ", "messages": [{"role": "user", "content": "a"}]}),
                "invalid request: the chat id (`id`, or AG-UI's `threadId`) must be 1 to 256 of A-Z a-z 0-9 - . _ ~ (not `.` or `..`): it travels in a header and a URL path",
            ),
            (
                json!({"messages": [{"role": "robot", "parts": []}]}),
                "invalid request: messages[0]: unknown role `robot`",
            ),
            (
                json!({"messages": [{"role": "user"}]}),
                "invalid request: messages[0]: needs `parts` or `content`",
            ),
            (
                json!({"trigger": "x", "messages": [{"role": "user", "content": "a"}]}),
                "invalid request: unknown trigger `x`",
            ),
            (
                json!({"messages": [{"role": "user", "parts": vec![json!({"type": "step-start"}); 1001]}]}),
                "invalid request: messages[0]: more than 1000 parts",
            ),
            (
                json!({"messages": [{"role": "user", "content": vec![json!({"type": "text", "text": ""}); 1001]}]}),
                "invalid request: messages[0]: more than 1000 parts",
            ),
            (
                json!({"messages": [{"role": "tool", "content": [{"type": "tool-result", "toolCallId": "nope", "result": 1}]}]}),
                "invalid request: messages[0].content[0]: tool result for unknown call `nope`",
            ),
            (
                json!({"id": "c".repeat(257), "messages": [{"role": "user", "content": "a"}]}),
                "invalid request: the chat id (`id`, or AG-UI's `threadId`) must be 1 to 256 of A-Z a-z 0-9 - . _ ~ (not `.` or `..`): it travels in a header and a URL path",
            ),
            (
                json!({"messages": [
                    {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "adk_request_confirmation", "args": {}}]},
                    {"role": "user", "content": [{"type": "tool-result", "toolCallId": "c1", "result": {"confirmed": true, "remember": "forever"}}]}
                ]}),
                r#"invalid request: messages[1].content[0]: invalid answer: invalid value: string "forever", expected "once", "session", "global" or {"scope": "window", "minutes": N}"#,
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                parse(body).err().map(|e| e.to_string()).as_deref(),
                Some(expected)
            );
        }
        assert!(matches!(
            ChatRequest::from_slice(b"{"),
            Err(RequestError::Json(_))
        ));
    }
}
