//! A run's interrupts, against the store: the questions a thread still
//! waits on, a resume checked whole before anything is decided, each
//! answer decided through the gate's one pipeline (as the decisions API
//! decides), and the interrupts a finished run announces.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::request::{ResumeEntry, ResumeStatus};
use super::wire::{self, Allowed};
use crate::identity::Identity;
use crate::run::{Answerable, Decision, GateError, Issued, NotAnswerable, OutOfBand, Questions};

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
    Core(#[from] GateError),
}

impl From<Refused> for ResumeError {
    fn from(refused: Refused) -> Self {
        ResumeError::Refused(refused)
    }
}

/// A run without `resume`: refused while the thread has open questions.
pub async fn nothing_pending(
    questions: &Questions,
    who: &Identity,
    thread: &str,
) -> Result<(), ResumeError> {
    let open = questions.open_in(who, thread).await?;
    if open.is_empty() {
        return Ok(());
    }
    Err(Refused::new(
        wire::PENDING,
        format!(
            "this thread waits on interrupts {}; a run must carry `resume` answering them",
            open.join(", ")
        ),
    )
    .into())
}

/// What a question may be answered with.
pub fn allowed(answerable: &Answerable) -> Allowed {
    Allowed {
        remember: answerable.may_remember,
        edits: answerable.editable,
    }
}

/// Checks `entries` whole (each names a question of this thread and
/// principal, every open one is answered, none expired, each payload fits
/// its schema), then decides each through the pipeline. The questions'
/// ids by their tool call's id, for the turn that reports their outcomes.
pub async fn resume(
    questions: &Questions,
    who: &Identity,
    thread: &str,
    entries: &[ResumeEntry],
) -> Result<HashMap<String, String>, ResumeError> {
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
        let answerable = match questions
            .answerable(who, thread, &entry.interrupt_id)
            .await?
        {
            Ok(answerable) => answerable,
            Err(NotAnswerable::Unknown) => return Err(unknown().into()),
            Err(NotAnswerable::Expired) => {
                return Err(Refused::new(
                    wire::EXPIRED,
                    format!(
                        "interrupt `{}` expired; nothing was decided",
                        entry.interrupt_id
                    ),
                )
                .into());
            }
        };
        let decision = match entry.status {
            ResumeStatus::Cancelled => wire::cancelled(),
            ResumeStatus::Resolved => wire::decision(entry.payload.as_ref(), allowed(&answerable))
                .map_err(|why| {
                    Refused::new(
                        wire::BAD_RESUME,
                        format!(
                            "interrupt `{}`: {why}; nothing was decided",
                            entry.interrupt_id
                        ),
                    )
                })?,
        };
        decisions.push((answerable.issued, decision));
    }
    let open = questions.open_in(who, thread).await?;
    let missing: Vec<&str> = open
        .iter()
        .map(String::as_str)
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
        match questions.decide(who, &issued.id, decision).await? {
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

/// The interrupts a run of `who`'s in `thread` that asked `asked` ends
/// with: each question still open, with its response schema.
pub async fn interrupts(
    questions: &Questions,
    who: &Identity,
    thread: &str,
    asked: &[(String, String)],
) -> Result<Vec<Value>, GateError> {
    let ids = asked.iter().map(|(id, _)| id.clone()).collect();
    let waiting = questions.waiting(who, thread, ids).await?;
    Ok(waiting
        .iter()
        .map(|w| {
            let allowed = allowed(&w.answerable);
            wire::interrupt(&w.answerable.issued, allowed, w.parameters.as_ref())
        })
        .collect())
}
