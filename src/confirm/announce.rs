//! A question told to the inbox's readers and to the notification targets
//! (`notify`): each delivery runs on the gate's tracked tasks, so neither
//! the turn nor the card waits for it, at most `notify::MAX_IN_FLIGHT` at
//! once (beyond, dropped, said in the log and the audit log); each
//! delivery's end lands in the audit log.

use super::{Gate, Scope};
use crate::notify::Notifier;
use crate::store::{AuditDecision, Issued};

/// The audit reason of a delivery that never started.
const DROPPED: &str = "dropped: too many notifications in flight";

impl Gate {
    /// Tells each question asked to the targets the notifier names for its tool.
    pub fn with_notifier(mut self, notifier: Option<Notifier>) -> Self {
        self.notifier = notifier;
        self
    }

    /// Tells the inbox's readers of a question just issued, and starts its
    /// deliveries; returns at once.
    pub(super) async fn announce(&self, issued: &Issued) {
        self.inbox_changed();
        let Some(notifier) = &self.notifier else {
            return;
        };
        let scope = Scope {
            chat_id: issued.chat_id.clone(),
            principal: issued.principal.clone(),
        };
        for target in notifier.targets(&issued.call.name) {
            let name = target.name().to_owned();
            let Some(slot) = notifier.slot() else {
                tracing::warn!(to = %name, confirmation = %issued.id, "{DROPPED}");
                let reason = Some(DROPPED.to_owned());
                let id = Some(issued.id.as_str());
                self.note(
                    &scope,
                    &issued.call,
                    AuditDecision::Notified,
                    name,
                    reason,
                    id,
                )
                .await;
                continue;
            };
            let (gate, notifier) = (self.clone(), notifier.clone());
            let (issued, scope) = (issued.clone(), scope.clone());
            let stop = self.stopping.clone();
            self.tasks.spawn(async move {
                let delivery = notifier.deliver(&target, &issued, &stop).await;
                drop(slot);
                let id = Some(issued.id.as_str());
                let reason = delivery.failure();
                gate.note(
                    &scope,
                    &issued.call,
                    AuditDecision::Notified,
                    name,
                    reason,
                    id,
                )
                .await;
            });
        }
    }
}
