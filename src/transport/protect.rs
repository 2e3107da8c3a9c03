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

use super::ApiError;
use super::cors::{self, Cors};
use super::error::BodyDeadline;
use super::guard::{Facts, Guard};

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
        .layer(axum::middleware::from_fn_with_state(
            (guard, body.total),
            check,
        ))
        .option_layer(cors)
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            body.silence,
        ))
        .service(router);
    Router::new().fallback_service(service)
}

/// The guard's check; a request it lets in has its body put under the
/// deadline `total` from now (here, not in a layer of its own: a `from_fn`
/// layer boxes the service behind it again for every request).
async fn check(
    State((guard, total)): State<(Arc<Guard>, Duration)>,
    request: Request,
    next: Next,
) -> Response {
    match guard.check(&Facts::of(&request)) {
        Ok(()) => {
            let request = request.map(|body| Body::new(Deadlined::new(body, total)));
            next.run(request).await
        }
        Err(refused) => ApiError::from(refused).into_response(),
    }
}

/// A body that fails once its deadline has passed. Its timer is made when
/// the body is first waited for: most requests (a GET) never are.
struct Deadlined {
    body: Body,
    deadline: Instant,
    timer: Option<Pin<Box<Sleep>>>,
}

impl Deadlined {
    fn new(body: Body, total: Duration) -> Self {
        Self {
            body,
            deadline: Instant::now() + total,
            timer: None,
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
        if Instant::now() >= this.deadline {
            return Poll::Ready(Some(Err(BodyDeadline.into())));
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyDeadline.into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
