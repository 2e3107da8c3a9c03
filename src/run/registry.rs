//! The registry: at most one resumable turn per (principal, chat), the
//! limits on turns in flight, and the start of a turn (its log, its
//! shared log, its driver).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::driver::{DETACH_AFTER, Driver, Run, Work};
use super::entries::Entries;
use super::limits::{Limits, Owner, RunError};
use super::log::{MAX_LOG_BYTES, Stall, Subscription, produce};
use crate::agent::Pieces;
use crate::metrics::Transport;
use crate::protocol::sse::Event;
use crate::store::{Adopted, TurnLogWriter, TurnLogs};

/// A chat's key: (principal, chat id), shared by the registry's maps and
/// the turn's end rather than copied into each.
pub(super) type Key = (Arc<str>, Arc<str>);

/// Continues a held turn taken over from a dead instance: its saved state
/// and the transport of the resume that took it over (for its metrics) in;
/// its chunks (fitted to its client) and whether it waits for a human
/// out. `None` when the state does not decode.
pub type Continue =
    dyn Fn(&[u8], Transport) -> Option<(Pieces, watch::Receiver<bool>)> + Send + Sync;

/// The registry: at most one resumable turn per (principal, chat).
pub struct Runs {
    pub(super) inner: Mutex<Registry>,
    pub(super) limits: Limits,
    /// Where the turns run; shutdown waits for them.
    pub(super) tasks: TaskTracker,
    /// Cancelled at shutdown, for [`sweep`] (the turns are aborted).
    pub(super) stopping: CancellationToken,
    /// Told when a turn ends, for [`Runs::idle`].
    pub(super) ended: Notify,
    /// Where turns are also written for other instances (a shared store).
    pub(super) shared: Option<TurnLogs>,
    /// How a held turn of a dead instance goes on here.
    pub(super) takeover: Option<Arc<Continue>>,
}

#[derive(Default)]
pub(super) struct Registry {
    /// The resumable turn of each chat.
    pub(super) runs: HashMap<Key, Arc<Run>>,
    /// Turns running per principal (superseded ones included).
    pub(super) counts: HashMap<Arc<str>, usize>,
    pub(super) running: usize,
    /// Turns that may be driven by their readers, by id, for [`sweep`].
    pub(super) inline: HashMap<u64, std::sync::Weak<Run>>,
    /// Every turn not yet finished, by id, for [`Runs::stop`].
    pub(super) live: HashMap<u64, std::sync::Weak<Run>>,
    /// Set by [`Runs::stop`]: a turn launched after it stops at once.
    pub(super) stopped: bool,
    pub(super) next_run: u64,
    /// Whether [`sweep`] runs.
    pub(super) sweeping: bool,
}

impl Runs {
    pub fn new(limits: Limits) -> Self {
        Self {
            inner: Mutex::new(Registry::default()),
            limits,
            tasks: TaskTracker::new(),
            stopping: CancellationToken::new(),
            ended: Notify::new(),
            shared: None,
            takeover: None,
        }
    }

    /// With a shared store, a resume that finds a held turn whose instance
    /// died takes it over and continues it with `continue_held`.
    pub fn with_takeover(mut self, continue_held: Arc<Continue>) -> Self {
        self.takeover = Some(continue_held);
        self
    }

    /// Writes every turn to `logs` too, and resumes other instances' turns
    /// from them.
    pub fn with_turn_logs(mut self, logs: Option<TurnLogs>) -> Self {
        self.shared = logs;
        self
    }

    /// Runs the turns on `tasks` (the server's), for shutdown to wait for.
    pub fn with_tasks(mut self, tasks: TaskTracker) -> Self {
        self.tasks = tasks;
        self
    }

    /// Stops every turn, held ones included: at shutdown no request is
    /// left to read or resume them. Each is aborted where it is (dropped,
    /// or its task aborted), rather than every turn polling a stop signal
    /// each time it is polled.
    pub fn stop(&self) {
        self.stopping.cancel();
        let live: Vec<Arc<Run>> = {
            let mut registry = self.lock();
            registry.stopped = true;
            registry
                .live
                .values()
                .filter_map(|run| run.upgrade())
                .collect()
        };
        for run in live {
            run.abort();
        }
    }

    /// Resolves once no turn is in flight: a draining server lets the
    /// turns it still runs end on their own before it stops them.
    pub async fn idle(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.lock().running == 0 {
                return;
            }
            ended.await;
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a turn of `owner` would be admitted now (before anything
    /// that cannot be undone is counted); [`Runs::start`] decides.
    pub fn has_room(&self, owner: &Owner<'_>) -> Result<(), RunError> {
        let registry = self.lock();
        if registry.running >= self.limits.total {
            return Err(RunError::Total(self.limits.total));
        }
        let mine = registry.counts.get(owner.principal).copied().unwrap_or(0);
        if owner.capped && mine >= self.limits.per_principal {
            return Err(RunError::PerPrincipal(self.limits.per_principal));
        }
        Ok(())
    }

    /// Starts `chunks` as the turn of the owner's chat, and subscribes to
    /// it. `waiting` says when the turn waits for a human. With a shared
    /// store the turn's log there is open first: a client answered finds
    /// its turn from any instance, even if this one dies at once.
    pub async fn start(
        self: &Arc<Self>,
        owner: Owner<'_>,
        chunks: Pieces,
        waiting: watch::Receiver<bool>,
    ) -> Result<(Arc<Run>, Subscription), RunError> {
        let writer = match &self.shared {
            Some(logs) => match logs
                .open(owner.principal, owner.chat_id, MAX_LOG_BYTES)
                .await
            {
                Ok(writer) => Some(writer),
                Err(e) => {
                    tracing::warn!(
                        "opening a shared turn log (other instances cannot resume this turn): {e}"
                    );
                    None
                }
            },
            None => None,
        };
        self.launch(owner, chunks, waiting, Opening::New(writer))
    }

    /// Starts `chunks`, a turn in a face's own words, read by the request
    /// that starts it alone: not the chat's turn (a resume finds the one
    /// before it, and it supersedes none), no shared log, and a stall ends
    /// it without the AI SDK's error chunk. Counted as every turn.
    pub fn start_alone(
        self: &Arc<Self>,
        owner: Owner<'_>,
        chunks: Pieces,
        waiting: watch::Receiver<bool>,
    ) -> Result<(Arc<Run>, Subscription), RunError> {
        self.launch(owner, chunks, waiting, Opening::Alone)
    }

    pub(super) fn launch(
        self: &Arc<Self>,
        owner: Owner<'_>,
        chunks: Pieces,
        waiting: watch::Receiver<bool>,
        opening: Opening,
    ) -> Result<(Arc<Run>, Subscription), RunError> {
        let listed = !matches!(opening, Opening::Alone);
        let key: Key = (owner.principal.into(), owner.chat_id.into());
        let id = {
            let mut registry = self.lock();
            registry.next_run += 1;
            registry.next_run
        };
        let run = Arc::new(Run::new(id, self.tasks.clone(), waiting.clone()));
        let (admitted, writer) = match opening {
            Opening::Alone => (false, None),
            Opening::New(writer) => (false, writer),
            Opening::Adopted(adopted, writer) => {
                let mut log = run.lock();
                log.entries = Entries::starting_at(adopted.first);
                for json in &adopted.chunks {
                    log.entries.push_event(&Event::framing(json));
                }
                (true, Some(writer))
            }
        };
        // A turn refused here ends the shared log it opened, so that no
        // resume follows a stream nobody writes.
        let refuse = |e: RunError, writer: Option<TurnLogWriter>| {
            if let Some(writer) = writer {
                self.tasks.spawn(async move {
                    if let Err(e) = writer.end().await {
                        tracing::warn!("ending a refused turn's shared log: {e}");
                    }
                });
            }
            Err(e)
        };
        // Read before it is registered: a newer turn of the chat must never
        // see it unread, and stop it, before its own request reads it.
        let subscription = run.subscribe();
        {
            let mut registry = self.lock();
            if !admitted && registry.running >= self.limits.total {
                drop(registry);
                return refuse(RunError::Total(self.limits.total), writer);
            }
            let mine = registry.counts.get(owner.principal).copied().unwrap_or(0);
            if !admitted && owner.capped && mine >= self.limits.per_principal {
                drop(registry);
                return refuse(RunError::PerPrincipal(self.limits.per_principal), writer);
            }
            registry.running += 1;
            *registry.counts.entry(key.0.clone()).or_default() += 1;
            registry.inline.insert(run.id, Arc::downgrade(&run));
            registry.live.insert(run.id, Arc::downgrade(&run));
            if !std::mem::replace(&mut registry.sweeping, true) {
                let runs = Arc::downgrade(self);
                self.tasks.spawn(sweep(runs, self.stopping.clone()));
            }
            // A new turn of a chat supersedes the old one: nobody could
            // resume that one any more, so if nobody reads it, it stops.
            if listed
                && let Some(old) = registry.runs.insert(key.clone(), run.clone())
                && !old.has_readers()
            {
                old.abort();
            }
        }
        // Read by other instances too: it runs on its own task, as fast as
        // its readers here and there let it, not only when one reads here.
        let shared = writer.is_some();
        // Made before the turn is first polled, so that an abort before then
        // still marks the turn done, frees its place and ends its shared log.
        let finished = Finished {
            run: run.clone(),
            runs: self.clone(),
            key,
            shared: writer.map(Box::new),
        };
        let limits = self.limits;
        let work = async move {
            // Dropping the turn drops `Finished`: the turn is marked done.
            let mut finished = finished;
            let (run, shared) = (finished.run.clone(), &mut finished.shared);
            let stall = Stall {
                after: limits.stall,
                said: listed,
            };
            produce(run, shared, chunks, waiting, stall, limits.held).await;
        };
        let work: Work = Box::pin(work);
        if shared {
            run.lock().driver = Driver::Polling;
            run.detach(work);
        } else {
            // Its reader drives it (Run::drive) until it needs a task of its own.
            run.lock().driver = Driver::Idle(work);
        }
        // Read again now that the turn is where an abort finds it: a stop
        // between the registration and here may have found it not yet there.
        if self.lock().stopped {
            run.abort();
        }
        Ok((run, subscription))
    }

    /// The turn in flight in `chat_id` for `principal`, if any.
    pub fn get(&self, principal: &str, chat_id: &str) -> Option<Arc<Run>> {
        let key: Key = (principal.into(), chat_id.into());
        self.lock()
            .runs
            .get(&key)
            .filter(|run| !run.is_done())
            .cloned()
    }

    pub(super) fn finished(&self, key: &Key, run: &Arc<Run>) {
        let mut registry = self.lock();
        if registry.runs.get(key).is_some_and(|r| Arc::ptr_eq(r, run)) {
            registry.runs.remove(key);
        }
        registry.running = registry.running.saturating_sub(1);
        registry.inline.remove(&run.id);
        registry.live.remove(&run.id);
        if let Some(n) = registry.counts.get_mut(&key.0) {
            *n -= 1;
            if *n == 0 {
                registry.counts.remove(&key.0);
            }
        }
        drop(registry);
        self.ended.notify_waiters();
    }
}

/// Marks the run done however its task ends (finished, cancelled, aborted).
pub(super) struct Finished {
    pub(super) run: Arc<Run>,
    pub(super) runs: Arc<Runs>,
    pub(super) key: Key,
    /// The turn's shared log, ended with it; boxed, since a store's writer
    /// is large and most turns have none.
    pub(super) shared: Option<Box<TurnLogWriter>>,
}

impl Drop for Finished {
    fn drop(&mut self) {
        self.run.lock().done = true;
        self.run.changed.notify_waiters();
        self.runs.finished(&self.key, &self.run);
        // Ended on a task of its own: dropping cannot wait for Redis. No
        // runtime (it is shutting down): the log expires by itself.
        if let (Some(writer), Ok(handle)) =
            (self.shared.take(), tokio::runtime::Handle::try_current())
        {
            self.runs.tasks.spawn_on(
                async move {
                    if let Err(e) = writer.end().await {
                        tracing::warn!("ending a shared turn log: {e}");
                    }
                },
                &handle,
            );
        }
    }
}

/// A turn's log as it starts.
pub(super) enum Opening {
    /// A new turn: empty, and its shared log, if there is one.
    New(Option<TurnLogWriter>),
    /// A turn taken over: the chunks it had, and the shared log it goes on in.
    Adopted(Adopted, TurnLogWriter),
    /// A new turn read by its request alone ([`Runs::start_alone`]).
    Alone,
}

/// Every [`DETACH_AFTER`], moves to tasks of their own the turns no reader
/// polled since the last look; ends at shutdown or with the registry.
pub(super) async fn sweep(runs: std::sync::Weak<Runs>, stopping: CancellationToken) {
    let mut ticks = tokio::time::interval(DETACH_AFTER);
    loop {
        let before = tokio::select! {
            tick = ticks.tick() => tick.checked_sub(DETACH_AFTER).unwrap_or(tick),
            () = stopping.cancelled() => return,
        };
        let Some(runs) = runs.upgrade() else { return };
        let inline: Vec<_> = runs.lock().inline.values().cloned().collect();
        let detached: Vec<u64> = inline
            .iter()
            .filter_map(|run| run.upgrade())
            .filter(|run| !run.detach_unpolled(before))
            .map(|run| run.id)
            .collect();
        let mut registry = runs.lock();
        for id in detached {
            registry.inline.remove(&id);
        }
    }
}
