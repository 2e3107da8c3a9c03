//! SSE framing of the UI message stream: pure byte encoding, no I/O.

use bytes::{BufMut, Bytes, BytesMut};

use super::chunk::UiChunk;

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

/// Frames chunks into one reused buffer; [`SseEncoder::take`] hands out what
/// was written so far without copying.
#[derive(Debug, Default)]
pub struct SseEncoder {
    buf: BytesMut,
}

impl SseEncoder {
    pub fn new() -> Self {
        Self {
            buf: BytesMut::with_capacity(1024),
        }
    }

    /// Appends `data: <json>\n\n`.
    pub fn push(&mut self, chunk: &UiChunk) {
        self.buf.extend_from_slice(b"data: ");
        // Serializing a chunk into memory cannot fail: every map key is a string.
        if serde_json::to_writer((&mut self.buf).writer(), chunk).is_err() {
            self.buf
                .extend_from_slice(br#"{"type":"error","errorText":"unencodable chunk"}"#);
        }
        self.buf.extend_from_slice(b"\n\n");
    }

    /// Appends `data: <json>\n\n` for a chunk already serialized.
    pub fn push_json(&mut self, json: &[u8]) {
        self.buf.extend_from_slice(b"data: ");
        self.buf.extend_from_slice(json);
        self.buf.extend_from_slice(b"\n\n");
    }

    pub fn push_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Everything written since the last call.
    pub fn take(&mut self) -> Bytes {
        self.buf.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
