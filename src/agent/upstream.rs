//! A turn in front of an ADK agent (`model.provider: adk`): ADK runs the
//! model and the tools. The turn sends it the user's new message, or the
//! answers the gate took to its questions, and shows what the agent did.
//!
//! Nothing else of the (untrusted) history reaches ADK: ADK keeps the
//! conversation itself, and would take a client's made-up result for a
//! gated call as the tool's. Its questions pass the gate as the model's
//! calls do (the policy first, then the user), and an answer reaches ADK
//! only once the gate took it; from then on the request to ADK runs on
//! the gate's tracked tasks to its end, so a client that hangs up cannot
//! lose an approval it gave.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::answers::{Open, answers};
use super::encode::TurnEncoder;
use super::event::AgentEvent;
use super::{Agent, card_settled};
use crate::call::ToolCall;
use crate::confirm::{
    Answer, Answered, CONFIRMATION_TOOL, Decision, Gate, GateError, NewCall, Question, Scope,
};
use crate::protocol::{
    ChatRequest, ConfirmationFlow, ConfirmationProtocol, FinishReason, Part, Role, UiChunk,
    UiMessage,
};
use crate::provider::ProviderError;
use crate::provider::UserContent;
use crate::provider::adk::{Adk, AdkEvent, Confirmation, Message, Reply};
use crate::store::Outcome;

/// ADK's events as the turn reads them.
type Events = BoxStream<'static, Result<AdkEvent, ProviderError>>;

/// Events buffered between a kept request to ADK and the turn reading it.
const KEPT: usize = 64;

/// Runs one turn against `adk` for `request` on behalf of `principal`.
pub(super) fn turn(
    agent: Arc<Agent>,
    adk: Arc<Adk>,
    request: ChatRequest,
    principal: String,
    protocol: ConfirmationProtocol,
    flow: ConfirmationFlow,
    waiting: tokio::sync::watch::Sender<bool>,
) -> BoxStream<'static, UiChunk> {
    async_stream::stream! {
        let mut turn = Upstream::new(agent, request, principal, protocol);
        let mut out = Vec::new();
        turn.emit(AgentEvent::Start, &mut out);
        for chunk in out.drain(..) {
            yield chunk;
        }
        let session = match turn.agent_session(&adk).await {
            Ok(session) => session,
            Err(e) => {
                turn.emit(AgentEvent::Error(e.to_string()), &mut out);
                for chunk in out.drain(..) {
                    yield chunk;
                }
                return;
            }
        };
        let first = match turn.first_message(&adk, &session, &mut out).await {
            Ok(first) => first,
            Err(e) => {
                tracing::error!("the gate failed: {}", e.detail());
                turn.emit(AgentEvent::Error(e.to_string()), &mut out);
                None
            }
        };
        for chunk in out.drain(..) {
            yield chunk;
        }
        let Some(first) = first else {
            if !turn.failed {
                let reason = turn.finish_reason();
                turn.emit(AgentEvent::Finish(reason), &mut out);
                for chunk in out.drain(..) {
                    yield chunk;
                }
            }
            return;
        };
        let max = turn.agent.max_steps.max(1);
        let (mut message, mut started) = match first {
            First::Send(message) => (message, None),
            First::Started(events) => (Message::Replies(Vec::new()), Some(events)),
        };
        for round in 1..=max {
            let events = match started.take() {
                Some(events) => events,
                None => turn.send(&adk, &session, &message),
            };
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                turn.on_event(event, &mut out).await;
                for chunk in out.drain(..) {
                    yield chunk;
                }
                if turn.failed {
                    return;
                }
            }
            turn.calls_without_result(&mut out);
            if flow == ConfirmationFlow::Hold && !turn.asked.is_empty() {
                // Whoever reads this turn may leave; it stays for the answers.
                waiting.send_replace(true);
                let held = turn.hold(&mut out).await;
                waiting.send_replace(false);
                if let Err(e) = held {
                    tracing::error!("the gate failed: {}", e.detail());
                    turn.emit(AgentEvent::Error(e.to_string()), &mut out);
                    turn.failed = true;
                }
            }
            for chunk in out.drain(..) {
                yield chunk;
            }
            if turn.failed {
                return;
            }
            match std::mem::take(&mut turn.replies) {
                replies if replies.is_empty() => break,
                replies => message = Message::Replies(replies),
            }
            if round == max {
                // Out of rounds: the answers taken still reach ADK, unread.
                drop(turn.send(&adk, &session, &message));
            }
        }
        if turn.step_open {
            turn.emit(AgentEvent::StepFinish, &mut out);
        }
        let reason = turn.finish_reason();
        turn.emit(AgentEvent::Finish(reason), &mut out);
        for chunk in out.drain(..) {
            yield chunk;
        }
    }
    .boxed()
}

/// What the turn knows while it reads ADK.
struct Upstream {
    agent: Arc<Agent>,
    scope: Scope,
    protocol: ConfirmationProtocol,
    history: Vec<UiMessage>,
    continuing: bool,
    encoder: TurnEncoder,
    step_open: bool,
    /// Calls ADK's model made whose fate is not known yet: run, or asked about.
    pending: Vec<ToolCall>,
    /// Approved calls whose result ADK sends next, with the native approval
    /// they answer.
    approved: HashMap<String, (ToolCall, Option<String>)>,
    /// Calls whose outcome the turn has shown already (a denial): ADK's
    /// own words for it are not shown again.
    decided: HashSet<String>,
    /// Answers for ADK's next request.
    replies: Vec<Reply>,
    /// Questions waiting for a human, asked in this turn.
    asked: Vec<String>,
    /// Questions of the continued message nobody answered yet.
    unanswered: usize,
    failed: bool,
}

impl Upstream {
    fn new(
        agent: Arc<Agent>,
        request: ChatRequest,
        principal: String,
        protocol: ConfirmationProtocol,
    ) -> Self {
        let scope = Scope {
            chat_id: request.chat_id,
            principal,
        };
        let (history, continuing) = super::outgoing(&agent.ids, request.messages);
        Self {
            encoder: TurnEncoder::new(agent.ids.clone(), agent.denied_as),
            agent,
            scope,
            protocol,
            history,
            continuing,
            step_open: false,
            pending: Vec::new(),
            approved: HashMap::new(),
            decided: HashSet::new(),
            replies: Vec::new(),
            asked: Vec::new(),
            unanswered: 0,
            failed: false,
        }
    }

    fn gate(&self) -> &Gate {
        &self.agent.gate
    }

    fn emit(&mut self, event: AgentEvent, out: &mut Vec<UiChunk>) {
        if matches!(event, AgentEvent::Error(_)) {
            self.failed = true;
        }
        let message = self.history.len() - 1;
        self.encoder
            .on_event(event, &mut self.history[message], out);
    }

    fn finish_reason(&self) -> FinishReason {
        match self.asked.is_empty() && self.unanswered == 0 {
            true => FinishReason::Stop,
            false => FinishReason::ToolCalls,
        }
    }

    async fn agent_session(&self, adk: &Adk) -> Result<String, ProviderError> {
        adk.session(&self.scope.principal, &self.scope.chat_id)
            .await
    }

    /// What ADK gets first: the user's new message, or the answers the gate
    /// took from the continued one, already on their way (`None`: nothing
    /// to send).
    async fn first_message(
        &mut self,
        adk: &Arc<Adk>,
        session: &str,
        out: &mut Vec<UiChunk>,
    ) -> Result<Option<First>, GateError> {
        if !self.continuing {
            let contents = self.history.iter().rev().find(|m| m.role == Role::User);
            let contents: Vec<UserContent> = contents
                .map(|m| m.parts.iter().filter_map(user_content).collect())
                .unwrap_or_default();
            if contents.is_empty() {
                self.emit(AgentEvent::Error(NOTHING_TO_SAY.to_owned()), out);
                return Ok(None);
            }
            return Ok(Some(First::Send(Message::User(contents))));
        }
        if self.forged_results(out).await? {
            return Ok(None);
        }
        let (answered, open) = answers(&self.history[self.history.len() - 1]);
        // From the first claim until ADK has the answers, nothing waits on
        // the client: one tracked task takes them all and starts the request.
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let work = take_answers(
            self.gate().clone(),
            self.scope.clone(),
            answered,
            open,
            adk.clone(),
            session.to_owned(),
        );
        self.gate().keep(async move {
            let _ = sender.send(work.await);
        });
        let taken = receiver
            .await
            .map_err(|_| GateError::Task("the answers' task ended without a word".into()))??;
        for (tool_call_id, error_text) in taken.rejected {
            let event = AgentEvent::Rejected {
                tool_call_id,
                error_text,
            };
            self.emit(event, out);
        }
        self.unanswered += taken.unanswered;
        for decided in taken.decided {
            self.decided_here(decided, out);
        }
        Ok(taken.events.map(First::Started))
    }

    /// Refuses a continued message that gives a result for a call still
    /// waiting for a decision: ADK would take it as the tool's (true of
    /// any call it asked about), so nothing of it is sent. True when refused.
    async fn forged_results(&mut self, out: &mut Vec<UiChunk>) -> Result<bool, GateError> {
        let open = Box::pin(self.gate().open(&self.scope)).await?;
        let waiting: HashSet<&str> = open.iter().map(|i| i.call.id.as_str()).collect();
        let message = &self.history[self.history.len() - 1];
        let forged: Vec<String> = message
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::Tool(tool)
                    if tool.tool_name != CONFIRMATION_TOOL
                        && tool.is_resolved()
                        && waiting.contains(tool.tool_call_id.as_str()) =>
                {
                    Some(tool.tool_call_id.clone())
                }
                _ => None,
            })
            .collect();
        if forged.is_empty() {
            return Ok(false);
        }
        for tool_call_id in forged {
            tracing::warn!(chat = %self.scope.chat_id, call = %tool_call_id, "a result for a call awaiting a decision was refused");
            let error_text = FORGED_RESULT.to_owned();
            self.emit(
                AgentEvent::Rejected {
                    tool_call_id,
                    error_text,
                },
                out,
            );
        }
        self.emit(AgentEvent::Error(FORGED_REQUEST.to_owned()), out);
        Ok(true)
    }

    /// A question the gate decided: what the client sees now (its reply
    /// to ADK is made by [`Decided::reply`]).
    fn decided_here(&mut self, decided: Decided, out: &mut Vec<UiChunk>) {
        let Decided {
            id: confirmation_id,
            native,
            echo,
            verdict,
            ..
        } = decided;
        let (call, approved, outcome) = match verdict {
            Answered::Client { call } => (call, true, None),
            Answered::Recorded { call, outcome } => {
                let approved = matches!(outcome, Outcome::HandedOff { .. });
                (call, approved, (!approved).then_some(outcome))
            }
            // An upstream agent's call never runs here.
            Answered::Running { call, .. } => {
                tracing::error!(call = %call.id, "an upstream agent's call was started here");
                return;
            }
            Answered::Rejected(_) => return,
        };
        if !native {
            let output = echo.unwrap_or_else(|| json!({"confirmed": approved}));
            let card = card_settled(
                confirmation_id.clone(),
                output,
                outcome.as_ref(),
                &call.name,
            );
            self.emit(card, out);
        }
        let approval = native.then_some(confirmation_id);
        match outcome {
            None => {
                if !native {
                    let event = AgentEvent::Released {
                        call: call.clone(),
                        kept: true,
                    };
                    self.emit(event, out);
                }
                self.approved.insert(call.id.clone(), (call, approval));
            }
            Some(outcome) => {
                self.decided.insert(call.id.clone());
                if !native {
                    let event = AgentEvent::Released {
                        call: call.clone(),
                        kept: true,
                    };
                    self.emit(event, out);
                }
                let event = AgentEvent::Outcome {
                    call,
                    outcome,
                    approval,
                    metadata: None,
                };
                self.emit(event, out);
            }
        }
    }

    /// ADK's events for `message`. Answers run on the gate's tracked
    /// tasks to their end (ADK runs an approved call then); a user's
    /// message stops when its reader leaves.
    fn send(&self, adk: &Adk, session: &str, message: &Message) -> Events {
        let events = adk.run(&self.scope.principal, session, message);
        match message {
            Message::User(_) => events,
            Message::Replies(_) => kept(self.gate(), events),
        }
    }

    async fn on_event(&mut self, event: Result<AdkEvent, ProviderError>, out: &mut Vec<UiChunk>) {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                self.emit(AgentEvent::Error(e.to_string()), out);
                return;
            }
        };
        // What the agent does belongs to a step; the outcome of a call
        // decided here (approved or refused before ADK ran it) does not,
        // as an answered call's outcome does not in toolgate's own turn.
        let in_step = match &event {
            AdkEvent::Step | AdkEvent::Call(_) => false,
            AdkEvent::Output { id, .. } => {
                !self.decided.contains(id) && !self.approved.contains_key(id)
            }
            AdkEvent::TextDelta(_) | AdkEvent::ReasoningDelta(_) | AdkEvent::Confirm(_) => true,
        };
        if in_step && !self.step_open {
            self.step_open = true;
            self.emit(AgentEvent::StepStart, out);
        }
        match event {
            AdkEvent::Step => {
                if self.step_open {
                    self.emit(AgentEvent::ModelEnd, out);
                    self.emit(AgentEvent::StepFinish, out);
                }
                self.step_open = true;
                self.emit(AgentEvent::StepStart, out);
            }
            AdkEvent::TextDelta(delta) => self.emit(AgentEvent::TextDelta(delta.into()), out),
            AdkEvent::ReasoningDelta(delta) => {
                self.emit(AgentEvent::ReasoningDelta(delta.into()), out)
            }
            AdkEvent::Call(call) => self.pending.push(call),
            AdkEvent::Output { id, name, output } => self.output(id, name, output, out),
            AdkEvent::Confirm(asked) => self.question(asked, out).await,
        }
    }

    /// A tool ADK ran returned.
    fn output(&mut self, id: String, name: String, output: Value, out: &mut Vec<UiChunk>) {
        if self.decided.contains(&id) {
            return;
        }
        self.emit(AgentEvent::ModelEnd, out);
        let outcome = Outcome::Output {
            output,
            ran_with: None,
            responded: false,
        };
        if let Some((call, approval)) = self.approved.remove(&id) {
            let event = AgentEvent::Outcome {
                call,
                outcome,
                approval,
                metadata: None,
            };
            return self.emit(event, out);
        }
        let call = match self.pending.iter().position(|c| c.id == id) {
            Some(index) => self.pending.remove(index),
            // A call this turn did not see made (the agent resumed one).
            None => ToolCall {
                id,
                name,
                args: Value::Object(Default::default()),
            },
        };
        self.emit(
            AgentEvent::Released {
                call: call.clone(),
                kept: true,
            },
            out,
        );
        let event = AgentEvent::Outcome {
            call,
            outcome,
            approval: None,
            metadata: None,
        };
        self.emit(event, out);
    }

    /// ADK asks about one of its calls: the gate decides.
    async fn question(&mut self, asked: Confirmation, out: &mut Vec<UiChunk>) {
        if let Some(index) = self.pending.iter().position(|c| c.id == asked.original.id) {
            self.pending.remove(index);
        }
        self.emit(AgentEvent::ModelEnd, out);
        let call = asked.original.clone();
        let question = Question {
            id: asked.id.clone(),
            call: asked.original,
            hint: asked.hint,
        };
        let verdict = Box::pin(
            self.gate()
                .check_upstream(&self.scope, question, self.protocol),
        );
        let event = match verdict.await {
            Err(e) => {
                tracing::error!("the gate failed: {}", e.detail());
                AgentEvent::Error(e.to_string())
            }
            Ok(NewCall::Ask(issued)) => {
                self.asked.push(issued.id.clone());
                let seal = self.gate().seal(&issued).map(|seal| seal.to_metadata());
                AgentEvent::Asked {
                    issued,
                    seal,
                    metadata: None,
                    streamed: false,
                    client_side: false,
                }
            }
            // Allowed by the policy (a remembered approval, approve-next-N…).
            Ok(NewCall::Client { call, handoff }) => {
                self.replies.push(Reply {
                    confirmation_id: handoff,
                    confirmed: true,
                    payload: None,
                });
                self.approved.insert(call.id.clone(), (call.clone(), None));
                AgentEvent::Released { call, kept: true }
            }
            Ok(NewCall::Refused(reason) | NewCall::Invalid(reason)) => {
                self.replies.push(Reply {
                    confirmation_id: asked.id,
                    confirmed: false,
                    payload: None,
                });
                self.decided.insert(call.id.clone());
                AgentEvent::Refused {
                    call,
                    reason,
                    metadata: None,
                    streamed: false,
                }
            }
            // The gate permits an upstream call only as a hand-back.
            Ok(NewCall::Run(_)) => AgentEvent::Error(GATE_CONFUSED.to_owned()),
        };
        self.emit(event, out);
    }

    /// Calls ADK made that neither ran nor were asked about by the
    /// response's end: shown, with no result yet.
    fn calls_without_result(&mut self, out: &mut Vec<UiChunk>) {
        self.emit(AgentEvent::ModelEnd, out);
        for call in std::mem::take(&mut self.pending) {
            self.emit(AgentEvent::Released { call, kept: true }, out);
        }
    }

    /// Held flow: each question asked is decided elsewhere, or times out;
    /// the answers go to ADK next.
    async fn hold(&mut self, out: &mut Vec<UiChunk>) -> Result<(), GateError> {
        let native = self.protocol == ConfirmationProtocol::AiSdk;
        for id in std::mem::take(&mut self.asked) {
            let held = Box::pin(self.gate().hold(&self.scope, &id)).await?;
            // The server stops: the questions left stay open, answered with
            // the client's next request as in the finish flow.
            let Some((call, outcome)) = held else { break };
            let decided = Decided {
                id,
                native,
                echo: None,
                payload: None,
                verdict: Answered::Recorded { call, outcome },
            };
            self.replies.extend(decided.reply());
            self.decided_here(decided, out);
        }
        Ok(())
    }
}

/// What ADK gets first.
enum First {
    Send(Message),
    /// The answers' request, started by the task that took them.
    Started(Events),
}

/// A question the gate decided in this request, and how.
struct Decided {
    id: String,
    native: bool,
    /// The client's output on an ADK confirmation part, echoed back.
    echo: Option<Value>,
    payload: Option<Value>,
    verdict: Answered,
}

impl Decided {
    /// What ADK is told: approved (a hand-off) or not; nothing for a
    /// refused answer, whose question stays open.
    fn reply(&self) -> Option<Reply> {
        let confirmed = match &self.verdict {
            Answered::Client { .. } => true,
            Answered::Recorded { outcome, .. } => matches!(outcome, Outcome::HandedOff { .. }),
            Answered::Running { .. } | Answered::Rejected(_) => return None,
        };
        Some(Reply {
            confirmation_id: self.id.clone(),
            confirmed,
            payload: self.payload.clone().filter(|_| confirmed),
        })
    }
}

/// The continued message's answers through the gate.
struct Taken {
    decided: Vec<Decided>,
    /// Parts whose answer the gate refused, with why.
    rejected: Vec<(String, String)>,
    unanswered: usize,
    /// The request that carries the decisions to ADK, started.
    events: Option<Events>,
}

/// Takes every answer and open question of the continued message through
/// the gate and starts the request to ADK with the decisions: run on the
/// gate's tracked tasks, so that a decision taken always reaches ADK.
async fn take_answers(
    gate: Gate,
    scope: Scope,
    answered: Vec<(Answer, Option<Value>)>,
    open: Vec<Open>,
    adk: Arc<Adk>,
    session: String,
) -> Result<Taken, GateError> {
    let mut taken = Taken {
        decided: Vec::new(),
        rejected: Vec::new(),
        unanswered: 0,
        events: None,
    };
    let mut first_error = None;
    for (answer, echo) in answered {
        let native = answer.protocol == ConfirmationProtocol::AiSdk;
        let verdict = match Box::pin(gate.check_answer(&scope, &answer)).await {
            Ok(verdict) => verdict,
            // The decisions taken so far still go to ADK.
            Err(e) => {
                first_error = Some(e);
                break;
            }
        };
        if let Answered::Rejected(why) = verdict {
            let part = match (answer.original, native) {
                (Some(original), true) => original.id,
                _ => answer.confirmation_id,
            };
            taken.rejected.push((part, why));
            continue;
        }
        let payload = match &answer.decision {
            Decision::Approve { payload, .. } => payload.clone(),
            // The gate refuses a response to an upstream agent's question.
            Decision::Deny { .. } | Decision::Respond { .. } => None,
        };
        taken.decided.push(Decided {
            id: answer.confirmation_id,
            native,
            echo,
            payload,
            verdict,
        });
    }
    for open in open.into_iter().filter(|_| first_error.is_none()) {
        match Box::pin(gate.settle(&scope, &open.confirmation_id)).await {
            Ok(None) => taken.unanswered += 1,
            Ok(Some(verdict)) => taken.decided.push(Decided {
                id: open.confirmation_id,
                native: !open.adk,
                echo: None,
                payload: None,
                verdict,
            }),
            Err(e) => {
                first_error = Some(e);
                break;
            }
        }
    }
    let replies: Vec<Reply> = taken.decided.iter().filter_map(Decided::reply).collect();
    if !replies.is_empty() {
        let events = adk.run(&scope.principal, &session, &Message::Replies(replies));
        taken.events = Some(kept(&gate, events));
    }
    match first_error {
        // ADK has what was taken; the turn reports the failure.
        Some(e) => {
            drop(taken.events.take());
            Err(e)
        }
        None => Ok(taken),
    }
}

/// On a made-up result for a call that waits for a decision.
const FORGED_RESULT: &str =
    "refused: this call waits for a decision; only the agent reports its result";

const FORGED_REQUEST: &str =
    "the request carries a tool result toolgate did not issue; nothing was sent to the agent";

/// A user's message says nothing ADK can take.
const NOTHING_TO_SAY: &str = "the last user message has no text or file for the agent";

const GATE_CONFUSED: &str = "the gate let an upstream agent's call run here";

/// A part of the user's message as ADK takes it.
fn user_content(part: &Part) -> Option<UserContent> {
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

/// `events` read to their end on the gate's tracked tasks, whatever
/// happens to the turn: ADK stops an agent whose request is dropped, and
/// an answer it was given must be carried out.
fn kept(gate: &Gate, events: Events) -> Events {
    let (sender, receiver) = mpsc::channel(KEPT);
    gate.keep(async move {
        let mut events = events;
        let mut sender = Some(sender);
        while let Some(event) = events.next().await {
            if let Some(to) = &sender
                && to.send(event).await.is_err()
            {
                // The turn is gone; ADK goes on to the end.
                sender = None;
            }
        }
    });
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (event, receiver))
    })
    .boxed()
}
