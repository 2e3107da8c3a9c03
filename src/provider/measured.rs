//! Any model, counted: each request's status and duration in the app's
//! metrics (`toolgate_model_requests_total`, `toolgate_model_duration_seconds`),
//! and traced: a `chat {model}` span per request (OpenTelemetry's GenAI
//! conventions), with the tokens the provider reports.

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;
use tracing::Span;

use super::{ModelProvider, ModelRequest, ProviderError, ProviderEvent, Usage};
use crate::metrics::Metrics;

/// `inner`, with each request counted under `provider` (the config's name)
/// and traced as `system`'s `model`.
pub struct Measured {
    pub inner: Arc<dyn ModelProvider>,
    pub metrics: Metrics,
    pub provider: &'static str,
    /// `gen_ai.provider.name`: `openai`, `anthropic`, `gcp.gemini`, `scripted`…
    pub system: &'static str,
    /// `gen_ai.request.model`.
    pub model: Arc<str>,
}

impl ModelProvider for Measured {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let span = tracing::info_span!(
            "chat",
            otel.name = format!("chat {}", self.model),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = self.system,
            gen_ai.request.model = &*self.model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let mut events = self.inner.stream(request);
        let mut watch = Watch {
            metrics: self.metrics.clone(),
            provider: self.provider,
            started: Instant::now(),
            counted: false,
            span: Some(span),
        };
        futures::stream::poll_fn(move |cx| {
            let next = events.poll_next_unpin(cx);
            match &next {
                Poll::Ready(Some(Ok(ProviderEvent::Finish { usage, .. }))) => {
                    watch.usage(*usage);
                    watch.count("ok".to_owned());
                }
                Poll::Ready(None) => watch.count("ok".to_owned()),
                Poll::Ready(Some(Err(e))) => {
                    let status = status(e);
                    watch.failed(&status);
                    watch.count(status);
                }
                Poll::Ready(Some(Ok(_))) | Poll::Pending => {}
            }
            next
        })
        .boxed()
    }
}

/// A request's status label: bounded words, or an HTTP status code.
fn status(e: &ProviderError) -> String {
    match e {
        ProviderError::Status { status, .. } => status.to_string(),
        ProviderError::Connect { .. } => "connect".to_owned(),
        ProviderError::Timeout { .. } => "timeout".to_owned(),
        ProviderError::Request(_)
        | ProviderError::Stream(_)
        | ProviderError::Upstream { .. }
        | ProviderError::Incomplete { .. } => "error".to_owned(),
    }
}

/// One request: counted once, at its end, its error, or when the turn drops
/// it; its span ends then too.
struct Watch {
    metrics: Metrics,
    provider: &'static str,
    started: Instant,
    counted: bool,
    span: Option<Span>,
}

impl Watch {
    fn count(&mut self, status: String) {
        if !self.counted {
            self.counted = true;
            let took = self.started.elapsed();
            self.metrics.model_request(self.provider, status, took);
            self.span = None;
        }
    }

    /// The tokens, if the provider reported any (a zero is "not reported").
    fn usage(&self, usage: Usage) {
        if let Some(span) = &self.span
            && usage != Usage::default()
        {
            span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", usage.output_tokens);
        }
    }

    fn failed(&self, status: &str) {
        if let Some(span) = &self.span {
            span.record("otel.status_code", "error");
            span.record("error.type", status);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.count("cancelled".to_owned());
    }
}
