//! UI history → provider-neutral model messages.
//!
//! The model sees its own calls and their results, never the
//! `adk_request_confirmation` wrapper: a confirmation part stands for the
//! original call it embeds. Every call gets a result, as providers require.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use crate::call::{ToolCall, cancelled_text, expired_text, parse_denial};
use crate::confirm::{Answer, CONFIRMATION_TOOL, original_call};
use crate::protocol::{Part, Role, ToolPart, ToolState, UiMessage};
use crate::provider::{AssistantContent, ModelMessage, ResultContent, ToolResult, UserContent};
use crate::store::Outcome;

/// What the model is told about a call nobody answered.
pub const UNANSWERED: &str = "the call was not confirmed before the conversation moved on";

/// The data part (`data-toolgate-outcome`) that brings the outcome of a
/// question the user moved on from into a later message.
pub const MOVED_ON: &str = "toolgate-outcome";

/// Most earlier questions one turn looks up: the latest ones.
const MAX_EARLIER: usize = 64;

/// A question still open in an earlier message, as the client holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Earlier {
    pub confirmation_id: String,
}

/// The questions still open in messages before the outgoing one whose
/// outcome no later message brought yet, oldest first (at most the latest
/// [`MAX_EARLIER`]).
pub fn earlier_questions(history: &[UiMessage]) -> Vec<Earlier> {
    let Some((_, earlier)) = history.split_last() else {
        return Vec::new();
    };
    let brought: HashSet<&str> = history
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Data { name, data } if name == MOVED_ON => data["confirmationId"].as_str(),
            _ => None,
        })
        .collect();
    let mut open: Vec<Earlier> = earlier
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Tool(tool) if Answer::is_pending(tool) => Some(match &tool.state {
                ToolState::ApprovalRequested { approval_id } => approval_id.as_str(),
                _ => tool.tool_call_id.as_str(),
            }),
            _ => None,
        })
        .filter(|id| !brought.contains(id))
        .map(|id| Earlier {
            confirmation_id: id.to_owned(),
        })
        .collect();
    let skip = open.len().saturating_sub(MAX_EARLIER);
    open.drain(..skip);
    open
}

/// What later messages say of calls the user moved on from, by call id.
fn moved_on(history: &[UiMessage]) -> HashMap<String, ResultContent> {
    history
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Data { name, data } if name == MOVED_ON => {
                let call_id = data["toolCallId"].as_str()?;
                let tool = data["toolName"].as_str().unwrap_or_default();
                let outcome = Outcome::deserialize(&data["outcome"]).ok()?;
                Some((call_id.to_owned(), result_of(tool, outcome)))
            }
            _ => None,
        })
        .collect()
}

/// A recorded outcome as the model reads it.
fn result_of(tool: &str, outcome: Outcome) -> ResultContent {
    match outcome {
        Outcome::Output { output, .. } => ResultContent::Output(output),
        Outcome::Error { message, .. } => ResultContent::Error(message),
        Outcome::Denied { reason } => ResultContent::Denied { reason },
        Outcome::Expired => ResultContent::Error(expired_text(tool)),
        Outcome::Cancelled => ResultContent::Error(cancelled_text(tool)),
        Outcome::HandedOff { .. } => ResultContent::Error(UNANSWERED.to_owned()),
    }
}

pub fn to_model_messages(history: &[UiMessage]) -> Vec<ModelMessage> {
    let mut out = Vec::with_capacity(history.len() + 4);
    let moved = moved_on(history);
    for message in history {
        match message.role {
            Role::System => {
                let text = texts(&message.parts);
                if !text.is_empty() {
                    out.push(ModelMessage::System(text));
                }
            }
            Role::User => {
                let content: Vec<UserContent> =
                    message.parts.iter().filter_map(user_content).collect();
                if !content.is_empty() {
                    out.push(ModelMessage::User(content));
                }
            }
            Role::Assistant => {
                for step in message.parts.split(|p| matches!(p, Part::StepStart)) {
                    push_step(&mut out, step, &moved);
                }
            }
        }
    }
    out
}

/// A part of a user's message as a model (or an upstream agent) takes it.
pub(super) fn user_content(part: &Part) -> Option<UserContent> {
    match part {
        Part::Text(text) => Some(UserContent::Text(text.clone())),
        Part::File {
            media_type, url, ..
        } => Some(UserContent::File {
            media_type: media_type.clone(),
            url: url.clone(),
        }),
        _ => None,
    }
}

fn texts(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn push_step(out: &mut Vec<ModelMessage>, parts: &[Part], moved: &HashMap<String, ResultContent>) {
    let mut content = Vec::new();
    let mut results: Vec<(ToolCall, Option<ResultContent>)> = Vec::new();
    // Each call's place among the results and in the content.
    let mut index: HashMap<String, (usize, usize)> = HashMap::new();
    for part in parts {
        match part {
            Part::Text(t) if !t.is_empty() => content.push(AssistantContent::Text(t.clone())),
            // A redacted thinking block has no text, only its metadata.
            Part::Reasoning {
                text,
                provider_metadata,
            } if !text.is_empty() || provider_metadata.is_some() => {
                content.push(AssistantContent::Reasoning {
                    text: text.clone(),
                    metadata: provider_metadata.clone(),
                })
            }
            Part::Tool(tool) => {
                let metadata = tool.call_provider_metadata.as_ref();
                let (call, result) = match call_and_result(tool) {
                    Some(found) => found,
                    None => continue,
                };
                match index.get(call.id.as_str()) {
                    Some(&(i, at)) => {
                        if result.is_some() {
                            results[i].1 = result;
                        }
                        // The call's own part after its confirmation holds
                        // the arguments it ran with (an edit): the model
                        // sees those, so it does not retry the original.
                        if tool.tool_name != CONFIRMATION_TOOL
                            && let Some(AssistantContent::ToolCall { call: shown, .. }) =
                                content.get_mut(at)
                        {
                            shown.args = call.args;
                        }
                    }
                    None => {
                        index.insert(call.id.clone(), (results.len(), content.len()));
                        content.push(AssistantContent::ToolCall {
                            call: call.clone(),
                            metadata: metadata.cloned(),
                        });
                        results.push((call, result));
                    }
                }
            }
            _ => {}
        }
    }
    if content.is_empty() {
        return;
    }
    out.push(ModelMessage::Assistant(content));
    if !results.is_empty() {
        out.push(ModelMessage::Tool(
            results
                .into_iter()
                .map(|(call, result)| {
                    // Decided after the user moved on: a later message says how.
                    let result = result.or_else(|| moved.get(&call.id).cloned());
                    ToolResult {
                        call_id: call.id,
                        tool_name: call.name,
                        outcome: result
                            .unwrap_or_else(|| ResultContent::Error(UNANSWERED.to_owned())),
                    }
                })
                .collect(),
        ));
    }
}

/// The call a tool part stands for, and its result if it has one.
fn call_and_result(tool: &ToolPart) -> Option<(ToolCall, Option<ResultContent>)> {
    if tool.tool_name == CONFIRMATION_TOOL {
        let call = original_call(&tool.input)?;
        // A rejected confirmation is the call's result; an answered one is
        // resolved by the original call's own part.
        let result = match &tool.state {
            ToolState::OutputError { error_text } => Some(ResultContent::Error(error_text.clone())),
            _ => None,
        };
        return Some((call, result));
    }
    let call = ToolCall {
        id: tool.tool_call_id.clone(),
        name: tool.tool_name.clone(),
        args: tool.input.clone(),
    };
    let result = match &tool.state {
        ToolState::OutputAvailable {
            output,
            preliminary: false,
        } => Some(ResultContent::Output(output.clone())),
        ToolState::OutputError { error_text } => Some(match parse_denial(error_text) {
            Some(reason) => ResultContent::Denied { reason },
            None => ResultContent::Error(error_text.clone()),
        }),
        ToolState::OutputDenied(approval) => Some(ResultContent::Denied {
            reason: approval.as_ref().and_then(|a| a.reason.clone()),
        }),
        _ => None,
    };
    Some((call, result))
}

#[cfg(test)]
mod tests;
