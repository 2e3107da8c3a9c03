//! The upstream engine's pure parts: what ADK is told, what the client is
//! shown, and what counts as a step, with no ADK and no gate.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::answers::{Decided, forged, settled};
use super::events::in_step;
use super::new_message;
use crate::agent::event::AgentEvent;
use crate::agent::{card_settled, decided_answer};
use crate::call::ToolCall;
use crate::confirm::{Answered, CONFIRMATION_TOOL};
use crate::protocol::{Part, Role, ToolPart, ToolState, UiMessage};
use crate::provider::UserContent;
use crate::provider::adk::{AdkEvent, Confirmation, Reply};
use crate::store::Outcome;

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "pay".into(),
        args: json!({"amount": 5}),
    }
}

fn decided(verdict: Answered, payload: Option<Value>) -> Decided {
    Decided {
        id: "adk-1".into(),
        native: false,
        echo: None,
        payload,
        verdict,
    }
}

fn output(value: Value) -> Outcome {
    Outcome::Output {
        output: value,
        ran_with: None,
        responded: false,
    }
}

fn tool(id: &str, name: &str, state: ToolState) -> Part {
    Part::Tool(ToolPart {
        tool_call_id: id.into(),
        tool_name: name.into(),
        dynamic: false,
        input: json!({}),
        state,
        provider_executed: false,
        call_provider_metadata: None,
    })
}

fn message(role: Role, parts: Vec<Part>) -> UiMessage {
    UiMessage {
        id: "m".into(),
        role,
        parts,
    }
}

#[test]
fn adk_hears_approved_or_not_and_the_payload_only_with_an_approval() {
    let payload = Some(json!({"days": 3}));
    let reply = |confirmed: bool, payload: Option<Value>| {
        Some(Reply {
            confirmation_id: "adk-1".into(),
            confirmed,
            payload,
        })
    };
    let cases = [
        // Approved here, a client-side hand-back: ADK runs it.
        (
            Answered::Client { call: call("c") },
            reply(true, payload.clone()),
        ),
        (
            Answered::Recorded {
                call: call("c"),
                outcome: Outcome::HandedOff { ran_with: None },
            },
            reply(true, payload.clone()),
        ),
        // Decided otherwise: no, and no payload.
        (
            Answered::Recorded {
                call: call("c"),
                outcome: Outcome::Denied { reason: None },
            },
            reply(false, None),
        ),
        (
            Answered::Recorded {
                call: call("c"),
                outcome: Outcome::Expired,
            },
            reply(false, None),
        ),
        // Nothing for a refused answer: its question stays open.
        (Answered::Rejected("no".into()), None),
    ];
    for (case, (verdict, expected)) in cases.into_iter().enumerate() {
        let reply = decided(verdict, payload.clone()).reply();
        assert_eq!(reply, expected, "case {case}");
    }
}

#[test]
fn an_approval_is_settled_without_an_outcome_a_decision_with_one() {
    assert_eq!(
        settled(Answered::Client { call: call("c") }),
        Some((call("c"), None))
    );
    let handed = Outcome::HandedOff { ran_with: None };
    assert_eq!(
        settled(Answered::Recorded {
            call: call("c"),
            outcome: handed
        }),
        Some((call("c"), None))
    );
    for outcome in [
        Outcome::Denied {
            reason: Some("no".into()),
        },
        Outcome::Expired,
        Outcome::Cancelled,
        output(json!(1)),
    ] {
        let recorded = Answered::Recorded {
            call: call("c"),
            outcome: outcome.clone(),
        };
        assert_eq!(settled(recorded), Some((call("c"), Some(outcome))));
    }
    assert_eq!(settled(Answered::Rejected("no".into())), None);
}

#[test]
fn only_a_result_for_a_waiting_call_is_forged() {
    let done = ToolState::OutputAvailable {
        output: json!(1),
        preliminary: false,
    };
    let parts = vec![
        tool("waits", "pay", done.clone()),
        tool("free", "pay", done.clone()),
        tool("waits-too", "pay", ToolState::InputAvailable),
        // The confirmation's own part carries the answer, not a result.
        tool("waits-card", CONFIRMATION_TOOL, done),
        tool(
            "waits-error",
            "pay",
            ToolState::OutputError {
                error_text: "x".into(),
            },
        ),
    ];
    let waiting: HashSet<&str> = ["waits", "waits-too", "waits-card", "waits-error"].into();
    assert_eq!(
        forged(&message(Role::Assistant, parts), &waiting),
        ["waits", "waits-error"]
    );
}

#[test]
fn a_step_is_what_the_agent_does_not_what_was_decided_here() {
    let decided: HashSet<String> = ["refused".to_owned()].into();
    let approved: HashMap<String, (ToolCall, Option<String>)> =
        [("approved".to_owned(), (call("approved"), None))].into();
    let ran = |id: &str| AdkEvent::Output {
        id: id.into(),
        name: "pay".into(),
        output: json!(1),
    };
    let confirm = AdkEvent::Confirm(Confirmation {
        id: "adk-1".into(),
        original: call("c"),
        hint: None,
        payload: None,
    });
    let cases = [
        (AdkEvent::Step, false),
        (AdkEvent::Call(call("c")), false),
        (AdkEvent::TextDelta("hi".into()), true),
        (AdkEvent::ReasoningDelta("hm".into()), true),
        (confirm, true),
        (ran("c"), true),
        (ran("refused"), false),
        (ran("approved"), false),
    ];
    for (event, expected) in cases {
        assert_eq!(in_step(&event, &decided, &approved), expected, "{event:?}");
    }
}

#[test]
fn adk_hears_the_last_user_message_text_and_files() {
    let file = Part::File {
        media_type: "image/png".into(),
        url: "data:image/png;base64,AA==".into(),
        filename: None,
    };
    let history = [
        message(Role::User, vec![Part::Text("old".into())]),
        message(Role::Assistant, vec![Part::Text("answer".into())]),
        message(
            Role::User,
            vec![Part::StepStart, Part::Text("new".into()), file],
        ),
        message(Role::Assistant, Vec::new()),
    ];
    assert_eq!(
        new_message(&history),
        [
            UserContent::Text("new".into()),
            UserContent::File {
                media_type: "image/png".into(),
                url: "data:image/png;base64,AA==".into(),
            },
        ]
    );
    let silent = [message(Role::User, vec![Part::StepStart])];
    assert!(new_message(&silent).is_empty());
    assert!(new_message(&[]).is_empty());
}

#[test]
fn a_card_decided_elsewhere_reads_as_the_clients_answer() {
    let responded = Outcome::Output {
        output: json!({"policy": "30 days"}),
        ran_with: None,
        responded: true,
    };
    let cases = [
        (
            responded,
            json!({"decision": "respond", "output": {"policy": "30 days"}}),
        ),
        (output(json!(1)), json!({"confirmed": true})),
        (
            Outcome::HandedOff { ran_with: None },
            json!({"confirmed": true}),
        ),
        (
            Outcome::Denied { reason: None },
            json!({"confirmed": false}),
        ),
        (Outcome::Expired, json!({"confirmed": false})),
        (Outcome::Cancelled, json!({"confirmed": false})),
    ];
    for (outcome, expected) in cases {
        assert_eq!(decided_answer(&outcome), expected, "{outcome:?}");
    }
}

#[test]
fn a_card_nobody_answered_ends_as_an_error() {
    let answer = json!({"confirmed": false});
    let card =
        |outcome: Option<&Outcome>| card_settled("adk-1".into(), answer.clone(), outcome, "pay");
    assert!(matches!(
        card(Some(&Outcome::Expired)),
        AgentEvent::Rejected { tool_call_id, .. } if tool_call_id == "adk-1"
    ));
    assert!(matches!(
        card(Some(&Outcome::Cancelled)),
        AgentEvent::Rejected { .. }
    ));
    let confirmed = AgentEvent::Confirmed {
        confirmation_id: "adk-1".into(),
        output: answer.clone(),
    };
    assert_eq!(card(Some(&Outcome::Denied { reason: None })), confirmed);
    assert_eq!(card(None), confirmed);
}
