//! A question told to the inbox's readers and to the notification targets
//! (`notify`): each delivery waits in its principal's queue and runs, in
//! turn with other principals' (`notify`'s `fair.rs`: a share of the
//! slots each, `notify::MAX_IN_FLIGHT` in all), on the gate's tracked
//! tasks, so neither the turn nor the card waits for it. A question past
//! its principal's queue is coalesced into a waiting delivery, which says
//! how many more wait. Each delivery's end, and each coalesced question,
//! lands in the audit log.

use super::audit::Note;
use super::{Gate, Scope};
use crate::notify::{Notifier, Pushed};
use crate::store::{AuditDecision, Issued};

/// The audit reason of a delivery that had nowhere to wait.
const REFUSED: &str = "not delivered: every notification queue is full";

impl Gate {
    /// Tells each question asked to the targets the notifier names for its tool.
    pub fn with_notifier(mut self, notifier: Option<Notifier>) -> Self {
        self.notifier = notifier;
        self
    }

    /// Tells the inbox's readers of a question just issued, and queues its
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
        // Notifications and links' pages show the call as a person may see it.
        let shown = self.shown_issued(issued);
        for target in notifier.targets(&issued.call.name) {
            let name = target.name().to_owned();
            let reason = match notifier.push(&shown, target) {
                Pushed::Queued => continue,
                Pushed::Coalesced { into } => {
                    format!("coalesced: told with the announcement of {into}, too many waiting")
                }
                Pushed::Refused => REFUSED.to_owned(),
            };
            tracing::warn!(to = %name, confirmation = %issued.id, "{reason}");
            let note = Note::new(AuditDecision::Notified, &scope, &issued.call).by(name);
            self.note(note.because(reason).on(Some(&issued.id))).await;
        }
        self.deliver_next();
    }

    /// Starts every delivery a free slot allows, each on the gate's tracked
    /// tasks; each one, as it ends, starts the next.
    fn deliver_next(&self) {
        let Some(notifier) = &self.notifier else {
            return;
        };
        while let Some((job, slot)) = notifier.next() {
            let (gate, notifier) = (self.clone(), notifier.clone());
            let stop = self.stopping.clone();
            self.tasks.spawn(async move {
                let delivery = notifier.deliver(&job, &stop).await;
                drop(slot);
                gate.deliver_next();
                let issued = &job.issued;
                let scope = Scope {
                    chat_id: issued.chat_id.clone(),
                    principal: issued.principal.clone(),
                };
                let note = Note::new(AuditDecision::Notified, &scope, &issued.call)
                    .by(job.target.name().to_owned())
                    .reason(delivery.failure());
                gate.note(note.on(Some(&issued.id))).await;
            });
        }
    }
}
