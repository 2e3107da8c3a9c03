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
//!
//! One file per question: `facts.rs` (what is known about a call's tool),
//! `decide.rs` (a new call), `check.rs` (the rules an answer passes, pure),
//! `admit.rs` (the pipeline's admission step, pure), `pipeline/` (the one
//! place a question is claimed, a decision acted on, recorded and audited),
//! `answered.rs` (an answer in the chat), `out_of_band.rs` (a decision
//! through the API, a held question), `links.rs` (a decision through a
//! signed link), `respond.rs` (a person's answer in the tool's place),
//! `moved_on.rs` (a question the chat moved on from), `upstream.rs` (an
//! upstream agent's question), `handoff.rs` and `client_output.rs`
//! (client-side tools), `claims.rs` (the heartbeat, and a claim someone
//! else holds), `execute.rs` (the one place a tool runs), `records.rs`
//! (what is still open, the expiry sweep), `inbox.rs` (the open questions a
//! principal may decide, and their changes), `audit.rs` (an audit event and
//! its builder), `remembered.rs` (grants), `narrowed.rs` (grants narrowed
//! to pinned arguments, a window, a number of uses), `announce.rs` (a question told
//! to the notification targets), `verdicts.rs` and `error.rs` (what the
//! gate answers, and what fails).
//! This file holds the gate itself, its construction and the types they
//! share.

mod admit;
mod announce;
mod answered;
mod audit;
mod check;
mod claims;
mod client_output;
mod decide;
mod error;
mod execute;
mod facts;
mod handoff;
mod inbox;
mod links;
mod moved_on;
mod narrowed;
mod out_of_band;
mod outside;
mod pipeline;
mod records;
mod remembered;
mod respond;
mod shown;
pub mod signing;
mod upstream;
mod verdicts;

pub use decide::confirmation_input;
pub use error::GateError;
pub use handoff::{handoff_id, with_handoff};
pub use inbox::InboxFilter;
pub use links::{LinkQuestion, Standing};
pub use narrowed::{GrantView, Revoked};
pub use outside::Question as OutsideQuestion;
pub use shown::shown_outcome;
pub use upstream::Question;
pub use verdicts::{
    Answered, ClientOutput, Inventory, NewCall, OutOfBand, Permit, Refused, Running, ToolView,
};

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub use signing::Signer;

pub use crate::protocol::adk::original_call;
pub use crate::protocol::answer::{Answer, Decision, Seal};
pub use crate::protocol::message::{AnswerKeys, Remember};

use crate::ids::{Clock, Ids};
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::policy::Policy;
use crate::store::{Calls, Issued, Limiter, Store};
use crate::tools::Toolbox;

/// What a replay is told when the claimed call never reported an outcome
/// and never will: the process that claimed it is gone.
pub const OUTCOME_UNKNOWN: &str = "outcome unknown: the approved call was claimed but its outcome was never recorded (the server may have stopped while it ran); it will not run again";

/// Why a question was closed by a new message, for the audit log and a late answer.
pub const CANCELLED: &str =
    "the user wrote a new message before anyone decided (onNewMessage: cancel)";

/// Why a question ended as expired, for the audit log and a late answer.
pub const EXPIRED: &str = "nobody approved or denied it before it expired";

/// How long past the tool timeout a live claim may go without an outcome.
const CLAIM_GRACE_MS: u64 = 5_000;

pub(super) fn millis(d: Duration) -> u64 {
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

impl Scope {
    /// This principal's calls of `tool` (qualified) in this chat.
    pub fn calls<'a>(&'a self, tool: &'a str) -> Calls<'a> {
        Calls {
            principal: &self.principal,
            chat_id: &self.chat_id,
            tool,
        }
    }
}

#[cfg(test)]
impl Scope {
    /// Alice in `chat`: the scope the unit tests ask in.
    pub(crate) fn alice(chat: &str) -> Self {
        Self {
            chat_id: chat.into(),
            principal: "alice".into(),
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
    /// Cancelled by [`Gate::release_held`] when the server starts to stop:
    /// held questions are no longer waited for (they stay open).
    releasing: CancellationToken,
    /// Every call is an upstream agent's, which it runs once approved.
    upstream: bool,
    /// Each principal's roles (`auth`), for `approvers: [role:NAME]`.
    roles: Arc<HashMap<String, Vec<String>>>,
    /// Tells the configured targets about each question asked.
    notifier: Option<Notifier>,
    /// Bumped when a question is asked or taken: the inbox's readers look again.
    inbox: Arc<watch::Sender<u64>>,
    /// Whether the changes of other instances sharing the store are followed.
    listening: Arc<AtomicBool>,
    /// Where decisions and tool calls are counted.
    metrics: Metrics,
    /// `limits`: each call is counted when it is decided.
    limiter: Limiter,
    /// Tool calls' arguments and results go on their spans (`telemetry.recordContent`).
    record_content: bool,
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
            releasing: CancellationToken::new(),
            upstream: false,
            roles: Arc::default(),
            notifier: None,
            inbox: Arc::new(watch::Sender::new(0)),
            listening: Arc::default(),
            metrics: Metrics::default(),
            limiter: Limiter::default(),
            record_content: false,
        }
    }

    /// Counts every call the model makes against `limiter` (`limits`) as
    /// it is decided; one over a limit is refused.
    pub fn with_limiter(mut self, limiter: Limiter) -> Self {
        self.limiter = limiter;
        self
    }

    /// Counts decisions and tool calls in `metrics` (the app's).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Keeps each call's arguments and result on its `execute_tool` span.
    pub fn with_record_content(mut self, record: bool) -> Self {
        self.record_content = record;
        self
    }

    /// Where the gate counts; the turn and the routes count there too.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Knows each principal's roles (for `approvers: [role:NAME]`).
    pub fn with_roles(mut self, roles: HashMap<String, Vec<String>>) -> Self {
        self.roles = Arc::new(roles);
        self
    }

    /// Names this process's claims `instance` (random unless set): a claim
    /// of another instance that is gone is answered at once as outcome
    /// unknown, one of this instance waits for its running call.
    pub fn with_instance(mut self, instance: impl Into<Arc<str>>) -> Self {
        self.instance = instance.into();
        self
    }

    /// Stops waiting for held questions: every [`Gate::hold`] in progress,
    /// and any later one, returns `None` at once. Their questions stay open
    /// in the store, answerable by the next request to any instance. Called
    /// when a server starts to drain: nobody could decide there any more.
    pub fn release_held(&self) {
        self.releasing.cancel();
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
        // In the caller's span: the tool it may start is traced in the turn.
        // An outside client's name goes on with it, into the audit log.
        let work = work.in_current_span();
        let task = match audit::CLIENT.try_with(Arc::clone) {
            Ok(client) => self.tasks.spawn(audit::CLIENT.scope(client, work)),
            Err(_) => self.tasks.spawn(work),
        };
        task.await.map_err(|e| GateError::Task(e.to_string()))?
    }

    /// How long a question stays open.
    pub fn expiry(&self) -> Duration {
        self.expiry
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

    /// The signature to send with a confirmation, when signing is on:
    /// over the call as the client is shown it (and sends it back); the
    /// masked values are bound by the question itself.
    pub fn seal(&self, issued: &Issued) -> Option<Seal> {
        let signer = self.signer.as_ref()?;
        Some(signer.seal(&signing::Subject {
            confirmation_id: &issued.id,
            chat_id: &issued.chat_id,
            principal: &issued.principal,
            call: &self.shown_call(&issued.call),
            expires_at_ms: issued.expires_at_ms,
        }))
    }

    /// Whether the store answers now (for `/readyz`).
    pub async fn ping(&self) -> Result<(), GateError> {
        Ok(self.store.ping().await?)
    }

    /// The gate's clock, in milliseconds since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}

/// How long a taken client result is remembered unless the app says
/// otherwise: the audit log's default retention.
const DEFAULT_RESULT_RETENTION: Duration = Duration::from_secs(90 * 24 * 60 * 60);
