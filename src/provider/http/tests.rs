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

/// A body that sends `reads` pieces `gap` apart, then nothing.
fn spaced(
    reads: usize,
    gap: Duration,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    Box::pin(futures::stream::unfold(0, move |n| async move {
        tokio::time::sleep(gap).await;
        if n == reads {
            std::future::pending::<()>().await;
        }
        Some((Ok(Bytes::from_static(b"x")), n + 1))
    }))
}

#[tokio::test]
async fn the_read_timeout_counts_from_each_wait_not_from_the_first() {
    // Each read comes before the limit (the body is polled before the
    // timer), and all of them take more than twice as long.
    let limit = Duration::from_millis(200);
    let mut reads = Reads {
        body: spaced(5, Duration::from_millis(100)),
        limit,
        timer: None,
        waiting: false,
    };
    let start = tokio::time::Instant::now();
    for _ in 0..5 {
        assert!(matches!(reads.next().await, Some(Ok(_))), "a read in time");
    }
    assert!(start.elapsed() >= 2 * limit);
    // The body is quiet now; the reader takes its time before it waits.
    tokio::time::sleep(2 * limit).await;
    let waited = tokio::time::Instant::now();
    assert!(matches!(reads.next().await, Some(Err(BodyError::Timeout))));
    assert!(waited.elapsed() >= limit);
}
