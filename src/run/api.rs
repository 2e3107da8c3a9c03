//! The run API every face adapts its wire to: SSE (`faces/ai_sdk/http.rs`),
//! `/live` in each dialect, the decisions API, and the faces to come (MCP,
//! AG-UI). A face decodes its request into these calls and encodes what
//! they return, nothing else:
//!
//! - [`Turns::start`]: a turn, once the limits admit it, and its first
//!   subscriber;
//! - a decision on an open question is [`super::Questions::decide`]'s
//!   (an answer inside a chat message reaches the gate through the turn);
//! - [`Turns::resume`]: the chat's turn in flight, from its start;
//! - abort: [`Run::abort`] on the run `start` or `resume` gave;
//! - follow: the chunks of the [`Subscription`] or [`super::Reader`] they
//!   gave.
//!
//! What a turn needs beyond the registry lives here once: the limits that
//! admit it, its span, its chunks fitted to the client and counted, and
//! how a held turn taken over goes on. Refusals are a [`TurnError`], which
//! each face's edge maps once to its status and text.

use std::sync::Arc;
use std::task::Poll;

use futures::StreamExt;
use opentelemetry::propagation::Extractor;
use tokio::sync::watch;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{Owner, Resumed, Run, RunError, Runs, StartIndex, Subscription};
use crate::agent::{Agent, HeldTurn, Pieces};
use crate::confirm::GateError;
use crate::identity::Identity;
use crate::metrics::{Metrics, Transport, TurnWatch};
use crate::protocol::RequestError;
use crate::protocol::sink::{ChunkWriter, End, Out, Writer};
use crate::protocol::{ChatId, ChatRequest, ClientVersion, ConfirmationFlow, ConfirmationProtocol};
use crate::store::{LimitError, Limited, Limiter, StoreError};

/// Why the run API refused a call. Before a turn's stream starts; once it
/// has, errors are chunks.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The request itself is wrong.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Too many turns in flight, or of the user's followed.
    #[error(transparent)]
    Busy(#[from] RunError),
    /// Over a limit of `limits`.
    #[error(transparent)]
    Limited(Limited),
    /// The store (or the gate over it) failed.
    #[error(transparent)]
    Core(#[from] GateError),
}

impl From<StoreError> for TurnError {
    fn from(e: StoreError) -> Self {
        TurnError::Core(e.into())
    }
}

/// The words a turn's chunks are written in, which say who may read it.
pub enum Wire {
    /// The AI SDK's SSE events, fitted to the request's `ai` version: the
    /// chat's turn, which a resume reads, on any instance with a shared store.
    AiSdk,
    /// A face's own events, from its writer: read by the request that
    /// starts the turn alone, since nothing else speaks its words.
    Own(Box<dyn Writer>),
}

/// What the run API needs, built once when the app starts and shared by
/// every face.
pub struct Turns {
    pub agent: Arc<Agent>,
    pub runs: Arc<Runs>,
    /// `limits`: turns per minute and streams at once are checked before a
    /// turn starts.
    pub limiter: Limiter,
    /// Turns count here.
    pub metrics: Metrics,
    /// The confirmation protocol, flow and client version of a request
    /// that names none.
    pub protocol: ConfirmationProtocol,
    pub flow: ConfirmationFlow,
    pub client_version: ClientVersion,
    /// `telemetry.trustTraceparent`: a request's `traceparent` is continued.
    pub trust_traceparent: bool,
}

/// Who asks for a turn.
#[derive(Clone, Copy)]
pub struct Asker<'a> {
    /// As the request named them: the turn's answers in the chat are
    /// decided with the roles and source of this identity.
    pub who: &'a Identity,
    /// Whether callers are told apart (API keys or a principal header):
    /// then every principal, `anonymous` included, has the per-user caps.
    pub told_apart: bool,
}

impl Turns {
    /// A new chat's id, `prefix-…`, for a face whose client names none.
    pub fn new_chat_id(&self, prefix: &str) -> String {
        self.agent.ids.next(prefix)
    }

    /// Starts the turn for `request` and subscribes to it, once the limits
    /// admit it: streams at once first (a place that can be given back),
    /// then turns per minute (a count that cannot). Its span continues the
    /// trace `trace` names (`traceparent`), with `telemetry.trustTraceparent`.
    /// Its chunks are written in `wire`'s words.
    pub async fn start(
        &self,
        request: ChatRequest,
        asker: Asker<'_>,
        wire: Wire,
        transport: Transport,
        trace: &(dyn Extractor + Sync),
    ) -> Result<(Arc<Run>, Subscription), TurnError> {
        let principal = asker.who.principal.as_str();
        let chat_id = request.chat_id.clone().into_string();
        let (waiting, waits) = watch::channel(false);
        let span = turn_span(&chat_id, self.trust_traceparent.then_some(trace));
        let listed = matches!(wire, Wire::AiSdk);
        // Lazy: nothing of the turn runs before it is polled, in its span.
        let chunks = self.turn(request, asker.who.clone(), wire, waiting)?;
        let streams = self.limiter.rates().concurrent_streams;
        let owner = Owner {
            principal,
            chat_id: &chat_id,
            // The default cap holds for every principal, whatever its name,
            // wherever callers are told apart (keys or a principal header). A
            // server that tells no one apart has one principal for everyone:
            // there `stream.maxTurns` is its cap, unless a limit is configured.
            capped: asker.told_apart || streams.is_some(),
        };
        let busy = |e: RunError| match (e, streams) {
            (RunError::PerPrincipal(_), Some(_)) => {
                limited(&self.metrics, LimitError::Limited(Limited::streams()))
            }
            (e, _) => TurnError::Busy(e),
        };
        self.runs.has_room(&owner).map_err(busy)?;
        let lease = self
            .limiter
            .stream(principal)
            .await
            .map_err(|e| limited(&self.metrics, e))?;
        self.limiter
            .turn(principal)
            .await
            .map_err(|e| limited(&self.metrics, e))?;
        let watch = self.metrics.turn(transport);
        // The stream's place is held as long as the turn's chunks are: they
        // are dropped when the turn ends, however it ends.
        let chunks = outgoing(chunks, watch, Some(span), Some(lease));
        match listed {
            true => self.runs.start(owner, chunks, waits).await,
            false => self.runs.start_alone(owner, chunks, waits),
        }
        .map_err(busy)
    }

    /// The turn in flight in `chat_id` (a [`ChatId`], as every chat id the
    /// run API takes: one rule for every face) for the asker, read from the
    /// chunk `at` names ([`StartIndex::START`]: its start), on this
    /// instance or with a shared store on any; `None` when there is none,
    /// or nothing is left of it to read. Following another instance's turn
    /// takes a place of the asker's share of this instance's followed
    /// turns, wherever callers are told apart. `transport` counts a turn
    /// taken over.
    pub async fn resume(
        &self,
        asker: Asker<'_>,
        chat_id: &ChatId,
        at: StartIndex,
        transport: Transport,
    ) -> Result<Option<Resumed>, TurnError> {
        let owner = Owner {
            principal: asker.who.principal.as_str(),
            chat_id: chat_id.as_str(),
            // A server that tells no one apart has one principal for
            // everyone: there only the total holds.
            capped: asker.told_apart,
        };
        match self.runs.resume(owner, at, transport).await {
            Ok(resumed) => Ok(resumed),
            // The user's own share is full: a per-user cap, as a turn's is.
            Err(StoreError::FollowedPerUser(n)) => Err(TurnError::Busy(RunError::Followed(n))),
            Err(e) => Err(e.into()),
        }
    }

    /// The turn for `request`, in the confirmation protocol and flow it
    /// asks for, its chunks written in `wire`'s words: the AI SDK's fitted
    /// to the client's `ai` version, or the face's own.
    fn turn(
        &self,
        request: ChatRequest,
        who: Identity,
        wire: Wire,
        waiting: watch::Sender<bool>,
    ) -> Result<Pieces, TurnError> {
        let protocol = request.options.protocol.unwrap_or(self.protocol);
        let flow = request.options.flow.unwrap_or(self.flow);
        let client = request
            .options
            .client_version
            .unwrap_or(self.client_version);
        if protocol == ConfirmationProtocol::AiSdk && !client.has_approvals() {
            return Err(RequestError::Invalid(format!(
            "native approvals (protocol ai-sdk) need ai 6 or later, not {client}; use protocol adk"
        ))
        .into());
        }
        let out = match wire {
            Wire::AiSdk => Out::AiSdk(ChunkWriter::new(client)),
            Wire::Own(writer) => Out::Face(writer),
        };
        tracing::debug!(chat = %request.chat_id, messages = request.messages.len(), "turn");
        Ok(self
            .agent
            .clone()
            .turn(request, who, protocol, flow, out, waiting))
    }
}

/// A refusal by a limit, counted.
fn limited(metrics: &Metrics, e: LimitError) -> TurnError {
    match e {
        LimitError::Limited(limited) => {
            metrics.rate_limited(limited.limit.label());
            TurnError::Limited(limited)
        }
        LimitError::Store(e) => e.into(),
    }
}

/// The turn's span (`invoke_agent` in OpenTelemetry's GenAI conventions),
/// a child of the caller's span when tracing is on and a trusted `trace`
/// (a request's headers) names one (a client's own `traceparent` is taken only when
/// `telemetry.trustTraceparent` says the header comes from a trusted hop).
fn turn_span(chat_id: &str, trace: Option<&(dyn Extractor + Sync)>) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent toolgate",
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = "toolgate",
        gen_ai.conversation.id = chat_id,
    );
    if let Some(trace) = trace
        && !span.is_disabled()
    {
        // The no-op propagator unless the binary installed the exporter's.
        let parent =
            opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(trace));
        // Fails only without the OpenTelemetry layer: then there is no trace to continue.
        let _ = span.set_parent(parent);
    }
    span
}

/// A turn's chunks on their way to its log, in one adapter (a stream layer
/// each would cost a boxed poll and a move of every piece): counted by
/// `watch` (open while streaming, the first chunk of content timed, how
/// the turn ended), each poll in `span` (so the model's and the tools'
/// spans are its children, in whichever task polls the turn; marked failed
/// on an `error` chunk), and `lease` held as long as the chunks are.
fn outgoing<L: Send + 'static>(
    mut pieces: Pieces,
    mut watch: TurnWatch,
    span: Option<Span>,
    lease: Option<L>,
) -> Pieces {
    futures::stream::poll_fn(move |cx| {
        let _held = &lease;
        let next = {
            let _entered = span.as_ref().map(Span::enter);
            pieces.poll_next_unpin(cx)
        };
        let Some(piece) = std::task::ready!(next) else {
            return Poll::Ready(None);
        };
        if piece.seen.content {
            watch.content();
        }
        if let Some(end) = piece.seen.end {
            watch.ended(end.label());
            if end == End::Error
                && let Some(span) = &span
            {
                span.record("otel.status_code", "error");
            }
        }
        Poll::Ready(Some(piece))
    })
    .boxed()
}

/// How a held turn taken over from a dead instance goes on here: the agent
/// continues it, its chunks fitted to the client they were fitted to, and
/// counted as a turn of the transport that resumed it.
pub fn continue_held(
    agent: Arc<Agent>,
    default_client: ClientVersion,
    metrics: Metrics,
) -> Arc<super::Continue> {
    Arc::new(move |state: &[u8], transport: Transport| {
        let held: HeldTurn = serde_json::from_slice(state).ok()?;
        let client = held
            .client_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_client);
        let (waiting, waits) = watch::channel(false);
        let out = Out::AiSdk(ChunkWriter::new(client));
        let chunks = agent.clone().continue_held(held, out, waiting).boxed();
        let watch = metrics.turn(transport);
        Some((outgoing(chunks, watch, None, None::<()>), waits))
    })
}
