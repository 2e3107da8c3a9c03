//! `model`: which model answers, and how its upstream is reached.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::Deserialize;

use crate::provider::ModelOptions;
use crate::provider::http::{Secret, UpstreamConfig, header};

use super::ConfigError;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// The embedded deterministic model: no key, no network.
    #[default]
    Scripted,
    /// OpenAI Chat Completions, or any server that speaks it.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini (`streamGenerateContent`).
    Gemini,
    /// An existing Google ADK agent (`adk api_server`): it runs the model
    /// and its tools; toolgate gates what it asks about.
    Adk,
}

#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelConfig {
    pub provider: ProviderKind,
    /// The upstream's model name, e.g. `gpt-4o-mini`.
    pub model: Option<String>,
    /// `adk` only: the ADK app (its agents directory's folder) to run.
    pub app: Option<String>,
    /// Default: the provider's public API.
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default
    /// `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`). The key
    /// itself never goes in the file.
    pub api_key_env: Option<String>,
    /// Sent with every upstream request.
    pub headers: BTreeMap<String, String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u64>,
    /// Merged into the request body (e.g. `reasoning_effort`).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Default 10.
    pub connect_timeout_secs: Option<f64>,
    /// The longest silence from the upstream, before its headers or
    /// between two reads (default 120).
    pub read_timeout_secs: Option<f64>,
    /// Retries of a request that never reached the model (default 2).
    pub retries: Option<u32>,
    /// The key, for an application that embeds toolgate; never read from a file.
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// `scripted` only: pause before each delta, to simulate a slow model.
    pub delta_delay_ms: u64,
}

/// How a provider is reached by default and how its key is sent.
struct ProviderDefaults {
    name: &'static str,
    base_url: &'static str,
    key_env: &'static str,
    /// The header carrying the key, and its value for a key.
    auth: fn(&str) -> (&'static str, String),
    /// Headers the API requires.
    fixed: &'static [(&'static str, &'static str)],
}

impl ModelConfig {
    fn defaults(&self) -> Option<ProviderDefaults> {
        use crate::provider::{adk, anthropic, gemini, openai};
        match self.provider {
            ProviderKind::Scripted => None,
            ProviderKind::Openai => Some(ProviderDefaults {
                name: "openai",
                base_url: openai::DEFAULT_BASE_URL,
                key_env: "OPENAI_API_KEY",
                auth: |key| ("authorization", format!("Bearer {key}")),
                fixed: &[],
            }),
            ProviderKind::Anthropic => Some(ProviderDefaults {
                name: "anthropic",
                base_url: anthropic::DEFAULT_BASE_URL,
                key_env: "ANTHROPIC_API_KEY",
                auth: |key| ("x-api-key", key.to_owned()),
                fixed: &[("anthropic-version", anthropic::API_VERSION)],
            }),
            ProviderKind::Gemini => Some(ProviderDefaults {
                name: "gemini",
                base_url: gemini::DEFAULT_BASE_URL,
                key_env: "GEMINI_API_KEY",
                auth: |key| ("x-goog-api-key", key.to_owned()),
                fixed: &[],
            }),
            ProviderKind::Adk => Some(ProviderDefaults {
                name: adk::PROVIDER,
                base_url: adk::DEFAULT_BASE_URL,
                key_env: "ADK_API_KEY",
                auth: |key| ("authorization", format!("Bearer {key}")),
                fixed: &[],
            }),
        }
    }

    /// How to reach the upstream model and what to ask it; `None` for `scripted`.
    pub fn upstream(&self) -> Result<Option<(UpstreamConfig, ModelOptions)>, ConfigError> {
        let Some(defaults) = self.defaults() else {
            return Ok(None);
        };
        let model = match (&self.model, &self.app) {
            // ADK's agent names its own model; the app is what to run.
            (_, Some(app)) if self.provider == ProviderKind::Adk && !app.is_empty() => app.clone(),
            _ if self.provider == ProviderKind::Adk => {
                return Err(ConfigError::invalid(
                    "model.app",
                    "provider adk needs an app (or --adk-app)",
                ));
            }
            (Some(model), _) if !model.is_empty() => model.clone(),
            _ => {
                return Err(ConfigError::invalid(
                    "model.model",
                    format!("provider {} needs a model name", defaults.name),
                ));
            }
        };
        // A named variable must be set; the default one may be absent (a local server).
        let key = match &self.api_key_env {
            _ if self.api_key.is_some() => self.api_key.as_ref().map(|k| k.0.clone()),
            Some(name) => match std::env::var(name) {
                Ok(key) if !key.is_empty() => Some(key),
                _ => {
                    return Err(ConfigError::invalid(
                        "model.apiKeyEnv",
                        format!("environment variable {name} is not set"),
                    ));
                }
            },
            None => std::env::var(defaults.key_env)
                .ok()
                .filter(|k| !k.is_empty()),
        };
        let mut headers = HeaderMap::new();
        let fixed = defaults
            .fixed
            .iter()
            .map(|(n, v)| (*n, v.to_string(), false));
        let auth = key.as_deref().map(|key| {
            let (name, value) = (defaults.auth)(key);
            (name, value, true)
        });
        let extra = self
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone(), false));
        for (name, value, sensitive) in fixed.chain(auth).chain(extra) {
            let (name, value) = header(name, &value, sensitive)
                .map_err(|e| ConfigError::invalid("model.headers", e.to_string()))?;
            headers.insert(name, value);
        }
        let secs = |value: Option<f64>, default: f64, key: &str| {
            let value = value.unwrap_or(default);
            Duration::try_from_secs_f64(value)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    ConfigError::value(
                        format!("model.{key}"),
                        format!("{value:?}"),
                        "a positive number of seconds",
                    )
                })
        };
        let upstream = UpstreamConfig {
            provider: defaults.name,
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| defaults.base_url.to_owned()),
            headers,
            secret: key.map(Secret),
            connect_timeout: secs(self.connect_timeout_secs, 10.0, "connectTimeoutSecs")?,
            read_timeout: secs(self.read_timeout_secs, 120.0, "readTimeoutSecs")?,
            retries: self.retries.unwrap_or(2),
        };
        let options = ModelOptions {
            model,
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            extra_body: self.extra_body.clone(),
        };
        Ok(Some((upstream, options)))
    }
}
