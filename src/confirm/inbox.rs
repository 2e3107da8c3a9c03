//! The inbox: every open question a principal may decide, in every chat:
//! their own (they may at least deny them) and other users' whose tool
//! names them, or a role of theirs, among its approvers; and the signal
//! that tells its readers it changed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;

use super::records::asks;
use super::{Gate, GateError};
use crate::call::QualifiedName;
use crate::identity::Identity;
use crate::store::{Cursor, Issued, Page};

/// Open questions read from the store at once.
const PAGE: usize = 256;

/// Most open questions one listing reads, whoever may decide them: past
/// it, the listing ends with what it found (the newest questions missing).
const MOST_READ: usize = 10_000;

/// How long the first retry of a dropped subscription waits, and the most.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MOST: Duration = Duration::from_secs(30);

/// Which of the open questions a listing keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct InboxFilter {
    /// Only calls of this tool (its name or qualified name).
    pub tool: Option<String>,
    /// Only the questions this principal asked.
    pub principal: Option<String>,
    /// Only the caller's own.
    pub mine: bool,
    /// At most this many.
    pub limit: usize,
}

impl Gate {
    /// The open questions `who` may decide, oldest first, as `filter`
    /// keeps them (the roles `who`'s identity brings count).
    pub async fn inbox(
        &self,
        who: &Identity,
        filter: &InboxFilter,
    ) -> Result<Vec<Issued>, GateError> {
        let now = self.clock.now_ms();
        let caller = who.principal.as_str();
        let tool = filter.tool.as_deref().map(QualifiedName::of);
        // Who asked, when only one user's questions can be listed: the
        // store then reads theirs alone. A caller no rule names among its
        // approvers decides only their own questions.
        let roles = self.roles_with(caller, &who.roles);
        let decides_others = self.policy.names_approver(caller, &roles);
        let asker = match (&filter.principal, filter.mine || !decides_others) {
            (Some(p), true) if p != caller => return Ok(Vec::new()),
            (Some(p), _) => Some(p.as_str()),
            (None, true) => Some(caller),
            (None, false) => None,
        };
        let mut found = Vec::new();
        let mut after = None;
        let mut read = 0;
        while found.len() < filter.limit && read < MOST_READ {
            let page = Page {
                now_ms: now,
                after: after.as_ref(),
                limit: PAGE,
                asker,
            };
            let page = self.store.open_all(page).await?;
            read += page.len();
            let more = page.len() == PAGE;
            after = page.last().map(Cursor::after);
            found.extend(page.into_iter().filter(|issued| {
                asks(issued)
                    && filter
                        .principal
                        .as_ref()
                        .is_none_or(|p| issued.principal == *p)
                    && (!filter.mine || issued.principal == caller)
                    && tool
                        .as_ref()
                        .is_none_or(|t| QualifiedName::of(&issued.call.name) == *t)
                    // The rule a decision meets, for a denial (the user
                    // who asked may always make one).
                    && self.may_decide(issued, None, who, false).is_ok()
            }));
            if !more {
                break;
            }
        }
        found.truncate(filter.limit);
        Ok(found)
    }

    /// Changes each time a question is asked or taken (decided, expired,
    /// answered in the chat) here, or, with a store several instances
    /// share, on any of them. A receiver holds at most one change not yet
    /// seen, however many came.
    pub fn inbox_changes(&self) -> watch::Receiver<u64> {
        if self.store.is_shared() && !self.listening.swap(true, Ordering::AcqRel) {
            self.listen_to_others();
        }
        self.inbox.subscribe()
    }

    /// Tells the inbox's readers to look again.
    pub(super) fn inbox_changed(&self) {
        self.inbox.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Follows the changes other instances publish through the store, on
    /// the gate's tracked task until [`Gate::shutdown`]; subscribes again
    /// when the subscription drops, and then tells the readers to look
    /// again, for what changed meanwhile.
    fn listen_to_others(&self) {
        let gate = self.clone();
        let stopping = self.stopping.clone();
        self.tasks.spawn(async move {
            let mut wait = RETRY_FIRST;
            loop {
                let subscribed = tokio::select! {
                    () = stopping.cancelled() => return,
                    subscribed = gate.store.changes() => subscribed,
                };
                match subscribed {
                    Ok(Some(mut changes)) => {
                        wait = RETRY_FIRST;
                        gate.inbox_changed();
                        loop {
                            tokio::select! {
                                () = stopping.cancelled() => return,
                                change = changes.next() => match change {
                                    Some(()) => gate.inbox_changed(),
                                    None => break,
                                },
                            }
                        }
                        tracing::warn!("the inbox's subscription to other instances dropped");
                    }
                    Ok(None) => return,
                    Err(e) => tracing::warn!("cannot follow other instances' questions: {e}"),
                }
                tokio::select! {
                    () = stopping.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(RETRY_MOST);
            }
        });
    }
}
