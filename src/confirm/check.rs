//! Whether an answer may claim the confirmation it names: every rule it must
//! pass against what this server issued, as pure functions of values, each
//! failure a [`Refusal`].

use serde_json::Value;

use super::{Answer, Decision, OUTCOME_UNKNOWN, Scope, Signer, signing};
use crate::call::ToolCall;
use crate::identity::Source;
use crate::policy::Approvers;
use crate::protocol::ConfirmationProtocol;
use crate::store::{Issued, Outcome};
use crate::tools::Schema;

/// Why an answer (or an edit) is not taken. The texts are what the client
/// and the audit log read; a misfit's words name no value (`tools::Schema`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("confirmation signature is missing or does not match")]
    Unsigned,
    #[error("confirmation `{0}` was not issued by this server")]
    NotIssued(String),
    #[error("confirmation belongs to another chat")]
    OtherChat,
    #[error("confirmation belongs to another user")]
    OtherUser,
    #[error("confirmation answered in another form than it was asked")]
    OtherProtocol,
    /// The call the answer names is not the issued one (or none parses).
    #[error("{}", other_call(*.0))]
    OtherCall(ConfirmationProtocol),
    #[error("confirmation expired")]
    Expired,
    /// Claimed, but its outcome never came and never will.
    #[error("{OUTCOME_UNKNOWN}")]
    OutcomeUnknown,
    #[error("edited arguments exceed {0} bytes")]
    EditTooLarge(usize),
    #[error("the arguments of {0} may not be edited")]
    NotEditable(String),
    #[error("{tool} has no usable schema: {why}")]
    NoSchema { tool: String, why: String },
    #[error("edited arguments are not valid: {0}")]
    InvalidEdit(String),
    #[error("the response does not fit the output schema of {tool}: {why}")]
    InvalidResponse { tool: String, why: String },
    /// An upstream agent runs its calls and hears only yes or no.
    #[error("an upstream agent's call cannot be answered in its place; approve or deny it")]
    NoResponse,
    /// A decision by someone the tool's rule does not let decide.
    #[error("{0}")]
    NotApprover(String),
    /// `remember` or `approveNext` on a call that others approve.
    #[error(
        "`remember` and `approveNext` are only for calls the user who asked approves alone; \
         this call needs {0}: decide it without them"
    )]
    NoGrant(String),
    /// A narrowed `grant` on a call that others approve.
    #[error(
        "`grant` is only for calls the user who asked approves alone; this call needs {0}: \
         decide it without one"
    )]
    NoNarrowed(String),
    /// A narrowed `grant` that does not cover the very call it approves.
    #[error("the grant does not cover the call it approves: {0}")]
    OutsideGrant(String),
    /// An approval of a question whose tool is no longer offered as it was
    /// when it was asked (an MCP server relisted it differently).
    #[error("{}", stale_text(.0))]
    Stale(String),
}

/// What the approver, the audit log and the model read of a stale question.
pub fn stale_text(tool: &str) -> String {
    format!(
        "the definition of {tool} changed since this call was asked (its fingerprint no longer \
         matches the tool as offered now); it did not run: call it again to be asked again"
    )
}

/// Whether the tool of `issued` is still offered as it was when the
/// question was asked: `definition` is the digest of its definition now
/// (`None`: no longer offered). A question asked before toolgate kept
/// fingerprints, or about a tool it does not offer (an upstream agent's),
/// has none to compare.
pub fn fresh(issued: &Issued, definition: Option<&str>) -> Result<(), Refusal> {
    match &issued.fingerprint {
        Some(asked) if definition != Some(asked.definition.as_str()) => {
            Err(Refusal::Stale(issued.call.name.clone()))
        }
        Some(_) | None => Ok(()),
    }
}

/// Whether a grant (a remembered approval) made for the tool definition
/// `granted` applies to the tool as offered now (`definition`). One made
/// before toolgate kept digests applies as it did.
pub fn grant_holds(granted: Option<&str>, definition: Option<&str>) -> bool {
    granted.is_none_or(|granted| definition == Some(granted))
}

fn other_call(protocol: ConfirmationProtocol) -> &'static str {
    match protocol {
        ConfirmationProtocol::Adk => {
            "originalFunctionCall differs from the call this server issued"
        }
        ConfirmationProtocol::AiSdk => "the approved call differs from the call this server issued",
    }
}

/// Who makes a decision, as the rules judge it.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    /// Empty: someone the server does not know.
    pub principal: &'a str,
    /// `auth.roles`' and those the identity brings.
    pub roles: &'a [String],
    /// How toolgate knows them.
    pub source: Source,
}

/// Whether `principal` (holding `roles`, known by `source`) may approve,
/// or deny, a call `requester` asked for: the user who asked may always
/// deny or cancel it; an approval, and anyone else's decision, needs
/// `approvers` to allow it, from an identity as strong as they ask.
pub fn decider(
    approvers: Approvers<'_>,
    requester: &str,
    who: Decider<'_>,
    approve: bool,
) -> Result<(), Refusal> {
    let Decider {
        principal,
        roles,
        source,
    } = who;
    let own = principal == requester;
    if own && !approve {
        return Ok(());
    }
    let listed = approvers.may_approve(requester, principal, roles);
    if listed && approvers.verified(source) {
        return Ok(());
    }
    let who = approvers.describe();
    if listed {
        return Err(Refusal::NotApprover(format!(
            "only {who} may decide this call; this decision came with an identity from {}",
            source.word()
        )));
    }
    Err(Refusal::NotApprover(match (own, approve) {
        (true, _) => {
            format!("the user who asked may not approve this call themselves; waiting for {who}")
        }
        (false, true) => format!("only {who} may approve this call"),
        (false, false) => format!("only {who} or the user who asked may deny this call"),
    }))
}

/// Whether `decision` may grant beyond its call (`remember`, `approveNext`):
/// only where the user who asked decides alone, for the call as asked and
/// as it would run (`approvers`, one for each). A grant is the asker's own
/// standing approval; it never stands in for another approver, who would
/// otherwise see one call and approve many, nor lets four eyes be two.
pub fn grant(decision: &Decision, approvers: &[Approvers<'_>]) -> Result<(), Refusal> {
    match approvers.iter().find(|a| !a.asker_alone()) {
        Some(others) if grants(decision) => {
            let needs = match others.listed {
                [] if !others.distinct => others.describe(),
                [] => "an approver other than the user who asked".to_owned(),
                _ if others.distinct => format!("{}, not the user who asked", others.describe()),
                _ => others.describe(),
            };
            Err(match decision {
                Decision::Approve { grant: Some(_), .. } => Refusal::NoNarrowed(needs),
                _ => Refusal::NoGrant(needs),
            })
        }
        _ => Ok(()),
    }
}

/// Whether a narrowed grant covers the call its approval runs (`run`: the
/// issued one, or the edit): a grant reaches only calls like the one the
/// approver was shown, never one it pins away.
pub fn narrowed(decision: &Decision, run: &ToolCall) -> Result<(), Refusal> {
    match decision {
        Decision::Approve {
            grant: Some(grant), ..
        } => grant
            .covers(&run.args)
            .map_err(|outside| Refusal::OutsideGrant(outside.to_string())),
        Decision::Approve { .. } | Decision::Deny { .. } | Decision::Respond { .. } => Ok(()),
    }
}

/// Whether `decision` grants beyond its own call (`remember`, a positive
/// `approveNext`, a narrowed `grant`).
pub fn grants(decision: &Decision) -> bool {
    match decision {
        Decision::Approve {
            remember,
            approve_next,
            grant,
            ..
        } => remember.is_some() || approve_next.is_some_and(|n| n > 0) || grant.is_some(),
        Decision::Deny { .. } | Decision::Respond { .. } => false,
    }
}

/// What may be edited in the issued call's arguments.
#[derive(Debug, Clone, Copy)]
pub struct Edits<'a> {
    /// `toolConfirmation.tools.<tool>.editable`.
    pub editable: bool,
    /// The tool's JSON schema for its arguments (`null` for a tool now gone).
    pub schema: &'a Value,
    /// The most argument bytes a call may have.
    pub max_bytes: usize,
}

/// With signing on, whether the answer carries a seal over this scope and
/// the call it names. Checked before anything is looked up.
pub fn sealed(signer: Option<&Signer>, answer: &Answer, scope: &Scope) -> Result<(), Refusal> {
    let Some(signer) = signer else {
        return Ok(());
    };
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
    if verified {
        Ok(())
    } else {
        Err(Refusal::Unsigned)
    }
}

/// Every rule an answer in the chat must pass against `issued` before it
/// may claim it, in order: the same chat and principal, the same protocol,
/// the same call (id, name, arguments by value), unexpired at `now_ms`, and
/// an edit, if any, the tool allows. The call an approval would run.
pub fn check(
    answer: &Answer,
    issued: &Issued,
    scope: &Scope,
    now_ms: u64,
    edits: Edits<'_>,
) -> Result<ToolCall, Refusal> {
    if issued.chat_id != scope.chat_id {
        return Err(Refusal::OtherChat);
    }
    if issued.principal != scope.principal {
        return Err(Refusal::OtherUser);
    }
    if answer.protocol != issued.protocol {
        return Err(Refusal::OtherProtocol);
    }
    if !answer
        .original
        .as_ref()
        .is_some_and(|o| same_call(o, &issued.call))
    {
        return Err(Refusal::OtherCall(answer.protocol));
    }
    if now_ms > issued.expires_at_ms {
        return Err(Refusal::Expired);
    }
    let edited = match &answer.decision {
        Decision::Approve { edited, .. } => edited.as_ref(),
        Decision::Deny { .. } | Decision::Respond { .. } => None,
    };
    edit(issued, edited, edits)
}

/// Whether a person's response in place of a call of `tool` may stand as
/// its result: it must fit the tool's output schema, when the tool
/// declares one (`None`: any output fits, as nothing checks a tool's own).
pub fn response(tool: &str, output: &Value, schema: Option<&Value>) -> Result<(), Refusal> {
    let Some(schema) = schema else {
        return Ok(());
    };
    let schema = Schema::compile(schema).map_err(|why| Refusal::NoSchema {
        tool: tool.to_owned(),
        why,
    })?;
    match schema.misfit(output) {
        Some(why) => Err(Refusal::InvalidResponse {
            tool: tool.to_owned(),
            why,
        }),
        None => Ok(()),
    }
}

/// Whether `decision` repeats the one that ended in `outcome` (a replay,
/// `Ok`), or what was decided instead (a conflict): an approval ran the
/// call or handed it out, a denial recorded a denial, a response its
/// output; a response repeats only with the same output. (An expired
/// question is told apart before this.)
pub fn repeats(decision: &Decision, outcome: &Outcome) -> Result<(), &'static str> {
    let (earlier, same) = match outcome {
        Outcome::Output {
            output,
            responded: true,
            ..
        } => match decision {
            Decision::Respond { output: again } => (
                "responded to with another output",
                crate::json::same(output, again),
            ),
            Decision::Approve { .. } | Decision::Deny { .. } => ("responded to", false),
        },
        Outcome::Denied { .. } | Outcome::Expired | Outcome::Cancelled => {
            ("denied", matches!(decision, Decision::Deny { .. }))
        }
        Outcome::Output { .. } | Outcome::Error { .. } | Outcome::HandedOff { .. } => {
            ("approved", matches!(decision, Decision::Approve { .. }))
        }
    };
    if same { Ok(()) } else { Err(earlier) }
}

/// The call an approval runs: the issued one, or the user's edit of its
/// arguments where the tool allows edits and the edit fits its schema.
pub fn edit(
    issued: &Issued,
    edited: Option<&Value>,
    edits: Edits<'_>,
) -> Result<ToolCall, Refusal> {
    let Some(args) = edited.filter(|args| **args != issued.call.args) else {
        return Ok(issued.call.clone());
    };
    let name = &issued.call.name;
    if args.to_string().len() > edits.max_bytes {
        return Err(Refusal::EditTooLarge(edits.max_bytes));
    }
    if !edits.editable {
        return Err(Refusal::NotEditable(name.clone()));
    }
    let schema = Schema::compile(edits.schema).map_err(|why| Refusal::NoSchema {
        tool: name.clone(),
        why,
    })?;
    // `args` has the masked values put back: the words name no value.
    if let Some(why) = schema.misfit(args) {
        return Err(Refusal::InvalidEdit(why));
    }
    Ok(ToolCall {
        id: issued.call.id.clone(),
        name: name.clone(),
        args: args.clone(),
    })
}

/// Whether the client's call is the issued one. JSON numbers compare by
/// value: a JavaScript client sends back `50.0` as `50`. Integers compare
/// exactly, and a float equals an integer only where both are exact.
pub(super) fn same_call(claimed: &ToolCall, issued: &ToolCall) -> bool {
    claimed.id == issued.id
        && claimed.name == issued.name
        && crate::json::same(&claimed.args, &issued.args)
}

#[cfg(test)]
mod tests;
