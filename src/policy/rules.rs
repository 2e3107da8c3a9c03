//! What `toolConfirmation` reads: the mode, the lists, the rules for one tool.

use serde::Deserialize;
use serde_json::Value;

use super::Condition;
use crate::identity::{Source, Verified};

/// `toolConfirmation.mode`, as Dexto names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Ask a human.
    #[default]
    EventBased,
    AutoApprove,
    AutoDeny,
}

/// `toolConfirmation.toolPolicies`.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolPolicies {
    /// Qualified names or globs (`internal--get_weather`, `mcp--filesystem--*`).
    pub always_allow: Vec<String>,
    pub always_deny: Vec<String>,
}

/// `toolConfirmation.tools.<tool>`: rules for one tool.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ToolRule {
    pub confirm: Option<ConfirmRule>,
    pub deny: Option<DenyRule>,
    /// The question shown to the user; `{argument}` is replaced by its value.
    pub hint: Option<String>,
    /// Whether the user may edit the arguments before approving.
    pub editable: bool,
    /// Who may approve a call of this tool: principals, or `role:NAME`
    /// for every principal with that role. Empty: the user who asked.
    pub approvers: Vec<String>,
    /// Four eyes: the user who asked may deny or cancel their call, never
    /// approve it.
    pub require_distinct_approver: bool,
    /// The least an approver's identity must be: `proxy-header` < `key` <
    /// `oidc` (a token the issuer signed). Every decision on the tool's
    /// questions but the asker's own denial needs it, and no remembered
    /// approval, `approveNext` or budget decides its calls.
    pub approver_identity: Option<Verified>,
    /// Calls whose arguments match need other approvers instead (the
    /// first that matches): `[{when: "amount > 1000", approvers: [role:cfo]}]`.
    pub escalate: Vec<Escalation>,
    /// What a question still open becomes when the user writes a new
    /// message: it stays open (`keep`, the default) or is closed (`cancel`).
    pub on_new_message: OnNewMessage,
    /// Who is told when this tool asks, instead of `toolConfirmation.notify`
    /// (`[]`: nobody). Delivered by `notify`, not decided here.
    pub notify: Option<Vec<NotifyTarget>>,
    /// JSON pointers (`/card/number`) to argument values no person is
    /// shown: masked in cards, the API, the inbox, notifications, links'
    /// pages and traces, beside the key names masked everywhere
    /// (`toolConfirmation.redaction`). The tool still gets them.
    pub sensitive: Vec<String>,
}

/// One place a question is announced (`toolConfirmation.notify`): exactly
/// one of `webhook` (with `secretEnv`, the variable holding its HMAC key)
/// and `slack` (an incoming webhook URL, itself a secret). Checked, and its
/// secret read, when the notifier is built.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NotifyTarget {
    pub webhook: Option<String>,
    pub secret_env: Option<String>,
    pub slack: Option<String>,
}

/// `toolConfirmation.redaction`: the key names whose values are masked in
/// every call's arguments, wherever they appear.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RedactionConfig {
    /// Whether the default names (`password`, `token`, `authorization`,
    /// `apiKey`, `secret` and the like) are masked.
    pub defaults: bool,
    /// More key names, compared as the defaults are: without case and
    /// without `_`, `-`, `.` or spaces.
    pub keys: Vec<String>,
}

impl Default for RedactionConfig {
    fn default() -> Self {
        Self {
            defaults: true,
            keys: Vec::new(),
        }
    }
}

/// `tools.<tool>.onNewMessage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnNewMessage {
    /// The question stays open: decided later, its outcome reaches the chat.
    #[default]
    Keep,
    /// The question is closed as cancelled; nothing runs.
    Cancel,
}

/// `tools.<tool>.escalate`: for calls that match, these approvers.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Escalation {
    pub when: Conditions,
    pub approvers: Vec<String>,
    /// For calls that match, the least an approver's identity must be;
    /// the stricter of this and the tool's own `approverIdentity` holds.
    #[serde(default)]
    pub approver_identity: Option<Verified>,
}

/// Who may decide a tool's questions besides denying their own
/// (`tools.<tool>.approvers`, `requireDistinctApprover`,
/// `approverIdentity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Approvers<'a> {
    /// Principals, or `role:NAME`; empty: the user who asked.
    pub listed: &'a [String],
    pub distinct: bool,
    /// The least source an approver's identity must have.
    pub least: Option<Verified>,
}

impl<'a> Approvers<'a> {
    /// `listed` decide; the user who asked only if listed.
    pub fn listed(listed: &'a [String]) -> Self {
        Self {
            listed,
            distinct: false,
            least: None,
        }
    }

    /// `listed` decide, and never the user who asked (four eyes).
    pub fn four_eyes(listed: &'a [String]) -> Self {
        Self {
            listed,
            distinct: true,
            least: None,
        }
    }

    /// Whether an identity known by `source` is one an approver may have.
    pub fn verified(&self, source: Source) -> bool {
        self.least.is_none_or(|least| source.meets(least))
    }

    /// Whether `principal`, holding `roles`, may approve a call that
    /// `requester` asked for.
    pub fn may_approve(&self, requester: &str, principal: &str, roles: &[String]) -> bool {
        let own = principal == requester;
        if own && self.distinct {
            return false;
        }
        if self.listed.is_empty() {
            return own;
        }
        self.listed
            .iter()
            .any(|entry| match entry.strip_prefix(ROLE) {
                Some(role) => roles.iter().any(|r| r == role),
                None => entry == principal,
            })
    }

    /// Whether anyone but the user who asked decides.
    pub fn others_decide(&self) -> bool {
        !self.listed.is_empty()
    }

    /// Whether the user who asked decides alone: no approvers listed, no
    /// four eyes, no least identity. Only such a call is covered by a
    /// remembered approval or a budget, since only the user who asked can
    /// have granted it, and a grant decides later calls with nobody's
    /// identity present to judge.
    pub fn asker_alone(&self) -> bool {
        self.listed.is_empty() && !self.distinct && self.least.is_none()
    }

    /// Who must approve, in words: `alice or role:finance`, and how they
    /// must be known (`, signed in through oidc`).
    pub fn describe(&self) -> String {
        let who = match self.listed {
            [] => "the user who asked".to_owned(),
            listed => listed.join(" or "),
        };
        match self.least {
            None => who,
            Some(least) => format!("{who} (known by {} or stronger)", least.word()),
        }
    }
}

/// The prefix of a role among `approvers`.
pub const ROLE: &str = "role:";

/// When a tool asks: `always`, `never`, or `{when: <condition or list>}`.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ConfirmRule {
    Word(ConfirmWord),
    When { when: Conditions },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConfirmWord {
    Always,
    Never,
}

/// One condition, or a list of which any may hold.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Conditions {
    One(#[schemars(with = "String")] Condition),
    Any(#[schemars(with = "Vec<String>")] Vec<Condition>),
}

impl Conditions {
    pub(super) fn any_holds(&self, args: &Value) -> bool {
        match self {
            Conditions::One(c) => c.holds(args),
            Conditions::Any(cs) => cs.iter().any(|c| c.holds(args)),
        }
    }
}

impl std::fmt::Display for Conditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conditions::One(c) => write!(f, "{c}"),
            Conditions::Any(cs) => {
                let texts: Vec<String> = cs.iter().map(ToString::to_string).collect();
                f.write_str(&texts.join(" or "))
            }
        }
    }
}

/// `tools.<tool>.deny`: never run calls that match; without `when`, never run the tool.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DenyRule {
    pub when: Option<Conditions>,
    /// Told to the model and the user.
    pub reason: Option<String>,
}
