use super::*;

#[test]
fn error_messages_are_the_providers_own() {
    assert_eq!(
        message_of(br#"{"error":{"message":"Rate limit reached","type":"requests"}}"#),
        "Rate limit reached"
    );
    assert_eq!(
        message_of(br#"[{"error":{"code":400,"message":"API key not valid"}}]"#),
        "API key not valid"
    );
    assert_eq!(
        message_of(br#"{"error":"model not found"}"#),
        "model not found"
    );
    assert_eq!(message_of(b"Bad Gateway"), "Bad Gateway");
    assert_eq!(message_of(b""), "no message");
    assert_eq!(message_of("é".repeat(600).as_bytes()).chars().count(), 501);
}

#[test]
fn retry_after_in_seconds() {
    let mut headers = HeaderMap::new();
    assert_eq!(retry_after(&headers), None);
    headers.insert(RETRY_AFTER, HeaderValue::from_static("3"));
    assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
    headers.insert(
        RETRY_AFTER,
        HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
    );
    assert_eq!(retry_after(&headers), None);
    headers.insert(RETRY_AFTER, HeaderValue::from_static("-1"));
    assert_eq!(retry_after(&headers), None);
}

/// The body with the tools' declarations written in as bytes is the body
/// serde_json writes for the same map with them as values: the same keys
/// in the same places, compact; an extra `tools` still replaces them.
#[test]
fn declarations_written_in_are_the_body_serde_writes() {
    use serde_json::Value;

    use crate::provider::http::testing::{body_bytes, extra_body, weather_request};
    use crate::provider::{ModelMessage, ModelOptions, UserContent, anthropic, gemini, openai};

    fn check<A: ModelApi>(options: &ModelOptions, keys: &[&str], tools: Option<&Value>) {
        let request = weather_request(vec![ModelMessage::User(vec![UserContent::Text(
            "weather in \"Paris\"?".into(),
        )])]);
        let bytes = body_bytes::<A>(options, &request);
        let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
        // Written again by serde_json: the same bytes.
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
        assert_eq!(body.get("tools"), Some(tools.unwrap_or(&declared)));
    }

    let options = ModelOptions {
        model: "m".into(),
        temperature: Some(0.5),
        max_tokens: Some(100),
        ..ModelOptions::default()
    };
    let openai = [
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "temperature",
        "max_tokens",
    ];
    check::<openai::Decode>(&options, &openai, None);
    let anthropic = [
        "model",
        "max_tokens",
        "stream",
        "temperature",
        "tools",
        "messages",
    ];
    check::<anthropic::Decode>(&options, &anthropic, None);
    let gemini = ["contents", "tools", "generationConfig"];
    check::<gemini::Decode>(&options, &gemini, None);

    // An extra `tools` takes their place; an extra key goes last.
    let replaced = serde_json::json!({"mine": true});
    let options = ModelOptions {
        extra_body: extra_body([("tools", replaced.clone()), ("extra", 1.into())]),
        ..options
    };
    let mut keys = openai.to_vec();
    keys.push("extra");
    check::<openai::Decode>(&options, &keys, Some(&replaced));
}
