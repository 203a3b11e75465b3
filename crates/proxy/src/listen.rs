//! The accept loop every listener runs (HTTP, HTTPS and each TCP port), and what a
//! client connection carries along.
//!
//! Every client connection holds one slot of the proxy's connection limit
//! ([`ProxyConfig::max_connections`](crate::ProxyConfig::max_connections)) from accept
//! until it closes, tunnels included. While every slot is taken the listeners stop
//! accepting: new clients wait in the kernel's backlog rather than being refused, and a
//! warning says so (at most once per ten seconds). A listener stops accepting, and closes
//! its socket, when the proxy drains.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hyper::header::HeaderValue;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::lifecycle::StageWatch;
use crate::routing::Scheme;

/// At most one warning per this long about a full connection limit or failing accepts.
const WARNING_EVERY: Duration = Duration::from_secs(10);

/// The proxy's connection limit, shared by every listener.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionLimit {
    /// One permit per connection that may open; a listener holds one while it waits in
    /// `accept`, so room is there before a connection is taken from the backlog.
    slots: Arc<Semaphore>,
    /// Connections open now.
    open: Arc<AtomicUsize>,
    max: usize,
}

impl ConnectionLimit {
    pub fn new(max: usize) -> ConnectionLimit {
        ConnectionLimit {
            slots: Arc::new(Semaphore::new(max)),
            open: Arc::default(),
            max,
        }
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Returns once every slot is free: no connection is open and no listener waits.
    pub async fn all_free(&self) {
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        let _ = self.slots.acquire_many(all).await;
    }
}

/// One open client connection's place in the limit, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Arc<AtomicUsize>,
}

impl Slot {
    fn taken(permit: OwnedSemaphorePermit, limit: &ConnectionLimit) -> Slot {
        limit.open.fetch_add(1, Ordering::SeqCst);
        Slot {
            _permit: permit,
            open: limit.open.clone(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the proxy knows about a client connection, shared by its requests and tunnels.
#[derive(Debug)]
pub(crate) struct ClientConn {
    pub peer: SocketAddr,
    /// The peer's IP address (IPv4-mapped IPv6 shown as IPv4), made into a header value once.
    pub client_ip: HeaderValue,
    pub scheme: Scheme,
    pub stage: StageWatch,
    /// The connection's slot, given back when the last holder lets go.
    _slot: Slot,
}

impl ClientConn {
    pub fn new(peer: SocketAddr, scheme: Scheme, stage: StageWatch, slot: Slot) -> ClientConn {
        let ip = peer.ip().to_canonical().to_string();
        ClientConn {
            peer,
            client_ip: HeaderValue::try_from(ip).unwrap_or(HeaderValue::from_static("unknown")),
            scheme,
            stage,
            _slot: slot,
        }
    }
}

/// Accepts connections on `listener` and hands each, with its slot, to `serve`, until the
/// proxy drains.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    what: &'static str,
    limit: ConnectionLimit,
    mut stage: StageWatch,
    mut serve: impl FnMut(TcpStream, SocketAddr, Slot),
) {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    tracing::info!(listener = what, %addr, "listening");
    let mut last_warning: Option<Instant> = None;
    let mut warn = |message: &str, error: Option<&std::io::Error>| {
        let now = Instant::now();
        if last_warning.is_none_or(|at| now.duration_since(at) >= WARNING_EVERY) {
            last_warning = Some(now);
            match error {
                Some(e) => tracing::warn!(listener = what, %addr, error = %e, "{message}"),
                None => tracing::warn!(listener = what, %addr, "{message}"),
            }
        }
    };
    loop {
        let permit = match limit.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                warn("connection limit reached; new connections wait", None);
                tokio::select! {
                    permit = limit.slots.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                    () = stage.draining() => break,
                }
            }
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stage.draining() => break,
        };
        match accepted {
            Ok((tcp, peer)) => {
                // Latency over throughput: small writes (HTTP heads, interactive TCP) go at once.
                let _ = tcp.set_nodelay(true);
                serve(tcp, peer, Slot::taken(permit, &limit));
            }
            Err(e) => {
                // Out of descriptors and the like: wait a little rather than spin.
                warn("accepting a connection failed", Some(&e));
                drop(permit);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                    () = stage.draining() => break,
                }
            }
        }
    }
    tracing::info!(listener = what, %addr, "stopped listening");
}
