//! The confirmation policy: for each call, allow it, deny it, or ask a human.
//!
//! One chain of deciders, highest priority first; each allows, denies, asks,
//! or passes to the next. The built-in ones implement `toolConfirmation`, in
//! this order (deny always wins, and with no rule at all the mode decides,
//! which by default asks):
//!
//! | priority | decider | from config |
//! | --- | --- | --- |
//! | 100 | always deny | `toolPolicies.alwaysDeny` |
//! | 90 | per-tool deny rule | `tools.<tool>.deny` |
//! | 80 | always allow | `toolPolicies.alwaysAllow` |
//! | 70 | per-tool confirmation | `tools.<tool>.confirm` (`never`, or a condition that is false), else the tool's own declaration |
//! | 60 | remembered approval | the user's answer, for this chat, then for all their chats (a window grant counts as one for all their chats while its window lasts) |
//! | 50 | approve the next N | the user's answer, this chat |
//! | 0 | mode | `mode`: `event-based` asks, `auto-approve`, `auto-deny` |
//!
//! So a deny rule (also a `deny.when` that holds for these arguments)
//! beats any remembered approval, window grants included, and a true
//! `confirm.when` passes the call on to it. Remembered approvals and
//! budgets decide only calls whose approvers are the user who asked alone
//! ([`Approvers::asker_alone`]); a condition whose argument is missing or
//! of the wrong type holds. An answer remembered `"once"`
//! (or not at all) is never stored. `confirm/decide/tests.rs` checks this
//! order with remembered approvals in a store, on a manual clock.
//!
//! An application adds its own deciders with [`Policy::with_decider`]. An
//! unknown tool never reaches the policy: the gate refuses it first.

mod condition;

use std::collections::BTreeMap;
use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::Value;

pub use condition::{BadCondition, Condition};

/// Where remembered approvals stand in the chain (they live in the store).
pub const REMEMBERED: i32 = 60;

/// Where "approve the next N" budgets stand in the chain.
pub const BUDGET: i32 = 50;

/// A call, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct CallInfo<'a> {
    pub tool: ToolInfo<'a>,
    pub args: &'a Value,
    /// What the tool itself says about these arguments.
    pub tool_asks: bool,
    pub chat_id: &'a str,
    pub principal: &'a str,
}

/// A tool, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct ToolInfo<'a> {
    pub name: &'a str,
    /// `internal--<name>`, `mcp--<server>--<name>`.
    pub qualified: &'a str,
    /// `false` when the tool never asks, whatever the arguments.
    pub tool_may_ask: bool,
}

/// A decider's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow {
        by: String,
    },
    Deny {
        reason: String,
    },
    Ask,
    /// No opinion: the next decider decides.
    Pass,
}

/// What a decider says about a tool before seeing the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stance {
    Allow(String),
    Deny(String),
    Ask(String),
    Pass,
    /// It depends on the arguments, as described; `may_ask` when one of
    /// the outcomes is to ask (the others allow, deny or pass).
    Depends {
        how: String,
        may_ask: bool,
    },
}

pub trait Decider: Send + Sync + 'static {
    /// Higher runs first.
    fn priority(&self) -> i32;

    fn decide(&self, call: &CallInfo<'_>) -> Verdict;

    /// What this decider does with `tool` whatever the arguments. The
    /// default (it depends) is always safe: it only stops input streaming live.
    fn stance(&self, _tool: &ToolInfo<'_>) -> Stance {
        Stance::Depends {
            how: "an application rule decides".into(),
            may_ask: true,
        }
    }
}

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
    /// Calls whose arguments match need other approvers instead (the
    /// first that matches): `[{when: "amount > 1000", approvers: [role:cfo]}]`.
    pub escalate: Vec<Escalation>,
    /// What a question still open becomes when the user writes a new
    /// message: it stays open (`keep`, the default) or is closed (`cancel`).
    pub on_new_message: OnNewMessage,
    /// Who is told when this tool asks, instead of `toolConfirmation.notify`
    /// (`[]`: nobody). Delivered by `notify`, not decided here.
    pub notify: Option<Vec<NotifyTarget>>,
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
}

/// Who may decide a tool's questions besides denying their own
/// (`tools.<tool>.approvers`, `requireDistinctApprover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Approvers<'a> {
    /// Principals, or `role:NAME`; empty: the user who asked.
    pub listed: &'a [String],
    pub distinct: bool,
}

impl Approvers<'_> {
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
    /// four eyes. Only such a call is covered by a remembered approval or a
    /// budget, since only the user who asked can have granted it.
    pub fn asker_alone(&self) -> bool {
        self.listed.is_empty() && !self.distinct
    }

    /// Who must approve, in words: `alice or role:finance`.
    pub fn describe(&self) -> String {
        match self.listed {
            [] => "the user who asked".to_owned(),
            listed => listed.join(" or "),
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
    fn any_holds(&self, args: &Value) -> bool {
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

/// The whole chain.
#[derive(Clone)]
pub struct Policy {
    deciders: Vec<Arc<dyn Decider>>,
    rules: Arc<BTreeMap<String, ToolRule>>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("deciders", &self.deciders.len())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("toolConfirmation: `{pattern}`: {why}")]
pub struct BadPattern {
    pattern: String,
    why: String,
}

impl Default for Policy {
    /// No rules, mode `event-based`: tools ask when they say they do.
    fn default() -> Self {
        Self::new(Mode::EventBased, &ToolPolicies::default(), BTreeMap::new()).unwrap_or_else(
            |_| Policy {
                deciders: Vec::new(),
                rules: Arc::default(),
            },
        )
    }
}

impl Policy {
    pub fn new(
        mode: Mode,
        lists: &ToolPolicies,
        rules: BTreeMap<String, ToolRule>,
    ) -> Result<Self, BadPattern> {
        // A rule that could never apply, or two rules for one tool, would be
        // silently ignored: say so instead.
        for pattern in lists.always_allow.iter().chain(&lists.always_deny) {
            if !pattern.contains("--") && pattern.chars().any(char::is_alphanumeric) {
                return Err(BadPattern {
                    pattern: pattern.clone(),
                    why: format!(
                        "toolPolicies take qualified names, e.g. internal--{pattern} or mcp--<server>--{pattern}"
                    ),
                });
            }
        }
        for (name, rule) in &rules {
            if rule.require_distinct_approver && rule.approvers.is_empty() {
                return Err(BadPattern {
                    pattern: format!("tools.{name}.requireDistinctApprover"),
                    why: "needs approvers: without them nobody could approve".into(),
                });
            }
            if rule.escalate.iter().any(|e| e.approvers.is_empty()) {
                return Err(BadPattern {
                    pattern: format!("tools.{name}.escalate"),
                    why: "each entry needs approvers".into(),
                });
            }
            let empty = rule
                .approvers
                .iter()
                .chain(rule.escalate.iter().flat_map(|e| &e.approvers))
                .find(|a| a.is_empty() || a.strip_prefix(ROLE).is_some_and(str::is_empty));
            if let Some(entry) = empty {
                return Err(BadPattern {
                    pattern: format!("tools.{name}.approvers: `{entry}`"),
                    why: "name a principal or role:NAME".into(),
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for name in rules.keys() {
            if !seen.insert(crate::call::QualifiedName::of(name)) {
                return Err(BadPattern {
                    pattern: name.clone(),
                    why: "tools names this tool twice (by name and by qualified name)".into(),
                });
            }
        }
        let rules = Arc::new(rules);
        let mut policy = Policy {
            deciders: Vec::new(),
            rules: rules.clone(),
        };
        policy = policy
            .with_decider(List {
                priority: 100,
                set: globs(&lists.always_deny)?,
                deny: true,
            })
            .with_decider(ToolDeny {
                rules: rules.clone(),
            })
            .with_decider(List {
                priority: 80,
                set: globs(&lists.always_allow)?,
                deny: false,
            })
            .with_decider(ToolConfirm { rules })
            .with_decider(ModeDecider(mode));
        Ok(policy)
    }

    /// Adds a decider to the chain at its priority.
    pub fn with_decider(mut self, decider: impl Decider) -> Self {
        self.deciders.push(Arc::new(decider));
        self.deciders
            .sort_by_key(|d| std::cmp::Reverse(d.priority()));
        self
    }

    pub fn decide(&self, call: &CallInfo<'_>) -> Verdict {
        match self.decide_in(call, i32::MIN..=i32::MAX) {
            // Fails closed: with every decider passing, ask.
            Verdict::Pass => Verdict::Ask,
            verdict => verdict,
        }
    }

    /// The first verdict of the deciders whose priority is in `priorities`,
    /// or `Pass`. The gate interleaves remembered approvals ([`REMEMBERED`])
    /// and budgets ([`BUDGET`]) with the chain this way.
    pub fn decide_in(
        &self,
        call: &CallInfo<'_>,
        priorities: std::ops::RangeInclusive<i32>,
    ) -> Verdict {
        self.deciders
            .iter()
            .filter(|d| priorities.contains(&d.priority()))
            .map(|d| d.decide(call))
            .find(|v| *v != Verdict::Pass)
            .unwrap_or(Verdict::Pass)
    }

    /// Whether some arguments could make `tool` ask.
    pub fn may_ask(&self, tool: &ToolInfo<'_>) -> bool {
        for decider in &self.deciders {
            match decider.stance(tool) {
                Stance::Pass | Stance::Depends { may_ask: false, .. } => continue,
                Stance::Allow(_) | Stance::Deny(_) => return false,
                Stance::Ask(_) | Stance::Depends { may_ask: true, .. } => return true,
            }
        }
        true
    }

    /// The effective policy of `tool`, in words.
    pub fn describe(&self, tool: &ToolInfo<'_>) -> String {
        let mut steps = Vec::new();
        for decider in &self.deciders {
            match decider.stance(tool) {
                Stance::Pass => continue,
                Stance::Allow(why) => steps.push(format!("runs ({why})")),
                Stance::Deny(why) => steps.push(format!("never runs ({why})")),
                Stance::Ask(why) => steps.push(format!("asks ({why})")),
                Stance::Depends { how, .. } => {
                    steps.push(how);
                    continue;
                }
            }
            break;
        }
        steps.join("; otherwise ")
    }

    /// Whether the user may edit `tool`'s arguments before approving.
    pub fn editable(&self, tool: &ToolInfo<'_>) -> bool {
        rule(&self.rules, tool).is_some_and(|r| r.editable)
    }

    /// Who may approve a call of `tool` with `args`: the first
    /// `escalate` entry that matches, else `tools.<tool>.approvers`.
    pub fn approvers(&self, tool: &ToolInfo<'_>, args: &Value) -> Approvers<'_> {
        let Some(rule) = rule(&self.rules, tool) else {
            return Approvers::default();
        };
        let escalated = rule.escalate.iter().find(|e| e.when.any_holds(args));
        Approvers {
            listed: escalated.map_or(&rule.approvers, |e| &e.approvers),
            distinct: rule.require_distinct_approver,
        }
    }

    /// Whether any tool's rule names `principal`, or one of `roles`, among
    /// its approvers (escalations included). If none does, `principal`
    /// may decide only their own questions.
    pub fn names_approver(&self, principal: &str, roles: &[String]) -> bool {
        let names = |listed: &[String]| {
            listed.iter().any(|entry| match entry.strip_prefix(ROLE) {
                Some(role) => roles.iter().any(|r| r == role),
                None => entry == principal,
            })
        };
        self.rules
            .values()
            .any(|rule| names(&rule.approvers) || rule.escalate.iter().any(|e| names(&e.approvers)))
    }

    /// What `tool`'s open questions become when the user writes a new message.
    pub fn on_new_message(&self, tool: &ToolInfo<'_>) -> OnNewMessage {
        rule(&self.rules, tool).map_or_else(OnNewMessage::default, |r| r.on_new_message)
    }

    /// The configured question for a call, if `tools.<tool>.hint` is set.
    pub fn hint(&self, tool: &ToolInfo<'_>, args: &Value) -> Option<String> {
        let template = rule(&self.rules, tool)?.hint.as_ref()?;
        let mut hint = template.clone();
        if let Value::Object(map) = args {
            for (key, value) in map {
                let text = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                hint = hint.replace(&format!("{{{key}}}"), &text);
            }
        }
        Some(hint)
    }
}

fn rule<'a>(rules: &'a BTreeMap<String, ToolRule>, tool: &ToolInfo<'_>) -> Option<&'a ToolRule> {
    for_tool(rules, tool)
}

/// The entry of a map keyed as `toolConfirmation.tools` is that applies to
/// `tool`: `<qualified name>`, or `<name>` for a tool of this server.
pub fn for_tool<'a, T>(map: &'a BTreeMap<String, T>, tool: &ToolInfo<'_>) -> Option<&'a T> {
    map.get(tool.qualified).or_else(|| {
        tool.qualified
            .strip_prefix("internal--")
            .filter(|name| *name == tool.name)
            .and_then(|name| map.get(name))
    })
}

fn globs(patterns: &[String]) -> Result<(GlobSet, Vec<String>), BadPattern> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = Glob::new(pattern).map_err(|e| BadPattern {
            pattern: pattern.clone(),
            why: e.to_string(),
        })?;
        set.add(glob);
    }
    let set = set.build().map_err(|e| BadPattern {
        pattern: patterns.join(", "),
        why: e.to_string(),
    })?;
    Ok((set, patterns.to_vec()))
}

/// `alwaysDeny` / `alwaysAllow`.
struct List {
    priority: i32,
    set: (GlobSet, Vec<String>),
    deny: bool,
}

impl List {
    fn matching(&self, qualified: &str) -> Option<&str> {
        let (set, patterns) = &self.set;
        set.matches(qualified)
            .first()
            .and_then(|&i| patterns.get(i))
            .map(String::as_str)
    }

    fn why(&self, pattern: &str) -> String {
        format!(
            "{} {pattern}",
            if self.deny {
                "alwaysDeny"
            } else {
                "alwaysAllow"
            }
        )
    }
}

impl Decider for List {
    fn priority(&self) -> i32 {
        self.priority
    }

    fn decide(&self, call: &CallInfo<'_>) -> Verdict {
        match (self.matching(call.tool.qualified), self.deny) {
            (None, _) => Verdict::Pass,
            (Some(p), true) => Verdict::Deny {
                reason: self.why(p),
            },
            (Some(p), false) => Verdict::Allow { by: self.why(p) },
        }
    }

    fn stance(&self, tool: &ToolInfo<'_>) -> Stance {
        match (self.matching(tool.qualified), self.deny) {
            (None, _) => Stance::Pass,
            (Some(p), true) => Stance::Deny(self.why(p)),
            (Some(p), false) => Stance::Allow(self.why(p)),
        }
    }
}

/// `tools.<tool>.deny`.
struct ToolDeny {
    rules: Arc<BTreeMap<String, ToolRule>>,
}

impl Decider for ToolDeny {
    fn priority(&self) -> i32 {
        90
    }

    fn decide(&self, call: &CallInfo<'_>) -> Verdict {
        let Some(deny) = rule(&self.rules, &call.tool).and_then(|r| r.deny.as_ref()) else {
            return Verdict::Pass;
        };
        let applies = deny
            .when
            .as_ref()
            .is_none_or(|when| when.any_holds(call.args));
        match applies {
            true => Verdict::Deny {
                reason: deny_reason(call.tool.name, deny),
            },
            false => Verdict::Pass,
        }
    }

    fn stance(&self, tool: &ToolInfo<'_>) -> Stance {
        match rule(&self.rules, tool).and_then(|r| r.deny.as_ref()) {
            None => Stance::Pass,
            Some(deny @ DenyRule { when: None, .. }) => Stance::Deny(deny_reason(tool.name, deny)),
            Some(DenyRule {
                when: Some(when), ..
            }) => Stance::Depends {
                how: format!("never runs when {when}"),
                may_ask: false,
            },
        }
    }
}

fn deny_reason(tool: &str, deny: &DenyRule) -> String {
    match (&deny.reason, &deny.when) {
        (Some(reason), _) => reason.clone(),
        (None, Some(when)) => format!("tools.{tool}.deny when {when}"),
        (None, None) => format!("tools.{tool}.deny"),
    }
}

/// `tools.<tool>.confirm`, else what the tool itself declares.
struct ToolConfirm {
    rules: Arc<BTreeMap<String, ToolRule>>,
}

impl Decider for ToolConfirm {
    fn priority(&self) -> i32 {
        70
    }

    fn decide(&self, call: &CallInfo<'_>) -> Verdict {
        let name = call.tool.name;
        match rule(&self.rules, &call.tool).and_then(|r| r.confirm.as_ref()) {
            Some(ConfirmRule::Word(ConfirmWord::Never)) => Verdict::Allow {
                by: format!("tools.{name}.confirm: never"),
            },
            Some(ConfirmRule::Word(ConfirmWord::Always)) => Verdict::Pass,
            Some(ConfirmRule::When { when }) if !when.any_holds(call.args) => Verdict::Allow {
                by: format!("tools.{name}.confirm: {when} is false"),
            },
            Some(ConfirmRule::When { .. }) => Verdict::Pass,
            None if !call.tool_asks => Verdict::Allow {
                by: format!("{name} does not ask for these arguments"),
            },
            None => Verdict::Pass,
        }
    }

    fn stance(&self, tool: &ToolInfo<'_>) -> Stance {
        let name = tool.name;
        match rule(&self.rules, tool).and_then(|r| r.confirm.as_ref()) {
            Some(ConfirmRule::Word(ConfirmWord::Never)) => {
                Stance::Allow(format!("tools.{name}.confirm: never"))
            }
            Some(ConfirmRule::Word(ConfirmWord::Always)) => Stance::Pass,
            Some(ConfirmRule::When { when }) => Stance::Depends {
                how: format!("runs unless {when}"),
                may_ask: false,
            },
            None if !tool.tool_may_ask => Stance::Allow(format!("{name} never asks")),
            None => Stance::Depends {
                how: format!("{name} decides from its arguments whether to ask"),
                may_ask: false,
            },
        }
    }
}

struct ModeDecider(Mode);

impl Decider for ModeDecider {
    fn priority(&self) -> i32 {
        0
    }

    fn decide(&self, _call: &CallInfo<'_>) -> Verdict {
        match self.0 {
            Mode::EventBased => Verdict::Ask,
            Mode::AutoApprove => Verdict::Allow {
                by: "mode auto-approve".into(),
            },
            Mode::AutoDeny => Verdict::Deny {
                reason: "mode auto-deny".into(),
            },
        }
    }

    fn stance(&self, _tool: &ToolInfo<'_>) -> Stance {
        match self.0 {
            Mode::EventBased => Stance::Ask("mode event-based".into()),
            Mode::AutoApprove => Stance::Allow("mode auto-approve".into()),
            Mode::AutoDeny => Stance::Deny("mode auto-deny".into()),
        }
    }
}

#[cfg(test)]
mod tests;
