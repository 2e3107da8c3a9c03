//! The accept loop: HTTP/1.1 connections with a header read timeout, a cap
//! on open connections, and a graceful drain.
//!
//! `axum::serve` waits for headers forever and takes every connection, so a
//! few hundred clients that send a byte now and then, or a thousand that
//! send half a request, use up the open files and stop every other request.
//! Here hyper closes a connection whose request head is not complete within
//! `header_read` (its timer also runs while a keep-alive connection waits
//! for its next request); a connection beyond `max_connections` is closed
//! at once, and so is one beyond `per_peer` from one address (an IPv6
//! address's /64: one host's), so one client cannot hold every slot; an
//! `accept` that fails (out of file descriptors) is logged and retried
//! after a short pause.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::faces::guard::LocalAddr;

/// How often the same trouble is logged at most.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// The pause after a failed `accept`: the pending connection stays queued
/// until a descriptor is free, and retrying at once would spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

pub(super) struct Limits {
    pub header_read: Duration,
    pub max_connections: usize,
    /// Open connections from one peer at most (`server.maxConnectionsPerPeer`).
    pub per_peer: usize,
}

/// Closes a connection beyond a cap (`open` connections are, `over` says
/// which) at once, and says so now and then.
fn refuse(stream: TcpStream, throttle: &mut Throttle, open: usize, over: &str) {
    drop(stream);
    if let Some(times) = throttle.hit(Instant::now()) {
        tracing::warn!("refused {times} connections: {open} are open {over}");
    }
}

/// Serves `router` on `listener` until `shutdown` completes; then takes no
/// new connections, lets open ones finish their requests for up to `drain`,
/// and closes the rest.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(Peers::new(limits.per_peer));
    let mut crowded = Throttle::new(LOG_EVERY);
    let connections = TaskTracker::new();
    let draining = CancellationToken::new();
    let abort = CancellationToken::new();
    let mut refused = Throttle::new(LOG_EVERY);
    let mut failed = Throttle::new(LOG_EVERY);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer.ip()),
                // The client gave up before we took its connection.
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    if let Some(times) = failed.hit(Instant::now()) {
                        tracing::error!("cannot accept connections ({times} times): {e}");
                    }
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    }
                }
            },
        };
        let (stream, peer) = stream;
        // Its peer's share first: a peer at its cap takes no slot of the others'.
        let Some(peer) = peers.enter(peer) else {
            let over = "from one address (server.maxConnectionsPerPeer)";
            refuse(stream, &mut crowded, limits.per_peer, over);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refuse(
                stream,
                &mut refused,
                limits.max_connections,
                "(server.maxConnections)",
            );
            continue;
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {e}");
        }
        let local = stream.local_addr().ok();
        let service = router
            .clone()
            .map_request(move |request: axum::http::Request<Incoming>| {
                let mut request = request.map(Body::new);
                if let Some(local) = local {
                    request.extensions_mut().insert(LocalAddr(local));
                }
                request
            });
        let io = TokioIo::new(Counted {
            stream,
            _slot: slot,
            _peer: peer,
        });
        let connection = builder
            .serve_connection(io, TowerToHyperService::new(service))
            .with_upgrades();
        let (draining, abort) = (draining.clone(), abort.clone());
        connections.spawn(async move {
            tokio::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                () = draining.cancelled() => {
                    // Finish the request in flight, take no other.
                    connection.as_mut().graceful_shutdown();
                    tokio::select! {
                        ended = connection.as_mut() => ended,
                        () = abort.cancelled() => Ok(()),
                    }
                }
            };
            if let Err(e) = ended {
                tracing::debug!("connection closed: {e}");
            }
        });
    }
    drop(listener);
    draining.cancel();
    connections.close();
    if tokio::time::timeout(drain, connections.wait())
        .await
        .is_err()
    {
        abort.cancel();
        connections.wait().await;
    }
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The soft open-files limit, if the platform has one.
pub(super) fn open_files_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rlimit::getrlimit(rlimit::Resource::NOFILE)
            .ok()
            .map(|(soft, _)| soft)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The connection cap: the configured one, kept below the open-files
/// limit so that the store, the model's connections and MCP servers still
/// get descriptors when every connection slot is taken.
pub(super) fn max_connections(configured: Option<usize>, open_files: Option<u64>) -> usize {
    let ceiling = open_files.map(|limit| {
        let reserve = (limit / 8).max(64);
        usize::try_from(limit.saturating_sub(reserve))
            .unwrap_or(usize::MAX)
            .max(1)
    });
    match (configured, ceiling) {
        (Some(wanted), Some(ceiling)) if wanted > ceiling => {
            tracing::warn!(
                "server.maxConnections {wanted} is above what the open-files limit allows; using {ceiling}"
            );
            ceiling
        }
        (Some(wanted), _) => wanted.max(1),
        (None, Some(ceiling)) => ceiling,
        (None, None) => 1024,
    }
}

/// The default `server.maxConnectionsPerPeer`: a quarter of the
/// connection cap, so at least four peers share the server. Behind a
/// proxy on the same host every connection is the proxy's: raise it there.
pub(super) fn per_peer(configured: Option<usize>, max_connections: usize) -> usize {
    configured
        .unwrap_or(max_connections / 4)
        .clamp(1, max_connections.max(1))
}

/// Who a connection counts against: an IPv4 address, or an IPv6 address's
/// /64 (one host's: a host gets a whole /64 to choose addresses from).
fn peer_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Open connections per peer, none above the cap.
struct Peers {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl Peers {
    fn new(cap: usize) -> Self {
        Self {
            cap,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more connection of `ip`'s peer, if it has room.
    fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        let peer = peer_of(ip);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(peer).or_insert(0);
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: self.clone(),
            peer,
        })
    }

    fn leave(&self, peer: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&peer);
            }
        }
    }
}

/// One connection's place in its peer's count, given back on drop.
struct PeerSlot {
    peers: Arc<Peers>,
    peer: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        self.peers.leave(self.peer);
    }
}

/// A connection holding its slot and its peer's: both are freed when the
/// socket closes, also after an upgrade to a WebSocket, which keeps the socket.
struct Counted {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    _peer: PeerSlot,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Lets a repeated event through to the log at most once per `every`,
/// saying how often it happened since.
struct Throttle {
    every: Duration,
    last: Option<Instant>,
    held: u64,
}

impl Throttle {
    fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            held: 0,
        }
    }

    /// Counts one event; `Some(n)` when it is to be logged now, `n` the
    /// events since the last log, this one included.
    fn hit(&mut self, now: Instant) -> Option<u64> {
        self.held += 1;
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.every => None,
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_event_is_logged_once_per_period_with_its_count() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut throttle = Throttle::new(Duration::from_secs(10));
        let logged: Vec<Option<u64>> = [0, 1, 2, 9_999, 10_000, 10_001, 25_000]
            .into_iter()
            .map(|ms| throttle.hit(at(ms)))
            .collect();
        assert_eq!(logged, [Some(1), None, None, None, Some(4), None, Some(2)]);
    }

    #[test]
    fn one_peer_holds_at_most_its_share() {
        let peers = Arc::new(Peers::new(2));
        let ip = |text: &str| text.parse::<IpAddr>().unwrap_or_else(|e| panic!("{e}"));
        let a1 = peers.enter(ip("10.0.0.1"));
        let a2 = peers.enter(ip("10.0.0.1"));
        assert!(a1.is_some() && a2.is_some());
        assert!(peers.enter(ip("10.0.0.1")).is_none(), "over its share");
        assert!(
            peers.enter(ip("::ffff:10.0.0.1")).is_none(),
            "the same IPv4 peer, mapped"
        );
        let b = peers.enter(ip("10.0.0.2"));
        assert!(b.is_some(), "another peer has its own share");
        // One IPv6 host's /64 is one peer.
        let c1 = peers.enter(ip("2001:db8:1:2::1"));
        let c2 = peers.enter(ip("2001:db8:1:2:ffff::9"));
        assert!(c1.is_some() && c2.is_some());
        assert!(peers.enter(ip("2001:db8:1:2::3")).is_none());
        assert!(peers.enter(ip("2001:db8:1:3::1")).is_some());
        drop(a1);
        let again = peers.enter(ip("10.0.0.1"));
        assert!(again.is_some(), "a closed connection gives its place back");
        drop((again, a2, b, c1, c2));
        let open = peers.open.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(open.is_empty(), "{open:?}");
    }

    #[test]
    fn the_default_share_is_a_quarter_of_the_cap() {
        #[rustfmt::skip]
        let cases: &[(Option<usize>, usize, usize)] = &[
            (None, 896, 224),
            (None, 8, 2),
            (None, 3, 1),
            (None, 1, 1),
            (Some(8), 8, 8),
            (Some(100), 8, 8),
            (Some(0), 8, 1),
            (Some(5), 896, 5),
        ];
        for (configured, cap, share) in cases {
            assert_eq!(per_peer(*configured, *cap), *share, "{configured:?} {cap}");
        }
    }

    #[test]
    fn the_connection_cap_stays_below_the_open_files_limit() {
        #[rustfmt::skip]
        let cases: &[(Option<usize>, Option<u64>, usize)] = &[
            (None, Some(1024), 896),
            (None, Some(256), 192),
            (None, Some(65_536), 57_344),
            (None, Some(10), 1),
            (None, None, 1024),
            (Some(100), Some(1024), 100),
            (Some(5000), Some(1024), 896),
            (Some(5000), None, 5000),
            (Some(0), Some(1024), 1),
        ];
        for (configured, limit, cap) in cases {
            assert_eq!(
                max_connections(*configured, *limit),
                *cap,
                "{configured:?} {limit:?}"
            );
        }
    }
}
