//! What the gate answers: its verdicts on a new call, an answer, a
//! decision out of band and a client's result, and the permit and running
//! call they may carry.

use serde_json::Value;

use crate::call::ToolCall;
use crate::store::{Issued, Outcome};
use crate::tools::ToolSource;

/// Permission to run one call that needs no confirmation. Only the gate
/// creates one. (A confirmed call never leaves the gate: it starts the
/// moment its claim is won.)
#[derive(Debug)]
pub struct Permit {
    pub(super) call: ToolCall,
}

impl Permit {
    pub fn call(&self) -> &ToolCall {
        &self.call
    }
}

/// A confirmed call that is running to the end whatever happens to the
/// request that approved it; resolves to its recorded outcome.
pub type Running = futures::future::BoxFuture<'static, Outcome>;

/// A tool as `toolgate tools` and `GET /api/tools` show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    pub name: String,
    pub qualified_name: String,
    #[serde(flatten)]
    pub source: ToolSource,
    pub description: String,
    pub parameters: Value,
    /// The effective policy, in words.
    pub policy: String,
}

/// What `toolgate tools` and `GET /api/tools` show.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub tools: Vec<ToolView>,
    pub mcp_servers: Vec<crate::tools::mcp::ServerView>,
}

/// The result of a decision made through the API.
#[derive(Debug, Clone, PartialEq)]
pub enum OutOfBand {
    Decided(Outcome),
    /// The decision itself is wrong (e.g. an edit the tool does not allow).
    Invalid(String),
    /// Already decided the other way, or of unknown outcome.
    Conflict(String),
    /// Too late: nobody decided in time, and nothing ran.
    Expired(String),
    /// No such confirmation for this user.
    NotFound,
    /// The caller may not make this decision (not an approver, or the
    /// user who asked under four eyes).
    Forbidden(String),
}

/// Why a decision made out of band was not taken: one typed value that
/// each face's edge words once (a status, a frame, an AG-UI code). Its
/// text is the pipeline's fixed words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The decision itself is wrong (e.g. an edit the tool does not allow).
    #[error("{0}")]
    Invalid(String),
    /// Already decided the other way, or of unknown outcome.
    #[error("{0}")]
    Conflict(String),
    /// Too late: nobody decided in time, and nothing ran.
    #[error("{0}")]
    Expired(String),
    /// No such confirmation for this user.
    #[error("no such confirmation")]
    NotFound,
    /// The caller may not make this decision.
    #[error("{0}")]
    Forbidden(String),
}

impl OutOfBand {
    /// The outcome, or why the decision was not taken.
    pub fn decided(self) -> Result<Outcome, Refused> {
        match self {
            OutOfBand::Decided(outcome) => Ok(outcome),
            OutOfBand::Invalid(why) => Err(Refused::Invalid(why)),
            OutOfBand::Conflict(why) => Err(Refused::Conflict(why)),
            OutOfBand::Expired(why) => Err(Refused::Expired(why)),
            OutOfBand::NotFound => Err(Refused::NotFound),
            OutOfBand::Forbidden(why) => Err(Refused::Forbidden(why)),
        }
    }
}

/// The gate's verdict on a call the model just made.
#[derive(Debug)]
pub enum NewCall {
    Run(Permit),
    /// A client-side tool's call, allowed and recorded as handed out under
    /// `handoff`: the client runs it.
    Client {
        call: ToolCall,
        handoff: String,
    },
    Ask(Issued),
    /// The call cannot run at all (e.g. an unknown tool).
    Refused(String),
    /// Its arguments do not fit the tool's input schema: no rule read
    /// them, nothing ran, and the model is told why.
    Invalid(String),
}

/// The gate's verdict on what the client says a client-side tool returned.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientOutput {
    /// Not a client-side tool's result: nothing to judge here.
    NotClient,
    /// The model may take it as the call's result.
    Accepted,
    /// Not taken; the model gets this error instead.
    Rejected(String),
}

/// The gate's verdict on a user's answer.
pub enum Answered {
    /// Approved and claimed: the call is already running.
    Running { call: ToolCall, outcome: Running },
    /// Approved and claimed, for a client-side tool: recorded as handed out
    /// (under the confirmation's id); the client runs it.
    Client { call: ToolCall },
    /// Already decided: the call (as issued) and its recorded outcome.
    Recorded { call: ToolCall, outcome: Outcome },
    /// Not an answer this server accepts; nothing runs.
    Rejected(String),
}
