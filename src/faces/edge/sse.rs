//! The SSE response: chunks that are ready together go out in one write,
//! a keep-alive comment after each idle interval, `[DONE]` at the end.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use futures::{FutureExt, Stream, StreamExt};

use crate::protocol::sse::{DONE, Event, HEADERS, KEEP_ALIVE, SseEncoder};
use crate::run::{LogRead, Subscription};

/// Most chunks written in one frame.
const BATCH: usize = 64;

/// The SSE response for a turn's chunks, each already an event.
pub fn response(
    chunks: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    framed(Polled::new(chunks), keep_alive, Some(DONE))
}

/// The same without `[DONE]` (AG-UI's clients read every `data:` line as
/// an event).
pub fn response_without_done(
    events: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    framed(Polled::new(events), keep_alive, None)
}

/// The SSE response of a reader of a turn's log: each write copied
/// straight from the log, without handing the events out one by one.
pub fn log_response(reader: Subscription, keep_alive: Duration) -> Response {
    framed(reader, keep_alive, Some(DONE))
}

/// Where a response's events come from.
trait Events: Send + 'static {
    /// Up to `at_most` of the events there now, each into `encoder`.
    fn read(&mut self, at_most: usize, encoder: &mut SseEncoder) -> LogRead;

    /// Resolves when [`Events::read`] has something to say.
    fn news(&mut self) -> impl Future<Output = ()> + Send + '_;
}

impl Events for Subscription {
    fn read(&mut self, at_most: usize, encoder: &mut SseEncoder) -> LogRead {
        Subscription::read(self, at_most, |unread| {
            // Exactly the write's size: no growing on the way, and nothing
            // kept between writes by a stream that waits.
            encoder.reserve(unread.clone().map(|run| run.sse().len()).sum());
            // A batch's events follow one another: one copy a batch.
            for run in unread {
                encoder.push_raw(run.sse());
            }
        })
    }

    fn news(&mut self) -> impl Future<Output = ()> + Send + '_ {
        Subscription::news(self)
    }
}

/// A stream of events, with the one its last wait found.
struct Polled<S> {
    events: Pin<Box<S>>,
    next: Option<Event>,
    ended: bool,
}

impl<S> Polled<S> {
    fn new(events: S) -> Self {
        Self {
            events: Box::pin(events),
            next: None,
            ended: false,
        }
    }
}

impl<S: Stream<Item = Event> + Send + 'static> Events for Polled<S> {
    fn read(&mut self, at_most: usize, encoder: &mut SseEncoder) -> LogRead {
        let mut read = 0;
        if let Some(event) = self.next.take() {
            encoder.push_event(&event);
            read += 1;
        }
        while read < at_most && !self.ended {
            match self.events.next().now_or_never() {
                Some(Some(event)) => {
                    encoder.push_event(&event);
                    read += 1;
                }
                Some(None) => self.ended = true,
                None => break,
            }
        }
        match (read, self.ended) {
            (0, true) => LogRead::Ended,
            (0, false) => LogRead::Nothing,
            _ => LogRead::Chunks,
        }
    }

    fn news(&mut self) -> impl Future<Output = ()> + Send + '_ {
        std::future::poll_fn(|cx| {
            if self.next.is_some() || self.ended {
                return Poll::Ready(());
            }
            match self.events.poll_next_unpin(cx) {
                Poll::Ready(Some(event)) => self.next = Some(event),
                Poll::Ready(None) => self.ended = true,
                Poll::Pending => return Poll::Pending,
            }
            Poll::Ready(())
        })
    }
}

fn framed(mut events: impl Events, keep_alive: Duration, end: Option<&'static [u8]>) -> Response {
    let bytes = async_stream::stream! {
        let mut encoder = SseEncoder::new();
        // One timer for the stream, pushed back at each wait: a timeout
        // made per wait would enter the runtime's timer wheel (under its
        // lock) each time the turn has nothing yet, and leave it again.
        let idle = tokio::time::sleep(keep_alive);
        tokio::pin!(idle);
        loop {
            match events.read(BATCH, &mut encoder) {
                LogRead::Chunks => {
                    yield Ok::<_, Infallible>(encoder.take());
                    continue;
                }
                LogRead::Ended => break,
                LogRead::Nothing => {}
            }
            idle.as_mut().reset(tokio::time::Instant::now() + keep_alive);
            tokio::select! {
                biased;
                () = events.news() => {}
                () = &mut idle => {
                    encoder.push_raw(KEEP_ALIVE);
                    yield Ok(encoder.take());
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::UiChunk;

    /// `n` events, `gap` apart, after a first wait of `first`.
    fn paced(n: usize, first: Duration, gap: Duration) -> impl Stream<Item = Event> + Send {
        futures::stream::unfold(0, move |i| async move {
            if i == n {
                return None;
            }
            tokio::time::sleep(if i == 0 { first } else { gap }).await;
            Some((Event::of(&UiChunk::StartStep), i + 1))
        })
    }

    async fn body(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        String::from_utf8_lossy(&bytes.unwrap_or_default()).into_owned()
    }

    #[tokio::test]
    async fn the_keep_alive_counts_from_each_wait_not_from_the_first() {
        // Four events 150 ms apart, with a keep-alive after 400 ms idle:
        // together they take more than the idle time, yet none waits it.
        let ms = Duration::from_millis;
        let steady = body(response(paced(4, ms(150), ms(150)), ms(400))).await;
        assert_eq!(steady.matches("start-step").count(), 4, "{steady}");
        assert!(!steady.contains(": keep-alive"), "{steady}");
        assert!(steady.ends_with("data: [DONE]\n\n"), "{steady}");
        // A wait longer than the idle time gets a keep-alive.
        let slow = body(response(paced(1, ms(600), ms(0)), ms(400))).await;
        assert_eq!(slow.matches(": keep-alive").count(), 1, "{slow}");
    }
}
