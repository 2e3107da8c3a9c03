//! What stands before every face: the guard (`guard/`: Host and Origin),
//! CORS (`cors.rs`), a request's body clocks and type (`protect.rs`), who
//! is asking (`auth/`), the one place errors become statuses (`error.rs`),
//! an SSE response (`sse.rs`), liveness, readiness and `/metrics`
//! (`health.rs`), and the demo's files (`demo.rs`).

pub(super) mod auth;
pub(super) mod cors;
pub mod demo;
pub(super) mod error;
pub mod guard;
pub(super) mod health;
pub(super) mod protect;
pub(super) mod sse;
