//! `GET /live`: the UI message stream over one WebSocket, in one of two
//! frame dialects (`live.dialect`): the AI SDK's own
//! `WebSocketChatTransport` (`ai_sdk.rs`, the default) or the one of the
//! `adk-stream-protocol` app (`seed.rs`). This file is what they share: the
//! upgrade and its principal, the socket's outbox, and the dialect behind
//! [`serve::Frames`]; `serve.rs` holds the socket's loops (the writer, and
//! the reader with pings, the idle timeout and the frame budget), generic
//! over `Sink`/`Stream` so tests drive them with channels. Each dialect only
//! reads its frames and says things in its own words.
//!
//! With API keys, a browser opens the socket without one (it cannot set
//! headers on the upgrade) and names its key in each frame. Until a frame
//! has named a valid key, the socket is **keyless**: it has
//! `live.keyDeadlineSecs` to do so, its frames (refused for want of a key)
//! do not keep it open, and one over `live.keylessFrameBytes` closes it
//! before it is parsed. A keyless client thus holds a connection for
//! seconds, not for as long as it keeps talking.

mod ai_sdk;
mod seed;
mod serve;

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use futures::{Sink, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::faces::auth::{Caller, X_API_KEY};
use crate::faces::{ApiError, HttpState};

/// Frames queued for one socket before a turn waits for it.
const OUTBOX: usize = 256;

/// The frame protocol `/live` speaks (`live.dialect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LiveDialect {
    /// The AI SDK's `WebSocketChatTransport` (ai 7.x): `send`, `chunk`, `end`…
    #[default]
    AiSdk,
    /// The `adk-stream-protocol` app's transport: `message` frames in, SSE
    /// lines (`data: …\n\n`) out, one chunk a frame.
    AdkStreamProtocol,
}

/// Settings of the socket mode.
#[derive(Debug, Clone, Copy)]
pub struct LiveLimits {
    /// A socket that says nothing for this long is closed.
    pub idle: Duration,
    pub frames_per_sec: u32,
    pub dialect: LiveDialect,
    /// With API keys: how long a socket may go without naming a valid key.
    pub key_deadline: Duration,
    /// With API keys: the largest frame before a valid key was named.
    pub keyless_frame_bytes: usize,
}

pub(in crate::faces) async fn live(
    State(state): State<HttpState>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    // With a principal header, the proxy must have set it on the upgrade;
    // a dialect whose frames carry no key needs the upgrade's.
    if !state.bearer() || state.live.dialect == LiveDialect::AdkStreamProtocol {
        Caller::from_headers(&state, &headers).await?;
    }
    let limit = state.max_body_bytes;
    Ok(upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| {
            let (sink, incoming) = socket.split();
            connection(sink, incoming, state, headers)
        }))
}

/// What every frame of a socket is served with.
struct Socket {
    state: HttpState,
    /// The upgrade request's headers: who the socket's frames come from.
    upgrade: HeaderMap,
    outbox: mpsc::Sender<Message>,
    /// A valid key was named (on the upgrade or in a frame), or none is needed.
    keyed: AtomicBool,
}

impl Socket {
    /// Whether the socket is past its keyless start.
    fn keyed(&self) -> bool {
        self.keyed.load(Ordering::Relaxed)
    }

    /// Who sends a frame: with API keys, the key in the frame's own headers
    /// (browsers cannot set them on the upgrade) or the upgrade's; otherwise
    /// whoever the upgrade says (a proxy's header is never taken from a frame).
    async fn caller(&self, frame: &HashMap<String, String>) -> Result<Caller, ApiError> {
        let mut headers = self.upgrade.clone();
        if self.state.bearer() {
            let names = [header::AUTHORIZATION, X_API_KEY];
            // Names in any case; two spellings of one name are both kept, and
            // must agree.
            let keys: Vec<_> = frame
                .iter()
                .filter_map(|(name, value)| {
                    let name = names
                        .iter()
                        .find(|n| n.as_str().eq_ignore_ascii_case(name))?;
                    Some((name.clone(), HeaderValue::from_str(value).ok()?))
                })
                .collect();
            // A frame that names a key replaces the upgrade's.
            if !keys.is_empty() {
                for name in &names {
                    headers.remove(name);
                }
            }
            for (name, value) in keys {
                headers.append(name, value);
            }
        }
        let caller = Caller::from_headers(&self.state, &headers).await?;
        self.keyed.store(true, Ordering::Relaxed);
        Ok(caller)
    }

    /// Queues a frame unless the outbox is full: the read loop never waits
    /// on a peer that is not reading.
    fn say(&self, message: Message) {
        let _ = self.outbox.try_send(message);
    }
}

/// A close frame the socket ends with: a code and a fixed reason.
struct Close {
    code: u16,
    reason: &'static str,
}

impl Close {
    const fn new(code: u16, reason: &'static str) -> Self {
        Close { code, reason }
    }

    fn frame(&self) -> Message {
        Message::Close(Some(CloseFrame {
            code: self.code,
            reason: self.reason.into(),
        }))
    }
}

/// Why the socket closes on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Farewell {
    /// No frame and no turn for `live.idle`.
    Idle,
    /// A frame over the size limit, or outside the WebSocket protocol.
    Broken,
    /// With API keys: no valid key named within `live.keyDeadlineSecs`.
    NoKey,
    /// With API keys: a frame over `live.keylessFrameBytes` before a valid key.
    KeylessFrame,
}

/// One socket's dialect and the turns it has in flight.
enum Session {
    AiSdk(ai_sdk::Session),
    Seed(seed::Session),
}

impl Session {
    fn new(dialect: LiveDialect) -> Self {
        match dialect {
            LiveDialect::AiSdk => Self::AiSdk(ai_sdk::Session::default()),
            LiveDialect::AdkStreamProtocol => Self::Seed(seed::Session::new()),
        }
    }

    /// Serves a text frame; `Err` closes the socket.
    async fn text(&mut self, socket: &Socket, text: &str) -> Result<(), Close> {
        match self {
            Self::AiSdk(session) => {
                session.text(socket, text).await;
                Ok(())
            }
            Self::Seed(session) => session.text(socket, text).await,
        }
    }

    /// A binary frame, which neither dialect has.
    fn binary(&mut self, socket: &Socket) -> Result<(), Close> {
        match self {
            Self::AiSdk(_) => {
                ai_sdk::binary(socket);
                Ok(())
            }
            Self::Seed(_) => Err(seed::BINARY),
        }
    }

    /// A frame over `liveFramesPerSec`: dropped, and said so.
    async fn over_budget(&mut self, socket: &Socket, text: &str) {
        match self {
            Self::AiSdk(_) => ai_sdk::over_budget(socket, text),
            Self::Seed(session) => session.over_budget(socket, text).await,
        }
    }

    /// Whether a turn of the socket is in flight (finished ones forgotten).
    fn busy(&mut self) -> bool {
        match self {
            Self::AiSdk(session) => session.busy(),
            Self::Seed(session) => session.busy(),
        }
    }

    fn farewell(&self, state: &HttpState, why: Farewell) -> Message {
        match self {
            Self::AiSdk(_) => ai_sdk::farewell(state, why),
            Self::Seed(_) => seed::farewell(why).frame(),
        }
    }

    /// The socket is gone: its readers leave, and turns nobody waits on stop.
    fn end(self) {
        match self {
            Self::AiSdk(session) => session.end(),
            Self::Seed(session) => session.end(),
        }
    }
}

/// A socket's dialect with what its frames are served with: what the
/// socket's reader ([`serve::read`]) serves frames through.
struct Served {
    session: Session,
    socket: Socket,
}

impl serve::Frames for Served {
    fn keyed(&self) -> bool {
        self.socket.keyed()
    }

    fn say(&self, message: Message) {
        self.socket.say(message);
    }

    async fn text(&mut self, text: &str) -> Result<(), Close> {
        self.session.text(&self.socket, text).await
    }

    fn binary(&mut self) -> Result<(), Close> {
        self.session.binary(&self.socket)
    }

    async fn over_budget(&mut self, text: &str) {
        self.session.over_budget(&self.socket, text).await;
    }

    fn busy(&mut self) -> bool {
        self.session.busy()
    }

    fn farewell(&self, why: Farewell) -> Message {
        self.session.farewell(&self.socket.state, why)
    }
}

/// One socket, over its sink and its stream of frames: its requests run as
/// tasks writing into one outbox, which a tracked task writes to `sink`.
async fn connection<S, R, E>(sink: S, incoming: R, state: HttpState, upgrade: HeaderMap)
where
    S: Sink<Message> + Unpin + Send + 'static,
    R: Stream<Item = Result<Message, E>> + Unpin,
    E: Display,
{
    let (outbox, queued) = mpsc::channel::<Message>(OUTBOX);
    let writer = state
        .tasks
        .spawn(serve::write(sink, queued, serve::WRITE_TIMEOUT));
    // A dialect whose frames carry no key was let in by the upgrade's.
    let keyed = !state.bearer()
        || state.live.dialect == LiveDialect::AdkStreamProtocol
        || Caller::from_headers(&state, &upgrade).await.is_ok();
    let limits = state.live;
    let mut served = Served {
        session: Session::new(limits.dialect),
        socket: Socket {
            state,
            upgrade,
            outbox,
            keyed: AtomicBool::new(keyed),
        },
    };
    serve::read(incoming, &mut served, limits).await;
    let Served { session, socket } = served;
    session.end();
    drop(socket);
    let _ = writer.await;
}
