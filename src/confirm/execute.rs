//! Where a tool runs: the one place `Tool::execute` is called, for a
//! permitted call (on the request) or a claimed one (on a tracked task).
//! Every call is counted against the limits (`limits`) just before it would
//! run; one over a limit does not run and ends as an error saying which
//! limit, recorded like any outcome (an approved call's approval is spent:
//! the ledger says honestly that it did not run, and why).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Gate, Permit, Running, Scope};
use crate::call::{QualifiedName, ToolCall};
use crate::metrics::Metrics;
use crate::store::{LimitError, Limiter, Outcome};
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
        scope: &Scope,
        ran_with: Option<Value>,
    ) -> Running {
        let ctx = self.context(&call, payload, &scope.chat_id);
        let (limiter, principal, tool) = (
            self.limiter.clone(),
            scope.principal.clone(),
            call.name.clone(),
        );
        let metrics = self.metrics.clone();
        let execute = execute(
            self.tools.current(),
            call,
            ctx,
            self.tool_timeout,
            self.metrics.clone(),
        );
        let store = self.store.clone();
        let task = self.tasks.spawn(async move {
            // Counted on the task, with the claim already won: the check
            // awaits, and nothing may come between the claim and this task.
            let mut outcome = match over_limit(&limiter, &metrics, &principal, &tool).await {
                Some(refused) => refused,
                None => execute.await,
            };
            // The ledger keeps the arguments an edited call ran with.
            if let Outcome::Output { ran_with: slot, .. } | Outcome::Error { ran_with: slot, .. } =
                &mut outcome
            {
                *slot = ran_with;
            }
            if let Err(e) = store.finish(&id, outcome.clone()).await {
                tracing::error!(confirmation = %id, "recording an outcome failed: {e}");
            }
            outcome
        });
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

    /// Runs a call that needs no confirmation; dropping the future cancels it.
    pub async fn run(&self, permit: Permit, chat_id: &str) -> Outcome {
        let limited = over_limit(
            &self.limiter,
            &self.metrics,
            &permit.principal,
            &permit.call.name,
        );
        if let Some(refused) = limited.await {
            return refused;
        }
        let ctx = self.context(&permit.call, None, chat_id);
        let _cancel_on_drop = ctx.cancel.clone().drop_guard();
        let metrics = self.metrics.clone();
        execute(
            self.tools.current(),
            permit.call,
            ctx,
            self.tool_timeout,
            metrics,
        )
        .await
    }
}

/// Counts a call of `tool` by `principal` about to run; the outcome it
/// ends with instead when it must not run.
async fn over_limit(
    limiter: &Limiter,
    metrics: &Metrics,
    principal: &str,
    tool: &str,
) -> Option<Outcome> {
    let message = match limiter.tool_call(principal, tool).await {
        Ok(()) => return None,
        Err(LimitError::Limited(limited)) => {
            tracing::info!(tool, "call not run: {limited}");
            metrics.rate_limited(limited.limit.label());
            limited.to_string()
        }
        // Fail closed: a limit that cannot be checked admits nothing.
        Err(LimitError::Store(e)) => {
            tracing::error!(tool, "checking the rate limits failed: {e}");
            "the rate limits could not be checked; the call did not run".to_owned()
        }
    };
    Some(Outcome::Error {
        message,
        ran_with: None,
    })
}

pub(super) async fn execute(
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
