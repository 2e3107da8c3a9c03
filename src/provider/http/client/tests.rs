use super::*;

use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::provider::http::testing::read_head;

const TIMEOUT: Duration = Duration::from_secs(5);
/// The proxy's credentials as the client sends them: base64("me:secret").
const ME: &str = "Basic bWU6c2VjcmV0";

/// The value of the header `name` in a request's `head`.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// A server that answers one connection with `answer`: its URL, and the
/// future that serves it, whose output is the head of the request it read.
async fn one_answer(answer: &'static str) -> (Uri, impl Future<Output = String>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let read = async move {
        let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
        let head = read_head(&mut socket).await;
        socket
            .write_all(answer.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        head
    };
    let uri = format!("http://{addr}")
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    (uri, read)
}

fn post(uri: &str) -> Request<Full<Bytes>> {
    let mut request = Request::new(Full::new(Bytes::from_static(b"{}")));
    *request.method_mut() = hyper::Method::POST;
    *request.uri_mut() = uri.parse().unwrap_or_else(|e| panic!("{e}"));
    request
}

fn through(proxy: &Uri) -> Matcher {
    let with_user = format!(
        "http://me:secret@{}",
        proxy.authority().map_or("", |a| a.as_str())
    );
    Matcher::builder().all(with_user).build()
}

/// A post to `model.example` by `scheme` through a proxy that answers
/// `answer`: what the client got, and the head the proxy read.
async fn via_proxy(
    answer: &'static str,
    scheme: &str,
) -> (Result<Response<Incoming>, Error>, String) {
    let (proxy, head) = one_answer(answer).await;
    let client =
        ModelClient::with_proxies(TIMEOUT, through(&proxy), IDLE).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("{scheme}//model.example/v1/chat");
    tokio::join!(client.send(post(&url)), head)
}

#[tokio::test]
async fn plain_http_goes_to_the_proxy_in_absolute_form_with_its_credentials() {
    let (sent, head) = via_proxy("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", "http:").await;
    let response = sent.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.map(|b| b.to_bytes());
    assert_eq!(body.ok().as_deref(), Some(&b"ok"[..]));
    assert!(
        head.starts_with("POST http://model.example/v1/chat HTTP/1.1\r\n"),
        "{head}"
    );
    assert_eq!(header(&head, "proxy-authorization"), Some(ME), "{head}");
}

#[tokio::test]
async fn https_is_tunnelled_through_the_proxy_with_its_credentials() {
    let (sent, head) = via_proxy(
        "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n",
        "https:",
    )
    .await;
    let error = sent
        .err()
        .unwrap_or_else(|| panic!("a refused tunnel is an error"));
    assert!(error.is_connect(), "{error:?}");
    assert!(
        head.starts_with("CONNECT model.example:443 HTTP/1.1\r\n"),
        "{head}"
    );
    assert_eq!(header(&head, "proxy-authorization"), Some(ME), "{head}");
}

#[tokio::test]
async fn a_host_in_no_proxy_is_reached_directly() {
    let (server, head) = one_answer("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
    let proxies = Matcher::builder()
        .all("http://127.0.0.1:9")
        .no("127.0.0.1")
        .build();
    let client =
        ModelClient::with_proxies(TIMEOUT, proxies, IDLE).unwrap_or_else(|e| panic!("{e}"));
    let (sent, head) = tokio::join!(client.send(post(&format!("{server}v1/chat"))), head);
    let response = sent.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status(), 200);
    assert!(head.starts_with("POST /v1/chat HTTP/1.1\r\n"), "{head}");
    assert_eq!(header(&head, "proxy-authorization"), None, "{head}");
}

#[tokio::test]
async fn only_an_http_proxy_is_used() {
    let proxies = Matcher::builder().all("socks5://127.0.0.1:9").build();
    let client =
        ModelClient::with_proxies(TIMEOUT, proxies, IDLE).unwrap_or_else(|e| panic!("{e}"));
    let sent = client.send(post("https://model.example/v1/chat")).await;
    let error = sent
        .err()
        .unwrap_or_else(|| panic!("a SOCKS proxy is refused"));
    assert!(error.is_connect(), "{error:?}");
}

#[tokio::test]
async fn an_idle_pooled_connection_is_closed_in_the_background() {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    // Answers one request on a kept-alive connection, then waits for the
    // client to close it.
    let served = async move {
        let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
        read_head(&mut socket).await;
        let mut buf = [0u8; 1024];
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    tokio::pin!(served);
    let idle = Duration::from_millis(100);
    let client = ModelClient::with_proxies(TIMEOUT, Matcher::builder().build(), idle)
        .unwrap_or_else(|e| panic!("{e}"));
    let response = tokio::select! {
        sent = client.send(post(&format!("http://{addr}/v1/chat"))) => sent,
        () = &mut served => panic!("the server saw the connection close before it answered"),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let body = response.into_body().collect().await.map(|b| b.to_bytes());
    assert_eq!(body.ok().as_deref(), Some(&b"ok"[..]));
    // The connection is back in the pool, idle: the pool's sweep, every
    // `idle`, closes it with no request to notice it.
    let closed = tokio::time::timeout(TIMEOUT, served).await;
    assert!(closed.is_ok(), "the idle connection stayed open");
}
