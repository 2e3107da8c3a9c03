//! The pipeline's admission step: whether a decision on an issued question
//! may claim it, as a pure function of what is known (the question, who
//! decides, the clock, the policy, the tool's schemas) and the decision.
//! Nothing here reads the store or the clock: `pipeline.rs` gathers the
//! facts, then claims, acts, records and audits what this admits.

use serde_json::Value;

use super::check::{self, Decider, Edits, Refusal};
use super::facts::{may_decide, may_grant};
use super::{Answer, Decision, Scope};
use crate::call::ToolCall;
use crate::identity::Source;
use crate::policy::Policy;
use crate::store::Issued;

/// What is known when a decision arrives.
#[derive(Clone, Copy)]
pub(super) struct Known<'a> {
    pub issued: &'a Issued,
    /// Who decides (empty: someone the server does not know), and their roles.
    pub principal: &'a str,
    pub roles: &'a [String],
    /// How toolgate knows who decides (`approverIdentity`).
    pub source: Source,
    pub policy: &'a Policy,
    pub now_ms: u64,
    /// What an edit of the arguments must pass.
    pub edits: Edits<'a>,
    /// The call is an upstream agent's: it runs it, and takes no response.
    pub upstream: bool,
    /// The tool's output schema, which a response must fit (`None`: any does).
    pub output_schema: Option<&'a Value>,
    /// The digest of the tool's definition as offered now (`None`: it is
    /// not offered), against which an approval's question must be fresh.
    pub definition: Option<&'a str>,
    /// An answer in the chat and the chat's scope: it names the question's
    /// chat, user, protocol and call, checked before anything else.
    pub chat: Option<(&'a Answer, &'a Scope)>,
}

impl Known<'_> {
    /// Who decides, as the rules judge it.
    fn decider(&self) -> Decider<'_> {
        Decider {
            principal: self.principal,
            roles: self.roles,
            source: self.source,
        }
    }
}

/// What an admitted decision does next.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Plan {
    /// Claim the question; an approval runs this call (the issued one, or the edit).
    Claim(ToolCall),
    /// Its window closed: it ends as expired, or as a decision that came first.
    Expired,
    /// An approval of a question whose tool changed since it was asked: it
    /// ends without running, as stale, or as a decision that came first.
    Stale,
}

/// Every rule a decision passes before it may claim its question, in the
/// order its face checks them: an answer in the chat is first checked
/// against the question (and ends it when expired), a decision out of
/// band first fits its edit or response, then its decider, then its grant,
/// and only then the clock. Last, an approval runs only while the tool is
/// offered as it was when asked: otherwise the question ends as stale.
pub(super) fn admit(known: &Known<'_>, decision: &Decision) -> Result<Plan, Refusal> {
    let issued = known.issued;
    let approve = decision.needs_approver();
    let Some((answer, scope)) = known.chat else {
        let run = match decision {
            Decision::Approve {
                edited: Some(edited),
                ..
            } => Some(check::edit(issued, Some(edited), known.edits)?),
            Decision::Respond { output } => {
                response(known, output)?;
                None
            }
            Decision::Approve { .. } | Decision::Deny { .. } => None,
        };
        may_decide(known.policy, known.decider(), issued, run.as_ref(), approve)?;
        may_grant(known.policy, issued, run.as_ref(), decision)?;
        if known.now_ms > issued.expires_at_ms {
            return Ok(Plan::Expired);
        }
        if runs(decision) && check::fresh(issued, known.definition).is_err() {
            return Ok(Plan::Stale);
        }
        return Ok(Plan::Claim(run.unwrap_or_else(|| issued.call.clone())));
    };
    let run = match check::check(answer, issued, scope, known.now_ms, known.edits) {
        Ok(run) => run,
        Err(Refusal::Expired) => return Ok(Plan::Expired),
        Err(refusal) => return Err(refusal),
    };
    // Approvers and four eyes: a refused approval leaves the question open.
    let decider = Decider {
        principal: scope.principal.as_str(),
        ..known.decider()
    };
    may_decide(known.policy, decider, issued, Some(&run), approve)?;
    may_grant(known.policy, issued, Some(&run), decision)?;
    if let Decision::Respond { output } = decision {
        response(known, output)?;
    }
    if runs(decision) && check::fresh(issued, known.definition).is_err() {
        return Ok(Plan::Stale);
    }
    Ok(Plan::Claim(run))
}

/// Whether `decision` would run the call (an approval; a denial or a
/// response runs nothing, so it is taken on a stale question too).
fn runs(decision: &Decision) -> bool {
    matches!(decision, Decision::Approve { .. })
}

/// Whether `output` may stand as the call's result: not for an upstream
/// agent's call (it runs its calls and hears only yes or no), and fitting
/// the tool's output schema where it declares one.
fn response(known: &Known<'_>, output: &Value) -> Result<(), Refusal> {
    let tool = &known.issued.call.name;
    fits(known.upstream, tool, output, known.output_schema)
}

/// Whether `output` may stand as the result of a call of `tool`, given
/// whether an upstream agent runs it and the tool's output schema.
pub(super) fn fits(
    upstream: bool,
    tool: &str,
    output: &Value,
    schema: Option<&Value>,
) -> Result<(), Refusal> {
    if upstream {
        return Err(Refusal::NoResponse);
    }
    check::response(tool, output, schema)
}

#[cfg(test)]
mod tests;
