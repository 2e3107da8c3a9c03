//! A thread's questions as a resume answers them (AG-UI's interrupts):
//! which are open, which one a resume may answer — this caller's, in this
//! thread, unexpired — and which a finished run still waits on. The checks
//! of scope and expiry are here, once; the face words what it gets.

use serde_json::Value;

use super::Questions;
use crate::confirm::{GateError, OutsideQuestion, Scope};
use crate::identity::Identity;
use crate::store::{Issued, Outcome};

/// A question a resume may answer, and how.
#[derive(Debug, Clone)]
pub struct Answerable {
    pub issued: Issued,
    /// The policy lets its approval be remembered.
    pub may_remember: bool,
    /// Its arguments may be edited before approving.
    pub editable: bool,
}

/// Why a resume may not answer a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAnswerable {
    /// No such question for this caller in this thread (another's, or
    /// another thread's, is told apart from none by nobody).
    Unknown,
    /// It expired: nothing was, or will be, decided.
    Expired,
}

/// A question a finished run still waits on, as its asker is shown it.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub answerable: Answerable,
    /// Its tool's parameters, for the edit a response may carry.
    pub parameters: Option<Value>,
}

impl Questions {
    /// The ids of `who`'s open questions in `thread`.
    pub async fn open_in(&self, who: &Identity, thread: &str) -> Result<Vec<String>, GateError> {
        let open = self.gate().open(&scope(who, thread)).await?;
        Ok(open.into_iter().map(|issued| issued.id).collect())
    }

    /// Question `id`, if a resume of `who`'s in `thread` may answer it.
    pub async fn answerable(
        &self,
        who: &Identity,
        thread: &str,
        id: &str,
    ) -> Result<Result<Answerable, NotAnswerable>, GateError> {
        let now = self.gate().now_ms();
        let (issued, expired) = match self.gate().question(id).await? {
            None => return Ok(Err(NotAnswerable::Unknown)),
            Some(OutsideQuestion::Open(issued)) => {
                let expired = issued.expires_at_ms <= now;
                (issued, expired)
            }
            Some(OutsideQuestion::Decided(issued, outcome)) => {
                (issued, outcome == Outcome::Expired)
            }
        };
        if issued.chat_id != thread || issued.principal != who.principal {
            return Ok(Err(NotAnswerable::Unknown));
        }
        if expired {
            return Ok(Err(NotAnswerable::Expired));
        }
        Ok(Ok(self.answerable_of(issued)))
    }

    /// Of the questions `ids` a run of `who`'s in `thread` asked, those
    /// still open, as they are shown, with their tools' parameters.
    pub async fn waiting(
        &self,
        who: &Identity,
        thread: &str,
        ids: Vec<String>,
    ) -> Result<Vec<Waiting>, GateError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let tools = self.gate().tools();
        let mut waiting = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(OutsideQuestion::Open(issued)) = self.gate().question(&id).await? else {
                continue;
            };
            if issued.chat_id != thread || issued.principal != who.principal {
                continue;
            }
            let parameters = tools
                .iter()
                .find(|tool| tool.name == issued.call.name)
                .map(|tool| tool.parameters.clone());
            let mut answerable = self.answerable_of(issued);
            answerable.issued = self.gate().shown_issued(&answerable.issued).into_owned();
            waiting.push(Waiting {
                answerable,
                parameters,
            });
        }
        Ok(waiting)
    }

    fn answerable_of(&self, issued: Issued) -> Answerable {
        Answerable {
            may_remember: self.gate().may_remember(&issued.call),
            editable: self.gate().editable(&issued.call.name),
            issued,
        }
    }
}

fn scope(who: &Identity, thread: &str) -> Scope {
    Scope {
        chat_id: thread.to_owned(),
        principal: who.principal.clone(),
    }
}
