//! toolgate's integration tests, one test binary (`cargo test --test it`):
//! each module is one group, selected by its name
//! (`cargo test --test it confirmation::`). Shared helpers are in `common/`,
//! fixtures in `tests/fixtures/`, snapshots in the top-level `snapshots/`.
//!
//! Groups that need a program beyond the Rust toolchain are compiled only
//! with their cargo feature (`./scripts/test` turns on `external-suites`,
//! all of them), and fail, not skip, when that program is missing:
//! `conformance` (Node.js and the npm `ai` clients), `browser` (Node.js,
//! the demo's packages and Chromium), `redis-server` (a Redis server at
//! `TOOLGATE_TEST_REDIS_URL`), `cluster` (that, and `haproxy`),
//! `mcp-clients` (Node.js, the MCP SDKs of `mcp-clients/`, and a Python
//! with `mcp` at `TOOLGATE_TEST_MCP_PYTHON`).

// `#[macro_use]`: `assert_sse!` for every group declared after it.
#[macro_use]
mod common;

#[cfg(feature = "adk")]
mod adk;
#[cfg(all(feature = "conformance", feature = "adk"))]
mod adk_clients;
mod adk_session;
mod agui;
#[cfg(feature = "agui-browser")]
mod agui_browser;
#[cfg(feature = "agui-clients")]
mod agui_clients;
mod approvers;
mod arguments;
mod audit;
mod audit_chain;
mod auth;
mod backends;
mod backpressure;
#[cfg(feature = "browser")]
mod browser;
mod chat_ids;
mod claimed_calls;
mod cli;
mod client_tools;
#[cfg(feature = "cluster")]
mod cluster;
mod confirmation;
#[cfg(feature = "conformance")]
mod conformance;
mod cors;
mod docs;
mod drain;
mod edits;
mod fingerprint;
mod frontend;
mod grants;
mod grants_narrow;
mod hang_up;
mod hold;
mod http;
mod http_tools;
mod inbox;
mod limits;
mod live;
mod live_seed;
mod malformed_answers;
mod mcp;
#[cfg(feature = "mcp-clients")]
mod mcp_clients;
mod mcp_face;
mod mcp_owners;
mod mcp_sessions;
mod metrics;
mod moved_on;
mod native_snapshots;
mod notify;
mod oidc;
mod orphaned_claims;
mod out_of_band;
mod policy;
mod providers;
mod redaction;
#[cfg(feature = "redis-server")]
mod redis;
mod remembered;
mod respond;
mod restart;
mod security;
mod signing;
mod sse_snapshots;
mod storage_failure;
mod tidy;
mod tidy_execute;
mod tidy_faces;
mod tidy_pipeline;
mod traces;
mod turns_in_flight;
mod workflow;
