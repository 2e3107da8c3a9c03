//! Where a tool runs: the one place `Tool::execute` is called, for a
//! permitted call (on the request) or a claimed one (on a tracked task).
//! Each call is an `execute_tool {name}` span (OpenTelemetry's GenAI
//! conventions), in the span of whoever started it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use super::{Gate, Permit, Running};
use crate::call::{QualifiedName, Redaction, ToolCall};
use crate::metrics::Metrics;
use crate::store::Outcome;
use crate::telemetry::bounded;
use crate::tools::{Registry, ToolContext, ToolError, ToolSource};

impl Gate {
    /// Runs a confirmed, claimed call to the end in its own task and records
    /// its outcome, even if the client goes away, so that a replay reports it
    /// instead of running the call again.
    pub(super) fn start_confirmed(
        &self,
        id: String,
        call: ToolCall,
        payload: Option<Value>,
        chat_id: &str,
        ran_with: Option<Value>,
    ) -> Running {
        let ctx = self.context(&call, payload, chat_id);
        let execute = execute(
            self.tools.current(),
            call,
            ctx,
            self.tool_timeout,
            self.metrics.clone(),
            self.content(),
        );
        let store = self.store.clone();
        let task = self.tasks.spawn(
            async move {
                let mut outcome = execute.await;
                // The ledger keeps the arguments an edited call ran with.
                if let Outcome::Output { ran_with: slot, .. }
                | Outcome::Error { ran_with: slot, .. } = &mut outcome
                {
                    *slot = ran_with;
                }
                if let Err(e) = store.finish(&id, outcome.clone()).await {
                    tracing::error!(confirmation = %id, "recording an outcome failed: {e}");
                }
                outcome
            }
            // The call's span is a child of the turn that claimed it.
            .in_current_span(),
        );
        Box::pin(async move {
            task.await.unwrap_or_else(|e| Outcome::Error {
                message: format!("tool task failed: {e}"),
                ran_with: None,
            })
        })
    }

    pub(super) fn context(
        &self,
        call: &ToolCall,
        payload: Option<Value>,
        chat_id: &str,
    ) -> ToolContext {
        ToolContext {
            chat_id: chat_id.to_owned(),
            call_id: call.id.clone(),
            payload,
            cancel: CancellationToken::new(),
            ids: self.ids.clone(),
        }
    }

    /// With `telemetry.recordContent`, how calls' arguments go on spans.
    fn content(&self) -> Option<Arc<Redaction>> {
        self.record_content.then(|| self.redaction().clone())
    }

    /// Runs a call that needs no confirmation; dropping the future cancels it.
    pub async fn run(&self, permit: Permit, chat_id: &str) -> Outcome {
        let ctx = self.context(&permit.call, None, chat_id);
        let _cancel_on_drop = ctx.cancel.clone().drop_guard();
        let metrics = self.metrics.clone();
        execute(
            self.tools.current(),
            permit.call,
            ctx,
            self.tool_timeout,
            metrics,
            self.content(),
        )
        .await
    }
}

pub(super) async fn execute(
    registry: Arc<Registry>,
    call: ToolCall,
    ctx: ToolContext,
    timeout: Duration,
    metrics: Metrics,
    content: Option<Arc<Redaction>>,
) -> Outcome {
    let span = tool_span(&call, content.as_deref());
    let outcome = run_tool(registry, call, ctx, timeout, metrics)
        .instrument(span.clone())
        .await;
    traced(&span, &outcome, content.is_some());
    outcome
}

/// The call's `execute_tool` span; its arguments, masked by `content`,
/// only if content is recorded.
fn tool_span(call: &ToolCall, content: Option<&Redaction>) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = format!("execute_tool {}", call.name),
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = call.name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        // Run by the agent's side, not handed to the client ("function").
        gen_ai.tool.type = "extension",
        gen_ai.tool.call.arguments = tracing::field::Empty,
        gen_ai.tool.call.result = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if let Some(redaction) = content
        && !span.is_disabled()
    {
        span.record(
            "gen_ai.tool.call.arguments",
            bounded(&redaction.mask(&call.name, &call.args)),
        );
    }
    span
}

/// How the call ended, on its span: its result only if content is recorded.
fn traced(span: &Span, outcome: &Outcome, record_content: bool) {
    if span.is_disabled() {
        return;
    }
    match outcome {
        Outcome::Output { output, .. } => {
            if record_content {
                span.record("gen_ai.tool.call.result", bounded(output));
            }
        }
        Outcome::Error { message, .. } => {
            span.record("otel.status_code", "error");
            // A tool's error may repeat its arguments.
            if record_content {
                span.record("otel.status_description", message.as_str());
            }
        }
        // Not made by `run_tool`.
        Outcome::Denied { .. }
        | Outcome::Expired
        | Outcome::Cancelled
        | Outcome::HandedOff { .. } => {}
    }
}

async fn run_tool(
    registry: Arc<Registry>,
    call: ToolCall,
    ctx: ToolContext,
    timeout: Duration,
    metrics: Metrics,
) -> Outcome {
    let Some(tool) = registry.get(&call.name).cloned() else {
        return Outcome::Error {
            message: format!("unknown tool `{}`", call.name),
            ran_with: None,
        };
    };
    if tool.runs_on_client() {
        // The gate hands these out; getting here is a bug, never a result.
        tracing::error!(tool = %call.name, "a client-side tool reached the server's executor");
        return Outcome::Error {
            message: format!(
                "`{}` runs in the client; the server never executes it",
                call.name
            ),
            ran_with: None,
        };
    }
    let cancel = ctx.cancel.clone();
    let qualified = QualifiedName::of(&call.name);
    let started = Instant::now();
    let run = AssertUnwindSafe(tool.execute(call.args, ctx)).catch_unwind();
    let result = match tokio::time::timeout(timeout, run).await {
        Ok(Ok(result)) => result,
        Ok(Err(_panic)) => Err(ToolError::Failed("tool panicked".into())),
        Err(_elapsed) => {
            cancel.cancel();
            Err(ToolError::TimedOut(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            ))
        }
    };
    let counted = match &result {
        Ok(_) => "ok",
        Err(ToolError::TimedOut(_)) => "timeout",
        Err(_) => "error",
    };
    let source = match tool.source() {
        ToolSource::Builtin => "builtin",
        ToolSource::Http => "http",
        ToolSource::Mcp { .. } => "mcp",
        ToolSource::Client => "client",
        ToolSource::Application => "application",
    };
    metrics.tool_call(qualified.as_str(), source, counted, started.elapsed());
    if counted != "ok" {
        // The call's span (`execute` instruments this future).
        Span::current().record("error.type", counted);
    }
    match result {
        Ok(output) => Outcome::Output {
            output,
            ran_with: None,
            responded: false,
        },
        Err(e) => Outcome::Error {
            message: e.to_string(),
            ran_with: None,
        },
    }
}
