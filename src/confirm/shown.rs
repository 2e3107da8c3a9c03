//! What a person is shown of a call: its arguments through the one
//! redaction (`call/redact.rs`), and what comes back from a person with
//! masked values put back from the call as issued, so that a card's
//! arguments returned as they were shown still name the real call.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::{Answer, Decision, Gate};
use crate::call::{Redaction, ToolCall};
use crate::store::{Issued, Outcome};

impl Gate {
    /// What no person is shown of a call's arguments.
    pub fn redaction(&self) -> &Arc<Redaction> {
        self.policy.redaction()
    }

    /// `call`'s arguments as a person is shown them.
    pub fn shown_args<'a>(&self, call: &'a ToolCall) -> Cow<'a, Value> {
        self.redaction().mask(&call.name, &call.args)
    }

    /// `call` as a person is shown it: borrowed when nothing is masked.
    pub fn shown_call<'a>(&self, call: &'a ToolCall) -> Cow<'a, ToolCall> {
        self.redaction().mask_call(call)
    }

    /// `issued` as a person is shown it (its hint was made from the shown
    /// arguments when it was asked).
    pub fn shown_issued<'a>(&self, issued: &'a Issued) -> Cow<'a, Issued> {
        match self.shown_call(&issued.call) {
            Cow::Borrowed(_) => Cow::Borrowed(issued),
            Cow::Owned(call) => Cow::Owned(Issued {
                call,
                ..issued.clone()
            }),
        }
    }

    /// An answer in the chat as it was sealed: its call as shown.
    pub(super) fn answer_as_shown<'a>(&self, answer: &'a Answer) -> Cow<'a, Answer> {
        let Some(original) = &answer.original else {
            return Cow::Borrowed(answer);
        };
        match self.shown_call(original) {
            Cow::Borrowed(_) => Cow::Borrowed(answer),
            Cow::Owned(call) => Cow::Owned(Answer {
                original: Some(call),
                ..answer.clone()
            }),
        }
    }

    /// A chat's answer with the masked values of its call put back from
    /// `issued`; borrowed when there is none.
    pub(super) fn unmasked_answer<'a>(
        &self,
        answer: &'a Answer,
        issued: &Issued,
    ) -> Cow<'a, Answer> {
        let Some(original) = &answer.original else {
            return Cow::Borrowed(answer);
        };
        let real = &issued.call;
        match self
            .redaction()
            .restore(&real.name, &original.args, &real.args)
        {
            Cow::Borrowed(_) => Cow::Borrowed(answer),
            Cow::Owned(args) => Cow::Owned(Answer {
                original: Some(ToolCall {
                    args,
                    ..original.clone()
                }),
                ..answer.clone()
            }),
        }
    }

    /// A decision whose edit keeps each masked value the approver left as
    /// shown (the marker) and takes each one they wrote anew.
    pub(super) fn unmasked_decision<'a>(
        &self,
        decision: &'a Decision,
        issued: &Issued,
    ) -> Cow<'a, Decision> {
        let Decision::Approve {
            edited: Some(edited),
            payload,
            remember,
            approve_next,
            grant,
        } = decision
        else {
            return Cow::Borrowed(decision);
        };
        let real = &issued.call;
        match self.redaction().restore(&real.name, edited, &real.args) {
            Cow::Borrowed(_) => Cow::Borrowed(decision),
            Cow::Owned(args) => Cow::Owned(Decision::Approve {
                payload: payload.clone(),
                remember: *remember,
                approve_next: *approve_next,
                edited: Some(args),
                grant: grant.clone(),
            }),
        }
    }

    /// `outcome` of a call of `tool` as a person is shown it: the edited
    /// arguments it ran with, masked.
    pub fn shown_outcome<'a>(&self, tool: &str, outcome: &'a Outcome) -> Cow<'a, Outcome> {
        shown_outcome(self.redaction(), tool, outcome)
    }
}

/// `outcome` with the arguments it ran with masked by `redaction`.
pub fn shown_outcome<'a>(
    redaction: &Redaction,
    tool: &str,
    outcome: &'a Outcome,
) -> Cow<'a, Outcome> {
    let (Outcome::Output {
        ran_with: Some(args),
        ..
    }
    | Outcome::Error {
        ran_with: Some(args),
        ..
    }
    | Outcome::HandedOff {
        ran_with: Some(args),
    }) = outcome
    else {
        return Cow::Borrowed(outcome);
    };
    let Cow::Owned(masked) = redaction.mask(tool, args) else {
        return Cow::Borrowed(outcome);
    };
    let mut shown = outcome.clone();
    if let Outcome::Output { ran_with, .. }
    | Outcome::Error { ran_with, .. }
    | Outcome::HandedOff { ran_with } = &mut shown
    {
        *ran_with = Some(masked);
    }
    Cow::Owned(shown)
}
