//! Where a turn is polled: by the reader waiting for its next chunk, in
//! that reader's task, until it needs a tracked task of its own.

use std::sync::{Mutex, MutexGuard};
use std::task::Context;
use std::time::Duration;

use slab::Slab;
use tokio::sync::{Notify, watch};
use tokio_util::task::TaskTracker;

use super::entries::Entries;

/// Chunks the producer may run ahead of its slowest reader.
pub(super) const LAG: usize = 256;
/// Most chunks appended to the log at once.
/// A turn its readers have not polled for this long moves to a task of its
/// own: a reader whose client stopped reading polls nothing, and the turn
/// must still notice (and stop after [`Limits::stall`]).
pub(super) const DETACH_AFTER: Duration = Duration::from_secs(1);

/// One turn's log, and the turn itself while a reader drives it.
///
/// A turn is polled by the task of the reader that waits for its next
/// chunk (the response's own task): no hand-off between two tasks per
/// batch while a request reads its own turn. It moves to a task of its
/// own when it waits for a human (its readers may all leave; an answer may
/// come through another request), when its last reader leaves (it must
/// notice, stop, or stay held), or when no reader polled it for
/// [`DETACH_AFTER`] ([`sweep`]); a turn with a shared log has its own task
/// from the start. From then on its task runs it to its end.
pub struct Run {
    pub(super) id: u64,
    pub(super) log: Mutex<Log>,
    pub(super) changed: Notify,
    /// Told when the turn gains its first reader or loses its last (its
    /// readers are its log's cursors): a plain `Notify`, where a watch of
    /// the count would wake each of its eight lists at every reader.
    pub(super) presence: Notify,
    /// Where the turn goes when it needs a task of its own.
    pub(super) tasks: TaskTracker,
    /// Whether the turn waits for a human.
    pub(super) asking: watch::Receiver<bool>,
}

/// The turn's future: a whole turn's state, boxed once.
pub(super) type Work = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Where the turn is.
#[derive(Default)]
pub(super) enum Driver {
    /// Waiting for a reader to poll it.
    Idle(Work),
    /// A reader is polling it now.
    Polling,
    /// Stopped while a reader was polling it: that reader drops it.
    Aborted,
    /// On a task of its own.
    Spawned(tokio::task::AbortHandle),
    /// Ended, or stopped.
    #[default]
    Ended,
}

impl Run {
    pub(super) fn new(id: u64, tasks: TaskTracker, asking: watch::Receiver<bool>) -> Self {
        Self {
            id,
            log: Mutex::new(Log::default()),
            changed: Notify::new(),
            presence: Notify::new(),
            tasks,
            asking,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_done(&self) -> bool {
        self.lock().done
    }

    /// Whether anybody reads the turn here.
    pub(super) fn has_readers(&self) -> bool {
        !self.lock().cursors.is_empty()
    }

    /// Stops the turn: the model and tools still running are dropped.
    pub fn abort(&self) {
        let (idle, task) = {
            let mut log = self.lock();
            match std::mem::take(&mut log.driver) {
                Driver::Idle(work) => (Some(work), None),
                Driver::Polling | Driver::Aborted => {
                    log.driver = Driver::Aborted;
                    (None, None)
                }
                Driver::Spawned(task) => (None, Some(task)),
                Driver::Ended => (None, None),
            }
        };
        // Outside the lock: dropping the turn marks its log done.
        drop(idle);
        if let Some(task) = task {
            task.abort();
        }
    }

    /// Polls the turn in the caller's task, unless another reader is
    /// polling it or it has a task of its own. A turn that now waits for a
    /// human moves to its own task.
    pub(super) fn drive(&self, cx: &mut Context<'_>) {
        let mut work = {
            let mut log = self.lock();
            match std::mem::replace(&mut log.driver, Driver::Polling) {
                Driver::Idle(work) => work,
                other => {
                    log.driver = other;
                    return;
                }
            }
        };
        let ended = work.as_mut().poll(cx).is_ready();
        let asking = *self.asking.borrow();
        let work = {
            let mut log = self.lock();
            log.polled = tokio::time::Instant::now();
            match std::mem::take(&mut log.driver) {
                Driver::Polling if !ended && !asking => {
                    log.driver = Driver::Idle(work);
                    return;
                }
                Driver::Polling if !ended => {
                    log.driver = Driver::Polling;
                    Some(work)
                }
                // Ended, or stopped meanwhile: dropped outside the lock,
                // where dropping the turn marks its log done.
                _ => None,
            }
        };
        if let Some(work) = work {
            self.detach(work);
        }
    }

    /// Moves the turn to a task of its own if no reader polled it since
    /// `before`; whether it is still driven by its readers.
    pub(super) fn detach_unpolled(&self, before: tokio::time::Instant) -> bool {
        let work = {
            let mut log = self.lock();
            match std::mem::take(&mut log.driver) {
                Driver::Idle(work) if log.polled <= before => {
                    log.driver = Driver::Polling;
                    work
                }
                other => {
                    let inline = matches!(other, Driver::Idle(_) | Driver::Polling);
                    log.driver = other;
                    return inline;
                }
            }
        };
        self.detach(work);
        false
    }

    /// Puts the turn, taken out of its log (marked `Polling` there, so
    /// that an abort meanwhile is kept), on a task of its own. Never under
    /// the lock: a runtime that is shutting down drops the turn at once,
    /// and dropping it marks the log done; without a runtime it is dropped.
    pub(super) fn detach(&self, work: Work) {
        let task = match tokio::runtime::Handle::try_current() {
            Ok(handle) => Some(self.tasks.spawn_on(work, &handle).abort_handle()),
            Err(_) => {
                drop(work);
                None
            }
        };
        let aborted = {
            let mut log = self.lock();
            match (std::mem::take(&mut log.driver), task) {
                (Driver::Polling, Some(task)) => {
                    log.driver = Driver::Spawned(task);
                    None
                }
                (Driver::Aborted, task) => task,
                _ => None,
            }
        };
        if let Some(task) = aborted {
            task.abort();
        }
    }

    /// Whether its readers drive it (no task of its own).
    #[cfg(test)]
    pub(super) fn is_inline(&self) -> bool {
        matches!(self.lock().driver, Driver::Idle(_) | Driver::Polling)
    }
}

/// The turn's log and where the turn is, under one lock.
pub(super) struct Log {
    /// The chunks, numbered from `entries.first()`.
    pub(super) entries: Entries,
    pub(super) done: bool,
    /// Each reader's next chunk number, at the reader's key: a slab, so
    /// that a reader's read of each batch hashes nothing.
    pub(super) cursors: Slab<usize>,
    pub(super) driver: Driver,
    /// When a reader last polled the turn (or it started).
    pub(super) polled: tokio::time::Instant,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            entries: Entries::default(),
            done: false,
            cursors: Slab::new(),
            driver: Driver::Ended,
            polled: tokio::time::Instant::now(),
        }
    }
}

impl Log {
    pub(super) fn end(&self) -> usize {
        self.entries.end()
    }

    /// The number of the first chunk kept.
    pub(super) fn first(&self) -> usize {
        self.entries.first()
    }

    pub(super) fn slowest(&self) -> Option<usize> {
        self.cursors.iter().map(|(_, &at)| at).min()
    }

    /// The slowest reader is more than [`LAG`] chunks behind.
    pub(super) fn is_behind(&self) -> bool {
        self.slowest().is_some_and(|s| self.end() - s > LAG)
    }
}
