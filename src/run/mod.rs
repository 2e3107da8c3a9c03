//! Turns in flight, by chat, and the one run API every face (SSE, `/live`
//! in each dialect, the decisions API) adapts its wire to: [`Turns`]
//! ([`api`]) starts a turn once the limits admit it, answers an open
//! question through the gate, resumes a chat's turn; a face aborts a turn
//! with [`Run::abort`] and follows it through [`Subscription::chunks`] or
//! [`Reader::chunks`] (the SSE face copies from the log itself, through
//! [`Subscription::read`] and [`Subscription::news`]). Its refusals are a
//! [`TurnError`]; answers inside a chat message reach the turn through the
//! decision pipeline, which the turn waits on.
//!
//! Each turn appends its chunks, framed by its face's writer ([`Wire`]), to
//! a log; subscribers read the log at their own pace: the request that
//! started the turn, and, for a turn in the AI SDK's words, any resume,
//! which replays from the `start` chunk. By concern:
//!
//! - [`api`]: the run API above (the limits that admit a turn, its span,
//!   its chunks fitted to the client and counted), and how a held turn
//!   taken over goes on ([`continue_held`]);
//! - [`registry`]: at most one resumable turn per (principal, chat), the
//!   limits, and the start of a turn;
//! - [`log`]: the log, its readers, and its backpressure: the reader
//!   furthest behind holds the turn back by at most [`driver::LAG`] chunks,
//!   so a client that stops reading pauses the model;
//! - [`entries`]: how the log keeps its chunks, each batch's events back
//!   to back in one buffer, read as runs ([`Unread`]);
//! - [`driver`]: where a turn is polled: by the reader waiting for it, in
//!   that reader's task, until it waits for a human, loses its last reader,
//!   or goes unpolled for a second; then on a tracked task of its own;
//! - [`takeover`]: with a shared store (Redis), each batch also goes to the
//!   store's turn log, so a resume on another instance replays and follows
//!   it ([`Reader::Shared`]), and a held turn whose instance died is taken
//!   over by exactly one instance.
//!
//! - [`calls`]: one call from an agent outside toolgate (the MCP face),
//!   without a turn: [`Calls`] decides it through the gate, runs it once,
//!   and takes the client's answer through the decision pipeline;
//! - [`questions`]: the questions people decide outside a chat's stream
//!   (the decisions API, the inbox, a signed link's page) and their records:
//!   [`Questions`] shows each to whom it may, and decides out of band;
//! - [`sessions`] and [`shares`]: what a face opens for a caller (an MCP
//!   session, an inbox stream) is that caller's alone and counts against
//!   their share of its pool, capped per principal and in total, here.
//!
//! A turn whose subscribers all left is cancelled at once (the model and
//! its tools stop), unless it is waiting for a human: then it stays, so a
//! reload or a reconnect finds it, until its question is decided or times
//! out. A shared reader does not hold the turn back, nor keep it alive:
//! only this instance's readers and a question waiting for a human do.

mod api;
mod calls;
mod driver;
mod entries;
mod health;
mod limits;
mod log;
mod questions;
mod registry;
mod sessions;
mod takeover;
mod threads;

pub use api::{Asker, TurnError, Turns, Wire, continue_held};
pub use calls::{BAD_STATE, Called, Calls, Shown};
pub use questions::{Asked, Card, QuestionError, Questions, Whose};

// The core's words a face speaks: the door's vocabulary, so that a face
// names nothing of the gate or the store itself.
pub use crate::confirm::{
    AnswerKeys, Decision, GateError, InboxFilter, LinkQuestion, OutOfBand, OutsideQuestion,
    Refused, Remember, Revoked, Standing, ToolView,
};
pub use crate::shares::{Pool, Share, ShareError, ShareLimits, Shares};
pub use crate::store::{BackendError, Issued, Limited, Outcome, RecordKind, StoreError};
pub use driver::Run;
pub use entries::{Framed, StartIndex, Unread};
pub use health::{Health, Unready};
pub use limits::{Limits, Owner, RunError};
pub use log::{LogRead, Subscription};
pub use registry::{Continue, Runs};
pub use sessions::{Opening, SessionError, Sessions};
pub use takeover::{OWNER_DIED, Reader, Remote, Resumed};
pub use threads::{Answerable, NotAnswerable, Waiting};

#[cfg(test)]
mod suite;
#[cfg(test)]
mod tests;
