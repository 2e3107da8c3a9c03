//! Turns in flight, by chat. Each turn appends its chunks (as SSE events)
//! to a log; subscribers read the log at their own pace: the request that
//! started the turn, and any `resume` (SSE `GET …/stream`, or a socket's
//! `resume` frame), which replays from the `start` chunk. A turn is polled
//! by the reader waiting for it, in that reader's task, until it waits for
//! a human, loses its last reader, or goes unpolled for [`DETACH_AFTER`]:
//! then it runs on a task of its own ([`Run`]).
//!
//! A turn whose subscribers all left is cancelled at once (the model and
//! its tools stop), unless it is waiting for a human: then it stays, so a
//! reload or a reconnect finds it, until its question is decided or times
//! out. The log's reader furthest behind holds the turn back by at most
//! [`LAG`] chunks, so a client that stops reading pauses the model.
//!
//! With a shared store (Redis), each batch also goes to the store's turn
//! log, so a resume on another instance replays and follows it
//! ([`Reader::Shared`]). Such a reader does not hold the turn back, nor
//! keep it alive: only this instance's readers and a question waiting for
//! a human do.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::Transport;
use crate::protocol::UiChunk;
use crate::protocol::sse::{Event, EventWriter};
use crate::store::{
    Adopted, REFRESH_EVERY, Read, StoreError, TakeOver, TurnLogReader, TurnLogWriter, TurnLogs,
};

/// Chunks the producer may run ahead of its slowest reader.
const LAG: usize = 256;
/// Most chunks appended to the log at once.
const BATCH: usize = 64;
/// Bytes of log kept for replay; beyond, the turn can no longer be resumed.
const MAX_LOG_BYTES: usize = 16 << 20;
/// A turn its readers have not polled for this long moves to a task of its
/// own: a reader whose client stopped reading polls nothing, and the turn
/// must still notice (and stop after [`Limits::stall`]).
const DETACH_AFTER: Duration = Duration::from_secs(1);

/// Why a turn was not started.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("too many turns in flight for this user (at most {0})")]
    PerPrincipal(usize),
    #[error("too many turns in flight (at most {0})")]
    Total(usize),
}

type Key = (String, String);

/// What the reader of a turn whose instance died while it was not waiting
/// for a human reads last: nobody runs that turn's model step any more,
/// and it is not run again (its calls may have run).
pub const OWNER_DIED: &str = "the server running this turn stopped; send your message again";

/// Continues a held turn taken over from a dead instance: its saved state
/// and the transport of the resume that took it over (for its metrics) in;
/// its chunks (fitted to its client) and whether it waits for a human
/// out. `None` when the state does not decode.
pub type Continue = dyn Fn(&[u8], Transport) -> Option<(BoxStream<'static, UiChunk>, watch::Receiver<bool>)>
    + Send
    + Sync;

/// The registry: at most one resumable turn per (principal, chat).
pub struct Runs {
    inner: Mutex<Registry>,
    limits: Limits,
    /// Where the turns run; shutdown waits for them.
    tasks: TaskTracker,
    /// Cancelled at shutdown: every turn stops, held ones too.
    stopping: CancellationToken,
    /// Told when a turn ends, for [`Runs::idle`].
    ended: Notify,
    /// Where turns are also written for other instances (a shared store).
    shared: Option<TurnLogs>,
    /// How a held turn of a dead instance goes on here.
    takeover: Option<Arc<Continue>>,
}

/// How many turns may run, and for how long without a reader.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_principal: usize,
    pub total: usize,
    /// How long a reader may hold a turn back before the turn is stopped.
    pub stall: Duration,
    /// How long a turn waiting for a human is kept with nobody reading it;
    /// its question stays answerable by the next request.
    pub held: Duration,
}

#[derive(Default)]
struct Registry {
    /// The resumable turn of each chat.
    runs: HashMap<Key, Arc<Run>>,
    /// Turns running per principal (superseded ones included).
    counts: HashMap<String, usize>,
    running: usize,
    /// Turns that may be driven by their readers, by id, for [`sweep`].
    inline: HashMap<u64, std::sync::Weak<Run>>,
    next_run: u64,
    /// Whether [`sweep`] runs.
    sweeping: bool,
}

/// Who starts a turn, and whether the per-user cap applies to them.
pub struct Owner<'a> {
    pub principal: &'a str,
    pub chat_id: &'a str,
    /// Off for `anonymous`, which is everyone on a keyless server.
    pub capped: bool,
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
    /// left to read or resume them. Their tasks end at their next poll.
    pub fn stop(&self) {
        self.stopping.cancel();
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

    fn lock(&self) -> MutexGuard<'_, Registry> {
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
        chunks: BoxStream<'static, UiChunk>,
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

    /// Runs a held turn taken over from a dead instance, its log begun with
    /// the chunks it had, its shared log written on by `writer`. Admitted
    /// whatever the limits: it was admitted once.
    fn adopt(
        self: &Arc<Self>,
        owner: Owner<'_>,
        chunks: BoxStream<'static, UiChunk>,
        waiting: watch::Receiver<bool>,
        adopted: Adopted,
        writer: TurnLogWriter,
    ) -> Result<(Arc<Run>, Subscription), RunError> {
        let writer = writer.with_max_bytes(MAX_LOG_BYTES);
        self.launch(owner, chunks, waiting, Opening::Adopted(adopted, writer))
    }

    fn launch(
        self: &Arc<Self>,
        owner: Owner<'_>,
        chunks: BoxStream<'static, UiChunk>,
        waiting: watch::Receiver<bool>,
        opening: Opening,
    ) -> Result<(Arc<Run>, Subscription), RunError> {
        let key = (owner.principal.to_owned(), owner.chat_id.to_owned());
        let id = {
            let mut registry = self.lock();
            registry.next_run += 1;
            registry.next_run
        };
        let run = Arc::new(Run::new(id, self.tasks.clone(), waiting.clone()));
        let (admitted, writer) = match opening {
            Opening::New(writer) => (false, writer),
            Opening::Adopted(adopted, writer) => {
                let mut log = run.lock();
                log.first = adopted.first;
                log.entries = adopted
                    .chunks
                    .iter()
                    .map(|json| Event::framing(json))
                    .collect();
                log.bytes = log.entries.iter().map(Event::len).sum();
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
            if !std::mem::replace(&mut registry.sweeping, true) {
                let runs = Arc::downgrade(self);
                self.tasks.spawn(sweep(runs, self.stopping.clone()));
            }
            // A new turn of a chat supersedes the old one: nobody could
            // resume that one any more, so if nobody reads it, it stops.
            if let Some(old) = registry.runs.insert(key.clone(), run.clone())
                && *old.readers.borrow() == 0
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
        let (stopping, limits) = (self.stopping.clone(), self.limits);
        let work = async move {
            // Dropping `produce` drops `Finished`: the turn is marked done.
            tokio::select! {
                () = produce(finished, chunks, waiting, limits) => {}
                () = stopping.cancelled() => {}
            }
        };
        let work: Work = Box::pin(work);
        if shared {
            run.lock().driver = Driver::Polling;
            run.detach(work);
        } else {
            // Its reader drives it (Run::drive) until it needs a task of its own.
            run.lock().driver = Driver::Idle(work);
        }
        Ok((run, subscription))
    }

    /// The turn in flight in `chat_id` for `principal`, if any.
    pub fn get(&self, principal: &str, chat_id: &str) -> Option<Arc<Run>> {
        let key = (principal.to_owned(), chat_id.to_owned());
        self.lock()
            .runs
            .get(&key)
            .filter(|run| !run.is_done())
            .cloned()
    }

    /// The turn in flight in `chat_id` for `principal`, read from its
    /// start: this instance's, or else (with a shared store) the one
    /// another instance runs, taken over first if that instance died while
    /// the turn waited for a human. `None` when there is none, or when its
    /// start is gone (it outgrew the replay limit). `transport` counts a
    /// turn taken over.
    pub async fn resume(
        self: &Arc<Self>,
        principal: &str,
        chat_id: &str,
        transport: Transport,
    ) -> Result<Option<Resumed>, StoreError> {
        if let Some(run) = self.get(principal, chat_id) {
            return Ok(run.resume().map(|reader| Resumed {
                run: Some(run),
                reader: Reader::Local(reader),
            }));
        }
        let Some(logs) = &self.shared else {
            return Ok(None);
        };
        let remote = |reader| Resumed {
            run: None,
            reader: Reader::Shared(Remote {
                reader,
                runs: self.clone(),
                principal: principal.to_owned(),
                chat_id: chat_id.to_owned(),
                transport,
            }),
        };
        match self.take_over(principal, chat_id, None, transport).await? {
            Found::None => return Ok(None),
            Found::Live => {}
            Found::Ended(reader) => return Ok(Some(remote(reader))),
            Found::Taken(run, subscription) => {
                return Ok(Some(Resumed {
                    run: Some(run),
                    reader: Reader::Local(subscription),
                }));
            }
        }
        Ok(logs.resume(principal, chat_id).await?.map(remote))
    }

    /// The chat's turn, if its instance died (only if it is the stream
    /// `only`, when given): a held turn taken over and run here, any other
    /// ended with [`OWNER_DIED`] in its stream.
    async fn take_over(
        self: &Arc<Self>,
        principal: &str,
        chat_id: &str,
        only: Option<&str>,
        transport: Transport,
    ) -> Result<Found, StoreError> {
        let (Some(logs), Some(continue_held)) = (&self.shared, &self.takeover) else {
            return Ok(Found::Live);
        };
        let ended = ended_chunk();
        match logs.take_over(principal, chat_id, &ended, only).await? {
            TakeOver::None => Ok(Found::None),
            TakeOver::Live => Ok(Found::Live),
            TakeOver::Ended(reader) => Ok(Found::Ended(reader)),
            TakeOver::Taken {
                held,
                chunks,
                mut writer,
            } => {
                let Some((turn, waiting)) = continue_held(&held, transport) else {
                    tracing::warn!("a held turn's saved state does not decode; it ends");
                    writer.append(&[Bytes::from(ended)], false).await?;
                    writer.end().await?;
                    return Ok(Found::None);
                };
                let owner = Owner {
                    principal,
                    chat_id,
                    capped: true,
                };
                // An adopted turn skips the limits: this cannot fail.
                let Ok((run, subscription)) = self.adopt(owner, turn, waiting, chunks, *writer)
                else {
                    return Ok(Found::None);
                };
                tracing::info!(chat = %chat_id, "took over a held turn whose instance died");
                Ok(Found::Taken(run, subscription))
            }
        }
    }

    fn finished(&self, key: &Key, run: &Arc<Run>) {
        let mut registry = self.lock();
        if registry.runs.get(key).is_some_and(|r| Arc::ptr_eq(r, run)) {
            registry.runs.remove(key);
        }
        registry.running = registry.running.saturating_sub(1);
        registry.inline.remove(&run.id);
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

/// A resumed turn: its run when it is this instance's (to abort it), and
/// its reader.
pub struct Resumed {
    pub run: Option<Arc<Run>>,
    pub reader: Reader,
}

/// What [`Runs::take_over`] found of a chat's turn.
enum Found {
    None,
    /// Its instance is alive (or it is this one), or nobody takes over.
    Live,
    /// Its instance died while it did not wait: its stream ends.
    Ended(TurnLogReader),
    /// A held turn of a dead instance, run here now, and its reader.
    Taken(Arc<Run>, Subscription),
}

/// A reader of a turn, wherever it runs: one interface, two logs.
pub enum Reader {
    /// This instance's log in memory: it holds the turn back and keeps it.
    Local(Subscription),
    /// The shared store's log of a turn (run here or elsewhere).
    Shared(Remote),
}

impl Reader {
    /// `(chunk number, chunk)` until the turn ends.
    pub fn chunks(self) -> BoxStream<'static, (usize, Event)> {
        match self {
            Reader::Local(reader) => reader.chunks().boxed(),
            Reader::Shared(reader) => reader.chunks().boxed(),
        }
    }
}

/// A reader of the shared log of a turn another instance runs, which
/// looks, whenever the turn is quiet, whether that instance is alive: a
/// resume made in the seconds before a dead instance's heartbeat lapsed
/// would otherwise follow a stream nobody writes until it expires.
pub struct Remote {
    reader: TurnLogReader,
    runs: Arc<Runs>,
    principal: String,
    chat_id: String,
    transport: Transport,
}

impl Remote {
    /// `(chunk number, chunk)` until the turn ends. When the turn's
    /// instance died, a held turn is taken over here (the same single
    /// winner as a fresh resume) and this reader goes on in its log here
    /// after the last chunk it read; any other ends with [`OWNER_DIED`],
    /// written to the stream it reads.
    fn chunks(self) -> impl Stream<Item = (usize, Event)> + Send + 'static {
        let Self {
            reader,
            runs,
            principal,
            chat_id,
            transport,
        } = self;
        async_stream::stream! {
            let key = reader.key().to_owned();
            let mut next = 0;
            let mut adopted = None;
            {
                let reads = reader.reads();
                futures::pin_mut!(reads);
                while let Some(read) = reads.next().await {
                    match read {
                        Read::Chunk(n, json) => {
                            next = n + 1;
                            yield (n, Event::framing(&json));
                        }
                        Read::Quiet => {
                            match runs.take_over(&principal, &chat_id, Some(&key), transport).await {
                                Ok(Found::Taken(_, subscription)) => {
                                    adopted = Some(subscription);
                                    break;
                                }
                                // Alive, or ended in this very stream: read on.
                                Ok(Found::None | Found::Live | Found::Ended(_)) => {}
                                Err(e) => tracing::warn!("looking at a quiet turn's instance: {e}"),
                            }
                        }
                    }
                }
            }
            let Some(subscription) = adopted else { return };
            // The adopted log numbers its chunks as the stream did.
            for await (n, event) in subscription.chunks() {
                if n < next {
                    continue;
                }
                if n > next {
                    tracing::warn!("a taken-over turn's log starts past this reader; it stops");
                    break;
                }
                next = n + 1;
                yield (n, event);
            }
        }
    }
}

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
    id: u64,
    log: Mutex<Log>,
    changed: Notify,
    readers: watch::Sender<usize>,
    /// Where the turn goes when it needs a task of its own.
    tasks: TaskTracker,
    /// Whether the turn waits for a human.
    asking: watch::Receiver<bool>,
}

/// The turn's future: a whole turn's state, boxed once.
type Work = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Where the turn is.
#[derive(Default)]
enum Driver {
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

struct Log {
    /// The chunks; `entries[0]` is chunk number `first`.
    entries: VecDeque<Event>,
    first: usize,
    bytes: usize,
    done: bool,
    /// Each reader's next chunk number.
    cursors: HashMap<u64, usize>,
    next_reader: u64,
    driver: Driver,
    /// When a reader last polled the turn (or it started).
    polled: tokio::time::Instant,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            entries: VecDeque::new(),
            first: 0,
            bytes: 0,
            done: false,
            cursors: HashMap::new(),
            next_reader: 0,
            driver: Driver::Ended,
            polled: tokio::time::Instant::now(),
        }
    }
}

impl Log {
    fn end(&self) -> usize {
        self.first + self.entries.len()
    }

    fn slowest(&self) -> Option<usize> {
        self.cursors.values().copied().min()
    }

    /// The slowest reader is more than [`LAG`] chunks behind.
    fn is_behind(&self) -> bool {
        self.slowest().is_some_and(|s| self.end() - s > LAG)
    }
}

impl Run {
    fn new(id: u64, tasks: TaskTracker, asking: watch::Receiver<bool>) -> Self {
        Self {
            id,
            log: Mutex::new(Log::default()),
            changed: Notify::new(),
            readers: watch::Sender::new(0),
            tasks,
            asking,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_done(&self) -> bool {
        self.lock().done
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
    fn drive(&self, cx: &mut Context<'_>) {
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
    fn detach_unpolled(&self, before: tokio::time::Instant) -> bool {
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
    fn detach(&self, work: Work) {
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
    fn is_inline(&self) -> bool {
        matches!(self.lock().driver, Driver::Idle(_) | Driver::Polling)
    }

    /// Reads the turn from its first chunk; `None` when the start of the
    /// log is gone (the turn outgrew the replay limit).
    pub fn resume(self: &Arc<Self>) -> Option<Subscription> {
        self.reader(true)
    }

    /// A reader of a new turn, from its (empty) start.
    fn subscribe(self: &Arc<Self>) -> Subscription {
        let mut log = self.lock();
        self.attach(&mut log)
    }

    /// A new reader at the start of the log; `None` if `from_start` and
    /// the start is gone. One lock, so the log cannot move in between.
    fn reader(self: &Arc<Self>, from_start: bool) -> Option<Subscription> {
        let mut log = self.lock();
        if from_start && log.first > 0 {
            return None;
        }
        Some(self.attach(&mut log))
    }

    fn attach(self: &Arc<Self>, log: &mut Log) -> Subscription {
        let id = log.next_reader;
        log.next_reader += 1;
        let first = log.first;
        log.cursors.insert(id, first);
        self.readers.send_modify(|n| *n += 1);
        Subscription {
            run: self.clone(),
            id,
        }
    }
}

/// A reader of a turn's log. Dropping it lets the turn go on without it.
pub struct Subscription {
    run: Arc<Run>,
    id: u64,
}

impl Subscription {
    /// `(chunk number, chunk)` until the turn ends.
    pub fn chunks(self) -> impl Stream<Item = (usize, Event)> + Send + 'static {
        async_stream::stream! {
            let mut batch = Vec::new();
            loop {
                let notified = self.run.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let done = {
                    let mut log = self.run.lock();
                    let cursor = log.cursors.get(&self.id).copied().unwrap_or(log.first).max(log.first);
                    let end = log.end();
                    batch.extend((cursor..end).map(|n| (n, log.entries[n - log.first].clone())));
                    log.cursors.insert(self.id, end);
                    log.done && cursor == end
                };
                if !batch.is_empty() {
                    self.run.changed.notify_waiters();
                    for item in batch.drain(..) {
                        yield item;
                    }
                    continue;
                }
                if done {
                    break;
                }
                // Nothing new: drive the turn (unless it runs elsewhere)
                // until it says something, or wait for whoever runs it.
                std::future::poll_fn(|cx| {
                    if notified.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(());
                    }
                    self.run.drive(cx);
                    notified.as_mut().poll(cx)
                })
                .await;
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let unread = {
            let mut log = self.run.lock();
            log.cursors.remove(&self.id);
            match std::mem::take(&mut log.driver) {
                // The last reader leaves: the turn goes on (to notice it is
                // unread, and stop or stay held) on a task of its own.
                Driver::Idle(work) if log.cursors.is_empty() => {
                    log.driver = Driver::Polling;
                    Some(work)
                }
                other => {
                    log.driver = other;
                    None
                }
            }
        };
        if let Some(work) = unread {
            self.run.detach(work);
        }
        self.run.readers.send_modify(|n| *n = n.saturating_sub(1));
        self.run.changed.notify_waiters();
    }
}

/// Marks the run done however its task ends (finished, cancelled, aborted).
struct Finished {
    run: Arc<Run>,
    runs: Arc<Runs>,
    key: Key,
    /// The turn's shared log, ended with it; boxed, since a store's writer
    /// is large and most turns have none.
    shared: Option<Box<TurnLogWriter>>,
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

/// Writes a batch to the shared log (the chunks' JSON), if there is one;
/// on failure the turn goes on for its readers here, without it.
async fn share(shared: &mut Option<Box<TurnLogWriter>>, batch: &[Event], waiting: bool) {
    let Some(writer) = shared.as_mut() else {
        return;
    };
    let batch: Vec<Bytes> = batch.iter().map(Event::json).collect();
    // Boxed: a store's write is a large future, and every turn's state
    // would hold room for it, shared log or not.
    if let Err(e) = Box::pin(writer.append(&batch, waiting)).await {
        tracing::warn!("writing a shared turn log (other instances lose this turn): {e}");
        *shared = None;
    }
}

/// Resolves at each refresh of the shared log; never without one.
async fn refresh_due(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// A turn's log as it starts.
enum Opening {
    /// A new turn: empty, and its shared log, if there is one.
    New(Option<TurnLogWriter>),
    /// A turn taken over: the chunks it had, and the shared log it goes on in.
    Adopted(Adopted, TurnLogWriter),
}

/// The JSON of the `error` chunk that ends a turn whose instance died.
fn ended_chunk() -> Vec<u8> {
    let chunk = UiChunk::Error {
        error_text: OWNER_DIED.to_owned(),
    };
    serde_json::to_vec(&chunk).unwrap_or_default()
}

async fn produce(
    finished: Finished,
    chunks: BoxStream<'static, UiChunk>,
    mut waiting: watch::Receiver<bool>,
    limits: Limits,
) {
    let run = finished.run.clone();
    let mut finished = finished;
    let asking = waiting.clone();
    // The shared log says at once when the turn starts or stops waiting:
    // another instance takes over only a turn marked waiting.
    let mut asked = waiting.clone();
    let mut ticks = finished.shared.as_ref().map(|_| {
        tokio::time::interval_at(tokio::time::Instant::now() + REFRESH_EVERY, REFRESH_EVERY)
    });
    let stall = limits.stall;
    let mut readers = run.readers.subscribe();
    // Each batch is serialized once, into one buffer its events share.
    let mut events = EventWriter::default();
    let mut chunks = chunks;
    let mut framed: Vec<Event> = Vec::new();
    let mut ended = false;
    while !ended {
        let first = {
            let abandoned = abandoned(&mut readers, &mut waiting, limits.held);
            tokio::pin!(abandoned);
            loop {
                tokio::select! {
                    chunk = chunks.next() => break chunk,
                    () = &mut abandoned => break None,
                    () = refresh_due(&mut ticks) => {
                        let now = *asking.borrow();
                        share(&mut finished.shared, &[], now).await;
                    }
                    Ok(()) = asked.changed(), if finished.shared.is_some() => {
                        let now = *asked.borrow_and_update();
                        share(&mut finished.shared, &[], now).await;
                    }
                }
            }
        };
        let Some(first) = first else { break };
        let mut next = Some(first);
        // Chunks that are ready together go into the log under one lock.
        while let Some(chunk) = next.take() {
            events.push(&chunk);
            if events.len() < BATCH {
                match chunks.next().now_or_never() {
                    Some(Some(chunk)) => next = Some(chunk),
                    Some(None) => ended = true,
                    None => {}
                }
            }
        }
        framed.extend(events.take());
        let mut behind = {
            let mut log = run.lock();
            if finished.shared.is_some() {
                // Kept for the shared log: a clone only counts a reference.
                for event in &framed {
                    log.bytes += event.len();
                    log.entries.push_back(event.clone());
                }
            } else {
                for event in framed.drain(..) {
                    log.bytes += event.len();
                    log.entries.push_back(event);
                }
            }
            // Over the replay limit: forget what every reader has read.
            while log.bytes > MAX_LOG_BYTES && log.slowest().is_some_and(|s| s > log.first) {
                if let Some(old) = log.entries.pop_front() {
                    log.bytes -= old.len();
                    log.first += 1;
                }
            }
            log.is_behind()
        };
        run.changed.notify_waiters();
        if !framed.is_empty() {
            let now = *asking.borrow();
            share(&mut finished.shared, &framed, now).await;
            framed.clear();
        }
        // Backpressure: wait for the slowest reader, for so long.
        let deadline = tokio::time::Instant::now() + stall;
        while behind {
            let notified = run.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            behind = run.lock().is_behind();
            if behind && tokio::time::timeout_at(deadline, notified).await.is_err() {
                let why = format!(
                    "a reader stopped reading for {} s; the turn was stopped",
                    stall.as_secs()
                );
                tracing::info!("{why}");
                let error = Event::of(&UiChunk::Error { error_text: why });
                {
                    let mut log = run.lock();
                    log.bytes += error.len();
                    log.entries.push_back(error.clone());
                }
                share(&mut finished.shared, &[error], false).await;
                return;
            }
        }
    }
}

/// Every [`DETACH_AFTER`], moves to tasks of their own the turns no reader
/// polled since the last look; ends at shutdown or with the registry.
async fn sweep(runs: std::sync::Weak<Runs>, stopping: CancellationToken) {
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

/// Resolves when the turn should stop for want of readers: nobody reads
/// it and it waits for nobody, or it has waited for a human unread for `held`.
async fn abandoned(
    readers: &mut watch::Receiver<usize>,
    waiting: &mut watch::Receiver<bool>,
    held: Duration,
) {
    // The turn dropped its end: it waits for nobody any more.
    let mut turn_gone = false;
    loop {
        let nobody = *readers.borrow_and_update() == 0;
        let asking = !turn_gone && *waiting.borrow_and_update();
        if nobody && !asking {
            return;
        }
        let unread_too_long = async {
            match nobody {
                true => tokio::time::sleep(held).await,
                false => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = readers.changed() => {
                if changed.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            changed = waiting.changed(), if !turn_gone => turn_gone = changed.is_err(),
            () = unread_too_long => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(per_principal: usize, total: usize) -> Arc<Runs> {
        let second = Duration::from_secs(60);
        Arc::new(Runs::new(Limits {
            per_principal,
            total,
            stall: second,
            held: second,
        }))
    }

    fn owner(principal: &str, chat_id: &str) -> Owner<'static> {
        Owner {
            principal: principal.to_owned().leak(),
            chat_id: chat_id.to_owned().leak(),
            capped: true,
        }
    }

    fn waiting() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    /// The numbers of the first `n` chunks `reader` reads.
    async fn numbers(reader: Subscription, n: usize) -> Vec<usize> {
        Box::pin(reader.chunks())
            .take(n)
            .map(|(i, _)| i)
            .collect()
            .await
    }

    fn say(tx: &mut futures::channel::mpsc::Sender<UiChunk>, chunk: UiChunk) {
        tx.try_send(chunk).unwrap_or_else(|e| panic!("{e}"));
    }

    fn chunks(n: usize) -> BoxStream<'static, UiChunk> {
        futures::stream::iter((0..n).map(|_| UiChunk::StartStep)).boxed()
    }

    #[tokio::test]
    async fn a_resume_replays_from_the_start() {
        let runs = runs(4, 16);
        let turn = chunks(3).chain(futures::stream::pending()).boxed();
        let Ok((run, first)) = runs.start(owner("p", "c"), turn, waiting()).await else {
            panic!("not started")
        };
        let mut first = Box::pin(first.chunks());
        for n in 0..3 {
            assert_eq!(first.next().await.map(|(i, _)| i), Some(n));
        }
        let Some(again) = runs.get("p", "c").and_then(|r| r.resume()) else {
            panic!("not resumable")
        };
        let seen = numbers(again, 3).await;
        assert_eq!(seen, [0, 1, 2]);
        run.abort();
        assert_eq!(first.next().await, None);
        assert!(runs.get("p", "c").is_none());
    }

    #[tokio::test]
    async fn a_turn_everyone_left_stops_unless_it_waits_for_a_human() {
        let runs = runs(4, 16);
        let turn = || chunks(1).chain(futures::stream::pending()).boxed();
        let Ok((run, reader)) = runs.start(owner("p", "c"), turn(), waiting()).await else {
            panic!("not started")
        };
        drop(reader);
        let done = |run: Arc<Run>| async move {
            while !run.is_done() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), done(run))
            .await
            .unwrap_or_else(|_| panic!("the turn kept going"));

        let (asking, waits) = watch::channel(true);
        let Ok((held, reader)) = runs.start(owner("p", "d"), turn(), waits).await else {
            panic!("not started")
        };
        drop(reader);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!held.is_done(), "a turn waiting for a human was stopped");
        asking.send_replace(false);
        tokio::time::timeout(Duration::from_secs(5), done(held))
            .await
            .unwrap_or_else(|_| panic!("the turn kept going once answered"));
    }

    /// Read by its own request, a turn runs in that reader's task; it
    /// moves to a task of its own once it waits for a human, or once its
    /// reader leaves (and then stops, unless it waits for a human).
    #[tokio::test]
    async fn a_turn_runs_in_its_readers_task_until_it_waits_or_is_left() {
        let runs = runs(4, 16);
        let (mut tx, rx) = futures::channel::mpsc::channel(8);
        let Ok((run, reader)) = runs.start(owner("p", "c"), rx.boxed(), waiting()).await else {
            panic!("not started")
        };
        let mut reader = Box::pin(reader.chunks());
        for n in 0..3 {
            say(&mut tx, UiChunk::StartStep);
            assert_eq!(reader.next().await.map(|(i, _)| i), Some(n));
            assert!(
                run.is_inline(),
                "chunk {n}: the turn left its reader's task"
            );
        }
        drop(reader);
        assert!(!run.is_inline(), "left by its reader, the turn has no task");
        let stopped = async {
            while !run.is_done() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), stopped)
            .await
            .unwrap_or_else(|_| panic!("an unread turn kept going"));

        let (asking, waits) = watch::channel(false);
        let (mut tx, rx) = futures::channel::mpsc::channel(8);
        let Ok((held, reader)) = runs.start(owner("p", "d"), rx.boxed(), waits).await else {
            panic!("not started")
        };
        let mut reader = Box::pin(reader.chunks());
        say(&mut tx, UiChunk::StartStep);
        assert_eq!(reader.next().await.map(|(i, _)| i), Some(0));
        assert!(held.is_inline());
        asking.send_replace(true);
        say(&mut tx, UiChunk::StartStep);
        assert_eq!(reader.next().await.map(|(i, _)| i), Some(1));
        assert!(
            !held.is_inline(),
            "a turn waiting for a human has no task of its own"
        );
        drop(reader);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!held.is_done(), "a turn waiting for a human was stopped");
        say(&mut tx, UiChunk::FinishStep);
        let Some(again) = held.resume() else {
            panic!("the held turn cannot be resumed")
        };
        let seen = numbers(again, 3).await;
        assert_eq!(seen, [0, 1, 2], "the held turn went on without its reader");
    }

    #[tokio::test]
    async fn limits_per_user_and_in_all() {
        let runs = runs(1, 2);
        let hold = || futures::stream::pending().boxed();
        let _a = runs.start(owner("p", "c1"), hold(), waiting()).await;
        assert!(matches!(
            runs.start(owner("p", "c2"), hold(), waiting()).await,
            Err(RunError::PerPrincipal(1))
        ));
        let _b = runs.start(owner("q", "c1"), hold(), waiting()).await;
        assert!(matches!(
            runs.start(owner("r", "c1"), hold(), waiting()).await,
            Err(RunError::Total(2))
        ));
    }
}

/// The suite every turn log passes: turns run on `here` and are resumed on
/// `there`, the same registry for the memory log, another instance sharing
/// the store for Redis.
#[cfg(test)]
mod suite {
    use futures::channel::mpsc;

    use super::*;

    fn limits() -> Limits {
        let minute = Duration::from_secs(60);
        Limits {
            per_principal: 8,
            total: 64,
            stall: minute,
            held: minute,
        }
    }

    /// A turn whose chunks the test sends, and its first reader.
    async fn turn(
        runs: &Arc<Runs>,
        principal: &'static str,
        chat: &'static str,
    ) -> (mpsc::Sender<UiChunk>, BoxStream<'static, (usize, Event)>) {
        let (tx, rx) = mpsc::channel(64);
        let owner = Owner {
            principal,
            chat_id: chat,
            capped: true,
        };
        let Ok((_, reader)) = runs.start(owner, rx.boxed(), watch::channel(false).1).await else {
            panic!("not started")
        };
        (tx, reader.chunks().boxed())
    }

    fn said(text: &str) -> UiChunk {
        UiChunk::Error {
            error_text: text.to_owned(),
        }
    }

    async fn send(tx: &mut mpsc::Sender<UiChunk>, chunk: UiChunk) {
        use futures::SinkExt;
        tx.send(chunk).await.unwrap_or_else(|e| panic!("{e}"));
    }

    async fn next(
        reader: &mut BoxStream<'static, (usize, Event)>,
        what: &str,
    ) -> Option<(usize, Event)> {
        tokio::time::timeout(Duration::from_secs(10), reader.next())
            .await
            .unwrap_or_else(|_| panic!("no chunk: {what}"))
    }

    async fn resume(runs: &Arc<Runs>, principal: &str, chat: &str) -> Option<Reader> {
        runs.resume(principal, chat, Transport::Sse)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .map(|resumed| resumed.reader)
    }

    /// Replays from the start, follows live, ends with the turn, and only
    /// for its own principal and chat. An ended turn is no longer found;
    /// with `replays_ended` (the shared log) only after it was replayed
    /// once more to its end: a client cut as its instance died may not
    /// have read the end already written.
    pub(super) async fn replays_follows_and_ends(
        here: Arc<Runs>,
        there: Arc<Runs>,
        replays_ended: bool,
    ) {
        let (mut tx, mut first) = turn(&here, "p", "c").await;
        let mut sent = Vec::new();
        for n in 0..3 {
            send(&mut tx, said(&format!("chunk {n}"))).await;
            sent.push(next(&mut first, "the first reader").await);
        }
        assert!(
            resume(&there, "q", "c").await.is_none(),
            "another principal"
        );
        assert!(resume(&there, "p", "d").await.is_none(), "another chat");
        let Some(again) = resume(&there, "p", "c").await else {
            panic!("not resumable")
        };
        let mut again = again.chunks();
        for want in &sent {
            assert_eq!(&next(&mut again, "the replay").await, want);
        }
        for n in 3..5 {
            send(&mut tx, said(&format!("chunk {n}"))).await;
            let live = next(&mut again, "following").await;
            assert_eq!(live.map(|(i, _)| i), Some(n));
        }
        drop(tx);
        assert_eq!(next(&mut again, "the end").await, None);
        let rest: Vec<usize> = first.map(|(i, _)| i).collect().await;
        assert_eq!(rest, [3, 4]);
        if replays_ended {
            // Its end is written by now: the reader above saw it.
            let Some(ended) = resume(&there, "p", "c").await else {
                panic!("an ended turn is not replayed")
            };
            let all: Vec<usize> = ended.chunks().map(|(i, _)| i).collect().await;
            assert_eq!(all, [0, 1, 2, 3, 4], "the ended turn's replay");
            return;
        }
        for _ in 0..1000 {
            if resume(&there, "p", "c").await.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("an ended turn is still resumable");
    }

    /// A turn is resumable from the moment it started, before it said
    /// anything: its client may have its answer by then, and lose it.
    pub(super) async fn resumable_once_started(here: Arc<Runs>, there: Arc<Runs>) {
        let (mut tx, _first) = turn(&here, "p", "quiet").await;
        let Some(again) = resume(&there, "p", "quiet").await else {
            panic!("a started turn is not resumable")
        };
        let mut again = again.chunks();
        send(&mut tx, said("hello")).await;
        assert_eq!(
            next(&mut again, "the first chunk").await.map(|(i, _)| i),
            Some(0)
        );
        drop(tx);
        assert_eq!(next(&mut again, "the end").await, None);
    }

    /// A turn over the replay limit cannot be resumed from its start.
    pub(super) async fn forgets_the_start_past_the_cap(here: Arc<Runs>, there: Arc<Runs>) {
        let (mut tx, mut first) = turn(&here, "p", "big").await;
        let big = "x".repeat(1 << 20);
        let n = MAX_LOG_BYTES / big.len() + 2;
        for _ in 0..n {
            send(&mut tx, said(&big)).await;
            next(&mut first, "a big chunk").await;
        }
        // One more: everything before it was read, and written everywhere.
        send(&mut tx, said("small")).await;
        next(&mut first, "the small chunk").await;
        assert!(
            resume(&there, "p", "big").await.is_none(),
            "resumed without its start"
        );
        drop(tx);
    }

    #[tokio::test]
    async fn memory() {
        let runs = || Arc::new(Runs::new(limits()));
        let here = runs();
        replays_follows_and_ends(here.clone(), here, false).await;
        let here = runs();
        resumable_once_started(here.clone(), here).await;
        let here = runs();
        forgets_the_start_past_the_cap(here.clone(), here).await;
    }

    /// Two instances sharing one Redis: what one runs, the other resumes.
    #[cfg(feature = "redis-server")]
    #[tokio::test]
    async fn redis() {
        let url = std::env::var("TOOLGATE_TEST_REDIS_URL")
            .unwrap_or_else(|_| panic!("no Redis server: set TOOLGATE_TEST_REDIS_URL"));
        let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
        let store = crate::store::Store::redis(&url, &prefix)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let instance =
            |name: &str| Arc::new(Runs::new(limits()).with_turn_logs(store.turn_logs(name)));
        replays_follows_and_ends(instance("a"), instance("b"), true).await;
        resumable_once_started(instance("a"), instance("b")).await;
        forgets_the_start_past_the_cap(instance("a"), instance("b")).await;
    }
}
