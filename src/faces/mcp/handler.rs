//! The MCP server itself: `tools/list` and `tools/call` (and
//! `initialize`, `server/discover` as rmcp answers them), each a thin map
//! onto the run API's [`Calls`]. A call that needs a person is asked, by
//! protocol generation and what the client can do:
//!
//! - 2026-07-28: an `input_required` result with the approval form (the
//!   client can elicit and its user may decide) and a sealed `requestState`,
//!   or the `requestState` alone; a retry answers the form or waits up to
//!   `mcp.retryWaitMs` for a decision made elsewhere;
//! - older sessions: an `elicitation/create` request to the client, or the
//!   call held with progress notifications up to `mcp.holdSeconds`, then an
//!   error result naming the question.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, Implementation, InputRequest,
    InputRequests, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use tracing::Instrument;

use super::{McpFace, wire};
use crate::identity::{Identity, Source};
use crate::metrics::Transport;
use crate::run::{Called, Calls, GateError, Issued, OutsideQuestion};

/// How often a held call tells its client it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What one `tools/call` asks for.
struct Request<'a> {
    /// Who asks, as the face knows them: the client's user, who decides
    /// in the client (elicitation) with this identity's roles and source.
    who: &'a Identity,
    name: String,
    /// Whether the request speaks 2026-07-28 (stateless, MRTR).
    mrtr: bool,
    /// Whether the client declared it can elicit.
    elicits: bool,
    ctx: &'a RequestContext<RoleServer>,
}

impl rmcp::ServerHandler for McpFace {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "toolgate: every tool call passes toolgate's policy; a call that needs a person's approval asks through elicitation when the client can, else waits for a decision from the approvers' inbox.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let offered = self.calls.offered().into_iter();
        Ok(ListToolsResult::with_all_items(
            offered.map(wire::tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = self
            .who(&ctx)
            .ok_or_else(|| McpError::invalid_request("no authenticated caller", None))?;
        let client = ctx
            .client_info()
            .map(|info| Arc::from(format!("{} {}", info.name, info.version)));
        let mut watch = self.metrics.turn(Transport::Mcp);
        let span = tracing::info_span!(
            "mcp_call",
            otel.name = format!("mcp tools/call {}", request.name),
            gen_ai.tool.name = &*request.name,
            toolgate.principal = who.principal.as_str(),
        );
        // Boxed: the gate's futures under rmcp's session future would
        // pass the compiler's type depth limit.
        let call = Box::pin(self.call(&who, request, &ctx));
        let response = Calls::for_client(client, call).instrument(span).await;
        watch.ended(match &response {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => "refused",
            Ok(CallToolResponse::Complete(_)) => "finished",
            Ok(_) => "waiting",
            Err(_) => "error",
        });
        response
    }
}

impl McpFace {
    /// Who asks: stdio's configured principal (known as `stdio`: whoever
    /// started the process), else the caller `/mcp`'s auth resolved before
    /// rmcp saw the request.
    fn who(&self, ctx: &RequestContext<RoleServer>) -> Option<Identity> {
        if let Some(principal) = &self.principal {
            return Some(Identity::new(principal.to_string(), Source::Stdio));
        }
        let parts = ctx.extensions.get::<axum::http::request::Parts>()?;
        let caller = parts.extensions.get::<crate::faces::Caller>()?;
        Some(caller.identity())
    }

    async fn call(
        &self,
        who: &Identity,
        request: CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mrtr = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let elicits = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let principal = who.principal.as_str();
        let asked = Request {
            who,
            name: request.name.to_string(),
            mrtr,
            elicits,
            ctx,
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let calls = &self.calls;
        let Some(state) = request.request_state else {
            let called = calls.call(principal, &asked.name, args).await;
            return self.respond(&asked, called.map_err(internal)?).await;
        };
        let resumed = calls.resume(principal, &asked.name, &args, &state).await;
        let issued = match resumed.map_err(internal)? {
            Err(why) => return Ok(wire::error(why).into()),
            Ok(OutsideQuestion::Decided(_, outcome)) => {
                return Ok(wire::result(&asked.name, outcome).into());
            }
            Ok(OutsideQuestion::Open(issued)) => issued,
        };
        let answer = request.input_responses.as_ref();
        let answer = answer.and_then(|responses| responses.get(wire::APPROVAL));
        let called = match answer {
            // Only the user who may decide answers in the client.
            Some(answer) if calls.asker_decides(who, &issued) => {
                let Some((action, content)) = wire::answer(answer) else {
                    let why = "inputResponses.approval is not an elicitation result";
                    return Err(McpError::invalid_params(why, None));
                };
                let decision = wire::decision(&action, content);
                calls.decide(who, &issued, decision).await
            }
            _ => calls.wait(issued, self.retry_wait).await,
        };
        self.respond(&asked, called.map_err(internal)?).await
    }

    /// What the client is told of what the call came to.
    async fn respond(
        &self,
        asked: &Request<'_>,
        called: Called,
    ) -> Result<CallToolResponse, McpError> {
        let issued = match called {
            Called::Done(outcome) => return Ok(wire::result(&asked.name, outcome).into()),
            Called::Refused(why) => return Ok(wire::error(why).into()),
            Called::Waiting(issued) => issued,
        };
        let asks = asked.elicits && self.calls.asker_decides(asked.who, &issued);
        if asked.mrtr {
            let state = self.calls.state(&issued);
            let requests = match asks {
                true => Some(InputRequests::from([(
                    wire::APPROVAL.to_owned(),
                    InputRequest::Elicitation(ElicitRequest::new(self.form(&issued)?)),
                )])),
                false => None,
            };
            return Ok(InputRequiredResult::new(requests, Some(state)).into());
        }
        let called = match asks {
            true => self.elicit(asked, &issued).await?,
            false => self.hold(asked, issued).await?,
        };
        match called {
            Called::Done(outcome) => Ok(wire::result(&asked.name, outcome).into()),
            Called::Refused(why) => Ok(wire::error(why).into()),
            Called::Waiting(issued) => Ok(wire::still_waiting(&issued).into()),
        }
    }

    fn form(&self, issued: &Issued) -> Result<rmcp::model::ElicitRequestParams, McpError> {
        let shown = self.calls.shown(issued);
        wire::form(&shown.issued, shown.may_remember).map_err(|e| McpError::internal_error(e, None))
    }

    /// An older session whose client can elicit: asks it, and decides as
    /// its answer says. A client that fails to answer leaves the question
    /// open, as one that cannot be asked.
    async fn elicit(&self, asked: &Request<'_>, issued: &Issued) -> Result<Called, McpError> {
        let form = self.form(issued)?;
        let answer = asked
            .ctx
            .peer
            .create_elicitation_with_timeout(form, Some(self.hold))
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                tracing::info!(confirmation = %issued.id, "the MCP client did not answer the approval form: {e}");
                return Ok(Called::Waiting(issued.clone()));
            }
        };
        let decision = wire::decision(&answer.action, answer.content.as_ref());
        let decided = self.calls.decide(asked.who, issued, decision).await;
        decided.map_err(internal)
    }

    /// An older session whose client cannot be asked: waits for a decision
    /// made elsewhere up to `mcp.holdSeconds`, telling the client it still
    /// waits when it asked for progress.
    async fn hold(&self, asked: &Request<'_>, issued: Issued) -> Result<Called, McpError> {
        let token = asked.ctx.meta.get_progress_token();
        let until = tokio::time::Instant::now() + self.hold;
        let mut issued = issued;
        let mut beat = 0.0;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(Called::Waiting(issued));
            }
            let waited = self.calls.wait(issued, left.min(PROGRESS_EVERY)).await;
            issued = match waited.map_err(internal)? {
                Called::Waiting(issued) => issued,
                decided => return Ok(decided),
            };
            if let Some(token) = &token {
                beat += 1.0;
                let progress = ProgressNotificationParam::new(token.clone(), beat).with_message(
                    format!("waiting for approval of confirmation {}", issued.id),
                );
                // A client that went away ends the wait.
                if asked.ctx.peer.notify_progress(progress).await.is_err() {
                    return Ok(Called::Waiting(issued));
                }
            }
        }
    }
}

/// A failure of the gate or the store: the client sees a protocol error.
fn internal(e: GateError) -> McpError {
    tracing::error!("an MCP call failed: {e}");
    McpError::internal_error("toolgate could not decide the call", None)
}
