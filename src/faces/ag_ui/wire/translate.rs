//! A turn's UI chunks, as the turn writes them, in AG-UI's events:
//! [`Translator`], one per run, and the messages those events make.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{DENIED, TURN_ERROR, run_error};
use crate::protocol::UiChunk;
use crate::protocol::sse::Delta;

/// How a turn ended, as far as its chunks said.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// It finished (or its chunks just stopped).
    Finished,
    /// An `error` chunk: `RUN_ERROR` was said already.
    Failed,
    /// Stopped (`abort`).
    Aborted,
}

/// What a run's translation ends with: what its last events need.
#[derive(Debug)]
pub struct Tail {
    /// The questions the turn asked, `(question id, tool call id)`.
    pub asked: Vec<(String, String)>,
    /// The messages the run made, as a client applying its events holds them.
    pub messages: Vec<Value>,
    pub ended: Ended,
}

/// One run's translation of a turn's UI chunks into AG-UI events, and the
/// messages they make (for `MESSAGES_SNAPSHOT`).
#[derive(Debug)]
pub struct Translator {
    run_id: String,
    /// The messages this run made, as a client applying its events holds them.
    messages: Vec<Value>,
    /// Where each open text or reasoning block's message is.
    blocks: HashMap<String, usize>,
    /// The assistant message this step's tool calls join (its text's, or
    /// the first call's), until a result or a new step.
    step: Option<usize>,
    /// Where each tool call is (its message, its place in `toolCalls`),
    /// and whether its arguments streamed.
    calls: HashMap<String, (usize, usize, bool)>,
    /// The questions asked, `(question id, tool call id)`, in order.
    asked: Vec<(String, String)>,
    ended: Ended,
}

impl Translator {
    pub fn new(run_id: &str) -> Self {
        Self {
            run_id: run_id.to_owned(),
            messages: Vec::new(),
            blocks: HashMap::new(),
            step: None,
            calls: HashMap::new(),
            asked: Vec::new(),
            ended: Ended::Finished,
        }
    }

    /// What the run's last events need, taken at its end.
    pub fn tail(&mut self) -> Tail {
        Tail {
            asked: std::mem::take(&mut self.asked),
            messages: std::mem::take(&mut self.messages),
            ended: self.ended.clone(),
        }
    }

    /// A block's message id: the run's, so ids never meet across runs.
    fn message_id(&self, block: &str) -> String {
        format!("{}.{block}", self.run_id)
    }

    /// The AG-UI events of one UI chunk; none for a chunk AG-UI has no
    /// words for, nor after the run failed (its `RUN_ERROR` was its last).
    pub fn on_chunk(&mut self, chunk: &UiChunk) -> Vec<Value> {
        if self.ended == Ended::Failed {
            return Vec::new();
        }
        match chunk {
            UiChunk::TextStart { id, .. } => {
                let message_id = self.message_id(id);
                self.step = Some(self.messages.len());
                self.open_block(
                    id,
                    json!({"id": message_id, "role": "assistant", "content": ""}),
                );
                vec![
                    json!({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}),
                ]
            }
            UiChunk::TextDelta { id, delta, .. } => self.on_delta(Delta::Text, id, delta),
            UiChunk::ReasoningDelta { id, delta, .. } => self.on_delta(Delta::Reasoning, id, delta),
            UiChunk::TextEnd { id, .. } => match self.blocks.remove(&**id) {
                Some(_) => {
                    vec![json!({"type": "TEXT_MESSAGE_END", "messageId": self.message_id(id)})]
                }
                None => Vec::new(),
            },
            UiChunk::ReasoningStart { id, .. } => {
                let message_id = self.message_id(id);
                self.open_block(
                    id,
                    json!({"id": message_id, "role": "reasoning", "content": ""}),
                );
                vec![
                    json!({"type": "REASONING_START", "messageId": message_id}),
                    json!({"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"}),
                ]
            }
            UiChunk::ReasoningEnd { id, .. } => match self.blocks.remove(&**id) {
                Some(_) => {
                    let message_id = self.message_id(id);
                    vec![
                        json!({"type": "REASONING_MESSAGE_END", "messageId": message_id}),
                        json!({"type": "REASONING_END", "messageId": message_id}),
                    ]
                }
                None => Vec::new(),
            },
            UiChunk::ToolInputStart {
                tool_call_id,
                tool_name,
                ..
            } => self.start_call(tool_call_id, tool_name),
            UiChunk::ToolInputDelta {
                tool_call_id,
                input_text_delta,
            } => {
                let Some((at, k, streamed)) = self.calls.get_mut(tool_call_id) else {
                    return Vec::new();
                };
                *streamed = true;
                if let Some(args) = arguments(&mut self.messages[*at], *k) {
                    args.push_str(input_text_delta);
                }
                vec![
                    json!({"type": "TOOL_CALL_ARGS", "toolCallId": tool_call_id, "delta": input_text_delta}),
                ]
            }
            UiChunk::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
                ..
            } => self.end_call(tool_call_id, tool_name, input),
            UiChunk::ToolInputError {
                tool_call_id,
                tool_name,
                input,
                error_text,
                ..
            } => {
                let mut events = self.end_call(tool_call_id, tool_name, input);
                events.push(self.result(tool_call_id, error_text.clone()));
                events
            }
            UiChunk::ToolApprovalRequest {
                approval_id,
                tool_call_id,
            } => {
                self.asked.push((approval_id.clone(), tool_call_id.clone()));
                Vec::new()
            }
            UiChunk::ToolOutputAvailable {
                preliminary: Some(true),
                ..
            } => Vec::new(),
            UiChunk::ToolOutputAvailable {
                tool_call_id,
                output,
                ..
            } => {
                let content = match &**output {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                vec![self.result(tool_call_id, content)]
            }
            UiChunk::ToolOutputError {
                tool_call_id,
                error_text,
                ..
            } => vec![self.result(tool_call_id, error_text.clone())],
            UiChunk::ToolOutputDenied { tool_call_id } => {
                vec![self.result(tool_call_id, DENIED.to_owned())]
            }
            UiChunk::Error { error_text } => {
                self.ended = Ended::Failed;
                vec![run_error(TURN_ERROR, error_text)]
            }
            UiChunk::Abort { .. } => {
                self.ended = Ended::Aborted;
                Vec::new()
            }
            UiChunk::StartStep => {
                self.step = None;
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The AG-UI event of a text or reasoning delta of block `id`: none
    /// for a block not open, or a delta that says nothing.
    pub fn on_delta(&mut self, kind: Delta, id: &str, delta: &str) -> Vec<Value> {
        if self.ended == Ended::Failed {
            return Vec::new();
        }
        let Some(message_id) = self.append(id, delta) else {
            return Vec::new();
        };
        let kind = match kind {
            Delta::Text => "TEXT_MESSAGE_CONTENT",
            Delta::Reasoning => "REASONING_MESSAGE_CONTENT",
        };
        vec![json!({"type": kind, "messageId": message_id, "delta": delta})]
    }

    fn open_block(&mut self, id: &str, message: Value) {
        self.blocks.insert(id.to_owned(), self.messages.len());
        self.messages.push(message);
    }

    /// Appends `delta` to block `id`'s message: its id, if the block is open
    /// and the delta says something.
    fn append(&mut self, id: &str, delta: &str) -> Option<String> {
        let at = *self.blocks.get(id)?;
        if delta.is_empty() {
            return None;
        }
        if let Some(Value::String(content)) = self.messages[at].get_mut("content") {
            content.push_str(delta);
        }
        Some(self.message_id(id))
    }

    /// A call's start, on the assistant message of its step (`parentMessageId`,
    /// the message a client applying the events puts it in): the step's
    /// text, an earlier call's, or a new one named by the call's id.
    fn start_call(&mut self, id: &str, name: &str) -> Vec<Value> {
        if self.calls.contains_key(id) {
            return Vec::new();
        }
        let at = *self.step.get_or_insert_with(|| {
            self.messages
                .push(json!({"id": id, "role": "assistant", "toolCalls": []}));
            self.messages.len() - 1
        });
        let call =
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": ""}});
        let message = &mut self.messages[at];
        let k = match message
            .as_object_mut()
            .map(|m| m.entry("toolCalls").or_insert_with(|| json!([])))
        {
            Some(Value::Array(calls)) => {
                calls.push(call);
                calls.len() - 1
            }
            _ => 0,
        };
        let parent = message["id"].clone();
        self.calls.insert(id.to_owned(), (at, k, false));
        vec![
            json!({"type": "TOOL_CALL_START", "toolCallId": id, "toolCallName": name, "parentMessageId": parent}),
        ]
    }

    /// The call's end: its start and its whole arguments first if they were
    /// not streamed.
    fn end_call(&mut self, id: &str, name: &str, input: &Value) -> Vec<Value> {
        let mut events = self.start_call(id, name);
        let Some((at, k, streamed)) = self.calls.get(id).copied() else {
            return events;
        };
        if !streamed {
            let args = input.to_string();
            if let Some(slot) = arguments(&mut self.messages[at], k) {
                slot.clone_from(&args);
            }
            events.push(json!({"type": "TOOL_CALL_ARGS", "toolCallId": id, "delta": args}));
        }
        events.push(json!({"type": "TOOL_CALL_END", "toolCallId": id}));
        events
    }

    /// `TOOL_CALL_RESULT` on the call's own id, as a tool message.
    fn result(&mut self, tool_call_id: &str, content: String) -> Value {
        self.step = None;
        let message_id = self.message_id(&format!("result.{tool_call_id}"));
        self.messages.push(json!({"id": message_id, "role": "tool", "toolCallId": tool_call_id, "content": content}));
        json!({"type": "TOOL_CALL_RESULT", "messageId": message_id, "toolCallId": tool_call_id, "content": content, "role": "tool"})
    }
}

/// The arguments of a message's `k`th tool call.
fn arguments(message: &mut Value, k: usize) -> Option<&mut String> {
    match message
        .get_mut("toolCalls")?
        .get_mut(k)?
        .get_mut("function")?
        .get_mut("arguments")?
    {
        Value::String(args) => Some(args),
        _ => None,
    }
}
