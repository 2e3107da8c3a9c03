//! `ChatRequest::from_slice`, the parser of every `/stream` and `/api/chat`
//! body (both forms): an error or a request that keeps the parser's limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate::protocol::ChatRequest;
use toolgate::protocol::request::MAX_PARTS_PER_MESSAGE;

fuzz_target!(|body: &[u8]| {
    let Ok(request) = ChatRequest::from_slice(body) else {
        return;
    };
    assert!(!request.chat_id.trim().is_empty(), "{request:?}");
    for message in &request.messages {
        assert!(message.parts.len() <= MAX_PARTS_PER_MESSAGE);
    }
    let _ = request.continued_message();
});
