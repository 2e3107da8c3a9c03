//! The answers a request carries: the whole body parsed, then every tool
//! part read as an answer, as a turn reads them. Fails closed: only an
//! explicit yes is an approval, and a request the parser took holds no
//! malformed answer (one parser, `AnswerKeys`, judges both).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate::protocol::answer::{Answer, Decision};
use toolgate::protocol::{ChatRequest, ConfirmationProtocol, Part, ToolState};

fuzz_target!(|body: &[u8]| {
    let Ok(request) = ChatRequest::from_slice(body) else {
        return;
    };
    let tools = request
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Tool(tool) => Some(tool),
            _ => None,
        });
    for part in tools {
        let pending = Answer::is_pending(part);
        // The request's parser refuses a malformed answer, so a parsed
        // request holds none: nothing can run on one.
        let answer = match Answer::from_part(part) {
            Ok(Some(answer)) => answer,
            Ok(None) => continue,
            Err(e) => panic!("a parsed request holds a malformed answer ({e}): {part:?}"),
        };
        assert!(!pending, "a pending question with an answer: {part:?}");
        if !matches!(answer.decision, Decision::Approve { .. }) {
            continue;
        }
        let explicit_yes = match (&answer.protocol, &part.state) {
            (ConfirmationProtocol::Adk, ToolState::OutputAvailable { output, .. }) => {
                output.get("confirmed") == Some(&Value::Bool(true))
            }
            (ConfirmationProtocol::AiSdk, ToolState::ApprovalResponded(approval)) => {
                approval.approved == Some(true)
            }
            _ => false,
        };
        assert!(explicit_yes, "approved without an explicit yes: {part:?}");
    }
});
