//! What the fuzz targets share: how an input becomes SSE events or body
//! reads, and the properties every provider stream must keep.

use std::collections::HashSet;

use bytes::Bytes;
use futures::StreamExt;
use sse_stream::SseByteStream;
use toolgate::provider::ProviderEvent;
use toolgate::provider::http::Decoder;

/// Runs `body`, parsed as SSE, through a model's `decoder` the way
/// `Upstream::stream` drives a decoder, then checks what came out.
pub fn decode<D: Decoder<Event = ProviderEvent>>(decoder: D, body: &[u8]) {
    let (out, whole) = run(decoder, body);
    check_events(&out, whole);
}

/// Runs `body`, parsed as SSE, through `decoder` the way `Upstream::stream`
/// drives a decoder: its events, and whether it ended without an error.
pub fn run<D: Decoder>(mut decoder: D, body: &[u8]) -> (Vec<D::Event>, bool) {
    let read: [Result<Bytes, std::io::Error>; 1] = [Ok(Bytes::copy_from_slice(body))];
    let events: Vec<_> =
        futures::executor::block_on(SseByteStream::new(futures::stream::iter(read)).collect());
    let mut out = Vec::new();
    let mut whole = true;
    let mut ended = false;
    for event in events {
        // The driver stops at an unreadable event, as at a decoder's error.
        let Ok(event) = event else {
            whole = false;
            break;
        };
        match decoder.event(event, &mut out) {
            Ok(false) => {}
            Ok(true) => {
                ended = true;
                break;
            }
            Err(_) => {
                whole = false;
                break;
            }
        }
    }
    if whole && !ended {
        whole = decoder.end(&mut out).is_ok();
    }
    (out, whole)
}

/// What the agent relies on: a call's fragments and end follow its start,
/// and a stream that ended without an error ends with exactly one `Finish`.
pub fn check_events(events: &[ProviderEvent], whole: bool) {
    let mut started = HashSet::new();
    let mut finishes = 0;
    for event in events {
        assert_eq!(finishes, 0, "an event after Finish: {events:?}");
        match event {
            ProviderEvent::ToolCallStart { id, .. } => {
                started.insert(id.as_str());
            }
            ProviderEvent::ToolCallDelta { id, .. } | ProviderEvent::ToolCallEnd { id } => {
                assert!(
                    started.contains(id.as_str()),
                    "call `{id}` was never started: {events:?}"
                );
            }
            ProviderEvent::Finish { .. } => finishes += 1,
            ProviderEvent::TextDelta(_)
            | ProviderEvent::ReasoningDelta(_)
            | ProviderEvent::ReasoningMetadata(_) => {}
        }
    }
    if whole {
        assert_eq!(finishes, 1, "a whole answer without Finish: {events:?}");
    }
}

/// The reads an HTTP body arrives in, as the fuzzer chooses them: the first
/// byte says how many cuts follow (modulo 32), each next byte is the length
/// of one read (255: the connection breaks there), and the rest of the
/// input is the last read.
pub fn reads(data: &[u8]) -> Vec<Read> {
    let Some((&count, mut rest)) = data.split_first() else {
        return Vec::new();
    };
    let count = usize::from(count % 32).min(rest.len());
    let (cuts, body) = rest.split_at(count);
    rest = body;
    let mut reads = Vec::with_capacity(count + 1);
    for &cut in cuts {
        if cut == u8::MAX {
            reads.push(Read::Broken);
            continue;
        }
        let (read, more) = rest.split_at(usize::from(cut).min(rest.len()));
        reads.push(Read::Bytes(Bytes::copy_from_slice(read)));
        rest = more;
    }
    reads.push(Read::Bytes(Bytes::copy_from_slice(rest)));
    reads
}

/// One read of a body.
#[derive(Debug, Clone)]
pub enum Read {
    Bytes(Bytes),
    /// The connection broke.
    Broken,
}
