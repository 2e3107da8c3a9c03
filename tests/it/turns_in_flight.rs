//! Turns in flight under stress: held turns that survive their readers for
//! the right reasons, aborts at any moment, caps that cannot be dodged, and
//! a socket that keeps serving while an approved call runs.

use crate::common;
use crate::common::Must;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ws::{asking, connect, held, next, next_within, says, send, turn};
use common::{Server, wait};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use toolgate::Config;

/// The status of a resume GET, without reading its (streaming) body.
async fn resume_status(server: &Server, chat: &str) -> u16 {
    let response = reqwest::get(format!("{}/stream/{chat}/stream", server.url))
        .await
        .must();
    response.status().as_u16()
}

/// Waits until `chat` has no turn in flight: an SSE resume answers 204.
async fn done(server: &Server, chat: &str) {
    wait::until_ok(&format!("{chat} to have no turn in flight"), || async {
        let status = tokio::time::timeout(Duration::from_secs(2), resume_status(server, chat))
            .await
            .map_err(|_| "a resume that did not answer".to_owned())?;
        if status == 204 {
            Ok(())
        } else {
            Err(format!("a resume answering {status}"))
        }
    })
    .await;
}

/// A `resume` of `chat` answers `no-active` (and does not hang).
async fn resume_finds_nothing(socket: &mut common::ws::Socket, chat: &str) {
    let frame = json!({"type": "resume", "requestId": "r2", "id": chat, "headers": {}, "body": {}});
    send(socket, frame).await;
    let mut frames = Vec::new();
    let verdict = loop {
        match next_within(socket, Duration::from_secs(3)).await {
            Some(frame) if frame["requestId"] == "r2" && frame["type"] != "start" => {
                break Some(frame);
            }
            Some(frame) => frames.push(frame),
            None => break None,
        }
    };
    assert_eq!(
        verdict.map(|f| f["type"].clone()),
        Some(json!("no-active")),
        "resume of an aborted turn hung; frames: {frames:?}"
    );
}

const QUESTION: &str = "\"toolName\":\"adk_request_confirmation\",\"input\"";

/// A held turn whose step also made a call that needs no confirmation
/// (the question is not its last chunk) still survives a reload.
#[tokio::test]
async fn held_turn_with_a_free_call_survives_a_reload() {
    let server = Server::start().await;
    let (body, _) = server
        .open_until(
            &held(
                "chat-mix",
                "Send 50 USD to Hanako and what is the weather in Paris",
            ),
            |s| s.contains(QUESTION) && s.contains("\"type\":\"tool-output-available\""),
        )
        .await;
    drop(body); // the page reloads
    // Time for the server to see the reader leave, and wrongly end the held
    // turn if it would: what must not happen has no event to wait for.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resumed = resume_status(&server, "chat-mix").await;
    // should be 200: the turn is waiting for a human.
    assert_eq!(
        resumed, 200,
        "the held turn was cancelled when its reader left"
    );
}

/// Two questions in one held step: once the first is decided elsewhere,
/// the turn still waits for the second, with nobody reading it.
#[tokio::test]
async fn second_question_of_a_held_turn_survives_without_readers() {
    let server = Server::start().await;
    let (body, _) = server
        .open_until(
            &held("chat-two", "Send 50 USD to Hanako and pay $20 to Bob"),
            |s| s.matches(QUESTION).count() == 2,
        )
        .await;
    drop(body); // the page reloads; the turn is held (both questions open)
    // Time for the server to see the reader leave, and wrongly end the held
    // turn if it would: what must not happen has no event to wait for.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(resume_status(&server, "chat-two").await, 200);
    // Decide the first question out of band (e.g. from a phone).
    let open = server.get("/api/confirmations?chatId=chat-two").await;
    let open: Vec<Value> = serde_json::from_str(&open.body).unwrap_or_default();
    assert_eq!(open.len(), 2, "{open:?}");
    let first = open[0]["id"].as_str().unwrap_or_default().to_owned();
    let decided = server.approve(&first).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
    // Time for the decision to reach the turn, and wrongly end it if it
    // would: what must not happen has no event to wait for.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The second question is still open and the turn should still hold it.
    let still_open = server.get("/api/confirmations?chatId=chat-two").await;
    assert!(still_open.body.contains("\"id\""), "{}", still_open.body);
    assert_eq!(
        resume_status(&server, "chat-two").await,
        200,
        "the turn holding the second question was cancelled"
    );
}

/// `send` then `abort` in one burst (the turn's task aborted before its
/// first poll): the turn is done, a resume answers `no-active`.
#[tokio::test]
async fn abort_right_after_send_leaves_no_zombie() {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    // Both frames written before the server task runs (one read).
    send(&mut socket, turn("r1", &says("chat-z", "count to 50"))).await;
    send(&mut socket, json!({"type": "abort", "requestId": "r1"})).await;
    done(&server, "chat-z").await;
    resume_finds_nothing(&mut socket, "chat-z").await;
}

/// The same at the `Runs` level, deterministically: the place is freed.
#[tokio::test(flavor = "current_thread")]
async fn runs_abort_before_first_poll_marks_done() {
    use toolgate::run::{Limits, Owner, Runs};
    let limits = Limits {
        per_principal: 1,
        total: 16,
        stall: Duration::from_secs(60),
        held: Duration::from_secs(60),
    };
    let runs = Arc::new(Runs::new(limits));
    let owner = |chat| Owner {
        principal: "p",
        chat_id: chat,
        capped: true,
    };
    let waiting = || tokio::sync::watch::channel(false).1;
    let turn = futures::stream::pending().boxed();
    let Ok((run, reader)) = runs.start(owner("c"), turn, waiting()).await else {
        panic!("not started")
    };
    run.abort(); // before the spawned task ever ran
    drop(reader);
    wait::until_true("the aborted run to be done", || run.is_done()).await;
    assert!(
        runs.get("p", "c").is_none(),
        "the aborted run stays registered"
    );
    assert!(
        runs.start(
            owner("other"),
            futures::stream::pending().boxed(),
            waiting()
        )
        .await
        .is_ok(),
        "the aborted run holds the user's only slot for good"
    );
}

/// `maxTurnsPerUser: 1` and `maxTurns: 1` hold even when new turns of one
/// chat supersede a turn that is still read.
#[tokio::test]
async fn superseded_turns_still_count_against_the_caps() -> anyhow::Result<()> {
    let server = Server::from_yaml(
        "model:\n  deltaDelayMs: 20\nstream:\n  maxTurnsPerUser: 1\n  maxTurns: 1\n",
    )
    .await;
    let mut socket = connect(&server).await;
    for r in ["r1", "r2", "r3"] {
        send(&mut socket, turn(r, &says("chat-c", "count to 400"))).await;
    }
    // Let them all get going, then see who is still streaming.
    let started = Instant::now();
    let mut streaming = std::collections::BTreeSet::new();
    let mut refused = Vec::new();
    while started.elapsed() < Duration::from_millis(1500) {
        let Some(frame) = next_within(&mut socket, Duration::from_millis(500)).await else {
            break;
        };
        if frame["type"] == "error" {
            refused.push(frame.clone());
        }
        if started.elapsed() > Duration::from_millis(700)
            && frame["type"] == "chunk"
            && frame["chunk"]["type"] == "text-delta"
        {
            streaming.insert(frame["requestId"].as_str().unwrap_or_default().to_owned());
        }
    }
    assert!(
        streaming.len() <= 1,
        "{} turns streaming at once with maxTurnsPerUser 1 / maxTurns 1: {streaming:?} (refused: {refused:?})",
        streaming.len()
    );
    Ok(())
}

/// A `resume` cannot reuse a requestId in flight: one stream per requestId.
#[tokio::test]
async fn resume_with_a_request_id_in_use_is_refused() {
    let server = Server::start().await;
    let (mut socket, _) = asking(&server, "chat-dup").await;
    send(
        &mut socket,
        json!({"type": "resume", "requestId": "r1", "id": "chat-dup", "headers": {}, "body": {}}),
    )
    .await;
    let mut frames = Vec::new();
    while let Some(frame) = next_within(&mut socket, Duration::from_millis(500)).await {
        frames.push(frame);
    }
    let starts = frames
        .iter()
        .filter(|f| f["type"] == "start" && f["requestId"] == "r1")
        .count();
    let zeros = frames
        .iter()
        .filter(|f| f["type"] == "chunk" && f["requestId"] == "r1" && f["sequence"] == 0)
        .count();
    assert!(
        starts == 0 && zeros == 0,
        "a second `start` and sequence 0 again under requestId r1: {frames:?}"
    );
}

/// The socket keeps serving frames while a `confirm` frame's approved call runs.
#[tokio::test]
async fn confirm_frame_does_not_block_the_socket() {
    use toolgate::tools::{ProcessPayment, Registry, Tool, ToolContext, ToolError};
    /// A payment that takes 4 s on purpose, and says when it started.
    struct Slow(ProcessPayment, Arc<std::sync::atomic::AtomicBool>);
    #[toolgate::tools::async_trait]
    impl Tool for Slow {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn description(&self) -> &str {
            self.0.description()
        }
        fn parameters(&self) -> Value {
            self.0.parameters()
        }
        fn needs_confirmation(&self, args: &Value) -> bool {
            self.0.needs_confirmation(args)
        }
        fn may_need_confirmation(&self) -> bool {
            self.0.may_need_confirmation()
        }
        fn confirmation_hint(&self, args: &Value) -> String {
            self.0.confirmation_hint(args)
        }
        async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
            self.1.store(true, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(4)).await;
            self.0.execute(args, ctx).await
        }
    }
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = Server::with(Config::default(), |app| {
        let mut registry = Registry::new();
        registry.register(Slow(ProcessPayment::new(1_000_000.0), started.clone()));
        app.with_registry(registry)
    })
    .await;
    let mut socket = connect(&server).await;
    send(
        &mut socket,
        turn("r1", &held("chat-slow", "Send 50 USD to Hanako")),
    )
    .await;
    loop {
        let frame = next(&mut socket).await;
        if frame["chunk"].to_string().contains("originalFunctionCall") {
            break;
        }
    }
    let id = {
        let open = server.get("/api/confirmations?chatId=chat-slow").await;
        let open: Vec<Value> = serde_json::from_str(&open.body).unwrap_or_default();
        open[0]["id"].as_str().unwrap_or_default().to_owned()
    };
    send(
        &mut socket,
        json!({"type": "confirm", "confirmationId": id, "confirmed": true}),
    )
    .await;
    wait::until_true("the approved payment to start", || {
        started.load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;
    let asked = Instant::now();
    send(
        &mut socket,
        json!({"type": "resume", "requestId": "r2", "id": "chat-none", "headers": {}, "body": {}}),
    )
    .await;
    loop {
        let frame = next(&mut socket).await;
        if frame["requestId"] == "r2" {
            break;
        }
    }
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "the socket answered a frame only after {:?}: the confirm frame blocked it",
        asked.elapsed()
    );
}

/// An abort stops the model for every reader, not only for the aborting request.
#[tokio::test]
async fn abort_stops_the_model_even_with_another_reader() -> anyhow::Result<()> {
    let server = Server::from_yaml("model:\n  deltaDelayMs: 20\n").await;
    let mut a = connect(&server).await;
    send(&mut a, turn("r1", &says("chat-ab", "count to 1000"))).await;
    loop {
        if next(&mut a).await["chunk"]["type"] == "text-delta" {
            break;
        }
    }
    let mut b = connect(&server).await;
    send(
        &mut b,
        json!({"type": "resume", "requestId": "r9", "id": "chat-ab", "headers": {}, "body": {}}),
    )
    .await;
    loop {
        if next(&mut b).await["chunk"]["type"] == "text-delta" {
            break;
        }
    }
    send(&mut a, json!({"type": "abort", "requestId": "r1"})).await;
    let ended = async {
        loop {
            let frame = next(&mut b).await;
            if frame["type"] == "end" {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(3), ended)
        .await
        .unwrap_or_else(|_| panic!("the model went on after the abort"));
    Ok(())
}

/// As above, with both frames in one TCP write; over SSE too.
#[tokio::test]
async fn abort_in_the_same_write_as_send_leaves_no_zombie() -> anyhow::Result<()> {
    let server = Server::start().await;
    let mut socket = connect(&server).await;
    let send_frame = turn("r1", &says("chat-z", "count to 50"));
    let abort = json!({"type": "abort", "requestId": "r1"});
    socket
        .feed(Message::Text(send_frame.to_string().into()))
        .await?;
    socket.feed(Message::Text(abort.to_string().into())).await?;
    socket.flush().await?;
    // Over SSE: the resume answers 204 (a zombie answered 200, then nothing).
    done(&server, "chat-z").await;
    resume_finds_nothing(&mut socket, "chat-z").await;
    Ok(())
}

/// Without auth every caller is `anonymous`: abandoned held turns must not
/// lock everyone else out through the per-user cap.
#[tokio::test]
async fn abandoned_held_turns_do_not_lock_out_everyone() {
    let server = Server::start().await;
    for n in 0..16 {
        let chat = format!("tab-{n}");
        let (body, _) = server
            .open_until(&held(&chat, "Send 50 USD to Hanako"), |s| {
                s.contains(QUESTION)
            })
            .await;
        drop(body); // the visitor closes the tab
    }
    // Time for the server to see the visitors leave: the held turns stay,
    // and must not lock anyone out; that has no event to wait for.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Another visitor, another chat, no hold at all:
    let reply = server.chat(&says("someone-else", "hello")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

/// Many requests of one chat at once: each newer turn supersedes the older
/// in the registry, but none is stopped before its own request reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_of_one_chat_are_each_answered() {
    let server = Server::start().await;
    let body = says("chat-crowd", "hello there");
    let replies = futures::future::join_all((0..200).map(|_| server.chat(&body))).await;
    for reply in &replies {
        assert!(reply.body.contains(r#""type":"finish""#), "{}", reply.body);
    }
}
