//! The hot path, measured in instructions under callgrind: one W1 turn
//! (`count to 100`) and one confirmation round trip (ask, approve, the
//! payment's result), each through the public router in process, body read
//! to the end. `scripts/instructions` runs it; see BENCHMARKS.md.
//!
//! Only `measured_post` is counted (`--toggle-collect`): the server's work
//! for one request, from the body handed to the router to the last byte
//! of the answer. It runs after warm-up turns, so start-up, the first
//! allocations and lazy statics are left out. One thread (a
//! current-thread runtime) keeps the count the same from run to run.
//!
//! Without an argument it runs both once, outside callgrind, and checks
//! what came back: `cargo bench --bench instructions`.

use std::hint::black_box;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::Request;
use bytes::Bytes;
use serde_json::{Value, json};
use toolgate::config::Settings;
use toolgate::ids::{Clock, Ids};
use toolgate::{App, Config};
use tower::ServiceExt;

/// Turns run before the measured one.
const WARM_UP: usize = 3;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => fail(&format!("no runtime: {e}")),
    };
    let settings = match Settings::new(Config::default()) {
        Ok(settings) => settings,
        Err(e) => fail(&format!("no settings: {e}")),
    };
    let router = App::new(settings)
        .with_ids(Ids::sequential())
        .with_clock(Clock::manual(1_800_000_000_000))
        .router();
    let mut chat = 0;
    let mut next_chat = || {
        chat += 1;
        format!("chat-{chat}")
    };
    match which.as_str() {
        // The answers are checked after the measured request: the memory
        // a check frees must not be the allocator's work (glibc merges
        // small freed blocks on a later large allocation) inside it.
        "w1" => {
            let warm: Vec<String> = (0..WARM_UP)
                .map(|_| runtime.block_on(count_turn(&router, &next_chat())))
                .collect();
            let body = says(&next_chat(), "count to 100");
            let measured = measured_post(&runtime, &router, body);
            for answer in warm.iter().chain([&text(&measured)]) {
                check_count(answer);
            }
        }
        "round-trip" => {
            let warm: Vec<String> = (0..WARM_UP)
                .map(|_| runtime.block_on(round_trip(&router, &next_chat())))
                .collect();
            // Both requests are counted; reading the question to build the
            // approval is the client's work, and is not.
            let chat = next_chat();
            let ask = says(&chat, "Send 50 USD to Hanako");
            let first = text(&measured_post(&runtime, &router, ask));
            let approve = approval(&chat, &first);
            let paid = text(&measured_post(&runtime, &router, approve));
            for answer in warm.iter().chain([&paid]) {
                check_paid(answer);
            }
        }
        "" | "--bench" => {
            check_count(&runtime.block_on(count_turn(&router, &next_chat())));
            check_paid(&runtime.block_on(round_trip(&router, &next_chat())));
            println!(
                "instructions: both paths answer as expected; scripts/instructions counts them"
            );
        }
        other => fail(&format!("unknown path `{other}`: w1 or round-trip")),
    }
}

/// One request, its body read to the end: the only code callgrind counts.
#[inline(never)]
fn measured_post(runtime: &tokio::runtime::Runtime, router: &Router, body: String) -> Bytes {
    black_box(runtime.block_on(post(router, body)))
}

async fn count_turn(router: &Router, chat: &str) -> String {
    text(&post(router, says(chat, "count to 100")).await)
}

/// The question, then the follow-up that approves it; the second body.
async fn round_trip(router: &Router, chat: &str) -> String {
    let first = text(&post(router, says(chat, "Send 50 USD to Hanako")).await);
    text(&post(router, approval(chat, &first)).await)
}

async fn post(router: &Router, body: String) -> Bytes {
    let request = Request::post("/stream")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(Body::from(body));
    let request = match request {
        Ok(request) => request,
        Err(e) => fail(&format!("bad request: {e}")),
    };
    let response = match router.clone().oneshot(request).await {
        Ok(response) => response,
        Err(e) => fail(&format!("no response: {e}")),
    };
    let status = response.status();
    let bytes = match to_bytes(response.into_body(), usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => fail(&format!("body: {e}")),
    };
    if !status.is_success() {
        fail(&format!("{status}: {}", text(&bytes)));
    }
    bytes
}

fn text(bytes: &Bytes) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn says(chat: &str, text: &str) -> String {
    json!({
        "id": chat,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]
    })
    .to_string()
}

fn chunks(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect()
}

/// The follow-up that approves the question `first` asked.
fn approval(chat: &str, first: &str) -> String {
    let chunks = chunks(first);
    let find = |kind: &str| {
        chunks
            .iter()
            .find(|c| c["type"] == kind)
            .cloned()
            .unwrap_or_else(|| fail(&format!("no {kind} chunk in {first}")))
    };
    let message_id = find("start")["messageId"].clone();
    let ask = find("tool-input-available");
    json!({
        "id": chat, "trigger": "submit-message", "messageId": message_id,
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Send 50 USD to Hanako"}]},
            {"id": message_id, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "tool-adk_request_confirmation", "toolCallId": ask["toolCallId"], "state": "output-available",
                 "input": ask["input"], "output": {"confirmed": true}, "callProviderMetadata": ask["providerMetadata"]}
            ]}
        ]
    })
    .to_string()
}

fn check_count(body: &str) {
    let deltas = chunks(body)
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .count();
    if deltas != 100 || !body.ends_with("data: [DONE]\n\n") {
        fail(&format!("W1 answered {deltas} deltas: {body}"));
    }
}

fn check_paid(body: &str) {
    if !body.contains("\"status\":\"completed\"") {
        fail(&format!("the approved payment did not complete: {body}"));
    }
}

fn fail(why: &str) -> ! {
    eprintln!("instructions: {why}");
    std::process::exit(1)
}
