//! The run API as the faces use it: every way in (SSE in `chat.rs`, `/live`
//! in each dialect) starts, resumes and aborts turns through these
//! functions and [`crate::run`], and only decodes its wire into them and
//! encodes what they return. What a turn needs beyond the run layer lives
//! here once: the limits that admit it, its span, its chunks fitted to the
//! client and counted, and how a held turn taken over goes on.

use std::sync::Arc;
use std::task::Poll;

use axum::http::HeaderMap;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{ApiError, HttpState};
use crate::agent::{Agent, HeldTurn};
use crate::confirm::GateError;
use crate::metrics::{Metrics, Transport, TurnWatch};
use crate::protocol::{ChatRequest, ClientVersion, ConfirmationProtocol, RequestError, UiChunk};
use crate::run::{self, Resumed};
use crate::store::{LimitError, Limited};

/// Starts the turn for `request` and subscribes to it, once the limits
/// (`limits`) admit it: streams at once first (a place that can be given
/// back), then turns per minute (a count that cannot). Its span continues
/// the trace `headers` name (`traceparent`), with `telemetry.trustTraceparent`.
pub(super) async fn start(
    state: &HttpState,
    request: ChatRequest,
    principal: &str,
    transport: Transport,
    headers: &HeaderMap,
) -> Result<(Arc<run::Run>, run::Subscription), ApiError> {
    let chat_id = request.chat_id.clone();
    let (waiting, waits) = watch::channel(false);
    let span = turn_span(&chat_id, state.trust_traceparent.then_some(headers));
    // Lazy: nothing of the turn runs before it is polled, in its span.
    let (chunks, client) = turn(state, request, principal.to_owned(), waiting)?;
    let streams = state.limiter.rates().concurrent_streams;
    let owner = run::Owner {
        principal,
        chat_id: &chat_id,
        // The default cap holds for every principal, whatever its name,
        // wherever callers are told apart (keys or a principal header). A
        // server that tells no one apart has one principal for everyone:
        // there `stream.maxTurns` is its cap, unless a limit is configured.
        capped: state.identifies_callers() || streams.is_some(),
    };
    let busy = |e: run::RunError| match (e, streams) {
        (run::RunError::PerPrincipal(_), Some(_)) => {
            limited(&state.metrics, LimitError::Limited(Limited::streams()))
        }
        (e, _) => ApiError::Busy(e),
    };
    state.runs.has_room(&owner).map_err(busy)?;
    let lease = state
        .limiter
        .stream(principal)
        .await
        .map_err(|e| limited(&state.metrics, e))?;
    state
        .limiter
        .turn(principal)
        .await
        .map_err(|e| limited(&state.metrics, e))?;
    let watch = state.metrics.turn(transport);
    // The stream's place is held as long as the turn's chunks are: they
    // are dropped when the turn ends, however it ends.
    let chunks = outgoing(chunks, client, watch, Some(span), Some(lease));
    state.runs.start(owner, chunks, waits).await.map_err(busy)
}

/// A refusal by a limit, counted.
fn limited(metrics: &Metrics, e: LimitError) -> ApiError {
    match e {
        LimitError::Limited(limited) => {
            metrics.rate_limited(limited.limit.label());
            ApiError::Limited(limited)
        }
        LimitError::Store(e) => ApiError::Gate(GateError::Store(e)),
    }
}

/// The turn's span (`invoke_agent` in OpenTelemetry's GenAI conventions),
/// a child of the caller's span when tracing is on and trusted `headers`
/// name one (a client's own `traceparent` is taken only when
/// `telemetry.trustTraceparent` says the header comes from a trusted hop).
fn turn_span(chat_id: &str, headers: Option<&HeaderMap>) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent toolgate",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "toolgate",
        gen_ai.conversation.id = chat_id,
    );
    if let Some(headers) = headers
        && !span.is_disabled()
    {
        // The no-op propagator unless the binary installed the exporter's.
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
        });
        // Fails only without the OpenTelemetry layer: then there is no trace to continue.
        let _ = span.set_parent(parent);
    }
    span
}

/// A turn's chunks on their way to its log, in one adapter (a stream layer
/// each would cost a boxed poll and a move of every chunk): fitted to the
/// `client`, counted by `watch` (open while streaming, the first chunk of
/// content timed, how the turn ended), each poll in `span` (so the model's
/// and the tools' spans are its children, in whichever task polls the
/// turn; marked failed on an `error` chunk), and `lease` held as long as
/// the chunks are.
fn outgoing<L: Send + 'static>(
    mut chunks: BoxStream<'static, UiChunk>,
    client: ClientVersion,
    mut watch: TurnWatch,
    span: Option<Span>,
    lease: Option<L>,
) -> BoxStream<'static, UiChunk> {
    // The second chunk a chunk is said with to an older client.
    let mut second: Option<UiChunk> = None;
    futures::stream::poll_fn(move |cx| {
        let _held = &lease;
        let chunk = loop {
            if let Some(chunk) = second.take() {
                break chunk;
            }
            let next = {
                let _entered = span.as_ref().map(Span::enter);
                chunks.poll_next_unpin(cx)
            };
            let Some(chunk) = std::task::ready!(next) else {
                return Poll::Ready(None);
            };
            if ClientVersion::takes_as_is(&chunk) {
                break chunk;
            }
            let mut fitted = client.fit(chunk);
            if let Some(chunk) = fitted.next() {
                second = fitted.next();
                break chunk;
            }
        };
        match &chunk {
            UiChunk::Finish { .. } => watch.ended("finished"),
            UiChunk::Error { .. } => {
                watch.ended("error");
                if let Some(span) = &span {
                    span.record("otel.status_code", "error");
                }
            }
            UiChunk::Abort { .. } => watch.ended("aborted"),
            UiChunk::Start { .. }
            | UiChunk::StartStep
            | UiChunk::FinishStep
            | UiChunk::MessageMetadata { .. } => {}
            _ => watch.content(),
        }
        Poll::Ready(Some(chunk))
    })
    .boxed()
}

/// The turn for `request`, in the confirmation protocol and flow it asks
/// for, its chunks fitted to the client's `ai` version.
fn turn(
    state: &HttpState,
    request: ChatRequest,
    principal: String,
    waiting: watch::Sender<bool>,
) -> Result<(BoxStream<'static, UiChunk>, ClientVersion), ApiError> {
    let protocol = request.options.protocol.unwrap_or(state.protocol);
    let flow = request.options.flow.unwrap_or(state.flow);
    let client = request
        .options
        .client_version
        .unwrap_or(state.client_version);
    if protocol == ConfirmationProtocol::AiSdk && !client.has_approvals() {
        return Err(RequestError::Invalid(format!(
            "native approvals (protocol ai-sdk) need ai 6 or later, not {client}; use protocol adk"
        ))
        .into());
    }
    tracing::debug!(chat = %request.chat_id, messages = request.messages.len(), "turn");
    let chunks = state
        .agent
        .clone()
        .turn(request, principal, protocol, flow, waiting);
    Ok((chunks, client))
}

/// How a held turn taken over from a dead instance goes on here: the agent
/// continues it, its chunks fitted to the client they were fitted to, and
/// counted as a turn of the transport that resumed it.
pub fn continue_held(
    agent: Arc<Agent>,
    default_client: ClientVersion,
    metrics: Metrics,
) -> Arc<run::Continue> {
    Arc::new(move |state: &[u8], transport: Transport| {
        let held: HeldTurn = serde_json::from_slice(state).ok()?;
        let client = held
            .client_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_client);
        let (waiting, waits) = watch::channel(false);
        let chunks = agent.clone().continue_held(held, waiting).boxed();
        let watch = metrics.turn(transport);
        Some((outgoing(chunks, client, watch, None, None::<()>), waits))
    })
}

/// The turn in flight in `chat_id` for `principal`, read from its start
/// (on this instance, or with a shared store on any); `None` when there is
/// none. `transport` counts a turn taken over.
pub(super) async fn resume(
    state: &HttpState,
    principal: &str,
    chat_id: &str,
    transport: Transport,
) -> Result<Option<Resumed>, ApiError> {
    Ok(state
        .runs
        .resume(principal, chat_id, transport)
        .await
        .map_err(GateError::from)?)
}
