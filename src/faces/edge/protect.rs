//! The guard as a layer: every request passes `Guard::check` before routing,
//! and a refusal leaves through the one error edge, `ApiError`. Behind it,
//! CORS for the origins the guard allows (`cors.rs`), before any handler;
//! and the request body read under two clocks: the longest silence
//! (`server.bodyReadSecs`) and the whole body's deadline
//! (`server.bodyTotalSecs`, from the moment the request's head came), so
//! a body that trickles in a byte at a time holds its connection for a
//! bounded time.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::faces::ApiError;
use crate::faces::cors::{self, Cors};
use crate::faces::error::BodyDeadline;
use crate::faces::guard::{Facts, Guard};

/// How long a request body may take to arrive.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimes {
    /// The longest silence between two reads.
    pub silence: Duration,
    /// The whole body, from the request's head.
    pub total: Duration,
}

/// `router` behind the guard, then CORS (when the guard allows another
/// origin), with request bodies read under `body`'s two clocks.
///
/// The layers wrap the router once, as one service, rather than each of
/// its routes (`Router::layer`): that way a request clones one boxed
/// service, not one per layer and route (19 allocations a `POST /stream`).
pub fn protect(router: Router, guard: Guard, body: BodyTimes) -> Router {
    let guard = Arc::new(guard);
    // Inside the guard: the Host check comes first; a preflight (an OPTIONS,
    // no body) passes the guard's other checks and is answered here.
    let cors = Cors::new(guard.clone())
        .map(|cors| axum::middleware::from_fn_with_state(Arc::new(cors), cors::answer));
    let service = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state((guard, body), check))
        .option_layer(cors)
        .service(router);
    Router::new().fallback_service(service)
}

/// The guard's check; a request it lets in has its body put under
/// `times`, its whole deadline counted from now (here, not in a layer of
/// its own: a `from_fn` layer boxes the service behind it again for every
/// request).
async fn check(
    State((guard, times)): State<(Arc<Guard>, BodyTimes)>,
    request: Request,
    next: Next,
) -> Response {
    match guard.check(&Facts::of(&request)) {
        Ok(()) => {
            let request = request.map(|body| Body::new(Deadlined::new(body, times)));
            next.run(request).await
        }
        Err(refused) => ApiError::from(refused).into_response(),
    }
}

/// A body that fails once it has been silent for `silence`, or its whole
/// deadline has passed. Its one timer is made, and the clock read, only
/// when the body is waited for: most bodies are there whole when first
/// read, and never are (a timer armed for each read, as tower-http's
/// `RequestBodyTimeout` does, entered the runtime's timer wheel twice a
/// request for nothing).
struct Deadlined {
    body: Body,
    deadline: Instant,
    silence: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether `timer` counts the present wait: no frame came since it was set.
    waiting: bool,
}

impl Deadlined {
    fn new(body: Body, times: BodyTimes) -> Self {
        Self {
            body,
            deadline: Instant::now() + times.total,
            silence: times.silence,
            timer: None,
            waiting: false,
        }
    }
}

impl hyper::body::Body for Deadlined {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            this.waiting = false;
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if !this.waiting {
            // A wait begins: the silence counts from now, within the deadline.
            let now = Instant::now();
            if now >= this.deadline {
                return Poll::Ready(Some(Err(BodyDeadline.into())));
            }
            let until = this.deadline.min(now + this.silence);
            match &mut this.timer {
                Some(timer) => timer.as_mut().reset(until),
                None => this.timer = Some(Box::pin(tokio::time::sleep_until(until))),
            }
            this.waiting = true;
        }
        match this.timer.as_mut().map(|timer| timer.as_mut().poll(cx)) {
            Some(Poll::Pending) => Poll::Pending,
            _ => Poll::Ready(Some(Err(BodyDeadline.into()))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request's body, read whole within `limits.maxBodyBytes`: a body too
/// large, too slow or cut is refused here, in one status for every face.
pub struct WholeBody(pub Bytes);

impl axum::extract::FromRequest<crate::faces::HttpState> for WholeBody {
    type Rejection = ApiError;

    async fn from_request(
        request: Request,
        state: &crate::faces::HttpState,
    ) -> Result<Self, ApiError> {
        Bytes::from_request(request, state)
            .await
            .map(WholeBody)
            .map_err(|rejection| ApiError::from_body_rejection(rejection, state.max_body_bytes))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::BodyExt;

    use super::*;

    // Real time (tokio's paused clock would slow every clock read of the
    // release build, which shares its features with the examples'), with
    // margins wide enough for a busy machine.
    const TIMES: BodyTimes = BodyTimes {
        silence: Duration::from_millis(400),
        total: Duration::from_millis(1500),
    };

    /// A body fed through a channel, under [`TIMES`].
    fn fed() -> (
        futures::channel::mpsc::UnboundedSender<Result<Bytes, std::io::Error>>,
        Deadlined,
    ) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        (tx, Deadlined::new(Body::from_stream(rx), TIMES))
    }

    #[tokio::test]
    async fn a_body_there_whole_is_read_without_a_timer() {
        let mut body = Deadlined::new(Body::from("{}"), TIMES);
        let frame = body.frame().await.and_then(Result::ok);
        let data = frame.and_then(|f| f.into_data().ok());
        assert_eq!(data.as_deref(), Some(&b"{}"[..]));
        assert!(body.frame().await.is_none());
        assert!(body.timer.is_none(), "a timer for a body that never waited");
    }

    #[tokio::test]
    async fn each_frame_starts_the_silence_again_within_the_total() {
        let (tx, mut body) = fed();
        let started = Instant::now();
        // A frame every 100 ms: never silent for long, yet past the total.
        let feed = async move {
            while tx.unbounded_send(Ok(Bytes::from_static(b"x"))).is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let read = async {
            let mut frames = 0;
            loop {
                match body.frame().await {
                    Some(Ok(_)) => frames += 1,
                    Some(Err(e)) => return (e, frames),
                    None => panic!("the body ended"),
                }
            }
        };
        let (failed, frames) = tokio::select! {
            read = read => read,
            () = feed => panic!("the body stopped taking frames"),
        };
        assert!(failed.is::<BodyDeadline>(), "{failed}");
        assert!(frames > 4, "only {frames} frames came before the total");
        assert!(started.elapsed() >= TIMES.total, "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_body_that_stops_fails_after_its_silence() {
        let (tx, mut body) = fed();
        tx.unbounded_send(Ok(Bytes::from_static(b"x"))).ok();
        assert!(matches!(body.frame().await, Some(Ok(_))));
        let silent = Instant::now();
        let failed = body.frame().await.and_then(Result::err);
        assert!(failed.is_some_and(|e| e.is::<BodyDeadline>()));
        let waited = silent.elapsed();
        assert!(
            waited >= TIMES.silence && waited < TIMES.total,
            "{waited:?}"
        );
        drop(tx);
    }
}
