//! What the model APIs over HTTP (OpenAI, Anthropic, Gemini) share around
//! their own request body and decoder.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::BoxStream;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Decoder, Endpoint, Upstream};
use crate::call::ToolSpec;
use crate::ids::Ids;
use crate::provider::{
    ModelEvents, ModelOptions, ModelProvider, ModelRequest, ProviderError, ProviderEvent,
    StopReason, Usage,
};

/// One model API, named by its decoder: where a request goes, its body,
/// and how the streamed answer is read.
pub trait ModelApi: Decoder<Event = ProviderEvent> {
    /// The path under the base URL.
    fn path(options: &ModelOptions) -> Cow<'static, str>;

    /// How this API declares `tools`: the value of the body's `tools`.
    fn tools(tools: &[ToolSpec]) -> Value;

    /// The request body for `request`; `tools`, when the request has
    /// tools, is [`ModelApi::tools`]'s JSON (`finish_body` writes it in).
    fn body(
        options: &ModelOptions,
        request: &ModelRequest,
        tools: Option<&[u8]>,
    ) -> Result<Vec<u8>, ProviderError>;

    /// A decoder for one answer.
    fn decoder(ids: Ids) -> Self;
}

/// The last tool list declared, and its declarations' JSON.
type Declared = (Arc<[ToolSpec]>, Arc<[u8]>);

/// A model behind the HTTP API `A`.
///
/// What every request to it shares is made once: its URL, parsed, and the
/// JSON of the tools' declarations, kept for as long as the turns' tool
/// list is the same (the registry shares one list between turns). Both
/// were made for each request before it could go upstream.
pub struct HttpModel<A> {
    upstream: Upstream,
    options: ModelOptions,
    ids: Ids,
    url: Endpoint,
    declared: Mutex<Option<Declared>>,
    api: PhantomData<fn() -> A>,
}

impl<A: ModelApi> HttpModel<A> {
    pub fn new(upstream: Upstream, options: ModelOptions, ids: Ids) -> Self {
        let url = Endpoint::from(upstream.url(&A::path(&options)));
        Self {
            upstream,
            options,
            ids,
            url,
            declared: Mutex::new(None),
            api: PhantomData,
        }
    }

    /// The declarations' JSON of `tools`; `None` without tools.
    fn declarations(&self, tools: &Arc<[ToolSpec]>) -> Result<Option<Arc<[u8]>>, ProviderError> {
        if tools.is_empty() {
            return Ok(None);
        }
        let mut declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((list, json)) = &*declared
            && Arc::ptr_eq(list, tools)
        {
            return Ok(Some(json.clone()));
        }
        let json: Arc<[u8]> = declarations::<A>(tools)?.into();
        *declared = Some((tools.clone(), json.clone()));
        Ok(Some(json))
    }
}

/// The JSON `A` declares `tools` with.
pub fn declarations<A: ModelApi>(tools: &[ToolSpec]) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(&A::tools(tools)).map_err(|e| ProviderError::Request(e.to_string()))
}

impl<A: ModelApi> ModelProvider for HttpModel<A> {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let body = self.body(&request);
        self.upstream
            .stream(self.url.clone(), body, A::decoder(self.ids.clone()))
    }

    fn batches(&self, request: ModelRequest) -> ModelEvents {
        let body = self.body(&request);
        self.upstream
            .batches(self.url.clone(), body, A::decoder(self.ids.clone()))
    }
}

impl<A: ModelApi> HttpModel<A> {
    /// The request's body in `A`'s format.
    fn body(&self, request: &ModelRequest) -> Result<Vec<u8>, ProviderError> {
        self.declarations(&request.tools)
            .and_then(|tools| A::body(&self.options, request, tools.as_deref()))
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
