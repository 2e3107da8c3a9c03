//! What the gate knows about a call's tool, and what the policy says about
//! it without the store: the facts every decision starts from.

use std::sync::Arc;

use serde_json::Value;

use super::check::{self, Decider, Refusal};
use super::{Decision, Gate, Inventory, Scope, ToolView};
use crate::call::QualifiedName;
use crate::call::ToolCall;
use crate::identity::Identity;
use crate::policy::{Approvers, CallInfo, Policy, ToolInfo, Verdict};
use crate::store::Issued;
use crate::tools::Toolbox;

impl Gate {
    /// What the policy needs to know about a call's tool; `None` for an unknown tool.
    pub(super) fn facts(&self, call: &ToolCall) -> Option<Facts> {
        let tools = self.tools.current();
        let Some(tool) = tools.get(&call.name) else {
            // An upstream agent's tool, which asked: the agent runs it.
            return self.upstream.then(|| Facts {
                qualified: QualifiedName::of(&call.name),
                tool_may_ask: true,
                tool_asks: true,
            });
        };
        Some(Facts {
            qualified: QualifiedName::of(&call.name),
            tool_may_ask: tool.may_need_confirmation(),
            tool_asks: tool.needs_confirmation(&call.args),
        })
    }

    /// What the policy says about this call now.
    pub(super) fn verdict(&self, scope: &Scope, call: &ToolCall) -> Option<Verdict> {
        let facts = self.facts(call)?;
        Some(self.policy.decide(&facts.info(scope, call)))
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

    /// Whether the user may edit the arguments of `name` before approving
    /// (`toolConfirmation.tools.<tool>.editable`).
    pub fn editable(&self, name: &str) -> bool {
        let qualified = QualifiedName::of(name);
        // An upstream agent runs its call with the arguments it made.
        !self.upstream
            && self.policy.editable(&ToolInfo {
                name,
                qualified: &qualified,
                tool_may_ask: true,
            })
    }

    /// Whether `name`'s arguments may be edited, and the schema an edit
    /// must fit (`null` for a tool now gone: no edit passes).
    pub(super) fn edits(&self, name: &str) -> (bool, Value) {
        let qualified = QualifiedName::of(name);
        // An upstream agent runs its call with the arguments it made.
        let editable = !self.upstream
            && self.policy.editable(&ToolInfo {
                name,
                qualified: &qualified,
                tool_may_ask: true,
            });
        let schema = self
            .tools
            .current()
            .get(name)
            .map(|t| t.parameters())
            .unwrap_or(Value::Null);
        (editable, schema)
    }

    /// Who may approve `call` (`tools.<tool>.approvers`, `escalate`).
    pub fn approvers(&self, call: &ToolCall) -> Approvers<'_> {
        approvers(&self.policy, call)
    }

    /// Whether `who` may make this decision on `issued` ([`may_decide`]),
    /// with the roles `auth.roles` gives them and those their identity brings.
    pub(super) fn may_decide(
        &self,
        issued: &Issued,
        run: Option<&ToolCall>,
        who: &Identity,
        approve: bool,
    ) -> Result<(), Refusal> {
        let roles = self.roles_with(&who.principal, &who.roles);
        let decider = Decider {
            principal: &who.principal,
            roles: &roles,
            source: who.source,
        };
        may_decide(&self.policy, decider, issued, run, approve)
    }

    /// Whether `who` may approve `issued` as it was asked: what a card
    /// shows as its Approve button (`mayApprove`).
    pub fn may_approve(&self, issued: &Issued, who: &Identity) -> bool {
        self.may_decide(issued, None, who, true).is_ok()
    }

    /// Whether a grant (a remembered approval, a budget) may decide `call`:
    /// only one whose approvers, for these arguments, are the user who
    /// asked alone. A grant made before approvers were added, or for
    /// arguments that now escalate, decides nothing.
    pub(super) fn grants_apply(&self, call: &ToolCall) -> bool {
        self.approvers(call).asker_alone()
    }

    /// The question as the user who asked reads it: when someone else must
    /// approve, it says who, and that it waits for them.
    pub(super) fn for_asker(&self, scope: &Scope, call: &ToolCall, hint: String) -> String {
        let approvers = self.approvers(call);
        let roles = self.roles_of(&scope.principal);
        if !approvers.others_decide()
            || approvers.may_approve(&scope.principal, &scope.principal, roles)
        {
            return hint;
        }
        format!("{hint} (waiting for approval by {})", approvers.describe())
    }

    /// `principal`'s roles (`auth.roles`, their keys' `roles`).
    pub fn roles_of(&self, principal: &str) -> &[String] {
        self.roles.get(principal).map_or(&[], Vec::as_slice)
    }

    /// `principal`'s roles with those its identity brings (an OIDC
    /// token's groups, mapped), each once.
    pub(super) fn roles_with<'a>(
        &'a self,
        principal: &str,
        brought: &[String],
    ) -> std::borrow::Cow<'a, [String]> {
        let own = self.roles_of(principal);
        if brought.iter().all(|role| own.contains(role)) {
            return std::borrow::Cow::Borrowed(own);
        }
        let mut roles = own.to_vec();
        roles.extend(brought.iter().filter(|r| !own.contains(r)).cloned());
        std::borrow::Cow::Owned(roles)
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
    pub fn specs(&self) -> Arc<[crate::call::ToolSpec]> {
        self.tools.current().specs()
    }

    /// The tools and the state of each MCP server.
    pub fn toolbox(&self) -> &Toolbox {
        &self.tools
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
}

/// What the policy needs to know about a call's tool.
pub(super) struct Facts {
    /// Made once per call: every rule sees the same name.
    pub(super) qualified: QualifiedName,
    pub(super) tool_may_ask: bool,
    pub(super) tool_asks: bool,
}

impl Facts {
    pub(super) fn info<'a>(&'a self, scope: &'a Scope, call: &'a ToolCall) -> CallInfo<'a> {
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

/// Who may approve `call` under `policy`.
pub(super) fn approvers<'a>(policy: &'a Policy, call: &ToolCall) -> Approvers<'a> {
    let qualified = QualifiedName::of(&call.name);
    let tool = ToolInfo {
        name: &call.name,
        qualified: &qualified,
        tool_may_ask: true,
    };
    policy.approvers(&tool, &call.args)
}

/// Whether `who` may make this decision on `issued` (approve or not),
/// running `run` (an edit of it, if any): an approver of the question must
/// also be one of the edit, whose arguments may need others (`escalate`).
/// The one place approvers are judged.
pub(super) fn may_decide(
    policy: &Policy,
    who: Decider<'_>,
    issued: &Issued,
    run: Option<&ToolCall>,
    approve: bool,
) -> Result<(), Refusal> {
    let requester = issued.principal.as_str();
    let asked = approvers(policy, &issued.call);
    check::decider(asked, requester, who, approve)?;
    match run.filter(|run| approve && run.args != issued.call.args) {
        Some(edit) => {
            check::decider(approvers(policy, edit), requester, who, approve).map_err(|refusal| {
                Refusal::NotApprover(format!("this edit needs another approver: {refusal}"))
            })
        }
        None => Ok(()),
    }
}

/// Whether `decision` on `issued` may reach past its call (`remember`,
/// `approveNext`): judged for the call as asked and as it would run.
pub(super) fn may_grant(
    policy: &Policy,
    issued: &Issued,
    run: Option<&ToolCall>,
    decision: &Decision,
) -> Result<(), Refusal> {
    // Most decisions grant nothing: then who the approvers are is moot,
    // and working them out (names qualified, lists built) is skipped.
    if !check::grants(decision) {
        return Ok(());
    }
    let mut asked = vec![approvers(policy, &issued.call)];
    asked.extend(run.map(|run| approvers(policy, run)));
    check::grant(decision, &asked)?;
    check::narrowed(decision, run.unwrap_or(&issued.call))
}
