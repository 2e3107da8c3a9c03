//! The built-in deciders, in the order `Policy::new` chains them.

use std::collections::BTreeMap;
use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::{
    BadPattern, CallInfo, ConfirmRule, ConfirmWord, Decider, DenyRule, Mode, Stance, ToolInfo,
    ToolRule, Verdict, rule,
};

pub(super) fn globs(patterns: &[String]) -> Result<(GlobSet, Vec<String>), BadPattern> {
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
pub(super) struct List {
    pub(super) priority: i32,
    pub(super) set: (GlobSet, Vec<String>),
    pub(super) deny: bool,
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
pub(super) struct ToolDeny {
    pub(super) rules: Arc<BTreeMap<String, ToolRule>>,
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
pub(super) struct ToolConfirm {
    pub(super) rules: Arc<BTreeMap<String, ToolRule>>,
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

pub(super) struct ModeDecider(pub(super) Mode);

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
