//! The admission step, one case per line of the table: what is known,
//! the decision, and the plan or the refusal it earns.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Known, Plan, admit};
use crate::call::{Fingerprint, ToolCall};
use crate::confirm::check::{Edits, Refusal};
use crate::confirm::{Answer, Decision, Remember, Scope};
use crate::policy::{Mode, Policy, ToolPolicies, ToolRule};
use crate::protocol::ConfirmationProtocol::Adk;
use crate::store::Issued;

const NOW: u64 = 1_000;
const EXPIRES: u64 = 2_000;
/// The digest of the tool's definition when it was asked.
const ASKED: &str = "asked-definition";

/// Alice's question about `tool` with `args`, open until [`EXPIRES`].
fn asked(tool: &str, args: Value) -> Issued {
    let call = ToolCall {
        id: "call-1".into(),
        name: tool.into(),
        args,
    };
    let (chat_id, principal) = ("chat".to_owned(), "alice".to_owned());
    let (id, hint) = ("adk-1".to_owned(), format!("{tool}?"));
    Issued {
        id,
        chat_id,
        principal,
        hint,
        protocol: Adk,
        call,
        issued_at_ms: 0,
        expires_at_ms: EXPIRES,
        kind: crate::store::RecordKind::Question,
        fingerprint: Some(Fingerprint {
            definition: ASKED.into(),
            call: "call-fingerprint".into(),
        }),
    }
}

fn issued() -> Issued {
    asked("pay", json!({"amount": 50}))
}

fn approve(edited: Option<Value>, remember: Option<Remember>) -> Decision {
    Decision::Approve {
        payload: None,
        remember,
        approve_next: None,
        edited,
        grant: None,
    }
}

fn deny() -> Decision {
    Decision::Deny { reason: None }
}

fn respond(output: Value) -> Decision {
    Decision::Respond { output }
}

/// `pay` asks; `audit` needs an approver with the role `finance`.
fn policy() -> Policy {
    let rules: BTreeMap<String, ToolRule> =
        match yaml_serde::from_str("audit: {approvers: [role:finance]}") {
            Ok(rules) => rules,
            Err(e) => panic!("{e}"),
        };
    match Policy::new(Mode::EventBased, &ToolPolicies::default(), rules) {
        Ok(policy) => policy,
        Err(e) => panic!("{e}"),
    }
}

/// What each case changes from a question of alice's, decided by alice
/// out of band, on time.
struct Case {
    name: &'static str,
    issued: Issued,
    principal: &'static str,
    roles: Vec<String>,
    now: u64,
    editable: bool,
    upstream: bool,
    output_schema: Option<Value>,
    /// The digest of the tool's definition now (`None`: no longer offered).
    definition: Option<String>,
    /// An answer in the chat (as `chat`'s user), not a decision out of band.
    chat: Option<(Answer, Scope)>,
    decision: Decision,
    expected: Result<Plan, Refusal>,
}

fn case(name: &'static str, decision: Decision, expected: Result<Plan, Refusal>) -> Case {
    Case {
        name,
        issued: issued(),
        principal: "alice",
        roles: Vec::new(),
        now: NOW,
        editable: false,
        upstream: false,
        output_schema: None,
        definition: Some(ASKED.into()),
        chat: None,
        decision,
        expected,
    }
}

fn in_chat(mut case: Case, chat_id: &str) -> Case {
    let answer = Answer {
        confirmation_id: "adk-1".into(),
        original: Some(issued().call),
        decision: case.decision.clone(),
        protocol: Adk,
        seal: None,
    };
    let scope = Scope {
        chat_id: chat_id.into(),
        principal: "alice".into(),
    };
    case.chat = Some((answer, scope));
    case
}

fn asked_of_finance(mut case: Case) -> Case {
    case.issued.call.name = "audit".into();
    case
}

fn claim(args: Value) -> Result<Plan, Refusal> {
    Ok(Plan::Claim(asked("pay", args).call))
}

#[test]
fn every_rule_a_decision_passes_before_its_claim() {
    let schema = json!({"type": "object", "properties": {"amount": {"type": "number"}}});
    let output = json!({"type": "object", "required": ["paid"]});
    let issued_call = || claim(json!({"amount": 50}));
    let cases = [
        case("the asker denies", deny(), issued_call()),
        case("the asker approves", approve(None, None), issued_call()),
        case(
            "the asker approves an edit",
            approve(Some(json!({"amount": 40})), None),
            claim(json!({"amount": 40})),
        )
        .editable(),
        case(
            "an edit of a tool that takes none",
            approve(Some(json!({"amount": 40})), None),
            Err(Refusal::NotEditable("pay".into())),
        ),
        case(
            "an edit that does not fit the schema",
            approve(Some(json!({"amount": "forty"})), None),
            Err(Refusal::InvalidEdit(
                "/amount breaks the `type` rule".into(),
            )),
        )
        .editable(),
        case(
            "the asker remembers it",
            approve(None, Some(Remember::Chat)),
            issued_call(),
        ),
        case("a response", respond(json!({"paid": true})), issued_call())
            .with_output(output.clone()),
        case(
            "a response that does not fit",
            respond(json!({"sent": true})),
            Err(Refusal::InvalidResponse {
                tool: "pay".into(),
                why: "\"paid\" is a required property".into(),
            }),
        )
        .with_output(output.clone()),
        case(
            "a response to an upstream agent's call",
            respond(json!({"paid": true})),
            Err(Refusal::NoResponse),
        )
        .upstream(),
        case("too late", approve(None, None), Ok(Plan::Expired)).at(EXPIRES + 1),
        case("too late to deny", deny(), Ok(Plan::Expired)).at(EXPIRES + 1),
        case(
            "another user approves",
            approve(None, None),
            Err(Refusal::NotApprover(
                "only the user who asked may approve this call".into(),
            )),
        )
        .by("bob", &[]),
        case(
            "the asker approves what finance approves",
            approve(None, None),
            Err(Refusal::NotApprover(
                "the user who asked may not approve this call themselves; waiting for role:finance"
                    .into(),
            )),
        )
        .of_finance(),
        case(
            "the asker denies what finance approves",
            deny(),
            claim_audit(),
        )
        .of_finance(),
        case("finance approves", approve(None, None), claim_audit())
            .of_finance()
            .by("carol", &["finance"]),
        case(
            "finance approves and remembers",
            approve(None, Some(Remember::Chat)),
            Err(Refusal::NoGrant("role:finance".into())),
        )
        .of_finance()
        .by("carol", &["finance"]),
        case(
            "a stranger, too late",
            approve(None, None),
            Err(Refusal::NotApprover(
                "only the user who asked may approve this call".into(),
            )),
        )
        .by("bob", &[])
        .at(EXPIRES + 1),
        in_chat(
            case("an answer in the chat", approve(None, None), issued_call()),
            "chat",
        ),
        in_chat(
            case(
                "an answer in another chat",
                approve(None, None),
                Err(Refusal::OtherChat),
            ),
            "elsewhere",
        ),
        in_chat(
            case(
                "an answer in the chat, too late",
                approve(None, None),
                Ok(Plan::Expired),
            ),
            "chat",
        )
        .at(EXPIRES + 1),
        in_chat(
            case(
                "an answer in the chat in place of an upstream agent's call",
                respond(json!({"paid": true})),
                Err(Refusal::NoResponse),
            ),
            "chat",
        )
        .upstream(),
        // The tool as offered now must be the one asked about.
        case(
            "an approval after the tool was relisted",
            approve(None, None),
            Ok(Plan::Stale),
        )
        .relisted(Some("relisted")),
        case(
            "an approval after the tool went away",
            approve(None, None),
            Ok(Plan::Stale),
        )
        .relisted(None),
        case(
            "an edit approved after the tool was relisted",
            approve(Some(json!({"amount": 40})), None),
            Ok(Plan::Stale),
        )
        .editable()
        .relisted(Some("relisted")),
        case(
            "a denial after the tool was relisted",
            deny(),
            issued_call(),
        )
        .relisted(Some("relisted")),
        case(
            "a response after the tool was relisted",
            respond(json!({"paid": true})),
            issued_call(),
        )
        .relisted(Some("relisted")),
        case(
            "a stranger's approval after the tool was relisted",
            approve(None, None),
            Err(Refusal::NotApprover(
                "only the user who asked may approve this call".into(),
            )),
        )
        .by("bob", &[])
        .relisted(Some("relisted")),
        case(
            "too late, and relisted",
            approve(None, None),
            Ok(Plan::Expired),
        )
        .at(EXPIRES + 1)
        .relisted(Some("relisted")),
        case(
            "a question from before fingerprints",
            approve(None, None),
            issued_call(),
        )
        .unfingerprinted()
        .relisted(Some("relisted")),
        in_chat(
            case(
                "an answer in the chat after the tool was relisted",
                approve(None, None),
                Ok(Plan::Stale),
            ),
            "chat",
        )
        .relisted(Some("relisted")),
        in_chat(
            case(
                "a denial in the chat after the tool was relisted",
                deny(),
                issued_call(),
            ),
            "chat",
        )
        .relisted(Some("relisted")),
    ];
    for case in cases {
        let edits = Edits {
            editable: case.editable,
            schema: &schema,
            max_bytes: 1_000,
        };
        let policy = policy();
        let known = Known {
            issued: &case.issued,
            principal: case.principal,
            roles: &case.roles,
            source: crate::identity::Source::Key,
            policy: &policy,
            now_ms: case.now,
            edits,
            upstream: case.upstream,
            output_schema: case.output_schema.as_ref(),
            definition: case.definition.as_deref(),
            chat: case.chat.as_ref().map(|(answer, scope)| (answer, scope)),
        };
        let got = admit(&known, &case.decision);
        assert_eq!(got, case.expected, "{}", case.name);
    }
}

fn claim_audit() -> Result<Plan, Refusal> {
    Ok(Plan::Claim(asked("audit", json!({"amount": 50})).call))
}

/// The builder a table's case is written with.
mod case;
