//! Each real provider against a mock of its API: fixtures replayed in
//! awkward pieces give the same exact bytes, the confirmation round trip
//! works unchanged, and every failure ends the stream with a clear error.

use crate::common;
use crate::common::assert_contains;

use std::time::Duration;

use common::upstream::{Answer, Split, Upstream, sse_fixture};
use common::{Reply, Server, approval, user_says};
use serde_json::Value;
use toolgate::Config;
use toolgate::config::{ProviderKind, Secret};

const KEY: &str = "sk-test-0123456789abcdef";

fn config(provider: ProviderKind, upstream: &Upstream) -> Config {
    let mut config = Config::default();
    config.model.provider = provider;
    config.model.model = Some("test-model".into());
    config.model.base_url = Some(upstream.url.clone());
    config.model.api_key = Some(Secret(KEY.into()));
    config.model.read_timeout_secs = Some(1.0);
    config.model.retries = Some(1);
    config
}

async fn serve(provider: ProviderKind, answers: Vec<Answer>) -> (Server, Upstream) {
    let upstream = Upstream::start(answers).await;
    let server = Server::with_config(config(provider, &upstream)).await;
    (server, upstream)
}

/// One turn of "What is the weather in Paris?" against `answers`.
async fn weather(provider: ProviderKind, answers: Vec<Answer>) -> (Reply, Upstream) {
    let (server, upstream) = serve(provider, answers).await;
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        server.chat(&user_says("chat-w", "What is the weather in Paris?")),
    )
    .await
    .unwrap_or_else(|_| panic!("the turn hung"));
    (reply, upstream)
}

/// The error chunks of a reply, which must be its last chunk.
fn error_of(reply: &Reply) -> String {
    let chunks = reply.chunks();
    let last = chunks.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "error", "{}", reply.body);
    assert!(!reply.body.contains(KEY), "the key leaked: {}", reply.body);
    last["errorText"].as_str().unwrap_or_default().to_owned()
}

/// Replays `fixture` (then `after_tool` for a second step) whole, byte by
/// byte, and cut awkwardly: the client gets the same bytes every time.
async fn replay(provider: ProviderKind, dir: &str, fixture: &str) -> String {
    let mut bodies = Vec::new();
    for split in [Split::Whole, Split::Bytes, Split::Awkward] {
        let answer = |name| Answer::Sse {
            bytes: sse_fixture(dir, name),
            split,
            gap: Duration::ZERO,
        };
        let (reply, _) = weather(provider, vec![answer(fixture), answer("after_tool")]).await;
        assert_eq!(reply.status, 200);
        bodies.push(reply.body);
    }
    assert_eq!(bodies[0], bodies[1], "{fixture}: byte by byte differs");
    assert_eq!(bodies[0], bodies[2], "{fixture}: awkward cuts differ");
    bodies.swap_remove(0)
}

/// The confirmation round trip: the model asks to pay, the user approves,
/// the payment runs once, and the model's second request holds its own call
/// and the result, never the confirmation wrapper.
async fn round_trip(provider: ProviderKind, dir: &str) -> Vec<Value> {
    let answers = vec![
        Answer::sse(sse_fixture(dir, "payment")),
        Answer::sse(sse_fixture(dir, "after_tool")),
    ];
    let (server, upstream) = serve(provider, answers).await;
    let first = server.says("chat-pay", "Send 50 USD to Hanako").await;
    assert_eq!(common::asked_call(&first)["name"], "process_payment");
    assert_eq!(server.payments(), 0);

    let second = server.chat(&approval("chat-pay", &first)).await;
    assert_eq!(server.payments(), 1, "{}", second.body);
    assert!(common::transaction(&second).is_some(), "{}", second.body);
    assert_eq!(second.text(), "It is sunny in Paris.");

    let received = upstream.received();
    assert_eq!(received.len(), 2);
    let sent = received[1].body.to_string();
    assert!(!sent.contains(common::confirmation_name()), "{sent}");
    assert_contains(&sent, "process_payment");
    assert_contains(&sent, "Hanako");
    assert_contains(&sent, "transactionId");
    received.into_iter().map(|r| r.body).collect()
}

/// One snapshot test per upstream fixture of `$provider`, run with `P`.
macro_rules! fixtures {
    ($provider:literal: $($name:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            let body = replay(P, $provider, stringify!($name)).await;
            assert_sse!(concat!($provider, "_", stringify!($name)), body);
        }
    )*};
}

mod openai {
    use super::*;

    const P: ProviderKind = ProviderKind::Openai;

    fixtures!("openai":
        text,
        reasoning,
        tool_call,
        parallel_tool_calls,
        tool_call_one_chunk,
        missing_index,
        empty_arguments,
        no_done,
    );

    #[tokio::test]
    async fn confirmation_round_trip() {
        let bodies = round_trip(P, "openai").await;
        let messages = bodies[1]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool"]);
        assert_eq!(messages[1]["tool_calls"][0]["id"], "call_Pay");
        assert_eq!(messages[2]["tool_call_id"], "call_Pay");
        assert_eq!(bodies[0]["stream"], true);
        assert_eq!(bodies[0]["stream_options"]["include_usage"], true);
        assert_eq!(bodies[0]["model"], "test-model");
    }

    #[tokio::test]
    async fn the_key_and_extra_headers_are_sent() {
        let upstream = Upstream::start(vec![Answer::sse(sse_fixture("openai", "text"))]).await;
        let mut config = config(P, &upstream);
        config
            .model
            .headers
            .insert("X-Title".into(), "toolgate tests".into());
        let server = Server::with_config(config).await;
        server.says("chat-h", "hi").await;
        let received = upstream.received();
        assert_eq!(
            received[0]
                .headers
                .get("x-title")
                .and_then(|v| v.to_str().ok()),
            Some("toolgate tests")
        );
        assert_eq!(received[0].path, "/chat/completions");
        assert_eq!(
            received[0]
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok()),
            Some(format!("Bearer {KEY}").as_str())
        );
    }

    #[tokio::test]
    async fn a_truncated_stream_is_an_error_after_the_text_it_had() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("openai", "truncated"))]).await;
        assert_eq!(reply.text(), "It is sun");
        assert!(error_of(&reply).contains("ended before its answer finished"));
    }

    #[tokio::test]
    async fn a_malformed_event_is_an_error() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("openai", "malformed"))]).await;
        assert_eq!(reply.text(), "Hi");
        assert!(error_of(&reply).contains("not a chunk"));
    }

    #[tokio::test]
    async fn an_error_event_is_reported() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("openai", "error_event"))]).await;
        assert_eq!(
            error_of(&reply),
            "openai reported an error: Provider returned error"
        );
    }
}

mod anthropic {
    use super::*;

    const P: ProviderKind = ProviderKind::Anthropic;

    fixtures!("anthropic": text, thinking, tool_call, parallel_tool_calls);

    #[tokio::test]
    async fn confirmation_round_trip() {
        let bodies = round_trip(P, "anthropic").await;
        let messages = bodies[1]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(messages[1]["content"][0]["type"], "tool_use");
        assert_eq!(messages[1]["content"][0]["id"], "toolu_01Pay");
        assert_eq!(messages[1]["content"][0]["input"]["amount"], 50);
        assert_eq!(messages[2]["content"][0]["type"], "tool_result");
        assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_01Pay");
        assert_eq!(bodies[0]["stream"], true);
        assert!(bodies[0]["max_tokens"].as_u64().is_some());
    }

    /// The thinking signature goes to the client and comes back to the model.
    #[tokio::test]
    async fn a_thinking_signature_makes_the_round_trip() {
        let answers = vec![
            Answer::sse(sse_fixture("anthropic", "thinking")),
            Answer::sse(sse_fixture("anthropic", "after_tool")),
        ];
        let (server, upstream) = serve(P, answers).await;
        let first = server.says("chat-t", "think").await;
        let end = first.of_type("reasoning-end");
        let signature = end[0]["providerMetadata"]["anthropic"]["signature"].clone();
        assert!(signature.is_string(), "{}", first.body);
        let reasoning = first.of_type("reasoning-delta");
        let text: String = reasoning
            .iter()
            .filter_map(|c| c["delta"].as_str())
            .collect();
        let follow_up = serde_json::json!({
            "id": "chat-t", "trigger": "submit-message",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "think"}]},
                {"id": "a1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": text, "state": "done", "providerMetadata": end[0]["providerMetadata"]},
                    {"type": "text", "text": first.text(), "state": "done"}
                ]},
                {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "and?"}]}
            ]
        });
        server.chat(&follow_up).await;
        let sent = &upstream.received()[1].body;
        let thinking = &sent["messages"][1]["content"][0];
        assert_eq!(thinking["type"], "thinking", "{sent}");
        assert_eq!(thinking["signature"], signature);
        assert_eq!(thinking["thinking"], text.as_str());
    }

    #[tokio::test]
    async fn the_key_and_version_headers_are_sent() {
        let (_, upstream) = weather(P, vec![Answer::sse(sse_fixture("anthropic", "text"))]).await;
        let received = upstream.received();
        assert_eq!(received[0].path, "/messages");
        let header = |name| received[0].headers.get(name).and_then(|v| v.to_str().ok());
        assert_eq!(header("x-api-key"), Some(KEY));
        assert_eq!(header("anthropic-version"), Some("2023-06-01"));
    }

    #[tokio::test]
    async fn an_error_event_is_reported() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("anthropic", "error"))]).await;
        assert_eq!(
            error_of(&reply),
            "anthropic reported an error: overloaded_error: Overloaded"
        );
    }

    #[tokio::test]
    async fn a_truncated_stream_is_an_error_after_the_text_it_had() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("anthropic", "truncated"))]).await;
        assert_eq!(reply.text(), "Bonjour from the café ");
        assert!(error_of(&reply).contains("ended before its answer finished"));
    }
}

mod gemini {
    use super::*;

    const P: ProviderKind = ProviderKind::Gemini;

    fixtures!("gemini": text, thinking, tool_call, parallel_tool_calls);

    /// Gemini's calls have no ids; the signature rides on the confirmation
    /// through the client and back to Gemini with the call.
    #[tokio::test]
    async fn confirmation_round_trip() {
        let bodies = round_trip(P, "gemini").await;
        let contents = bodies[1]["contents"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let roles: Vec<&str> = contents.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "model", "user"]);
        let call = &contents[1]["parts"][0];
        assert_eq!(call["functionCall"]["name"], "process_payment");
        assert_eq!(call["functionCall"]["args"]["amount"], 50);
        assert_eq!(call["thoughtSignature"], "CiQBPaySignatureX7");
        let response = &contents[2]["parts"][0]["functionResponse"];
        assert_eq!(response["name"], "process_payment");
        assert_eq!(response["response"]["output"]["status"], "completed");
    }

    /// Within one turn, the next step sends the signature back too.
    #[tokio::test]
    async fn a_thought_signature_goes_back_with_its_call() {
        let answers = vec![
            Answer::sse(sse_fixture("gemini", "tool_call")),
            Answer::sse(sse_fixture("gemini", "after_tool")),
        ];
        let (reply, upstream) = weather(P, answers).await;
        let available = reply.of_type("tool-input-available");
        let signature = available[0]["providerMetadata"]["google"]["thoughtSignature"].clone();
        assert!(signature.is_string(), "{}", reply.body);
        let sent = &upstream.received()[1].body;
        assert_eq!(
            sent["contents"][1]["parts"][0]["thoughtSignature"], signature,
            "{sent}"
        );
    }

    #[tokio::test]
    async fn the_key_goes_in_a_header_not_the_url() {
        let (_, upstream) = weather(P, vec![Answer::sse(sse_fixture("gemini", "text"))]).await;
        let received = upstream.received();
        assert_eq!(
            received[0].path,
            "/models/test-model:streamGenerateContent?alt=sse"
        );
        let key = received[0]
            .headers
            .get("x-goog-api-key")
            .and_then(|v| v.to_str().ok());
        assert_eq!(key, Some(KEY));
    }

    #[tokio::test]
    async fn an_error_event_is_reported() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("gemini", "error"))]).await;
        assert_eq!(
            error_of(&reply),
            "gemini reported an error: The model is overloaded."
        );
    }

    #[tokio::test]
    async fn a_truncated_stream_is_an_error_after_the_text_it_had() {
        let (reply, _) = weather(P, vec![Answer::sse(sse_fixture("gemini", "truncated"))]).await;
        assert_eq!(reply.text(), "Bonjour ! Il fait beau à");
        assert!(error_of(&reply).contains("ended before its answer finished"));
    }
}

#[test]
fn mock_cuts_rejoin_to_the_original() {
    use common::upstream::cut;
    let bytes = "data: {\"a\":\"é😀\"}\n\n".as_bytes();
    for split in [Split::Whole, Split::Bytes, Split::Awkward] {
        assert_eq!(cut(bytes, split).concat(), bytes);
    }
    let awkward = cut(bytes, Split::Awkward);
    assert!(awkward.iter().any(|p| p.ends_with(b"data:")));
    assert!(awkward.iter().any(|p| std::str::from_utf8(p).is_err()));
}

/// What every HTTP provider shares, shown with the OpenAI one.
mod failures {
    use super::*;

    const P: ProviderKind = ProviderKind::Openai;

    fn status(code: u16, headers: Vec<(&'static str, String)>, body: &str) -> Answer {
        Answer::Status {
            status: code,
            headers,
            body: body.into(),
        }
    }

    #[tokio::test]
    async fn an_upstream_error_shows_its_message_but_never_the_key() {
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","type":"invalid_request_error"}}}}"#
        );
        let (reply, upstream) = weather(P, vec![status(401, vec![], &body)]).await;
        assert_eq!(
            error_of(&reply),
            "openai answered HTTP 401: Incorrect API key provided: [redacted]"
        );
        assert_eq!(upstream.received().len(), 1, "a 401 is not retried");
    }

    /// A redirect would take the key and the conversation to another host.
    #[tokio::test]
    async fn a_redirect_is_not_followed() {
        let elsewhere = Upstream::start(vec![Answer::sse(sse_fixture("openai", "text"))]).await;
        let location = format!("{}/steal", elsewhere.url);
        let (reply, _) = weather(P, vec![status(307, vec![("location", location)], "")]).await;
        assert_eq!(error_of(&reply), "openai answered HTTP 307: no message");
        assert!(elsewhere.received().is_empty());
    }

    #[tokio::test]
    async fn a_server_error_is_not_retried() {
        let (reply, upstream) = weather(P, vec![status(500, vec![], "upstream exploded")]).await;
        assert_eq!(
            error_of(&reply),
            "openai answered HTTP 500: upstream exploded"
        );
        assert_eq!(upstream.received().len(), 1, "the upstream may have acted");
    }

    #[tokio::test]
    async fn a_long_retry_after_is_reported_not_waited_for() {
        let body = r#"{"error":{"message":"Rate limit reached"}}"#;
        let (reply, upstream) = weather(
            P,
            vec![status(429, vec![("retry-after", "30".into())], body)],
        )
        .await;
        assert_eq!(
            error_of(&reply),
            "openai answered HTTP 429: Rate limit reached (retry after 30 s)"
        );
        assert_eq!(upstream.received().len(), 1);
    }

    #[tokio::test]
    async fn a_short_rate_limit_is_retried_before_the_first_byte() {
        let answers = vec![
            status(429, vec![("retry-after", "0".into())], "{}"),
            Answer::sse(sse_fixture("openai", "text")),
        ];
        let (reply, upstream) = weather(P, answers).await;
        assert_eq!(reply.text(), "Bonjour à tous 👋");
        assert_eq!(upstream.received().len(), 2);
    }

    #[tokio::test]
    async fn retries_are_bounded() {
        let busy = status(503, vec![("retry-after", "0".into())], "busy");
        let (reply, upstream) = weather(P, vec![busy]).await;
        assert_eq!(
            error_of(&reply),
            "openai answered HTTP 503: busy (retry after 0 s)"
        );
        assert_eq!(upstream.received().len(), 2, "one try and one retry");
    }

    #[tokio::test]
    async fn an_upstream_that_never_answers_times_out() {
        let (reply, upstream) = weather(P, vec![Answer::Hang]).await;
        assert_eq!(error_of(&reply), "openai sent nothing for 1 s");
        assert_eq!(upstream.received().len(), 1, "it may be working on it");
    }

    #[tokio::test]
    async fn an_upstream_that_stalls_mid_stream_times_out() {
        let text = sse_fixture("openai", "truncated");
        let (reply, _) = weather(P, vec![Answer::Stall { bytes: text }]).await;
        assert_eq!(reply.text(), "It is sun");
        assert_eq!(error_of(&reply), "openai sent nothing for 1 s");
    }

    #[tokio::test]
    async fn a_delta_reaches_the_client_before_the_upstream_says_more() {
        use futures::StreamExt;
        let text = sse_fixture("openai", "truncated");
        let (server, _upstream) = serve(P, vec![Answer::Stall { bytes: text }]).await;
        let mut body = server.open(&user_says("chat-now", "hi")).await;
        let mut seen = String::new();
        while !seen.contains("It is sun") {
            match body.next().await {
                Some(Ok(piece)) => seen.push_str(&String::from_utf8_lossy(&piece)),
                other => panic!("{other:?} after {seen}"),
            }
        }
        // The upstream is still silent: the read timeout has not fired yet.
        assert!(!seen.contains("\"error\""), "{seen}");
    }

    #[tokio::test]
    async fn a_dropped_connection_is_an_error() {
        let text = sse_fixture("openai", "truncated");
        let (reply, upstream) = weather(P, vec![Answer::Drop { bytes: text }]).await;
        assert_eq!(reply.text(), "It is sun");
        assert!(
            error_of(&reply).starts_with("model stream broke: the connection to the model broke"),
            "{}",
            reply.body
        );
        assert_eq!(upstream.received().len(), 1, "never retried after a byte");
    }

    #[tokio::test]
    async fn an_unreachable_upstream_is_an_error() -> anyhow::Result<()> {
        // A port that was free a moment ago.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .and_then(|l| l.local_addr())?;
        let upstream = Upstream::start(vec![]).await;
        let mut config = config(P, &upstream);
        config.model.base_url = Some(format!("http://{closed}"));
        let server = Server::with_config(config).await;
        let reply = server.says("chat-x", "hi").await;
        assert!(
            error_of(&reply).starts_with("cannot reach openai: "),
            "{}",
            reply.body
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_client_that_leaves_cancels_the_upstream_request() {
        use futures::StreamExt;
        let event = br#"data: {"choices":[{"index":0,"delta":{"content":"more "}}]}

"#
        .to_vec();
        let endless = Answer::Endless {
            event,
            gap: Duration::from_millis(20),
        };
        let (server, upstream) = serve(P, vec![endless]).await;
        let mut body = server.open(&user_says("chat-bye", "talk forever")).await;
        let mut seen = String::new();
        while seen.matches("more ").count() < 5 {
            match body.next().await {
                Some(Ok(piece)) => seen.push_str(&String::from_utf8_lossy(&piece)),
                other => panic!("{other:?} after {seen}"),
            }
        }
        // The turn is still running when the client leaves.
        assert!(
            !seen.contains("\"finish\"") && !seen.contains("\"error\""),
            "{seen}"
        );
        drop(body);
        assert!(
            upstream.client_gone(Duration::from_secs(5)).await,
            "the upstream kept streaming after the client left"
        );
    }
}
