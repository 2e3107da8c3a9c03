//! A decision through a signed link (`notify`'s approve and deny links,
//! followed on toolgate's own page). The token was verified before anything
//! is looked up; the question is then decided exactly as through the API
//! (the decision pipeline: the same checks, the store's claim, so one
//! use), as its own principal, and the audit log says which link it came
//! through.

use super::pipeline::Who;
use super::{Decision, Gate, GateError, OutOfBand};
use crate::identity::Identity;
use crate::store::{Issued, Outcome, Status};

/// Where a question stands, for a link's page.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    Open,
    /// Claimed, its outcome not recorded yet.
    Deciding,
    Decided(Outcome),
    Expired,
}

/// A question as a link's page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkQuestion {
    pub issued: Issued,
    pub standing: Standing,
}

impl Gate {
    /// The question `id` and where it stands; `None` when the store does
    /// not know it (forgotten after it expired).
    pub async fn link_question(&self, id: &str) -> Result<Option<LinkQuestion>, GateError> {
        let Some(issued) = self.store.get(id).await? else {
            return Ok(None);
        };
        let expired = self.clock.now_ms() > issued.expires_at_ms;
        let standing = match self.store.status(id).await? {
            Some(Status::Done(Outcome::Expired)) => Standing::Expired,
            Some(Status::Done(outcome)) => Standing::Decided(outcome),
            _ if expired => Standing::Expired,
            Some(Status::Claimed { .. }) => Standing::Deciding,
            Some(Status::Pending) | None => Standing::Open,
        };
        Ok(Some(LinkQuestion { issued, standing }))
    }

    /// The question `id` and where it stands, for `who`: the user who
    /// asked, or someone who may decide it; `None` for anyone else (as if
    /// there were no such question).
    pub async fn question_for(
        &self,
        who: &Identity,
        id: &str,
    ) -> Result<Option<LinkQuestion>, GateError> {
        let question = self.link_question(id).await?;
        Ok(question.filter(|q| self.may_decide(&q.issued, None, who, false).is_ok()))
    }

    /// Decides the question `id` through a link sent to the target named
    /// `via`, followed by `caller` (when the request names one): like
    /// [`Gate::decide_out_of_band`] in everything else, approvers and
    /// `approverIdentity` included. A link's bearer whom the request does
    /// not name decides only what its asker decides alone, and meets no
    /// `approverIdentity`: the link never widens who may decide.
    pub async fn decide_by_link(
        &self,
        id: &str,
        decision: Decision,
        via: String,
        caller: Option<Identity>,
    ) -> Result<OutOfBand, GateError> {
        let (gate, id) = (self.clone(), id.to_owned());
        self.to_the_end(async move {
            let who = Who::Link {
                target: &via,
                caller: caller.as_ref(),
            };
            gate.decide_here(who, &id, decision).await
        })
        .await
    }
}
