//! AG-UI 1.0's words for what the core says, pure: each UI chunk of a turn
//! as AG-UI events ([`Translator`]), a question as a tool-bound
//! [`interrupt`], a resume entry's payload as a [`Decision`], and the run's
//! first and last events. The only place AG-UI's event names are written.

mod translate;

pub use translate::{Ended, Tail, Translator};

use serde_json::{Map, Value, json};

use crate::run::{Decision, Issued, Remember};

/// The protocol version this face speaks.
pub const PROTOCOL_VERSION: &str = "1.0";

/// How far an approval may be remembered, as a payload says it.
const REMEMBER: [&str; 3] = ["once", "chat", "always"];

/// `RUN_ERROR` codes.
pub const PENDING: &str = "INTERRUPTS_PENDING";
pub const BAD_RESUME: &str = "INVALID_RESUME";
pub const EXPIRED: &str = "INTERRUPT_EXPIRED";
pub const REFUSED: &str = "REFUSED";
pub const TURN_ERROR: &str = "TURN_ERROR";

/// A denied call's result.
pub const DENIED: &str = "The user denied this call.";

/// `RUN_STARTED`.
pub fn run_started(thread_id: &str, run_id: &str) -> Value {
    json!({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "protocolVersion": PROTOCOL_VERSION})
}

/// `RUN_ERROR`: `message` is a fixed or user-facing text, never internals.
pub fn run_error(code: &str, message: &str) -> Value {
    json!({"type": "RUN_ERROR", "message": message, "code": code})
}

/// `RUN_FINISHED` with its outcome: success, cancelled, or the interrupts
/// the run waits on (never empty: else it is a success).
pub fn run_finished(thread_id: &str, run_id: &str, ended: &Ended, interrupts: Vec<Value>) -> Value {
    let outcome = match (ended, interrupts.is_empty()) {
        (Ended::Aborted, _) => json!({"type": "cancelled"}),
        (_, false) => json!({"type": "interrupt", "interrupts": interrupts}),
        (_, true) => json!({"type": "success"}),
    };
    json!({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "outcome": outcome})
}

/// The snapshots that come before an interrupting `RUN_FINISHED`: the
/// state as the client sent it (toolgate keeps none), and the thread's
/// messages (the input's, then this run's).
pub fn snapshots(state: Option<&Value>, input: &[Value], made: &[Value]) -> [Value; 2] {
    let mut messages = Vec::with_capacity(input.len() + made.len());
    messages.extend(input.iter().cloned());
    messages.extend(made.iter().cloned());
    [
        json!({"type": "STATE_SNAPSHOT", "snapshot": state.cloned().unwrap_or_else(|| json!({}))}),
        json!({"type": "MESSAGES_SNAPSHOT", "messages": messages}),
    ]
}

/// What a question may be answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowed {
    /// The policy lets its approval be remembered.
    pub remember: bool,
    /// The tool's arguments may be edited before approving.
    pub edits: bool,
}

/// A question as a tool-bound interrupt: `reason: "confirmation"` on the
/// call's `toolCallId`, what runs, the payload it takes, when it expires.
pub fn interrupt(issued: &Issued, allowed: Allowed, parameters: Option<&Value>) -> Value {
    let args = issued.call.args.to_string();
    let message = format!(
        "Approve running `{}` with {args}? {}",
        issued.call.name, issued.hint
    );
    json!({
        "id": issued.id,
        "reason": "confirmation",
        "message": message,
        "toolCallId": issued.call.id,
        "responseSchema": response_schema(allowed, parameters),
        "expiresAt": rfc3339(issued.expires_at_ms),
    })
}

/// The JSON Schema a resume's payload must fit.
pub fn response_schema(allowed: Allowed, parameters: Option<&Value>) -> Value {
    let mut properties = Map::new();
    properties.insert("approved".into(), json!({"type": "boolean"}));
    properties.insert("reason".into(), json!({"type": "string"}));
    if allowed.remember {
        properties.insert(
            "remember".into(),
            json!({"type": "string", "enum": REMEMBER}),
        );
    }
    if allowed.edits {
        let schema = parameters
            .filter(|p| p.is_object())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        properties.insert("editedArgs".into(), schema);
    }
    json!({"type": "object", "properties": properties, "required": ["approved"], "additionalProperties": false})
}

/// The decision a resolved interrupt's payload makes, if it fits the
/// response schema (`allowed`); else why not. The arguments of an edit are
/// checked against the tool's schema by the gate.
pub fn decision(payload: Option<&Value>, allowed: Allowed) -> Result<Decision, String> {
    let Some(Value::Object(payload)) = payload else {
        return Err("a resolved interrupt's payload must be an object with `approved`".into());
    };
    for key in payload.keys() {
        let known = match key.as_str() {
            "approved" | "reason" => true,
            "remember" => allowed.remember,
            "editedArgs" => allowed.edits,
            _ => false,
        };
        if !known {
            return Err(format!(
                "the payload's `{key}` is not in its responseSchema"
            ));
        }
    }
    let Some(approved) = payload.get("approved").and_then(Value::as_bool) else {
        return Err("the payload's `approved` must be true or false".into());
    };
    let reason = match payload.get("reason") {
        None => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return Err("the payload's `reason` must be a string".into()),
    };
    if !approved {
        if payload.contains_key("remember") || payload.contains_key("editedArgs") {
            return Err("a denial carries no `remember` or `editedArgs`".into());
        }
        return Ok(Decision::Deny { reason });
    }
    let remember = match payload.get("remember") {
        None => None,
        Some(Value::String(word)) => match word.as_str() {
            "once" => None,
            "chat" => Some(Remember::Chat),
            "always" => Some(Remember::Everywhere),
            _ => return Err("the payload's `remember` is not one of once, chat, always".into()),
        },
        Some(_) => return Err("the payload's `remember` must be a string".into()),
    };
    let edited = match payload.get("editedArgs") {
        None => None,
        Some(args @ Value::Object(_)) => Some(args.clone()),
        Some(_) => return Err("the payload's `editedArgs` must be an object".into()),
    };
    Ok(Decision::Approve {
        payload: None,
        remember,
        approve_next: None,
        edited,
        grant: None,
    })
}

/// A cancelled interrupt: the call is denied.
pub fn cancelled() -> Decision {
    Decision::Deny {
        reason: Some("cancelled in the AG-UI client".into()),
    }
}

/// What `GET /ag-ui` advertises (AG-UI's `AgentCapabilities`).
pub fn capabilities() -> Value {
    json!({
        "transport": {"streaming": true},
        "reasoning": {"supported": true, "streaming": true},
        "humanInTheLoop": {
            "supported": true,
            "approvals": true,
            "interrupts": true,
            "approveWithEdits": true,
        },
    })
}

/// Milliseconds since the epoch as an RFC 3339 UTC time, to the millisecond.
pub fn rfc3339(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (hour, minute, second) = (rest / 3600, rest % 3600 / 60, rest % 60);
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests;
