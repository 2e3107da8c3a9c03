//! What the model APIs over HTTP (OpenAI, Anthropic, Gemini) share around
//! their own request body and decoder.

use std::borrow::Cow;
use std::marker::PhantomData;

use futures::stream::BoxStream;
use serde::de::DeserializeOwned;

use super::{Decoder, Upstream};
use crate::ids::Ids;
use crate::provider::{
    ModelOptions, ModelProvider, ModelRequest, ProviderError, ProviderEvent, StopReason, Usage,
};

/// One model API, named by its decoder: where a request goes, its body,
/// and how the streamed answer is read.
pub trait ModelApi: Decoder<Event = ProviderEvent> {
    /// The path under the base URL.
    fn path(options: &ModelOptions) -> Cow<'static, str>;

    /// The request body for `request`.
    fn body(options: &ModelOptions, request: &ModelRequest) -> Result<Vec<u8>, ProviderError>;

    /// A decoder for one answer.
    fn decoder(ids: Ids) -> Self;
}

/// A model behind the HTTP API `A`.
pub struct HttpModel<A> {
    upstream: Upstream,
    options: ModelOptions,
    ids: Ids,
    api: PhantomData<fn() -> A>,
}

impl<A: ModelApi> HttpModel<A> {
    pub fn new(upstream: Upstream, options: ModelOptions, ids: Ids) -> Self {
        Self {
            upstream,
            options,
            ids,
            api: PhantomData,
        }
    }
}

impl<A: ModelApi> ModelProvider for HttpModel<A> {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let body = A::body(&self.options, &request);
        let url = self.upstream.url(&A::path(&self.options));
        self.upstream
            .stream(url, body, A::decoder(self.ids.clone()))
    }
}

/// What every model decoder keeps besides its own state: ids for calls
/// sent without one, how the answer stopped and what it cost.
pub struct Answer {
    pub ids: Ids,
    pub reason: Option<StopReason>,
    pub usage: Usage,
}

impl Answer {
    pub fn new(ids: Ids) -> Self {
        Self {
            ids,
            reason: None,
            usage: Usage::default(),
        }
    }

    /// The answer's last event (`Stop` when no reason came).
    pub fn finish(&self) -> ProviderEvent {
        ProviderEvent::Finish {
            reason: self.reason.unwrap_or(StopReason::Stop),
            usage: self.usage,
        }
    }

    /// How the answer stopped, once the upstream closed without an end
    /// marker: without a stop reason it was cut short.
    pub fn stopped(&self, provider: &'static str) -> Result<StopReason, ProviderError> {
        self.reason.ok_or(ProviderError::Incomplete { provider })
    }
}

/// An event's `data` read as `T`, which the error names as `what`.
pub fn read_json<T: DeserializeOwned>(
    provider: &'static str,
    what: &str,
    data: &str,
) -> Result<T, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        ProviderError::Stream(format!(
            "{provider} sent an event that is not a {what}: {e}"
        ))
    })
}
