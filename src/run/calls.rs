//! The run API for one call from an agent outside toolgate (the MCP face):
//! [`Calls`]. No turn, no model: the gate decides the call (run, refuse or
//! ask), a permitted call runs once, and a question is answered through the
//! one decision pipeline, by the client's user or out of band.
//!
//! A call is asked in a chat of its own, `mcp-<digest>`, the digest of
//! (principal, tool, canonical arguments), and its call id is that chat id:
//! a later call of the same tool with the same arguments by the same
//! principal finds the question again, open or decided since, until its
//! outcome went back to the client (`Gate::undelivered`). A question's
//! `requestState` is sealed with the gate's signing keys over (question,
//! chat, principal, tool, arguments, expiry), so the retry that carries it
//! is checked before anything is looked up.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::call::ToolCall;
use crate::confirm::signing::Subject;
use crate::confirm::{
    Decision, Gate, GateError, NewCall, OutOfBand, OutsideQuestion, Scope, Seal, Signer, ToolView,
};
use crate::identity::Identity;
use crate::protocol::ConfirmationProtocol;
use crate::store::{Issued, Outcome};

/// What a call from outside came to.
#[derive(Debug)]
pub enum Called {
    /// It ran, or its question was decided: the outcome.
    Done(Outcome),
    /// Refused before anything ran: why.
    Refused(String),
    /// A person must decide first: the question, asked now or still open.
    Waiting(Issued),
}

/// What a retry whose `requestState` does not hold is told; nothing ran.
pub const BAD_STATE: &str = "the requestState does not hold for this call (forged, altered, another user's, for other arguments, or expired); nothing ran";

/// One call at a time from outside agents, through the gate: the MCP
/// face's only handle on the core.
#[derive(Debug, Clone)]
pub struct Calls {
    gate: Gate,
    /// Seals each question's `requestState` (the signing keys, else a key
    /// made at start).
    signer: Signer,
}

/// A question as its asker is shown it (masked values masked), and whether
/// the policy lets its approval be remembered.
pub struct Shown<'a> {
    pub issued: Cow<'a, Issued>,
    pub may_remember: bool,
}

impl Calls {
    pub fn new(gate: Gate, signer: Signer) -> Self {
        Self { gate, signer }
    }

    /// The tools an outside client is offered: every tool the policy may
    /// ever let run.
    pub fn offered(&self) -> Vec<ToolView> {
        let tools = self.gate.tools().into_iter();
        tools
            .filter(|view| !self.gate.never_runs(&view.name))
            .collect()
    }

    /// Runs `work` with every audit event it writes naming `client` (the
    /// outside client's `name version`).
    pub async fn for_client<F: Future>(client: Option<Arc<str>>, work: F) -> F::Output {
        Gate::for_client(client, work).await
    }

    /// Whether `who`, who asked `issued`, may decide it in their client.
    pub fn asker_decides(&self, who: &Identity, issued: &Issued) -> bool {
        self.gate.asker_decides(who, &issued.call)
    }

    /// `issued` as the person asked about it sees it.
    pub fn shown<'a>(&self, issued: &'a Issued) -> Shown<'a> {
        Shown {
            may_remember: self.gate.may_remember(&issued.call),
            issued: self.gate.shown_issued(issued),
        }
    }

    /// The scope `principal`'s call of `name` with `args` is asked in.
    pub fn scope(principal: &str, name: &str, args: &Value) -> Scope {
        let mut hash = Sha256::new();
        for field in [principal, name, &crate::confirm::signing::digest(args)] {
            // Length-prefixed, so no field can run into the next.
            hash.update(field.len().to_string());
            hash.update(":");
            hash.update(field);
        }
        let digest = hex::encode(hash.finalize());
        Scope {
            chat_id: format!("mcp-{}", &digest[..32]),
            principal: principal.to_owned(),
        }
    }

    /// Decides `principal`'s call of `name` with `args`: the question of an
    /// earlier call just like it if its outcome was not given back yet, else
    /// the gate's verdict, a permitted call run here.
    pub async fn call(
        &self,
        principal: &str,
        name: &str,
        args: Value,
    ) -> Result<Called, GateError> {
        let scope = Self::scope(principal, name, &args);
        if let Some(question) = self.gate.undelivered(&scope).await? {
            return Ok(match question {
                OutsideQuestion::Open(issued) => Called::Waiting(issued),
                OutsideQuestion::Decided(issued, outcome) => {
                    self.gate.delivered(&scope, &issued).await;
                    Called::Done(outcome)
                }
            });
        }
        if self.gate.runs_on_client(name) {
            return Ok(Called::Refused(format!(
                "`{name}` runs in a chat client; an MCP client cannot run it"
            )));
        }
        let call = ToolCall {
            id: scope.chat_id.clone(),
            name: name.to_owned(),
            args,
        };
        let checked = self
            .gate
            .check_new(&scope, call, ConfirmationProtocol::AiSdk);
        Ok(match Box::pin(checked).await? {
            NewCall::Run(permit) => Called::Done(self.gate.run(permit, &scope.chat_id).await),
            NewCall::Ask(issued) => Called::Waiting(issued),
            NewCall::Refused(why) | NewCall::Invalid(why) => Called::Refused(why),
            // Not reached: a client-side tool is refused above.
            NewCall::Client { call, .. } => Called::Refused(format!(
                "`{}` runs in a chat client; an MCP client cannot run it",
                call.name
            )),
        })
    }

    /// `issued`'s outcome if it is decided within `wait`; else it still waits.
    pub async fn wait(&self, issued: Issued, wait: Duration) -> Result<Called, GateError> {
        match self.gate.outcome_within(&issued.id, wait).await? {
            Some(outcome) => Ok(self.done(&issued, outcome).await),
            None => Ok(Called::Waiting(issued)),
        }
    }

    /// The client's user decides `issued` as `who`, through the one
    /// decision pipeline (the same checks, claim, record and audit as the
    /// API, the identity's roles and source counting): an approved call
    /// runs once, a replay gets the recorded outcome.
    pub async fn decide(
        &self,
        who: &Identity,
        issued: &Issued,
        decision: Decision,
    ) -> Result<Called, GateError> {
        let decided = self
            .gate
            .decide_out_of_band(who, &issued.id, decision)
            .await?;
        Ok(match decided {
            OutOfBand::Decided(outcome) => self.done(issued, outcome).await,
            OutOfBand::NotFound => Called::Refused(BAD_STATE.to_owned()),
            OutOfBand::Invalid(why)
            | OutOfBand::Conflict(why)
            | OutOfBand::Expired(why)
            | OutOfBand::Forbidden(why) => Called::Refused(why),
        })
    }

    /// The outcome, noted as given back to the client.
    async fn done(&self, issued: &Issued, outcome: Outcome) -> Called {
        let scope = Scope {
            chat_id: issued.chat_id.clone(),
            principal: issued.principal.clone(),
        };
        self.gate.delivered(&scope, issued).await;
        Called::Done(outcome)
    }

    /// The `requestState` that brings a retry back to `issued`:
    /// `<question id>.<expiry ms>.<key id>-<hex HMAC>`.
    pub fn state(&self, issued: &Issued) -> String {
        let seal = self.signer.seal(&subject(issued));
        format!("{}.{}.{}", issued.id, seal.expires_at_ms, seal.signature)
    }

    /// The question `state` names, if it was sealed here for exactly this
    /// principal, tool and arguments and has not expired; `Err` with
    /// [`BAD_STATE`] otherwise. The seal is checked before any lookup.
    pub async fn resume(
        &self,
        principal: &str,
        name: &str,
        args: &Value,
        state: &str,
    ) -> Result<Result<OutsideQuestion, &'static str>, GateError> {
        let mut parts = state.rsplitn(3, '.');
        let (Some(signature), Some(expires), Some(id)) = (parts.next(), parts.next(), parts.next())
        else {
            return Ok(Err(BAD_STATE));
        };
        let Ok(expires_at_ms) = expires.parse::<u64>() else {
            return Ok(Err(BAD_STATE));
        };
        let scope = Self::scope(principal, name, args);
        let call = ToolCall {
            id: scope.chat_id.clone(),
            name: name.to_owned(),
            args: args.clone(),
        };
        let seal = Seal {
            signature: signature.to_owned(),
            expires_at_ms,
        };
        let subject = Subject {
            confirmation_id: id,
            chat_id: &scope.chat_id,
            principal,
            call: &call,
            expires_at_ms,
        };
        if !self.signer.verify(&seal, &subject) || expires_at_ms <= self.gate.now_ms() {
            return Ok(Err(BAD_STATE));
        }
        Ok(match self.gate.question(id).await? {
            Some(question) => {
                let (OutsideQuestion::Open(issued) | OutsideQuestion::Decided(issued, _)) =
                    &question;
                match issued.principal == principal && issued.chat_id == scope.chat_id {
                    true => Ok(question),
                    false => Err(BAD_STATE),
                }
            }
            None => Err(BAD_STATE),
        })
    }
}

/// What a question's `requestState` is sealed over.
fn subject(issued: &Issued) -> Subject<'_> {
    Subject {
        confirmation_id: &issued.id,
        chat_id: &issued.chat_id,
        principal: &issued.principal,
        call: &issued.call,
        expires_at_ms: issued.expires_at_ms,
    }
}
