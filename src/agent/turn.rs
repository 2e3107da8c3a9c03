//! One request's turn, as a stream of UI chunks. Dropping the stream (the
//! client went away) cancels the model call and the tools still running,
//! except a confirmed call, which finishes and records its outcome.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::{BoxStream, FuturesOrdered};
use serde_json::Value;

use super::Agent;
use super::blocks::Blocks;
use super::history::to_model_messages;
use crate::call::{MAX_ARGS_BYTES, MAX_CALLS_PER_STEP, ToolCall, denial_text};
use crate::confirm::{
    Answer, Answered, CONFIRMATION_TOOL, ClientOutput, NewCall, Scope, confirmation_input,
    with_handoff,
};
use crate::protocol::message::Approval;
use crate::protocol::{
    ChatRequest, ConfirmationFlow, ConfirmationProtocol, FinishReason, Part, Role, ToolPart,
    ToolState, UiChunk, UiMessage,
};
use crate::provider::{ModelRequest, ProviderEvent, StopReason};
use crate::store::Outcome;
use crate::tools::client::NO_RESULT;

/// A call the model is streaming.
struct Streaming {
    /// The id the provider gave it; `id` differs only when that one was taken.
    provider_id: String,
    id: String,
    name: String,
    args: String,
    /// Its arguments grew past [`MAX_ARGS_BYTES`]; the rest were dropped.
    too_large: bool,
    /// Its input streams to the client as it arrives.
    live: bool,
    /// What the provider needs back with the call.
    metadata: Option<Value>,
}

impl Agent {
    /// Runs one turn for `request` on behalf of `principal`; new
    /// confirmations are asked in `protocol`.
    pub fn turn(
        self: Arc<Self>,
        request: ChatRequest,
        principal: String,
        protocol: ConfirmationProtocol,
        flow: ConfirmationFlow,
        waiting: tokio::sync::watch::Sender<bool>,
    ) -> BoxStream<'static, UiChunk> {
        let agent = self;
        async_stream::stream! {
            let scope = Scope { chat_id: request.chat_id.clone(), principal };
            let mut history = request.messages;
            let continuing = history.last().is_some_and(|m| m.role == Role::Assistant);
            if !continuing {
                history.push(UiMessage { id: agent.ids.next("msg"), role: Role::Assistant, parts: Vec::new() });
            }
            let last = history.len() - 1;
            yield UiChunk::Start { message_id: Some(history[last].id.clone()), message_metadata: None };

            // What the client says its tools returned, judged before the model reads it.
            match Box::pin(judge_client_outputs(&agent.gate, &scope, &mut history, continuing)).await {
                Ok(chunks) => for chunk in chunks {
                    yield chunk;
                },
                Err(e) => {
                    yield gate_failed(&e);
                    return;
                }
            }

            if continuing {
                let (answers, open) = answers(&history[last]);
                // Answers first: an approval remembered there may settle an open question.
                let work = answers.into_iter().map(|a| Work::Answer(Box::new(a))).chain(open.into_iter().map(Work::Open));
                let mut unanswered = 0;
                // Approved calls of client-side tools handed to the client now.
                let mut handed = 0;
                for item in work {
                    let (confirmation_id, adk, echo, verdict) = match item {
                        Work::Answer(boxed) => {
                            let (answer, echo) = *boxed;
                            let adk = answer.protocol == ConfirmationProtocol::Adk;
                            // The gate's futures (a store's among them) are boxed: inline they
                            // would make every turn's state as large as the largest.
                            let verdict = Box::pin(agent.gate.check_answer(&scope, &answer)).await;
                            if let Ok(Answered::Rejected(why)) = &verdict {
                                // ADK: on the confirmation part; native: on the call's own part.
                                let part_id = match (&answer.original, adk) {
                                    (Some(original), false) => original.id.clone(),
                                    _ => answer.confirmation_id.clone(),
                                };
                                set_state(&mut history[last], &part_id, ToolState::OutputError { error_text: why.clone() });
                                yield UiChunk::tool_error(&part_id, why.clone());
                                continue;
                            }
                            (answer.confirmation_id, adk, echo, verdict)
                        }
                        Work::Open(open) => match Box::pin(agent.gate.settle(&scope, &open.confirmation_id)).await {
                            Ok(None) => {
                                unanswered += 1;
                                continue;
                            }
                                                        verdict => {
                                // What the confirmation's output becomes: settled by a
                                // remembered approval, or decided elsewhere.
                                let echo = match &verdict {
                                    Ok(Some(Answered::Recorded { outcome: Outcome::Denied { .. }, .. })) => serde_json::json!({"confirmed": false}),
                                    Ok(Some(Answered::Recorded { .. })) => serde_json::json!({"confirmed": true}),
                                    _ => serde_json::json!({"confirmed": true, "remembered": true}),
                                };
                                let echo = open.adk.then_some(echo);
                                (open.confirmation_id, open.adk, echo, verdict.map(|v| v.unwrap_or(Answered::Rejected(String::new()))))
                            }
                        },
                    };
                    let (call, outcome) = match verdict {
                        Err(e) => {
                            yield gate_failed(&e);
                            return;
                        }
                        Ok(Answered::Rejected(_)) => continue,
                        Ok(Answered::Client { call }) => {
                            // The part the question was asked on holds the provider's metadata.
                            let asked_on = if adk { confirmation_id.as_str() } else { call.id.as_str() };
                            let metadata = Some(with_handoff(part_metadata(&history[last], asked_on), &confirmation_id));
                            if adk && let Some(output) = echo {
                                yield UiChunk::tool_output(&confirmation_id, output);
                            }
                            for chunk in input_chunks(&call, adk) {
                                yield provider_executed(with_metadata(chunk, metadata.clone()), (!adk).then_some(false));
                            }
                            hand_to_client(&mut history[last], call, metadata);
                            handed += 1;
                            continue;
                        }
                        Ok(Answered::Recorded { call, outcome }) => (call, Ok(outcome)),
                        Ok(Answered::Running { call, outcome }) => (call, Err(outcome)),
                    };
                    if adk {
                        if let Some(output) = echo {
                            yield UiChunk::tool_output(&confirmation_id, output);
                        }
                        // Only a hand-off gives a client-side tool's call to `onToolCall`.
                        let kept = agent.gate.kept_from_client(&call.name).then_some(true);
                        for chunk in input_chunks(&call, true) {
                            yield provider_executed(chunk, kept);
                        }
                    }
                    let outcome = match outcome {
                        Ok(recorded) => recorded,
                        Err(running) => running.await,
                    };
                    let approval = (!adk).then_some(confirmation_id.as_str());
                    yield record(&mut history[last], call, &outcome, approval);
                }
                // The client answers its calls, and the user the questions, with the next request.
                if unanswered > 0 || handed > 0 {
                    yield UiChunk::finish(FinishReason::ToolCalls);
                    return;
                }
            }

            let tools = agent.gate.specs();
            // Every toolCallId in the message: the client rejects a message with two parts of one id.
            let mut taken: HashSet<String> = history[last]
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Tool(t) => Some(t.tool_call_id.clone()),
                    _ => None,
                })
                .collect();
            for _ in 0..agent.max_steps {
                yield UiChunk::StartStep;
                history[last].parts.push(Part::StepStart);
                let request = ModelRequest { messages: to_model_messages(&history), tools: tools.clone() };
                let mut events = agent.provider.stream(request);
                let mut blocks = Blocks::new(agent.ids.clone());
                let mut out = Vec::new();
                let mut calls: Vec<Streaming> = Vec::new();
                let mut stop = StopReason::Stop;
                while let Some(event) = events.next().await {
                    // A model that is always ready must not hold the worker thread.
                    tokio::task::coop::consume_budget().await;
                    let parts = &mut history[last].parts;
                    match event {
                        Err(e) => {
                            yield UiChunk::Error { error_text: e.to_string() };
                            return;
                        }
                        Ok(ProviderEvent::TextDelta(delta)) => blocks.text(delta, &mut out, parts),
                        Ok(ProviderEvent::ReasoningDelta(delta)) => blocks.reasoning(delta, &mut out, parts),
                        Ok(ProviderEvent::ReasoningMetadata(metadata)) => blocks.reasoning_end(metadata, &mut out, parts),
                        Ok(ProviderEvent::ToolCallStart { id: provider_id, name, metadata }) => {
                            blocks.close(&mut out, parts);
                            if calls.len() == MAX_CALLS_PER_STEP {
                                yield UiChunk::Error { error_text: format!("the model made more than {MAX_CALLS_PER_STEP} tool calls in one step") };
                                return;
                            }
                            let id = if taken.contains(&provider_id) { agent.ids.next("call") } else { provider_id.clone() };
                            taken.insert(id.clone());
                            // With ADK confirmations a call that may ask is held back: its
                            // own part must not appear before it is allowed to run.
                            let live = protocol == ConfirmationProtocol::AiSdk || !agent.gate.may_ask(&name);
                            if live {
                                out.push(UiChunk::tool_input_start(&id, &name));
                            }
                            calls.push(Streaming { provider_id, id, name, args: String::new(), too_large: false, live, metadata });
                        }
                        Ok(ProviderEvent::ToolCallDelta { id, delta }) => {
                            let Some(call) = calls.iter_mut().rev().find(|c| c.provider_id == id) else {
                                yield UiChunk::Error { error_text: format!("model sent arguments for an unknown call `{id}`") };
                                return;
                            };
                            if call.too_large || call.args.len() + delta.len() > MAX_ARGS_BYTES {
                                call.too_large = true;
                                continue;
                            }
                            call.args.push_str(&delta);
                            if call.live {
                                out.push(UiChunk::ToolInputDelta { tool_call_id: call.id.clone(), input_text_delta: delta });
                            }
                        }
                        Ok(ProviderEvent::ToolCallEnd { .. }) => {}
                        Ok(ProviderEvent::Finish { reason, .. }) => stop = reason,
                    }
                    for chunk in out.drain(..) {
                        yield chunk;
                    }
                }
                blocks.close(&mut out, &mut history[last].parts);
                for chunk in out.drain(..) {
                    yield chunk;
                }

                                // Every call through the gate, in the order the model made them.
                let mut asked = false;
                // A call was handed to the client: its result comes with the next request.
                let mut handed = false;
                // The questions this step asked: (confirmation id, asked the ADK way).
                let mut questions: Vec<(String, bool)> = Vec::new();
                let mut permits = Vec::new();
                let had_calls = !calls.is_empty();
                for streaming in calls {
                    let parsed = match streaming.too_large {
                        true => Err(format!("tool call arguments exceed {MAX_ARGS_BYTES} bytes")),
                        false => parse_args(&streaming.args),
                    };
                    let args = match parsed {
                        Ok(args) => args,
                        Err(why) => {
                            yield UiChunk::ToolInputError {
                                tool_call_id: streaming.id.clone(),
                                tool_name: streaming.name.clone(),
                                input: Value::String(streaming.args.clone()),
                                error_text: why.clone(),
                                extras: Default::default(),
                            };
                                                                                    set_metadata(&mut history[last], &streaming.id, streaming.metadata);
                            let call = ToolCall { id: streaming.id, name: streaming.name, args: Value::String(streaming.args) };
                            record(&mut history[last], call, &Outcome::Error { message: why, ran_with: None }, None);
                            continue;
                        }
                    };
                    let call = ToolCall { id: streaming.id, name: streaming.name, args };
                    match Box::pin(agent.gate.check_new(&scope, call.clone(), protocol)).await {
                        Err(e) => {
                            yield gate_failed(&e);
                            return;
                        }
                                                Ok(NewCall::Run(permit)) => {
                            for chunk in input_chunks(&call, !streaming.live) {
                                yield with_metadata(chunk, streaming.metadata.clone());
                            }
                            permits.push((permit, streaming.metadata));
                        }
                        Ok(NewCall::Client { call, handoff }) => {
                            let metadata = Some(with_handoff(streaming.metadata, &handoff));
                            for chunk in input_chunks(&call, !streaming.live) {
                                yield with_metadata(chunk, metadata.clone());
                            }
                            hand_to_client(&mut history[last], call, metadata);
                            handed = true;
                        }
                                                Ok(NewCall::Ask(issued)) => {
                            asked = true;
                            questions.push((issued.id.clone(), protocol == ConfirmationProtocol::Adk));
                                                        let seal = agent.gate.seal(&issued).map(|seal| seal.to_metadata());
                            let metadata = merge(seal, streaming.metadata);
                            match protocol {
                                ConfirmationProtocol::Adk => {
                                    let input = confirmation_input(&issued);
                                    yield UiChunk::tool_input_start(&issued.id, CONFIRMATION_TOOL);
                                                                        yield with_metadata(UiChunk::tool_input_available(&issued.id, CONFIRMATION_TOOL, input.clone()), metadata.clone());
                                    taken.insert(issued.id.clone());
                                    history[last].parts.push(tool_part(issued.id, CONFIRMATION_TOOL.to_owned(), input, ToolState::InputAvailable, metadata));
                                }
                                ConfirmationProtocol::AiSdk => {
                                    // A client-side tool's call is the server's to hold until
                                    // approved: `onToolCall` skips what is provider-executed.
                                    let held = agent.gate.runs_on_client(&call.name);
                                    for chunk in input_chunks(&call, !streaming.live) {
                                        yield provider_executed(with_metadata(chunk, metadata.clone()), held.then_some(true));
                                    }
                                    yield UiChunk::ToolApprovalRequest { approval_id: issued.id.clone(), tool_call_id: call.id.clone() };
                                    let state = ToolState::ApprovalRequested { approval_id: issued.id };
                                                                        history[last].parts.push(tool_part(call.id, call.name, call.args, state, metadata));
                                }
                            }
                        }
                                                Ok(NewCall::Refused(why)) => {
                            // A refused call runs nowhere: `onToolCall` skips what is provider-executed.
                            for chunk in input_chunks(&call, !streaming.live) {
                                yield provider_executed(with_metadata(chunk, streaming.metadata.clone()), Some(true));
                            }
                                                        set_metadata(&mut history[last], &call.id, streaming.metadata);
                            yield record(&mut history[last], call, &Outcome::Error { message: why, ran_with: None }, None);
                        }
                    }
                }

                // Calls that need no confirmation run together; results stream in call order.
                let mut running: FuturesOrdered<_> = permits
                    .into_iter()
                                        .map(|(permit, metadata)| {
                        let call = permit.call().clone();
                        let gate = &agent.gate;
                        let chat_id = scope.chat_id.as_str();
                        async move { (call, metadata, gate.run(permit, chat_id).await) }
                    })
                    .collect();
                while let Some((call, metadata, outcome)) = running.next().await {
                                        set_metadata(&mut history[last], &call.id, metadata);
                    yield record(&mut history[last], call, &outcome, None);
                }
                                drop(running);

                // Held: each question is decided elsewhere, or times out, and the model goes on.
                if flow == ConfirmationFlow::Hold {
                    for (confirmation_id, adk) in questions.drain(..) {
                                                // Held: whoever reads this turn may leave; it stays for the answer.
                        waiting.send_replace(true);
                        let held = Box::pin(agent.gate.hold(&scope, &confirmation_id)).await;
                        waiting.send_replace(false);
                        let (call, outcome) = match held {
                            Ok(decided) => decided,
                            Err(e) => {
                                yield gate_failed(&e);
                                return;
                            }
                        };
                        if let Outcome::HandedOff { .. } = outcome {
                            let asked_on = if adk { confirmation_id.as_str() } else { call.id.as_str() };
                            let metadata = Some(with_handoff(part_metadata(&history[last], asked_on), &confirmation_id));
                            if adk {
                                let echo = serde_json::json!({"confirmed": true});
                                set_state(&mut history[last], &confirmation_id, ToolState::OutputAvailable { output: echo.clone(), preliminary: false });
                                yield UiChunk::tool_output(&confirmation_id, echo);
                            }
                            for chunk in input_chunks(&call, adk) {
                                yield provider_executed(with_metadata(chunk, metadata.clone()), (!adk).then_some(false));
                            }
                            hand_to_client(&mut history[last], call, metadata);
                            handed = true;
                            continue;
                        }
                        if adk {
                            let echo = serde_json::json!({"confirmed": !matches!(outcome, Outcome::Denied { .. })});
                            set_state(&mut history[last], &confirmation_id, ToolState::OutputAvailable { output: echo.clone(), preliminary: false });
                            yield UiChunk::tool_output(&confirmation_id, echo);
                            let kept = agent.gate.kept_from_client(&call.name).then_some(true);
                            for chunk in input_chunks(&call, true) {
                                yield provider_executed(chunk, kept);
                            }
                        }
                        let approval = (!adk).then_some(confirmation_id.as_str());
                        yield record(&mut history[last], call, &outcome, approval);
                    }
                    asked = false;
                }

                yield UiChunk::FinishStep;
                if asked || handed {
                    yield UiChunk::finish(FinishReason::ToolCalls);
                    return;
                }
                if !had_calls {
                    yield UiChunk::finish(finish_reason(stop));
                    return;
                }
            }
            // Out of steps with tool results the model has not seen yet.
            yield UiChunk::finish(FinishReason::ToolCalls);
        }
        .boxed()
    }
}

/// The answered confirmations in the continued message (with the ADK output
/// to echo back), and the questions still open.
fn answers(message: &UiMessage) -> (Vec<(Answer, Option<Value>)>, Vec<Open>) {
    let resolved: HashSet<&str> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Tool(t) if t.tool_name != CONFIRMATION_TOOL && t.is_resolved() => {
                Some(t.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    let mut answers = Vec::new();
    let mut open = Vec::new();
    for part in &message.parts {
        let Part::Tool(tool) = part else { continue };
        if Answer::is_pending(tool) {
            let confirmation_id = match &tool.state {
                ToolState::ApprovalRequested { approval_id } => approval_id.clone(),
                _ => tool.tool_call_id.clone(),
            };
            open.push(Open {
                confirmation_id,
                adk: tool.tool_name == CONFIRMATION_TOOL,
            });
            continue;
        }
        let answer = match Answer::from_part(tool) {
            Ok(Some(answer)) => answer,
            Ok(None) => continue,
            // The request's parser refused these already; nothing runs on one.
            Err(e) => {
                tracing::warn!(part = %tool.tool_call_id, "malformed answer ignored: {e}");
                continue;
            }
        };
        // An ADK answer whose original call already has its result was handled.
        let handled = answer.protocol == ConfirmationProtocol::Adk
            && answer
                .original
                .as_ref()
                .is_some_and(|o| resolved.contains(o.id.as_str()));
        if handled {
            continue;
        }
        let echo = match &tool.state {
            ToolState::OutputAvailable { output, .. } if tool.tool_name == CONFIRMATION_TOOL => {
                Some(output.clone())
            }
            _ => None,
        };
        answers.push((answer, echo));
    }
    (answers, open)
}

/// A question in the continued message that nobody answered yet.
struct Open {
    confirmation_id: String,
    adk: bool,
}

/// What a continuation works through, in order.
enum Work {
    Answer(Box<(Answer, Option<Value>)>),
    Open(Open),
}

/// The stream's end when the gate failed: a fixed text for the client, the
/// detail for the log.
fn gate_failed(e: &crate::confirm::GateError) -> UiChunk {
    tracing::error!("the gate failed: {}", e.detail());
    UiChunk::Error {
        error_text: e.to_string(),
    }
}

fn parse_args(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| format!("invalid JSON arguments: {e}"))
}

/// `tool-input-start` (unless it already streamed) and `tool-input-available`.
fn input_chunks(call: &ToolCall, with_start: bool) -> impl Iterator<Item = UiChunk> {
    let start = with_start.then(|| UiChunk::tool_input_start(&call.id, &call.name));
    start
        .into_iter()
        .chain(std::iter::once(UiChunk::tool_input_available(
            &call.id,
            &call.name,
            call.args.clone(),
        )))
}

/// Gives the call's part its final state and returns the chunk that says so.
/// A denial answered natively (`approval` is its id) is `tool-output-denied`;
/// otherwise it is an error the user can read.
fn record(
    message: &mut UiMessage,
    call: ToolCall,
    outcome: &Outcome,
    approval: Option<&str>,
) -> UiChunk {
    let (chunk, state) = match (outcome, approval) {
        (Outcome::Output { output, .. }, _) => (
            UiChunk::tool_output(&call.id, output.clone()),
            ToolState::OutputAvailable {
                output: output.clone(),
                preliminary: false,
            },
        ),
        (Outcome::Error { message, .. }, _) => (
            UiChunk::tool_error(&call.id, message.clone()),
            ToolState::OutputError {
                error_text: message.clone(),
            },
        ),
        (Outcome::Denied { reason }, Some(approval_id)) => (
            UiChunk::ToolOutputDenied {
                tool_call_id: call.id.clone(),
            },
            ToolState::OutputDenied(Some(Approval {
                id: approval_id.to_owned(),
                approved: Some(false),
                reason: reason.clone(),
            })),
        ),
        (Outcome::Denied { reason }, None) => {
            let text = denial_text(reason.as_deref());
            (
                UiChunk::tool_error(&call.id, text.clone()),
                ToolState::OutputError { error_text: text },
            )
        }
        // Handed out before (a replayed answer), and the client sent no result.
        (Outcome::HandedOff { .. }, _) => (
            UiChunk::tool_error(&call.id, NO_RESULT.to_owned()),
            ToolState::OutputError {
                error_text: NO_RESULT.to_owned(),
            },
        ),
    };
    // A part the client holds under this id gets the real call and outcome.
    let held = message.parts.iter_mut().find_map(|p| match p {
        Part::Tool(t) if t.tool_call_id == call.id => Some(t),
        _ => None,
    });
    match held {
        Some(part) => {
            part.tool_name = call.name;
            part.input = call.args;
            part.state = state;
        }
        None => message
            .parts
            .push(tool_part(call.id, call.name, call.args, state, None)),
    }
    chunk
}

/// Replaces every result of a client-side tool the gate does not take with
/// its error; the chunks that tell the client so, for the continued message
/// (the only one whose parts can still change).
async fn judge_client_outputs(
    gate: &crate::confirm::Gate,
    scope: &Scope,
    history: &mut [UiMessage],
    continuing: bool,
) -> Result<Vec<UiChunk>, crate::confirm::GateError> {
    let last = history.len().saturating_sub(1);
    let mut chunks = Vec::new();
    for (index, message) in history.iter_mut().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        for part in &mut message.parts {
            let Part::Tool(part) = part else { continue };
            if let ClientOutput::Rejected(why) = gate.check_client_output(scope, part).await? {
                if continuing && index == last {
                    chunks.push(UiChunk::tool_error(&part.tool_call_id, why.clone()));
                }
                part.state = ToolState::OutputError { error_text: why };
            }
        }
    }
    Ok(chunks)
}

/// Gives a call handed to the client its part, waiting for the client's result.
fn hand_to_client(message: &mut UiMessage, call: ToolCall, metadata: Option<Value>) {
    let held = message.parts.iter_mut().find_map(|p| match p {
        Part::Tool(t) if t.tool_call_id == call.id => Some(t),
        _ => None,
    });
    match held {
        Some(part) => {
            part.tool_name = call.name;
            part.input = call.args;
            part.state = ToolState::InputAvailable;
            part.call_provider_metadata = metadata;
        }
        None => message.parts.push(tool_part(
            call.id,
            call.name,
            call.args,
            ToolState::InputAvailable,
            metadata,
        )),
    }
}

/// The `callProviderMetadata` of the tool part `id`, if any.
fn part_metadata(message: &UiMessage, id: &str) -> Option<Value> {
    message.parts.iter().find_map(|p| match p {
        Part::Tool(t) if t.tool_call_id == id => t.call_provider_metadata.clone(),
        _ => None,
    })
}

/// Starts the part of call `id` (which [`record`] then completes) with the
/// metadata its provider needs back.
fn set_metadata(message: &mut UiMessage, id: &str, metadata: Option<Value>) {
    if metadata.is_some() {
        let part = tool_part(
            id.to_owned(),
            String::new(),
            Value::Null,
            ToolState::InputAvailable,
            metadata,
        );
        message.parts.push(part);
    }
}

/// Both providers' metadata in one object (`{"toolgate": …, "google": …}`).
fn merge(a: Option<Value>, b: Option<Value>) -> Option<Value> {
    match (a, b) {
        (Some(Value::Object(mut a)), Some(Value::Object(b))) => {
            a.extend(b);
            Some(Value::Object(a))
        }
        (a, b) => a.or(b),
    }
}

/// Sets the state of the tool part `id`, if there is one.
fn set_state(message: &mut UiMessage, id: &str, state: ToolState) {
    for part in &mut message.parts {
        if let Part::Tool(tool) = part
            && tool.tool_call_id == id
        {
            tool.state = state;
            return;
        }
    }
}

/// Marks a `tool-input-available` chunk provider-executed, so that the
/// client's `onToolCall` skips it (or not, for a call the server held back
/// until now and hands to the client).
fn provider_executed(mut chunk: UiChunk, value: Option<bool>) -> UiChunk {
    if let UiChunk::ToolInputAvailable { extras, .. } = &mut chunk {
        extras.provider_executed = value;
    }
    chunk
}

/// Puts `metadata` on a `tool-input-available` chunk; the client returns it
/// as the part's `callProviderMetadata`.
fn with_metadata(mut chunk: UiChunk, metadata: Option<Value>) -> UiChunk {
    if let UiChunk::ToolInputAvailable { extras, .. } = &mut chunk
        && metadata.is_some()
    {
        extras.provider_metadata = merge(extras.provider_metadata.take(), metadata);
    }
    chunk
}

fn tool_part(
    tool_call_id: String,
    tool_name: String,
    input: Value,
    state: ToolState,
    call_provider_metadata: Option<Value>,
) -> Part {
    Part::Tool(ToolPart {
        tool_call_id,
        tool_name,
        dynamic: false,
        input,
        state,
        provider_executed: false,
        call_provider_metadata,
    })
}

fn finish_reason(stop: StopReason) -> FinishReason {
    match stop {
        StopReason::Stop => FinishReason::Stop,
        StopReason::Length => FinishReason::Length,
        StopReason::ContentFilter => FinishReason::ContentFilter,
        StopReason::ToolCalls => FinishReason::ToolCalls,
        StopReason::Other => FinishReason::Other,
    }
}
