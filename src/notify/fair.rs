//! Which delivery goes next (pure: no I/O, no clock). Deliveries wait in
//! a queue per principal (the user who asked) and take turns: each
//! principal in turn gets a delivery slot, at most [`PER_PRINCIPAL`] in
//! flight of one principal's and [`MAX_IN_FLIGHT`] in all, so one user's
//! burst neither holds every slot nor stands in front of another user's
//! question. A queue holds at most [`QUEUE_PER_PRINCIPAL`] deliveries;
//! one more is coalesced into the newest waiting delivery to the same
//! target (of the same chat if there is one), which then says how many
//! more questions wait: nothing is lost without a word.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::Target;
use crate::store::Issued;

/// Deliveries in flight at most, of all principals.
pub const MAX_IN_FLIGHT: usize = 64;
/// Deliveries in flight at most of one principal's questions.
pub const PER_PRINCIPAL: usize = 8;
/// Deliveries waiting at most per principal.
pub const QUEUE_PER_PRINCIPAL: usize = 64;
/// Deliveries waiting at most in all: past it, a principal with none
/// waiting has nothing to coalesce into, and its delivery is refused.
pub const QUEUED: usize = 4_096;

/// One question for one target.
pub struct Job {
    pub issued: Issued,
    pub target: Arc<Target>,
    /// Questions coalesced into this delivery, by id: it tells of them too.
    pub more: Vec<String>,
}

/// What became of a delivery handed to [`Fair::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// It waits its turn.
    Queued,
    /// Told in the delivery of this question instead.
    Coalesced { into: String },
    /// Nowhere to wait: every queue is full.
    Refused,
}

/// The queues and what is in flight.
#[derive(Default)]
pub struct Fair {
    /// Per principal, oldest first.
    waiting: HashMap<String, VecDeque<Job>>,
    /// The principals with deliveries waiting, whose turn comes first first.
    turns: VecDeque<String>,
    in_flight: HashMap<String, usize>,
    total_in_flight: usize,
    total_waiting: usize,
}

impl Fair {
    /// Queues `job`, or coalesces it when its principal's queue is full.
    pub fn push(&mut self, job: Job) -> Pushed {
        let principal = job.issued.principal.clone();
        let queue = self.waiting.entry(principal.clone()).or_default();
        if queue.len() < QUEUE_PER_PRINCIPAL && self.total_waiting < QUEUED {
            if queue.is_empty() {
                self.turns.push_back(principal);
            }
            queue.push_back(job);
            self.total_waiting += 1;
            return Pushed::Queued;
        }
        let same_target = |j: &Job| Arc::ptr_eq(&j.target, &job.target);
        let at = queue
            .iter()
            .rposition(|j| same_target(j) && j.issued.chat_id == job.issued.chat_id)
            .or_else(|| queue.iter().rposition(same_target));
        let into = at.and_then(|at| queue.get_mut(at));
        let pushed = match into {
            Some(into) => {
                into.more.push(job.issued.id);
                Pushed::Coalesced {
                    into: into.issued.id.clone(),
                }
            }
            None => Pushed::Refused,
        };
        if queue.is_empty() {
            self.waiting.remove(&principal);
        }
        pushed
    }

    /// The next delivery to start, if a slot is free for a principal with
    /// one waiting: the first in turn that is under its share, who then
    /// goes to the back of the line. Counted in flight until [`Fair::done`].
    pub fn next(&mut self) -> Option<Job> {
        if self.total_in_flight >= MAX_IN_FLIGHT {
            return None;
        }
        let at = self
            .turns
            .iter()
            .position(|p| self.in_flight.get(p).copied().unwrap_or(0) < PER_PRINCIPAL)?;
        let principal = self.turns.remove(at)?;
        let queue = self.waiting.get_mut(&principal)?;
        let job = queue.pop_front()?;
        self.total_waiting -= 1;
        if queue.is_empty() {
            self.waiting.remove(&principal);
        } else {
            self.turns.push_back(principal.clone());
        }
        *self.in_flight.entry(principal).or_default() += 1;
        self.total_in_flight += 1;
        Some(job)
    }

    /// A delivery of `principal`'s question ended: its slot is free.
    pub fn done(&mut self, principal: &str) {
        if let Some(n) = self.in_flight.get_mut(principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.in_flight.remove(principal);
            }
            self.total_in_flight = self.total_in_flight.saturating_sub(1);
        }
    }

    /// Deliveries waiting, and in flight.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        (self.total_waiting, self.total_in_flight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::ToolCall;
    use crate::protocol::ConfirmationProtocol;

    fn target() -> Arc<Target> {
        Arc::new(Target {
            name: "slack 1".into(),
            url: reqwest::Url::parse("https://s.example/x").unwrap_or_else(|e| panic!("{e}")),
            kind: super::super::Kind::Slack,
        })
    }

    fn job(target: &Arc<Target>, principal: &str, chat: &str, id: &str) -> Job {
        Job {
            issued: Issued {
                id: id.into(),
                chat_id: chat.into(),
                principal: principal.into(),
                protocol: ConfirmationProtocol::Adk,
                call: ToolCall {
                    id: format!("call-{id}"),
                    name: "process_payment".into(),
                    args: serde_json::json!({}),
                },
                hint: String::new(),
                issued_at_ms: 0,
                expires_at_ms: 1,
                kind: crate::store::RecordKind::Question,
                fingerprint: None,
            },
            target: target.clone(),
            more: Vec::new(),
        }
    }

    /// Who the next `n` deliveries are for (each left in flight).
    fn next_n(fair: &mut Fair, n: usize) -> Vec<String> {
        (0..n)
            .map_while(|_| fair.next())
            .map(|j| j.issued.principal)
            .collect()
    }

    #[test]
    fn a_burst_takes_its_share_and_the_others_go_first() {
        let t = target();
        let mut fair = Fair::default();
        let mut started = Vec::new();
        // As the gate does: each question queued, then what may start.
        for i in 0..70 {
            assert_eq!(
                fair.push(job(&t, "alice", &format!("c{i}"), &format!("a{i}"))),
                Pushed::Queued
            );
            started.extend(next_n(&mut fair, 100));
        }
        assert_eq!(started.len(), PER_PRINCIPAL, "alice's share only");
        assert_eq!(fair.push(job(&t, "bob", "b", "b1")), Pushed::Queued);
        assert_eq!(next_n(&mut fair, 100), ["bob"], "bob's at once");
        fair.done("alice");
        assert_eq!(
            next_n(&mut fair, 100),
            ["alice"],
            "a freed slot: alice's next"
        );
        assert_eq!(fair.counts(), (70 - PER_PRINCIPAL - 1, PER_PRINCIPAL + 1));
    }

    #[test]
    fn principals_take_turns() {
        let t = target();
        let mut fair = Fair::default();
        for (who, id) in [
            ("a", "1"),
            ("a", "2"),
            ("a", "3"),
            ("b", "4"),
            ("c", "5"),
            ("b", "6"),
        ] {
            assert_eq!(fair.push(job(&t, who, "chat", id)), Pushed::Queued);
        }
        assert_eq!(next_n(&mut fair, 10), ["a", "b", "c", "a", "b", "a"]);
    }

    #[test]
    fn past_its_queue_a_question_is_coalesced_never_dropped() {
        let (t, other) = (target(), target());
        let mut fair = Fair::default();
        for i in 0..QUEUE_PER_PRINCIPAL {
            let chat = if i == 0 { "first" } else { "burst" };
            assert_eq!(
                fair.push(job(&t, "alice", chat, &format!("a{i}"))),
                Pushed::Queued
            );
        }
        let last = format!("a{}", QUEUE_PER_PRINCIPAL - 1);
        #[rustfmt::skip]
        let cases: &[(&Arc<Target>, &str, &str, Pushed)] = &[
            // The newest waiting delivery of the same chat and target.
            (&t, "burst", "x1", Pushed::Coalesced { into: last.clone() }),
            (&t, "first", "x2", Pushed::Coalesced { into: "a0".into() }),
            // Another chat: the newest of the same target.
            (&t, "third", "x3", Pushed::Coalesced { into: last.clone() }),
            // Nothing of this target waits: refused, and said so.
            (&other, "burst", "x4", Pushed::Refused),
        ];
        for (target, chat, id, expected) in cases {
            assert_eq!(&fair.push(job(target, "alice", chat, id)), expected, "{id}");
        }
        let mut jobs: Vec<Job> = std::iter::from_fn(|| {
            let job = fair.next();
            fair.done("alice");
            job
        })
        .collect();
        assert_eq!(jobs.len(), QUEUE_PER_PRINCIPAL);
        let newest = jobs.pop().map(|j| j.more).unwrap_or_default();
        assert_eq!(newest, ["x1", "x3"]);
        assert_eq!(jobs[0].more, ["x2"]);
        assert_eq!(fair.counts(), (0, 0));
    }
}
