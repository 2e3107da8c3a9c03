//! MCP's words for what the core says, pure: the elicitation form that asks
//! about a question, the client's answer as a [`Decision`], an outcome as
//! a `CallToolResult`, a tool as MCP lists it.

use std::sync::Arc;

use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequestParams, ElicitationAction, ElicitationSchema, Tool,
};
use serde_json::{Value, json};

use crate::call::{denial_text, expired_text};
use crate::run::{Decision, Issued, Outcome, Remember, ToolView};

/// The key of the approval form among a 2026-07-28 `inputRequests`.
pub const APPROVAL: &str = "approval";

/// How far an approval may be remembered, as the form offers it.
const REMEMBER: [&str; 3] = ["once", "chat", "always"];

/// A tool as `tools/list` shows it.
pub fn tool(view: ToolView) -> Tool {
    let schema = match view.parameters {
        Value::Object(map) => map,
        _ => serde_json::Map::from_iter([("type".to_owned(), json!("object"))]),
    };
    Tool::new(view.name, view.description, Arc::new(schema))
}

/// The form that asks the client's user about `issued`: the tool, its
/// arguments and why it needs approval; approve or deny, a reason, and
/// the remember choices the policy allows (`may_remember`).
pub fn form(issued: &Issued, may_remember: bool) -> Result<ElicitRequestParams, String> {
    let args = serde_json::to_string(&issued.call.args).unwrap_or_default();
    let message = format!(
        "Approve running `{}` with {args}? {} (confirmation {})",
        issued.call.name, issued.hint, issued.id
    );
    let mut properties = serde_json::Map::new();
    properties.insert(
        "approve".into(),
        json!({"type": "boolean", "title": "Approve", "description": format!("Run `{}` with these arguments once", issued.call.name)}),
    );
    properties.insert(
        "reason".into(),
        json!({"type": "string", "title": "Reason", "description": "Why (kept in the audit log)"}),
    );
    if may_remember {
        properties.insert(
            "remember".into(),
            json!({"type": "string", "title": "Remember", "enum": REMEMBER, "default": "once",
                   "description": "once: only this call; chat: this same call (tool and arguments) again without asking; always: every call of this tool by you"}),
        );
    }
    let schema = json!({"type": "object", "properties": properties, "required": ["approve"]});
    let requested_schema: ElicitationSchema =
        serde_json::from_value(schema).map_err(|e| e.to_string())?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

/// The decision an elicitation answer makes: accept with `approve: true`
/// approves (remembered as chosen); anything else denies, with the
/// reason given.
pub fn decision(action: &ElicitationAction, content: Option<&Value>) -> Decision {
    let field = |name: &str| content.and_then(|c| c.get(name));
    let reason = field("reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    let approved = matches!(action, ElicitationAction::Accept)
        && field("approve").is_some_and(|a| *a == json!(true) || *a == json!("approve"));
    if !approved {
        let reason = reason.or_else(|| match action {
            ElicitationAction::Decline => Some("declined in the MCP client".to_owned()),
            ElicitationAction::Cancel => Some("cancelled in the MCP client".to_owned()),
            // An accept that does not approve (rmcp's enum is open).
            _ => None,
        });
        return Decision::Deny { reason };
    }
    let remember = match field("remember").and_then(Value::as_str) {
        Some("chat") => Some(Remember::Chat),
        Some("always") => Some(Remember::Everywhere),
        _ => None,
    };
    Decision::Approve {
        payload: None,
        remember,
        approve_next: None,
        edited: None,
        grant: None,
    }
}

/// An elicitation answer as JSON (`{"action", "content"?}`), read.
pub fn answer(value: &Value) -> Option<(ElicitationAction, Option<&Value>)> {
    let action = serde_json::from_value(value.get("action")?.clone()).ok()?;
    Some((action, value.get("content")))
}

/// The result an outcome is for the client: a tool's output, or an error
/// result that says why nothing ran (or what failed).
pub fn result(tool: &str, outcome: Outcome) -> CallToolResult {
    match outcome {
        Outcome::Output { output, .. } => {
            let text = match &output {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            if output.is_object() {
                result.structured_content = Some(output);
            }
            result
        }
        Outcome::Error { message, .. } => error(message),
        Outcome::Denied { reason } => error(denial_text(reason.as_deref())),
        Outcome::Expired => error(expired_text(tool)),
        Outcome::Cancelled => error(format!(
            "The request to run {tool} was cancelled; nobody approved or denied it."
        )),
        Outcome::HandedOff { .. } => error(format!(
            "`{tool}` runs in a chat client; an MCP client cannot run it"
        )),
    }
}

/// An error result with `text`.
pub fn error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text.into())])
}

/// What a client that could not be asked is told when the hold ends.
pub fn still_waiting(issued: &Issued) -> CallToolResult {
    error(format!(
        "waiting for approval: confirmation {} ({}) is in the approvers' inbox; nothing ran. Call `{}` again with the same arguments to pick up the decision.",
        issued.id, issued.hint, issued.call.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_accepted_approval_approves() {
        let yes = json!({"approve": true, "remember": "chat"});
        let cases = [
            (ElicitationAction::Accept, Some(yes.clone()), true),
            (
                ElicitationAction::Accept,
                Some(json!({"approve": "approve"})),
                true,
            ),
            (
                ElicitationAction::Accept,
                Some(json!({"approve": false})),
                false,
            ),
            (
                ElicitationAction::Accept,
                Some(json!({"approve": "deny"})),
                false,
            ),
            (
                ElicitationAction::Accept,
                Some(json!({"approve": "yes"})),
                false,
            ),
            (ElicitationAction::Accept, None, false),
            (ElicitationAction::Decline, Some(yes.clone()), false),
            (ElicitationAction::Cancel, Some(yes), false),
        ];
        for (action, content, approves) in cases {
            let decided = decision(&action, content.as_ref());
            assert_eq!(
                matches!(decided, Decision::Approve { .. }),
                approves,
                "{action:?} {content:?}"
            );
        }
    }

    #[test]
    fn a_decline_says_so() {
        let decided = decision(&ElicitationAction::Decline, None);
        assert!(
            matches!(&decided, Decision::Deny { reason: Some(r) } if r.contains("declined")),
            "{decided:?}"
        );
    }
}
