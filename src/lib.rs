//! toolgate puts a human gate in front of an AI agent's tool calls and speaks
//! the Vercel AI SDK's UI message stream, so a `useChat` frontend can use it.
//!
//! # Data flow
//!
//! ```text
//! POST /stream ─► transport ─► protocol::ChatRequest ─► agent::Agent::turn
//!                                                          │   ▲
//!                         provider::ModelProvider ◄────────┘   │ ProviderEvent
//!                         confirm::Gate (issue / check / run) ─► tools::Tool
//!                                   │
//!                                   └─► store::Store (issued confirmations, ledger)
//! agent ─► protocol::UiChunk ─► protocol::sse ─► transport (SSE body)
//! ```
//!
//! - [`call`]: what every layer says about a tool call (`ToolCall`, limits).
//! - [`protocol`]: chunks, SSE framing, request bodies. Pure, no I/O.
//! - [`agent`]: one turn: history → model messages → provider events → UI
//!   chunks, multi-step, through the gate.
//! - [`provider`]: the model trait and the embedded `scripted` model.
//! - [`tools`]: the [`tools::Tool`] trait, the registry, the demo tools.
//! - [`notify`]: a question told to webhooks and Slack, with signed
//!   approve/deny links.
//! - [`confirm`]: the only code that decides whether a call may run and the
//!   only code that runs one.
//! - [`store`]: issued confirmations and the execution ledger.
//! - [`run`]: turns in flight: the one run API (start, follow, resume,
//!   abort) every face uses, its log, and the cross-instance takeover.
//! - [`transport`]: routes, SSE responses, errors → statuses.
//! - [`metrics`]: the Prometheus families, one set per app.
//! - [`telemetry`]: the log and the OTLP trace exporter (the binary's).
//!
//! `ARCHITECTURE.md` lists the invariants.

pub mod agent;
pub mod app;
pub mod call;
pub mod config;
pub mod confirm;
pub mod faces;
pub mod identity;
pub mod ids;
pub mod json;
pub mod metrics;
pub mod notify;
pub mod policy;
pub mod protocol;
pub mod provider;
pub mod run;
pub mod shares;
pub mod store;
pub mod telemetry;
pub mod tools;

pub use app::App;
pub use config::Config;
