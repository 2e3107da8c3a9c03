//! A tool of an MCP server, run through the gate like any tool.

use super::*;

/// A tool of an MCP server, offered as `mcp--<server>--<tool>`.
pub struct McpTool {
    qualified: String,
    server: String,
    pub(super) tool: String,
    description: String,
    schema: Value,
    /// The server's `outputSchema`, if it gave one.
    output_schema: Option<Value>,
    /// Both schemas' size, counted against the server's budget.
    pub(super) schema_bytes: usize,
    asks: bool,
    timeout: Option<Duration>,
    peer: Peer<RoleClient>,
    redactor: Redactor,
}

impl McpTool {
    pub(super) fn new(
        server: &McpServer,
        tool: rmcp::model::Tool,
        peer: Peer<RoleClient>,
    ) -> Result<Self, String> {
        let name = tool.name.as_ref();
        let qualified = format!("mcp--{}--{name}", server.name);
        if !valid_part(name) || qualified.len() > MAX_NAME_CHARS {
            return Err(format!(
                "`{}` is not a name toolgate can offer (letters, digits, `_`, `-`, no `--`, at most {MAX_NAME_CHARS} characters qualified)",
                name.escape_debug()
            ));
        }
        let schema = Value::Object((*tool.input_schema).clone());
        let output_schema = tool
            .output_schema
            .as_ref()
            .map(|schema| Value::Object((**schema).clone()));
        let output_bytes = output_schema.as_ref().map_or(0, |s| s.to_string().len());
        let schema_bytes = schema.to_string().len() + output_bytes;
        if schema_bytes > MAX_SCHEMA_BYTES {
            return Err(format!(
                "`{name}`'s schemas are larger than {MAX_SCHEMA_BYTES} bytes"
            ));
        }
        let description: String = tool
            .description
            .as_deref()
            .unwrap_or_default()
            .chars()
            .take(MAX_DESCRIPTION_CHARS)
            .collect();
        Ok(Self {
            asks: asks(server.allow_read_only, tool.annotations.as_ref()),
            server: server.name.clone(),
            tool: name.to_owned(),
            qualified,
            description,
            schema,
            output_schema,
            schema_bytes,
            timeout: server.call_timeout,
            peer,
            redactor: server.redactor.clone(),
        })
    }

    pub(super) async fn call(&self, args: Value) -> Result<Value, ToolError> {
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidArgs(format!(
                    "arguments must be an object, not {other}"
                )));
            }
        };
        let request = CallToolRequestParams::new(self.tool.clone()).with_arguments(arguments);
        // Dropping the call (cancelled, timed out) tells the server `notifications/cancelled`.
        let call = self.peer.call_tool_once(request);
        let response = match self.timeout {
            Some(limit) => tokio::time::timeout(limit, call).await.map_err(|_| {
                ToolError::TimedOut(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
            })?,
            None => call.await,
        };
        match response {
            Ok(CallToolResponse::Complete(result)) => output(result),
            Ok(_) => Err(ToolError::Failed(
                "the MCP server asked for more than toolgate supports (input or a task)".into(),
            )),
            Err(ServiceError::McpError(e)) => Err(ToolError::Failed(format!(
                "MCP error {}: {}",
                e.code.0, e.message
            ))),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => Err(
                ToolError::Failed(format!("MCP server `{}` is not connected", self.server)),
            ),
            Err(e) => Err(ToolError::Failed(format!("MCP call failed: {e}"))),
        }
    }
}

/// A call's error as the stream, the model and the history get it: the
/// server's text and the HTTP stack's (which may repeat the URL) without
/// the URL's secrets, and bounded.
pub(super) fn passed_on(redactor: &Redactor, error: ToolError) -> ToolError {
    match error {
        ToolError::Failed(message) => ToolError::Failed(capped(&redactor.apply(&message))),
        ToolError::InvalidArgs(message) => ToolError::InvalidArgs(capped(&message)),
        other => other,
    }
}

/// Whether calls ask, from the server's annotations: only a read-only,
/// non-destructive tool on a server with `allowReadOnly` does not. No
/// annotations, ask (fail closed).
pub(super) fn asks(
    allow_read_only: bool,
    annotations: Option<&rmcp::model::ToolAnnotations>,
) -> bool {
    let Some(a) = annotations else { return true };
    let read_only = a.read_only_hint == Some(true);
    let destructive = a.destructive_hint == Some(true);
    !(allow_read_only && read_only && !destructive)
}

/// The tool output: the structured content if any, else the text (or the
/// content blocks as JSON when not all are text). `isError` is the call's error.
pub(super) fn output(result: CallToolResult) -> Result<Value, ToolError> {
    let texts: Option<Vec<&str>> = result
        .content
        .iter()
        .map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let value = match (&result.structured_content, texts) {
        (Some(structured), _) if result.is_error != Some(true) => structured.clone(),
        (_, Some(texts)) => Value::String(texts.join("\n")),
        (_, None) => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    };
    let size = match &value {
        Value::String(s) => s.len(),
        other => other.to_string().len(),
    };
    if size > MAX_RESULT_BYTES {
        return Err(ToolError::Failed(format!(
            "the result is larger than {MAX_RESULT_BYTES} bytes"
        )));
    }
    if result.is_error == Some(true) {
        let message = match value {
            Value::String(s) if !s.is_empty() => s,
            Value::String(_) => "the MCP tool failed".to_owned(),
            other => other.to_string(),
        };
        return Err(ToolError::Failed(message));
    }
    Ok(value)
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.qualified
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }

    fn needs_confirmation(&self, _: &Value) -> bool {
        self.asks
    }

    fn may_need_confirmation(&self) -> bool {
        self.asks
    }

    fn confirmation_hint(&self, args: &Value) -> String {
        format!(
            "Run {} on MCP server {} with {args}?",
            self.tool, self.server
        )
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp {
            server: self.server.clone(),
        }
    }

    async fn execute(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolError> {
        let result = tokio::select! {
            result = self.call(args) => result,
            () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        };
        result.map_err(|e| passed_on(&self.redactor, e))
    }
}
