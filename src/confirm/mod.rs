//! The confirmation gate: the one place that decides whether a tool call may
//! run, and the one place that runs it.
//!
//! A call runs only with a [`Permit`], and only this module makes permits:
//! either the tool needs no confirmation for these arguments, or the answer
//! names a confirmation this server issued, for this chat and principal,
//! with the exact call it issued, and wins the store's atomic claim.

mod answer;

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use answer::{Answer, Decision, original_call};

use crate::ids::{Clock, Ids};
use crate::protocol::ConfirmationProtocol;
use crate::provider::ToolCall;
use crate::store::{Claim, Issued, Outcome, Store, StoreError};
use crate::tools::{Registry, ToolContext, ToolError};

/// The name of the wrapper call that asks the user.
pub const CONFIRMATION_TOOL: &str = "adk_request_confirmation";

/// Who is asking: the gate's answers are valid only within one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub chat_id: String,
    pub principal: String,
}

/// Permission to run one call. Only the gate creates one.
#[derive(Debug)]
pub struct Permit {
    call: ToolCall,
    /// Set when the call was confirmed: its outcome goes to the ledger.
    confirmation: Option<String>,
    payload: Option<Value>,
}

impl Permit {
    pub fn call(&self) -> &ToolCall {
        &self.call
    }
}

/// The gate's verdict on a call the model just made.
#[derive(Debug)]
pub enum NewCall {
    Run(Permit),
    Ask(Issued),
    /// The call cannot run at all (e.g. an unknown tool).
    Refused(String),
}

/// The gate's verdict on a user's answer.
#[derive(Debug)]
pub enum Answered {
    /// Approved and claimed: run it.
    Run(Permit),
    /// Already decided: the call (as issued) and its recorded outcome.
    Recorded { call: ToolCall, outcome: Outcome },
    /// Not an answer this server accepts; nothing runs.
    Rejected(String),
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("confirmation store failed: {0}")]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone)]
pub struct Gate {
    pub registry: Registry,
    store: Store,
    clock: Clock,
    ids: Ids,
    expiry: Duration,
    tool_timeout: Duration,
}

impl Gate {
    pub fn new(
        registry: Registry,
        store: Store,
        clock: Clock,
        ids: Ids,
        expiry: Duration,
        tool_timeout: Duration,
    ) -> Self {
        Self {
            registry,
            store,
            clock,
            ids,
            expiry,
            tool_timeout,
        }
    }

    /// Whether calls to `name` may need confirmation; when not, their input
    /// can stream live.
    pub fn may_ask(&self, name: &str) -> bool {
        self.registry
            .get(name)
            .is_none_or(|t| t.may_need_confirmation())
    }

    /// Decides about a call the model made: run it, or issue a confirmation
    /// to be asked in `protocol`.
    pub async fn check_new(
        &self,
        scope: &Scope,
        call: ToolCall,
        protocol: ConfirmationProtocol,
    ) -> Result<NewCall, GateError> {
        let Some(tool) = self.registry.get(&call.name) else {
            return Ok(NewCall::Refused(format!("unknown tool `{}`", call.name)));
        };
        if !tool.needs_confirmation(&call.args) {
            return Ok(NewCall::Run(Permit {
                call,
                confirmation: None,
                payload: None,
            }));
        }
        if !tool.may_need_confirmation() {
            // Its input already streamed as a plain call; fail closed.
            return Ok(NewCall::Refused(format!(
                "tool `{}` asks for confirmation it declared it never needs",
                call.name
            )));
        }
        let now = self.clock.now_ms();
        let issued = Issued {
            id: self.ids.next(match protocol {
                ConfirmationProtocol::Adk => "adk",
                ConfirmationProtocol::AiSdk => "approval",
            }),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint: tool.confirmation_hint(&call.args),
            protocol,
            call,
            issued_at_ms: now,
            expires_at_ms: now
                .saturating_add(u64::try_from(self.expiry.as_millis()).unwrap_or(u64::MAX)),
        };
        self.store.insert(issued.clone()).await?;
        Ok(NewCall::Ask(issued))
    }

    /// Checks a user's answer against what this server issued.
    pub async fn check_answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let reject = |why: String| {
            tracing::warn!(confirmation = %answer.confirmation_id, chat = %scope.chat_id, "confirmation rejected: {why}");
            Ok(Answered::Rejected(why))
        };
        let Some(issued) = self.store.get(&answer.confirmation_id).await? else {
            return reject(format!(
                "confirmation `{}` was not issued by this server",
                answer.confirmation_id
            ));
        };
        if issued.chat_id != scope.chat_id {
            return reject("confirmation belongs to another chat".into());
        }
        if issued.principal != scope.principal {
            return reject("confirmation belongs to another user".into());
        }
        if answer.protocol != issued.protocol {
            return reject("confirmation answered in another form than it was asked".into());
        }
        if answer.original.as_ref() != Some(&issued.call) {
            return reject(
                match answer.protocol {
                    ConfirmationProtocol::Adk => {
                        "originalFunctionCall differs from the call this server issued"
                    }
                    ConfirmationProtocol::AiSdk => {
                        "the approved call differs from the call this server issued"
                    }
                }
                .into(),
            );
        }
        let expired = self.clock.now_ms() > issued.expires_at_ms;
        match self.store.claim(&issued.id).await? {
            Claim::Done(outcome) => Ok(Answered::Recorded {
                call: issued.call,
                outcome,
            }),
            Claim::InFlight => match self
                .store
                .wait_outcome(&issued.id, self.tool_timeout * 2)
                .await?
            {
                Some(outcome) => Ok(Answered::Recorded {
                    call: issued.call,
                    outcome,
                }),
                None => {
                    reject("the approved call is still running or its outcome is unknown".into())
                }
            },
            Claim::Won if expired => {
                self.store
                    .finish(
                        &issued.id,
                        Outcome::Error {
                            message: "confirmation expired".into(),
                        },
                    )
                    .await?;
                reject("confirmation expired".into())
            }
            Claim::Won => match &answer.decision {
                Decision::Approve { payload } => Ok(Answered::Run(Permit {
                    call: issued.call,
                    confirmation: Some(issued.id),
                    payload: payload.clone(),
                })),
                Decision::Deny { reason } => {
                    let outcome = Outcome::Denied {
                        reason: reason.clone(),
                    };
                    self.store.finish(&issued.id, outcome.clone()).await?;
                    Ok(Answered::Recorded {
                        call: issued.call,
                        outcome,
                    })
                }
            },
        }
    }

    /// Runs a permitted call. A confirmed call, once claimed, runs to the end
    /// and records its outcome even if the client goes away, so a replay
    /// reports it instead of running the call again.
    pub async fn run(&self, permit: Permit, chat_id: &str) -> Outcome {
        let Permit {
            call,
            confirmation,
            payload,
        } = permit;
        let cancel = CancellationToken::new();
        let ctx = ToolContext {
            chat_id: chat_id.to_owned(),
            call_id: call.id.clone(),
            payload,
            cancel: cancel.clone(),
            ids: self.ids.clone(),
        };
        let execute = execute(self.registry.clone(), call, ctx, self.tool_timeout);
        match confirmation {
            None => {
                let _cancel_on_drop = cancel.drop_guard();
                execute.await
            }
            Some(id) => {
                let store = self.store.clone();
                let task = tokio::spawn(async move {
                    let outcome = execute.await;
                    if let Err(e) = store.finish(&id, outcome.clone()).await {
                        tracing::error!(confirmation = %id, "recording an outcome failed: {e}");
                    }
                    outcome
                });
                task.await.unwrap_or_else(|e| Outcome::Error {
                    message: format!("tool task failed: {e}"),
                })
            }
        }
    }
}

async fn execute(
    registry: Registry,
    call: ToolCall,
    ctx: ToolContext,
    timeout: Duration,
) -> Outcome {
    let Some(tool) = registry.get(&call.name).cloned() else {
        return Outcome::Error {
            message: format!("unknown tool `{}`", call.name),
        };
    };
    let cancel = ctx.cancel.clone();
    let run = AssertUnwindSafe(tool.execute(call.args, ctx)).catch_unwind();
    let result = match tokio::time::timeout(timeout, run).await {
        Ok(Ok(result)) => result,
        Ok(Err(_panic)) => Err(ToolError::Failed("tool panicked".into())),
        Err(_elapsed) => {
            cancel.cancel();
            Err(ToolError::TimedOut(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            ))
        }
    };
    match result {
        Ok(output) => Outcome::Output { output },
        Err(e) => Outcome::Error {
            message: e.to_string(),
        },
    }
}

/// The input of an `adk_request_confirmation` call, as ADK shapes it.
pub fn confirmation_input(issued: &Issued) -> Value {
    json!({
        "originalFunctionCall": {"id": issued.call.id, "name": issued.call.name, "args": issued.call.args},
        "toolConfirmation": {"hint": issued.hint, "confirmed": false},
    })
}

/// The error text of a denied call, as the client shows it.
pub const DENIED: &str = "User denied execution";

pub fn denial_text(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("{DENIED}: {reason}"),
        None => DENIED.to_owned(),
    }
}

/// The reason inside a [`denial_text`], if `text` is one.
pub fn parse_denial(text: &str) -> Option<Option<String>> {
    let rest = text.strip_prefix(DENIED)?;
    match rest.strip_prefix(": ") {
        Some(reason) => Some(Some(reason.to_owned())),
        None if rest.is_empty() => Some(None),
        None => None,
    }
}
