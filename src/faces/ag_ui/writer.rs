//! The AG-UI face's writer: the turn writes its chunks here, and each goes
//! out at once as the AG-UI events [`Translator`] says it in, framed as SSE.
//! What the run's last events need (the questions asked, the messages
//! made, how it ended) is handed to the face when the turn lets go of it.

use serde_json::Value;
use tokio::sync::oneshot;

use super::wire::{Tail, Translator};
use crate::protocol::sink::{Batch, ChunkSink, Seen, Writer};
use crate::protocol::sse::{Delta, EventWriter};
use crate::protocol::{BlockId, DeltaText, UiChunk};

/// One run's writer.
pub struct AgUiWriter {
    translator: Translator,
    events: EventWriter,
    seen: Seen,
    /// Where the tail goes when the turn drops the writer, however it ends.
    tail: Option<oneshot::Sender<Tail>>,
}

impl AgUiWriter {
    /// The writer of run `run_id`, and where its tail comes.
    pub fn new(run_id: &str) -> (Self, oneshot::Receiver<Tail>) {
        let (tail, told) = oneshot::channel();
        let writer = Self {
            translator: Translator::new(run_id),
            events: EventWriter::default(),
            seen: Seen::default(),
            tail: Some(tail),
        };
        (writer, told)
    }

    fn write(&mut self, events: Vec<Value>) {
        for event in &events {
            self.events.push_json(event);
        }
    }
}

impl ChunkSink for AgUiWriter {
    fn push(&mut self, chunk: UiChunk) {
        self.seen.saw(&chunk);
        let events = self.translator.on_chunk(&chunk);
        self.write(events);
    }

    fn delta(&mut self, kind: Delta, id: &BlockId, delta: DeltaText) {
        self.seen.content = true;
        let events = self.translator.on_delta(kind, id, &delta);
        self.write(events);
    }
}

impl Writer for AgUiWriter {
    fn take(&mut self) -> Option<Batch> {
        Batch::take(&mut self.events, &mut self.seen)
    }
}

impl Drop for AgUiWriter {
    fn drop(&mut self) {
        if let Some(tail) = self.tail.take() {
            // The face stopped waiting: nobody reads the run any more.
            let _ = tail.send(self.translator.tail());
        }
    }
}

#[cfg(test)]
mod tests;
