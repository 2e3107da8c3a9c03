//! The cross-instance part of a turn: a resume of a turn another instance
//! runs (read from the shared store's turn log), and the takeover of a
//! held turn whose instance died. The store's `take_over` picks one
//! winner; this side continues the turn with [`super::Continue`].

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

use super::driver::Run;
use super::entries::StartIndex;
use super::limits::Owner;
use super::log::{MAX_LOG_BYTES, Subscription};
use super::registry::{Opening, Runs};
use crate::metrics::Transport;
use crate::protocol::UiChunk;
use crate::protocol::sse::Event;
use crate::store::{Follower, Read, StoreError, TakeOver, TurnLogReader};

/// What the reader of a turn whose instance died while it was not waiting
/// for a human reads last: nobody runs that turn's model step any more,
/// and it is not run again (its calls may have run).
pub const OWNER_DIED: &str = "the server running this turn stopped; send your message again";

impl Runs {
    /// The turn in flight in `owner`'s chat, read from the chunk `at`
    /// names: this instance's, or else (with a shared store) the one
    /// another instance runs, taken over first if that instance died while
    /// the turn waited for a human. `None` when there is none, when that
    /// chunk is gone (the turn outgrew the replay limit; on another
    /// instance, when its start is gone), or when the turn is over and
    /// nothing is left after it. Following another instance's turn takes
    /// a place of the owner's share of the followed turns (when capped).
    /// `transport` counts a turn taken over.
    pub async fn resume(
        self: &Arc<Self>,
        owner: Owner<'_>,
        at: StartIndex,
        transport: Transport,
    ) -> Result<Option<Resumed>, StoreError> {
        let Owner {
            principal, chat_id, ..
        } = owner;
        if let Some(run) = self.get(principal, chat_id) {
            return Ok(run.resume_at(at).map(|(reader, from, end)| Resumed {
                run: Some(run),
                reader: Reader::Local(reader),
                from,
                written: Some(end),
            }));
        }
        let Some(logs) = &self.shared else {
            return Ok(None);
        };
        let remote = |reader, from, written| Resumed {
            run: None,
            reader: Reader::Shared(Remote {
                reader,
                runs: self.clone(),
                principal: principal.to_owned(),
                chat_id: chat_id.to_owned(),
                capped: owner.capped,
                transport,
            }),
            from,
            written,
        };
        match self.take_over(owner, None, transport).await? {
            Found::None => return Ok(None),
            Found::Live => {}
            // Where its tail is is not known here: from its start, as a
            // client that got no tail expects.
            Found::Ended(reader) => {
                let from = usize::try_from(at.0).unwrap_or(0);
                return Ok(Some(remote(reader, from, None)));
            }
            Found::Taken(run, subscription) => {
                let end = run.lock().end();
                return Ok(Some(Resumed {
                    run: Some(run),
                    reader: Reader::Local(subscription),
                    from: at.resolve(end),
                    written: Some(end),
                }));
            }
        }
        let Some((reader, window)) = logs.resume(follower(owner), chat_id).await? else {
            return Ok(None);
        };
        let from = at.resolve(window.written);
        if window.ended && from >= window.written {
            return Ok(None);
        }
        Ok(Some(remote(reader, from, Some(window.written))))
    }

    /// The chat's turn, if its instance died (only if it is the stream
    /// `only`, when given): a held turn taken over and run here, any other
    /// ended with [`OWNER_DIED`] in its stream.
    pub(super) async fn take_over(
        self: &Arc<Self>,
        owner: Owner<'_>,
        only: Option<&str>,
        transport: Transport,
    ) -> Result<Found, StoreError> {
        let (Some(logs), Some(continue_held)) = (&self.shared, &self.takeover) else {
            return Ok(Found::Live);
        };
        let chat_id = owner.chat_id;
        let ended = ended_chunk();
        match logs
            .take_over(follower(owner), chat_id, &ended, only)
            .await?
        {
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
                    capped: true,
                    ..owner
                };
                // Run with its log begun with the chunks it had, on its
                // shared log. An adopted turn skips the limits (it was
                // admitted once): this cannot fail.
                let writer = writer.with_max_bytes(MAX_LOG_BYTES);
                let opening = Opening::Adopted(chunks, writer);
                let Ok((run, subscription)) = self.launch(owner, turn, waiting, opening) else {
                    return Ok(Found::None);
                };
                tracing::info!(chat = %chat_id, "took over a held turn whose instance died");
                Ok(Found::Taken(run, subscription))
            }
        }
    }
}

/// A resumed turn: its run when it is this instance's (to abort it), its
/// reader, the number of the first chunk it reads, and how many chunks the
/// turn had written when it was resumed, where that is known.
pub struct Resumed {
    pub run: Option<Arc<Run>>,
    pub reader: Reader,
    pub from: usize,
    pub written: Option<usize>,
}

impl Resumed {
    /// `(chunk number, chunk)` from chunk [`Resumed::from`] until the turn
    /// ends.
    pub fn chunks(self) -> BoxStream<'static, (usize, Event)> {
        let from = self.from;
        let chunks = self.reader.chunks();
        match from {
            0 => chunks,
            _ => chunks
                .filter(move |(n, _)| std::future::ready(*n >= from))
                .boxed(),
        }
    }
}

/// What [`Runs::take_over`] found of a chat's turn.
pub(super) enum Found {
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
    pub(super) reader: TurnLogReader,
    pub(super) runs: Arc<Runs>,
    pub(super) principal: String,
    pub(super) chat_id: String,
    /// Whether the principal's share of the followed turns applies.
    pub(super) capped: bool,
    pub(super) transport: Transport,
}

impl Remote {
    /// `(chunk number, chunk)` until the turn ends. When the turn's
    /// instance died, a held turn is taken over here (the same single
    /// winner as a fresh resume) and this reader goes on in its log here
    /// after the last chunk it read; any other ends with [`OWNER_DIED`],
    /// written to the stream it reads.
    pub(super) fn chunks(self) -> impl Stream<Item = (usize, Event)> + Send + 'static {
        let Self {
            reader,
            runs,
            principal,
            chat_id,
            capped,
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
                            let owner = Owner {
                                principal: &principal,
                                chat_id: &chat_id,
                                capped,
                            };
                            match runs.take_over(owner, Some(&key), transport).await {
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

/// Who follows `owner`'s turn when it runs on another instance.
fn follower(owner: Owner<'_>) -> Follower<'_> {
    Follower {
        principal: owner.principal,
        capped: owner.capped,
    }
}

/// The JSON of the `error` chunk that ends a turn whose instance died.
pub(super) fn ended_chunk() -> Vec<u8> {
    let chunk = UiChunk::Error {
        error_text: OWNER_DIED.to_owned(),
    };
    serde_json::to_vec(&chunk).unwrap_or_default()
}
