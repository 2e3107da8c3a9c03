//! A run's interrupts, against the store: the questions a thread still
//! waits on, a resume checked whole before anything is decided, each
//! answer decided through the gate's one pipeline (as the decisions API
//! decides), and the interrupts a finished run announces.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::input::{ResumeEntry, ResumeStatus};
use super::wire::{self, Allowed};
use crate::confirm::{Decision, Gate, GateError, OutOfBand, OutsideQuestion, Scope};
use crate::identity::Identity;
use crate::run::Turns;
use crate::store::{Issued, Outcome};

/// Why a run ends in `RUN_ERROR` before its turn: a code and a text for
/// the client.
#[derive(Debug, PartialEq)]
pub struct Refused {
    pub code: &'static str,
    pub message: String,
}

impl Refused {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// What a resume failed on: a refusal for the client, or the gate.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("{}", .0.message)]
    Refused(Refused),
    #[error(transparent)]
    Gate(#[from] GateError),
}

impl From<Refused> for ResumeError {
    fn from(refused: Refused) -> Self {
        ResumeError::Refused(refused)
    }
}

/// A run without `resume`: refused while the thread has open questions.
pub async fn nothing_pending(gate: &Gate, scope: &Scope) -> Result<(), ResumeError> {
    let open = gate.open(scope).await?;
    if open.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = open.iter().map(|q| q.id.as_str()).collect();
    Err(Refused::new(
        wire::PENDING,
        format!(
            "this thread waits on interrupts {}; a run must carry `resume` answering them",
            ids.join(", ")
        ),
    )
    .into())
}

/// What a question may be answered with.
pub fn allowed(gate: &Gate, issued: &Issued) -> Allowed {
    Allowed {
        remember: gate.may_remember(&issued.call),
        edits: gate.editable(&issued.call.name),
    }
}

/// Checks `entries` whole (each names a question of this thread and
/// principal, every open one is answered, none expired, each payload fits
/// its schema), then decides each through the pipeline. The questions'
/// ids by their tool call's id, for the turn that reports their outcomes.
pub async fn resume(
    turns: &Turns,
    who: &Identity,
    scope: &Scope,
    entries: &[ResumeEntry],
) -> Result<HashMap<String, String>, ResumeError> {
    let gate = &turns.agent.gate;
    let now = gate.now_ms();
    let mut seen = HashSet::new();
    let mut decisions: Vec<(Issued, Decision)> = Vec::with_capacity(entries.len());
    for entry in entries {
        if !seen.insert(entry.interrupt_id.as_str()) {
            return Err(Refused::new(
                wire::BAD_RESUME,
                format!("interrupt `{}` is answered twice", entry.interrupt_id),
            )
            .into());
        }
        let unknown = || {
            Refused::new(
                wire::BAD_RESUME,
                format!(
                    "no interrupt `{}` in this thread; nothing was decided",
                    entry.interrupt_id
                ),
            )
        };
        let question = gate.question(&entry.interrupt_id).await?;
        let (issued, expired) = match question {
            None => return Err(unknown().into()),
            Some(OutsideQuestion::Open(issued)) => {
                let expired = issued.expires_at_ms <= now;
                (issued, expired)
            }
            Some(OutsideQuestion::Decided(issued, outcome)) => {
                (issued, outcome == Outcome::Expired)
            }
        };
        if issued.chat_id != scope.chat_id || issued.principal != scope.principal {
            return Err(unknown().into());
        }
        if expired {
            return Err(Refused::new(
                wire::EXPIRED,
                format!("interrupt `{}` expired; nothing was decided", issued.id),
            )
            .into());
        }
        let decision = match entry.status {
            ResumeStatus::Cancelled => wire::cancelled(),
            ResumeStatus::Resolved => {
                wire::decision(entry.payload.as_ref(), allowed(gate, &issued)).map_err(|why| {
                    Refused::new(
                        wire::BAD_RESUME,
                        format!("interrupt `{}`: {why}; nothing was decided", issued.id),
                    )
                })?
            }
        };
        decisions.push((issued, decision));
    }
    let open = gate.open(scope).await?;
    let missing: Vec<&str> = open
        .iter()
        .map(|q| q.id.as_str())
        .filter(|id| !seen.contains(id))
        .collect();
    if !missing.is_empty() {
        return Err(Refused::new(
            wire::BAD_RESUME,
            format!(
                "a resume answers every open interrupt; {} unanswered; nothing was decided",
                missing.join(", ")
            ),
        )
        .into());
    }
    let mut asked = HashMap::with_capacity(decisions.len());
    for (issued, decision) in decisions {
        let decided = turns.answer(who, &issued.id, decision).await;
        let decided = decided.map_err(|e| match e {
            crate::run::TurnError::Gate(e) => ResumeError::Gate(e),
            other => ResumeError::Refused(Refused::new(wire::REFUSED, other.to_string())),
        })?;
        match decided {
            // Decided now, the same decision replayed, or decided
            // otherwise elsewhere (the inbox, a link): the turn reports
            // the outcome that stands.
            OutOfBand::Decided(_) | OutOfBand::Conflict(_) => {}
            OutOfBand::Expired(why) => return Err(Refused::new(wire::EXPIRED, why).into()),
            OutOfBand::NotFound => {
                let why = format!("no interrupt `{}` in this thread", issued.id);
                return Err(Refused::new(wire::BAD_RESUME, why).into());
            }
            OutOfBand::Invalid(why) | OutOfBand::Forbidden(why) => {
                return Err(Refused::new(wire::REFUSED, why).into());
            }
        }
        asked.insert(issued.call.id.clone(), issued.id.clone());
    }
    Ok(asked)
}

/// The interrupts a run that asked `asked` ends with: each question still
/// open, with its response schema.
pub async fn interrupts(gate: &Gate, asked: &[(String, String)]) -> Result<Vec<Value>, GateError> {
    let mut interrupts = Vec::with_capacity(asked.len());
    let tools = match asked.is_empty() {
        true => Vec::new(),
        false => gate.tools(),
    };
    for (id, _) in asked {
        let Some(OutsideQuestion::Open(issued)) = gate.question(id).await? else {
            continue;
        };
        let parameters = tools
            .iter()
            .find(|tool| tool.name == issued.call.name)
            .map(|tool| &tool.parameters);
        let shown = gate.shown_issued(&issued);
        interrupts.push(wire::interrupt(&shown, allowed(gate, &issued), parameters));
    }
    Ok(interrupts)
}
