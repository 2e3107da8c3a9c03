//! Whether this instance should get traffic, as the door says it: its
//! store answers and every MCP server the config requires is available;
//! and how many of its MCP servers are in each state, for `/metrics`.

use std::sync::Arc;

use crate::confirm::Gate;
use crate::tools::ServerState;

/// Why this instance should get no traffic now.
#[derive(Debug, thiserror::Error)]
pub enum Unready {
    /// The store failed (its words go to the log only).
    #[error("storage unavailable")]
    Store(String),
    /// A server of `mcpServers.*.required` is not available.
    #[error("a required MCP server is unavailable")]
    McpServer(String),
}

/// Readiness and the MCP servers' states.
#[derive(Debug, Clone)]
pub struct Health {
    gate: Gate,
    /// The MCP servers readiness waits for (`mcpServers.*.required`).
    required_mcp: Arc<[String]>,
}

impl Health {
    pub fn new(gate: Gate, required_mcp: Arc<[String]>) -> Self {
        Self { gate, required_mcp }
    }

    /// `Ok` when this instance should get traffic.
    pub async fn ready(&self) -> Result<(), Unready> {
        if let Err(e) = self.gate.ping().await {
            return Err(Unready::Store(e.detail()));
        }
        let servers = self.gate.toolbox().servers();
        for name in self.required_mcp.iter() {
            let up = servers
                .iter()
                .any(|s| s.name == *name && matches!(s.state, ServerState::Available { .. }));
            if !up {
                return Err(Unready::McpServer(name.clone()));
            }
        }
        Ok(())
    }

    /// The MCP servers connecting, available, unavailable and restarting.
    pub fn mcp_servers(&self) -> [i64; 4] {
        let mut counts = [0; 4];
        for server in self.gate.toolbox().servers() {
            let at = match server.state {
                ServerState::Connecting => 0,
                ServerState::Available { .. } => 1,
                ServerState::Unavailable { .. } => 2,
                ServerState::Restarting { .. } => 3,
            };
            counts[at] += 1;
        }
        counts
    }
}
