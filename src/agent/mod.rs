//! The agent turn: UI history in, UI chunks out. The model is called through
//! a [`ModelProvider`]; every tool call goes through the confirmation gate.
//! The turn emits events; `encode` alone makes chunks of them.

mod answers;
mod blocks;
mod encode;
mod event;
pub mod history;
mod step;
mod turn;

use std::sync::Arc;

use crate::confirm::Gate;
use crate::ids::Ids;
use crate::provider::ModelProvider;

/// Everything a turn needs; shared by all requests.
pub struct Agent {
    pub gate: Gate,
    pub provider: Arc<dyn ModelProvider>,
    pub ids: Ids,
    /// Model calls per turn before it stops (default 8).
    pub max_steps: usize,
}

pub use crate::provider::{MAX_ARGS_BYTES, MAX_CALLS_PER_STEP};
