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
mod deciders;
mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

pub use condition::{BadCondition, Condition};
use deciders::{List, ModeDecider, ToolConfirm, ToolDeny, globs};
pub use rules::{
    Approvers, Conditions, ConfirmRule, ConfirmWord, DenyRule, Escalation, Mode, NotifyTarget,
    OnNewMessage, ROLE, RedactionConfig, ToolPolicies, ToolRule,
};

use crate::call::Redaction;

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

/// The whole chain.
#[derive(Clone)]
pub struct Policy {
    deciders: Vec<Arc<dyn Decider>>,
    rules: Arc<BTreeMap<String, ToolRule>>,
    /// What no person is shown of a call's arguments.
    redaction: Arc<Redaction>,
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
                redaction: Arc::new(Redaction::standard()),
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
        let redaction = Arc::new(redaction(&rules, &RedactionConfig::default())?);
        let rules = Arc::new(rules);
        let mut policy = Policy {
            deciders: Vec::new(),
            rules: rules.clone(),
            redaction,
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

    /// Masks `config`'s key names (with or without the defaults) beside
    /// the tools' `sensitive` pointers.
    pub fn with_redaction(mut self, config: &RedactionConfig) -> Result<Self, BadPattern> {
        self.redaction = Arc::new(redaction(&self.rules, config)?);
        Ok(self)
    }

    /// What no person is shown of a call's arguments.
    pub fn redaction(&self) -> &Arc<Redaction> {
        &self.redaction
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

    /// Whether `tool` never runs, whatever its arguments: the first
    /// decider with a stance on it denies.
    pub fn never_runs(&self, tool: &ToolInfo<'_>) -> bool {
        let stance = self.deciders.iter().map(|d| d.stance(tool));
        matches!(
            stance.into_iter().find(|s| *s != Stance::Pass),
            Some(Stance::Deny(_))
        )
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
            // The stricter holds: an escalation never lowers the bar.
            least: rule
                .approver_identity
                .max(escalated.and_then(|e| e.approver_identity)),
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

/// The redaction of `config`'s key names and each rule's pointers.
fn redaction(
    rules: &BTreeMap<String, ToolRule>,
    config: &RedactionConfig,
) -> Result<Redaction, BadPattern> {
    let pointers = rules
        .iter()
        .map(|(name, rule)| (name.as_str(), rule.sensitive.as_slice()));
    Redaction::new(config.defaults, &config.keys, pointers).map_err(|e| {
        let tool = rules
            .iter()
            .find(|(_, rule)| rule.sensitive.contains(&e.pointer))
            .map_or("?", |(name, _)| name.as_str());
        BadPattern {
            pattern: format!("tools.{tool}.sensitive"),
            why: e.to_string(),
        }
    })
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

#[cfg(test)]
mod tests;
