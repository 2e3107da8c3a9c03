//! Any model, counted: each request's status and duration in the app's
//! metrics (`toolgate_model_requests_total`, `toolgate_model_duration_seconds`).

use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::{ModelProvider, ModelRequest, ProviderError, ProviderEvent};
use crate::metrics::Metrics;

/// `inner`, with each request counted under `provider` (the config's name).
pub struct Measured {
    pub inner: Arc<dyn ModelProvider>,
    pub metrics: Metrics,
    pub provider: &'static str,
}

impl ModelProvider for Measured {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let mut events = self.inner.stream(request);
        let mut watch = Watch {
            metrics: self.metrics.clone(),
            provider: self.provider,
            started: Instant::now(),
            counted: false,
        };
        futures::stream::poll_fn(move |cx| {
            let next = events.poll_next_unpin(cx);
            match &next {
                Poll::Ready(Some(Ok(ProviderEvent::Finish { .. }))) | Poll::Ready(None) => {
                    watch.count("ok".to_owned());
                }
                Poll::Ready(Some(Err(e))) => watch.count(status(e)),
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

/// One request: counted once, at its end, its error, or when the turn drops it.
struct Watch {
    metrics: Metrics,
    provider: &'static str,
    started: Instant,
    counted: bool,
}

impl Watch {
    fn count(&mut self, status: String) {
        if !self.counted {
            self.counted = true;
            let took = self.started.elapsed();
            self.metrics.model_request(self.provider, status, took);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.count("cancelled".to_owned());
    }
}
