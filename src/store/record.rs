//! What the store keeps: issued confirmations and their kind, outcomes,
//! remembered approvals, audit events; where a confirmation stands.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::call::{Fingerprint, ToolCall};
use crate::identity::Approver;
use crate::protocol::ConfirmationProtocol;

/// A confirmation as the server issued it: the authority for what may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Issued {
    /// The id of the `adk_request_confirmation` call.
    pub id: String,
    pub chat_id: String,
    pub principal: String,
    /// The original call, with the exact arguments the user was asked about.
    pub call: ToolCall,
    pub hint: String,
    /// How it was asked; it must be answered the same way.
    pub protocol: ConfirmationProtocol,
    pub issued_at_ms: u64,
    pub expires_at_ms: u64,
    /// What the record is: only a question asks anyone.
    pub kind: RecordKind,
    /// What the question was asked about (the tool's definition then, and
    /// the call): an approval runs it only while the tool's definition is
    /// the same. `None` for a record that asks nobody, or one stored
    /// before toolgate kept fingerprints.
    pub fingerprint: Option<Fingerprint>,
}

/// What a stored record is. Hand-offs and taken client results are kept as
/// records too, so that their claim and ledger work as a question's does;
/// they ask nobody. Every backend stores it (a record stored before it had
/// one is a question).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordKind {
    /// A confirmation someone is asked to decide.
    #[default]
    Question,
    /// A client-side tool's call handed to the client to run.
    HandOff,
    /// A client's result for a hand-off, taken.
    ClientResult,
}

impl RecordKind {
    /// Whether someone is asked to decide it.
    pub fn asks(self) -> bool {
        self == RecordKind::Question
    }

    /// Its stored name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RecordKind::Question => "question",
            RecordKind::HandOff => "hand-off",
            RecordKind::ClientResult => "client-result",
        }
    }

    /// The kind a stored name names; a name it does not know is a question.
    pub(crate) fn named(name: &str) -> Self {
        match name {
            "hand-off" => RecordKind::HandOff,
            "client-result" => RecordKind::ClientResult,
            _ => RecordKind::Question,
        }
    }
}

/// Where a listing of open confirmations goes on: just after this one in
/// their order (issue time, then id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    pub issued_at_ms: u64,
    pub id: String,
}

impl Cursor {
    pub fn after(issued: &Issued) -> Self {
        Cursor {
            issued_at_ms: issued.issued_at_ms,
            id: issued.id.clone(),
        }
    }
}

/// How a call ended, as recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Outcome {
    Output {
        output: Value,
        /// The arguments the call ran with, when the user edited them.
        #[serde(rename = "ranWith", default, skip_serializing_if = "Option::is_none")]
        ran_with: Option<Value>,
        /// A person gave it in the tool's place (the `respond` decision):
        /// the tool never ran. Kept so that a later decision can tell a
        /// response from an approval.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        responded: bool,
    },
    Error {
        message: String,
        #[serde(rename = "ranWith", default, skip_serializing_if = "Option::is_none")]
        ran_with: Option<Value>,
    },
    Denied {
        reason: Option<String>,
    },
    /// Nobody approved or denied it before its window closed; it never ran.
    Expired,
    /// Closed unanswered when the user wrote a new message (the tool's
    /// `onNewMessage: cancel`); it never ran.
    Cancelled,
    /// A client-side tool's call, handed to the client to run: its result
    /// comes with the client's next request, never from the server.
    HandedOff {
        /// The arguments it was handed out with, when the user edited them.
        #[serde(rename = "ranWith", default, skip_serializing_if = "Option::is_none")]
        ran_with: Option<Value>,
    },
}

/// An approval a user asked to be remembered: calls of `tool` by
/// `principal` then run without asking, in `chat_id` or (when `None`) in
/// every chat of theirs, until `expires_at_ms` if it has one (a window
/// grant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    pub id: String,
    pub principal: String,
    pub chat_id: Option<String>,
    /// The qualified tool name.
    pub tool: String,
    pub created_at_ms: u64,
    /// The first moment it no longer applies; `None`: until revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// The digest of the tool's definition it was granted for: it applies
    /// to no call once the tool is listed differently. `None` for one
    /// granted before toolgate kept digests (it applies as it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
}

impl Remembered {
    /// Whether it still applies at `now_ms`: no backend ever hands out one
    /// that does not.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_none_or(|at| now_ms < at)
    }
}

/// Which of the audit log to read: `principal`'s events from `since_ms`
/// on, oldest first, at most `limit`, only of `chat_id` if given.
#[derive(Debug, Clone, Copy)]
pub struct AuditPage<'a> {
    pub principal: &'a str,
    pub chat_id: Option<&'a str>,
    pub since_ms: u64,
    pub limit: usize,
}

/// One decision about a tool call, as the audit log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub at_ms: u64,
    pub principal: String,
    pub chat_id: String,
    /// The qualified tool name.
    pub tool: String,
    pub call_id: String,
    /// SHA-256 of the canonical arguments: who decided what, without the data.
    pub args_digest: String,
    /// For an edit: the digest of the arguments as issued (`argsDigest` is what ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_args_digest: Option<String>,
    pub decision: AuditDecision,
    /// The rule or person that decided.
    pub by: String,
    pub reason: Option<String>,
    pub confirmation_id: Option<String>,
    /// The MCP client whose call it was (`name version`, as it named
    /// itself), for a call that came through the MCP face.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The fingerprint of the call decided (`call.rs`'s `fingerprint`):
    /// the question's, for a decision on one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Who decided and how toolgate knew them (`identity.rs`'s
    /// `Approver`: `oidc` with the token's issuer and subject, `key`,
    /// `proxy-header`, `link`, `policy`, ...). Absent from events written
    /// before toolgate kept it, and from those that decide no call
    /// (`notified`, `revoked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<Approver>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditDecision {
    /// A rule let the call run without asking.
    Allowed,
    /// A rule refused the call.
    Denied,
    /// A confirmation was issued.
    Asked,
    Approved,
    /// The user approved after editing the arguments.
    Edited,
    /// The user refused.
    Rejected,
    /// An answer was refused: forged, unknown, foreign, expired.
    Refused,
    /// An answer repeated one already decided.
    Replayed,
    /// A decided question's outcome was given back to the outside client
    /// (MCP) whose call asked it: a later call like it asks anew.
    Delivered,
    /// A person gave the call's result in the tool's place; nothing ran.
    Responded,
    /// Nobody approved or denied it before it expired (read also as the
    /// `timed-out` older logs wrote).
    #[serde(alias = "timed-out")]
    Expired,
    /// Closed unanswered by a new message (`onNewMessage: cancel`).
    Cancelled,
    /// A remembered approval was revoked.
    Revoked,
    /// A question was sent to a notification target (`by`, its safe
    /// name); `reason` says why it failed, when it did.
    Notified,
}

/// Where a confirmation stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Pending,
    /// Claimed at `since_ms`; no outcome recorded yet.
    Claimed {
        since_ms: u64,
    },
    Done(Outcome),
}

/// The result of trying to claim a confirmation for execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// This caller holds the claim and must record the outcome.
    Won,
    /// Claimed at `since_ms` and no outcome recorded yet. `orphaned`: its
    /// holder is another instance that is gone (SQLite and memory: any other
    /// instance, since one process owns the store; Redis: one without a
    /// live heartbeat), so no outcome will ever come.
    InFlight { since_ms: u64, orphaned: bool },
    /// The outcome that was recorded.
    Done(Outcome),
}
