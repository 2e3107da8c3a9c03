//! SSE framing of the UI message stream: pure byte encoding, no I/O.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::chunk::{BlockId, UiChunk};

/// The five response headers of the UI message stream.
pub const HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The end-of-stream marker.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// An idle keep-alive; the client ignores comments.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// What opens an event; `\n\n` closes it.
const DATA: &[u8] = b"data: ";

/// What a chunk that cannot be serialized is sent as (every map key of a
/// chunk is a string, so serializing one into memory does not fail).
const UNENCODABLE: &[u8] = br#"{"type":"error","errorText":"unencodable chunk"}"#;

/// A text or reasoning delta without provider metadata: nearly every
/// chunk of a turn, framed straight from its text ([`EventWriter::delta`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    Text,
    Reasoning,
}

impl Delta {
    fn open(self) -> &'static [u8] {
        match self {
            Delta::Text => br#"data: {"type":"text-delta","id":"#,
            Delta::Reasoning => br#"data: {"type":"reasoning-delta","id":"#,
        }
    }
}

/// One chunk framed as an SSE event, `data: <json>\n\n`: serialized once,
/// sent as it is over SSE, its JSON a slice of it for a WebSocket frame or
/// a shared turn log. Cloning counts a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event(Bytes);

impl Event {
    /// The event of one chunk.
    pub fn of(chunk: &UiChunk) -> Self {
        let mut events = EventWriter::default();
        events.reserve(1);
        events.push(chunk);
        events
            .take()
            .next()
            .unwrap_or_else(|| Event::framing(UNENCODABLE))
    }

    /// An event [`EventWriter::take_framed`] wrote, cut from its buffer.
    pub(crate) fn framed(event: Bytes) -> Self {
        Event(event)
    }

    /// The events [`EventWriter::take_framed`] wrote into `batch`, ending
    /// at `ends`, each cut from it.
    pub fn cut(batch: Bytes, ends: impl IntoIterator<Item = usize>) -> impl Iterator<Item = Event> {
        let mut start = 0;
        ends.into_iter().map(move |end| {
            let event = Event(batch.slice(start..end));
            start = end;
            event
        })
    }

    /// The event of a chunk's JSON (as a shared turn log keeps it): a copy.
    pub fn framing(json: &[u8]) -> Self {
        let mut buf = Vec::with_capacity(DATA.len() + json.len() + 2);
        buf.extend_from_slice(DATA);
        buf.extend_from_slice(json);
        buf.extend_from_slice(b"\n\n");
        Event(buf.into())
    }

    /// The whole event, as SSE sends it.
    pub fn sse(&self) -> &Bytes {
        &self.0
    }

    /// The chunk's JSON, without copying.
    pub fn json(&self) -> Bytes {
        self.0.slice(DATA.len()..self.0.len() - 2)
    }

    /// Bytes it holds, framing included.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Chunks that are ready together, framed back to back into one buffer
/// (serde's writer into a `Vec` is the fast one) and handed out as one
/// [`Event`] each, all sharing that buffer: one allocation per batch.
#[derive(Debug, Default)]
pub struct EventWriter {
    buf: Vec<u8>,
    /// Where each event written since the last take ends.
    ends: Vec<usize>,
    /// The last batch's bytes an event: what [`EventWriter::reserve`] expects.
    per_event: usize,
    /// The last delta's event up to its text (`data: {"type":"text-delta",
    /// "id":"…","delta":`), and the block it is for: a block's deltas share
    /// their id (one `Arc`), so the id is escaped once a block, not once a
    /// delta (a made id is 36 bytes).
    opening: Vec<u8>,
    opened: Option<(Delta, BlockId)>,
}

/// The least an event is expected to take: a text delta's with a made id
/// (87 bytes for a delta of three), so that a batch of deltas after a
/// batch of a few short chunks (a start) does not grow its buffer on the
/// way.
const MIN_PER_EVENT: usize = 96;
/// Events a batch has room for when its first is written: one, as a
/// delta's or as large as the last batch's were. A piece of a slow model
/// is one delta, kept in the turn's log as long as the turn (room for more
/// would stay empty there); a model's ready events reserve for themselves.
const FIRST_ROOM: usize = 1;
/// The most an event is expected to take: after a batch of a large output,
/// a batch of deltas must not reserve its size for each (the log keeps a
/// batch's buffer whole); a large event grows the buffer itself.
const MAX_PER_EVENT: usize = 512;

impl EventWriter {
    /// Room for `events` more, as large as the last batch's were: a batch
    /// is written without growing its buffer on the way.
    pub fn reserve(&mut self, events: usize) {
        let per_event = self.per_event.clamp(MIN_PER_EVENT, MAX_PER_EVENT);
        self.ends.reserve(events);
        self.buf.reserve(events.saturating_mul(per_event));
    }

    pub fn push(&mut self, chunk: &UiChunk) {
        match chunk {
            UiChunk::TextDelta {
                id,
                delta,
                provider_metadata: None,
            } => self.delta(Delta::Text, id, delta),
            UiChunk::ReasoningDelta {
                id,
                delta,
                provider_metadata: None,
            } => self.delta(Delta::Reasoning, id, delta),
            _ => self.push_json(chunk),
        }
    }

    /// Any event's JSON as its own SSE event: a face's words for a chunk.
    pub fn push_json(&mut self, event: &impl serde::Serialize) {
        self.room();
        let start = self.buf.len();
        self.buf.extend_from_slice(DATA);
        let written = serde_json::to_writer(&mut self.buf, event);
        self.end(start, written);
    }

    /// A delta of block `id`, as [`EventWriter::push`] writes its chunk,
    /// from its text alone: no chunk made for it.
    pub fn delta(&mut self, kind: Delta, id: &BlockId, delta: &str) {
        self.room();
        let start = self.buf.len();
        let written = self.write_delta(kind, id, delta);
        self.end(start, written);
    }

    /// Room for [`FIRST_ROOM`] events in a batch not yet begun: its buffer
    /// went with the last take.
    fn room(&mut self) {
        if self.buf.capacity() == 0 {
            self.reserve(FIRST_ROOM);
        }
    }

    /// Closes the event begun at `start`, or says it could not be written.
    fn end(&mut self, start: usize, written: serde_json::Result<()>) {
        if written.is_err() {
            self.buf.truncate(start);
            self.buf.extend_from_slice(DATA);
            self.buf.extend_from_slice(UNENCODABLE);
        }
        self.buf.extend_from_slice(b"\n\n");
        self.ends.push(self.buf.len());
    }

    /// A delta, nearly every chunk of a turn, written key by key as serde's
    /// derive writes it (a test holds the two equal) without its map
    /// machinery: the two strings are all that need escaping.
    fn write_delta(&mut self, kind: Delta, id: &BlockId, delta: &str) -> serde_json::Result<()> {
        let same = matches!(&self.opened, Some((k, i)) if *k == kind && Arc::ptr_eq(i, id));
        if !same {
            self.opened = None;
            self.opening.clear();
            self.opening.extend_from_slice(kind.open());
            json_string(&mut self.opening, id)?;
            self.opening.extend_from_slice(b",\"delta\":");
            self.opened = Some((kind, id.clone()));
        }
        self.buf.extend_from_slice(&self.opening);
        json_string(&mut self.buf, delta)?;
        self.buf.push(b'}');
        Ok(())
    }

    /// Events written since the last take.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The events written since the last take, in order.
    pub fn take(&mut self) -> impl Iterator<Item = Event> {
        let (batch, ends) = self.take_framed();
        Event::cut(batch, ends)
    }

    /// The events written since the last take, back to back in one buffer,
    /// and where each ends in it: what a turn's log keeps.
    pub fn take_framed(&mut self) -> (Bytes, Vec<usize>) {
        if let Some(per_event) = self.buf.len().checked_div(self.ends.len()) {
            self.per_event = per_event;
        }
        (
            Bytes::from(std::mem::take(&mut self.buf)),
            std::mem::take(&mut self.ends),
        )
    }
}

/// `s` as a JSON string: copied as it is when nothing in it is escaped
/// (nearly every delta), otherwise written by serde, which escapes only
/// control characters, `"` and `\`. serde's writer costs several calls a
/// string, and a delta is a few bytes.
fn json_string(buf: &mut Vec<u8>, s: &str) -> serde_json::Result<()> {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        buf.reserve(s.len() + 2);
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
        return Ok(());
    }
    serde::Serialize::serialize(s, &mut serde_json::Serializer::new(buf))
}

/// Frames chunks into one reused buffer; [`SseEncoder::take`] hands out what
/// was written so far without copying.
#[derive(Debug, Default)]
pub struct SseEncoder {
    buf: BytesMut,
    /// Bytes the last take handed out.
    last: usize,
}

impl SseEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Room for `bytes` more, exactly.
    pub fn reserve(&mut self, bytes: usize) {
        self.buf.reserve(bytes);
    }

    /// Room for `bytes` more; when it must grow, as large as the last
    /// write at once, rather than by doublings on the way.
    fn room(&mut self, bytes: usize) {
        if self.buf.capacity() - self.buf.len() < bytes {
            self.buf.reserve(bytes.max(self.last));
        }
    }

    /// Appends `data: <json>\n\n`.
    pub fn push(&mut self, chunk: &UiChunk) {
        self.buf.extend_from_slice(Event::of(chunk).sse());
    }

    /// Appends an event.
    pub fn push_event(&mut self, event: &Event) {
        self.room(event.len());
        self.buf.extend_from_slice(event.sse());
    }

    pub fn push_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Everything written since the last call.
    pub fn take(&mut self) -> Bytes {
        self.last = self.buf.len();
        self.buf.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::BlockId;

    #[test]
    fn frames_chunks_and_reuses_the_buffer() {
        let mut enc = SseEncoder::new();
        enc.push(&UiChunk::StartStep);
        enc.push(&UiChunk::FinishStep);
        assert_eq!(
            &enc.take()[..],
            b"data: {\"type\":\"start-step\"}\n\ndata: {\"type\":\"finish-step\"}\n\n"
        );
        assert!(enc.is_empty());
        enc.push_raw(DONE);
        assert_eq!(&enc.take()[..], DONE);
    }

    /// The deltas written directly are the bytes serde's derive writes.
    #[test]
    fn deltas_are_written_as_serde_writes_them() {
        let id = BlockId::from("txt-1");
        let metadata = Some(Box::new(serde_json::json!({"p": {"signature": "s"}})));
        let texts = [
            "",
            "1 ",
            "a \"quoted\" line\n",
            "tab\there \\ \u{1} \u{7f}",
            "日本語 🦀",
            "</script>",
        ];
        let mut events = EventWriter::default();
        let mut chunks = Vec::new();
        for text in texts {
            for provider_metadata in [None, metadata.clone()] {
                chunks.push(UiChunk::TextDelta {
                    id: id.clone(),
                    delta: text.into(),
                    provider_metadata: provider_metadata.clone(),
                });
                chunks.push(UiChunk::ReasoningDelta {
                    id: BlockId::from(text),
                    delta: text.into(),
                    provider_metadata: provider_metadata.clone(),
                });
                // The same block id in a delta of the other kind, then
                // another block's.
                chunks.push(UiChunk::ReasoningDelta {
                    id: id.clone(),
                    delta: text.into(),
                    provider_metadata,
                });
                chunks.push(UiChunk::text_delta(&BlockId::from(text), text.into()));
            }
        }
        for chunk in &chunks {
            events.push(chunk);
        }
        for (event, chunk) in events.take().zip(&chunks) {
            let json = serde_json::to_vec(chunk).unwrap_or_default();
            assert_eq!(event.json(), json, "{chunk:?}");
        }
    }

    #[test]
    fn a_batch_begun_has_room_for_one_delta() {
        // A made id: 36 bytes, and the delta's event 87.
        let id = BlockId::from("txt-0123456789abcdef0123456789abcdef");
        let mut events = EventWriter::default();
        for _ in 0..2 {
            events.delta(Delta::Text, &id, " 42");
            assert_eq!(events.buf.len(), 87);
            assert_eq!(
                events.buf.capacity(),
                MIN_PER_EVENT,
                "room for one, no more"
            );
            assert_eq!(events.take().count(), 1);
            assert_eq!(events.buf.capacity(), 0, "the buffer goes with the take");
        }
    }

    #[test]
    fn a_large_event_does_not_size_the_next_batch() {
        const BATCH_OF_DELTAS: usize = 64;
        let mut events = EventWriter::default();
        let large = UiChunk::Error {
            error_text: "x".repeat(1 << 20),
        };
        events.reserve(1);
        events.push(&large);
        assert_eq!(events.take().count(), 1);
        events.reserve(BATCH_OF_DELTAS);
        assert!(events.buf.capacity() <= BATCH_OF_DELTAS * MAX_PER_EVENT);
        assert!(events.buf.capacity() >= BATCH_OF_DELTAS * MIN_PER_EVENT);
    }

    /// Every byte, alone and among others, and strings that are not ASCII.
    #[test]
    fn strings_are_written_as_serde_writes_them() {
        let mut cases: Vec<String> = (0..=0x7f_u8)
            .map(|b| char::from(b).to_string())
            .flat_map(|c| [c.clone(), format!("a{c}b"), format!("{c}{c}")])
            .collect();
        cases.extend(["", "\u{80}", "\u{2028}\u{2029}", "日本語 🦀", "\u{fffd}"].map(String::from));
        for case in &cases {
            let mut ours = Vec::new();
            json_string(&mut ours, case).unwrap_or_else(|e| panic!("{e}"));
            let serde = serde_json::to_vec(case).unwrap_or_default();
            assert_eq!(ours, serde, "{case:?}");
        }
    }

    #[test]
    fn events_share_their_batch_and_slice_their_json() {
        let chunks = [
            UiChunk::StartStep,
            UiChunk::Error {
                error_text: "a \"quoted\" line\n".into(),
            },
            UiChunk::FinishStep,
        ];
        let mut events = EventWriter::default();
        for round in 0..2 {
            for chunk in &chunks {
                events.push(chunk);
            }
            assert_eq!(events.len(), 3);
            let taken: Vec<Event> = events.take().collect();
            assert!(events.is_empty(), "round {round}");
            for (event, chunk) in taken.iter().zip(&chunks) {
                let json = serde_json::to_vec(chunk).unwrap_or_default();
                assert_eq!(event.json(), json);
                assert_eq!(event, &Event::framing(&json));
                assert_eq!(event, &Event::of(chunk));
                assert_eq!(event.len(), json.len() + 8);
            }
        }
    }
}
