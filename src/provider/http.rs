//! What the HTTP providers share: one client, retries that cannot repeat
//! work, timeouts, SSE decoding with a size cap, and upstream errors told
//! without the key.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::Either;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode, Uri};
use sse_stream::Sse;

use super::{BATCH, ProviderError, ProviderEvent};

mod body;
pub(crate) use body::message_of;
use body::{Capped, capped, error_message};
mod client;
use client::ModelClient;
mod model;
pub use model::{Answer, HttpModel, ModelApi, read_json};

/// The most bytes one SSE event may take: a 1 MiB argument text, escaped.
const MAX_EVENT_BYTES: usize = 8 << 20;
/// The most of an error body read for its message.
const MAX_ERROR_BODY: usize = 64 << 10;
/// The most bytes a whole JSON answer (an ADK session) may take, as many
/// as one SSE event; past it the answer is refused, not read on.
const MAX_JSON_BYTES: usize = MAX_EVENT_BYTES;
/// The longest `retry-after` worth waiting for before the first byte.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

/// How to reach one upstream.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Names the provider in errors and logs.
    pub provider: &'static str,
    pub base_url: String,
    /// Sent on every request; the key among them is marked sensitive.
    pub headers: HeaderMap,
    /// Removed from any text an error shows.
    pub secret: Option<Secret>,
    pub connect_timeout: Duration,
    /// The longest silence: waiting for the headers, or between two reads.
    pub read_timeout: Duration,
    /// Attempts after the first, for failures that did no work upstream.
    pub retries: u32,
}

/// The client toolgate's other outgoing requests share (webhooks, HTTP
/// tools, JWKS; a model's go through [`ModelClient`]): it follows no redirect
/// (one would carry a key, a conversation or a signed body to another host:
/// `x-api-key` survives reqwest's cross-host stripping), gives up connecting
/// after `connect_timeout`, and sends without Nagle's delay.
pub fn client(connect_timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .build()
}

/// Where a request goes: its URL parsed once, or `None` if it is not an
/// absolute `http(s)` URL (the request then fails saying so).
#[derive(Debug, Clone)]
pub struct Endpoint(Option<Uri>);

impl From<String> for Endpoint {
    fn from(text: String) -> Self {
        Endpoint(parse_url(&text))
    }
}

fn parse_url(text: &str) -> Option<Uri> {
    let uri = text.parse::<Uri>().ok()?;
    let scheme = uri.scheme_str()?;
    (matches!(scheme, "http" | "https") && uri.host().is_some()).then_some(uri)
}

/// A configured upstream; cheap to clone.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: ModelClient,
    config: Arc<UpstreamConfig>,
}

impl Upstream {
    pub fn new(config: UpstreamConfig) -> Result<Self, ProviderError> {
        let client = ModelClient::new(config.connect_timeout)
            .map_err(|e| ProviderError::Request(e.to_string()))?;
        Ok(Self {
            client,
            config: Arc::new(config),
        })
    }

    pub fn provider(&self) -> &'static str {
        self.config.provider
    }

    /// `base_url` joined with `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.config.base_url.trim_end_matches('/'), path)
    }

    /// Posts `body` and streams the answer's SSE events through `decoder`,
    /// one by one. Dropping the stream drops the connection.
    pub fn stream<D: Decoder>(
        &self,
        url: Endpoint,
        body: Result<Vec<u8>, ProviderError>,
        decoder: D,
    ) -> BoxStream<'static, Result<D::Event, ProviderError>> {
        self.batches(url, body, decoder)
            .flat_map(|batch| match batch {
                Ok(events) => Either::Left(futures::stream::iter(events.into_iter().map(Ok))),
                Err(e) => Either::Right(futures::stream::once(std::future::ready(Err(e)))),
            })
            .boxed()
    }

    /// The same in batches: the events decoded from one read of the body
    /// together, at most [`BATCH`] of them. Dropping the stream drops the
    /// connection.
    pub fn batches<D: Decoder>(
        &self,
        url: Endpoint,
        body: Result<Vec<u8>, ProviderError>,
        mut decoder: D,
    ) -> BoxStream<'static, Result<Vec<D::Event>, ProviderError>> {
        let upstream = self.clone();
        let provider = self.config.provider;
        async_stream::stream! {
            let body = match body {
                Ok(body) => Bytes::from(body),
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let response = match upstream.send(&url, body).await {
                Ok(response) => response,
                Err(e) => {
                    tracing::warn!(provider, "model request failed: {e}");
                    yield Err(e);
                    return;
                }
            };
            let body = response.into_body().into_data_stream();
            let mut events = std::pin::pin!(upstream.events(body));
            let mut out = Vec::new();
            let mut ended = false;
            let mut open = true;
            while open {
                let Some(mut event) = events.next().await else {
                    break;
                };
                // The events already read with this one go in its batch: one
                // batch a read of the body, not one an event. (Polled without
                // a waker; the next wait polls again with the turn's.)
                let done = loop {
                    let done = event.and_then(|event| decoder.event(event, &mut out));
                    if !matches!(done, Ok(false)) || out.len() >= BATCH {
                        break done;
                    }
                    match events.next().now_or_never() {
                        Some(Some(next)) => event = next,
                        Some(None) => {
                            open = false;
                            break done;
                        }
                        None => break done,
                    }
                };
                if !out.is_empty() {
                    out.iter().for_each(|event| event.log(provider));
                    yield Ok(std::mem::take(&mut out));
                }
                match done {
                    Ok(false) => {}
                    Ok(true) => {
                        ended = true;
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(provider, "model stream failed: {e}");
                        yield Err(e);
                        return;
                    }
                }
            }
            let last = if ended { Ok(()) } else { decoder.end(&mut out) };
            if !out.is_empty() {
                out.iter().for_each(|event| event.log(provider));
                yield Ok(out);
            }
            if let Err(e) = last {
                tracing::warn!(provider, "model stream failed: {e}");
                yield Err(e);
            }
        }
        .boxed()
    }

    /// Sends the request, retrying only what never reached the model: a
    /// refused connection, or a 429/503/529 that says it did no work.
    async fn send(&self, url: &Endpoint, body: Bytes) -> Result<Response<Incoming>, ProviderError> {
        let config = &self.config;
        let Endpoint(Some(uri)) = url else {
            return Err(self.not_a_url());
        };
        let mut attempt = 0;
        loop {
            let request = self.request(Method::POST, uri.clone(), Some(body.clone()));
            let request = self.client.send(request);
            let failure = match tokio::time::timeout(config.read_timeout, request).await {
                Err(_) => {
                    return Err(ProviderError::Timeout {
                        provider: config.provider,
                        secs: config.read_timeout.as_secs_f32(),
                    });
                }
                Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                Ok(Ok(response)) => {
                    let status = response.status();
                    let retry_after = retry_after(response.headers());
                    let wait = retry_after.unwrap_or_else(|| backoff(attempt));
                    if retryable(status) && attempt < config.retries && wait <= MAX_RETRY_WAIT {
                        Some(wait)
                    } else {
                        let message = self.redact(&error_message(response).await);
                        return Err(ProviderError::Status {
                            provider: config.provider,
                            status: status.as_u16(),
                            message,
                            retry_after: retry_after.and_then(|d| d.as_secs().try_into().ok()),
                        });
                    }
                }
                Ok(Err(e)) if e.is_connect() && attempt < config.retries => Some(backoff(attempt)),
                Ok(Err(e)) => {
                    return Err(ProviderError::Connect {
                        provider: config.provider,
                        message: self.redact(&error_chain(&e)),
                    });
                }
            };
            if let Some(wait) = failure {
                tracing::info!(
                    provider = config.provider,
                    attempt,
                    "model not reached; retrying in {wait:?}"
                );
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        }
    }

    /// A request with the config's headers, and `body` as JSON.
    fn request(&self, method: Method, uri: Uri, body: Option<Bytes>) -> Request<Full<Bytes>> {
        let json = body.is_some();
        let mut request = Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        *request.headers_mut() = self.config.headers.clone();
        if json {
            request
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        request
    }

    fn not_a_url(&self) -> ProviderError {
        ProviderError::Request(format!(
            "{}'s URL is not an absolute http(s) URL",
            self.config.provider
        ))
    }

    /// A JSON request that is not streamed (no retries: it may do work):
    /// the answer's JSON, or `None` for a 404.
    pub async fn json(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, ProviderError> {
        let config = &self.config;
        let uri = parse_url(url).ok_or_else(|| self.not_a_url())?;
        let body = match body {
            Some(body) => Some(Bytes::from(
                serde_json::to_vec(body).map_err(|e| ProviderError::Request(e.to_string()))?,
            )),
            None => None,
        };
        let request = self.request(method, uri, body);
        let read = async {
            let response = self
                .client
                .send(request)
                .await
                .map_err(|e| error_chain(&e))?;
            let status = response.status();
            let cap = match status.is_success() {
                true => MAX_JSON_BYTES,
                false => MAX_ERROR_BODY,
            };
            let bytes = capped(response.into_body(), cap)
                .await
                .map_err(|e| error_chain(&e))?;
            Ok::<_, String>((status, bytes))
        };
        let (status, bytes) = match tokio::time::timeout(config.read_timeout, read).await {
            Err(_) => {
                return Err(ProviderError::Timeout {
                    provider: config.provider,
                    secs: config.read_timeout.as_secs_f32(),
                });
            }
            Ok(Err(e)) => {
                return Err(ProviderError::Connect {
                    provider: config.provider,
                    message: self.redact(&e),
                });
            }
            Ok(Ok(answer)) => answer,
        };
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let bytes = match bytes {
            Capped::Whole(bytes) => bytes,
            Capped::Cut(bytes) if !status.is_success() => bytes,
            Capped::Cut(_) => {
                return Err(ProviderError::Stream(format!(
                    "{} sent an answer larger than {MAX_JSON_BYTES} bytes",
                    config.provider
                )));
            }
        };
        if !status.is_success() {
            let body = &bytes[..bytes.len().min(MAX_ERROR_BODY)];
            return Err(ProviderError::Status {
                provider: config.provider,
                status: status.as_u16(),
                message: self.redact(&message_of(body)),
                retry_after: None,
            });
        }
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            ProviderError::Stream(format!("{} sent unreadable JSON: {e}", config.provider))
        })
    }

    fn redact(&self, text: &str) -> String {
        match &self.config.secret {
            Some(Secret(secret)) if !secret.is_empty() => {
                text.replace(secret.as_str(), "[redacted]")
            }
            _ => text.to_owned(),
        }
    }
}

/// A key that debug output does not show.
#[derive(Clone, PartialEq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Turns one upstream's SSE events into its events: a model's into
/// [`ProviderEvent`]s, an ADK agent's into its own.
pub trait Decoder: Send + 'static {
    type Event: Logged + Send + 'static;

    /// Decodes one event into `out`; `Ok(true)` when it was the provider's
    /// end marker.
    fn event(&mut self, event: Sse, out: &mut Vec<Self::Event>) -> Result<bool, ProviderError>;

    /// The upstream closed without an end marker: the last events if the
    /// answer was complete, or an error saying it was cut short.
    fn end(&mut self, out: &mut Vec<Self::Event>) -> Result<(), ProviderError>;
}

/// An upstream event worth a log line (a model's finish and its usage).
pub trait Logged {
    fn log(&self, provider: &'static str);
}

impl Logged for ProviderEvent {
    fn log(&self, provider: &'static str) {
        log_finish(provider, self);
    }
}

fn log_finish(provider: &'static str, event: &ProviderEvent) {
    if let ProviderEvent::Finish { reason, usage } = event {
        tracing::info!(
            provider,
            ?reason,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            "model step finished"
        );
    }
}

/// Statuses that promise the request did nothing: rate limited, unavailable,
/// and Anthropic's "overloaded".
fn retryable(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 503 | 529)
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64 << attempt.min(5))
}

/// `retry-after` in seconds (an HTTP date is not worth a clock here).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let secs: f64 = value.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// An error with its causes: hyper's own text is often only "client error (Connect)".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A header for the config's `headers`, or an error naming it.
pub fn header(
    name: &str,
    value: &str,
    sensitive: bool,
) -> Result<(HeaderName, HeaderValue), ProviderError> {
    let name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ProviderError::Request(format!("invalid header name `{name}`")))?;
    let mut value = HeaderValue::from_str(value)
        .map_err(|_| ProviderError::Request(format!("invalid value for header `{name}`")))?;
    value.set_sensitive(sensitive);
    Ok((name, value))
}

/// Decoding helpers for each provider's unit tests.
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests;
