//! The MCP face over stdio (`toolgate mcp`): one client, the process's
//! one principal, JSON-RPC on stdin and stdout (logs go to stderr).

use rmcp::ServiceExt;

use super::McpFace;

/// Why serving over stdio stopped early.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("the MCP client did not start a session: {0}")]
    Start(String),
    #[error("the MCP session ended in error: {0}")]
    Session(String),
}

/// Serves `face` on stdin and stdout until the client closes them.
pub async fn serve_stdio(face: McpFace) -> Result<(), StdioError> {
    // Boxed: rmcp's session future is deep.
    let running = Box::pin(face.serve(rmcp::transport::stdio()))
        .await
        .map_err(|e| StdioError::Start(e.to_string()))?;
    Box::pin(running.waiting())
        .await
        .map(|_| ())
        .map_err(|e| StdioError::Session(e.to_string()))
}
