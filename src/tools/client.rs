//! Client-side tools: declared in the config (or registered in code), run by
//! the browser. The gate decides about their calls like any other; an
//! allowed or approved call is handed to the client (`tool-input-available`)
//! and the turn ends; the client's `addToolOutput` result comes back with the
//! next request. The server never executes one.

use serde::Deserialize;
use serde_json::Value;

use super::{Tool, ToolContext, ToolError};

/// The largest client output (as JSON text) the model is given; a larger
/// one becomes an error.
pub const MAX_OUTPUT_BYTES: usize = 64 << 10;

/// What the model is told about a handed-off call the client never answered.
pub const NO_RESULT: &str = "no result from the client";

/// `tools.client[]` in the config.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientToolConfig {
    pub name: String,
    pub description: String,
    /// The JSON schema of the arguments.
    #[serde(default = "super::object_schema")]
    pub parameters: Value,
    /// Whether a call asks a human before it is handed to the client
    /// (default false); policy rules win.
    #[serde(default)]
    pub needs_confirmation: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientToolError {
    #[error("tools.client `{tool}`: {why}")]
    Invalid { tool: String, why: String },
}

#[derive(Debug, Clone)]
pub struct ClientTool {
    config: ClientToolConfig,
}

impl ClientTool {
    pub fn new(config: ClientToolConfig) -> Result<Self, ClientToolError> {
        if config.name.is_empty() || config.name.contains("--") {
            return Err(ClientToolError::Invalid {
                tool: config.name,
                why: "a name must be non-empty and without `--`".into(),
            });
        }
        if !config.parameters.is_object() {
            return Err(ClientToolError::Invalid {
                tool: config.name,
                why: "parameters must be a JSON schema object".into(),
            });
        }
        Ok(Self { config })
    }
}

#[async_trait::async_trait]
impl Tool for ClientTool {
    super::declared_in_config!();

    fn runs_on_client(&self) -> bool {
        true
    }

    fn source(&self) -> super::ToolSource {
        super::ToolSource::Client
    }

    /// Never called: the gate hands client tools out instead. Reaching this
    /// is a bug, so it fails loudly rather than make up a result.
    async fn execute(&self, _: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        tracing::error!(tool = %self.config.name, call = %ctx.call_id, "a client-side tool was asked to run on the server");
        Err(ToolError::Failed(format!(
            "`{}` runs in the client; the server never executes it",
            self.config.name
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::object_schema;
    use tokio_util::sync::CancellationToken;

    fn tool(name: &str) -> Result<ClientTool, ClientToolError> {
        ClientTool::new(ClientToolConfig {
            name: name.into(),
            description: "where the user is".into(),
            parameters: object_schema(),
            needs_confirmation: false,
        })
    }

    #[test]
    fn names_are_checked() {
        assert!(tool("get_location").is_ok());
        assert!(tool("").is_err());
        assert!(tool("mcp--x").is_err());
    }

    #[tokio::test]
    async fn execute_fails_instead_of_inventing_a_result() {
        let Ok(tool) = tool("get_location") else {
            panic!("valid tool refused")
        };
        let ctx = ToolContext {
            chat_id: "c".into(),
            call_id: "call-1".into(),
            payload: None,
            cancel: CancellationToken::new(),
            ids: crate::ids::Ids::sequential(),
        };
        let result = tool.execute(Value::Null, ctx).await;
        assert!(
            matches!(&result, Err(ToolError::Failed(why)) if why.contains("runs in the client")),
            "{result:?}"
        );
    }
}
