//! Following other instances' turns: one reader per turn per instance.
//! A resume of a turn another instance runs reads that turn's Redis
//! Stream; every resume of the same turn on this instance shares one
//! [`Feed`], read by one tracked task with one `XREAD BLOCK` loop on one
//! connection of its own, and fanned out here. At most [`Feeds::new`]'s
//! `max` such connections are open at once, and at most its
//! `per_principal` for the turns of one principal (a turn is its
//! principal's: only they resume it); a resume that would need one more
//! is refused ([`StoreError::Followed`], [`StoreError::FollowedPerUser`])
//! rather than starve Redis of connections (`maxclients`) that every
//! other request needs, or let one user's resumes take the places every
//! other user's need.
//!
//! The rules are a reader's of the stream itself: a feed keeps the last
//! [`KEPT_BYTES`] of chunks (as the stream does), so a resume that joins
//! late replays the turn from its start, and a follower that falls behind
//! what is kept ends there (a gap is never papered over); no follower
//! holds the turn back. The task stops once no follower is left (within
//! one `XREAD`), at the stream's end, or when it is gone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use crate::shares::{Pool, Share, ShareError, ShareLimits, Shares};
use crate::store::StoreError;
use crate::store::redis::{backend, millis};

/// How long one `XREAD` blocks before the reader looks whether the stream
/// is still there (and whether anyone still follows it).
const BLOCK: Duration = Duration::from_secs(2);
/// Empty `XREAD`s in a row after which a feed says the turn is quiet
/// (and its followers look whether the instance writing it is alive).
const QUIET_AFTER: u32 = 2;
/// Most entries (batches) one `XREAD` takes.
const READ_COUNT: usize = 16;
/// Bytes of chunks a feed keeps: what the stream keeps at most.
const KEPT_BYTES: usize = 16 << 20;
/// Most chunks a follower takes out of its feed at once.
const TAKE: usize = 256;
/// The turns followed at once when not configured.
pub const FOLLOWED: usize = 32;
/// The turns of one principal followed at once when not configured.
pub const FOLLOWED_PER_USER: usize = 4;

/// Who follows a turn: the turn's principal, and whether their share
/// applies (off where callers are not told apart: there everyone is one
/// principal).
#[derive(Debug, Clone, Copy)]
pub struct Follower<'a> {
    pub principal: &'a str,
    pub capped: bool,
}

/// How many turns an instance follows at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowLimits {
    /// In all: each holds a connection.
    pub total: usize,
    /// Of one principal's turns.
    pub per_principal: usize,
}

impl Default for FollowLimits {
    fn default() -> Self {
        Self {
            total: FOLLOWED,
            per_principal: FOLLOWED_PER_USER,
        }
    }
}

/// The feeds of this instance, by stream, and the places (connections)
/// they hold: each a share of [`Pool::FollowedTurns`].
#[derive(Debug)]
pub(super) struct Feeds {
    registry: Arc<Mutex<Registry>>,
    places: Arc<Shares>,
    tasks: TaskTracker,
}

#[derive(Debug, Default)]
struct Registry {
    by_stream: HashMap<String, Weak<Feed>>,
}

/// One followed turn's place under the caps, held by its reader's task
/// and given back when it stops, however it stops.
type Place = Share;

fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Feeds {
    /// At most `limits` of turns followed (connections held) at once (each
    /// at least one); the readers run on `tasks`.
    pub(super) fn new(tasks: TaskTracker, limits: FollowLimits) -> Self {
        let limits = ShareLimits {
            total: limits.total.max(1),
            per_principal: limits.per_principal.max(1),
        };
        Self {
            registry: Arc::new(Mutex::new(Registry::default())),
            places: Shares::new(Pool::FollowedTurns, limits),
            tasks,
        }
    }

    /// A place for a new feed of `follower`'s, if the caps leave one.
    fn place(&self, follower: Follower<'_>) -> Result<Place, StoreError> {
        let taken = self.places.take_as(follower.principal, follower.capped);
        taken.map_err(|refused| match refused {
            ShareError::PerPrincipal { max, .. } => StoreError::FollowedPerUser(max),
            ShareError::Total { max, .. } => StoreError::Followed(max),
        })
    }

    /// A follower of `stream` (a turn of `follower`'s) from its start: on
    /// the feed this instance has of it, or on a new one with a connection
    /// of its own. The new feed is registered before its connection is
    /// made, so resumes that come together share it: one connection and
    /// one place under the caps for them all.
    pub(super) async fn follow(
        &self,
        client: &redis::Client,
        stream: &str,
        follower: Follower<'_>,
    ) -> Result<Arc<Feed>, StoreError> {
        let (feed, place) = {
            let mut registry = lock(&self.registry);
            let followed = registry
                .by_stream
                .get(stream)
                .and_then(Weak::upgrade)
                .filter(|feed| !feed.stopped());
            if let Some(feed) = followed {
                return Ok(feed);
            }
            let place = self.place(follower)?;
            registry.by_stream.retain(|_, feed| feed.strong_count() > 0);
            let feed = Arc::new(Feed::new());
            registry
                .by_stream
                .insert(stream.to_owned(), Arc::downgrade(&feed));
            (feed, place)
        };
        // Its own connection: `XREAD BLOCK` holds a connection while it waits.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(BLOCK))
            .set_response_timeout(Some(BLOCK * 3));
        match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(conn) => {
                self.tasks
                    .spawn(read(conn, stream.to_owned(), Arc::downgrade(&feed), place));
                Ok(feed)
            }
            Err(e) => {
                // Those who joined meanwhile see it end; the next resume
                // starts anew.
                feed.change(|state| state.end = End::Stopped);
                Err(backend(e))
            }
        }
    }
}

/// One followed turn: the chunks read so far (the last [`KEPT_BYTES`]),
/// shared by its followers.
pub(super) struct Feed {
    state: Mutex<State>,
    /// Bumped on every change of `state`.
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// Numbered chunks, oldest first.
    chunks: VecDeque<(usize, Bytes)>,
    bytes: usize,
    /// Quiet spells seen so far.
    quiet: u64,
    end: End,
}

#[derive(Default, Clone, Copy, PartialEq)]
enum End {
    #[default]
    Open,
    /// The end marker, or the stream is gone: nothing more comes.
    Ended,
    /// A gap or a failure: nothing more comes, and a new resume reads anew.
    Stopped,
}

impl Feed {
    fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopped(&self) -> bool {
        self.lock().end == End::Stopped
    }

    fn change(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn push(&self, chunks: Vec<(usize, Bytes)>) {
        self.change(|state| {
            for (n, json) in chunks {
                state.bytes += json.len();
                state.chunks.push_back((n, json));
            }
            // The newest chunk always stays.
            while state.bytes > KEPT_BYTES && state.chunks.len() > 1 {
                if let Some((_, json)) = state.chunks.pop_front() {
                    state.bytes -= json.len();
                }
            }
        });
    }

    /// Up to [`TAKE`] chunks from `next` on; `None` when chunks from `next`
    /// are no longer kept.
    fn since(&self, next: usize) -> Option<Taken> {
        let state = self.lock();
        let first = state.chunks.front().map_or(next, |(n, _)| *n);
        if first > next {
            return None;
        }
        let chunks: Vec<(usize, Bytes)> = state
            .chunks
            .iter()
            .skip(next - first)
            .take(TAKE)
            .cloned()
            .collect();
        let last = state.chunks.back().map_or(0, |(n, _)| n + 1);
        let more = next + chunks.len() < last;
        Some(Taken {
            chunks,
            more,
            quiet: state.quiet,
            over: state.end != End::Open,
        })
    }

    /// Each chunk from the turn's start until its end, and [`Read::Quiet`]
    /// for each quiet spell (every [`QUIET_AFTER`] × 2 s without a chunk);
    /// it also ends when the stream is gone (its instance died and it
    /// expired) or when chunks this follower had not read are no longer
    /// kept: a gap is never papered over.
    pub(super) fn reads(self: Arc<Self>) -> impl Stream<Item = Read> + Send + 'static {
        async_stream::stream! {
            let mut changed = self.changed.subscribe();
            let mut next = 0;
            let mut quiet = None;
            loop {
                // Seen before it is looked at: no change slips between.
                changed.borrow_and_update();
                let Some(taken) = self.since(next) else { break };
                for (n, json) in taken.chunks {
                    next = n + 1;
                    yield Read::Chunk(n, json);
                }
                if taken.more {
                    continue;
                }
                // Only a spell that begins while it follows counts.
                if quiet.is_some_and(|seen| taken.quiet > seen) {
                    yield Read::Quiet;
                }
                quiet = Some(taken.quiet);
                if taken.over || changed.changed().await.is_err() {
                    break;
                }
            }
        }
    }
}

/// What a follower takes out of its feed at once.
struct Taken {
    chunks: Vec<(usize, Bytes)>,
    /// More chunks are there already.
    more: bool,
    quiet: u64,
    /// Nothing comes after what is kept.
    over: bool,
}

/// The one reader of a followed turn: reads `stream` into `feed` until
/// the end, or until nobody follows it; its connection and `place` go
/// with it.
async fn read(mut conn: MultiplexedConnection, stream: String, feed: Weak<Feed>, place: Place) {
    let mut last = String::from("0-0");
    let mut next = 0;
    let mut empty = 0;
    let end = loop {
        if feed.strong_count() == 0 {
            break None;
        }
        let read: Result<Option<Reply>, _> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(READ_COUNT)
            .arg("BLOCK")
            .arg(millis(BLOCK))
            .arg("STREAMS")
            .arg(&stream)
            .arg(&last)
            .query_async(&mut conn)
            .await;
        let Some(feed) = feed.upgrade() else {
            break None;
        };
        let entries = match read {
            Ok(Some(reply)) => reply.into_iter().flat_map(|(_, entries)| entries),
            Ok(None) => {
                let exists: Result<bool, _> = redis::cmd("EXISTS")
                    .arg(&stream)
                    .query_async(&mut conn)
                    .await;
                match exists {
                    Ok(true) => {
                        empty += 1;
                        if empty % QUIET_AFTER == 0 {
                            feed.change(|state| state.quiet += 1);
                        }
                        continue;
                    }
                    Ok(false) => break Some((feed, End::Ended)),
                    Err(e) => {
                        tracing::warn!("reading a turn log: {e}");
                        break Some((feed, End::Stopped));
                    }
                }
            }
            Err(e) => {
                tracing::warn!("reading a turn log: {e}");
                break Some((feed, End::Stopped));
            }
        };
        empty = 0;
        let mut chunks = Vec::new();
        let mut end = None;
        for (id, fields) in entries {
            match read_entry(&id, fields, &mut next) {
                Entry::Chunks(more) => chunks.extend(more),
                Entry::Open => {}
                Entry::End => end = Some(End::Ended),
                Entry::Gap => end = Some(End::Stopped),
            }
            if end.is_some() {
                break;
            }
            last = id;
        }
        feed.push(chunks);
        if let Some(end) = end {
            break Some((feed, end));
        }
    };
    if let Some((feed, end)) = end {
        feed.change(|state| state.end = end);
    }
    drop(place);
}

/// What a follower reads.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// A chunk: its number and its JSON.
    Chunk(usize, Bytes),
    /// Nothing came for a while: the turn waits, or its instance died.
    Quiet,
}

/// An `XREAD` reply: per stream, its entries (id, fields and values).
type Reply = Vec<(String, Vec<(String, Vec<Vec<u8>>)>)>;

/// What one stream entry says to a reader expecting chunk `next`.
#[derive(Debug, PartialEq)]
enum Entry {
    Chunks(Vec<(usize, Bytes)>),
    Open,
    End,
    /// Not the entry the reader expected: chunks in between are gone.
    Gap,
}

/// Reads one entry; on chunks, `next` moves past them.
fn read_entry(id: &str, fields: Vec<Vec<u8>>, next: &mut usize) -> Entry {
    match fields.first().map(Vec::as_slice) {
        Some(b"end") => return Entry::End,
        Some(b"open") => return Entry::Open,
        _ => {}
    }
    if first_chunk(id) != Some(*next) {
        return Entry::Gap;
    }
    // Fields alternate: `c`, then a chunk.
    let chunks: Vec<(usize, Bytes)> = fields
        .into_iter()
        .skip(1)
        .step_by(2)
        .enumerate()
        .map(|(i, json)| (*next + i, Bytes::from(json)))
        .collect();
    *next += chunks.len();
    Entry::Chunks(chunks)
}

/// The first chunk number of an entry, from its id.
pub(super) fn first_chunk(id: &str) -> Option<usize> {
    let (ms, _) = id.split_once('-')?;
    ms.parse::<usize>().ok()?.checked_sub(1)
}

#[cfg(test)]
mod tests;
