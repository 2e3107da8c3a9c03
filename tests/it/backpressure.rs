//! A client that stops reading does not make the server buffer without
//! bound: the response is pulled, so the model is paused once the socket's
//! buffers are full.

use crate::common;
use crate::common::assert_contains;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{Server, user_says, wait};
use futures::StreamExt;
use futures::stream::BoxStream;
use toolgate::Config;
use toolgate::provider::{ModelProvider, ModelRequest, ProviderError, ProviderEvent};

/// Produces 1 KiB text deltas as fast as it is asked, counting them.
struct Firehose(Arc<AtomicU64>);

impl ModelProvider for Firehose {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let produced = self.0.clone();
        futures::stream::repeat_with(move || {
            produced.fetch_add(1, Ordering::Relaxed);
            Ok(ProviderEvent::TextDelta("x".repeat(1024).into()))
        })
        .boxed()
    }
}

#[tokio::test]
async fn a_reader_that_stops_pauses_the_model() {
    let produced = Arc::new(AtomicU64::new(0));
    let provider = Firehose(produced.clone());
    let server = Server::with(Config::default(), |app| app.with_provider(provider)).await;
    let mut body = Box::pin(server.open(&user_says("c", "hi")).await);
    assert!(body.next().await.is_some());
    // Stop reading. The model runs until the buffers between it and the
    // client are full, then waits.
    // Paused means: no progress for 25 windows in a row (within 30 s):
    // 2.5 s, past the 2 s at most that a turn nobody polls stays in its
    // reader's task, so that by then it runs in its own and waits for the
    // slowest reader. The windows are the measure (an absence of progress
    // has no event to wait for), so these sleeps stay.
    let (mut last, mut still) = (0, 0);
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = produced.load(Ordering::Relaxed);
        still = if now == last { still + 1 } else { 0 };
        last = now;
        if still == 25 {
            break;
        }
    }
    // Half a second more of nothing: still paused.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let paused_at = produced.load(Ordering::Relaxed);
    eprintln!("the model paused after {paused_at} KiB of text for a reader that stopped");
    assert_eq!(
        paused_at, last,
        "the model must be paused while nobody reads"
    );
    // What is held is bounded by socket buffers, not by the answer: a few MiB at most.
    assert!(
        paused_at < 16 * 1024,
        "produced {paused_at} KiB before pausing"
    );
    // Reading again resumes it.
    for _ in 0..64 {
        body.next().await;
    }
    wait::until_true("the model to resume once the reader reads again", || {
        produced.load(Ordering::Relaxed) > paused_at
    })
    .await;
}

/// Sets its flag when the model stream it lives in is dropped.
struct Dropped(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct WatchedFirehose(Arc<std::sync::atomic::AtomicBool>);

impl ModelProvider for WatchedFirehose {
    fn stream(&self, _: ModelRequest) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let guard = Dropped(self.0.clone());
        futures::stream::repeat_with(move || {
            let _alive = &guard;
            Ok(ProviderEvent::TextDelta("x".repeat(1024).into()))
        })
        .boxed()
    }
}

#[tokio::test]
async fn a_reader_stalled_past_the_limit_stops_the_turn() -> anyhow::Result<()> {
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let config = Config::from_yaml("stream:\n  stalledReaderSecs: 1\n")?;
    let provider = WatchedFirehose(dropped.clone());
    let server = Server::with(config, |app| app.with_provider(provider)).await;
    let mut body = Box::pin(server.open(&user_says("c", "hi")).await);
    assert!(body.next().await.is_some());
    wait::until_true("the model to give up its turn for a stalled reader", || {
        dropped.load(Ordering::SeqCst)
    })
    .await;
    // Reading again: the rest, then why it ended.
    let mut tail = Vec::new();
    while let Some(piece) = body.next().await {
        tail.extend_from_slice(&piece.unwrap_or_default());
        if tail.len() > 64 << 10 {
            tail.drain(..tail.len() - 1024);
        }
    }
    let tail = String::from_utf8_lossy(&tail);
    assert_contains(&tail, "a reader stopped reading for 1 s");
    assert!(tail.ends_with("data: [DONE]\n\n"));
    Ok(())
}
