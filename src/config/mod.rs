//! The YAML config file (`toolgate.yaml`): [`Config`] is what serde reads
//! (every field optional, an unknown key an error that names it), and
//! [`Settings`] what the app runs with, made from it once by
//! [`Settings::new`], which checks every key and names the bad one.
//!
//! - `sections.rs`, `model.rs`: the file's sections, as serde reads them.
//! - `settings.rs`: [`Settings`], and the checks across sections.
//! - `checks.rs`: the checks of single sections.
//! - `show.rs`: the effective settings as `toolgate config check` prints
//!   them, secrets redacted.
//! - `error.rs`: [`ConfigError`].

mod checks;
mod error;
mod model;
mod sections;
mod settings;
mod show;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

use crate::tools::mcp::McpServerConfig;

pub use crate::provider::http::Secret;
pub use error::ConfigError;
pub use model::{ModelConfig, ProviderKind};
pub use sections::{
    AllowedToolsStorage, ApiKeyConfig, AuditConfig, AuthConfig, ConfirmationConfig, CorsConfig,
    DemoConfig, LimitsConfig, LiveConfig, McpConfig, MetricsConfig, OidcConfig, ProtocolConfig,
    ServerConfig, StoreConfig, StoreKind, StreamConfig, TelemetryConfig, ToolLimitConfig,
    ToolsConfig,
};
pub use settings::{
    AuthSettings, ConfirmationSettings, LiveSettings, McpSettings, MetricsSettings, ModelSettings,
    ServerSettings, Settings, StoreBackend, StoreSettings, StreamSettings,
};

/// The whole file. Read it with [`Config::load`] or [`Config::from_yaml`];
/// check it with [`Settings::new`].
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
#[schemars(
    title = "toolgate.yaml",
    description = "toolgate's config file: every key is optional, an unknown key is an error. Check a file with `toolgate config check FILE`."
)]
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
    pub audit: AuditConfig,
    pub demo: DemoConfig,
    pub server: ServerConfig,
    pub cors: CorsConfig,
    pub live: LiveConfig,
    pub metrics: MetricsConfig,
    pub limits: LimitsConfig,
    pub telemetry: TelemetryConfig,
    /// MCP servers whose tools are offered as `mcp--<server>--<tool>`.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    pub mcp: McpConfig,
}

impl Config {
    /// Parses a config's text (empty: every default). Its values are
    /// checked by [`Settings::new`].
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        yaml_serde::from_str(text).map_err(ConfigError::Parse)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.display().to_string(),
            error,
        })?;
        Self::from_yaml(&text)
    }
}

/// The JSON Schema of the config file, pretty-printed with a final newline:
/// what `toolgate config schema` prints and `toolgate.schema.json` holds.
pub fn schema() -> String {
    let schema = schemars::schema_for!(Config);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
