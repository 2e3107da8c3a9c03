//! `ChatRequest::from_slice`, the parser of every `/stream` and `/api/chat`
//! body (both forms): an error or a request that keeps the parser's limits,
//! its chat id and tool call ids printable (no line of the log to forge).
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate::protocol::ChatRequest;
use toolgate::protocol::message::Part;
use toolgate::protocol::request::MAX_PARTS_PER_MESSAGE;

fn printable(id: &str) -> bool {
    !id.chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
}

fuzz_target!(|body: &[u8]| {
    let Ok(request) = ChatRequest::from_slice(body) else {
        return;
    };
    assert!(!request.chat_id.trim().is_empty(), "{request:?}");
    assert!(printable(&request.chat_id), "{request:?}");
    for message in &request.messages {
        assert!(message.parts.len() <= MAX_PARTS_PER_MESSAGE);
        for part in &message.parts {
            if let Part::Tool(tool) = part {
                assert!(printable(&tool.tool_call_id), "{request:?}");
            }
        }
    }
    let _ = request.continued_message();
});
