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
        watching(self.inner.stream(request), self.watch(), Watch::see)
    }

    fn batches(&self, request: ModelRequest) -> ModelEvents {
        watching(self.inner.batches(request), self.watch(), Watch::see_batch)
    }

    /// The inner model's batches as they are, and the watch that counts
    /// them: a turn shows it each event it reads, where a stream layer of
    /// its own would move every batch once more through a boxed poll.
    fn watched(&self, request: ModelRequest) -> (ModelEvents, Option<Watch>) {
        (self.inner.batches(request), Some(self.watch()))
    }
}

/// `reads`, each of them shown to `watch` by `see` as it comes.
fn watching<T: Send + 'static>(
    mut reads: BoxStream<'static, T>,
    mut watch: Watch,
    see: fn(&mut Watch, &Option<T>),
) -> BoxStream<'static, T> {
    futures::stream::poll_fn(move |cx| {
        let next = reads.poll_next_unpin(cx);
        if let Poll::Ready(next) = &next {
            see(&mut watch, next);
        }
        next
    })
    .boxed()
}

impl Measured {
    /// The count and span of a request made now.
    fn watch(&self) -> Watch {
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
        Watch {
            metrics: self.metrics.clone(),
            provider: self.provider,
            started: Instant::now(),
            counted: false,
            span: Some(span),
        }
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
    /// What was read of the response: an event, or its end (`None`).
    pub fn see(&mut self, next: &Option<Result<ProviderEvent, ProviderError>>) {
        match next {
            Some(Ok(event)) => self.event(event),
            Some(Err(e)) => self.error(e),
            None => self.end(),
        }
    }

    /// What was read of the response in batches: a batch, or its end.
    pub fn see_batch(&mut self, next: &Option<Result<Vec<ProviderEvent>, ProviderError>>) {
        match next {
            Some(Ok(batch)) => batch.iter().for_each(|event| self.event(event)),
            Some(Err(e)) => self.error(e),
            None => self.end(),
        }
    }

    /// An event of the response. Only the finish is counted; a delta is
    /// looked at where it lies, here, without a call.
    #[inline]
    pub fn event(&mut self, event: &ProviderEvent) {
        if let ProviderEvent::Finish { usage, .. } = event {
            self.finished(*usage);
        }
    }

    /// The response ended.
    pub fn end(&mut self) {
        self.count("ok".to_owned());
    }

    fn finished(&mut self, usage: Usage) {
        self.usage(usage);
        self.count("ok".to_owned());
    }

    /// The response failed.
    pub fn error(&mut self, e: &ProviderError) {
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
    /// measured stream, its batches, or shown to the watch as a turn does.
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
            (vec![delta(), finish], 0, "cancelled"),
        ];
        for (script, read, status) in cases {
            for how in ["stream", "batches", "watched"] {
                let metrics = Metrics::new();
                let model = Measured {
                    inner: Arc::new(Fixed(script.clone())),
                    metrics: metrics.clone(),
                    provider: "fixed",
                    system: "fixed",
                    model: "m".into(),
                };
                match how {
                    "watched" => {
                        let (mut batches, mut watch) = model.watched(request());
                        for _ in 0..read {
                            let next = batches.next().await;
                            if let Some(watch) = &mut watch {
                                watch.see_batch(&next);
                            }
                            if next.is_none() {
                                break;
                            }
                        }
                    }
                    "batches" => {
                        let _: Vec<_> = model.batches(request()).take(read).collect().await;
                    }
                    _ => {
                        let _: Vec<_> = model.stream(request()).take(read).collect().await;
                    }
                }
                let text = metrics.encode().unwrap_or_default();
                let line = format!(
                    "toolgate_model_requests_total{{provider=\"fixed\",status=\"{status}\"}} 1"
                );
                assert!(text.contains(&line), "{how} {status}: {text}");
                assert_eq!(
                    text.matches("toolgate_model_requests_total{").count(),
                    1,
                    "{text}"
                );
            }
        }
    }
}
