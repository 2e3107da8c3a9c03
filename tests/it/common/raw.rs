//! HTTP/1.1 written by hand, for requests no client library sends: a
//! foreign `Host`, a browser's `Origin`, a head that never ends.

use super::Must;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct RawReply {
    pub status: u16,
    /// Everything after the head (chunked framing left in).
    pub body: String,
}

/// `host:port` of a server URL.
pub fn authority(url: &str) -> &str {
    url.trim_start_matches("http://")
}

/// Sends one request on a fresh connection and reads the answer to its
/// end. `Host` is the server's own unless `headers` name one;
/// `content-length` and `connection: close` are added.
pub async fn send(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RawReply {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("host: {}\r\n", authority(url)));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut stream = TcpStream::connect(authority(url)).await.must();
    stream.write_all(head.as_bytes()).await.must();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.must();
    parse(&String::from_utf8_lossy(&reply))
}

pub fn parse(reply: &str) -> RawReply {
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {reply:?}"));
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    RawReply { status, body }
}

/// [`send`] of a `GET` for a test without a runtime.
pub fn get_blocking(url: &str, path: &str) -> RawReply {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(authority(url)).must();
    let head = format!(
        "GET {path} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
        authority(url)
    );
    stream.write_all(head.as_bytes()).must();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).must();
    parse(&String::from_utf8_lossy(&reply))
}
