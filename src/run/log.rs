//! A turn's log: its chunks kept for replay, its readers, the turn that
//! writes into it (and into the shared log), and the backpressure the
//! slowest reader puts on it.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::watch;

use super::driver::{Driver, Log, Run};
use super::entries::{StartIndex, Unread};
use crate::agent::Pieces;
use crate::protocol::UiChunk;
use crate::protocol::sink::Batch;
use crate::protocol::sse::Event;
use crate::store::{REFRESH_EVERY, TurnLogWriter};

pub(super) const BATCH: usize = 64;
/// Bytes of log kept for replay; beyond, the turn can no longer be resumed.
pub(super) const MAX_LOG_BYTES: usize = 16 << 20;

impl Run {
    /// Reads the turn from its first chunk; `None` when the start of the
    /// log is gone (the turn outgrew the replay limit).
    pub fn resume(self: &Arc<Self>) -> Option<Subscription> {
        self.reader(true)
    }

    /// Reads the turn from the chunk `at` names, with that chunk's number
    /// and the number of chunks written so far; `None` when that chunk is
    /// no longer kept. One lock, so the log cannot move in between.
    pub fn resume_at(self: &Arc<Self>, at: StartIndex) -> Option<(Subscription, usize, usize)> {
        let mut log = self.lock();
        let end = log.end();
        let from = at.resolve(end);
        if from < log.first() {
            return None;
        }
        let reader = self.attach_at(&mut log, from);
        Some((reader, from, end))
    }

    /// A reader of a new turn, from its (empty) start.
    pub(super) fn subscribe(self: &Arc<Self>) -> Subscription {
        let mut log = self.lock();
        self.attach(&mut log)
    }

    /// A new reader at the start of the log; `None` if `from_start` and
    /// the start is gone. One lock, so the log cannot move in between.
    pub(super) fn reader(self: &Arc<Self>, from_start: bool) -> Option<Subscription> {
        let mut log = self.lock();
        if from_start && log.first() > 0 {
            return None;
        }
        Some(self.attach(&mut log))
    }

    pub(super) fn attach(self: &Arc<Self>, log: &mut Log) -> Subscription {
        let first = log.first();
        self.attach_at(log, first)
    }

    /// A new reader whose next chunk is number `at` (kept in the log, or
    /// its end).
    fn attach_at(self: &Arc<Self>, log: &mut Log, at: usize) -> Subscription {
        let id = log.cursors.insert(at);
        if log.cursors.len() == 1 {
            self.presence.notify_waiters();
        }
        Subscription {
            run: self.clone(),
            id,
        }
    }
}

/// A reader of a turn's log. Dropping it lets the turn go on without it.
pub struct Subscription {
    pub(super) run: Arc<Run>,
    /// Its cursor's key in the log.
    pub(super) id: usize,
}

/// What [`Subscription::read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogRead {
    /// Chunks, now read.
    Chunks,
    /// Nothing yet: [`Subscription::news`] says when.
    Nothing,
    /// The turn has ended, and this reader read all of it.
    Ended,
}

impl Subscription {
    /// Up to `at_most` of the chunks this reader has not read, with their
    /// numbers, to `take`, under the log's lock (so that a writer copies
    /// them straight from the log); the reader moves past them.
    pub fn read(&self, at_most: usize, take: impl FnOnce(Unread<'_>)) -> LogRead {
        let read = {
            let mut log = self.run.lock();
            let first = log.first();
            let end = log.end();
            let cursor = log
                .cursors
                .get(self.id)
                .copied()
                .unwrap_or(first)
                .max(first);
            let to = end.min(cursor.saturating_add(at_most));
            if to > cursor {
                take(log.entries.range(cursor, to));
            }
            if let Some(at) = log.cursors.get_mut(self.id) {
                *at = to;
            }
            match (to > cursor, log.done) {
                (true, _) => LogRead::Chunks,
                (false, true) => LogRead::Ended,
                (false, false) => LogRead::Nothing,
            }
        };
        if read == LogRead::Chunks {
            // The turn may wait for its slowest reader.
            self.run.changed.notify_waiters();
        }
        read
    }

    /// Resolves when this reader has chunks to read or the turn has ended;
    /// meanwhile it drives the turn, unless the turn runs elsewhere, or
    /// waits for whoever runs it.
    pub async fn news(&self) {
        // Enabled only here, where the reader waits: chunks that are there
        // are read without registering with the log. Dropped at the end,
        // so the reader's own notice of what it reads next does not wake it.
        let notified = self.run.changed.notified();
        tokio::pin!(notified);
        std::future::poll_fn(|cx| {
            // Registered afresh, without this task's waker while it drives:
            // what the turn appends here would wake this very task, which
            // would be polled again for nothing (and, on a runtime with
            // idle workers, wake one). The log says what it appended.
            notified.set(self.run.changed.notified());
            notified.as_mut().enable();
            self.run.drive(cx);
            if self.has_news() {
                return Poll::Ready(());
            }
            notified.as_mut().poll(cx)
        })
        .await;
    }

    /// `(chunk number, chunk)` until the turn ends.
    pub fn chunks(self) -> impl Stream<Item = (usize, Event)> + Send + 'static {
        async_stream::stream! {
            let mut batch = Vec::new();
            loop {
                let read = self.read(usize::MAX, |unread| {
                    for run in unread {
                        batch.extend(run.events());
                    }
                });
                match read {
                    LogRead::Chunks => {
                        for item in batch.drain(..) {
                            yield item;
                        }
                    }
                    LogRead::Nothing => self.news().await,
                    LogRead::Ended => break,
                }
            }
        }
    }
}

impl Subscription {
    /// Whether the log holds chunks this reader has not read, or has ended.
    fn has_news(&self) -> bool {
        let log = self.run.lock();
        let cursor = log.cursors.get(self.id).copied().unwrap_or(log.first());
        cursor.max(log.first()) != log.end() || log.done
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let (unread, last) = {
            let mut log = self.run.lock();
            log.cursors.try_remove(self.id);
            let last = log.cursors.is_empty();
            let unread = match std::mem::take(&mut log.driver) {
                // The last reader leaves: the turn goes on (to notice it is
                // unread, and stop or stay held) on a task of its own.
                Driver::Idle(work) if last => {
                    log.driver = Driver::Polling;
                    Some(work)
                }
                other => {
                    log.driver = other;
                    None
                }
            };
            (unread, last)
        };
        if let Some(work) = unread {
            self.run.detach(work);
        }
        if last {
            self.run.presence.notify_waiters();
        }
        self.run.changed.notify_waiters();
    }
}

/// Writes a batch to the shared log (the chunks' JSON), if there is one;
/// on failure the turn goes on for its readers here, without it.
pub(super) async fn share(shared: &mut Option<Box<TurnLogWriter>>, batch: &[Event], waiting: bool) {
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
pub(super) async fn refresh_due(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// How long the turn waits for its slowest reader, and whether it says
/// why it stopped: an AI SDK `error` chunk, which only a turn in the AI
/// SDK's words may carry.
pub(super) struct Stall {
    pub after: Duration,
    pub said: bool,
}

pub(super) async fn produce(
    run: Arc<Run>,
    shared: &mut Option<Box<TurnLogWriter>>,
    pieces: Pieces,
    mut waiting: watch::Receiver<bool>,
    stall: Stall,
    held: Duration,
) {
    let asking = waiting.clone();
    // The shared log says at once when the turn starts or stops waiting:
    // another instance takes over only a turn marked waiting.
    let mut asked = waiting.clone();
    let mut ticks = shared.as_ref().map(|_| {
        tokio::time::interval_at(tokio::time::Instant::now() + REFRESH_EVERY, REFRESH_EVERY)
    });
    // The pieces that are ready together, put into the log under one lock.
    let mut ready: Vec<Batch> = Vec::new();
    let mut pieces = pieces;
    // The batch's events, for the shared log.
    let mut framed: Vec<Event> = Vec::new();
    let mut ended = false;
    // One for the whole turn: made afresh per batch, its watches would
    // join and leave their waiter lists for every batch.
    let abandoned = abandoned(&run, &mut waiting, held);
    tokio::pin!(abandoned);
    while !ended {
        let first = loop {
            tokio::select! {
                piece = pieces.next() => break piece,
                () = &mut abandoned => break None,
                () = refresh_due(&mut ticks) => {
                    let now = *asking.borrow();
                    share(shared, &[], now).await;
                }
                Ok(()) = asked.changed(), if shared.is_some() => {
                    let now = *asked.borrow_and_update();
                    share(shared, &[], now).await;
                }
            }
        };
        let Some(first) = first else { break };
        let mut events = first.ends.len();
        ready.push(first);
        while events < BATCH {
            match pieces.next().now_or_never() {
                Some(Some(piece)) => {
                    events += piece.ends.len();
                    ready.push(piece);
                }
                Some(None) => {
                    ended = true;
                    break;
                }
                None => break,
            }
        }
        if shared.is_some() {
            for piece in &ready {
                framed.extend(Event::cut(piece.bytes.clone(), piece.ends.iter().copied()));
            }
        }
        let mut behind = {
            let mut log = run.lock();
            for piece in ready.drain(..) {
                log.entries.push(piece.bytes, piece.ends);
            }
            // Over the replay limit: forget what every reader has read.
            if let Some(read) = log.slowest() {
                log.entries.trim(MAX_LOG_BYTES, read);
            }
            log.is_behind()
        };
        run.changed.notify_waiters();
        if !framed.is_empty() {
            let now = *asking.borrow();
            share(shared, &framed, now).await;
            framed.clear();
        }
        // Backpressure: wait for the slowest reader, for so long (the clock
        // is read only then: a turn read as fast as it is made never is).
        if !behind {
            continue;
        }
        let deadline = tokio::time::Instant::now() + stall.after;
        while behind {
            let notified = run.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            behind = run.lock().is_behind();
            if behind && tokio::time::timeout_at(deadline, notified).await.is_err() {
                let why = format!(
                    "a reader stopped reading for {} s; the turn was stopped",
                    stall.after.as_secs()
                );
                tracing::info!("{why}");
                if !stall.said {
                    return;
                }
                let error = Event::of(&UiChunk::Error { error_text: why });
                run.lock().entries.push_event(&error);
                share(shared, &[error], false).await;
                return;
            }
        }
    }
}

/// Resolves when the turn should stop for want of readers: nobody reads
/// it and it waits for nobody, or it has waited for a human unread for `held`.
pub(super) async fn abandoned(run: &Run, waiting: &mut watch::Receiver<bool>, held: Duration) {
    // The turn dropped its end: it waits for nobody any more.
    let mut turn_gone = false;
    loop {
        // Listening before looking: a reader that comes or goes after the
        // look is told.
        let presence = run.presence.notified();
        tokio::pin!(presence);
        presence.as_mut().enable();
        let nobody = !run.has_readers();
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
            () = &mut presence => {}
            changed = waiting.changed(), if !turn_gone => turn_gone = changed.is_err(),
            () = unread_too_long => return,
        }
    }
}
