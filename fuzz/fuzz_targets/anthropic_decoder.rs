//! The anthropic stream decoder over the SSE events of the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate::ids::Ids;
use toolgate::provider::anthropic::Decode;

fuzz_target!(|body: &[u8]| {
    toolgate_fuzz::decode(Decode::new(Ids::sequential()), body);
});
