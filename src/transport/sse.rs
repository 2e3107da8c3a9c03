//! The SSE response: chunks that are ready together go out in one write,
//! a keep-alive comment after each idle interval, `[DONE]` at the end.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::protocol::sse::{DONE, HEADERS, KEEP_ALIVE, SseEncoder};

/// Most chunks written in one frame.
const BATCH: usize = 64;

/// The SSE response for a turn's chunks, each already JSON.
pub fn response(
    chunks: impl Stream<Item = Bytes> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    let bytes = async_stream::stream! {
        let mut encoder = SseEncoder::new();
        let mut batches = Box::pin(chunks.ready_chunks(BATCH));
        loop {
            match tokio::time::timeout(keep_alive, batches.next()).await {
                Ok(Some(batch)) => {
                    for chunk in &batch {
                        encoder.push_json(chunk);
                    }
                }
                Ok(None) => break,
                Err(_idle) => encoder.push_raw(KEEP_ALIVE),
            }
            yield Ok::<_, Infallible>(encoder.take());
        }
        encoder.push_raw(DONE);
        yield Ok(encoder.take());
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
