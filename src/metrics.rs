//! Prometheus metrics: one [`Metrics`] per app, handed to every layer that
//! counts (not a process global, so servers in one process count apart).
//!
//! Labels are bounded: a transport, an outcome word, a configured tool's
//! qualified name, a provider, a store backend. Never a chat, a principal,
//! arguments or error text. Counters and gauges are atomics; the handles a
//! streamed turn touches are made once, when the app is built.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How a turn reaches its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `POST /stream`, `/api/chat`: server-sent events.
    Sse,
    /// `/live`: the WebSocket.
    Live,
    /// `/mcp` and `toolgate mcp`: each `tools/call` of an MCP client.
    Mcp,
    /// `POST /ag-ui`: each AG-UI run.
    Agui,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Sse => "sse",
            Transport::Live => "live",
            Transport::Mcp => "mcp",
            Transport::Agui => "agui",
        }
    }
}

/// How a confirmation question (or a call the policy decided alone) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    Approved,
    Denied,
    Expired,
    /// Closed unanswered by a new message (`onNewMessage: cancel`).
    Cancelled,
    /// A person answered in the tool's place (`decision: respond`).
    Responded,
    AutoApproved,
    AutoDenied,
    /// An answer the gate refused: forged, foreign, expired, not the approver's.
    Refused,
}

impl Confirmation {
    fn as_str(self) -> &'static str {
        match self {
            Confirmation::Approved => "approved",
            Confirmation::Denied => "denied",
            Confirmation::Expired => "expired",
            Confirmation::Cancelled => "cancelled",
            Confirmation::Responded => "responded",
            Confirmation::AutoApproved => "auto_approved",
            Confirmation::AutoDenied => "auto_denied",
            Confirmation::Refused => "refused",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TurnLabels {
    transport: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TransportLabel {
    transport: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ConfirmationLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ToolCallLabels {
    tool: String,
    source: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ModelLabels {
    provider: &'static str,
    status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ProviderLabel {
    provider: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreLabels {
    store: &'static str,
    op: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LimitLabel {
    limit: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds, from 5 ms to about 80 s: turns, first chunks, tools, models.
fn latency() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0,
    ])
}

/// Seconds from a question to its decision: people take minutes.
fn human() -> Histogram {
    Histogram::new([
        1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0,
    ])
}

/// Toolgate's own share of a turn's first chunk: should stay in milliseconds.
fn overhead() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    ])
}

/// A family of any kind, as the registry takes it.
#[derive(Debug)]
struct Any(Box<dyn Metric>);

impl EncodeMetric for Any {
    fn encode(&self, encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Every family toolgate exports, and the registry that encodes them.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    turns: Family<TurnLabels, Counter>,
    turn_duration: Histogram,
    /// One gauge per transport, made once.
    open: [Gauge; 4],
    first_chunk: Histogram,
    overhead: Histogram,
    confirmations: Family<ConfirmationLabels, Counter>,
    confirmation_wait: Histogram,
    tool_calls: Family<ToolCallLabels, Counter>,
    tool_duration: Histograms<ToolLabel>,
    model_requests: Family<ModelLabels, Counter>,
    model_duration: Histograms<ProviderLabel>,
    store_ops: Family<StoreLabels, Counter>,
    mcp_servers: Family<StateLabel, Gauge>,
    rate_limited: Family<LimitLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// The MCP server states `toolgate_mcp_servers` reports, each always present.
pub const MCP_STATES: [&str; 4] = ["connecting", "available", "unavailable", "restarting"];

impl Metrics {
    pub fn new() -> Self {
        let streams = Family::<TransportLabel, Gauge>::default();
        let mut inner = Inner {
            registry: Registry::default(),
            turns: Family::default(),
            turn_duration: latency(),
            open: [
                Transport::Sse,
                Transport::Live,
                Transport::Mcp,
                Transport::Agui,
            ]
            .map(|t| {
                streams.get_or_create_owned(&TransportLabel {
                    transport: t.as_str(),
                })
            }),
            first_chunk: latency(),
            overhead: overhead(),
            confirmations: Family::default(),
            confirmation_wait: human(),
            tool_calls: Family::default(),
            tool_duration: Family::new_with_constructor(latency),
            model_requests: Family::default(),
            model_duration: Family::new_with_constructor(latency),
            store_ops: Family::default(),
            mcp_servers: Family::default(),
            rate_limited: Family::default(),
        };
        for state in MCP_STATES {
            inner
                .mcp_servers
                .get_or_create(&StateLabel { state })
                .set(0);
        }
        // Each family's name and help, in the order the text lists them.
        #[rustfmt::skip]
        let families: [(&str, &str, Box<dyn Metric>); 14] = [
            ("toolgate_turns", "Turns, by transport and how they ended", Box::new(inner.turns.clone())),
            ("toolgate_turn_duration_seconds", "A turn from its request to its end", Box::new(inner.turn_duration.clone())),
            ("toolgate_streams_open", "Turns streaming now", Box::new(streams)),
            ("toolgate_time_to_first_chunk_seconds", "From a turn's request to its first chunk of content", Box::new(inner.first_chunk.clone())),
            ("toolgate_overhead_seconds", "Toolgate's own share of the first chunk: from a turn's request to its first model request", Box::new(inner.overhead.clone())),
            ("toolgate_confirmations", "Gated calls' decisions, by tool and outcome", Box::new(inner.confirmations.clone())),
            ("toolgate_confirmation_wait_seconds", "From a question to its decision", Box::new(inner.confirmation_wait.clone())),
            ("toolgate_tool_calls", "Tool calls run, by tool, source and outcome", Box::new(inner.tool_calls.clone())),
            ("toolgate_tool_duration_seconds", "A tool call's run", Box::new(inner.tool_duration.clone())),
            ("toolgate_model_requests", "Model requests, by provider and status (ok, an HTTP status, connect, timeout, error, cancelled)", Box::new(inner.model_requests.clone())),
            ("toolgate_model_duration_seconds", "A model request from its start to its stream's end", Box::new(inner.model_duration.clone())),
            ("toolgate_store_operations", "Store operations, by backend, operation and outcome", Box::new(inner.store_ops.clone())),
            ("toolgate_mcp_servers", "MCP servers, by state", Box::new(inner.mcp_servers.clone())),
            ("toolgate_rate_limited", "Turns, streams and tool calls refused by a limit (`limits`), by limit", Box::new(inner.rate_limited.clone())),
        ];
        for (name, help, family) in families {
            inner.registry.register(name, help, Any(family));
        }
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The text exposition of every family.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::with_capacity(8 << 10);
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry)?;
        Ok(text)
    }

    /// A turn starts streaming: open until the returned watch is dropped.
    pub fn turn(&self, transport: Transport) -> TurnWatch {
        let open = self.inner.open[transport as usize].clone();
        open.inc();
        TurnWatch {
            metrics: self.clone(),
            transport,
            open,
            started: Instant::now(),
            first: false,
            outcome: "dropped",
        }
    }

    /// Toolgate's own time before a turn's first model request.
    pub fn overhead(&self, took: Duration) {
        self.inner.overhead.observe(took.as_secs_f64());
    }

    /// A decision about a call of `tool` (a configured tool's qualified
    /// name, or `unknown`).
    pub fn confirmation(&self, tool: &str, outcome: Confirmation) {
        self.inner
            .confirmations
            .get_or_create(&ConfirmationLabels {
                tool: tool.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// A question decided (or expired) `waited_ms` after it was asked.
    pub fn confirmation_waited(&self, waited_ms: u64) {
        // Milliseconds fit an f64 exactly for 285,000 years.
        let secs = waited_ms as f64 / 1000.0;
        self.inner.confirmation_wait.observe(secs);
    }

    /// A tool call that ran: `outcome` is `ok`, `error` or `timeout`.
    pub fn tool_call(
        &self,
        tool: &str,
        source: &'static str,
        outcome: &'static str,
        took: Duration,
    ) {
        self.inner
            .tool_calls
            .get_or_create(&ToolCallLabels {
                tool: tool.to_owned(),
                source,
                outcome,
            })
            .inc();
        self.inner
            .tool_duration
            .get_or_create(&ToolLabel {
                tool: tool.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// A model request ended with `status` after `took`.
    pub fn model_request(&self, provider: &'static str, status: String, took: Duration) {
        self.inner
            .model_requests
            .get_or_create(&ModelLabels { provider, status })
            .inc();
        self.inner
            .model_duration
            .get_or_create(&ProviderLabel { provider })
            .observe(took.as_secs_f64());
    }

    /// The counters of `store`'s operations `ops` (each a fixed name),
    /// made now: counting one then allocates nothing and takes no lock.
    /// Each is exported from here on, at 0 until counted.
    pub fn store_operations(&self, store: &'static str, ops: &[&'static str]) -> StoreCounters {
        let counter = |op, outcome| {
            self.inner
                .store_ops
                .get_or_create_owned(&StoreLabels { store, op, outcome })
        };
        StoreCounters {
            counters: ops
                .iter()
                .map(|op| [counter(op, "ok"), counter(op, "error")])
                .collect(),
        }
    }

    /// One turn, stream or call refused by `limit` (a fixed word).
    pub fn rate_limited(&self, limit: &'static str) {
        self.inner
            .rate_limited
            .get_or_create(&LimitLabel { limit })
            .inc();
    }

    /// How many MCP servers are in each of [`MCP_STATES`] now.
    pub fn mcp_servers(&self, counts: [i64; 4]) {
        for (state, n) in MCP_STATES.into_iter().zip(counts) {
            self.inner
                .mcp_servers
                .get_or_create(&StateLabel { state })
                .set(n);
        }
    }
}

/// One store's operation counters, `ok` and `error` for each operation,
/// in the order [`Metrics::store_operations`] was given them.
#[derive(Debug, Clone)]
pub struct StoreCounters {
    counters: Arc<[[Counter; 2]]>,
}

impl StoreCounters {
    /// Counts the operation at index `op` (an index out of range counts
    /// nothing).
    pub fn count(&self, op: usize, ok: bool) {
        if let Some([ok_count, error_count]) = self.counters.get(op) {
            match ok {
                true => ok_count.inc(),
                false => error_count.inc(),
            };
        }
    }
}

/// A streaming turn: counted open until dropped, then counted as ended
/// with the outcome it was last told.
pub struct TurnWatch {
    metrics: Metrics,
    transport: Transport,
    open: Gauge,
    started: Instant,
    first: bool,
    outcome: &'static str,
}

impl TurnWatch {
    /// A chunk of content went out; the first one is timed.
    pub fn content(&mut self) {
        if !self.first {
            self.first = true;
            let took = self.started.elapsed().as_secs_f64();
            self.metrics.inner.first_chunk.observe(took);
        }
    }

    /// How the turn ended (`finished`, `error`, `aborted`); a turn dropped
    /// before any of these counts as `dropped` (stopped, or nobody read it).
    pub fn ended(&mut self, outcome: &'static str) {
        self.outcome = outcome;
    }
}

impl Drop for TurnWatch {
    fn drop(&mut self) {
        self.open.dec();
        let inner = &self.metrics.inner;
        inner
            .turns
            .get_or_create(&TurnLabels {
                transport: self.transport.as_str(),
                outcome: self.outcome,
            })
            .inc();
        inner
            .turn_duration
            .observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that `metrics`' text holds each of `lines`.
    fn exports(metrics: &Metrics, lines: &[&str]) {
        let text = metrics.encode().unwrap_or_default();
        for line in lines {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn a_turn_is_open_until_dropped_then_counted() {
        let metrics = Metrics::new();
        let mut turn = metrics.turn(Transport::Sse);
        turn.content();
        turn.content();
        exports(
            &metrics,
            &[
                "toolgate_streams_open{transport=\"sse\"} 1\n",
                "toolgate_time_to_first_chunk_seconds_count 1\n",
            ],
        );
        turn.ended("finished");
        drop(turn);
        exports(
            &metrics,
            &[
                "toolgate_streams_open{transport=\"sse\"} 0\n",
                "toolgate_turns_total{transport=\"sse\",outcome=\"finished\"} 1\n",
            ],
        );
    }

    #[test]
    fn store_operations_are_counted_by_index_and_exported_from_zero() {
        let metrics = Metrics::new();
        let counters = metrics.store_operations("memory", &["get", "claim"]);
        counters.count(1, true);
        counters.count(1, false);
        counters.count(1, true);
        counters.count(7, true);
        exports(
            &metrics,
            &[
                "toolgate_store_operations_total{store=\"memory\",op=\"get\",outcome=\"ok\"} 0\n",
                "toolgate_store_operations_total{store=\"memory\",op=\"claim\",outcome=\"ok\"} 2\n",
                "toolgate_store_operations_total{store=\"memory\",op=\"claim\",outcome=\"error\"} 1\n",
            ],
        );
    }

    #[test]
    fn every_mcp_state_is_reported() {
        let metrics = Metrics::new();
        metrics.mcp_servers([0, 2, 1, 0]);
        exports(
            &metrics,
            &[
                "toolgate_mcp_servers{state=\"connecting\"} 0\n",
                "toolgate_mcp_servers{state=\"available\"} 2\n",
                "toolgate_mcp_servers{state=\"unavailable\"} 1\n",
            ],
        );
    }
}
