//! `POST /stream` and `POST /api/chat` (a turn, streamed as SSE), and their
//! `GET …/{chatId}/stream` resumes.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::auth::Caller;
use super::{ANONYMOUS, ApiError, HttpState, runs, sse};
use crate::agent::{Agent, HeldTurn};
use crate::confirm::GateError;
use crate::metrics::{Metrics, Transport};
use crate::protocol::{ChatRequest, ClientVersion, ConfirmationProtocol, RequestError, UiChunk};
use crate::store::{LimitError, Limited};

pub(super) async fn stream(
    State(state): State<HttpState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body =
        body.map_err(|rejection| ApiError::from_body_rejection(rejection, state.max_body_bytes))?;
    let request = ChatRequest::from_slice(&body)?;
    let (_, reader) = start(&state, request, &caller.principal, Transport::Sse, &headers).await?;
    let chunks = reader.chunks().map(|(_, event)| event);
    Ok(sse::response(chunks, state.keep_alive).into_response())
}

/// Starts the turn for `request` and subscribes to it, once the limits
/// (`limits`) admit it: streams at once first (a place that can be given
/// back), then turns per minute (a count that cannot). Its span continues
/// the trace `headers` name (`traceparent`).
pub(super) async fn start(
    state: &HttpState,
    request: ChatRequest,
    principal: &str,
    transport: Transport,
    headers: &HeaderMap,
) -> Result<(Arc<runs::Run>, runs::Subscription), ApiError> {
    let chat_id = request.chat_id.clone();
    let (waiting, waits) = watch::channel(false);
    let span = turn_span(&chat_id, headers);
    // Lazy: nothing of the turn runs before the task polls it, in its span.
    let chunks = turn(state, request, principal.to_owned(), waiting)?;
    let streams = state.limiter.rates().concurrent_streams;
    let owner = runs::Owner {
        principal,
        chat_id: &chat_id,
        // The default cap spares `anonymous` (everyone on a keyless
        // server); a configured limit holds for every principal.
        capped: principal != ANONYMOUS || streams.is_some(),
    };
    let busy = |e: runs::RunError| match (e, streams) {
        (runs::RunError::PerPrincipal(_), Some(_)) => {
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
    let chunks = traced(span, measured(&state.metrics, transport, chunks));
    // The stream's place is held as long as the turn's chunks are: the
    // turn's task drops them when it ends, however it ends.
    let chunks = chunks
        .map(move |chunk| {
            let _held = &lease;
            chunk
        })
        .boxed();
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
/// a child of the caller's span when tracing is on and `headers` name one.
fn turn_span(chat_id: &str, headers: &HeaderMap) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent toolgate",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "toolgate",
        gen_ai.conversation.id = chat_id,
    );
    if !span.is_disabled() {
        // The no-op propagator unless the binary installed the exporter's.
        let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
        });
        // Fails only without the OpenTelemetry layer: then there is no trace to continue.
        let _ = span.set_parent(parent);
    }
    span
}

/// `chunks`, each poll in `span` (so the model's and the tools' spans are
/// its children, across the turn's task), marked failed on an `error` chunk.
fn traced(span: Span, mut chunks: BoxStream<'static, UiChunk>) -> BoxStream<'static, UiChunk> {
    futures::stream::poll_fn(move |cx| {
        let _entered = span.enter();
        let next = chunks.poll_next_unpin(cx);
        if let std::task::Poll::Ready(Some(UiChunk::Error { .. })) = &next {
            span.record("otel.status_code", "error");
        }
        next
    })
    .boxed()
}

/// `chunks`, counted: open while streaming, the first chunk of content
/// timed, and how the turn ended once it is dropped (no allocation per chunk).
fn measured(
    metrics: &Metrics,
    transport: Transport,
    chunks: BoxStream<'static, UiChunk>,
) -> BoxStream<'static, UiChunk> {
    let mut watch = metrics.turn(transport);
    chunks
        .inspect(move |chunk| match chunk {
            UiChunk::Finish { .. } => watch.ended("finished"),
            UiChunk::Error { .. } => watch.ended("error"),
            UiChunk::Abort { .. } => watch.ended("aborted"),
            UiChunk::Start { .. }
            | UiChunk::StartStep
            | UiChunk::FinishStep
            | UiChunk::MessageMetadata { .. } => {}
            _ => watch.content(),
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
) -> Result<BoxStream<'static, UiChunk>, ApiError> {
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
    Ok(state
        .agent
        .clone()
        .turn(request, principal, protocol, flow, waiting)
        .flat_map(move |chunk| futures::stream::iter(client.fit(chunk)))
        .boxed())
}

/// How a held turn taken over from a dead instance goes on here: the agent
/// continues it, its chunks fitted to the client they were fitted to, and
/// counted as a turn of the transport that resumed it.
pub fn continue_held(
    agent: Arc<Agent>,
    default_client: ClientVersion,
    metrics: Metrics,
) -> Arc<runs::Continue> {
    Arc::new(move |state: &[u8], transport: Transport| {
        let held: HeldTurn = serde_json::from_slice(state).ok()?;
        let client = held
            .client_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_client);
        let (waiting, waits) = watch::channel(false);
        let chunks = agent
            .clone()
            .continue_held(held, waiting)
            .flat_map(move |chunk| futures::stream::iter(client.fit(chunk)))
            .boxed();
        Some((measured(&metrics, transport, chunks), waits))
    })
}

/// `useChat({resume: true})`: the turn in flight in this chat (on this
/// instance, or with a shared store on any), replayed from its `start`
/// chunk; 204 when there is none, as the AI SDK expects.
pub(super) async fn resume(
    State(state): State<HttpState>,
    caller: Caller,
    Path(chat_id): Path<String>,
) -> Result<Response, ApiError> {
    let resumed = state
        .runs
        .resume(&caller.principal, &chat_id, Transport::Sse)
        .await
        .map_err(GateError::from)?;
    match resumed {
        Some(resumed) => {
            let chunks = resumed.reader.chunks().map(|(_, event)| event);
            Ok(sse::response(chunks, state.keep_alive).into_response())
        }
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}
