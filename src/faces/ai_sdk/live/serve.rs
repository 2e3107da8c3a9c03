//! One socket's two loops, over any `Sink` and `Stream` of frames: a
//! WebSocket's halves in the server, channels in the tests. The writer
//! drains the socket's bounded outbox into the sink; the reader serves the
//! frames that come in through [`Frames`] (a dialect and its socket), and
//! owns the socket's clock: pings, the idle timeout, the key deadline, the
//! keyless frame limit and the frame budget.

use std::fmt::Display;
use std::time::{Duration, Instant};

use axum::extract::ws::Message;
use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::mpsc;

use super::{Close, Farewell, LiveLimits};

/// How often an idle socket is pinged.
const PING_EVERY: Duration = Duration::from_secs(20);
/// A write the peer has not taken in this long closes the socket.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the reader asks of a socket: a dialect serving its frames.
pub(super) trait Frames {
    /// Whether the socket is past its keyless start.
    fn keyed(&self) -> bool;
    /// Queues a frame for the writer, unless the outbox is full.
    fn say(&self, message: Message);
    /// Serves a text frame; `Err` closes the socket.
    async fn text(&mut self, text: &str) -> Result<(), Close>;
    /// A binary frame; `Err` closes the socket.
    fn binary(&mut self) -> Result<(), Close>;
    /// A frame over the budget: dropped, and said so.
    async fn over_budget(&mut self, text: &str);
    /// Whether a turn of the socket is in flight.
    fn busy(&mut self) -> bool;
    /// The frame the socket says before it closes on its own.
    fn farewell(&self, why: Farewell) -> Message;
}

/// Writes the outbox's frames to `sink` until the outbox closes, then
/// closes the sink. A peer that has not taken a frame for `timeout`
/// ([`WRITE_TIMEOUT`]) is let go: its turns then see their reader stall,
/// and stop.
pub(super) async fn write<S>(mut sink: S, mut queued: mpsc::Receiver<Message>, timeout: Duration)
where
    S: Sink<Message> + Unpin,
{
    while let Some(message) = queued.recv().await {
        match tokio::time::timeout(timeout, sink.send(message)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
    let _ = tokio::time::timeout(timeout, sink.close()).await;
}

/// Serves the frames of `incoming` until the peer closes, the socket
/// breaks, or it closes on its own (idle, no key, a frame refused).
pub(super) async fn read<R, E, F>(mut incoming: R, frames: &mut F, limits: LiveLimits)
where
    R: Stream<Item = Result<Message, E>> + Unpin,
    E: Display,
    F: Frames,
{
    let key_deadline = tokio::time::sleep(limits.key_deadline);
    tokio::pin!(key_deadline);
    let mut ping = tokio::time::interval(
        PING_EVERY
            .min(limits.idle / 2)
            .max(Duration::from_millis(10)),
    );
    let mut last_heard = Instant::now();
    let mut budget = Budget::new(limits.frames_per_sec);
    loop {
        let message = tokio::select! {
            message = incoming.next() => message,
            () = &mut key_deadline, if !frames.keyed() => {
                frames.say(frames.farewell(Farewell::NoKey));
                return;
            }
            _ = ping.tick() => {
                // Idle: no frame from the client, and none of its turns in flight.
                if !frames.busy() && last_heard.elapsed() > limits.idle {
                    frames.say(frames.farewell(Farewell::Idle));
                    return;
                }
                frames.say(Message::Ping(Default::default()));
                continue;
            }
        };
        let text = match message {
            None | Some(Ok(Message::Close(_))) => return,
            // A frame over the size limit, or a broken protocol: say why, then close.
            // The library's words (which may be the OS's) go to the log only.
            Some(Err(e)) => {
                tracing::info!("closing a socket: {e}");
                frames.say(frames.farewell(Farewell::Broken));
                return;
            }
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                if frames.keyed() {
                    last_heard = Instant::now();
                }
                match frames.binary() {
                    Ok(()) => continue,
                    Err(close) => {
                        frames.say(close.frame());
                        return;
                    }
                }
            }
            // A pong says the peer is there, not that it is busy.
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
        };
        // Before a valid key, a large frame is not worth parsing.
        if !frames.keyed() && text.len() > limits.keyless_frame_bytes {
            frames.say(frames.farewell(Farewell::KeylessFrame));
            return;
        }
        if !budget.take() {
            frames.over_budget(&text).await;
        } else if let Err(close) = frames.text(&text).await {
            frames.say(close.frame());
            return;
        }
        // Only a keyed socket's frames keep it open: a keyless one's are
        // refused, and its deadline stands.
        if frames.keyed() {
            last_heard = Instant::now();
        }
    }
}

/// Frames a second, with a burst of as many.
struct Budget {
    per_sec: f64,
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn new(per_sec: u32) -> Self {
        let per_sec = f64::from(per_sec.max(1));
        Self {
            per_sec,
            tokens: per_sec,
            at: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * self.per_sec;
        self.tokens = (self.tokens + refill).min(self.per_sec);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests;
