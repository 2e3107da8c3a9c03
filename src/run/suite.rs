//! The suite every turn log passes: turns run on `here` and are resumed on
//! `there`, the same registry for the memory log, another instance sharing
//! the store for Redis.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use tokio::sync::watch;

use super::log::MAX_LOG_BYTES;
use super::*;
use crate::metrics::Transport;
use crate::protocol::UiChunk;
use crate::protocol::sink::Batch;
use crate::protocol::sse::Event;

fn limits() -> Limits {
    let minute = Duration::from_secs(60);
    Limits {
        per_principal: 8,
        total: 64,
        stall: minute,
        held: minute,
    }
}

/// A turn whose chunks the test sends, and its first reader.
async fn turn(
    runs: &Arc<Runs>,
    principal: &'static str,
    chat: &'static str,
) -> (mpsc::Sender<UiChunk>, BoxStream<'static, (usize, Event)>) {
    let (tx, rx) = mpsc::channel(64);
    let owner = Owner {
        principal,
        chat_id: chat,
        capped: true,
    };
    let Ok((_, reader)) = runs
        .start(owner, rx.map(Batch::of).boxed(), watch::channel(false).1)
        .await
    else {
        panic!("not started")
    };
    (tx, reader.chunks().boxed())
}

fn said(text: &str) -> UiChunk {
    UiChunk::Error {
        error_text: text.to_owned(),
    }
}

async fn send(tx: &mut mpsc::Sender<UiChunk>, chunk: UiChunk) {
    use futures::SinkExt;
    tx.send(chunk).await.unwrap_or_else(|e| panic!("{e}"));
}

async fn next(
    reader: &mut BoxStream<'static, (usize, Event)>,
    what: &str,
) -> Option<(usize, Event)> {
    tokio::time::timeout(Duration::from_secs(10), reader.next())
        .await
        .unwrap_or_else(|_| panic!("no chunk: {what}"))
}

async fn resume(runs: &Arc<Runs>, principal: &str, chat: &str) -> Option<Reader> {
    let owner = Owner {
        principal,
        chat_id: chat,
        capped: true,
    };
    runs.resume(owner, super::StartIndex::START, Transport::Sse)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|resumed| resumed.reader)
}

/// Replays from the start, follows live, ends with the turn, and only
/// for its own principal and chat. An ended turn is no longer found;
/// with `replays_ended` (the shared log) only after it was replayed
/// once more to its end: a client cut as its instance died may not
/// have read the end already written.
pub(super) async fn replays_follows_and_ends(
    here: Arc<Runs>,
    there: Arc<Runs>,
    replays_ended: bool,
) {
    let (mut tx, mut first) = turn(&here, "p", "c").await;
    let mut sent = Vec::new();
    for n in 0..3 {
        send(&mut tx, said(&format!("chunk {n}"))).await;
        sent.push(next(&mut first, "the first reader").await);
    }
    assert!(
        resume(&there, "q", "c").await.is_none(),
        "another principal"
    );
    assert!(resume(&there, "p", "d").await.is_none(), "another chat");
    let Some(again) = resume(&there, "p", "c").await else {
        panic!("not resumable")
    };
    let mut again = again.chunks();
    for want in &sent {
        assert_eq!(&next(&mut again, "the replay").await, want);
    }
    for n in 3..5 {
        send(&mut tx, said(&format!("chunk {n}"))).await;
        let live = next(&mut again, "following").await;
        assert_eq!(live.map(|(i, _)| i), Some(n));
    }
    drop(tx);
    assert_eq!(next(&mut again, "the end").await, None);
    let rest: Vec<usize> = first.map(|(i, _)| i).collect().await;
    assert_eq!(rest, [3, 4]);
    if replays_ended {
        // Its end is written by now: the reader above saw it.
        let Some(ended) = resume(&there, "p", "c").await else {
            panic!("an ended turn is not replayed")
        };
        let all: Vec<usize> = ended.chunks().map(|(i, _)| i).collect().await;
        assert_eq!(all, [0, 1, 2, 3, 4], "the ended turn's replay");
        return;
    }
    for _ in 0..1000 {
        if resume(&there, "p", "c").await.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("an ended turn is still resumable");
}

/// A turn is resumable from the moment it started, before it said
/// anything: its client may have its answer by then, and lose it.
pub(super) async fn resumable_once_started(here: Arc<Runs>, there: Arc<Runs>) {
    let (mut tx, _first) = turn(&here, "p", "quiet").await;
    let Some(again) = resume(&there, "p", "quiet").await else {
        panic!("a started turn is not resumable")
    };
    let mut again = again.chunks();
    send(&mut tx, said("hello")).await;
    assert_eq!(
        next(&mut again, "the first chunk").await.map(|(i, _)| i),
        Some(0)
    );
    drop(tx);
    assert_eq!(next(&mut again, "the end").await, None);
}

/// A turn over the replay limit cannot be resumed from its start.
pub(super) async fn forgets_the_start_past_the_cap(here: Arc<Runs>, there: Arc<Runs>) {
    let (mut tx, mut first) = turn(&here, "p", "big").await;
    let big = "x".repeat(1 << 20);
    let n = MAX_LOG_BYTES / big.len() + 2;
    for _ in 0..n {
        send(&mut tx, said(&big)).await;
        next(&mut first, "a big chunk").await;
    }
    // One more: everything before it was read, and written everywhere.
    send(&mut tx, said("small")).await;
    next(&mut first, "the small chunk").await;
    assert!(
        resume(&there, "p", "big").await.is_none(),
        "resumed without its start"
    );
    drop(tx);
}

#[tokio::test]
async fn memory() {
    let runs = || Arc::new(Runs::new(limits()));
    let here = runs();
    replays_follows_and_ends(here.clone(), here, false).await;
    let here = runs();
    resumable_once_started(here.clone(), here).await;
    let here = runs();
    forgets_the_start_past_the_cap(here.clone(), here).await;
}

/// Two instances sharing one Redis: what one runs, the other resumes.
#[cfg(feature = "redis-server")]
#[tokio::test]
async fn redis() {
    let url = std::env::var("TOOLGATE_TEST_REDIS_URL")
        .unwrap_or_else(|_| panic!("no Redis server: set TOOLGATE_TEST_REDIS_URL"));
    let prefix = format!("test-{}:", uuid::Uuid::new_v4().simple());
    let store = crate::store::Store::redis(&url, &prefix)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let instance = |name: &str| Arc::new(Runs::new(limits()).with_turn_logs(store.turn_logs(name)));
    replays_follows_and_ends(instance("a"), instance("b"), true).await;
    resumable_once_started(instance("a"), instance("b")).await;
    forgets_the_start_past_the_cap(instance("a"), instance("b")).await;
}
