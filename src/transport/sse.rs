//! The SSE response: chunks that are ready together go out in one write,
//! a keep-alive comment after each idle interval, `[DONE]` at the end.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use futures::{FutureExt, Stream, StreamExt};

use crate::protocol::sse::{DONE, Event, HEADERS, KEEP_ALIVE, SseEncoder};

/// Most chunks written in one frame.
const BATCH: usize = 64;

/// The SSE response for a turn's chunks, each already an event.
pub fn response(
    chunks: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    framed(chunks, keep_alive, Some(DONE))
}

/// The same without `[DONE]` (AG-UI's clients read every `data:` line as
/// an event).
pub fn response_without_done(
    events: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    framed(events, keep_alive, None)
}

fn framed(
    chunks: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
    end: Option<&'static [u8]>,
) -> Response {
    let bytes = async_stream::stream! {
        let mut encoder = SseEncoder::new();
        let mut chunks = Box::pin(chunks);
        let mut ended = false;
        while !ended {
            match tokio::time::timeout(keep_alive, chunks.next()).await {
                Ok(Some(event)) => {
                    encoder.push_event(&event);
                    // What is ready too goes in the same write.
                    for _ in 1..BATCH {
                        match chunks.next().now_or_never() {
                            Some(Some(event)) => encoder.push_event(&event),
                            Some(None) => {
                                ended = true;
                                break;
                            }
                            None => break,
                        }
                    }
                }
                Ok(None) => break,
                Err(_idle) => encoder.push_raw(KEEP_ALIVE),
            }
            yield Ok::<_, Infallible>(encoder.take());
        }
        if let Some(end) = end {
            encoder.push_raw(end);
            yield Ok(encoder.take());
        }
    };
    let mut response = Response::new(Body::from_stream(bytes));
    for (name, value) in HEADERS {
        response.headers_mut().insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    response
}
