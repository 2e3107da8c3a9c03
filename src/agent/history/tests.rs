use super::*;
use serde_json::{Value, json};

fn tool(id: &str, name: &str, input: Value, state: ToolState) -> Part {
    Part::Tool(ToolPart {
        tool_call_id: id.into(),
        tool_name: name.into(),
        dynamic: false,
        input,
        state,
        provider_executed: false,
        call_provider_metadata: None,
    })
}

fn user(text: &str) -> UiMessage {
    message("u", Role::User, vec![Part::Text(text.into())])
}

fn message(id: &str, role: Role, parts: Vec<Part>) -> UiMessage {
    UiMessage {
        id: id.into(),
        role,
        parts,
    }
}

/// The ADK confirmation card that asks for `pay` 50 as `call-1`.
fn pay_card(state: ToolState) -> Part {
    tool(
        "adk-1",
        CONFIRMATION_TOOL,
        json!({"originalFunctionCall": {"id": "call-1", "name": "pay", "args": {"amount": 50}}}),
        state,
    )
}

#[test]
fn the_model_sees_the_original_call_not_the_wrapper() {
    let args = json!({"amount": 50});
    let confirmation = tool(
        "adk-1",
        CONFIRMATION_TOOL,
        json!({"originalFunctionCall": {"id": "call-1", "name": "process_payment", "args": args}}),
        ToolState::OutputAvailable {
            output: json!({"confirmed": true}),
            preliminary: false,
        },
    );
    let original = tool(
        "call-1",
        "process_payment",
        args.clone(),
        ToolState::OutputError {
            error_text: "User denied execution: too much".into(),
        },
    );
    let assistant = message(
        "a",
        Role::Assistant,
        vec![
            Part::StepStart,
            confirmation,
            original,
            Part::StepStart,
            Part::Text("ok".into()),
        ],
    );
    let call = ToolCall {
        id: "call-1".into(),
        name: "process_payment".into(),
        args,
    };
    assert_eq!(
        to_model_messages(&[user("pay"), assistant]),
        vec![
            ModelMessage::User(vec![UserContent::Text("pay".into())]),
            ModelMessage::Assistant(vec![AssistantContent::ToolCall {
                call,
                metadata: None
            }]),
            ModelMessage::Tool(vec![ToolResult {
                call_id: "call-1".into(),
                tool_name: "process_payment".into(),
                outcome: ResultContent::Denied {
                    reason: Some("too much".into())
                },
            }]),
            ModelMessage::Assistant(vec![AssistantContent::Text("ok".into())]),
        ]
    );
}

#[test]
fn unanswered_and_rejected_confirmations_still_get_a_result() {
    let wrapper = |id: &str, state| {
        tool(
            id,
            CONFIRMATION_TOOL,
            json!({"originalFunctionCall": {"id": format!("call-{id}"), "name": "t", "args": {}}}),
            state,
        )
    };
    let assistant = message(
        "a",
        Role::Assistant,
        vec![
            wrapper("1", ToolState::InputAvailable),
            wrapper(
                "2",
                ToolState::OutputError {
                    error_text: "confirmation expired".into(),
                },
            ),
        ],
    );
    let messages = to_model_messages(&[assistant, user("next")]);
    let Some(ModelMessage::Tool(results)) = messages.get(1) else {
        panic!("{messages:?}")
    };
    let outcomes: Vec<_> = results.iter().map(|r| r.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [
            ResultContent::Error(UNANSWERED.into()),
            ResultContent::Error("confirmation expired".into())
        ]
    );
}

#[test]
fn an_edited_call_is_shown_as_it_ran() {
    let card = pay_card(ToolState::OutputAvailable {
        output: json!({"confirmed": true, "editedArgs": {"amount": 40}}),
        preliminary: false,
    });
    let ran = tool(
        "call-1",
        "pay",
        json!({"amount": 40}),
        ToolState::OutputAvailable {
            output: json!({"paid": 40}),
            preliminary: false,
        },
    );
    let assistant = message("a", Role::Assistant, vec![card, ran]);
    let messages = to_model_messages(&[user("pay"), assistant]);
    let Some(ModelMessage::Assistant(content)) = messages.get(1) else {
        panic!("{messages:?}")
    };
    let calls: Vec<&Value> = content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::ToolCall { call, .. } => Some(&call.args),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [&json!({"amount": 40})]);
}

#[test]
fn a_later_outcome_answers_a_card_left_open() {
    let card = pay_card(ToolState::InputAvailable);
    let asked = message("a", Role::Assistant, vec![card]);
    let later = message(
        "b",
        Role::Assistant,
        vec![Part::Data {
            name: MOVED_ON.into(),
            data: json!({"confirmationId": "adk-1", "toolCallId": "call-1", "toolName": "pay",
                         "outcome": {"kind": "output", "output": {"paid": 50}}}),
        }],
    );
    let history = [user("pay"), asked, user("hi"), later, user("and?")];
    let messages = to_model_messages(&history);
    let Some(ModelMessage::Tool(results)) = messages.get(2) else {
        panic!("{messages:?}")
    };
    assert_eq!(
        results[0].outcome,
        ResultContent::Output(json!({"paid": 50}))
    );
    // Brought once: no later turn looks it up again.
    assert!(earlier_questions(&history).is_empty());
    assert_eq!(
        earlier_questions(&history[..3]),
        [Earlier {
            confirmation_id: "adk-1".into()
        }]
    );
}
