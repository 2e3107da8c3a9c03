//! The socket's loops driven by channels: frames in through a channel's
//! stream, frames out through a channel's sink, and a dialect that echoes.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::ws::{Message, close_code};
use futures::channel::mpsc as frames;
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;

use super::{Frames, LiveLimits, read, write};
use crate::faces::LiveDialect;
use crate::faces::live::{Close, Farewell};

/// A dialect that echoes each text frame, takes `key` as naming a valid
/// key, closes on `bye`, and says what it would say in plain words.
struct Echo {
    keyed: bool,
    said: mpsc::UnboundedSender<Message>,
}

impl Frames for Echo {
    fn keyed(&self) -> bool {
        self.keyed
    }

    fn say(&self, message: Message) {
        let _ = self.said.send(message);
    }

    async fn text(&mut self, text: &str) -> Result<(), Close> {
        match text {
            "bye" => Err(Close::new(close_code::NORMAL, "bye")),
            _ => {
                self.keyed |= text == "key";
                self.say(Message::Text(text.into()));
                Ok(())
            }
        }
    }

    fn binary(&mut self) -> Result<(), Close> {
        Err(Close::new(close_code::UNSUPPORTED, "binary"))
    }

    async fn over_budget(&mut self, text: &str) {
        self.say(Message::Text(format!("dropped {text}").into()));
    }

    fn busy(&mut self) -> bool {
        false
    }

    fn farewell(&self, why: Farewell) -> Message {
        Message::Text(format!("farewell {why:?}").into())
    }
}

fn limits() -> LiveLimits {
    LiveLimits {
        idle: Duration::from_secs(60),
        frames_per_sec: 100,
        dialect: LiveDialect::AiSdk,
        key_deadline: Duration::from_millis(200),
        keyless_frame_bytes: 8,
    }
}

/// Serves `incoming` (then a close, unless `open`) with an echo keyed or
/// not; what it said, pings left out.
async fn serve(keyed: bool, limits: LiveLimits, incoming: &[Message], open: bool) -> Vec<String> {
    let (tx, rx) = frames::unbounded::<Result<Message, Infallible>>();
    for message in incoming {
        let _ = tx.unbounded_send(Ok(message.clone()));
    }
    if !open {
        let _ = tx.unbounded_send(Ok(Message::Close(None)));
    }
    let (said, mut heard) = mpsc::unbounded_channel();
    let mut echo = Echo { keyed, said };
    read(rx, &mut echo, limits).await;
    drop(echo);
    drop(tx);
    let mut out = Vec::new();
    while let Some(message) = heard.recv().await {
        match message {
            Message::Text(text) => out.push(text.to_string()),
            Message::Close(Some(close)) => out.push(format!("close {}", close.code)),
            Message::Ping(_) => {}
            other => out.push(format!("{other:?}")),
        }
    }
    out
}

fn texts(texts: &[&str]) -> Vec<Message> {
    texts.iter().map(|t| Message::Text((*t).into())).collect()
}

#[tokio::test]
async fn frames_are_served_in_order_until_the_peer_closes() {
    let said = serve(true, limits(), &texts(&["a", "b", "c"]), false).await;
    assert_eq!(said, ["a", "b", "c"]);
}

#[tokio::test]
async fn a_frame_the_dialect_refuses_closes_the_socket() {
    let said = serve(true, limits(), &texts(&["a", "bye", "b"]), true).await;
    assert_eq!(said, ["a", "close 1000"]);
    let binary = [
        Message::Binary(vec![1, 2].into()),
        Message::Text("a".into()),
    ];
    let said = serve(true, limits(), &binary, true).await;
    assert_eq!(said, ["close 1003"]);
}

#[tokio::test]
async fn a_keyless_frame_over_its_limit_closes_the_socket() {
    let said = serve(false, limits(), &texts(&["short", "much too long"]), true).await;
    assert_eq!(said, ["short", "farewell KeylessFrame"]);
    // Once keyed, the keyless limit no longer holds.
    let said = serve(false, limits(), &texts(&["key", "much too long"]), false).await;
    assert_eq!(said, ["key", "much too long"]);
}

#[tokio::test]
async fn a_socket_that_names_no_key_is_closed_at_its_deadline() {
    let said = serve(false, limits(), &texts(&["a"]), true).await;
    assert_eq!(said, ["a", "farewell NoKey"]);
}

#[tokio::test]
async fn an_idle_socket_is_pinged_then_closed() {
    let (tx, rx) = frames::unbounded::<Result<Message, Infallible>>();
    let (said, mut heard) = mpsc::unbounded_channel();
    let mut echo = Echo { keyed: true, said };
    let limits = LiveLimits {
        idle: Duration::from_millis(300),
        ..limits()
    };
    read(rx, &mut echo, limits).await;
    drop(tx);
    let mut pings = 0;
    let mut last = None;
    while let Ok(message) = heard.try_recv() {
        match message {
            Message::Ping(_) => pings += 1,
            other => last = Some(other),
        }
    }
    assert!(pings >= 1, "{pings} pings");
    assert_eq!(last, Some(Message::Text("farewell Idle".into())));
}

#[tokio::test]
async fn frames_over_the_budget_are_dropped_and_said_so() {
    let limits = LiveLimits {
        frames_per_sec: 2,
        ..limits()
    };
    let said = serve(true, limits, &texts(&["a", "b", "c"]), false).await;
    assert_eq!(said, ["a", "b", "dropped c"]);
}

#[tokio::test]
async fn the_writer_sends_the_outbox_in_order_then_closes() {
    let (sink, mut written) = frames::unbounded::<Message>();
    let (outbox, queued) = mpsc::channel(8);
    for text in ["a", "b"] {
        let _ = outbox.send(Message::Text(text.into())).await;
    }
    drop(outbox);
    write(sink, queued, Duration::from_secs(5)).await;
    let mut got = Vec::new();
    while let Some(message) = written.next().await {
        got.push(message);
    }
    assert_eq!(got, texts(&["a", "b"]));
}

#[tokio::test]
async fn the_writer_lets_a_peer_that_stops_reading_go() {
    // Room for one frame; nobody reads the other end.
    let (sink, written) = frames::channel::<Message>(0);
    let (outbox, queued) = mpsc::channel(8);
    for text in ["a", "b", "c"] {
        let _ = outbox.send(Message::Text(text.into())).await;
    }
    let timeout = Duration::from_millis(100);
    let started = std::time::Instant::now();
    write(sink.sink_map_err(|_| ()), queued, timeout).await;
    assert!(started.elapsed() >= timeout);
    // The frame it had room for was written, then the peer was let go.
    let got: Vec<Message> = written.collect().await;
    assert_eq!(got, texts(&["a"]));
    drop(outbox);
}
