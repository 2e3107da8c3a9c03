//! AG-UI's `RunAgentInput`, read: the thread, the run, its messages as the
//! UI history a turn takes, and its resume entries. Pure.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::protocol::{
    ChatId, ChatRequest, ClientVersion, ConfirmationFlow, ConfirmationProtocol, Part, RequestError,
    RequestOptions, Role, ToolPart, ToolState, UiMessage,
};

/// The `ai` version the turn fits its chunks to for AG-UI's encoder: the
/// first with native approvals, whose chunks the encoder reads.
const AS_CLIENT: ClientVersion = ClientVersion::new(6, 0, 0);

/// A run as the client asks for it. Keys toolgate does not use (`tools`,
/// `context`, `forwardedProps`) are ignored: the tools are the server's.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    pub thread_id: String,
    pub run_id: String,
    /// As sent, for `MESSAGES_SNAPSHOT`; read by [`RunAgentInput::request`].
    pub messages: Vec<Value>,
    #[serde(default)]
    pub state: Option<Value>,
    #[serde(default)]
    pub resume: Option<Vec<ResumeEntry>>,
}

/// One answer to an interrupt.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    #[serde(default)]
    pub payload: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResumeStatus {
    Resolved,
    Cancelled,
}

/// The messages toolgate reads; reasoning and activity messages are the
/// client's to show and say nothing to the model.
#[derive(Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message {
    User {
        id: String,
        content: Content,
    },
    System {
        id: String,
        content: String,
    },
    Developer {
        id: String,
        content: String,
    },
    #[serde(rename_all = "camelCase")]
    Assistant {
        id: String,
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    #[serde(rename_all = "camelCase")]
    Tool {
        tool_call_id: String,
        content: Content,
        #[serde(default)]
        error: Option<String>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct ToolCall {
    id: String,
    function: Function,
}

#[derive(Deserialize)]
struct Function {
    name: String,
    arguments: String,
}

impl Content {
    fn text(self, path: &str) -> Result<String, RequestError> {
        match self {
            Content::Text(text) => Ok(text),
            Content::Parts(parts) => {
                let mut text = String::new();
                for part in parts {
                    match (part.kind.as_str(), part.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(RequestError::Invalid(format!(
                                "{path}: a `{kind}` part; toolgate takes text only"
                            )));
                        }
                    }
                }
                Ok(text)
            }
        }
    }
}

impl RunAgentInput {
    pub fn from_slice(body: &[u8]) -> Result<Self, RequestError> {
        let input: Self =
            serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?;
        if input.thread_id.trim().is_empty() || input.run_id.trim().is_empty() {
            return Err(RequestError::Invalid(
                "`threadId` and `runId` must not be empty".into(),
            ));
        }
        // The thread is the chat: its id is checked here, by the one rule
        // of chat ids, so a refusal is a 400 before `RUN_STARTED` and before
        // a resume decides anything (the turn's request checks it again).
        crate::protocol::ChatId::parse(input.thread_id.as_str())?;
        crate::protocol::message::check_id("`runId`", &input.run_id)?;
        Ok(input)
    }

    /// The turn's request: the messages as UI history (consecutive
    /// assistant messages one message, each tool call a tool part with
    /// its result, or waiting for the question `asked` names for its id),
    /// in native approvals, finishing at a question.
    pub fn request(&self, asked: &HashMap<String, String>) -> Result<ChatRequest, RequestError> {
        let mut results: HashMap<String, (Content, Option<String>)> = HashMap::new();
        let mut messages = Vec::with_capacity(self.messages.len());
        for (i, raw) in self.messages.iter().enumerate() {
            let message = Message::deserialize(raw)
                .map_err(|e| RequestError::Invalid(format!("messages[{i}]: {e}")))?;
            if let Message::Tool {
                tool_call_id,
                content,
                error,
            } = message
            {
                results.insert(tool_call_id, (content, error));
            } else {
                messages.push((i, message));
            }
        }
        let mut ui: Vec<UiMessage> = Vec::with_capacity(messages.len());
        for (i, message) in messages {
            let path = format!("messages[{i}]");
            let (id, role, parts) = match message {
                Message::User { id, content } => {
                    (id, Role::User, vec![Part::Text(content.text(&path)?)])
                }
                Message::System { id, content } | Message::Developer { id, content } => {
                    (id, Role::System, vec![Part::Text(content)])
                }
                Message::Assistant {
                    id,
                    content,
                    tool_calls,
                } => {
                    let mut parts = Vec::with_capacity(tool_calls.len() + 1);
                    if let Some(content) = content.filter(|c| !c.is_empty()) {
                        parts.push(Part::Text(content));
                    }
                    for (j, call) in tool_calls.into_iter().enumerate() {
                        let path = format!("{path}.toolCalls[{j}]");
                        let result = results.remove(&call.id);
                        parts.push(Part::Tool(tool_part(call, result, asked, &path)?));
                    }
                    (id, Role::Assistant, parts)
                }
                Message::Tool { .. } | Message::Other => continue,
            };
            if parts.is_empty() {
                continue;
            }
            // The client makes one message per tool call; the turn reads
            // one assistant message per step.
            match ui.last_mut() {
                Some(last) if role == Role::Assistant && last.role == Role::Assistant => {
                    last.parts.extend(parts);
                }
                _ => ui.push(UiMessage { id, role, parts }),
            }
        }
        let chat_id = ChatId::parse(self.thread_id.as_str())?;
        // AG-UI's interrupts are native approvals; a question ends the run.
        let options = RequestOptions {
            protocol: Some(ConfirmationProtocol::AiSdk),
            client_version: Some(AS_CLIENT),
            flow: Some(ConfirmationFlow::Finish),
        };
        ChatRequest::from_messages(chat_id, ui, options)
    }
}

/// A tool call as the UI part the turn reads: its result if the client
/// holds one, else waiting for its question if a resume answered it, else
/// an error (a call that never got a result says so to the model).
fn tool_part(
    call: ToolCall,
    result: Option<(Content, Option<String>)>,
    asked: &HashMap<String, String>,
    path: &str,
) -> Result<ToolPart, RequestError> {
    let input: Value = match call.function.arguments.trim() {
        "" => json!({}),
        args => serde_json::from_str(args)
            .map_err(|_| RequestError::Invalid(format!("{path}.function.arguments is not JSON")))?,
    };
    let state = match (result, asked.get(&call.id)) {
        (Some((_, Some(error))), _) => ToolState::OutputError { error_text: error },
        (Some((content, None)), _) => {
            let content = content.text(path)?;
            let output = serde_json::from_str(&content).unwrap_or(Value::String(content));
            ToolState::OutputAvailable {
                output,
                preliminary: false,
            }
        }
        (None, Some(question)) => ToolState::ApprovalRequested {
            approval_id: question.clone(),
        },
        (None, None) => ToolState::OutputError {
            error_text: NO_RESULT.to_owned(),
        },
    };
    ToolPart {
        tool_call_id: call.id,
        tool_name: call.function.name,
        dynamic: false,
        input,
        state,
        provider_executed: false,
        call_provider_metadata: None,
    }
    .checked(&path)
}

/// What a call the client holds no result for says to the model.
pub const NO_RESULT: &str = "This call has no result.";
