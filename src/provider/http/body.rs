//! A model's response body, read: every read within a timeout, every SSE
//! event within a size cap, a whole body up to a cap, an error body's message.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use hyper::Response;
use hyper::body::Incoming;
use sse_stream::{Sse, SseByteStream};

use super::{MAX_ERROR_BODY, MAX_EVENT_BYTES, Upstream, error_chain};
use crate::provider::ProviderError;

impl Upstream {
    /// The SSE events of a response's body; every read within the read
    /// timeout, every event within the size cap. Public for the fuzz targets,
    /// which feed it bodies cut at arbitrary points.
    pub fn events<B, E>(
        &self,
        body: B,
    ) -> impl Stream<Item = Result<Sse, ProviderError>> + Send + 'static
    where
        B: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
        E: std::error::Error,
    {
        let since_event = Arc::new(AtomicUsize::new(0));
        let counted = since_event.clone();
        let bytes = Reads {
            body,
            limit: self.config.read_timeout,
            timer: None,
            waiting: false,
        }
        .map(move |chunk| {
            let chunk = chunk?;
            if counted.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len() > MAX_EVENT_BYTES {
                return Err(BodyError::TooLarge);
            }
            Ok(chunk)
        });
        let upstream = self.clone();
        SseByteStream::new(bytes)
            .inspect_ok(move |_| since_event.store(0, Ordering::Relaxed))
            .map_err(move |e| upstream.stream_error(e))
    }

    fn stream_error(&self, error: sse_stream::Error) -> ProviderError {
        let provider = self.config.provider;
        match error {
            sse_stream::Error::Body(inner) => match inner.downcast_ref::<BodyError>() {
                Some(BodyError::Timeout) => ProviderError::Timeout {
                    provider,
                    secs: self.config.read_timeout.as_secs_f32(),
                },
                _ => ProviderError::Stream(self.redact(&inner.to_string())),
            },
            other => ProviderError::Stream(format!("{provider} sent an unreadable event: {other}")),
        }
    }
}

/// A body read up to a cap.
pub(super) enum Capped {
    Whole(Vec<u8>),
    /// The first `cap` bytes: there were more, left unread.
    Cut(Vec<u8>),
}

/// Reads `body`, at most `cap` bytes of it: a larger body is cut there and
/// the rest never read (dropping the body closes it).
pub(super) async fn capped(body: Incoming, cap: usize) -> Result<Capped, hyper::Error> {
    let mut body = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await.transpose()? {
        let room = cap.saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(Capped::Cut(bytes));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Capped::Whole(bytes))
}

/// A body whose every read comes within `limit`, counted from when the
/// reader starts waiting for it. One timer for the whole body, pushed back
/// when a wait starts (without a lock, tokio extends a registered timer in
/// place), rather than one registered and dropped per read.
struct Reads<B> {
    body: B,
    limit: Duration,
    /// Made at the first wait: a body that is never waited for needs none.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the last poll found nothing to read.
    waiting: bool,
}

impl<B, E> Stream for Reads<B>
where
    B: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error,
{
    type Item = Result<Bytes, BodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let read = match this.body.poll_next_unpin(cx) {
            Poll::Ready(read) => read,
            Poll::Pending => {
                let timer = match &mut this.timer {
                    Some(timer) if this.waiting => timer,
                    Some(timer) => {
                        timer
                            .as_mut()
                            .reset(tokio::time::Instant::now() + this.limit);
                        timer
                    }
                    timer @ None => timer.insert(Box::pin(tokio::time::sleep(this.limit))),
                };
                this.waiting = true;
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.waiting = false;
                return Poll::Ready(Some(Err(BodyError::Timeout)));
            }
        };
        this.waiting = false;
        Poll::Ready(read.map(|read| read.map_err(|e| BodyError::Read(error_chain(&e)))))
    }
}

#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("the connection to the model broke: {0}")]
    Read(String),
    #[error("the model went silent")]
    Timeout,
    #[error("the model sent an event larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
}

/// The provider's own message from an error body: `error.message` (OpenAI,
/// Anthropic, Gemini) or `error` as text, else the start of the body.
pub(super) async fn error_message(response: Response<Incoming>) -> String {
    let mut body = Vec::new();
    let mut chunks = response.into_body().into_data_stream();
    while let Ok(Some(Ok(chunk))) =
        tokio::time::timeout(Duration::from_secs(5), chunks.next()).await
    {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    message_of(&body)
}

pub(crate) fn message_of(body: &[u8]) -> String {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    // Gemini wraps its error in a one-element array on the SSE endpoint.
    let json = match json {
        Some(serde_json::Value::Array(mut items)) if !items.is_empty() => {
            Some(items.swap_remove(0))
        }
        other => other,
    };
    let found = json.as_ref().and_then(|json| {
        let error = json.get("error")?;
        match error.get("message").and_then(|m| m.as_str()) {
            Some(message) => Some(message.to_owned()),
            None => error.as_str().map(str::to_owned),
        }
    });
    found.unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        match text.char_indices().nth(500) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None if text.is_empty() => "no message".to_owned(),
            None => text.to_owned(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_the_providers_own() {
        assert_eq!(
            message_of(br#"{"error":{"message":"Rate limit reached","type":"requests"}}"#),
            "Rate limit reached"
        );
        assert_eq!(
            message_of(br#"[{"error":{"code":400,"message":"API key not valid"}}]"#),
            "API key not valid"
        );
        assert_eq!(
            message_of(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(message_of(b"Bad Gateway"), "Bad Gateway");
        assert_eq!(message_of(b""), "no message");
        assert_eq!(message_of("é".repeat(600).as_bytes()).chars().count(), 501);
    }

    /// A body that sends `reads` pieces `gap` apart, then nothing.
    fn spaced(
        reads: usize,
        gap: Duration,
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        Box::pin(futures::stream::unfold(0, move |n| async move {
            tokio::time::sleep(gap).await;
            if n == reads {
                std::future::pending::<()>().await;
            }
            Some((Ok(Bytes::from_static(b"x")), n + 1))
        }))
    }

    #[tokio::test]
    async fn the_read_timeout_counts_from_each_wait_not_from_the_first() {
        // Each read comes before the limit (the body is polled before the
        // timer), and all of them take more than twice as long.
        let limit = Duration::from_millis(200);
        let mut reads = Reads {
            body: spaced(5, Duration::from_millis(100)),
            limit,
            timer: None,
            waiting: false,
        };
        let start = tokio::time::Instant::now();
        for _ in 0..5 {
            assert!(matches!(reads.next().await, Some(Ok(_))), "a read in time");
        }
        assert!(start.elapsed() >= 2 * limit);
        // The body is quiet now; the reader takes its time before it waits.
        tokio::time::sleep(2 * limit).await;
        let waited = tokio::time::Instant::now();
        assert!(matches!(reads.next().await, Some(Err(BodyError::Timeout))));
        assert!(waited.elapsed() >= limit);
    }
}
