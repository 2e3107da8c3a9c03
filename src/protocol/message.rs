//! UI messages as `useChat` holds them: every part type and tool-part state.

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
        check_id(&format!("{path}: toolCallId"), &tool_call_id)?;
        if let ToolState::ApprovalRequested { approval_id: id }
        | ToolState::ApprovalResponded(Approval { id, .. })
        | ToolState::OutputDenied(Some(Approval { id, .. })) = &state
        {
            check_id(&format!("{path}: approval id"), id)?;
        }
        let part = ToolPart {
            tool_call_id,
            tool_name: name,
            dynamic,
            input: self.input.unwrap_or(Value::Null),
            state,
            provider_executed: self.provider_executed.unwrap_or(false),
            call_provider_metadata: self.call_provider_metadata,
        };
        check_answer(&part, path)?;
        Ok(part)
    }
}

/// Refuses a confirmation part whose answer has a malformed key, before
/// any turn starts.
pub(crate) fn check_answer(part: &ToolPart, path: &str) -> Result<(), RequestError> {
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
mod tests {
    use super::*;
    use serde_json::json;

    fn part(value: Value) -> Result<Part, RequestError> {
        let raw: RawPart =
            serde_json::from_value(value).map_err(|e| RequestError::Invalid(e.to_string()))?;
        raw.into_part("p")
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
}
