//! Tools: the [`Tool`] trait an application implements, the registry, and
//! the [`Toolbox`] whose current registry changes as MCP servers come and go.
//!
//! Nothing outside `confirm/` calls [`Tool::execute`]: the gate is the one
//! path by which a tool runs.

pub mod client;
pub mod http;
mod input;
pub mod mcp;
mod payment;
mod toolbox;
mod weather;

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use input::{InputSchema, Schema};
pub use payment::ProcessPayment;
pub use toolbox::{ServerState, Toolbox};
pub use weather::GetWeather;

/// Re-exported so that applications implement [`Tool`] without naming the crate.
pub use async_trait::async_trait;

use crate::call::ToolSpec;
use crate::ids::Ids;

/// Why a tool call failed; reported to the client as `tool-output-error` and
/// to the model as the call's error.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    #[error("{0}")]
    Failed(String),
    #[error("tool call timed out after {0} ms")]
    TimedOut(u64),
    #[error("tool call cancelled")]
    Cancelled,
}

/// Where a tool comes from, as `toolgate tools` and `GET /api/tools` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "source", rename_all = "lowercase")]
pub enum ToolSource {
    /// The demo tools toolgate ships.
    Builtin,
    /// `tools.http` in the config.
    Http,
    /// A tool of the MCP server `server` (`mcpServers`).
    Mcp { server: String },
    /// `tools.client` in the config: run by the browser, never here.
    Client,
    /// Registered by the application that embeds toolgate.
    Application,
}

/// What a running call knows about itself.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub chat_id: String,
    pub call_id: String,
    /// The user's `payload` from the confirmation answer, if any.
    pub payload: Option<Value>,
    /// Cancelled when the call's result is no longer wanted.
    pub cancel: CancellationToken,
    pub ids: Ids,
}

#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON schema of the arguments.
    fn parameters(&self) -> Value;

    /// JSON schema of the result, when the tool declares one (an MCP
    /// tool's `outputSchema`): a person's response in the tool's place
    /// must fit it.
    fn output_schema(&self) -> Option<Value> {
        None
    }

    /// Whether a call with these arguments needs a human's confirmation.
    fn needs_confirmation(&self, args: &Value) -> bool;

    /// `false` when no arguments can make this tool ask: its input then
    /// streams to the client as the model produces it.
    fn may_need_confirmation(&self) -> bool {
        true
    }

    /// `true` for a tool the client runs (see [`client`]): the gate hands
    /// its calls to the client and never calls [`Tool::execute`].
    fn runs_on_client(&self) -> bool {
        false
    }

    /// The question shown to the user.
    fn confirmation_hint(&self, args: &Value) -> String {
        format!("Please approve or reject the call {}({args}).", self.name())
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError>;

    fn source(&self) -> ToolSource {
        ToolSource::Application
    }
}

/// The tools offered to the model, by name, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    order: Vec<Arc<dyn Tool>>,
    by_name: HashMap<String, Arc<dyn Tool>>,
    /// Each tool's input schema, compiled as the tool is added.
    inputs: HashMap<String, Arc<InputSchema>>,
    /// Each tool's definition digest (its description and input schema as
    /// offered to the model), made as the tool is added.
    definitions: HashMap<String, Arc<str>>,
    /// What the model is offered, made once: every turn shares it.
    specs: Arc<[ToolSpec]>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.order.iter().map(|t| t.name()))
            .finish()
    }
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in tools and the config's HTTP tools.
    pub fn from_config(
        payment_limit: f64,
        http: &[http::HttpToolConfig],
    ) -> Result<Self, http::HttpToolError> {
        let mut registry = Self::with_builtins(payment_limit);
        for tool in http {
            registry.register(http::HttpTool::new(tool.clone())?);
        }
        Ok(registry)
    }

    /// `process_payment` (limited to `payment_limit`) and `get_weather`.
    pub fn with_builtins(payment_limit: f64) -> Self {
        let mut registry = Self::new();
        registry.register(ProcessPayment::new(payment_limit));
        registry.register(GetWeather);
        registry
    }

    /// Adds a tool, replacing one of the same name in its place.
    pub fn register(&mut self, tool: impl Tool) -> &mut Self {
        self.put(Arc::new(tool));
        self.rebuild_specs();
        self
    }

    /// `base` and then `more`; a tool of `more` whose name `base` has is left out.
    pub(crate) fn extended(base: &Registry, more: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        let mut registry = base.clone();
        for tool in more {
            if registry.by_name.contains_key(tool.name()) {
                tracing::warn!(tool = tool.name(), "a tool of that name exists: left out");
                continue;
            }
            registry.put(tool);
        }
        registry.rebuild_specs();
        registry
    }

    fn put(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.name().to_owned();
        match self.order.iter_mut().find(|t| t.name() == name) {
            Some(slot) => *slot = tool.clone(),
            None => self.order.push(tool.clone()),
        }
        let parameters = tool.parameters();
        let input = InputSchema::compile(&parameters);
        if let Some(why) = input.unusable() {
            tracing::warn!(tool = %name, "the tool's input schema is unusable, so no call of it runs: {why}");
        }
        self.inputs.insert(name.clone(), Arc::new(input));
        let definition = crate::call::fingerprint::definition(tool.description(), &parameters);
        self.definitions.insert(name.clone(), definition.into());
        self.by_name.insert(name, tool);
    }

    fn rebuild_specs(&mut self) {
        self.specs = self
            .order
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_owned(),
                description: t.description().to_owned(),
                parameters: t.parameters(),
            })
            .collect();
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.order.iter()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name)
    }

    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs.clone()
    }

    /// The digest of the tool `name`'s definition as offered now.
    pub fn definition(&self, name: &str) -> Option<&str> {
        self.definitions.get(name).map(|d| &**d)
    }

    /// Whether `args` fit the input schema of the tool `name`.
    pub fn check_input(&self, name: &str, args: &Value) -> Result<(), String> {
        match self.inputs.get(name) {
            Some(input) => input.check(args),
            None => Err(format!("unknown tool `{name}`")),
        }
    }
}

/// A configured header whose value may be `env:VAR` (read now): marked
/// sensitive, so no log or debug output shows it.
pub(crate) fn secret_header(
    name: &str,
    value: &str,
) -> Result<(reqwest::header::HeaderName, reqwest::header::HeaderValue), String> {
    let value = secret(value)?;
    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("invalid header name `{name}`"))?;
    let mut value = reqwest::header::HeaderValue::from_str(&value)
        .map_err(|_| format!("invalid value for header `{name}`"))?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// A configured value, or the variable it names as `env:VAR`.
pub(crate) fn secret(value: &str) -> Result<String, String> {
    match value.strip_prefix("env:") {
        Some(var) => {
            std::env::var(var).map_err(|_| format!("environment variable {var} is not set"))
        }
        None => Ok(value.to_owned()),
    }
}

/// The [`Tool`] methods of a tool declared in the config, read from the
/// `config` field of the tool: `name`, `description`, `parameters`,
/// `needs_confirmation` (whatever the arguments).
macro_rules! declared_in_config {
    () => {
        fn name(&self) -> &str {
            &self.config.name
        }

        fn description(&self) -> &str {
            &self.config.description
        }

        fn parameters(&self) -> Value {
            self.config.parameters.clone()
        }

        fn needs_confirmation(&self, _: &Value) -> bool {
            self.config.needs_confirmation
        }

        fn may_need_confirmation(&self) -> bool {
            self.config.needs_confirmation
        }
    };
}
use declared_in_config;

/// The `parameters` of a declared tool that names none: any object.
fn object_schema() -> Value {
    serde_json::json!({"type": "object"})
}
