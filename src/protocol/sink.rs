//! Where a turn's chunks go as they are made: into the [`Writer`] of the
//! face that started the turn, which frames each for its wire at once (the
//! AI SDK's SSE events: [`ChunkWriter`]), or kept as chunks
//! ([`Vec<UiChunk>`], for tests). A delta, nearly every chunk of a turn,
//! goes as its text alone: framed from it, no chunk is made for it.

use bytes::Bytes;

use super::chunk::{BlockId, DeltaText, UiChunk};
use super::compat::ClientVersion;
use super::sse::{Delta, EventWriter};

/// What the encoder writes a turn's chunks into.
pub trait ChunkSink {
    fn push(&mut self, chunk: UiChunk);
    /// A text or reasoning delta of block `id`, without provider metadata.
    fn delta(&mut self, kind: Delta, id: &BlockId, delta: DeltaText);
}

impl ChunkSink for Vec<UiChunk> {
    fn push(&mut self, chunk: UiChunk) {
        Vec::push(self, chunk);
    }

    fn delta(&mut self, kind: Delta, id: &BlockId, delta: DeltaText) {
        let id = id.clone();
        Vec::push(
            self,
            match kind {
                Delta::Text => UiChunk::TextDelta {
                    id,
                    delta,
                    provider_metadata: None,
                },
                Delta::Reasoning => UiChunk::ReasoningDelta {
                    id,
                    delta,
                    provider_metadata: None,
                },
            },
        );
    }
}

/// What a turn writes into: a face's framing of the chunks for its wire,
/// taken batch by batch for the turn's log.
pub trait Writer: ChunkSink + Send {
    /// Room for `chunks` more, where the writer can tell what they take.
    fn reserve(&mut self, chunks: usize) {
        let _ = chunks;
    }

    /// The events written since the last take, if any.
    fn take(&mut self) -> Option<Batch>;
}

/// What a turn writes into: the AI SDK's writer, named so that the hot
/// path's calls are direct, or a face's own.
pub enum Out {
    AiSdk(ChunkWriter),
    Face(Box<dyn Writer>),
}

impl ChunkSink for Out {
    fn push(&mut self, chunk: UiChunk) {
        match self {
            Out::AiSdk(out) => out.push(chunk),
            Out::Face(out) => out.push(chunk),
        }
    }

    fn delta(&mut self, kind: Delta, id: &BlockId, delta: DeltaText) {
        match self {
            Out::AiSdk(out) => out.delta(kind, id, delta),
            Out::Face(out) => out.delta(kind, id, delta),
        }
    }
}

impl Writer for Out {
    fn reserve(&mut self, chunks: usize) {
        match self {
            Out::AiSdk(out) => out.reserve(chunks),
            Out::Face(out) => out.reserve(chunks),
        }
    }

    fn take(&mut self) -> Option<Batch> {
        match self {
            Out::AiSdk(out) => out.take(),
            Out::Face(out) => out.take(),
        }
    }
}

/// How a turn's stream ended, as its chunks said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Finished,
    Error,
    Aborted,
}

impl End {
    pub fn label(self) -> &'static str {
        match self {
            End::Finished => "finished",
            End::Error => "error",
            End::Aborted => "aborted",
        }
    }
}

/// What a batch's chunks said of the turn, for whoever counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    /// A chunk of content (not a start, a step's edge or metadata).
    pub content: bool,
    /// The last end among them.
    pub end: Option<End>,
}

impl Seen {
    /// Counts `chunk` (a delta is content: [`Seen::content`] is set for it).
    pub fn saw(&mut self, chunk: &UiChunk) {
        match chunk {
            UiChunk::Finish { .. } => self.end = Some(End::Finished),
            UiChunk::Error { .. } => self.end = Some(End::Error),
            UiChunk::Abort { .. } => self.end = Some(End::Aborted),
            UiChunk::Start { .. }
            | UiChunk::StartStep
            | UiChunk::FinishStep
            | UiChunk::MessageMetadata { .. } => {}
            _ => self.content = true,
        }
    }
}

/// Chunks framed back to back in one buffer, where each ends in it, and
/// what they said: a turn's piece on its way to the turn's log.
#[derive(Debug)]
pub struct Batch {
    pub bytes: Bytes,
    pub ends: Vec<usize>,
    pub seen: Seen,
}

impl Batch {
    /// The events written since the last take, and what their chunks said
    /// (a face's writer may say a chunk, a turn's end, with no event).
    pub fn take(events: &mut EventWriter, seen: &mut Seen) -> Option<Self> {
        if events.is_empty() && *seen == Seen::default() {
            return None;
        }
        let (bytes, ends) = events.take_framed();
        Some(Batch {
            bytes,
            ends,
            seen: std::mem::take(seen),
        })
    }

    /// `chunk` alone, framed for the newest client.
    pub fn of(chunk: UiChunk) -> Self {
        let mut writer = ChunkWriter::new(ClientVersion::LATEST);
        writer.push(chunk);
        writer.take().unwrap_or_else(|| Batch {
            bytes: Bytes::new(),
            ends: Vec::new(),
            seen: Seen::default(),
        })
    }
}

/// A turn's chunks, each fitted to the client's `ai` version and framed
/// as its SSE event when it is made, into the batch being written.
#[derive(Debug)]
pub struct ChunkWriter {
    events: EventWriter,
    client: ClientVersion,
    seen: Seen,
}

impl ChunkWriter {
    pub fn new(client: ClientVersion) -> Self {
        Self {
            events: EventWriter::default(),
            client,
            seen: Seen::default(),
        }
    }

    fn frame(&mut self, chunk: &UiChunk) {
        self.seen.saw(chunk);
        self.events.push(chunk);
    }
}

impl Writer for ChunkWriter {
    /// Room for `chunks` more events.
    fn reserve(&mut self, chunks: usize) {
        self.events.reserve(chunks);
    }

    fn take(&mut self) -> Option<Batch> {
        Batch::take(&mut self.events, &mut self.seen)
    }
}

impl ChunkSink for ChunkWriter {
    fn push(&mut self, chunk: UiChunk) {
        if ClientVersion::takes_as_is(&chunk) {
            return self.frame(&chunk);
        }
        // A chunk this client cannot take is said with older ones, or not.
        for chunk in self.client.fit(chunk) {
            self.frame(&chunk);
        }
    }

    fn delta(&mut self, kind: Delta, id: &BlockId, delta: DeltaText) {
        self.seen.content = true;
        self.events.delta(kind, id, &delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::FinishReason;
    use crate::protocol::sse::Event;

    /// The writer frames what the chunks a `Vec` keeps would be framed as,
    /// each fitted to the client.
    #[test]
    fn frames_what_a_vec_keeps() {
        let id = BlockId::from("txt-1");
        for client in [ClientVersion::new(5, 0, 0), ClientVersion::new(6, 0, 0)] {
            let mut kept: Vec<UiChunk> = Vec::new();
            let mut writer = ChunkWriter::new(client);
            for sink in [&mut kept as &mut dyn ChunkSink, &mut writer] {
                sink.push(UiChunk::Start {
                    message_id: Some("m".into()),
                    message_metadata: None,
                });
                sink.push(UiChunk::TextStart {
                    id: id.clone(),
                    provider_metadata: None,
                });
                sink.delta(Delta::Text, &id, "a \"b\"".into());
                sink.delta(Delta::Reasoning, &id, "c".into());
                sink.push(UiChunk::Finish {
                    finish_reason: Some(FinishReason::Stop),
                    message_metadata: None,
                });
            }
            let Some(batch) = writer.take() else {
                panic!("nothing written")
            };
            let framed: Vec<Event> = Event::cut(batch.bytes, batch.ends).collect();
            let expected: Vec<Event> = kept
                .into_iter()
                .flat_map(|chunk| client.fit(chunk))
                .map(|chunk| Event::of(&chunk))
                .collect();
            assert_eq!(framed, expected, "{client}");
            assert_eq!(
                batch.seen,
                Seen {
                    content: true,
                    end: Some(End::Finished)
                }
            );
            assert!(writer.take().is_none(), "taken once");
        }
    }

    /// A start and a step's edges are no content; the last end counts.
    #[test]
    fn what_a_batch_says() {
        let cases: [(&[UiChunk], Seen); 4] = [
            (&[UiChunk::StartStep, UiChunk::FinishStep], Seen::default()),
            (
                &[UiChunk::Error {
                    error_text: "x".into(),
                }],
                Seen {
                    content: false,
                    end: Some(End::Error),
                },
            ),
            (
                &[
                    UiChunk::TextEnd {
                        id: BlockId::from("t"),
                        provider_metadata: None,
                    },
                    UiChunk::Abort { reason: None },
                ],
                Seen {
                    content: true,
                    end: Some(End::Aborted),
                },
            ),
            (&[], Seen::default()),
        ];
        for (chunks, seen) in cases {
            let mut writer = ChunkWriter::new(ClientVersion::new(6, 0, 0));
            for chunk in chunks {
                writer.push(chunk.clone());
            }
            assert_eq!(
                writer.take().map(|b| b.seen).unwrap_or_default(),
                seen,
                "{chunks:?}"
            );
        }
    }
}
