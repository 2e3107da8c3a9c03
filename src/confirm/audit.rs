//! What lands in the audit log, and how an event is made.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use tracing::Level;

use super::{Gate, GateError, Scope, signing};
use crate::call::QualifiedName;
use crate::call::{Fingerprint, ToolCall};
use crate::identity::{Approver, Identity, Source};
use crate::metrics::Confirmation;
use crate::store::{AuditDecision, AuditEvent, AuditPage, Issued, Outcome};
use crate::telemetry::DECISIONS;

tokio::task_local! {
    /// The MCP client whose call the gate decides now (`name version`):
    /// every audit event written in its scope names it. Set by
    /// [`Gate::for_client`]; the gate's own tasks carry it on.
    pub(super) static CLIENT: Arc<str>;
}

/// An audit event in the making: what was decided about which call, for
/// whom; who decided, why, and on which question are added as known.
#[must_use]
pub(super) struct Note<'a> {
    scope: &'a Scope,
    call: &'a ToolCall,
    decision: AuditDecision,
    /// Borrowed while it is fixed text: made a `String` once, in the event.
    by: Cow<'static, str>,
    reason: Option<String>,
    confirmation_id: Option<&'a str>,
    issued_args: Option<&'a Value>,
    fingerprint: Option<&'a Fingerprint>,
    /// Who decided, when a person did: `None` is toolgate's rules.
    approver: Option<&'a Identity>,
    /// A link's bearer whom nothing else names decided.
    by_link: bool,
}

impl<'a> Note<'a> {
    /// `decision` on `call`, in `scope`'s chat; decided by toolgate until
    /// [`Note::by`] says otherwise.
    pub(super) fn new(decision: AuditDecision, scope: &'a Scope, call: &'a ToolCall) -> Self {
        Self {
            scope,
            call,
            decision,
            by: Cow::Borrowed("toolgate"),
            reason: None,
            confirmation_id: None,
            issued_args: None,
            fingerprint: None,
            approver: None,
            by_link: false,
        }
    }

    /// A person's decision toolgate refused, on `call` in `scope`'s chat:
    /// it names who tried, as toolgate knows them (`None`: a link's bearer
    /// whom the request does not name), so a refusal cannot be audited as
    /// toolgate's own. The decision pipeline audits its refusals only so
    /// (`tests/it/tidy_pipeline.rs` checks it).
    pub(super) fn refused(
        scope: &'a Scope,
        call: &'a ToolCall,
        tried: Option<&'a Identity>,
    ) -> Self {
        Self::new(AuditDecision::Refused, scope, call).approver(tried)
    }

    /// The person who decided, as toolgate knows them (`None`: a link's
    /// bearer whom the request does not name).
    pub(super) fn approver(mut self, approver: Option<&'a Identity>) -> Self {
        self.by_link = approver.is_none();
        self.approver = approver;
        self
    }

    /// Who decided (`user`, an approver, `policy`, a rule's name).
    pub(super) fn by(mut self, by: impl Into<Cow<'static, str>>) -> Self {
        self.by = by.into();
        self
    }

    /// Why, when there is a reason to tell.
    pub(super) fn reason(mut self, reason: Option<String>) -> Self {
        self.reason = reason;
        self
    }

    /// Why.
    pub(super) fn because(self, reason: impl Into<String>) -> Self {
        self.reason(Some(reason.into()))
    }

    /// The question it decides, if any.
    pub(super) fn on(mut self, confirmation_id: Option<&'a str>) -> Self {
        self.confirmation_id = confirmation_id;
        self
    }

    /// The fingerprint of the question it decides, when it has one.
    pub(super) fn fingerprint(mut self, fingerprint: Option<&'a Fingerprint>) -> Self {
        self.fingerprint = fingerprint;
        self
    }

    /// An edit keeps the digest of the arguments as issued too.
    pub(super) fn edited_from(mut self, issued_args: Option<&'a Value>) -> Self {
        self.issued_args = issued_args;
        self
    }
}

impl Gate {
    /// The event `note` describes, stamped now.
    pub(super) fn event(&self, note: Note<'_>) -> AuditEvent {
        let Note {
            scope,
            call,
            decision,
            by,
            reason,
            confirmation_id,
            issued_args,
            fingerprint,
            approver,
            by_link,
        } = note;
        let approver = match (approver, decision) {
            // None of them decides a call.
            (_, AuditDecision::Notified | AuditDecision::Delivered | AuditDecision::Revoked) => {
                None
            }
            (Some(who), _) => Some(who.approver()),
            (None, _) if by_link => Some(Approver::nobody(Source::Link)),
            (None, _) => Some(Approver::nobody(Source::Policy)),
        };
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
            issued_args_digest: issued_args.map(signing::digest),
            decision,
            by: by.into_owned(),
            reason,
            confirmation_id: confirmation_id.map(str::to_owned),
            client: CLIENT.try_with(|client| client.to_string()).ok(),
            fingerprint: fingerprint.map(|f| f.call.clone()),
            approver,
        }
    }

    /// Counts a decision in `toolgate_confirmations_total`, under its
    /// tool's name if the tool is configured (an answer may name any).
    pub(super) fn count(&self, event: &AuditEvent) {
        let outcome = match event.decision {
            AuditDecision::Allowed => Confirmation::AutoApproved,
            AuditDecision::Denied => Confirmation::AutoDenied,
            AuditDecision::Approved | AuditDecision::Edited => Confirmation::Approved,
            AuditDecision::Rejected => Confirmation::Denied,
            AuditDecision::Refused => Confirmation::Refused,
            AuditDecision::Expired => Confirmation::Expired,
            AuditDecision::Cancelled => Confirmation::Cancelled,
            AuditDecision::Responded => Confirmation::Responded,
            AuditDecision::Asked
            | AuditDecision::Replayed
            | AuditDecision::Delivered
            | AuditDecision::Revoked
            | AuditDecision::Notified => return,
        };
        let tools = self.tools.current();
        let name = event.tool.strip_prefix("internal--").unwrap_or(&event.tool);
        let known = tools.get(name).is_some() || tools.get(&event.tool).is_some();
        let tool = if known {
            event.tool.as_str()
        } else {
            "unknown"
        };
        self.metrics.confirmation(tool, outcome);
    }

    /// Who decided `issued` and how toolgate knew them, as the audit log
    /// says: the approver of the last event that ended it, among the first
    /// [`DECIDED_WITHIN`] events of its chat from when it was asked. `None`
    /// while it is open, or for a decision audited before toolgate kept
    /// approvers.
    pub async fn decided_by(&self, issued: &Issued) -> Result<Option<Approver>, GateError> {
        let events = self
            .store
            .audit_log(AuditPage {
                principal: &issued.principal,
                chat_id: Some(&issued.chat_id),
                since_ms: issued.issued_at_ms,
                limit: DECIDED_WITHIN,
            })
            .await?;
        let ended = events.into_iter().rev().find(|event| {
            event.confirmation_id.as_deref() == Some(issued.id.as_str()) && ends(event.decision)
        });
        Ok(ended.and_then(|event| event.approver))
    }

    /// The events of the audit log `page` names.
    pub async fn audit_log(&self, page: AuditPage<'_>) -> Result<Vec<AuditEvent>, GateError> {
        Ok(self.store.audit_log(page).await?)
    }
}

/// How many of a chat's audit events [`Gate::decided_by`] reads.
const DECIDED_WITHIN: usize = 10_000;

/// Whether an event of `decision` ends the question it is about.
fn ends(decision: AuditDecision) -> bool {
    match decision {
        AuditDecision::Approved
        | AuditDecision::Edited
        | AuditDecision::Rejected
        | AuditDecision::Responded
        | AuditDecision::Denied
        | AuditDecision::Expired
        | AuditDecision::Cancelled => true,
        AuditDecision::Allowed
        | AuditDecision::Asked
        | AuditDecision::Refused
        | AuditDecision::Replayed
        | AuditDecision::Delivered
        | AuditDecision::Revoked
        | AuditDecision::Notified => false,
    }
}

/// The decision as an event of the current span (the turn's, or the
/// tool call's): `toolgate.confirmation`, with who decided (`by`: the
/// chat's user, an approver or a rule, for the chat's `principal`) and, for
/// a rule's decision, the rule.
pub(super) fn trace(event: &AuditEvent) {
    if !tracing::event_enabled!(target: DECISIONS, Level::DEBUG) {
        return;
    }
    let decision = serde_json::to_value(event.decision).unwrap_or_default();
    let rule = match event.decision {
        AuditDecision::Allowed => Some(event.by.as_str()),
        // A denying rule names itself in the reason.
        AuditDecision::Denied => event.reason.as_deref(),
        _ => None,
    };
    tracing::event!(
        target: DECISIONS,
        Level::DEBUG,
        toolgate.confirmation.decision = decision.as_str().unwrap_or_default(),
        toolgate.confirmation.by = event.by.as_str(),
        toolgate.confirmation.principal = event.principal.as_str(),
        toolgate.confirmation.rule = rule,
        toolgate.confirmation.id = event.confirmation_id.as_deref(),
        // Qualified, as the audit log names it (`internal--…`).
        toolgate.confirmation.tool = event.tool.as_str(),
        gen_ai.tool.call.id = event.call_id.as_str(),
        "toolgate.confirmation"
    );
}

/// Why a recorded outcome is what it is, for the audit log.
pub(super) fn outcome_reason(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Output { .. } => None,
        Outcome::Error { message, .. } => Some(message.clone()),
        Outcome::Denied { reason } => reason.clone(),
        Outcome::Expired => Some(super::EXPIRED.to_owned()),
        Outcome::Cancelled => Some(super::CANCELLED.to_owned()),
        Outcome::HandedOff { .. } => None,
    }
}
