//! The real AI SDK client against the real binary in front of a real ADK
//! agent (`model.provider: adk`, app `payments` of
//! `tests/fixtures/adk/agents/`): the `adk-*` flows of conformance/chat.mjs,
//! over SSE and over `/live`, with ADK's confirmation card and with native
//! approvals, each chunk validated with the client's own schema. Compiled
//! with both the `conformance` and the `adk` features; needs Node.js, the
//! npm clients and `TOOLGATE_TEST_ADK`, and fails without them.

use crate::common::Binary;
use crate::common::adk::Adk;
use crate::conformance::{all_passed, installed, run};

const ADK_FLOWS: [&str; 3] = ["adk-text", "adk-approve", "adk-deny"];
const NATIVE_FLOWS: [&str; 3] = ["adk-text", "adk-native-approve", "adk-native-deny"];

/// `(npm package alias, confirmation protocol, transport)`.
const RUNS: [(&str, &str, &str); 6] = [
    ("ai", "adk", "sse"),
    ("ai", "adk", "ws"),
    ("ai", "ai-sdk", "sse"),
    ("ai", "ai-sdk", "ws"),
    ("ai-5.0.60", "adk", "sse"),
    ("ai-6.0.0", "ai-sdk", "sse"),
];

#[test]
fn real_clients_drive_an_adk_agent_through_toolgate() {
    let dir = installed();
    let adk = Adk::start();
    let model = format!(
        "model:\n  provider: adk\n  baseUrl: {}\n  app: payments\n",
        adk.url
    );
    let server = Binary::serve_yaml(&model, &[]);
    all_passed(RUNS.iter().map(|&(client, protocol, transport)| {
        let flows = if protocol == "adk" {
            ADK_FLOWS
        } else {
            NATIVE_FLOWS
        };
        let args = [&["--transport", transport][..], &flows[..]].concat();
        let (passed, report) = run(&dir, &server.url, client, protocol, &args);
        // Every named flow ran: none skipped for the wrong protocol.
        let all = format!("{} passed, 0 failed", flows.len());
        (
            passed && report.contains(&all),
            format!("in front of ADK, {transport} {report}"),
        )
    }));
}
