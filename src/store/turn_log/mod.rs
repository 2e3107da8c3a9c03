//! Turn logs in Redis, so that any instance sharing the store resumes any
//! turn in flight. The instance running a turn keeps its own log in memory
//! (`run/`) and, with a Redis store, also writes each batch
//! of chunks to a Redis Stream of the turn: one `XADD` per batch, the
//! entry's id the batch's first chunk number (plus one), each chunk a `c`
//! field. A small hash per (principal, chat) names the chat's current
//! turn: its stream, the instance running it and whether it waits for a
//! human. Another instance's resume reads that hash, replays the stream
//! from its start and follows it (`XREAD BLOCK`) until the end marker.
//!
//! Bounds: the stream keeps at most the bytes the memory log keeps (older
//! entries are trimmed by id, and then the turn can no longer be resumed
//! from its start); both keys expire [`TURN_TTL`] after the running
//! instance last refreshed them, so a turn whose instance died vanishes;
//! an ended stream is kept [`KEPT_AFTER_END`] for readers still on it.

use std::collections::VecDeque;
use std::sync::LazyLock;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio_util::task::TaskTracker;

mod feed;

pub use feed::{FOLLOWED, FOLLOWED_PER_USER, FollowLimits, Follower, Read};
use feed::{Feed, Feeds, first_chunk};

use crate::store::redis::{backend, millis};
use crate::store::{RedisStore, StoreError};

/// How long a turn's keys live unless its instance refreshes them.
pub const TURN_TTL: Duration = Duration::from_secs(120);
/// How often the running instance refreshes them while the turn is quiet.
pub const REFRESH_EVERY: Duration = Duration::from_secs(20);
/// How long an ended turn's stream stays, for readers still replaying it.
pub const KEPT_AFTER_END: Duration = Duration::from_secs(300);
/// How long the chat still names its ended turn, so that a resume replays
/// it to its end: a client cut as the instance died may have missed the
/// end that was already written. Short, so that a reload does not replay
/// a message the client already shows.
pub const REPLAYED_AFTER_END: Duration = Duration::from_secs(15);
/// The first entry of every stream: it exists before any chunk does, so a
/// reader can tell a quiet turn from a gone one.
const OPEN_ID: &str = "0-1";

/// Appends a batch of chunks to a turn's log: `redis/lua/turn_log_append.lua` (KEYS and ARGV in its header).
pub(super) const APPEND: &str = include_str!("../redis/lua/turn_log_append.lua");

/// Saves a held turn's state in the chat's hash: `redis/lua/turn_log_hold.lua` (KEYS and ARGV in its header).
pub(super) const HOLD: &str = include_str!("../redis/lua/turn_log_hold.lua");

/// A resume's look at a chat's turn, taking it over when its owner died: `redis/lua/turn_log_take_over.lua` (KEYS and ARGV in its header).
pub(super) const TAKE_OVER: &str = include_str!("../redis/lua/turn_log_take_over.lua");

/// Times a script that found the chat's hash changed under it
/// (`moved`) reads it again before it gives up.
const LOOKS: usize = 4;

/// Ends a turn's log: `redis/lua/turn_log_end.lua` (KEYS and ARGV in its header).
pub(super) const END: &str = include_str!("../redis/lua/turn_log_end.lua");

/// The scripts above, hashed once for every store.
struct Scripts {
    append: redis::Script,
    end: redis::Script,
    hold: redis::Script,
    take_over: redis::Script,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    append: redis::Script::new(APPEND),
    end: redis::Script::new(END),
    hold: redis::Script::new(HOLD),
    take_over: redis::Script::new(TAKE_OVER),
});

/// The turn logs of a Redis store, written and read by `instance`.
#[derive(Debug, Clone)]
pub struct TurnLogs {
    store: std::sync::Arc<RedisStore>,
    instance: String,
    /// What this instance follows of other instances' turns.
    feeds: std::sync::Arc<Feeds>,
}

impl TurnLogs {
    pub(super) fn new(store: std::sync::Arc<RedisStore>, instance: &str) -> Self {
        Self {
            store,
            instance: instance.to_owned(),
            feeds: std::sync::Arc::new(Feeds::new(TaskTracker::new(), FollowLimits::default())),
        }
    }

    /// Follows at most `limits` of turns of other instances at once (each
    /// holds a connection), read on `tasks`.
    pub fn following(mut self, tasks: TaskTracker, limits: FollowLimits) -> Self {
        self.feeds = std::sync::Arc::new(Feeds::new(tasks, limits));
        self
    }

    /// The hash naming the chat's current turn.
    fn chat_key(&self, principal: &str, chat_id: &str) -> String {
        format!("{}turn:{principal}\u{1f}{chat_id}", self.store.prefix())
    }

    /// Starts the log of a new turn of `principal`'s chat, run by this
    /// instance; the chat's hash names it from now on (a newer turn of the
    /// chat supersedes it). At most `max_bytes` of chunks are kept.
    pub async fn open(
        &self,
        principal: &str,
        chat_id: &str,
        max_bytes: usize,
    ) -> Result<TurnLogWriter, StoreError> {
        let stream = format!(
            "{}turnlog:{}",
            self.store.prefix(),
            uuid::Uuid::new_v4().simple()
        );
        let chat = self.chat_key(principal, chat_id);
        let ttl = millis(TURN_TTL);
        let mut conn = self.store.conn();
        let () = redis::pipe()
            .atomic()
            .cmd("XADD")
            .arg(&stream)
            .arg(OPEN_ID)
            .arg("open")
            .arg("")
            .ignore()
            .cmd("PEXPIRE")
            .arg(&stream)
            .arg(ttl)
            .ignore()
            // A superseded turn's held state must not outlive it.
            .cmd("DEL")
            .arg(&chat)
            .ignore()
            .cmd("HSET")
            .arg(&chat)
            .arg("stream")
            .arg(&stream)
            .arg("owner")
            .arg(&self.instance)
            .arg("waiting")
            .arg(0)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&chat)
            .arg(ttl)
            .ignore()
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(TurnLogWriter::new(self.clone(), stream, chat).with_max_bytes(max_bytes))
    }

    /// `follower`'s turn in flight in `chat_id`, from whichever instance
    /// runs it, read from its first chunk, with what its stream holds now;
    /// `None` when there is none, or when its start is gone (it outgrew the
    /// byte cap, or expired). Following it takes a place of the
    /// follower's share unless this instance follows it already.
    pub async fn resume(
        &self,
        follower: Follower<'_>,
        chat_id: &str,
    ) -> Result<Option<(TurnLogReader, Window)>, StoreError> {
        let mut conn = self.store.conn();
        let chat = self.chat_key(follower.principal, chat_id);
        let Some(stream) = stream_of(&mut conn, &chat).await? else {
            return Ok(None);
        };
        type Entries = Vec<(String, Vec<Vec<u8>>)>;
        let (first, last): (Entries, Entries) = redis::pipe()
            .cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .cmd("XREVRANGE")
            .arg(&stream)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await
            .map_err(backend)?;
        let from_start = first
            .first()
            .is_some_and(|(id, _)| id == OPEN_ID || first_chunk(id) == Some(0));
        let Some(window) = last
            .first()
            .and_then(|(id, fields)| Window::after(id, fields))
        else {
            return Ok(None);
        };
        if !from_start {
            return Ok(None);
        }
        self.reader(stream, follower)
            .await
            .map(|reader| Some((reader, window)))
    }

    /// A reader of `stream` (a turn of `follower`'s) from its start: on
    /// this instance's feed of it, one per turn whatever the number of
    /// resumes.
    async fn reader(
        &self,
        stream: String,
        follower: Follower<'_>,
    ) -> Result<TurnLogReader, StoreError> {
        let feed = (self.feeds)
            .follow(self.store.client(), &stream, follower)
            .await?;
        Ok(TurnLogReader { feed, stream })
    }

    /// Saves `state`, what continues the chat's turn that this instance
    /// runs and that now waits for a human, and keeps its keys at least
    /// `ttl` (the question's life). False when the chat names no turn of
    /// this instance's.
    pub async fn hold(
        &self,
        principal: &str,
        chat_id: &str,
        state: &[u8],
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut conn = self.store.conn();
        let chat = self.chat_key(principal, chat_id);
        for _ in 0..LOOKS {
            let Some(stream) = stream_of(&mut conn, &chat).await? else {
                return Ok(false);
            };
            let saved: i64 = SCRIPTS
                .hold
                .key(&chat)
                .key(&stream)
                .arg(&self.instance)
                .arg(state)
                .arg(millis(ttl.max(TURN_TTL)))
                .invoke_async(&mut conn)
                .await
                .map_err(backend)?;
            if saved >= 0 {
                return Ok(saved == 1);
            }
        }
        Ok(false)
    }

    /// What a resume finds of the chat's turn when the instance that ran
    /// it is dead (its heartbeat lapsed): a held turn is taken over by
    /// this instance (exactly one instance wins), any other ends with the
    /// chunk `ended` (an `error` chunk's JSON) so that its readers stop.
    /// With `only` (a reader's [`TurnLogReader::key`]), only if the chat's
    /// turn is still that one. An ended turn read from its stream takes
    /// a place of `follower`'s share, as a resume does.
    pub async fn take_over(
        &self,
        follower: Follower<'_>,
        chat_id: &str,
        ended: &[u8],
        only: Option<&str>,
    ) -> Result<TakeOver, StoreError> {
        let mut conn = self.store.conn();
        let chat = self.chat_key(follower.principal, chat_id);
        let heartbeats = self.store.heartbeat_prefix();
        let mut reply: Vec<Vec<u8>> = vec![b"live".to_vec()];
        for _ in 0..LOOKS {
            // The keys the script touches, as the hash names them now; the
            // script makes sure it still does.
            let (stream, owner): (Option<String>, Option<String>) = redis::cmd("HMGET")
                .arg(&chat)
                .arg("stream")
                .arg("owner")
                .query_async(&mut conn)
                .await
                .map_err(backend)?;
            let Some(stream) = stream else {
                return Ok(TakeOver::None);
            };
            reply = SCRIPTS
                .take_over
                .key(&chat)
                .key(&stream)
                .key(format!("{heartbeats}{}", owner.unwrap_or_default()))
                .arg(&self.instance)
                .arg(&heartbeats)
                .arg(ended)
                .arg(millis(KEPT_AFTER_END))
                .arg(only.unwrap_or_default())
                .invoke_async(&mut conn)
                .await
                .map_err(backend)?;
            if reply.first().map(Vec::as_slice) != Some(b"moved") {
                break;
            }
        }
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        match reply.as_slice() {
            [what, stream, held] if what == b"taken" => {
                let stream = text(stream);
                let (chunks, writer) = self.adopt(&mut conn, stream, chat).await?;
                Ok(TakeOver::Taken {
                    held: Bytes::copy_from_slice(held),
                    chunks,
                    writer: Box::new(writer),
                })
            }
            [what, stream] if what == b"ended" => {
                Ok(TakeOver::Ended(self.reader(text(stream), follower).await?))
            }
            // Changed under it at every look: read it as it is.
            [what] if what == b"live" || what == b"moved" => Ok(TakeOver::Live),
            _ => Ok(TakeOver::None),
        }
    }

    /// The chunks so far of a stream this instance took over (the first
    /// one's number with them), and its writer, which goes on after them.
    async fn adopt(
        &self,
        conn: &mut redis::aio::ConnectionManager,
        stream: String,
        chat: String,
    ) -> Result<(Adopted, TurnLogWriter), StoreError> {
        let entries: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
            .arg(&stream)
            .arg("-")
            .arg("+")
            .query_async(conn)
            .await
            .map_err(backend)?;
        let mut adopted = Adopted::default();
        let mut writer = TurnLogWriter::new(self.clone(), stream, chat);
        for (id, fields) in entries {
            if fields.first().map(Vec::as_slice) == Some(b"open") {
                continue;
            }
            let Some(first) = first_chunk(&id) else {
                continue;
            };
            if adopted.chunks.is_empty() {
                adopted.first = first;
            }
            let chunks: Vec<Bytes> = fields
                .into_iter()
                .skip(1)
                .step_by(2)
                .map(Bytes::from)
                .collect();
            let size = chunks.iter().map(Bytes::len).sum();
            writer.entries.push_back((first, size));
            writer.bytes += size;
            writer.next = first + chunks.len();
            adopted.chunks.extend(chunks);
        }
        if adopted.chunks.is_empty() {
            adopted.first = writer.next;
        }
        Ok((adopted, writer))
    }
}

/// What a resume found of a turn whose instance died.
pub enum TakeOver {
    /// No turn in flight in the chat (or not the one asked about).
    None,
    /// Its instance is alive (or it is this one).
    Live,
    /// This instance owns the held turn now: its saved state, its chunks
    /// so far, and the writer that goes on after them.
    Taken {
        held: Bytes,
        chunks: Adopted,
        writer: Box<TurnLogWriter>,
    },
    /// It was not waiting for a human: its stream ended, read from its start.
    Ended(TurnLogReader),
}

/// What a turn's stream holds when a resume looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The chunks written so far (the next one's number).
    pub written: usize,
    /// Its end marker is written: nothing more comes.
    pub ended: bool,
}

impl Window {
    /// From the stream's last entry (its id and fields); `None` for an
    /// entry no writer makes.
    fn after(id: &str, fields: &[Vec<u8>]) -> Option<Window> {
        if id == OPEN_ID {
            return Some(Window {
                written: 0,
                ended: false,
            });
        }
        let first = first_chunk(id)?;
        Some(match fields.first().map(Vec::as_slice) {
            // The end marker's id is the number of the chunk after the last.
            Some(b"end") => Window {
                written: first,
                ended: true,
            },
            // Fields alternate: `c`, then a chunk.
            _ => Window {
                written: first + fields.len() / 2,
                ended: false,
            },
        })
    }
}

/// A taken-over turn's chunks so far; `first` is the first one's number
/// (0 unless the stream outgrew its byte cap).
#[derive(Default)]
pub struct Adopted {
    pub first: usize,
    pub chunks: Vec<Bytes>,
}

/// The writing end of one turn's log, held by the instance running it.
pub struct TurnLogWriter {
    logs: TurnLogs,
    stream: String,
    chat: String,
    /// The number of the next chunk.
    next: usize,
    /// Each entry still in the stream: its first chunk number and bytes.
    entries: VecDeque<(usize, usize)>,
    bytes: usize,
    max_bytes: usize,
}

impl TurnLogWriter {
    /// A writer at the start of an empty log, with no byte cap.
    fn new(logs: TurnLogs, stream: String, chat: String) -> Self {
        Self {
            logs,
            stream,
            chat,
            next: 0,
            entries: VecDeque::new(),
            bytes: 0,
            max_bytes: 0,
        }
    }

    /// Keeps at most `max_bytes` of chunks from now on.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Appends `batch` as one entry, trimming the oldest entries beyond the
    /// byte cap; refreshes the keys' lives and says whether the turn waits.
    pub async fn append(&mut self, batch: &[Bytes], waiting: bool) -> Result<(), StoreError> {
        let first = self.next;
        let size: usize = batch.iter().map(Bytes::len).sum();
        self.entries.push_back((first, size));
        self.bytes += size;
        self.next += batch.len();
        let mut trim = None;
        // The newest entry always stays, as the memory log keeps its newest.
        while self.bytes > self.max_bytes && self.entries.len() > 1 {
            if let Some((_, bytes)) = self.entries.pop_front() {
                self.bytes -= bytes;
            }
            trim = self.entries.front().map(|(n, _)| entry_id(*n));
        }
        let mut invocation = SCRIPTS.append.key(&self.stream);
        invocation
            .key(&self.chat)
            .arg(entry_id(first))
            .arg(trim.unwrap_or_default())
            .arg(millis(TURN_TTL))
            .arg(u8::from(waiting))
            .arg(&self.logs.instance);
        for chunk in batch {
            invocation.arg(chunk.as_ref());
        }
        let mut conn = self.logs.store.conn();
        let appended: i64 = invocation.invoke_async(&mut conn).await.map_err(backend)?;
        if appended == 0 {
            return Err(StoreError::Backend(crate::store::BackendError::TakenOver));
        }
        Ok(())
    }

    /// Keeps a quiet turn's keys alive for another [`TURN_TTL`].
    pub async fn refresh(&mut self, waiting: bool) -> Result<(), StoreError> {
        self.append(&[], waiting).await
    }

    /// Marks the end, so readers stop; the chat names the ended turn for
    /// [`REPLAYED_AFTER_END`] more, then no longer.
    pub async fn end(self) -> Result<(), StoreError> {
        let mut conn = self.logs.store.conn();
        let _: i64 = SCRIPTS
            .end
            .key(&self.stream)
            .key(&self.chat)
            .arg(entry_id(self.next))
            .arg(millis(KEPT_AFTER_END))
            .arg(millis(REPLAYED_AFTER_END))
            .invoke_async(&mut conn)
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// The stream's key (tests look at its TTL).
    #[cfg(all(test, feature = "redis-server"))]
    pub(crate) fn keys(&self) -> (&str, &str) {
        (&self.stream, &self.chat)
    }
}

/// A reader of another instance's turn (or this one's), from its start.
pub struct TurnLogReader {
    feed: std::sync::Arc<Feed>,
    stream: String,
}

impl TurnLogReader {
    /// The stream it reads (for [`TurnLogs::take_over`]'s `only`).
    pub fn key(&self) -> &str {
        &self.stream
    }

    /// Each chunk until the end marker, and [`Read::Quiet`] whenever
    /// nothing came for a while; it also ends when the stream is gone (its
    /// instance died and it expired) or when chunks it had not read are
    /// gone: a gap is never papered over.
    pub fn reads(self) -> impl Stream<Item = Read> + Send + 'static {
        self.feed.reads()
    }
}

/// The stream the chat's hash at `chat` names: its turn's log, if any.
async fn stream_of(
    conn: &mut redis::aio::ConnectionManager,
    chat: &str,
) -> Result<Option<String>, StoreError> {
    redis::cmd("HGET")
        .arg(chat)
        .arg("stream")
        .query_async(conn)
        .await
        .map_err(backend)
}

/// The id of the entry whose first chunk is number `n` (ids start above `0-1`).
fn entry_id(n: usize) -> String {
    format!("{}-0", n + 1)
}

#[cfg(test)]
mod tests;
