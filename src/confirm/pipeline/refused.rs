//! A decision the pipeline does not take, audited as its form tells it:
//! refused before any claim, for no question the caller may see, or too
//! late for one decided before.

use serde_json::Value;

use super::super::audit::Note;
use super::super::check::{self, Refusal};
use super::super::{Answer, CANCELLED, Decision, EXPIRED, Gate, OutOfBand, Scope};
use super::{Form, Reached, Who};
use crate::call::ToolCall;
use crate::identity::Identity;
use crate::store::{Issued, Outcome};

impl Gate {
    /// A refusal, audited as its form tells it.
    pub(super) async fn refused(
        &self,
        form: Form<'_>,
        scope: &Scope,
        issued: &Issued,
        principal: &str,
        refusal: Refusal,
    ) -> Reached {
        match form {
            Form::Chat { scope, answer, who } => {
                self.refused_in_chat(scope, answer, who, refusal).await
            }
            Form::OutOfBand(who) => {
                self.refused_out_of_band(who, scope, issued, principal, refusal)
                    .await
            }
        }
    }

    /// An answer in the chat refused: the question stays as it was.
    pub(super) async fn refused_in_chat(
        &self,
        scope: &Scope,
        answer: &Answer,
        who: &Identity,
        refusal: Refusal,
    ) -> Reached {
        let why = refusal.to_string();
        let id = answer.confirmation_id.as_str();
        tracing::warn!(confirmation = %id, chat = %scope.chat_id, "confirmation rejected: {why}");
        let unknown = no_call();
        let call = answer.original.as_ref().unwrap_or(&unknown);
        let note = Note::refused(scope, call, Some(who)).because(why.clone());
        self.note(note.on(Some(id))).await;
        Reached::Refused { refusal, why }
    }

    /// A decision out of band refused: audited as who made it and how.
    async fn refused_out_of_band(
        &self,
        who: Who<'_>,
        scope: &Scope,
        issued: &Issued,
        principal: &str,
        refusal: Refusal,
    ) -> Reached {
        let via = who.via();
        let (by, why) = match &refusal {
            Refusal::NotApprover(_) if principal.is_empty() => (
                format!("someone{via}"),
                format!("{refusal}; sign in to decide through a link"),
            ),
            Refusal::NoGrant(_) | Refusal::NoNarrowed(_) if principal == issued.principal => {
                (format!("user{via}"), refusal.to_string())
            }
            Refusal::NotApprover(_) | Refusal::NoGrant(_) | Refusal::NoNarrowed(_) => {
                (format!("{principal}{via}"), refusal.to_string())
            }
            _ => ("toolgate".to_owned(), refusal.to_string()),
        };
        let note = Note::refused(scope, &issued.call, who.identity()).by(by);
        let note = note.fingerprint(issued.fingerprint.as_ref());
        self.note(note.because(why.clone()).on(Some(&issued.id)))
            .await;
        Reached::Refused { refusal, why }
    }

    /// No question `id` the caller may see.
    pub(super) async fn not_found(&self, who: Who<'_>, id: &str) -> Reached {
        let caller = Scope {
            chat_id: String::new(),
            principal: who.principal().unwrap_or_default().to_owned(),
        };
        let nothing = no_call();
        let why = format!("no confirmation `{id}` for this user");
        let note = Note::refused(&caller, &nothing, who.identity()).because(why);
        self.note(note.on(Some(id))).await;
        Reached::NotFound
    }
}

/// What a decision out of band is told about a question decided before it:
/// the same decision again is a replay, another one a conflict, and one
/// that ended unanswered is too late.
pub(in crate::confirm) fn settled(id: &str, decision: &Decision, outcome: &Outcome) -> OutOfBand {
    if *outcome == Outcome::Expired {
        return OutOfBand::Expired(format!("confirmation `{id}` expired: {EXPIRED}"));
    }
    if *outcome == Outcome::Cancelled {
        return OutOfBand::Conflict(format!("confirmation `{id}` was cancelled: {CANCELLED}"));
    }
    match check::repeats(decision, outcome) {
        Ok(()) => OutOfBand::Decided(outcome.clone()),
        Err(earlier) => OutOfBand::Conflict(format!("confirmation `{id}` was already {earlier}")),
    }
}

/// The call an audit event names when the decision names none.
fn no_call() -> ToolCall {
    ToolCall {
        id: String::new(),
        name: String::new(),
        args: Value::Null,
    }
}
