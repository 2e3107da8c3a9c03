//! The rules an answer must pass, one case per line of the table: an
//! answer changed in one way from a good one, and the refusal it earns.

use serde_json::{Value, json};

use super::{
    Decider, Edits, Refusal, check, decider, edit, fresh, grant, grant_holds, repeats, response,
    sealed,
};
use crate::call::{Fingerprint, ToolCall};
use crate::confirm::{Answer, Decision, Remember, Scope, Seal, Signer, signing};
use crate::identity::{Source, Verified};
use crate::policy::Approvers;
use crate::protocol::ConfirmationProtocol::{Adk, AiSdk};
use crate::store::{Issued, Outcome};

const NOW: u64 = 1_000;
const EXPIRES: u64 = 2_000;

fn issued() -> Issued {
    Issued {
        id: "adk-1".into(),
        chat_id: "chat".into(),
        principal: "alice".into(),
        call: call(json!({"amount": 50, "to": "bob"})),
        hint: "pay?".into(),
        protocol: Adk,
        issued_at_ms: 0,
        expires_at_ms: EXPIRES,
        kind: crate::store::RecordKind::Question,
        fingerprint: None,
    }
}

fn call(args: Value) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: "pay".into(),
        args,
    }
}

fn scope() -> Scope {
    Scope::alice("chat")
}

fn approve(edited: Option<Value>) -> Decision {
    Decision::Approve {
        payload: None,
        remember: None,
        approve_next: None,
        edited,
        grant: None,
    }
}

/// The answer a well-behaved client sends back: approving the issued call.
fn good() -> Answer {
    Answer {
        confirmation_id: "adk-1".into(),
        original: Some(issued().call),
        decision: approve(None),
        protocol: Adk,
        seal: None,
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"amount": {"type": "number", "maximum": 100}, "to": {"type": "string"}},
        "required": ["amount", "to"],
    })
}

/// What each case changes: the answer, the scope, the clock, the edits.
struct Case {
    name: &'static str,
    answer: Answer,
    scope: Scope,
    now: u64,
    editable: bool,
    schema: Value,
    /// The arguments an approval would run with, or the refusal.
    expected: Result<Value, Refusal>,
}

fn case(name: &'static str, expected: Result<Value, Refusal>) -> Case {
    Case {
        name,
        answer: good(),
        scope: scope(),
        now: NOW,
        editable: false,
        schema: schema(),
        expected,
    }
}

fn issued_args() -> Result<Value, Refusal> {
    Ok(issued().call.args)
}

#[test]
fn every_rule_an_answer_must_pass() {
    let edited = |args: Value| Case {
        answer: Answer {
            decision: approve(Some(args)),
            ..good()
        },
        editable: true,
        ..case("", issued_args())
    };
    let with_original = |original: Option<ToolCall>| Answer { original, ..good() };
    let cases = [
        case("the issued call, approved", issued_args()),
        Case {
            answer: Answer {
                decision: Decision::Deny { reason: None },
                ..good()
            },
            ..case("a denial", issued_args())
        },
        Case {
            answer: Answer {
                decision: Decision::Respond {
                    output: json!({"paid": false}),
                },
                ..good()
            },
            ..case("a response", issued_args())
        },
        Case {
            answer: Answer {
                decision: Decision::Respond { output: json!(1) },
                ..with_original(Some(call(json!({"amount": 5000, "to": "bob"}))))
            },
            ..case(
                "a response about other arguments",
                Err(Refusal::OtherCall(Adk)),
            )
        },
        Case {
            now: EXPIRES + 1,
            answer: Answer {
                decision: Decision::Respond { output: json!(1) },
                ..good()
            },
            ..case("a response, expired", Err(Refusal::Expired))
        },
        Case {
            answer: with_original(Some(call(json!({"to": "bob", "amount": 50.0})))),
            ..case("arguments equal by value", issued_args())
        },
        Case {
            now: EXPIRES,
            ..case("at the last moment", issued_args())
        },
        Case {
            scope: Scope {
                chat_id: "other".into(),
                ..scope()
            },
            ..case("another chat", Err(Refusal::OtherChat))
        },
        Case {
            scope: Scope {
                principal: "mallory".into(),
                ..scope()
            },
            ..case("another user", Err(Refusal::OtherUser))
        },
        Case {
            answer: Answer {
                protocol: AiSdk,
                ..good()
            },
            ..case("another protocol", Err(Refusal::OtherProtocol))
        },
        Case {
            answer: with_original(None),
            ..case("no call that parses", Err(Refusal::OtherCall(Adk)))
        },
        Case {
            answer: with_original(Some(ToolCall {
                id: "call-2".into(),
                ..issued().call
            })),
            ..case("another call id", Err(Refusal::OtherCall(Adk)))
        },
        Case {
            answer: with_original(Some(ToolCall {
                name: "refund".into(),
                ..issued().call
            })),
            ..case("another tool", Err(Refusal::OtherCall(Adk)))
        },
        Case {
            answer: with_original(Some(call(json!({"amount": 5000, "to": "bob"})))),
            ..case("other arguments", Err(Refusal::OtherCall(Adk)))
        },
        Case {
            answer: with_original(Some(call(json!({"amount": 50, "to": "bob", "x": null})))),
            ..case("an extra argument", Err(Refusal::OtherCall(Adk)))
        },
        Case {
            now: EXPIRES + 1,
            ..case("expired", Err(Refusal::Expired))
        },
        Case {
            now: EXPIRES + 1,
            answer: with_original(None),
            ..case("the call before the clock", Err(Refusal::OtherCall(Adk)))
        },
        Case {
            name: "an edit",
            ..edited(json!({"amount": 20, "to": "bob"}))
        }
        .expect(Ok(json!({"amount": 20, "to": "bob"}))),
        Case {
            name: "an edit equal to the call",
            editable: false,
            ..edited(json!({"amount": 50, "to": "bob"}))
        },
        Case {
            name: "an edit of a tool that allows none",
            editable: false,
            ..edited(json!({"amount": 20, "to": "bob"}))
        }
        .expect(Err(Refusal::NotEditable("pay".into()))),
        Case {
            name: "an edit outside the schema",
            ..edited(json!({"amount": 500, "to": "bob"}))
        }
        .expect(Err(Refusal::InvalidEdit(
            "/amount breaks the `maximum` rule".into(),
        ))),
        Case {
            name: "an edit too large",
            ..edited(json!({"amount": 20, "to": "b".repeat(100)}))
        }
        .expect(Err(Refusal::EditTooLarge(64))),
        Case {
            name: "an edit of a tool now gone",
            schema: Value::Null,
            ..edited(json!({"amount": 20, "to": "bob"}))
        }
        .expect(Err(Refusal::NoSchema {
            tool: "pay".into(),
            why: "null is not of types \"boolean\", \"object\"".into(),
        })),
        Case {
            name: "an edit, expired",
            now: EXPIRES + 1,
            ..edited(json!({"amount": 500}))
        }
        .expect(Err(Refusal::Expired)),
    ];
    for case in cases {
        let edits = Edits {
            editable: case.editable,
            schema: &case.schema,
            max_bytes: 64,
        };
        let got = check(&case.answer, &issued(), &case.scope, case.now, edits).map(|c| c.args);
        assert_eq!(got, case.expected, "{}", case.name);
    }
}

impl Case {
    fn expect(self, expected: Result<Value, Refusal>) -> Self {
        Case { expected, ..self }
    }
}

#[test]
fn an_edit_keeps_the_issued_call_id_and_name() {
    let schema = schema();
    let edits = Edits {
        editable: true,
        schema: &schema,
        max_bytes: 1024,
    };
    let args = json!({"amount": 1, "to": "bob"});
    assert_eq!(edit(&issued(), Some(&args), edits), Ok(call(args)));
    assert_eq!(edit(&issued(), None, edits), Ok(issued().call));
}

#[test]
fn a_response_fits_the_tools_output_schema() {
    let schema = json!({
        "type": "object",
        "properties": {"policy": {"type": "string"}},
        "required": ["policy"],
        "additionalProperties": false,
    });
    let cases = [
        (json!({"policy": "30 days"}), Some(&schema), Ok(())),
        (json!("anything"), None, Ok(())),
        (
            json!({"policy": 30}),
            Some(&schema),
            Err(
                "the response does not fit the output schema of pay: /policy breaks the `type` rule",
            ),
        ),
        (
            json!({}),
            Some(&schema),
            Err(
                r#"the response does not fit the output schema of pay: "policy" is a required property"#,
            ),
        ),
        (
            json!({"policy": "x"}),
            Some(&json!(5)),
            Err(r#"pay has no usable schema: 5 is not of types "boolean", "object""#),
        ),
    ];
    for (output, schema, expected) in cases {
        let got = response("pay", &output, schema).map_err(|e| e.to_string());
        assert_eq!(got, expected.map_err(str::to_owned), "{output}");
    }
}

#[test]
fn a_second_decision_repeats_the_first_or_conflicts() {
    let output = |value: Value, responded: bool| Outcome::Output {
        output: value,
        ran_with: None,
        responded,
    };
    let respond = |value: Value| Decision::Respond { output: value };
    let deny = Decision::Deny {
        reason: Some("no".into()),
    };
    let ran = output(json!({"paid": true}), false);
    let responded = output(json!({"amount": 50.0}), true);
    let failed = Outcome::Error {
        message: "down".into(),
        ran_with: None,
    };
    let denied = Outcome::Denied { reason: None };
    let cases = [
        (approve(None), &ran, Ok(())),
        (approve(None), &failed, Ok(())),
        (
            approve(None),
            &Outcome::HandedOff { ran_with: None },
            Ok(()),
        ),
        (deny.clone(), &ran, Err("approved")),
        (respond(json!(1)), &ran, Err("approved")),
        (deny.clone(), &denied, Ok(())),
        (approve(None), &denied, Err("denied")),
        (respond(json!(1)), &denied, Err("denied")),
        (respond(json!({"amount": 50})), &responded, Ok(())),
        (
            respond(json!({"amount": 51})),
            &responded,
            Err("responded to with another output"),
        ),
        (approve(None), &responded, Err("responded to")),
        (deny, &responded, Err("responded to")),
    ];
    for (decision, outcome, expected) in cases {
        assert_eq!(
            repeats(&decision, outcome),
            expected,
            "{decision:?} after {outcome:?}"
        );
    }
}

/// Seals, the refusals' words, numbers by value, deciders and grants.
mod seals_and_deciders;

/// The tool as it was asked about: a stale approval, a grant's definition.
mod fingerprints;
