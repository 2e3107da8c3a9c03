//! Serving the routes: the accept loops, the drain and stop, running the
//! background chores; and opening the store the settings name.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::config::{StoreBackend, StoreSettings};
use crate::store::{Store, StoreError};

use super::{App, accept};

/// How long a stopping server waits, once its connections are closed, for
/// the turns it then stops and the sockets' writers to end.
const STOP: Duration = Duration::from_secs(5);
/// Open connections at most on `metrics.bind`: scrapers and probes, a
/// quarter of them from one address.
const METRICS_CONNECTIONS: usize = 64;

impl App {
    /// Serves until the process is stopped. Accepted sockets get
    /// `TCP_NODELAY`: with Nagle on, each short streamed response stalls
    /// about 40 ms on a delayed ACK.
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        self.serve_until(listener, std::future::pending()).await
    }

    /// Serves until `shutdown` completes, then drains and stops:
    ///
    /// 1. At once: no new connections, `/readyz` answers 503 `draining`
    ///    (also on `metrics.bind`, which serves until step 3), and held
    ///    turns stop waiting (their messages end as the finish flow's do,
    ///    the question open in the store for the client's next request).
    /// 2. Up to `server.drainSecs` (default 30) for the requests and turns
    ///    in flight to end on their own; then every connection and turn
    ///    left is closed.
    /// 3. Up to [`STOP`] for the server's tasks (sockets' writers); then
    ///    [`Gate::shutdown`](crate::confirm::Gate::shutdown) waits for the
    ///    calls claimed after an approval to record their outcomes (at most
    ///    the tool timeout and a grace), and every MCP server is closed
    ///    (stdio servers' processes ended).
    ///
    /// Request heads must arrive within `server.headerReadSecs`; at most
    /// `server.maxConnections` are open.
    pub async fn serve_until(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let bind = listener.local_addr()?.ip();
        let max_connections = accept::max_connections(
            self.settings.server.max_connections,
            accept::open_files_limit(),
        );
        let limits = accept::Limits {
            header_read: self.settings.server.header_read,
            max_connections,
            per_peer: accept::per_peer(
                self.settings.server.max_connections_per_peer,
                max_connections,
            ),
        };
        tracing::info!(
            "serving at most {} connections, {} from one address",
            limits.max_connections,
            limits.per_peer
        );
        let drain = self.settings.server.drain;
        let metrics_bind = self.settings.metrics.bind;
        let built = self.build(Some(bind));
        let tasks = built.tasks;
        let chores = tasks.spawn(built.chores);
        // Scraped until the main port has drained.
        let scraping = CancellationToken::new();
        if let Some(at) = metrics_bind {
            let listener = TcpListener::bind(at).await?;
            let local = listener.local_addr()?;
            tracing::info!("metrics at http://{local}/metrics");
            // The main port's Host and Origin checks and accept loop: the
            // header timeout and a connection cap of its own (a scraper
            // needs few).
            let routes = (built.metrics_routes)(local.ip());
            let max_connections = METRICS_CONNECTIONS.min(limits.max_connections);
            let limits = accept::Limits {
                header_read: limits.header_read,
                max_connections,
                per_peer: accept::per_peer(None, max_connections),
            };
            let stop = scraping.clone();
            tasks.spawn(accept::serve(
                listener,
                routes,
                limits,
                stop.cancelled_owned(),
                Duration::from_secs(1),
            ));
        }
        let (held, draining) = (built.gate.clone(), built.draining);
        let began = Arc::new(std::sync::OnceLock::new());
        let begin = began.clone();
        let shutdown = async move {
            shutdown.await;
            begin.get_or_init(tokio::time::Instant::now);
            tracing::info!(
                "draining: up to {} s for the turns in flight",
                drain.as_secs()
            );
            // `/readyz` says so from the moment the server starts to stop.
            draining.store(true, Ordering::Relaxed);
            // Nobody can decide here any more: held turns end their
            // messages with the question open, kept in the store.
            held.release_held();
        };
        // On a worker: the task that awaits this is the main thread's under
        // `#[tokio::main]`, which a worker would wake (a futex) for every
        // connection; a worker takes the listener's readiness and runs the
        // connection it accepts next, in its own thread. Stopped with this.
        let accepting = AbortOnDropHandle::new(tasks.spawn(accept::serve(
            listener,
            built.router,
            limits,
            shutdown,
            drain,
        )));
        if let Err(e) = accepting.await {
            tracing::error!("the accept loop failed: {e}");
        }
        // What is left of the window goes to the turns no connection
        // waited for: a socket's.
        let end = began.get().map(|at| *at + drain);
        let left = end.map_or(Duration::ZERO, |end| {
            end.saturating_duration_since(tokio::time::Instant::now())
        });
        if tokio::time::timeout(left, built.runs.idle()).await.is_err() {
            tracing::warn!("turns still running after {} s: stopped", drain.as_secs());
        }
        scraping.cancel();
        // No connection is left to read a turn or resume a held one.
        chores.abort();
        built.runs.stop();
        tasks.close();
        if tokio::time::timeout(STOP, tasks.wait()).await.is_err() {
            tracing::warn!(
                "{} tasks still running after {} s; stopping without them",
                tasks.len(),
                STOP.as_secs()
            );
        }
        built.gate.shutdown().await;
        built.gate.toolbox().shutdown().await;
        Ok(())
    }
}

/// Opens the store the settings name, and says what it is.
pub async fn open_store(settings: &StoreSettings) -> Result<(Store, String), StoreError> {
    let store = match &settings.backend {
        StoreBackend::Memory => Store::memory(),
        StoreBackend::Sqlite { path } => Store::sqlite(path)?,
        StoreBackend::Redis { url, key_prefix } => Store::redis(url, key_prefix).await?,
    };
    let store = store.with_audit_key(settings.audit_key.clone());
    Ok((store, settings.backend.describe()))
}
