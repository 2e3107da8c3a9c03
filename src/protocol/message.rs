//! UI messages as `useChat` holds them: every part type and tool-part state.

use std::fmt::Display;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::call::MAX_ARGS_BYTES;

/// A client's mistake in the body; the transport answers 400 with it.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("invalid JSON body: {0}")]
    Json(String),
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// The longest id (a chat's, a confirmation's, a tool call's) accepted, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Refuses an id longer than [`MAX_ID_BYTES`], or holding a control
/// character (a newline in an id would forge a line of the log, where ids
/// are written). The error, which is logged, names a prefix and the length,
/// never the whole id, and no id with a control character.
pub fn check_id(what: &str, id: &str) -> Result<(), RequestError> {
    if id
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return Err(RequestError::Invalid(format!(
            "{what} holds a control character (a newline, a tab…); ids are printable text"
        )));
    }
    if id.len() <= MAX_ID_BYTES {
        return Ok(());
    }
    let mut end = 16;
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    Err(RequestError::Invalid(format!(
        "{what} `{}…` is {} bytes; ids are at most {MAX_ID_BYTES}",
        &id[..end],
        id.len()
    )))
}

/// The name of the wrapper call an ADK confirmation is asked with.
pub const CONFIRMATION_TOOL: &str = "adk_request_confirmation";

/// How far an approval reaches beyond the call it answers. `"once"`, the
/// default, reaches no further and is never stored: it is no `Remember`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remember {
    /// `"session"`: this tool, in this chat, without asking.
    Chat,
    /// `"global"`: this tool, in every chat of this user, without asking.
    Everywhere,
    /// `{"scope": "window", "minutes": N}`: this tool, in every chat of
    /// this user, without asking for N minutes from the approval.
    Window { minutes: u32 },
}

/// The longest window an approval may be remembered for: 30 days.
pub const MAX_WINDOW_MINUTES: u32 = 30 * 24 * 60;

impl Remember {
    /// When a grant made at `now_ms` lapses; `None` for one that does not.
    pub fn expires_at_ms(self, now_ms: u64) -> Option<u64> {
        match self {
            Remember::Chat | Remember::Everywhere => None,
            Remember::Window { minutes } => {
                Some(now_ms.saturating_add(u64::from(minutes) * 60_000))
            }
        }
    }
}

/// `remember` as an answer carries it: `"once"`, `"session"`, `"global"`,
/// `{"scope": "window", "minutes": 1..=43200}` or `null`. Anything else
/// (another word, another key in the object, minutes out of range) is an
/// error, which refuses the whole answer.
fn remember<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Remember>, D::Error> {
    struct Words;

    impl<'de> serde::de::Visitor<'de> for Words {
        type Value = Option<Remember>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(r#""once", "session", "global" or {"scope": "window", "minutes": N}"#)
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<Self::Value, E> {
            match word {
                "once" => Ok(None),
                "session" => Ok(Some(Remember::Chat)),
                "global" => Ok(Some(Remember::Everywhere)),
                other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
            }
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            #[derive(Deserialize)]
            #[serde(rename_all = "lowercase")]
            enum Scope {
                Window,
            }
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Window {
                scope: Scope,
                minutes: u32,
            }
            // The one scope an object names, for now.
            let Window {
                scope: Scope::Window,
                minutes,
            } = Window::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            if !(1..=MAX_WINDOW_MINUTES).contains(&minutes) {
                return Err(serde::de::Error::invalid_value(
                    serde::de::Unexpected::Unsigned(u64::from(minutes)),
                    &"a window of 1 to 43200 minutes",
                ));
            }
            Ok(Some(Remember::Window { minutes }))
        }
    }

    d.deserialize_any(Words)
}

/// The one word `decision` takes: a person answers in the tool's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionWord {
    Respond,
}

/// What an answer says besides its yes or no, as the chat (an ADK
/// confirmation's output), a socket's `confirm` frame and `POST
/// /api/confirmations/{id}` carry it: one parser judges all three, and a
/// malformed key refuses the whole answer (nothing runs). Absent and
/// `null` keys are `None`; other keys are left to the carrier.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerKeys {
    /// `"respond"`: the tool does not run and `output` is its result.
    #[serde(default)]
    pub decision: Option<DecisionWord>,
    /// The call's result a person gives in the tool's place.
    #[serde(default)]
    pub output: Option<Value>,
    /// Why the user refused; reaches the model.
    #[serde(default)]
    pub reason: Option<String>,
    /// Reaches the tool on approval.
    #[serde(default)]
    pub payload: Option<Value>,
    /// How far the approval reaches; `None` for once (absent, `null`, `"once"`).
    #[serde(default, deserialize_with = "remember")]
    pub remember: Option<Remember>,
    /// The next N calls of this tool in this chat run without asking.
    #[serde(default)]
    pub approve_next: Option<u32>,
    /// The arguments as the user edited them before approving.
    #[serde(default)]
    pub edited_args: Option<Value>,
    /// The approval also decides later calls, but only inside this scope.
    #[serde(default)]
    pub grant: Option<super::grant::GrantScope>,
}

impl AnswerKeys {
    /// The keys of an ADK confirmation's output. Only an object has any;
    /// anything else (`"yes"`, `null`) is a denial without a reason.
    pub fn of_output(output: &Value) -> Result<Self, RequestError> {
        let keys = match output {
            Value::Object(_) => AnswerKeys::deserialize(output)
                .map_err(|e| RequestError::Invalid(format!("invalid answer: {e}")))?,
            _ => Self::default(),
        };
        keys.check(confirmed(output, &keys))?;
        Ok(keys)
    }

    /// Whether the answer gives the call's result in the tool's place.
    pub fn responds(&self) -> bool {
        self.decision == Some(DecisionWord::Respond)
    }

    /// The keys together with the carrier's yes or no (`approved`,
    /// `confirmed`; `None` when left out). A response carries an `output`
    /// of at most [`MAX_ARGS_BYTES`], a yes or nothing, and no key of an
    /// approval or a denial, which it would silently drop; `output` comes
    /// only with a response, so an approval that carries one (the tool
    /// would run) is refused rather than read as a yes.
    pub fn check(&self, approved: Option<bool>) -> Result<(), RequestError> {
        let invalid = |why: String| Err(RequestError::Invalid(format!("invalid answer: {why}")));
        if let Some(grant) = &self.grant {
            grant
                .check(MAX_WINDOW_MINUTES)
                .map_err(RequestError::Invalid)?;
            if self.remember.is_some() || self.approve_next.is_some() {
                return invalid("`grant` does not go with `remember` or `approveNext`".into());
            }
            if approved == Some(false) {
                return invalid("`grant` comes only with an approval".into());
            }
        }
        if !self.responds() {
            return match self.output {
                Some(_) => invalid(r#"`output` comes only with `decision: "respond"`"#.into()),
                None => Ok(()),
            };
        }
        if approved == Some(false) {
            return invalid(r#"`decision: "respond"` is no denial: leave `confirmed`/`approved` out, or `true`"#.into());
        }
        let Some(output) = &self.output else {
            return invalid(r#"`decision: "respond"` needs an `output`"#.into());
        };
        if output.to_string().len() > MAX_ARGS_BYTES {
            return invalid(format!("`output` exceeds {MAX_ARGS_BYTES} bytes"));
        }
        let others = [
            ("reason", self.reason.is_some()),
            ("payload", self.payload.is_some()),
            ("remember", self.remember.is_some()),
            ("approveNext", self.approve_next.is_some()),
            ("editedArgs", self.edited_args.is_some()),
            ("grant", self.grant.is_some()),
        ];
        match others.iter().find(|(_, given)| *given) {
            Some((key, _)) => invalid(format!(r#"`{key}` does not go with `decision: "respond"`"#)),
            None => Ok(()),
        }
    }
}

/// The yes or no of an ADK confirmation's output: only `confirmed: true`
/// is a yes (`"true"`, `1`, a missing key are no), except that a response
/// may leave the key out (absent or `null`): then `None`.
pub fn confirmed(output: &Value, keys: &AnswerKeys) -> Option<bool> {
    match output.get("confirmed") {
        None | Some(Value::Null) if keys.responds() => None,
        said => Some(said == Some(&Value::Bool(true))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UiMessage {
    pub id: String,
    pub role: Role,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToolState {
    InputStreaming,
    InputAvailable,
    ApprovalRequested { approval_id: String },
    ApprovalResponded(Approval),
    OutputAvailable { output: Value, preliminary: bool },
    OutputError { error_text: String },
    OutputDenied(Option<Approval>),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
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

fn required<T>(value: Option<T>, path: &dyn Display, key: &str) -> Result<T, RequestError> {
    value.ok_or_else(|| RequestError::Invalid(format!("{path}: missing `{key}`")))
}

impl RawPart {
    pub(crate) fn into_part(self, path: &dyn Display) -> Result<Part, RequestError> {
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
        path: &dyn Display,
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
        ToolPart {
            tool_call_id,
            tool_name: name,
            dynamic,
            input: self.input.unwrap_or(Value::Null),
            state,
            provider_executed: self.provider_executed.unwrap_or(false),
            call_provider_metadata: self.call_provider_metadata,
        }
        .checked(path)
    }
}

impl ToolPart {
    /// The part, if its ids are ids and a confirmation's answer has no
    /// malformed key: every tool part a request carries passes here,
    /// whichever face's wire it came from.
    pub fn checked(self, path: &dyn Display) -> Result<Self, RequestError> {
        check_id(&format!("{path}: toolCallId"), &self.tool_call_id)?;
        if let ToolState::ApprovalRequested { approval_id: id }
        | ToolState::ApprovalResponded(Approval { id, .. })
        | ToolState::OutputDenied(Some(Approval { id, .. })) = &self.state
        {
            check_id(&format!("{path}: approval id"), id)?;
        }
        check_answer(&self, path)?;
        Ok(self)
    }
}

/// Refuses a confirmation part whose answer has a malformed key, before
/// any turn starts.
pub(crate) fn check_answer(part: &ToolPart, path: &dyn Display) -> Result<(), RequestError> {
    match &part.state {
        ToolState::OutputAvailable {
            output,
            preliminary: false,
        } if part.tool_name == CONFIRMATION_TOOL => AnswerKeys::of_output(output)
            .map(drop)
            .map_err(|e| RequestError::Invalid(format!("{path}: {}", without_prefix(&e)))),
        _ => Ok(()),
    }
}

/// The text of an `Invalid` error without its `invalid request: ` prefix.
fn without_prefix(e: &RequestError) -> String {
    match e {
        RequestError::Invalid(why) | RequestError::Json(why) => why.clone(),
    }
}

#[cfg(test)]
mod tests;
