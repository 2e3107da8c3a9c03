//! The YAML config file. Every field is optional; an unknown key is an error
//! that names it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::policy::{Mode, Policy, ToolPolicies, ToolRule};
use crate::protocol::{ClientVersion, ConfirmationProtocol};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config: {0}")]
    Parse(#[from] yaml_serde::Error),
    #[error("invalid config: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on (default `127.0.0.1:8080`; `--bind` wins).
    pub bind: Option<SocketAddr>,
    pub model: ModelConfig,
    pub stream: StreamConfig,
    pub tools: ToolsConfig,
    pub tool_confirmation: ConfirmationConfig,
    pub protocol: ProtocolConfig,
    pub auth: AuthConfig,
    pub store: StoreConfig,
}

/// Dexto's `allowedToolsStorage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AllowedToolsStorage {
    #[default]
    Storage,
    Memory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// Nothing survives a restart: tests and throwaway runs.
    Memory,
    /// One file; the default.
    #[default]
    Sqlite,
    /// Shared by several instances.
    Redis,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreConfig {
    pub kind: StoreKind,
    /// The SQLite file; default `toolgate.sqlite3` in the user's data
    /// directory (e.g. `~/.local/share/toolgate/`).
    pub path: Option<PathBuf>,
    /// The Redis server, e.g. `redis://127.0.0.1:6379/0`.
    pub url: Option<String>,
    /// Prefix of every Redis key (default `toolgate:`); instances of one
    /// deployment share it.
    pub key_prefix: Option<String>,
    /// Days the audit log keeps an event (default 90).
    pub audit_retention_days: Option<u64>,
}

impl StoreConfig {
    pub fn audit_retention(&self) -> Duration {
        Duration::from_secs(
            self.audit_retention_days
                .unwrap_or(90)
                .saturating_mul(24 * 60 * 60),
        )
    }
}

impl StoreConfig {
    pub fn sqlite_path(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(|| {
            dirs::data_dir()
                .unwrap_or_else(|| PathBuf::from("."))
                .join("toolgate")
                .join("toolgate.sqlite3")
        })
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ProtocolConfig {
    /// The `ai` version the frontend pins; chunks are fitted to it. Unset:
    /// the newest this server knows (a strict older client must set it).
    pub client_version: Option<ClientVersion>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    #[default]
    Scripted,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelConfig {
    pub provider: ProviderKind,
    /// `scripted` only: pause before each delta, to simulate a slow model.
    pub delta_delay_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StreamConfig {
    /// Idle seconds before a `: keep-alive` comment.
    pub keep_alive_secs: u64,
    /// Largest request body; larger bodies get 413.
    pub max_body_bytes: usize,
    /// Model calls per turn.
    pub max_steps: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            keep_alive_secs: 15,
            max_body_bytes: 4 << 20,
            max_steps: 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Largest amount `process_payment` accepts.
    pub payment_limit: f64,
    /// How long one tool call may run.
    pub timeout_ms: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            payment_limit: 10_000.0,
            timeout_ms: 30_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ConfirmationConfig {
    /// How confirmations are asked: `adk` or `ai-sdk` (native approvals, ai 6+).
    pub protocol: ConfirmationProtocol,
    /// How long an issued confirmation can be answered.
    pub expiry_secs: u64,
    /// `event-based` (ask; the default), `auto-approve`, `auto-deny`.
    pub mode: Mode,
    /// Milliseconds a user has to answer (Dexto's `timeout`); unanswered
    /// confirmations then expire. Unset: `expirySecs`.
    pub timeout: Option<u64>,
    /// Where remembered approvals are kept: `storage` (the store) or `memory`.
    pub allowed_tools_storage: AllowedToolsStorage,
    pub tool_policies: ToolPolicies,
    /// Rules per tool, by name or qualified name.
    pub tools: BTreeMap<String, ToolRule>,
    /// HMAC keys for signed confirmations; signing is on when there is one.
    /// The first signs, every one verifies (rotation). `env:NAME` reads the
    /// key from the environment variable NAME.
    pub signing_keys: Vec<String>,
}

impl Default for ConfirmationConfig {
    fn default() -> Self {
        Self {
            protocol: ConfirmationProtocol::Adk,
            expiry_secs: 24 * 60 * 60,
            signing_keys: Vec::new(),
            mode: Mode::EventBased,
            timeout: None,
            allowed_tools_storage: AllowedToolsStorage::Storage,
            tool_policies: ToolPolicies::default(),
            tools: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuthConfig {
    /// A header, set by a trusted proxy in front of toolgate, naming the
    /// user. Requests without it get 401. Unset: every request is
    /// `anonymous` and confirmations are bound to the chat only.
    pub principal_header: Option<String>,
    /// API keys, sent as `Authorization: Bearer <key>`; each names the
    /// principal it acts for. With keys, every route but `/healthz` needs
    /// one. Without, toolgate listens on loopback only.
    pub api_keys: Vec<ApiKeyConfig>,
}

/// A resolved API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub principal: String,
    pub sha256: [u8; 32],
    pub admin: bool,
}

/// One API key: its SHA-256 (hex), or the environment variable holding it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiKeyConfig {
    pub principal: String,
    pub sha256: Option<String>,
    pub key_env: Option<String>,
    /// An operator: may read and revoke other principals' remembered
    /// approvals and read their audit log (`?principal=`).
    #[serde(default)]
    pub admin: bool,
}

impl Config {
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let config: Self = yaml_serde::from_str(text)?;
        config.check()?;
        Ok(config)
    }

    /// Settings that parse but cannot work together.
    fn check(&self) -> Result<(), ConfigError> {
        self.policy()?;
        self.api_keys()?;
        let client = self.client_version();
        if self.tool_confirmation.protocol == ConfirmationProtocol::AiSdk && !client.has_approvals()
        {
            return Err(ConfigError::Invalid(format!(
                "toolConfirmation.protocol ai-sdk needs ai 6 or later, but protocol.clientVersion is {client}; use adk"
            )));
        }
        Ok(())
    }

    /// The confirmation policy the config describes.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        let c = &self.tool_confirmation;
        Policy::new(c.mode, &c.tool_policies, c.tools.clone())
            .map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// How long an issued confirmation can be answered.
    pub fn confirmation_window(&self) -> Duration {
        match self.tool_confirmation.timeout {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs(self.tool_confirmation.expiry_secs),
        }
    }

    /// Each API key: its principal, SHA-256, and whether it is an operator's.
    pub fn api_keys(&self) -> Result<Vec<ApiKey>, ConfigError> {
        use sha2::Digest;
        self.auth
            .api_keys
            .iter()
            .map(|key| {
                let bad = |why: String| {
                    ConfigError::Invalid(format!("auth.apiKeys ({}): {why}", key.principal))
                };
                let hash: [u8; 32] = match (&key.sha256, &key.key_env) {
                    (Some(hex_hash), None) => hex::decode(hex_hash)
                        .ok()
                        .and_then(|h| h.try_into().ok())
                        .ok_or_else(|| bad("sha256 must be 64 hex digits".into()))?,
                    (None, Some(name)) => {
                        let key = std::env::var(name)
                            .map_err(|_| bad(format!("environment variable {name} is not set")))?;
                        if key.is_empty() {
                            return Err(bad(format!("environment variable {name} is empty")));
                        }
                        sha2::Sha256::digest(key.as_bytes()).into()
                    }
                    _ => return Err(bad("give exactly one of sha256 and keyEnv".into())),
                };
                if key.principal.is_empty() {
                    return Err(bad("principal is empty".into()));
                }
                Ok(ApiKey {
                    principal: key.principal.clone(),
                    sha256: hash,
                    admin: key.admin,
                })
            })
            .collect()
    }

    /// The signing keys, with `env:NAME` entries read from the environment.
    pub fn signing_keys(&self) -> Result<Vec<String>, ConfigError> {
        self.tool_confirmation
            .signing_keys
            .iter()
            .map(|key| match key.strip_prefix("env:") {
                Some(name) => std::env::var(name).map_err(|_| {
                    ConfigError::Invalid(format!(
                        "toolConfirmation.signingKeys: environment variable {name} is not set"
                    ))
                }),
                None => Ok(key.clone()),
            })
            .collect()
    }

    pub fn client_version(&self) -> ClientVersion {
        self.protocol
            .client_version
            .unwrap_or(ClientVersion::LATEST)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    pub fn keep_alive(&self) -> Duration {
        Duration::from_secs(self.stream.keep_alive_secs.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_optional() {
        assert_eq!(Config::from_yaml("").ok(), Some(Config::default()));
        assert_eq!(Config::from_yaml("{}").ok(), Some(Config::default()));
        let config =
            Config::from_yaml("stream:\n  keepAliveSecs: 3\ntoolConfirmation:\n  expirySecs: 60\n");
        let Ok(config) = config else {
            panic!("{config:?}")
        };
        assert_eq!(config.stream.keep_alive_secs, 3);
        assert_eq!(config.stream.max_steps, 8);
        assert_eq!(config.tool_confirmation.expiry_secs, 60);
    }

    #[test]
    fn native_approvals_need_a_client_that_has_them() {
        let config = Config::from_yaml(
            "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: '6.0.0'}\n",
        );
        assert_eq!(
            config.ok().map(|c| c.client_version()),
            Some(ClientVersion::new(6, 0, 0))
        );
        let err = Config::from_yaml(
            "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: '5.0.216'}\n",
        );
        assert_eq!(
            err.err().map(|e| e.to_string()),
            Some("invalid config: toolConfirmation.protocol ai-sdk needs ai 6 or later, but protocol.clientVersion is 5.0.216; use adk".into())
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::from_yaml("stream:\n  keepAlive: 3\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown field `keepAlive`"), "{err}");
        let err = Config::from_yaml("modle: {}\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown field `modle`"), "{err}");
    }
}
