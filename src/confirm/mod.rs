//! The confirmation gate: the one place that decides whether a tool call may
//! run, and the one place that runs it.
//!
//! A call that needs no confirmation for its arguments runs with a
//! [`Permit`], which only this module makes. A call that needs one runs only
//! when an answer names a confirmation this server issued (its signature
//! verified first, when signing is on), for this chat and principal, asked
//! in the same protocol, for the same call, unexpired, and wins the store's
//! atomic claim; the gate then starts it at once ([`Answered::Running`]).
//!
//! Everything from a claim on (starting the call, recording its outcome,
//! the audit event) runs on the gate's tracked tasks, never on the request's
//! future: a client that hangs up drops that future at any await, and an
//! approval once given must not be lost with it. Shutdown waits for them.

mod answer;
pub mod signing;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use answer::{Answer, AnswerKeys, Decision, Remember, original_call};
pub use signing::{Seal, Signer};

use crate::call::{MAX_ARGS_BYTES, QualifiedName, ToolCall, ToolSpec};
use crate::ids::{Clock, Ids};
use crate::policy::{BUDGET, CallInfo, Policy, REMEMBERED, ToolInfo, Verdict};
use crate::protocol::{ConfirmationProtocol, ToolPart, ToolState};
use crate::store::{
    AuditDecision, AuditEvent, Claim, HEARTBEAT_EVERY, Issued, Outcome, Remembered, Status, Store,
    StoreError,
};
use crate::tools::client::{MAX_OUTPUT_BYTES, NO_RESULT};
use crate::tools::{Registry, ToolContext, ToolError, ToolSource, Toolbox};

/// What a replay is told when the claimed call never reported an outcome
/// and never will: the process that claimed it is gone.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown: the approved call was claimed but its outcome was never recorded (the server may have stopped while it ran); it will not run again";

/// The reason a held question is denied with when nobody decided in time.
pub const TIMEOUT: &str = "timeout";

/// How long past the tool timeout a live claim may go without an outcome.
const CLAIM_GRACE_MS: u64 = 5_000;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The name of the wrapper call that asks the user.
pub use crate::protocol::message::CONFIRMATION_TOOL;

/// Who is asking: the gate's answers are valid only within one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub chat_id: String,
    pub principal: String,
}

/// Permission to run one call that needs no confirmation. Only the gate
/// creates one. (A confirmed call never leaves the gate: it starts the
/// moment its claim is won.)
#[derive(Debug)]
pub struct Permit {
    call: ToolCall,
}

impl Permit {
    pub fn call(&self) -> &ToolCall {
        &self.call
    }
}

/// A confirmed call that is running to the end whatever happens to the
/// request that approved it; resolves to its recorded outcome.
pub type Running = futures::future::BoxFuture<'static, Outcome>;

/// What the policy needs to know about a call's tool.
struct Facts {
    qualified: String,
    tool_may_ask: bool,
    tool_asks: bool,
}

impl Facts {
    fn info<'a>(&'a self, scope: &'a Scope, call: &'a ToolCall) -> CallInfo<'a> {
        CallInfo {
            tool: ToolInfo {
                name: &call.name,
                qualified: &self.qualified,
                tool_may_ask: self.tool_may_ask,
            },
            args: &call.args,
            tool_asks: self.tool_asks,
            chat_id: &scope.chat_id,
            principal: &scope.principal,
        }
    }
}

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
    /// Already decided the other way, expired, or of unknown outcome.
    Conflict(String),
    /// No such confirmation for this user.
    NotFound,
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

/// What a client is told is fixed text; [`GateError::detail`] (which may
/// name the store's internals: SQL, addresses) goes to the log only.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{}", public_text(.0))]
    Store(#[from] StoreError),
    /// A gate task ended without an answer (it panicked).
    #[error("a confirmation task failed")]
    Task(String),
}

/// A store error as a client may read it: a backend's own words stay in the log.
fn public_text(e: &StoreError) -> String {
    match e {
        StoreError::Backend(_) => "the confirmation store is unavailable; try again".to_owned(),
        StoreError::Duplicate(_) | StoreError::NotClaimed(_) | StoreError::Full(_) => e.to_string(),
    }
}

impl GateError {
    /// What failed inside, for the log.
    pub fn detail(&self) -> String {
        match self {
            GateError::Store(e) => e.to_string(),
            GateError::Task(why) => why.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Gate {
    /// The tools now; MCP servers change them at run time.
    tools: Toolbox,
    store: Store,
    clock: Clock,
    ids: Ids,
    expiry: Duration,
    tool_timeout: Duration,
    signer: Option<Signer>,
    policy: Policy,
    /// Where remembered approvals and budgets live (`allowedToolsStorage`).
    remembered: Store,
    /// How long the digest of a client's accepted result is kept, so that
    /// later turns still take it after its hand-off record expired.
    result_retention: Duration,
    /// What runs from a claim on; shutdown waits for it.
    tasks: TaskTracker,
    /// This process, as its claims name it (minted at start-up).
    instance: Arc<str>,
    /// Whether this instance's heartbeat is kept (a shared store, from the
    /// first claim on).
    beating: Arc<AtomicBool>,
    /// Cancelled by [`Gate::shutdown`]: ends the heartbeat.
    stopping: CancellationToken,
}

impl Gate {
    pub fn new(
        tools: impl Into<Toolbox>,
        store: Store,
        clock: Clock,
        ids: Ids,
        expiry: Duration,
        tool_timeout: Duration,
    ) -> Self {
        Self {
            tools: tools.into(),
            store: store.clone(),
            clock,
            ids,
            expiry,
            tool_timeout,
            signer: None,
            policy: Policy::default(),
            remembered: store,
            result_retention: DEFAULT_RESULT_RETENTION,
            tasks: TaskTracker::new(),
            instance: uuid::Uuid::new_v4().simple().to_string().into(),
            beating: Arc::default(),
            stopping: CancellationToken::new(),
        }
    }

    /// Names this process's claims `instance` (random unless set): a claim
    /// of another instance that is gone is answered at once as outcome
    /// unknown, one of this instance waits for its running call.
    pub fn with_instance(mut self, instance: impl Into<Arc<str>>) -> Self {
        self.instance = instance.into();
        self
    }

    /// Renews this instance's heartbeat on the gate's tracked task, for a
    /// store several instances share, until [`Gate::shutdown`].
    fn keep_alive(&self) {
        let (store, instance) = (self.store.clone(), self.instance.clone());
        let stopping = self.stopping.clone();
        self.tasks.spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    _ = every.tick() => {}
                }
                if let Err(e) = store.heartbeat(&instance).await {
                    tracing::warn!("renewing this instance's heartbeat failed: {e}");
                }
            }
        });
    }

    /// Stops the heartbeat and waits for every claimed call to run to its
    /// end and record its outcome (at most the tool timeout and a grace).
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        self.tasks.close();
        let limit = self.tool_timeout + Duration::from_millis(CLAIM_GRACE_MS);
        if tokio::time::timeout(limit, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("stopping with claimed calls still running: their outcome is unknown");
        }
    }

    /// Runs `work` to its end on the gate's tracked task, whatever happens
    /// to the caller, and hands back its result if the caller still waits.
    async fn to_the_end<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, GateError>> + Send + 'static,
    ) -> Result<T, GateError> {
        self.tasks
            .spawn(work)
            .await
            .map_err(|e| GateError::Task(e.to_string()))?
    }

    /// Claims `id` for this instance. With a shared store its heartbeat is
    /// written before its first claim, and kept alive from then on: no
    /// other instance may take a claim of a live one for orphaned.
    async fn claim(&self, id: &str, now_ms: u64) -> Result<Claim, StoreError> {
        if self.store.is_shared() && !self.beating.load(Ordering::Acquire) {
            self.store.heartbeat(&self.instance).await?;
            if !self.beating.swap(true, Ordering::AcqRel) {
                self.keep_alive();
            }
        }
        self.store.claim(id, now_ms, &self.instance).await
    }

    /// The outcome of a claim someone else holds, or `None` when it will
    /// never come. The one place a claim in flight is judged: an orphaned
    /// one (its instance is gone) is answered at once; a live one (running
    /// here, or on a live instance) is waited for until the longest its call
    /// can take has passed.
    async fn claimed_outcome(
        &self,
        id: &str,
        since_ms: u64,
        orphaned: bool,
    ) -> Result<Option<Outcome>, GateError> {
        if orphaned {
            return Ok(None);
        }
        let deadline = since_ms
            .saturating_add(millis(self.tool_timeout))
            .saturating_add(CLAIM_GRACE_MS);
        let left = Duration::from_millis(deadline.saturating_sub(self.clock.now_ms()));
        Ok(self.store.wait_outcome(id, left).await?)
    }

    /// Keeps the record of each client result taken for `retention` (the
    /// audit retention in a served app): for that long a chat's earlier
    /// client results stand, and none can be swapped.
    pub fn with_result_retention(mut self, retention: Duration) -> Self {
        self.result_retention = retention;
        self
    }

    /// Keeps remembered approvals in `store` rather than with the
    /// confirmations (Dexto's `allowedToolsStorage: memory`).
    pub fn with_remembered_store(mut self, store: Store) -> Self {
        self.remembered = store;
        self
    }

    /// Decides with `policy` instead of the default (tools ask when they say so).
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Signs every issued confirmation, and refuses answers whose signature
    /// does not verify before looking anything up.
    pub fn with_signer(mut self, signer: Option<Signer>) -> Self {
        self.signer = signer;
        self
    }

    /// The signature to send with a confirmation, when signing is on.
    pub fn seal(&self, issued: &Issued) -> Option<Seal> {
        let signer = self.signer.as_ref()?;
        Some(signer.seal(&signing::Subject {
            confirmation_id: &issued.id,
            chat_id: &issued.chat_id,
            principal: &issued.principal,
            call: &issued.call,
            expires_at_ms: issued.expires_at_ms,
        }))
    }

    /// Whether calls to `name` may need confirmation; when not, their input
    /// can stream live.
    pub fn may_ask(&self, name: &str) -> bool {
        let tools = self.tools.current();
        let Some(tool) = tools.get(name) else {
            return true;
        };
        let qualified = QualifiedName::of(name);
        self.policy.may_ask(&ToolInfo {
            name,
            qualified: &qualified,
            tool_may_ask: tool.may_need_confirmation(),
        })
    }

    /// Every approval `principal` asked to be remembered.
    pub async fn remembered(&self, principal: &str) -> Result<Vec<Remembered>, GateError> {
        Ok(self.remembered.list_remembered(principal).await?)
    }

    /// Forgets one of `principal`'s remembered approvals; false if they have none by that id.
    /// `by` names who revoked it, for the audit log.
    pub async fn revoke(&self, principal: &str, id: &str, by: String) -> Result<bool, GateError> {
        let mine = self.remembered.list_remembered(principal).await?;
        let Some(approval) = mine.into_iter().find(|r| r.id == id) else {
            return Ok(false);
        };
        let revoked = self.remembered.revoke(principal, id).await?;
        if revoked {
            let scope = Scope {
                chat_id: approval.chat_id.unwrap_or_default(),
                principal: principal.to_owned(),
            };
            let tool = ToolCall {
                id: String::new(),
                name: approval.tool,
                args: Value::Null,
            };
            self.note(&scope, &tool, AuditDecision::Revoked, by, None, Some(id))
                .await;
        }
        Ok(revoked)
    }

    /// Every tool now, with its source, qualified name and effective policy.
    pub fn tools(&self) -> Vec<ToolView> {
        let tools = self.tools.current();
        tools
            .iter()
            .map(|tool| {
                let name = tool.name();
                let qualified = QualifiedName::of(name);
                let policy = self.policy.describe(&ToolInfo {
                    name,
                    qualified: &qualified,
                    tool_may_ask: tool.may_need_confirmation(),
                });
                ToolView {
                    name: name.to_owned(),
                    qualified_name: qualified.into_string(),
                    source: tool.source(),
                    description: tool.description().to_owned(),
                    parameters: tool.parameters(),
                    policy,
                }
            })
            .collect()
    }

    /// Every tool now, and each MCP server's state.
    pub fn inventory(&self) -> Inventory {
        Inventory {
            tools: self.tools(),
            mcp_servers: self.tools.servers(),
        }
    }

    /// The tools the model is offered now (a turn keeps one snapshot).
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.tools.current().specs()
    }

    /// The tools and the state of each MCP server.
    pub fn toolbox(&self) -> &Toolbox {
        &self.tools
    }

    /// The whole chain for a new call: the policy's deciders, with
    /// remembered approvals and budgets from the store in their place.
    async fn decide(&self, scope: &Scope, call: &ToolCall) -> Result<Option<Verdict>, GateError> {
        let Some(facts) = self.facts(call) else {
            return Ok(None);
        };
        let qualified = &facts.qualified;
        let info = facts.info(scope, call);
        let above = self.policy.decide_in(&info, REMEMBERED + 1..=i32::MAX);
        if above != Verdict::Pass {
            return Ok(Some(above));
        }
        if let Some(approval) = self
            .remembered
            .remembered(&scope.principal, &scope.chat_id, qualified)
            .await?
        {
            let reach = if approval.chat_id.is_some() {
                "this chat"
            } else {
                "every chat"
            };
            return Ok(Some(Verdict::Allow {
                by: format!("remembered approval {} for {reach}", approval.id),
            }));
        }
        let between = self.policy.decide_in(&info, BUDGET + 1..=REMEMBERED);
        if between != Verdict::Pass {
            return Ok(Some(between));
        }
        if self
            .remembered
            .take_budget(&scope.principal, &scope.chat_id, qualified)
            .await?
        {
            return Ok(Some(Verdict::Allow {
                by: "approve the next N".into(),
            }));
        }
        Ok(Some(
            match self.policy.decide_in(&info, i32::MIN..=BUDGET) {
                Verdict::Pass => Verdict::Ask,
                verdict => verdict,
            },
        ))
    }

    /// Appends a decision to the audit log.
    async fn note(
        &self,
        scope: &Scope,
        call: &ToolCall,
        decision: AuditDecision,
        by: String,
        reason: Option<String>,
        confirmation_id: Option<&str>,
    ) {
        self.record(self.event(scope, call, decision, by, reason, confirmation_id))
            .await;
    }

    fn event(
        &self,
        scope: &Scope,
        call: &ToolCall,
        decision: AuditDecision,
        by: String,
        reason: Option<String>,
        confirmation_id: Option<&str>,
    ) -> AuditEvent {
        AuditEvent {
            at_ms: self.clock.now_ms(),
            principal: scope.principal.clone(),
            chat_id: scope.chat_id.clone(),
            tool: if call.name.is_empty() {
                String::new()
            } else {
                QualifiedName::of(&call.name).into_string()
            },
            call_id: call.id.clone(),
            args_digest: signing::digest(&call.args),
            issued_args_digest: None,
            decision,
            by,
            reason,
            confirmation_id: confirmation_id.map(str::to_owned),
        }
    }

    /// Logs every confirmation that expired unanswered as timed out (and
    /// forgets it).
    pub async fn sweep(&self) -> Result<usize, GateError> {
        let expired = self.store.take_expired(self.clock.now_ms()).await?;
        for issued in &expired {
            let scope = Scope {
                chat_id: issued.chat_id.clone(),
                principal: issued.principal.clone(),
            };
            let why = "nobody answered before the confirmation expired".to_owned();
            self.note(
                &scope,
                &issued.call,
                AuditDecision::TimedOut,
                "toolgate".into(),
                Some(why),
                Some(&issued.id),
            )
            .await;
        }
        Ok(expired.len())
    }

    /// The questions still open in a chat, for a reloaded page.
    pub async fn open(&self, scope: &Scope) -> Result<Vec<Issued>, GateError> {
        let mut open = self
            .store
            .open(&scope.principal, &scope.chat_id, self.clock.now_ms())
            .await?;
        // Hand-offs and taken client results are kept as records too, open
        // for the moment between their insert and claim: they ask nobody.
        open.retain(|issued| {
            let handoff = issued
                .id
                .strip_prefix(HANDOFF)
                .is_some_and(|n| n.starts_with('-'));
            !handoff && !issued.id.ends_with(RESULT)
        });
        Ok(open)
    }

    /// The gate's clock, in milliseconds since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Whether the user may edit the arguments of `name` before approving
    /// (`toolConfirmation.tools.<tool>.editable`).
    pub fn editable(&self, name: &str) -> bool {
        let qualified = QualifiedName::of(name);
        self.policy.editable(&ToolInfo {
            name,
            qualified: &qualified,
            tool_may_ask: true,
        })
    }

    /// Decides a confirmation through the API rather than the chat: the
    /// caller is authenticated as `principal`, so no signature or history
    /// check applies. The same decision twice is fine; a different one is a
    /// conflict. An approved call runs here, and the chat's next request
    /// reports its outcome.
    pub async fn decide_out_of_band(
        &self,
        principal: &str,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        let gate = self.clone();
        let (principal, id) = (principal.to_owned(), id.to_owned());
        self.to_the_end(async move { gate.decide_here(&principal, &id, decision).await })
            .await
    }

    async fn decide_here(
        &self,
        principal: &str,
        id: &str,
        decision: Decision,
    ) -> Result<OutOfBand, GateError> {
        let Some(issued) = self
            .store
            .get(id)
            .await?
            .filter(|i| i.principal == principal)
        else {
            let caller = Scope {
                chat_id: String::new(),
                principal: principal.to_owned(),
            };
            let nothing = ToolCall {
                id: String::new(),
                name: String::new(),
                args: Value::Null,
            };
            let why = format!("no confirmation `{id}` for this user");
            self.note(
                &caller,
                &nothing,
                AuditDecision::Refused,
                "toolgate".into(),
                Some(why),
                Some(id),
            )
            .await;
            return Ok(OutOfBand::NotFound);
        };
        let scope = Scope {
            chat_id: issued.chat_id.clone(),
            principal: principal.to_owned(),
        };
        let approve = matches!(decision, Decision::Approve { .. });
        let now = self.clock.now_ms();
        let settled = |outcome: Outcome| {
            let was_approved = !matches!(outcome, Outcome::Denied { .. });
            if was_approved == approve {
                OutOfBand::Decided(outcome)
            } else {
                OutOfBand::Conflict(format!(
                    "confirmation `{id}` was already {}",
                    if was_approved { "approved" } else { "denied" }
                ))
            }
        };
        let call = match &decision {
            Decision::Approve {
                edited: Some(edited),
                ..
            } => match self.effective_call(&issued, Some(edited)) {
                Ok(call) => Some(call),
                Err(why) => {
                    let reason = Some(why.clone());
                    self.note(
                        &scope,
                        &issued.call,
                        AuditDecision::Refused,
                        "toolgate".into(),
                        reason,
                        Some(id),
                    )
                    .await;
                    return Ok(OutOfBand::Invalid(why));
                }
            },
            _ => None,
        };
        // Decided before: the same decision again is a replay, another one a conflict.
        let earlier = match self.store.status(id).await? {
            Some(Status::Done(outcome)) if now > issued.expires_at_ms => Some(settled(outcome)),
            _ if now > issued.expires_at_ms => {
                let why = "confirmation expired".to_owned();
                self.note(
                    &scope,
                    &issued.call,
                    AuditDecision::TimedOut,
                    "toolgate".into(),
                    Some(why.clone()),
                    Some(id),
                )
                .await;
                return Ok(OutOfBand::Conflict(why));
            }
            _ => match self.claim(id, now).await? {
                Claim::Done(outcome) => Some(settled(outcome)),
                Claim::InFlight { since_ms, orphaned } => {
                    Some(match self.claimed_outcome(id, since_ms, orphaned).await? {
                        Some(outcome) => settled(outcome),
                        None => OutOfBand::Conflict(OUTCOME_UNKNOWN.into()),
                    })
                }
                Claim::Won => None,
            },
        };
        if let Some(result) = earlier {
            let (decision, by, reason) = match &result {
                OutOfBand::Conflict(why) => (AuditDecision::Refused, "toolgate", Some(why.clone())),
                _ => (AuditDecision::Replayed, "an earlier answer", None),
            };
            self.note(&scope, &issued.call, decision, by.into(), reason, Some(id))
                .await;
            return Ok(result);
        }
        let outcome = match &decision {
            Decision::Approve { .. } => {
                let call = call.unwrap_or_else(|| issued.call.clone());
                let (answered, decision, by) = self
                    .approve_won(&scope, id, call, &issued.call.args, &decision)
                    .await?;
                let original = (decision == AuditDecision::Edited).then_some(&issued.call.args);
                match answered {
                    Answered::Running { call, outcome } => {
                        let by = format!("{by} through the API");
                        self.record(edited_from(
                            self.event(&scope, &call, decision, by, None, Some(id)),
                            original,
                        ))
                        .await;
                        outcome.await
                    }
                    Answered::Recorded { call, outcome } => {
                        let reason = outcome_reason(&outcome);
                        self.record(edited_from(
                            self.event(&scope, &call, decision, by, reason, Some(id)),
                            original,
                        ))
                        .await;
                        outcome
                    }
                    Answered::Client { call } => {
                        let by = format!("{by} through the API");
                        self.record(edited_from(
                            self.event(&scope, &call, decision, by, None, Some(id)),
                            original,
                        ))
                        .await;
                        let ran_with = (decision == AuditDecision::Edited).then_some(call.args);
                        Outcome::HandedOff { ran_with }
                    }
                    Answered::Rejected(why) => Outcome::Error {
                        message: why,
                        ran_with: None,
                    },
                }
            }
            Decision::Deny { reason } => {
                let outcome = Outcome::Denied {
                    reason: reason.clone(),
                };
                self.store.finish(id, outcome.clone()).await?;
                self.note(
                    &scope,
                    &issued.call,
                    AuditDecision::Rejected,
                    "user through the API".into(),
                    reason.clone(),
                    Some(id),
                )
                .await;
                outcome
            }
        };
        Ok(OutOfBand::Decided(outcome))
    }

    /// Waits for the question `id` to be decided elsewhere (the approvals
    /// API, a socket's `confirm` frame, another tab). When its window closes
    /// first, it is denied with reason `timeout`, unless a decision wins the
    /// store's claim at that moment. The call as it ran and its outcome.
    pub async fn hold(&self, scope: &Scope, id: &str) -> Result<(ToolCall, Outcome), GateError> {
        let issued = self
            .store
            .get(id)
            .await?
            .filter(|i| i.chat_id == scope.chat_id && i.principal == scope.principal);
        let Some(issued) = issued else {
            let outcome = Outcome::Error {
                message: format!("confirmation `{id}` is gone"),
                ran_with: None,
            };
            return Ok((
                ToolCall {
                    id: id.to_owned(),
                    name: String::new(),
                    args: Value::Null,
                },
                outcome,
            ));
        };
        let window =
            Duration::from_millis(issued.expires_at_ms.saturating_sub(self.clock.now_ms()));
        if let Some(outcome) = self.store.wait_outcome(id, window).await? {
            return Ok((as_ran(issued.call, &outcome), outcome));
        }
        let (gate, scope) = (self.clone(), scope.clone());
        let call = issued.call.clone();
        let outcome = self
            .to_the_end(async move { gate.time_out(&scope, issued).await })
            .await?;
        Ok((as_ran(call, &outcome), outcome))
    }

    /// A held question nobody decided in its window: denied with reason
    /// `timeout`, unless a decision wins the claim at that moment.
    async fn time_out(&self, scope: &Scope, issued: Issued) -> Result<Outcome, GateError> {
        let id = issued.id.as_str();
        let claim = match self.claim(id, self.clock.now_ms()).await {
            // Forgotten as expired meanwhile: it timed out all the same.
            Err(StoreError::NotClaimed(_)) => Claim::Done(Outcome::Denied {
                reason: Some(TIMEOUT.to_owned()),
            }),
            claim => claim?,
        };
        let outcome = match claim {
            Claim::Won => {
                let outcome = Outcome::Denied {
                    reason: Some(TIMEOUT.to_owned()),
                };
                self.store.finish(id, outcome.clone()).await?;
                let why = "nobody answered before the confirmation timed out".to_owned();
                self.note(
                    scope,
                    &issued.call,
                    AuditDecision::TimedOut,
                    "toolgate".into(),
                    Some(why),
                    Some(id),
                )
                .await;
                outcome
            }
            Claim::Done(outcome) => outcome,
            Claim::InFlight { since_ms, orphaned } => {
                match self.claimed_outcome(id, since_ms, orphaned).await? {
                    Some(outcome) => outcome,
                    None => Outcome::Error {
                        message: OUTCOME_UNKNOWN.into(),
                        ran_with: None,
                    },
                }
            }
        };
        Ok(outcome)
    }

    /// Appends to the audit log. A failing log is reported, but does not
    /// undo or block the decision.
    async fn record(&self, event: AuditEvent) {
        if let Err(e) = self.store.audit(event).await {
            tracing::error!("writing the audit log failed: {e}");
        }
    }

    /// `principal`'s audit log.
    pub async fn audit_log(
        &self,
        principal: &str,
        chat_id: Option<&str>,
        since_ms: u64,
        limit: usize,
    ) -> Result<Vec<AuditEvent>, GateError> {
        Ok(self
            .store
            .audit_log(principal, chat_id, since_ms, limit)
            .await?)
    }

    /// Records how far an approval reaches beyond its own call. A store that
    /// fails here is reported but does not undo the approval: its call is
    /// already running, and its audit event is still to be written.
    async fn extend(
        &self,
        scope: &Scope,
        tool: &str,
        remember: Option<Remember>,
        approve_next: Option<u32>,
    ) {
        let qualified = QualifiedName::of(tool);
        if let Some(remember) = remember {
            let approval = Remembered {
                id: self.ids.next("remembered"),
                principal: scope.principal.clone(),
                chat_id: (remember == Remember::Chat).then(|| scope.chat_id.clone()),
                tool: qualified.to_string(),
                created_at_ms: self.clock.now_ms(),
            };
            if let Err(e) = self.remembered.remember(approval).await {
                tracing::error!(tool = %qualified, "remembering an approval failed: {e}");
            }
        }
        if let Some(n) = approve_next.filter(|n| *n > 0)
            && let Err(e) = self
                .remembered
                .grant_budget(&scope.principal, &scope.chat_id, &qualified, n)
                .await
        {
            tracing::error!(tool = %qualified, "granting the next {n} calls failed: {e}");
        }
    }

    /// Settles a confirmation nobody answered yet when a remembered approval
    /// now covers it: claims it and starts the call, as an approval would.
    pub async fn settle(
        &self,
        scope: &Scope,
        confirmation_id: &str,
    ) -> Result<Option<Answered>, GateError> {
        let (gate, scope) = (self.clone(), scope.clone());
        let id = confirmation_id.to_owned();
        self.to_the_end(async move { gate.settle_here(&scope, &id).await })
            .await
    }

    async fn settle_here(
        &self,
        scope: &Scope,
        confirmation_id: &str,
    ) -> Result<Option<Answered>, GateError> {
        let Some(issued) = self.store.get(confirmation_id).await? else {
            return Ok(None);
        };
        let ours = issued.chat_id == scope.chat_id && issued.principal == scope.principal;
        let now = self.clock.now_ms();
        if !ours || now > issued.expires_at_ms {
            return Ok(None);
        }
        // Decided meanwhile (through the API, or by another tab): report it.
        if let Some(Status::Done(outcome)) = self.store.status(confirmation_id).await? {
            return Ok(Some(Answered::Recorded {
                call: as_ran(issued.call, &outcome),
                outcome,
            }));
        }
        let qualified = QualifiedName::of(&issued.call.name);
        if self
            .remembered
            .remembered(&scope.principal, &scope.chat_id, &qualified)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        // Only what the chain would settle by a remembered approval: a rule
        // ranked above it that denies or asks still holds.
        let Some(facts) = self.facts(&issued.call) else {
            return Ok(None);
        };
        let above = self
            .policy
            .decide_in(&facts.info(scope, &issued.call), REMEMBERED + 1..=i32::MAX);
        if matches!(above, Verdict::Deny { .. } | Verdict::Ask) {
            return Ok(None);
        }
        match self.claim(&issued.id, now).await? {
            Claim::Won => {
                // Started (or handed out) first; the audit event follows.
                let answered = if self.runs_on_client(&issued.call.name) {
                    self.hand_off(&issued.id, issued.call.clone(), None).await?
                } else {
                    let outcome = self.start_confirmed(
                        issued.id.clone(),
                        issued.call.clone(),
                        None,
                        &scope.chat_id,
                        None,
                    );
                    Answered::Running {
                        call: issued.call.clone(),
                        outcome,
                    }
                };
                let by = "remembered approval".to_owned();
                self.note(
                    scope,
                    &issued.call,
                    AuditDecision::Approved,
                    by,
                    None,
                    Some(&issued.id),
                )
                .await;
                Ok(Some(answered))
            }
            Claim::Done(outcome) => Ok(Some(Answered::Recorded {
                call: issued.call,
                outcome,
            })),
            Claim::InFlight { .. } => Ok(None),
        }
    }

    /// What the policy says about this call now.
    fn verdict(&self, scope: &Scope, call: &ToolCall) -> Option<Verdict> {
        let facts = self.facts(call)?;
        Some(self.policy.decide(&facts.info(scope, call)))
    }

    /// What the policy needs to know about a call's tool; `None` for an unknown tool.
    fn facts(&self, call: &ToolCall) -> Option<Facts> {
        let tools = self.tools.current();
        let tool = tools.get(&call.name)?;
        Some(Facts {
            qualified: QualifiedName::of(&call.name).into_string(),
            tool_may_ask: tool.may_need_confirmation(),
            tool_asks: tool.needs_confirmation(&call.args),
        })
    }

    /// Decides about a call the model made: run it, or issue a confirmation
    /// to be asked in `protocol`.
    pub async fn check_new(
        &self,
        scope: &Scope,
        call: ToolCall,
        protocol: ConfirmationProtocol,
    ) -> Result<NewCall, GateError> {
        let tools = self.tools.current();
        let Some(tool) = tools.get(&call.name) else {
            return Ok(NewCall::Refused(format!("unknown tool `{}`", call.name)));
        };
        match self.decide(scope, &call).await? {
            Some(Verdict::Allow { by }) => {
                if tool.runs_on_client() {
                    let (gate, scope, handed) = (self.clone(), scope.clone(), call.clone());
                    let handoff = self
                        .to_the_end(async move {
                            let handoff = gate.record_hand_off(&scope, &handed, protocol).await?;
                            let id = Some(handoff.as_str());
                            gate.note(&scope, &handed, AuditDecision::Allowed, by, None, id)
                                .await;
                            Ok(handoff)
                        })
                        .await?;
                    return Ok(NewCall::Client { call, handoff });
                }
                self.note(scope, &call, AuditDecision::Allowed, by, None, None)
                    .await;
                return Ok(NewCall::Run(Permit { call }));
            }
            Some(Verdict::Deny { reason }) => {
                self.note(
                    scope,
                    &call,
                    AuditDecision::Denied,
                    "policy".into(),
                    Some(reason.clone()),
                    None,
                )
                .await;
                return Ok(NewCall::Refused(format!("denied by policy: {reason}")));
            }
            Some(Verdict::Ask | Verdict::Pass) | None => {}
        }
        if !self.may_ask(&call.name) {
            // Its input already streamed as a call that would not ask; fail closed.
            return Ok(NewCall::Refused(format!(
                "tool `{}` asks for confirmation its policy said it never needs",
                call.name
            )));
        }
        let qualified = QualifiedName::of(&call.name);
        let tool_info = ToolInfo {
            name: &call.name,
            qualified: &qualified,
            tool_may_ask: true,
        };
        let hint = self
            .policy
            .hint(&tool_info, &call.args)
            .unwrap_or_else(|| tool.confirmation_hint(&call.args));
        let now = self.clock.now_ms();
        let issued = Issued {
            id: self.ids.next(match protocol {
                ConfirmationProtocol::Adk => "adk",
                ConfirmationProtocol::AiSdk => "approval",
            }),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint,
            protocol,
            call,
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.expiry)),
        };
        self.store.insert(issued.clone()).await?;
        self.note(
            scope,
            &issued.call,
            AuditDecision::Asked,
            "policy".into(),
            None,
            Some(&issued.id),
        )
        .await;
        Ok(NewCall::Ask(issued))
    }

    /// Checks a user's answer against what this server issued, and records
    /// the decision in the audit log.
    pub async fn check_answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<Answered, GateError> {
        let (gate, scope, answer) = (self.clone(), scope.clone(), answer.clone());
        self.to_the_end(async move { gate.answer(&scope, &answer).await })
            .await
    }

    async fn answer(&self, scope: &Scope, answer: &Answer) -> Result<Answered, GateError> {
        let (answered, decision, by) = self.judge_answer(scope, answer).await?;
        let (call, reason) = match &answered {
            Answered::Rejected(why) => (answer.original.clone(), Some(why.clone())),
            Answered::Recorded { call, outcome } => (Some(call.clone()), outcome_reason(outcome)),
            Answered::Running { call, .. } | Answered::Client { call } => {
                (Some(call.clone()), None)
            }
        };
        let unknown = ToolCall {
            id: String::new(),
            name: String::new(),
            args: Value::Null,
        };
        let call = call.unwrap_or(unknown);
        let issued_args = (decision == AuditDecision::Edited)
            .then(|| answer.original.as_ref().map(|o| &o.args))
            .flatten();
        let event = self.event(
            scope,
            &call,
            decision,
            by,
            reason,
            Some(&answer.confirmation_id),
        );
        self.record(edited_from(event, issued_args)).await;
        Ok(answered)
    }

    async fn judge_answer(
        &self,
        scope: &Scope,
        answer: &Answer,
    ) -> Result<(Answered, AuditDecision, String), GateError> {
        let reject = |decision: AuditDecision, why: String| {
            tracing::warn!(confirmation = %answer.confirmation_id, chat = %scope.chat_id, "confirmation rejected: {why}");
            Ok((Answered::Rejected(why), decision, "toolgate".to_owned()))
        };
        let recorded = |call: ToolCall, outcome: Outcome| {
            Ok((
                Answered::Recorded {
                    call: as_ran(call, &outcome),
                    outcome,
                },
                AuditDecision::Replayed,
                "an earlier answer".to_owned(),
            ))
        };
        if let Some(signer) = &self.signer {
            let verified = match (&answer.seal, &answer.original) {
                (Some(seal), Some(call)) => signer.verify(
                    seal,
                    &signing::Subject {
                        confirmation_id: &answer.confirmation_id,
                        chat_id: &scope.chat_id,
                        principal: &scope.principal,
                        call,
                        expires_at_ms: seal.expires_at_ms,
                    },
                ),
                _ => false,
            };
            if !verified {
                return reject(
                    AuditDecision::Refused,
                    "confirmation signature is missing or does not match".into(),
                );
            }
        }
        let Some(issued) = self.store.get(&answer.confirmation_id).await? else {
            return reject(
                AuditDecision::Refused,
                format!(
                    "confirmation `{}` was not issued by this server",
                    answer.confirmation_id
                ),
            );
        };
        if issued.chat_id != scope.chat_id {
            return reject(
                AuditDecision::Refused,
                "confirmation belongs to another chat".into(),
            );
        }
        if issued.principal != scope.principal {
            return reject(
                AuditDecision::Refused,
                "confirmation belongs to another user".into(),
            );
        }
        if answer.protocol != issued.protocol {
            return reject(
                AuditDecision::Refused,
                "confirmation answered in another form than it was asked".into(),
            );
        }
        if !answer
            .original
            .as_ref()
            .is_some_and(|o| same_call(o, &issued.call))
        {
            return reject(
                AuditDecision::Refused,
                match answer.protocol {
                    ConfirmationProtocol::Adk => {
                        "originalFunctionCall differs from the call this server issued"
                    }
                    ConfirmationProtocol::AiSdk => {
                        "the approved call differs from the call this server issued"
                    }
                }
                .into(),
            );
        }
        let now = self.clock.now_ms();
        if now > issued.expires_at_ms {
            // A decided call keeps its outcome; an undecided one can no longer be.
            return match self.store.status(&issued.id).await? {
                Some(Status::Done(outcome)) => recorded(issued.call, outcome),
                Some(Status::Claimed { .. }) => {
                    reject(AuditDecision::Refused, OUTCOME_UNKNOWN.into())
                }
                Some(Status::Pending) | None => {
                    reject(AuditDecision::TimedOut, "confirmation expired".into())
                }
            };
        }
        // An edit is checked before the claim: a refused edit leaves the question open.
        let edited = match &answer.decision {
            Decision::Approve { edited, .. } => edited.as_ref(),
            Decision::Deny { .. } => None,
        };
        let call = match self.effective_call(&issued, edited) {
            Ok(call) => call,
            Err(why) => return reject(AuditDecision::Refused, why),
        };
        match self.claim(&issued.id, now).await? {
            Claim::Done(outcome) => recorded(issued.call, outcome),
            Claim::InFlight { since_ms, orphaned } => {
                match self.claimed_outcome(&issued.id, since_ms, orphaned).await? {
                    Some(outcome) => recorded(issued.call, outcome),
                    None => reject(AuditDecision::Refused, OUTCOME_UNKNOWN.into()),
                }
            }
            Claim::Won => match &answer.decision {
                Decision::Approve { .. } => {
                    self.approve_won(scope, &issued.id, call, &issued.call.args, &answer.decision)
                        .await
                }
                Decision::Deny { reason } => {
                    let outcome = Outcome::Denied {
                        reason: reason.clone(),
                    };
                    self.store.finish(&issued.id, outcome.clone()).await?;
                    Ok((
                        Answered::Recorded {
                            call: issued.call,
                            outcome,
                        },
                        AuditDecision::Rejected,
                        "user".to_owned(),
                    ))
                }
            },
        }
    }

    /// The call an approval runs: the issued one, or the user's edit of its
    /// arguments where `tools.<tool>.editable` allows it and the edit fits
    /// the tool's JSON schema.
    fn effective_call(&self, issued: &Issued, edited: Option<&Value>) -> Result<ToolCall, String> {
        let Some(args) = edited.filter(|args| **args != issued.call.args) else {
            return Ok(issued.call.clone());
        };
        let name = &issued.call.name;
        if args.to_string().len() > MAX_ARGS_BYTES {
            return Err(format!("edited arguments exceed {} bytes", MAX_ARGS_BYTES));
        }
        let qualified = QualifiedName::of(name);
        let tool = ToolInfo {
            name,
            qualified: &qualified,
            tool_may_ask: true,
        };
        if !self.policy.editable(&tool) {
            return Err(format!("the arguments of {name} may not be edited"));
        }
        let schema = self
            .tools
            .current()
            .get(name)
            .map(|t| t.parameters())
            .unwrap_or(Value::Null);
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| format!("{name} has no usable schema: {e}"))?;
        if let Some(error) = validator.iter_errors(args).next() {
            return Err(format!("edited arguments are not valid: {error}"));
        }
        Ok(ToolCall {
            id: issued.call.id.clone(),
            name: name.clone(),
            args: args.clone(),
        })
    }

    /// An approval that won the claim: runs `call` (the issued one or the
    /// user's edit), unless a rule now denies it.
    async fn approve_won(
        &self,
        scope: &Scope,
        id: &str,
        call: ToolCall,
        issued_args: &Value,
        approval: &Decision,
    ) -> Result<(Answered, AuditDecision, String), GateError> {
        let (payload, remember, approve_next) = match approval {
            Decision::Approve {
                payload,
                remember,
                approve_next,
                ..
            } => (payload.clone(), *remember, *approve_next),
            Decision::Deny { .. } => (None, None, None),
        };
        if let Some(Verdict::Deny { reason }) = self.verdict(scope, &call) {
            // A rule added since the question was asked, or one the edit hits, still wins.
            let outcome = Outcome::Error {
                message: format!("denied by policy: {reason}"),
                ran_with: None,
            };
            self.store.finish(id, outcome.clone()).await?;
            return Ok((
                Answered::Recorded { call, outcome },
                AuditDecision::Denied,
                "policy".to_owned(),
            ));
        }
        let edited = *issued_args != call.args;
        let ran_with = edited.then(|| call.args.clone());
        let decision = if edited {
            AuditDecision::Edited
        } else {
            AuditDecision::Approved
        };
        if self.runs_on_client(&call.name) {
            let name = call.name.clone();
            let answered = self.hand_off(id, call, ran_with).await?;
            self.extend(scope, &name, remember, approve_next).await;
            return Ok((answered, decision, approver(remember, approve_next)));
        }
        // Started before this returns: no await point lies between winning
        // the claim and the call running.
        let outcome = self.start_confirmed(
            id.to_owned(),
            call.clone(),
            payload,
            &scope.chat_id,
            ran_with,
        );
        self.extend(scope, &call.name, remember, approve_next).await;
        Ok((
            Answered::Running { call, outcome },
            decision,
            approver(remember, approve_next),
        ))
    }

    /// Whether a call of `name` must never reach the client's `onToolCall`
    /// unless handed out: a client-side tool, or one this server does not know.
    pub fn kept_from_client(&self, name: &str) -> bool {
        self.tools
            .current()
            .get(name)
            .is_none_or(|t| t.runs_on_client())
    }

    /// Whether `name` is a client-side tool.
    pub fn runs_on_client(&self, name: &str) -> bool {
        self.tools
            .current()
            .get(name)
            .is_some_and(|t| t.runs_on_client())
    }

    /// Records a claimed call of a client-side tool as handed out. Only
    /// called on a gate task, so a client that goes away meanwhile leaves no
    /// claim unfinished.
    async fn hand_off(
        &self,
        id: &str,
        call: ToolCall,
        ran_with: Option<Value>,
    ) -> Result<Answered, GateError> {
        self.store
            .finish(id, Outcome::HandedOff { ran_with })
            .await?;
        Ok(Answered::Client { call })
    }

    /// Records an allowed call of a client-side tool as handed out (a
    /// record the client's result must name), and returns the record's id.
    async fn record_hand_off(
        &self,
        scope: &Scope,
        call: &ToolCall,
        protocol: ConfirmationProtocol,
    ) -> Result<String, GateError> {
        let now = self.clock.now_ms();
        let issued = Issued {
            id: self.ids.next(HANDOFF),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint: format!("{} was handed to the client", call.name),
            protocol,
            call: call.clone(),
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.expiry)),
        };
        let id = issued.id.clone();
        self.store.insert(issued).await?;
        if self.claim(&id, now).await? != Claim::Won {
            return Err(GateError::Store(StoreError::NotClaimed(id)));
        }
        self.hand_off(&id, call.clone(), None).await?;
        Ok(id)
    }

    /// Judges what the client says a client-side tool returned. The history
    /// is untrusted: an output counts only for a call this server handed out
    /// (the record named in the part's metadata, for this chat, principal and
    /// call), that no rule denies now, and that fits in [`MAX_OUTPUT_BYTES`].
    /// A handed-out call without a result is the error [`NO_RESULT`].
    pub async fn check_client_output(
        &self,
        scope: &Scope,
        part: &ToolPart,
    ) -> Result<ClientOutput, GateError> {
        if part.tool_name == CONFIRMATION_TOOL || !self.runs_on_client(&part.tool_name) {
            return Ok(ClientOutput::NotClient);
        }
        let size = match &part.state {
            ToolState::OutputAvailable {
                output,
                preliminary: false,
            } => output.to_string().len(),
            // An error cannot make anything happen: only its size matters.
            ToolState::OutputError { error_text } if error_text.len() <= MAX_OUTPUT_BYTES => {
                return Ok(ClientOutput::Accepted);
            }
            ToolState::OutputError { error_text } => error_text.len(),
            ToolState::InputStreaming | ToolState::InputAvailable => {
                return Ok(ClientOutput::Rejected(NO_RESULT.into()));
            }
            // Questions and denials are the answers' business.
            ToolState::OutputAvailable { .. }
            | ToolState::ApprovalRequested { .. }
            | ToolState::ApprovalResponded(_)
            | ToolState::OutputDenied(_) => return Ok(ClientOutput::NotClient),
        };
        let call = ToolCall {
            id: part.tool_call_id.clone(),
            name: part.tool_name.clone(),
            args: part.input.clone(),
        };
        let why = match self.judge_client_output(scope, &call, part, size).await? {
            None => return Ok(ClientOutput::Accepted),
            Some(why) => why,
        };
        tracing::warn!(call = %call.id, chat = %scope.chat_id, "client output refused: {why}");
        let id = handoff_id(part.call_provider_metadata.as_ref());
        let refused = AuditDecision::Refused;
        self.note(
            scope,
            &call,
            refused,
            "toolgate".into(),
            Some(why.clone()),
            id,
        )
        .await;
        Ok(ClientOutput::Rejected(why))
    }

    /// Why a client output is not taken, if it is not.
    async fn judge_client_output(
        &self,
        scope: &Scope,
        call: &ToolCall,
        part: &ToolPart,
        size: usize,
    ) -> Result<Option<String>, GateError> {
        if size > MAX_OUTPUT_BYTES {
            return Ok(Some(format!(
                "the client's result is larger than {MAX_OUTPUT_BYTES} bytes"
            )));
        }
        let not_handed = || {
            Some(format!(
                "no call `{}` of {} was handed to the client by this server",
                call.id, call.name
            ))
        };
        let Some(id) = handoff_id(part.call_provider_metadata.as_ref()) else {
            return Ok(not_handed());
        };
        let output = match &part.state {
            ToolState::OutputAvailable { output, .. } => Some(output),
            _ => None,
        };
        // A result taken before stands (its hand-off record may be gone),
        // as long as it is the same result.
        if let Some(output) = output
            && let Some(taken) = self.taken_result(scope, id).await?
        {
            if !same_call(call, &taken.call) {
                return Ok(Some(
                    "the call differs from the one this server handed to the client".into(),
                ));
            }
            if taken.digest != signing::digest(output) {
                return Ok(Some(
                    "the result differs from the one the client gave before".into(),
                ));
            }
            if let Some(Verdict::Deny { reason }) = self.verdict(scope, call) {
                return Ok(Some(format!("denied by policy: {reason}")));
            }
            return Ok(None);
        }
        let Some(issued) = self
            .store
            .get(id)
            .await?
            .filter(|i| i.chat_id == scope.chat_id && i.principal == scope.principal)
        else {
            return Ok(not_handed());
        };
        let Some(Status::Done(outcome @ Outcome::HandedOff { .. })) = self.store.status(id).await?
        else {
            return Ok(not_handed());
        };
        if !same_call(call, &as_ran(issued.call, &outcome)) {
            return Ok(Some(
                "the call differs from the one this server handed to the client".into(),
            ));
        }
        if let Some(Verdict::Deny { reason }) = self.verdict(scope, call) {
            return Ok(Some(format!("denied by policy: {reason}")));
        }
        if let Some(output) = output {
            return self.take_result(scope, id, call, output).await;
        }
        Ok(None)
    }

    /// The result taken before for hand-off `id` in this chat, if any.
    async fn taken_result(&self, scope: &Scope, id: &str) -> Result<Option<Taken>, GateError> {
        let key = result_key(id);
        let Some(issued) = self
            .store
            .get(&key)
            .await?
            .filter(|i| i.chat_id == scope.chat_id && i.principal == scope.principal)
        else {
            return Ok(None);
        };
        // Being recorded by a racing request: judged by the hand-off record.
        let Some(Status::Done(Outcome::Output { output, .. })) = self.store.status(&key).await?
        else {
            return Ok(None);
        };
        let digest = output
            .get("digest")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(Some(Taken {
            call: issued.call,
            digest,
        }))
    }

    /// Records the digest of the first result taken for hand-off `id`; a
    /// racing request that recorded another result first wins, and this one
    /// is refused. A store that cannot record it costs nothing now: the
    /// result was judged by its hand-off record.
    async fn take_result(
        &self,
        scope: &Scope,
        id: &str,
        call: &ToolCall,
        output: &Value,
    ) -> Result<Option<String>, GateError> {
        let digest = signing::digest(output);
        let now = self.clock.now_ms();
        let key = result_key(id);
        let record = Issued {
            id: key.clone(),
            chat_id: scope.chat_id.clone(),
            principal: scope.principal.clone(),
            hint: format!("{}'s result from the client was taken", call.name),
            protocol: ConfirmationProtocol::Adk,
            call: call.clone(),
            issued_at_ms: now,
            expires_at_ms: now.saturating_add(millis(self.result_retention)),
        };
        let (gate, taken) = (self.clone(), digest.clone());
        let recorded = self.to_the_end(async move {
            let key = record.id.clone();
            gate.store.insert(record).await?;
            if gate.claim(&key, now).await? != Claim::Won {
                return Err(StoreError::NotClaimed(key).into());
            }
            let outcome = Outcome::Output {
                output: json!({"digest": taken}),
                ran_with: None,
            };
            Ok(gate.store.finish(&key, outcome).await?)
        });
        match recorded.await {
            Ok(()) => Ok(None),
            Err(GateError::Store(StoreError::Duplicate(_))) => {
                match self.taken_result(scope, id).await? {
                    Some(taken) if taken.digest != digest => Ok(Some(
                        "the result differs from the one the client gave before".into(),
                    )),
                    _ => Ok(None),
                }
            }
            Err(e) => {
                tracing::warn!(handoff = %id, "recording a client result failed: {e}");
                Ok(None)
            }
        }
    }

    /// Runs a confirmed, claimed call to the end in its own task and records
    /// its outcome, even if the client goes away, so that a replay reports it
    /// instead of running the call again.
    fn start_confirmed(
        &self,
        id: String,
        call: ToolCall,
        payload: Option<Value>,
        chat_id: &str,
        ran_with: Option<Value>,
    ) -> Running {
        let ctx = self.context(&call, payload, chat_id);
        let execute = execute(self.tools.current(), call, ctx, self.tool_timeout);
        let store = self.store.clone();
        let task = self.tasks.spawn(async move {
            let mut outcome = execute.await;
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

    fn context(&self, call: &ToolCall, payload: Option<Value>, chat_id: &str) -> ToolContext {
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
        let ctx = self.context(&permit.call, None, chat_id);
        let _cancel_on_drop = ctx.cancel.clone().drop_guard();
        execute(self.tools.current(), permit.call, ctx, self.tool_timeout).await
    }
}

async fn execute(
    registry: Arc<Registry>,
    call: ToolCall,
    ctx: ToolContext,
    timeout: Duration,
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
    match result {
        Ok(output) => Outcome::Output {
            output,
            ran_with: None,
        },
        Err(e) => Outcome::Error {
            message: e.to_string(),
            ran_with: None,
        },
    }
}

/// An edit's event also keeps the digest of the arguments as issued.
fn edited_from(mut event: AuditEvent, issued_args: Option<&Value>) -> AuditEvent {
    event.issued_args_digest = issued_args.map(signing::digest);
    event
}

/// The call as it ran: with the user's edit, if the ledger recorded one.
fn as_ran(mut call: ToolCall, outcome: &Outcome) -> ToolCall {
    if let Outcome::Output {
        ran_with: Some(args),
        ..
    }
    | Outcome::Error {
        ran_with: Some(args),
        ..
    }
    | Outcome::HandedOff {
        ran_with: Some(args),
    } = outcome
    {
        call.args = args.clone();
    }
    call
}

/// The hand-off record a client's result names (`toolgate.handoff` in the
/// part's `callProviderMetadata`).
pub fn handoff_id(metadata: Option<&Value>) -> Option<&str> {
    metadata?.get("toolgate")?.get("handoff")?.as_str()
}

/// `metadata` with `toolgate.handoff` set to `id`, the rest kept (a seal,
/// a provider's own).
pub fn with_handoff(metadata: Option<Value>, id: &str) -> Value {
    let mut metadata = match metadata {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let toolgate = metadata
        .entry("toolgate")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !toolgate.is_object() {
        *toolgate = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(toolgate) = toolgate {
        toolgate.insert("handoff".into(), Value::String(id.to_owned()));
    }
    Value::Object(metadata)
}

/// Why a recorded outcome is what it is, for the audit log.
fn outcome_reason(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Output { .. } => None,
        Outcome::Error { message, .. } => Some(message.clone()),
        Outcome::Denied { reason } => reason.clone(),
        Outcome::HandedOff { .. } => None,
    }
}

/// Who approved, and how far the approval reaches.
fn approver(remember: Option<Remember>, approve_next: Option<u32>) -> String {
    match (remember, approve_next) {
        (Some(Remember::Chat), _) => "user, remembered for this chat".into(),
        (Some(Remember::Everywhere), _) => "user, remembered for every chat".into(),
        (None, Some(n)) if n > 0 => format!("user, and the next {n} calls"),
        _ => "user".into(),
    }
}

/// A client result taken before: the call as handed out, and the digest of
/// the result.
struct Taken {
    call: ToolCall,
    digest: String,
}

/// The store key of the result taken for hand-off `id`.
fn result_key(id: &str) -> String {
    format!("{id}{RESULT}")
}

/// The suffix of a taken result's key.
const RESULT: &str = "/result";

/// The id prefix of a hand-off record.
const HANDOFF: &str = "handoff";

/// How long a taken client result is remembered unless the app says
/// otherwise: the audit log's default retention.
const DEFAULT_RESULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 60 * 60);

/// Whether the client's call is the issued one. JSON numbers compare by
/// value: a JavaScript client sends back `50.0` as `50`. Integers compare
/// exactly, and a float equals an integer only where both are exact.
fn same_call(claimed: &ToolCall, issued: &ToolCall) -> bool {
    claimed.id == issued.id
        && claimed.name == issued.name
        && crate::json::same(&claimed.args, &issued.args)
}

/// The input of an `adk_request_confirmation` call, as ADK shapes it.
pub fn confirmation_input(issued: &Issued) -> Value {
    json!({
        "originalFunctionCall": {"id": issued.call.id, "name": issued.call.name, "args": issued.call.args},
        "toolConfirmation": {"hint": issued.hint, "confirmed": false},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_internals_stay_in_the_log() {
        let secret = "no such table: ledger at /var/lib/toolgate/db.sqlite3";
        let cases = [
            (
                GateError::Store(StoreError::Backend(secret.into())),
                "the confirmation store is unavailable; try again",
            ),
            (GateError::Task(secret.into()), "a confirmation task failed"),
            (
                GateError::Store(StoreError::Full(64)),
                "too many open confirmations (64); try again later",
            ),
        ];
        for (error, public) in cases {
            assert_eq!(error.to_string(), public);
            assert!(
                error.detail().contains(secret)
                    || matches!(error, GateError::Store(StoreError::Full(_)))
            );
        }
    }

    #[test]
    fn numbers_compare_by_value_exactly() {
        let cases = [
            (
                json!({"amount": 50.0, "to": "a"}),
                json!({"to": "a", "amount": 50}),
                true,
            ),
            (json!([1.5, {"x": -0.0}]), json!([1.5, {"x": 0}]), true),
            (json!({"amount": 50.5}), json!({"amount": 50}), false),
            (
                json!({"amount": 9_007_199_254_740_993_u64}),
                json!({"amount": 9_007_199_254_740_992_u64}),
                false,
            ),
            (
                json!({"amount": 9_007_199_254_740_993_u64}),
                json!({"amount": 9_007_199_254_740_992.0}),
                false,
            ),
            (json!({"amount": 1}), json!({"amount": "1"}), false),
            (json!({"a": 1}), json!({"a": 1, "b": null}), false),
            (json!([1, 2]), json!([2, 1]), false),
        ];
        for (a, b, same) in cases {
            assert_eq!(crate::json::same(&a, &b), same, "{a} vs {b}");
            assert_eq!(crate::json::same(&b, &a), same, "{b} vs {a}");
        }
    }
}
