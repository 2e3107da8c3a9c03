use futures::StreamExt;
use sse_stream::{Sse, SseByteStream};

use super::{Decoder, ModelApi};
use crate::provider::{
    AssistantContent, ModelMessage, ModelOptions, ModelRequest, ProviderError, ProviderEvent,
};

/// The body `A` makes of `request`, as JSON (`null` when it could not be
/// built or read).
pub fn body_of<A: ModelApi>(options: &ModelOptions, request: &ModelRequest) -> serde_json::Value {
    serde_json::from_slice(&body_bytes::<A>(options, request)).unwrap_or_default()
}

/// The bytes of the body `A` makes of `request` (empty when it could not
/// be built), the tools declared as a request to the model declares them.
pub fn body_bytes<A: ModelApi>(options: &ModelOptions, request: &ModelRequest) -> Vec<u8> {
    let tools = match request.tools.is_empty() {
        true => None,
        false => super::model::declarations::<A>(&request.tools).ok(),
    };
    A::body(options, request, tools.as_deref()).unwrap_or_default()
}

/// `extraBody` from its pairs.
pub fn extra_body<const N: usize>(
    pairs: [(&str, serde_json::Value); N],
) -> serde_json::Map<String, serde_json::Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// `data:` payloads through `decoder`, ended as the driver ends them.
pub fn decode_data<D: Decoder>(
    mut decoder: D,
    events: &[&str],
) -> Result<Vec<D::Event>, ProviderError> {
    let mut out = Vec::new();
    for event in events {
        if decoder.event(Sse::default().data(*event), &mut out)? {
            return Ok(out);
        }
    }
    decoder.end(&mut out)?;
    Ok(out)
}

/// Raw SSE bytes through the real parser in 7-byte reads, then
/// `decoder`: the events, and the error that ended them if any.
pub fn decode_sse<D: Decoder>(
    mut decoder: D,
    bytes: &[u8],
) -> (Vec<D::Event>, Option<ProviderError>) {
    let reads: Vec<Result<bytes::Bytes, std::io::Error>> = bytes
        .chunks(7)
        .map(|chunk| Ok(bytes::Bytes::copy_from_slice(chunk)))
        .collect();
    let events: Vec<_> =
        futures::executor::block_on(SseByteStream::new(futures::stream::iter(reads)).collect());
    let mut out = Vec::new();
    for event in events {
        let Ok(event) = event else {
            panic!("unreadable SSE: {event:?}")
        };
        match decoder.event(event, &mut out) {
            Ok(false) => {}
            Ok(true) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
    let last = decoder.end(&mut out).err();
    (out, last)
}

/// `tests/fixtures/providers/{provider}/{name}.sse`.
pub fn fixture(provider: &str, name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/providers/{provider}/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `get_weather` call for Paris the history tests replay, with the
/// metadata its provider attached.
pub fn weather_call(id: &str, metadata: Option<serde_json::Value>) -> AssistantContent {
    AssistantContent::ToolCall {
        call: crate::call::ToolCall {
            id: id.into(),
            name: "get_weather".into(),
            args: serde_json::json!({"city": "Paris"}),
        },
        metadata,
    }
}

/// The tool message that denies that call "not now".
pub fn weather_denied(call_id: &str) -> ModelMessage {
    ModelMessage::Tool(vec![crate::provider::ToolResult {
        call_id: call_id.into(),
        tool_name: "get_weather".into(),
        outcome: crate::provider::ResultContent::Denied {
            reason: Some("not now".into()),
        },
    }])
}

/// A request of `messages` that offers the one tool the history tests
/// know: `get_weather`.
pub fn weather_request(messages: Vec<ModelMessage>) -> ModelRequest {
    let tools = vec![crate::call::ToolSpec {
        name: "get_weather".into(),
        description: "Weather".into(),
        parameters: serde_json::json!({"type": "object"}),
    }];
    ModelRequest {
        messages,
        tools: tools.into(),
    }
}

/// The `Finish` event with these token counts.
pub fn finish(
    reason: crate::provider::StopReason,
    input_tokens: u64,
    output_tokens: u64,
) -> crate::provider::ProviderEvent {
    crate::provider::ProviderEvent::Finish {
        reason,
        usage: crate::provider::Usage {
            input_tokens,
            output_tokens,
        },
    }
}

/// The one call `events` hold, whole and followed by a finish for tool
/// calls: its id, name, metadata and arguments.
pub fn lone_call(
    events: &[ProviderEvent],
) -> Option<(&str, &str, Option<&serde_json::Value>, &str)> {
    match events {
        [
            ProviderEvent::ToolCallStart { id, name, metadata },
            ProviderEvent::ToolCallDelta { id: args_of, delta },
            ProviderEvent::ToolCallEnd { id: end_of },
            ProviderEvent::Finish {
                reason: crate::provider::StopReason::ToolCalls,
                ..
            },
        ] if args_of == id && end_of == id => Some((id, name, metadata.as_deref(), delta)),
        _ => None,
    }
}

/// The body with the tools' declarations written in as bytes is the body
/// serde_json writes for the same map with them as values: its keys are
/// `keys`, in that order, it is compact, and `tools` is the declarations
/// (or `replaced`, an extra `tools` the options set).
pub fn check_declared_body<A: ModelApi>(
    options: &ModelOptions,
    keys: &[&str],
    replaced: Option<&serde_json::Value>,
) {
    use crate::provider::UserContent;
    let request = weather_request(vec![ModelMessage::User(vec![UserContent::Text(
        "weather in \"Paris\"?".into(),
    )])]);
    let bytes = body_bytes::<A>(options, &request);
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    assert_eq!(
        serde_json::to_vec(&body).unwrap_or_default(),
        bytes,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let order: Vec<&str> = body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(order, keys);
    let declared = A::tools(&request.tools);
    assert_eq!(body.get("tools"), Some(replaced.unwrap_or(&declared)));
}

/// Options that set every key the APIs know.
pub fn full_options() -> ModelOptions {
    ModelOptions {
        model: "m".into(),
        temperature: Some(0.5),
        max_tokens: Some(100),
        ..ModelOptions::default()
    }
}

/// Reads a request's head from `socket`, for a test's server: its text.
pub async fn read_head(socket: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket
            .read(&mut buf)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 0, "closed before the end of the head");
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&head).into_owned()
}
