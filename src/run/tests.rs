use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;

use super::*;
use crate::protocol::UiChunk;
use crate::protocol::sink::Batch;

fn runs(per_principal: usize, total: usize) -> Arc<Runs> {
    let second = Duration::from_secs(60);
    Arc::new(Runs::new(Limits {
        per_principal,
        total,
        stall: second,
        held: second,
    }))
}

fn owner(principal: &str, chat_id: &str) -> Owner<'static> {
    Owner {
        principal: principal.to_owned().leak(),
        chat_id: chat_id.to_owned().leak(),
        capped: true,
    }
}

fn waiting() -> watch::Receiver<bool> {
    watch::channel(false).1
}

/// The numbers of the first `n` chunks `reader` reads.
async fn numbers(reader: Subscription, n: usize) -> Vec<usize> {
    Box::pin(reader.chunks())
        .take(n)
        .map(|(i, _)| i)
        .collect()
        .await
}

fn say(tx: &mut futures::channel::mpsc::Sender<UiChunk>, chunk: UiChunk) {
    tx.try_send(chunk).unwrap_or_else(|e| panic!("{e}"));
}

/// Waits (at most five seconds) for `run` to be done; else `why`.
async fn stops(run: &Run, why: &str) {
    let done = async {
        while !run.is_done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), done)
        .await
        .unwrap_or_else(|_| panic!("{why}"));
}

/// `n` chunks, a piece each.
fn chunks(n: usize) -> crate::agent::Pieces {
    futures::stream::iter((0..n).map(|_| Batch::of(UiChunk::StartStep))).boxed()
}

#[tokio::test]
async fn a_resume_replays_from_the_start() {
    let runs = runs(4, 16);
    let turn = chunks(3).chain(futures::stream::pending()).boxed();
    let Ok((run, first)) = runs.start(owner("p", "c"), turn, waiting()).await else {
        panic!("not started")
    };
    let mut first = Box::pin(first.chunks());
    for n in 0..3 {
        assert_eq!(first.next().await.map(|(i, _)| i), Some(n));
    }
    let Some(again) = runs.get("p", "c").and_then(|r| r.resume()) else {
        panic!("not resumable")
    };
    let seen = numbers(again, 3).await;
    assert_eq!(seen, [0, 1, 2]);
    run.abort();
    assert_eq!(first.next().await, None);
    assert!(runs.get("p", "c").is_none());
}

#[tokio::test]
async fn a_turn_everyone_left_stops_unless_it_waits_for_a_human() {
    let runs = runs(4, 16);
    let turn = || chunks(1).chain(futures::stream::pending()).boxed();
    let Ok((run, reader)) = runs.start(owner("p", "c"), turn(), waiting()).await else {
        panic!("not started")
    };
    drop(reader);
    stops(&run, "the turn kept going").await;

    let (asking, waits) = watch::channel(true);
    let Ok((held, reader)) = runs.start(owner("p", "d"), turn(), waits).await else {
        panic!("not started")
    };
    drop(reader);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_done(), "a turn waiting for a human was stopped");
    asking.send_replace(false);
    stops(&held, "the turn kept going once answered").await;
}

/// Read by its own request, a turn runs in that reader's task; it
/// moves to a task of its own once it waits for a human, or once its
/// reader leaves (and then stops, unless it waits for a human).
#[tokio::test]
async fn a_turn_runs_in_its_readers_task_until_it_waits_or_is_left() {
    let runs = runs(4, 16);
    let (mut tx, rx) = futures::channel::mpsc::channel(8);
    let Ok((run, reader)) = runs
        .start(owner("p", "c"), rx.map(Batch::of).boxed(), waiting())
        .await
    else {
        panic!("not started")
    };
    let mut reader = Box::pin(reader.chunks());
    for n in 0..3 {
        say(&mut tx, UiChunk::StartStep);
        assert_eq!(reader.next().await.map(|(i, _)| i), Some(n));
        assert!(
            run.is_inline(),
            "chunk {n}: the turn left its reader's task"
        );
    }
    drop(reader);
    assert!(!run.is_inline(), "left by its reader, the turn has no task");
    stops(&run, "an unread turn kept going").await;

    let (asking, waits) = watch::channel(false);
    let (mut tx, rx) = futures::channel::mpsc::channel(8);
    let Ok((held, reader)) = runs
        .start(owner("p", "d"), rx.map(Batch::of).boxed(), waits)
        .await
    else {
        panic!("not started")
    };
    let mut reader = Box::pin(reader.chunks());
    say(&mut tx, UiChunk::StartStep);
    assert_eq!(reader.next().await.map(|(i, _)| i), Some(0));
    assert!(held.is_inline());
    asking.send_replace(true);
    say(&mut tx, UiChunk::StartStep);
    assert_eq!(reader.next().await.map(|(i, _)| i), Some(1));
    assert!(
        !held.is_inline(),
        "a turn waiting for a human has no task of its own"
    );
    drop(reader);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_done(), "a turn waiting for a human was stopped");
    say(&mut tx, UiChunk::FinishStep);
    let Some(again) = held.resume() else {
        panic!("the held turn cannot be resumed")
    };
    let seen = numbers(again, 3).await;
    assert_eq!(seen, [0, 1, 2], "the held turn went on without its reader");
}

#[tokio::test]
async fn limits_per_user_and_in_all() {
    let runs = runs(1, 2);
    let hold = || futures::stream::pending().boxed();
    let _a = runs.start(owner("p", "c1"), hold(), waiting()).await;
    assert!(matches!(
        runs.start(owner("p", "c2"), hold(), waiting()).await,
        Err(RunError::PerPrincipal(1))
    ));
    let _b = runs.start(owner("q", "c1"), hold(), waiting()).await;
    assert!(matches!(
        runs.start(owner("r", "c1"), hold(), waiting()).await,
        Err(RunError::Total(2))
    ));
}

#[test]
fn a_start_index_names_a_chunk_never_past_the_tail() {
    use super::StartIndex;
    for (at, end, from) in [
        (0, 0, 0),
        (0, 7, 0),
        (3, 7, 3),
        (7, 7, 7),
        (9, 7, 7),
        (-1, 7, 6),
        (-7, 7, 0),
        (-8, 7, 0),
        (i64::MIN, 7, 0),
        (i64::MAX, 7, 7),
        (-1, 0, 0),
    ] {
        assert_eq!(StartIndex(at).resolve(end), from, "{at} of {end}");
    }
}

/// At shutdown every turn stops: one held for a human on a task of its
/// own, one its reader drives, and one started after the stop.
#[tokio::test]
async fn stop_ends_every_turn_wherever_it_runs() {
    let runs = runs(4, 16);
    let endless = || chunks(1).chain(futures::stream::pending()).boxed();
    let (_asking, waits) = watch::channel(true);
    let Ok((held, reader)) = runs.start(owner("p", "held"), endless(), waits).await else {
        panic!("not started")
    };
    drop(reader);
    let Ok((read, reader)) = runs.start(owner("p", "read"), endless(), waiting()).await else {
        panic!("not started")
    };
    let mut reader = Box::pin(reader.chunks());
    assert_eq!(reader.next().await.map(|(i, _)| i), Some(0));
    assert!(!held.is_inline() && read.is_inline());
    assert!(!held.is_done() && !read.is_done());

    runs.stop();
    stops(&held, "the held turn kept going").await;
    assert!(read.is_done(), "the turn its reader drives kept going");
    assert_eq!(reader.next().await, None);

    let Ok((late, _reader)) = runs.start(owner("p", "late"), endless(), waiting()).await else {
        panic!("not started")
    };
    assert!(late.is_done(), "a turn started after the stop kept going");
    tokio::time::timeout(Duration::from_secs(5), runs.idle())
        .await
        .unwrap_or_else(|_| panic!("turns still counted as running"));
}

/// A turn in a face's own words is its request's alone: no resume finds
/// it, it supersedes no chat's turn, and it counts as every turn does.
#[tokio::test]
async fn a_turn_started_alone_is_nobody_else_s() {
    let runs = runs(2, 16);
    let endless = || chunks(1).chain(futures::stream::pending()).boxed();
    let Ok((listed, _reader)) = runs.start(owner("p", "c"), endless(), waiting()).await else {
        panic!("not started")
    };
    let Ok((alone, reader)) = runs.start_alone(owner("p", "c"), endless(), waiting()) else {
        panic!("not started")
    };
    let Some(found) = runs.get("p", "c") else {
        panic!("the chat's turn is gone")
    };
    assert!(Arc::ptr_eq(&found, &listed), "a resume found the lone turn");
    assert!(!listed.is_done());
    assert_eq!(numbers(reader, 1).await, [0]);
    assert!(matches!(
        runs.start_alone(owner("p", "d"), endless(), waiting()),
        Err(RunError::PerPrincipal(2))
    ));
    alone.abort();
    listed.abort();
}
