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
