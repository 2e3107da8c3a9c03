//! An ADK agent's `/run_sse` decoder over the SSE events of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate::provider::adk::{AdkEvent, Decode};

fuzz_target!(|body: &[u8]| {
    let (events, _) = toolgate_fuzz::run(Decode::new(), body);
    for event in events {
        match event {
            AdkEvent::Call(call) => assert!(!call.id.is_empty(), "{call:?}"),
            AdkEvent::Confirm(asked) => {
                assert!(!asked.id.is_empty() && !asked.original.id.is_empty());
                assert_ne!(asked.original.name, "adk_request_confirmation");
            }
            AdkEvent::Step
            | AdkEvent::TextDelta(_)
            | AdkEvent::ReasoningDelta(_)
            | AdkEvent::Output { .. } => {}
        }
    }
});
