//! HTTP tools: declared in the config, the arguments POSTed as JSON to a
//! URL, the JSON answer the output. Gated like any tool.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::{Tool, ToolContext, ToolError, secret_header};

/// The most of an answer read; a larger one is an error.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// `tools.http[]` in the config.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpToolConfig {
    pub name: String,
    pub description: String,
    /// The JSON schema of the arguments.
    #[serde(default = "super::object_schema")]
    pub parameters: Value,
    pub url: String,
    /// `POST` (the default), `PUT` or `PATCH`.
    #[serde(default)]
    pub method: HttpMethod,
    /// Sent with every call; a value `env:NAME` is read from the environment.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Default 10000.
    pub timeout_ms: Option<u64>,
    /// Whether a call asks a human first (default true); policy rules win.
    #[serde(default = "yes")]
    pub needs_confirmation: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    #[default]
    Post,
    Put,
    Patch,
}

fn yes() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
pub enum HttpToolError {
    #[error("tools.http `{tool}`: {why}")]
    Invalid { tool: String, why: String },
}

pub struct HttpTool {
    config: HttpToolConfig,
    headers: HeaderMap,
    client: reqwest::Client,
    timeout: Duration,
}

impl HttpTool {
    pub fn new(config: HttpToolConfig) -> Result<Self, HttpToolError> {
        let bad = |why: String| HttpToolError::Invalid {
            tool: config.name.clone(),
            why,
        };
        if config.name.is_empty() || config.name.contains("--") {
            return Err(bad("a name must be non-empty and without `--`".into()));
        }
        if reqwest::Url::parse(&config.url).is_err() {
            return Err(bad(format!("`{}` is not a URL", config.url)));
        }
        let headers = (config.headers.iter())
            .map(|(name, value)| secret_header(name, value))
            .collect::<Result<HeaderMap, _>>()
            .map_err(bad)?;
        // A redirect would carry the headers (secrets) elsewhere.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let timeout = Duration::from_millis(config.timeout_ms.unwrap_or(10_000));
        Ok(Self {
            config,
            headers,
            client,
            timeout,
        })
    }

    async fn call(&self, args: &Value) -> Result<Value, ToolError> {
        let request = match self.config.method {
            HttpMethod::Post => self.client.post(&self.config.url),
            HttpMethod::Put => self.client.put(&self.config.url),
            HttpMethod::Patch => self.client.patch(&self.config.url),
        };
        let failed =
            |e: reqwest::Error| ToolError::Failed(format!("HTTP call failed: {}", e.without_url()));
        let mut response = request
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(args.to_string())
            .send()
            .await
            .map_err(failed)?;
        let mut body = Vec::new();
        while let Some(piece) = response.chunk().await.map_err(failed)? {
            if body.len() + piece.len() > MAX_ANSWER_BYTES {
                return Err(ToolError::Failed(format!(
                    "the answer is larger than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&piece);
        }
        let status = response.status();
        if !status.is_success() {
            let message = crate::provider::http::message_of(&body);
            return Err(ToolError::Failed(format!(
                "HTTP {}: {message}",
                status.as_u16()
            )));
        }
        // A JSON answer is the output; anything else is its text.
        Ok(serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())))
    }
}

#[async_trait::async_trait]
impl Tool for HttpTool {
    fn source(&self) -> super::ToolSource {
        super::ToolSource::Http
    }

    super::declared_in_config!();

    fn confirmation_hint(&self, args: &Value) -> String {
        format!("Call {} with {args}?", self.config.name)
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let ms = self.timeout.as_millis() as u64;
        tokio::select! {
            result = tokio::time::timeout(self.timeout, self.call(&args)) => {
                result.unwrap_or(Err(ToolError::TimedOut(ms)))
            }
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}
