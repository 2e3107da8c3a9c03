//! The run API for the questions a person decides outside a chat's own
//! stream: [`Questions`]. The decisions API (a card's `GET` and `POST`, the
//! inbox and its live feed, remembered approvals and grants, the audit log)
//! and a signed link's page reach the gate only through it.
//!
//! Every check of who may see what happens here, once: a question is shown
//! to the user who asked it or someone who may decide it; a principal's
//! records are their own, another's only to an operator; what a person is
//! shown has its masked values masked; and whether they may approve is
//! judged as the decision pipeline judges it. A face decodes its wire,
//! calls one method, and encodes what it gets.

use std::borrow::Cow;
use std::sync::Arc;

use tokio::sync::watch;

use crate::confirm::{
    Decision, Gate, GateError, GrantView, InboxFilter, Inventory, LinkQuestion, OutOfBand, Revoked,
    Scope, Standing,
};
use crate::identity::{Approver, Identity};
use crate::shares::{Pool, ShareLimits, Shares};
use crate::store::{AuditEvent, AuditPage, Issued, Remembered};

/// Why [`Questions`] refused a request.
#[derive(Debug, thiserror::Error)]
pub enum QuestionError {
    /// Another principal's records, asked for by someone who is not an
    /// operator.
    #[error("only an operator may read or revoke another principal's records")]
    NotOperator,
    /// The store (or the gate over it) failed.
    #[error(transparent)]
    Core(#[from] GateError),
}

/// Whose records a request reads or revokes: the caller's own, or with
/// `of` another principal's (an operator's caller only).
#[derive(Debug, Clone)]
pub struct Whose {
    pub who: Identity,
    /// The caller's key is an operator's.
    pub operator: bool,
    /// The principal the request names, if any.
    pub of: Option<String>,
}

impl Whose {
    /// The principal whose records these are.
    fn principal(&self) -> Result<&str, QuestionError> {
        match &self.of {
            Some(other) if *other != self.who.principal && !self.operator => {
                Err(QuestionError::NotOperator)
            }
            Some(other) => Ok(other),
            None => Ok(&self.who.principal),
        }
    }

    /// Who revokes `principal`'s record, for the audit log: the user, or
    /// an operator by name.
    fn revoker(&self, principal: &str) -> String {
        if self.who.principal == principal {
            "user".to_owned()
        } else {
            format!("operator {}", self.who.principal)
        }
    }
}

/// An open question as a card shows it to one person: as they are shown
/// it, and what they may do with it.
#[derive(Debug, Clone)]
pub struct Card {
    /// The question, its masked values masked.
    pub issued: Issued,
    /// Left until it expires, by the gate's clock (a browser's may differ).
    pub expires_in_ms: u64,
    /// Whether its arguments may be edited on approval.
    pub editable: bool,
    /// Who must approve: principals, or `role:NAME`; empty, the user who
    /// asked.
    pub approvers: Vec<String>,
    /// Whether the approver must be someone other than the user who asked.
    pub distinct: bool,
    /// Whether this person may approve it, as the decision pipeline judges
    /// it: the roles and source of their identity count.
    pub may_approve: bool,
}

/// One question as its card reads it, open or not: as shown, where it
/// stands, and who decided it, once it ended.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The question, its masked values masked.
    pub issued: Issued,
    pub standing: Standing,
    /// Who decided and how toolgate knew them (the audit log's `approver`):
    /// looked up only for a question that ended.
    pub approver: Option<Approver>,
}

/// The questions people decide, and their records, through the gate: the
/// decisions API's and a link page's only handle on the core.
#[derive(Debug, Clone)]
pub struct Questions {
    gate: Gate,
    /// The inbox's live streams: every caller's share, and the total.
    inbox_streams: Arc<Shares>,
}

impl Questions {
    /// The door to `gate`'s questions; the inbox's streams are capped
    /// by `inbox_streams`.
    pub fn new(gate: Gate, inbox_streams: ShareLimits) -> Self {
        Self {
            gate,
            inbox_streams: Shares::new(Pool::InboxStreams, inbox_streams),
        }
    }

    /// The pool every inbox stream takes its place in, per caller and in
    /// total (`stream.maxInboxStreamsPerUser`, `stream.maxInboxStreams`).
    pub fn inbox_streams(&self) -> Arc<Shares> {
        self.inbox_streams.clone()
    }

    /// The gate behind the door, for the door's own files.
    pub(super) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The gate's clock, in milliseconds since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.gate.now_ms()
    }

    /// `who`'s decision on the open question `id`, through the one decision
    /// pipeline (with the roles and source `who`'s identity brings); a held
    /// turn shows the outcome on its own stream. Every decision made out of
    /// band, from any face, is made here.
    pub async fn decide(
        &self,
        who: &Identity,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        self.gate.decide_out_of_band(who, id, decision).await
    }

    /// The question `id` for `who`: the user who asked, or someone who may
    /// decide it; `None` for anyone else, as if there were no such question.
    pub async fn show(&self, who: &Identity, id: &str) -> Result<Option<Asked>, GateError> {
        let Some(question) = self.gate.question_for(who, id).await? else {
            return Ok(None);
        };
        let issued = self.shown(question.issued);
        let approver = match question.standing {
            Standing::Expired | Standing::Decided(_) => self.gate.decided_by(&issued).await?,
            Standing::Open | Standing::Deciding => None,
        };
        Ok(Some(Asked {
            issued,
            standing: question.standing,
            approver,
        }))
    }

    /// `who`'s own open questions in `chat_id`, for a page that reloads.
    pub async fn in_chat(&self, who: &Identity, chat_id: String) -> Result<Vec<Card>, GateError> {
        let scope = Scope {
            chat_id,
            principal: who.principal.clone(),
        };
        let now = self.gate.now_ms();
        let open = self.gate.open(&scope).await?;
        Ok(open.into_iter().map(|i| self.card(i, who, now)).collect())
    }

    /// `who`'s inbox: every open question they may decide, in every chat,
    /// oldest first, as `filter` keeps them.
    pub async fn inbox(
        &self,
        who: &Identity,
        filter: &InboxFilter,
    ) -> Result<Vec<Card>, GateError> {
        let now = self.gate.now_ms();
        let open = self.gate.inbox(who, filter).await?;
        Ok(open.into_iter().map(|i| self.card(i, who, now)).collect())
    }

    /// A signal that every inbox may have changed: a question asked or
    /// taken, here or on an instance sharing the store.
    pub fn inbox_changes(&self) -> watch::Receiver<u64> {
        self.gate.inbox_changes()
    }

    /// The question `id` as a signed link's page shows it (the token was
    /// verified already: it is the authority), masked values masked; `None`
    /// when the store no longer knows it.
    pub async fn for_link(&self, id: &str) -> Result<Option<LinkQuestion>, GateError> {
        let question = self.gate.link_question(id).await?;
        Ok(question.map(|q| LinkQuestion {
            issued: self.shown(q.issued),
            standing: q.standing,
        }))
    }

    /// Decides the question `id` through a link sent to the target named
    /// `via`, followed by `caller` when the request names one. The link
    /// never widens who may decide.
    pub async fn decide_by_link(
        &self,
        id: &str,
        decision: Decision,
        via: String,
        caller: Option<Identity>,
    ) -> Result<OutOfBand, GateError> {
        self.gate.decide_by_link(id, decision, via, caller).await
    }

    /// The remembered approvals of `whose` principal.
    pub async fn remembered(&self, whose: &Whose) -> Result<Vec<Remembered>, QuestionError> {
        let principal = whose.principal()?;
        Ok(self.gate.remembered(principal).await?)
    }

    /// Revokes one of `whose` principal's remembered approvals: whether
    /// they had one by that id.
    pub async fn revoke(&self, whose: &Whose, id: &str) -> Result<bool, QuestionError> {
        let principal = whose.principal()?;
        let by = whose.revoker(principal);
        Ok(self.gate.revoke(principal, id, by).await?)
    }

    /// The narrowed grants of `whose` principal, each with its state.
    pub async fn grants(&self, whose: &Whose) -> Result<Vec<GrantView>, QuestionError> {
        let principal = whose.principal()?;
        Ok(self.gate.grants(principal).await?)
    }

    /// Revokes one of `whose` principal's narrowed grants.
    pub async fn revoke_grant(&self, whose: &Whose, id: &str) -> Result<Revoked, QuestionError> {
        let principal = whose.principal()?;
        let by = whose.revoker(principal);
        Ok(self.gate.revoke_grant(principal, id, by).await?)
    }

    /// The tools and MCP servers, as the policy sees them.
    pub fn inventory(&self) -> Inventory {
        self.gate.inventory()
    }

    /// At most `limit` events of `whose` principal's audit log (in
    /// `chat_id` alone, when named) from `since_ms` on, oldest first.
    pub async fn audit(
        &self,
        whose: &Whose,
        chat_id: Option<&str>,
        since_ms: u64,
        limit: usize,
    ) -> Result<Vec<AuditEvent>, QuestionError> {
        let principal = whose.principal()?;
        let page = AuditPage {
            principal,
            chat_id,
            since_ms,
            limit,
        };
        Ok(self.gate.audit_log(page).await?)
    }

    /// `issued` as a person is shown it.
    fn shown(&self, issued: Issued) -> Issued {
        let masked = match self.gate.shown_issued(&issued) {
            Cow::Owned(shown) => Some(shown),
            Cow::Borrowed(_) => None,
        };
        masked.unwrap_or(issued)
    }

    /// `issued` as `who`'s card shows it at `now`: who may approve is judged
    /// on the question as asked, before anything is masked.
    fn card(&self, issued: Issued, who: &Identity, now: u64) -> Card {
        let approvers = self.gate.approvers(&issued.call);
        let (approvers, distinct) = (approvers.listed.to_vec(), approvers.distinct);
        let may_approve = self.gate.may_approve(&issued, who);
        let editable = self.gate.editable(&issued.call.name);
        let issued = self.shown(issued);
        Card {
            expires_in_ms: issued.expires_at_ms.saturating_sub(now),
            issued,
            editable,
            approvers,
            distinct,
            may_approve,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_operator_names_another_principal() {
        let whose = |operator: bool, of: Option<&str>| Whose {
            who: Identity::new("alice", crate::identity::Source::Key),
            operator,
            of: of.map(str::to_owned),
        };
        #[rustfmt::skip]
        let cases: &[(bool, Option<&str>, Option<&str>, &str)] = &[
            // operator, ?principal=, whose records, who revokes them
            (false, None, Some("alice"), "user"),
            (false, Some("alice"), Some("alice"), "user"),
            (false, Some("bo"), None, ""),
            (true, Some("bo"), Some("bo"), "operator alice"),
            (true, None, Some("alice"), "user"),
        ];
        for (operator, of, expected, revoker) in cases {
            let whose = whose(*operator, *of);
            match (whose.principal(), expected) {
                (Ok(principal), Some(expected)) => {
                    assert_eq!(principal, *expected);
                    assert_eq!(whose.revoker(principal), *revoker);
                }
                (Err(QuestionError::NotOperator), None) => {}
                (got, _) => panic!("{operator} {of:?}: {got:?}"),
            }
        }
    }
}
