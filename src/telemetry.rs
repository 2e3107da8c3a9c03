//! Logs and traces for the process. The library only emits `tracing` spans
//! and events; [`init`] (the binary's) sends them to stderr and, when an
//! OTLP endpoint is set, to an OpenTelemetry collector as spans.
//!
//! The exporter honours the standard `OTEL_*` variables: the endpoint and
//! its headers and timeout (`OTEL_EXPORTER_OTLP_*`), the batch processor
//! (`OTEL_BSP_*`), the sampler (`OTEL_TRACES_SAMPLER`), the resource
//! (`OTEL_SERVICE_NAME`, default `toolgate`, and `OTEL_RESOURCE_ATTRIBUTES`).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Key, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::Value;
use tracing::Level;
use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The target of each confirmation decision's event. At DEBUG, so the log
/// does not repeat the audit log; the trace exporter takes it.
pub const DECISIONS: &str = "toolgate::confirmation";

/// Most bytes of arguments or a result a span keeps (`telemetry.recordContent`).
pub const MAX_CONTENT_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("cannot set up the OTLP trace exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("cannot install the log subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// The installed exporter, if any: [`Telemetry::shutdown`] sends what it holds.
#[must_use = "shut it down when serving ends, or the last spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs the process's subscriber: the log on stderr (`RUST_LOG`, by
/// default `toolgate=info`), and the OTLP exporter when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set.
pub fn init() -> Result<Telemetry, TelemetryError> {
    let levels =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("toolgate=info"));
    let provider = match exporting(|name| std::env::var(name).ok()) {
        true => Some(provider()?),
        false => None,
    };
    subscriber(levels, provider.as_ref()).try_init()?;
    if provider.is_some() {
        // Read by the transport: a request's `traceparent` continues its trace.
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        tracing::info!("exporting traces over OTLP");
    }
    Ok(Telemetry { provider })
}

/// The log at `levels`, and the exporter's layer when there is a provider.
fn subscriber(
    levels: EnvFilter,
    provider: Option<&SdkTracerProvider>,
) -> Box<dyn tracing::Subscriber + Send + Sync> {
    // toolgate's spans are for traces: log lines stay as short as before,
    // and without the exporter no span of toolgate's is made at all.
    let events = filter_fn(|meta| !(meta.is_span() && meta.target().starts_with("toolgate")));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(|| OneLine(std::io::stderr()))
        .with_filter(levels.and(events));
    let Some(provider) = provider else {
        // Not `.with(None)`: a `None` layer finds every callsite of
        // interest, and the registry then makes every span (a turn's is
        // entered on each poll) for nobody: 5 % of W1's time (BENCHMARKS.md).
        return Box::new(tracing_subscriber::registry().with(log));
    };
    // Its own filter: toolgate's spans whatever `RUST_LOG` keeps in the log.
    let traces = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toolgate"))
        // Busy and idle times on every poll: not worth their cost here.
        .with_tracked_inactivity(false)
        .with_filter(
            Targets::new()
                .with_target("toolgate", Level::INFO)
                .with_target(DECISIONS, Level::DEBUG),
        );
    Box::new(tracing_subscriber::registry().with(log).with(traces))
}

/// The log's writer: each event is one line, whatever its fields hold.
/// The formatter writes an event whole, in one `write_all` ending in its
/// newline; every other line break or control character in it (an id, a
/// name, a refused value a client sent) is written escaped (`\n`), so no
/// client can forge a line of the log. The escape character stays: the
/// terminal's colours use it, and ids that hold one are refused anyway.
struct OneLine<W>(W);

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(one_line(buf).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `event` with every control character escaped but its last newline
/// (and tabs, and the escape character of colours).
fn one_line(event: &[u8]) -> std::borrow::Cow<'_, str> {
    let text = String::from_utf8_lossy(event);
    let body = text.strip_suffix('\n').unwrap_or(&text);
    let forged = |c: char| {
        (c.is_control() && c != '\t' && c != '\u{1b}') || matches!(c, '\u{2028}' | '\u{2029}')
    };
    if !body.chars().any(forged) {
        return text;
    }
    let mut line = String::with_capacity(text.len() + 16);
    for c in body.chars() {
        match c {
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            c if forged(c) => line.extend(c.escape_unicode()),
            c => line.push(c),
        }
    }
    if body.len() < text.len() {
        line.push('\n');
    }
    std::borrow::Cow::Owned(line)
}

impl Telemetry {
    /// Exports the spans still held and stops the exporter (blocks up to
    /// the export timeout).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!("the last spans may not have been exported: {e}");
        }
    }
}

/// Whether traces are exported: an endpoint is set and the SDK is not
/// disabled (`OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER=none`).
fn exporting(var: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).is_some_and(|v| !v.trim().is_empty());
    let is =
        |name: &str, word: &str| var(name).is_some_and(|v| v.trim().eq_ignore_ascii_case(word));
    (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        && !is("OTEL_SDK_DISABLED", "true")
        && !is("OTEL_TRACES_EXPORTER", "none")
}

fn provider() -> Result<SdkTracerProvider, TelemetryError> {
    // Endpoint, headers, timeout and protocol from the `OTEL_EXPORTER_OTLP_*` variables.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource())
        .build())
}

/// The detected resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`),
/// named `toolgate` unless those name it.
fn resource() -> Resource {
    let version = KeyValue::new("service.version", env!("CARGO_PKG_VERSION"));
    let detected = Resource::builder().with_attribute(version.clone()).build();
    let named = detected
        .get(&Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    match named {
        true => detected,
        false => Resource::builder()
            .with_service_name("toolgate")
            .with_attribute(version)
            .build(),
    }
}

/// `value` as JSON for a span, cut at [`MAX_CONTENT_BYTES`] (on a character
/// boundary, `…` marking the cut).
pub fn bounded(value: &Value) -> String {
    let mut json = value.to_string();
    if json.len() > MAX_CONTENT_BYTES {
        let mut end = MAX_CONTENT_BYTES;
        while !json.is_char_boundary(end) {
            end -= 1;
        }
        json.truncate(end);
        json.push('…');
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_one_line_whatever_it_holds() {
        #[rustfmt::skip]
        let cases: &[(&str, &str)] = &[
            ("INFO turn chat=c1\n", "INFO turn chat=c1\n"),
            ("INFO turn chat=x\nFAKE LOG LINE\n", "INFO turn chat=x\\nFAKE LOG LINE\n"),
            ("a\r\nb\n", "a\\r\\nb\n"),
            ("a\u{85}b\u{2028}c\0\n", "a\\u{85}b\\u{2028}c\\u{0}\n"),
            ("\u{1b}[32m INFO\u{1b}[0m\tx\n", "\u{1b}[32m INFO\u{1b}[0m\tx\n"),
            ("no newline\nat the end", "no newline\\nat the end"),
            ("", ""),
        ];
        for (event, written) in cases {
            let mut out = Vec::new();
            let mut writer = OneLine(&mut out);
            std::io::Write::write_all(&mut writer, event.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(String::from_utf8_lossy(&out), *written, "{event:?}");
        }
    }

    #[test]
    fn without_the_exporter_no_span_is_made() {
        for levels in ["warn", "toolgate=info", "debug"] {
            let made =
                tracing::subscriber::with_default(subscriber(EnvFilter::new(levels), None), || {
                    !tracing::info_span!("invoke_agent").is_disabled()
                });
            assert!(!made, "a span was made with RUST_LOG={levels}");
        }
    }

    #[test]
    fn exports_only_with_an_endpoint_and_not_disabled() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")], false),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")], true),
            (
                &[(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "http://c:4318/v1/traces",
                )],
                true,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_SDK_DISABLED", "TRUE"),
                ],
                false,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_TRACES_EXPORTER", "none"),
                ],
                false,
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                    ("OTEL_TRACES_EXPORTER", "otlp"),
                ],
                true,
            ),
        ];
        for (vars, expected) in cases {
            let var = |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            };
            assert_eq!(exporting(var), *expected, "{vars:?}");
        }
    }

    #[test]
    fn content_is_cut_on_a_character_boundary() {
        assert_eq!(bounded(&serde_json::json!({"a": 1})), r#"{"a":1}"#);
        let long = Value::String("é".repeat(MAX_CONTENT_BYTES));
        let cut = bounded(&long);
        assert!(cut.ends_with('…'));
        assert!(cut.len() <= MAX_CONTENT_BYTES + '…'.len_utf8());
    }
}
