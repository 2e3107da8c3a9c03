//! `ChatRequest::from_slice`, the parser of every `/stream` and `/api/chat`
//! body (both forms): an error or a request that keeps the parser's limits,
//! its chat id what a header and a URL path carry unchanged, and its tool
//! call ids printable (no line of the log to forge).
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
    let chat_id = request.chat_id.as_str();
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    assert!(
        !chat_id.is_empty() && chat_id.bytes().all(unreserved),
        "{request:?}"
    );
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
