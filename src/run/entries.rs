//! How a turn's log keeps its chunks: each batch's events framed back to
//! back in the one buffer they were written into, with where each ends.
//! A chunk costs its bytes and its end, not a shared handle of its own (a
//! count taken when it was cut from its batch and released with the log),
//! and a reader copies a batch's unread events at once.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::Bytes;

use crate::protocol::sse::Event;

/// Batches a log has room for when its first comes.
const FIRST_BATCHES: usize = 8;

/// The chunks kept, numbered from `first` on.
#[derive(Debug, Default)]
pub(super) struct Entries {
    batches: VecDeque<Batch>,
    /// The number of the first chunk kept.
    first: usize,
    /// The number after the last.
    end: usize,
    /// Their bytes.
    bytes: usize,
}

#[derive(Debug)]
struct Batch {
    /// The number of its first chunk.
    first: usize,
    bytes: Bytes,
    /// Where each of its events ends in `bytes`; the first starts at 0.
    ends: Vec<usize>,
}

impl Batch {
    /// Where its event `i` starts.
    fn start(&self, i: usize) -> usize {
        match i {
            0 => 0,
            i => self.ends[i - 1],
        }
    }

    fn end(&self) -> usize {
        self.first + self.ends.len()
    }
}

impl Entries {
    /// An empty log whose next chunk is number `first` (a turn taken over
    /// goes on from where the shared log starts).
    pub(super) fn starting_at(first: usize) -> Self {
        Self {
            first,
            end: first,
            ..Self::default()
        }
    }

    pub(super) fn first(&self) -> usize {
        self.first
    }

    pub(super) fn end(&self) -> usize {
        self.end
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }

    /// Appends a batch: `bytes`, the events an [`EventWriter`] framed, and
    /// where each ends in it.
    ///
    /// [`EventWriter`]: crate::protocol::sse::EventWriter
    pub(super) fn push(&mut self, bytes: Bytes, ends: Vec<usize>) {
        if ends.is_empty() {
            return;
        }
        self.bytes += bytes.len();
        let first = self.end;
        self.end += ends.len();
        if self.batches.capacity() == 0 {
            // A turn's start, its model's batches and its end: grown from
            // nothing, the queue would double its way there.
            self.batches.reserve(FIRST_BATCHES);
        }
        self.batches.push_back(Batch { first, bytes, ends });
    }

    /// Appends one event.
    pub(super) fn push_event(&mut self, event: &Event) {
        self.push(event.sse().clone(), vec![event.len()]);
    }

    /// Forgets whole batches from the oldest on while the log holds more
    /// than `max_bytes` and every reader has read them (up to `read`).
    pub(super) fn trim(&mut self, max_bytes: usize, read: usize) {
        while self.bytes > max_bytes {
            match self.batches.front() {
                Some(batch) if batch.end() <= read => {
                    self.bytes -= batch.bytes.len();
                    self.first = batch.end();
                    self.batches.pop_front();
                }
                _ => break,
            }
        }
    }

    /// Chunks `from..to` (within what is kept), in runs framed back to back.
    pub(super) fn range(&self, from: usize, to: usize) -> Unread<'_> {
        let from = from.max(self.first);
        let to = to.min(self.end);
        let at = self.batches.partition_point(|b| b.end() <= from);
        Unread {
            batches: self.batches.range(at..),
            from,
            to,
        }
    }
}

/// Chunks a reader has not read, in order: runs of events that follow one
/// another in one buffer.
#[derive(Debug, Clone)]
pub struct Unread<'a> {
    batches: std::collections::vec_deque::Iter<'a, Batch>,
    from: usize,
    to: usize,
}

impl<'a> Iterator for Unread<'a> {
    type Item = Framed<'a>;

    fn next(&mut self) -> Option<Framed<'a>> {
        if self.from >= self.to {
            return None;
        }
        let batch = self.batches.next()?;
        let events = self.from - batch.first..self.to.min(batch.end()) - batch.first;
        self.from = batch.first + events.end;
        Some(Framed { batch, events })
    }
}

/// Events that follow one another in one buffer.
#[derive(Debug, Clone)]
pub struct Framed<'a> {
    batch: &'a Batch,
    /// Their indices in the batch.
    events: Range<usize>,
}

impl Framed<'_> {
    /// Their bytes, back to back, as SSE sends them.
    pub fn sse(&self) -> &[u8] {
        let from = self.batch.start(self.events.start);
        let to = self.batch.start(self.events.end);
        &self.batch.bytes[from..to]
    }

    /// Each with its number, sharing the buffer.
    pub fn events(&self) -> impl Iterator<Item = (usize, Event)> + '_ {
        self.events.clone().map(|i| {
            let event = self
                .batch
                .bytes
                .slice(self.batch.start(i)..self.batch.ends[i]);
            (self.batch.first + i, Event::framed(event))
        })
    }
}

/// Where a resume starts reading a turn: a chunk number (0, the `start`
/// chunk, unless told otherwise), or, when negative, that many chunks back
/// from the last one written so far (`WorkflowChatTransport`'s
/// `startIndex`). Chunk numbers are the turn log's, the same on every
/// instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartIndex(pub i64);

impl StartIndex {
    /// The turn's first chunk.
    pub const START: StartIndex = StartIndex(0);

    /// The chunk number it names in a log of `end` chunks so far; never
    /// past `end` (a reader cannot start after what was written).
    pub fn resolve(self, end: usize) -> usize {
        let back = usize::try_from(self.0.unsigned_abs()).unwrap_or(usize::MAX);
        match self.0 {
            n if n < 0 => end.saturating_sub(back),
            _ => back.min(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::UiChunk;
    use crate::protocol::sse::EventWriter;

    /// A batch of `n` events, each its own number's error text.
    fn batch(first: usize, n: usize) -> (Bytes, Vec<usize>) {
        let mut writer = EventWriter::default();
        for i in first..first + n {
            writer.push(&UiChunk::Error {
                error_text: i.to_string(),
            });
        }
        writer.take_framed()
    }

    fn texts(unread: Unread<'_>) -> Vec<(usize, String)> {
        unread
            .flat_map(|run| {
                let joined: Vec<u8> = run.events().flat_map(|(_, e)| e.sse().to_vec()).collect();
                assert_eq!(run.sse(), joined, "a run's bytes are its events'");
                run.events().collect::<Vec<_>>()
            })
            .map(|(n, event)| (n, String::from_utf8_lossy(&event.json()).into_owned()))
            .collect()
    }

    fn error(i: usize) -> String {
        format!(r#"{{"type":"error","errorText":"{i}"}}"#)
    }

    #[test]
    fn ranges_across_batches() {
        let mut entries = Entries::default();
        for (first, n) in [(0, 3), (3, 1), (4, 4)] {
            let (bytes, ends) = batch(first, n);
            entries.push(bytes, ends);
        }
        entries.push(Bytes::new(), Vec::new());
        assert_eq!((entries.first(), entries.end()), (0, 8));
        let cases: &[(usize, usize)] = &[(0, 8), (0, 0), (2, 5), (3, 4), (5, 8), (7, 20), (8, 8)];
        for &(from, to) in cases {
            let expected: Vec<(usize, String)> = (from..to.min(8)).map(|i| (i, error(i))).collect();
            assert_eq!(texts(entries.range(from, to)), expected, "{from}..{to}");
        }
        // One run a batch.
        let firsts: Vec<Option<usize>> = entries
            .range(1, 8)
            .map(|run| run.events().next().map(|(n, _)| n))
            .collect();
        assert_eq!(firsts, [Some(1), Some(3), Some(4)]);
    }

    #[test]
    fn trims_whole_batches_every_reader_read() {
        let mut entries = Entries::starting_at(10);
        let mut sizes = Vec::new();
        for (first, n) in [(10, 2), (12, 2), (14, 2)] {
            let (bytes, ends) = batch(first, n);
            sizes.push(bytes.len());
            entries.push(bytes, ends);
        }
        let all: usize = sizes.iter().sum();
        assert_eq!(entries.bytes(), all);
        // Under the limit: nothing goes.
        entries.trim(all, 16);
        assert_eq!(entries.first(), 10);
        // Over it, but the first batch is not read by every reader.
        entries.trim(0, 11);
        assert_eq!(entries.first(), 10);
        // Read: it goes, and the next only when read whole.
        entries.trim(0, 13);
        assert_eq!(
            (entries.first(), entries.bytes()),
            (12, sizes[1] + sizes[2])
        );
        entries.trim(0, 14);
        assert_eq!((entries.first(), entries.bytes()), (14, sizes[2]));
        assert_eq!(
            texts(entries.range(0, 20)),
            [(14, error(14)), (15, error(15))]
        );
        entries.push_event(&Event::of(&UiChunk::Error {
            error_text: "16".into(),
        }));
        assert_eq!(entries.end(), 17);
        assert_eq!(
            texts(entries.range(15, 17)),
            [(15, error(15)), (16, error(16))]
        );
    }
}
