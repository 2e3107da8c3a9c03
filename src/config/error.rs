//! What is wrong with a config: one message naming the key, the value
//! (never a secret's) and the reason.
//!
//! A layer's own error (a policy pattern, a guard's host, an MCP server)
//! is kept typed but not as a `source`: its text is the message already,
//! and a report that walks the sources would print it twice.

use crate::faces::guard::GuardConfigError;
use crate::notify::NotifyError;
use crate::policy::BadPattern;
use crate::protocol::compat::BadVersion;
use crate::provider::ProviderError;
use crate::tools::client::ClientToolError;
use crate::tools::http::HttpToolError;
use crate::tools::mcp::McpConfigError;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    /// Not YAML, an unknown key, or a value of the wrong type; the text
    /// names the key and its line.
    #[error("invalid config: {0}")]
    Parse(yaml_serde::Error),
    /// A value out of its range: `{key} must be {expected}, not {value}`.
    #[error("invalid config: {key} must be {expected}, not {value}")]
    Value {
        key: String,
        value: String,
        expected: String,
    },
    /// A signing key (named by its place, never by its value) too short.
    #[error("invalid config: {key} is too short: a signing key needs at least {min} bytes")]
    ShortKey { key: String, min: usize },
    /// Settings that cannot work together, or a value that is missing.
    #[error("invalid config: {key}: {reason}")]
    Invalid { key: String, reason: String },
    /// `toolConfirmation`'s policy (`toolPolicies`, `tools`).
    #[error("invalid config: {0}")]
    Policy(BadPattern),
    /// `toolConfirmation.notify`, `.publicUrl`, a tool's `notify`.
    #[error("invalid config: {0}")]
    Notify(NotifyError),
    /// `tools.http`.
    #[error("invalid config: {0}")]
    HttpTool(HttpToolError),
    /// `tools.client`.
    #[error("invalid config: {0}")]
    ClientTool(ClientToolError),
    /// `mcpServers`.
    #[error("invalid config: {0}")]
    Mcp(McpConfigError),
    /// `server.allowedHosts`, `cors.allowedOrigins`.
    #[error("invalid config: {0}")]
    Guard(GuardConfigError),
    /// `protocol.clientVersion`.
    #[error("invalid config: protocol.clientVersion: {0}")]
    ClientVersion(BadVersion),
    /// `model`: the upstream's client could not be made.
    #[error("invalid config: model: {0}")]
    Model(ProviderError),
}

impl ConfigError {
    pub(crate) fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn value(
        key: impl Into<String>,
        value: impl ToString,
        expected: impl Into<String>,
    ) -> Self {
        Self::Value {
            key: key.into(),
            value: value.to_string(),
            expected: expected.into(),
        }
    }
}
