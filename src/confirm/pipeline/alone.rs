//! The decisions the gate takes alone, on a question or a record it makes:
//! a record decided as it is made (a client tool's hand-off, an upstream
//! agent's question the policy decides, a client's result taken), a
//! question whose window closed (the sweep, a held turn), one closed by a
//! new message (`onNewMessage: cancel`), one a remembered approval now
//! covers; and the end of one whose tool changed since it was asked
//! (stale), which a person's approval found, and is refused as theirs.

use super::super::audit::Note;
use super::super::check::stale_text;
use super::super::{Answered, CANCELLED, EXPIRED, Gate, GateError, OUTCOME_UNKNOWN, Scope};
use super::Lost;
use crate::identity::Identity;
use crate::store::{AuditDecision, Claim, Issued, Outcome, StoreError};

impl Gate {
    /// A record the gate decides as it makes it (a hand-off, an upstream
    /// agent's question the policy decides, a client's result taken):
    /// inserted, claimed at its issue time, and closed with `outcome`.
    pub(in crate::confirm) async fn issue_closed(
        &self,
        issued: Issued,
        outcome: Outcome,
    ) -> Result<(), GateError> {
        let (id, now) = (issued.id.clone(), issued.issued_at_ms);
        self.store.insert(issued).await?;
        if self.claim(&id, now).await? != Claim::Won {
            return Err(GateError::Store(StoreError::NotClaimed(id)));
        }
        self.close(&id, outcome).await
    }

    /// A question nobody decided in its window: ended as expired, unless a
    /// decision wins the claim at that moment (then its outcome).
    pub(in crate::confirm) async fn expire(
        &self,
        scope: &Scope,
        issued: &Issued,
    ) -> Result<Outcome, GateError> {
        let id = issued.id.as_str();
        let claim = match self.claim(id, self.clock.now_ms()).await {
            // Forgotten meanwhile: it expired all the same.
            Err(StoreError::NotClaimed(_)) => Claim::Done(Outcome::Expired),
            claim => claim?,
        };
        let outcome = match claim {
            Claim::Won => {
                self.close(id, Outcome::Expired).await?;
                let waited = self.clock.now_ms().saturating_sub(issued.issued_at_ms);
                self.metrics.confirmation_waited(waited);
                let note = Note::new(AuditDecision::Expired, scope, &issued.call);
                let note = note.fingerprint(issued.fingerprint.as_ref());
                self.note(note.because(EXPIRED).on(Some(id))).await;
                Outcome::Expired
            }
            Claim::Done(outcome) => outcome,
            Claim::InFlight { since_ms, orphaned } => self
                .claimed_outcome(id, since_ms, orphaned)
                .await?
                .unwrap_or_else(unknown),
        };
        Ok(outcome)
    }

    /// The outcome of question `id`, claimed by a decision: recorded, or
    /// waited for while its instance lives and its call may still run,
    /// else unknown. A claim is never undone, so claiming a claimed
    /// question only reads its claim.
    pub(in crate::confirm) async fn in_flight(&self, id: &str) -> Result<Outcome, GateError> {
        Ok(match self.claim(id, self.clock.now_ms()).await? {
            Claim::Done(outcome) => outcome,
            Claim::InFlight { since_ms, orphaned } => self
                .claimed_outcome(id, since_ms, orphaned)
                .await?
                .unwrap_or_else(unknown),
            // Not claimed after all: nothing ran, and nothing will.
            Claim::Won => {
                self.close(id, unknown()).await?;
                unknown()
            }
        })
    }

    /// Ends a question an approval found stale (its tool is no longer
    /// offered as it was asked about): closed with an error the model
    /// reads, nothing run. `None` when it ended as stale (now or by an
    /// earlier approval: each is refused and audited, naming `tried`, who
    /// approved); else how it stands (decided first, or being decided).
    pub(super) async fn end_stale(
        &self,
        scope: &Scope,
        issued: &Issued,
        now_ms: u64,
        tried: Option<&Identity>,
    ) -> Result<Option<Lost>, GateError> {
        let id = issued.id.as_str();
        let message = stale_text(&issued.call.name);
        let stale = Outcome::Error {
            message: message.clone(),
            ran_with: None,
        };
        match self.claim(id, now_ms).await? {
            Claim::Won => self.close(id, stale).await?,
            Claim::Done(outcome) if outcome == stale => {}
            Claim::Done(outcome) => return Ok(Some(Lost::Earlier(outcome))),
            Claim::InFlight { since_ms, orphaned } => {
                return Ok(Some(
                    match self.claimed_outcome(id, since_ms, orphaned).await? {
                        Some(outcome) => Lost::Earlier(outcome),
                        None => Lost::Unknown,
                    },
                ));
            }
        }
        let note = Note::refused(scope, &issued.call, tried);
        let note = note.fingerprint(issued.fingerprint.as_ref());
        self.note(note.because(message).on(Some(id))).await;
        Ok(None)
    }

    /// Closes an open question as cancelled (`onNewMessage: cancel`): its
    /// outcome, or `None` while a decision is being made (or it is gone).
    pub(in crate::confirm) async fn cancel(
        &self,
        scope: &Scope,
        issued: &Issued,
        now_ms: u64,
    ) -> Result<Option<Outcome>, GateError> {
        let id = issued.id.as_str();
        Ok(Some(match self.claim(id, now_ms).await {
            Ok(Claim::Won) => {
                self.close(id, Outcome::Cancelled).await?;
                let note = Note::new(AuditDecision::Cancelled, scope, &issued.call);
                let note = note.fingerprint(issued.fingerprint.as_ref());
                self.note(note.because(CANCELLED).on(Some(id))).await;
                Outcome::Cancelled
            }
            Ok(Claim::Done(outcome)) => outcome,
            // Decided this moment, or forgotten: nothing to report yet.
            Ok(Claim::InFlight { .. }) | Err(StoreError::NotClaimed(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        }))
    }

    /// Approves an open question a remembered approval now covers: claims
    /// it and starts the call (or hands it out), as an approval would.
    pub(in crate::confirm) async fn approve_remembered(
        &self,
        scope: &Scope,
        issued: Issued,
        now_ms: u64,
    ) -> Result<Option<Answered>, GateError> {
        let id = issued.id.as_str();
        match self.claim(id, now_ms).await? {
            Claim::Won => {
                // Started (or handed out) first; the audit event follows.
                let answered = if self.runs_elsewhere(&issued.call.name) {
                    let outcome = Outcome::HandedOff { ran_with: None };
                    self.close(id, outcome).await?;
                    Answered::Client {
                        call: issued.call.clone(),
                    }
                } else {
                    let call = issued.call.clone();
                    let chat = &scope.chat_id;
                    let outcome =
                        self.start_confirmed(id.to_owned(), call.clone(), None, chat, None);
                    Answered::Running { call, outcome }
                };
                let note = Note::new(AuditDecision::Approved, scope, &issued.call);
                let note = note.fingerprint(issued.fingerprint.as_ref());
                self.note(note.by("remembered approval").on(Some(id))).await;
                Ok(Some(answered))
            }
            Claim::Done(outcome) => Ok(Some(Answered::Recorded {
                call: issued.call,
                outcome,
            })),
            Claim::InFlight { .. } => Ok(None),
        }
    }
}

/// The outcome of a claim whose decision never said it.
fn unknown() -> Outcome {
    Outcome::Error {
        message: OUTCOME_UNKNOWN.into(),
        ran_with: None,
    }
}
