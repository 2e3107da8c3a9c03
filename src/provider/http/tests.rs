use super::*;

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

/// Each SSE event's data as one event; `[DONE]` ends the answer.
struct Lines;

impl Logged for String {
    fn log(&self, _: &'static str) {}
}

impl Decoder for Lines {
    type Event = String;

    fn event(&mut self, event: Sse, out: &mut Vec<String>) -> Result<bool, ProviderError> {
        let data = event.data.unwrap_or_default();
        if data == "[DONE]" {
            return Ok(true);
        }
        out.push(data);
        Ok(false)
    }

    fn end(&mut self, _: &mut Vec<String>) -> Result<(), ProviderError> {
        Ok(())
    }
}

#[tokio::test]
async fn the_events_of_one_read_come_in_one_batch() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let (next, wait) = tokio::sync::oneshot::channel::<()>();
    let served = async move {
        let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
        testing::read_head(&mut socket).await;
        let first = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     connection: close\r\n\r\ndata: a\n\ndata: b\n\ndata: c\n\n";
        socket
            .write_all(first.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait.await.unwrap_or_else(|e| panic!("{e}"));
        let last = "data: d\n\ndata: [DONE]\n\n";
        socket
            .write_all(last.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    };
    let read = async move {
        let upstream = Upstream::new(UpstreamConfig {
            provider: "openai",
            base_url: format!("http://{addr}"),
            headers: HeaderMap::new(),
            secret: None,
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(5),
            retries: 0,
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let url = Endpoint::from(upstream.url("/v1/chat/completions"));
        let mut batches = upstream.batches(url, Ok(b"{}".to_vec()), Lines);
        let first = batches
            .next()
            .await
            .map(|batch| batch.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(first, Some(vec!["a".to_owned(), "b".into(), "c".into()]));
        next.send(())
            .unwrap_or_else(|()| panic!("the server is gone"));
        let last = batches
            .next()
            .await
            .map(|batch| batch.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(last, Some(vec!["d".to_owned()]));
        assert!(batches.next().await.is_none());
    };
    tokio::join!(served, read);
}
