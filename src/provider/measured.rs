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

use super::{ModelEvents, ModelProvider, ModelRequest, ProviderError, ProviderEvent, Usage};
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
        let (mut events, mut watch) = self.watched(request);
        futures::stream::poll_fn(move |cx| {
            let next = events.poll_next_unpin(cx);
            if let (Poll::Ready(next), Some(watch)) = (&next, &mut watch) {
                watch.see(next);
            }
            next
        })
        .boxed()
    }

    /// The inner model's events as they are, and the watch that counts
    /// them: a turn shows it each event it reads, where a stream layer of
    /// its own would move every event once more through a boxed poll.
    fn watched(&self, request: ModelRequest) -> (ModelEvents, Option<Watch>) {
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
        let events = self.inner.stream(request);
        let watch = Watch {
            metrics: self.metrics.clone(),
            provider: self.provider,
            started: Instant::now(),
            counted: false,
            span: Some(span),
        };
        (events, Some(watch))
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
pub struct Watch {
    metrics: Metrics,
    provider: &'static str,
    started: Instant,
    counted: bool,
    span: Option<Span>,
}

impl Watch {
    /// What was read of the response: an event, or its end (`None`). Only
    /// the finish, an error and the end are counted; a delta is looked at
    /// where it lies, here, without a call.
    #[inline]
    pub fn see(&mut self, next: &Option<Result<ProviderEvent, ProviderError>>) {
        match next {
            Some(Ok(ProviderEvent::Finish { usage, .. })) => self.finished(*usage),
            Some(Err(e)) => self.refused(e),
            None => self.count("ok".to_owned()),
            Some(Ok(_)) => {}
        }
    }

    fn finished(&mut self, usage: Usage) {
        self.usage(usage);
        self.count("ok".to_owned());
    }

    fn refused(&mut self, e: &ProviderError) {
        let status = status(e);
        self.failed(&status);
        self.count(status);
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::StopReason;

    /// A model that answers each request with these events, `None` its
    /// refusal.
    struct Fixed(Vec<Option<ProviderEvent>>);

    impl ModelProvider for Fixed {
        fn stream(
            &self,
            _: ModelRequest,
        ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
            let events: Vec<_> = self
                .0
                .iter()
                .map(|event| event.clone().ok_or_else(refused))
                .collect();
            futures::stream::iter(events).boxed()
        }
    }

    fn refused() -> ProviderError {
        ProviderError::Status {
            provider: "fixed",
            status: 429,
            message: String::new(),
            retry_after: None,
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            messages: Vec::new(),
            tools: Arc::from(Vec::new()),
        }
    }

    /// Each response counted once with its status, read through the
    /// measured stream or shown to the watch as a turn does.
    #[tokio::test]
    async fn a_request_is_counted_once_either_way() {
        let finish = Some(ProviderEvent::Finish {
            reason: StopReason::Stop,
            usage: Usage::default(),
        });
        let delta = || Some(ProviderEvent::TextDelta("a".into()));
        let cases = [
            (vec![delta(), finish.clone()], usize::MAX, "ok"),
            (vec![delta()], usize::MAX, "ok"),
            (vec![delta(), None], usize::MAX, "429"),
            (vec![delta(), finish], 1, "cancelled"),
        ];
        for (script, read, status) in cases {
            for watched in [false, true] {
                let metrics = Metrics::new();
                let model = Measured {
                    inner: Arc::new(Fixed(script.clone())),
                    metrics: metrics.clone(),
                    provider: "fixed",
                    system: "fixed",
                    model: "m".into(),
                };
                if watched {
                    let (mut events, mut watch) = model.watched(request());
                    for _ in 0..read {
                        let next = events.next().await;
                        if let Some(watch) = &mut watch {
                            watch.see(&next);
                        }
                        if next.is_none() {
                            break;
                        }
                    }
                } else {
                    let events = model.stream(request());
                    let _: Vec<_> = events.take(read).collect().await;
                }
                let text = metrics.encode().unwrap_or_default();
                let line = format!(
                    "toolgate_model_requests_total{{provider=\"fixed\",status=\"{status}\"}} 1"
                );
                assert!(text.contains(&line), "{watched} {status}: {text}");
                assert_eq!(
                    text.matches("toolgate_model_requests_total{").count(),
                    1,
                    "{text}"
                );
            }
        }
    }
}
