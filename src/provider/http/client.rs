//! The connection to a model: hyper-util's pooled client itself, over rustls
//! with the webpki roots, HTTP/2 where the server offers it, and the proxy
//! the environment names (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`,
//! `NO_PROXY`, read as curl reads them).
//!
//! Not reqwest: for each request its layers (the URL parsed again for its
//! redirect policy and for the response, a retry policy, boxed bodies) cost
//! a model turn about 46k instructions, a part of the first token toolgate
//! adds (BENCHMARKS.md, "Against a bare proxy"). Webhooks, HTTP tools and
//! JWKS keep reqwest; they are not on a turn's first token.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::PROXY_AUTHORIZATION;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::{Client, Error};
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tower::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Connecting = Pin<Box<dyn Future<Output = Result<Io, BoxError>> + Send>>;
/// A connection: TCP, to the server or its proxy, with TLS if the URL is
/// `https`.
type Io = MaybeHttpsStream<Tcp>;

/// How long a pooled connection to the model may stay idle (hyper-util's
/// default, and reqwest's).
const IDLE: Duration = Duration::from_secs(90);

/// The pooled client a model's requests go through; cheap to clone.
#[derive(Clone)]
pub struct ModelClient {
    client: Client<Connector, Full<Bytes>>,
    proxies: Arc<Matcher>,
}

impl std::fmt::Debug for ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelClient")
    }
}

impl ModelClient {
    /// A client that gives up connecting after `connect_timeout` and sends
    /// without Nagle's delay. It follows no redirect (one would carry a key
    /// or a conversation to another host).
    pub fn new(connect_timeout: Duration) -> Result<Self, rustls::Error> {
        Self::with_proxies(connect_timeout, Matcher::from_env(), IDLE)
    }

    /// A client through `proxies` whose pool closes a connection idle for
    /// `idle`.
    fn with_proxies(
        connect_timeout: Duration,
        proxies: Matcher,
        idle: Duration,
    ) -> Result<Self, rustls::Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        // The provider named, not the process default: rustls has two
        // compiled in here (reqwest's and rmcp's), and would pick neither.
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let proxies = Arc::new(proxies);
        let connector = Connector {
            tcp: TcpConnector(http),
            tls: Arc::new(tls),
            proxies: proxies.clone(),
        };
        // The timer lets the pool close connections idle past `idle` in
        // the background; without one they are dropped only when a request
        // would have reused them.
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(idle)
            .build(connector);
        Ok(Self { client, proxies })
    }

    /// Sends `request`. A plain-HTTP request through a proxy carries the
    /// proxy's credentials (an HTTPS one gives them on its tunnel's CONNECT).
    pub async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, Error> {
        if request.uri().scheme() == Some(&hyper::http::uri::Scheme::HTTP)
            && let Some(proxy) = self.proxies.intercept(request.uri())
            && let Some(auth) = proxy.basic_auth()
        {
            request
                .headers_mut()
                .insert(PROXY_AUTHORIZATION, auth.clone());
        }
        self.client.request(request).await
    }
}

/// Opens a connection to `dst`: straight, through a proxy's CONNECT tunnel
/// (HTTPS), or to the proxy itself (plain HTTP, sent in absolute form).
#[derive(Clone)]
struct Connector {
    tcp: TcpConnector,
    tls: Arc<rustls::ClientConfig>,
    proxies: Arc<Matcher>,
}

impl Service<Uri> for Connector {
    type Response = Io;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Connecting {
        let Some(proxy) = self.proxies.intercept(&dst) else {
            return Box::pin(HttpsConnector::from((self.tcp.clone(), self.tls.clone())).call(dst));
        };
        let proxy_uri = proxy.uri().clone();
        if proxy_uri.scheme() != Some(&hyper::http::uri::Scheme::HTTP) {
            return Box::pin(std::future::ready(Err(
                "only an http:// proxy is supported for the model".into(),
            )));
        }
        if dst.scheme() == Some(&hyper::http::uri::Scheme::HTTPS) {
            let mut tunnel = Tunnel::new(proxy_uri, self.tcp.clone());
            if let Some(auth) = proxy.basic_auth() {
                tunnel = tunnel.with_auth(auth.clone());
            }
            return Box::pin(HttpsConnector::from((tunnel, self.tls.clone())).call(dst));
        }
        let mut tcp = self.tcp.clone();
        Box::pin(async move {
            let mut io = tcp.call(proxy_uri).await?;
            io.proxied = true;
            Ok(MaybeHttpsStream::Http(io))
        })
    }
}

/// hyper-util's TCP connector, its connections marked when they go to a
/// proxy (so requests on them are written in absolute form).
#[derive(Clone)]
struct TcpConnector(HttpConnector);

impl Service<Uri> for TcpConnector {
    type Response = Tcp;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Tcp, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.0.call(dst);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(Tcp { io, proxied: false })
        })
    }
}

pub struct Tcp {
    io: TokioIo<TcpStream>,
    proxied: bool,
}

impl Connection for Tcp {
    fn connected(&self) -> Connected {
        self.io.connected().proxy(self.proxied)
    }
}

impl Read for Tcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl Write for Tcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests;
