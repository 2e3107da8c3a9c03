use futures::StreamExt;
use sse_stream::{Sse, SseByteStream};

use super::Decoder;
use crate::provider::ProviderError;

/// A request body as JSON (`null` when it could not be built or read).
pub fn body_json(body: Result<Vec<u8>, ProviderError>) -> serde_json::Value {
    serde_json::from_slice(&body.unwrap_or_default()).unwrap_or_default()
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

/// The `get_weather` call for Paris the history tests replay.
pub fn weather_call(id: &str) -> crate::call::ToolCall {
    crate::call::ToolCall {
        id: id.into(),
        name: "get_weather".into(),
        args: serde_json::json!({"city": "Paris"}),
    }
}

/// The tool message that denies that call "not now".
pub fn weather_denied(call_id: &str) -> crate::provider::ModelMessage {
    crate::provider::ModelMessage::Tool(vec![crate::provider::ToolResult {
        call_id: call_id.into(),
        tool_name: "get_weather".into(),
        outcome: crate::provider::ResultContent::Denied {
            reason: Some("not now".into()),
        },
    }])
}

/// The one tool the history tests offer: `get_weather`.
pub fn weather_tools() -> std::sync::Arc<[crate::call::ToolSpec]> {
    vec![crate::call::ToolSpec {
        name: "get_weather".into(),
        description: "Weather".into(),
        parameters: serde_json::json!({"type": "object"}),
    }]
    .into()
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
