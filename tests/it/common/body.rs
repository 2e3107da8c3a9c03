//! Reading a streamed response body piece by piece, as a client does.

use futures::StreamExt;

use serde_json::Value;

use super::Reply;
use super::wait::PATIENCE;

/// A turn's response body, boxed and pinned, as [`super::Server::open_until`]
/// hands it back.
pub type Streaming =
    std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// A streamed body, as `reqwest::Response::bytes_stream` gives it.
pub trait Body: futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin {}
impl<T: futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin> Body for T {}

/// Reads `body` into `seen` until `done` holds of what was read; fails the
/// test if the body ends or fails first, or after [`PATIENCE`].
pub async fn read_until(body: &mut impl Body, seen: &mut String, done: impl Fn(&str) -> bool) {
    let read = async {
        while !done(seen) {
            match body.next().await {
                Some(Ok(piece)) => seen.push_str(&String::from_utf8_lossy(&piece)),
                other => panic!("{other:?} before the awaited part, in {seen}"),
            }
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("waited {PATIENCE:?} in vain, in {seen}"));
}

/// Reads `body` until it holds `needle`.
pub async fn read_to(body: &mut impl Body, seen: &mut String, needle: &str) {
    read_until(body, seen, |s| s.contains(needle)).await;
}

/// Reads `body` to its end into `seen`; whether it ended cleanly (not cut
/// off by an error). Fails the test after [`PATIENCE`].
pub async fn read_to_end(body: &mut impl Body, seen: &mut String) -> bool {
    let read = async {
        while let Some(piece) = body.next().await {
            match piece {
                Ok(piece) => seen.push_str(&String::from_utf8_lossy(&piece)),
                Err(_) => return false,
            }
        }
        true
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("the stream never ended: {seen}"))
}

/// The JSON chunks of the SSE read so far (as [`Reply::chunks`]).
pub fn chunks_of(sse: &str) -> Vec<Value> {
    Reply {
        status: 200,
        headers: Default::default(),
        body: sse.to_owned(),
    }
    .chunks()
}

/// Whether the SSE read so far holds the confirmation question.
pub fn asked(sse: &str) -> bool {
    sse.contains(r#""toolName":"adk_request_confirmation","input""#)
}

/// The id of the confirmation question in the SSE read so far.
pub fn question(sse: &str) -> String {
    chunks_of(sse)
        .into_iter()
        .find(|c| {
            c["toolName"] == "adk_request_confirmation" && c["type"] == "tool-input-available"
        })
        .and_then(|c| c["toolCallId"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no question in {sse}"))
}
