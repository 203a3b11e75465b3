//! Raw TCP routes: one listener per public port on the config's `tcp_bind_ip`, each
//! connection joined to a backend byte for byte (no HTTP, no TLS).
//!
//! A connection reads the table when it is accepted: the port's route picks a backend
//! round robin, the next one when connecting fails (each tried once, within the connect
//! timeout each); when none takes it, the client's connection is closed. Both sides get
//! TCP_NODELAY; half-closes pass through. A port that leaves the table stops accepting
//! (its listener closes before [`Proxy::set_routes`](crate::Proxy::set_routes) returns),
//! while its established connections carry on until either side closes or the proxy
//! closes. A port that cannot be bound is reported, and tried again by every later
//! `set_routes` that still has it.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

use crate::error::RouteProblem;
use crate::listen::{Slot, accept_loop};
use crate::proxy::Shared;
use crate::stats::RouteCounters;

/// The listeners of the TCP ports, by port.
#[derive(Debug, Default)]
pub(crate) struct TcpPorts {
    open: BTreeMap<u16, JoinHandle<()>>,
}

impl TcpPorts {
    /// The ports listening now.
    pub fn ports(&self) -> Vec<u16> {
        self.open.keys().copied().collect()
    }

    /// Opens a listener for each of `ports` not open yet; lists those that cannot be.
    pub fn open(
        &mut self,
        shared: &Arc<Shared>,
        ports: impl IntoIterator<Item = u16>,
        problems: &mut Vec<RouteProblem>,
    ) {
        for port in ports {
            if self.open.contains_key(&port) {
                continue;
            }
            let listener = match bind(shared.tcp_bind_ip, port) {
                Ok(listener) => listener,
                Err(source) => {
                    problems.push(RouteProblem::PortUnavailable {
                        port,
                        ip: shared.tcp_bind_ip,
                        source,
                    });
                    continue;
                }
            };
            let accepting = {
                let shared = shared.clone();
                accept_loop(
                    listener,
                    "TCP",
                    shared.limit.clone(),
                    shared.lifecycle.watch(),
                    move |tcp, peer, slot| {
                        tokio::spawn(forward(shared.clone(), port, tcp, peer, slot));
                    },
                )
            };
            self.open.insert(port, tokio::spawn(accepting));
        }
    }

    /// Closes the listeners of the ports `keep` does not name, and returns once their
    /// sockets are closed. Established connections are not touched.
    pub async fn close_others(&mut self, keep: &[u16]) {
        let closing: Vec<u16> = self
            .open
            .keys()
            .filter(|port| !keep.contains(port))
            .copied()
            .collect();
        let mut handles = Vec::with_capacity(closing.len());
        for port in closing {
            if let Some(handle) = self.open.remove(&port) {
                handle.abort();
                handles.push((port, handle));
            }
        }
        for (port, handle) in handles {
            // Cancelled, the task has dropped its listener.
            let _ = handle.await;
            tracing::info!(port, "TCP port closed");
        }
    }
}

fn bind(ip: IpAddr, port: u16) -> io::Result<TcpListener> {
    let socket = if ip.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::new(ip, port))?;
    socket.listen(1024)
}

/// Joins one client connection on `port` to a backend of the port's route.
async fn forward(shared: Arc<Shared>, port: u16, client: TcpStream, peer: SocketAddr, slot: Slot) {
    let Some(upstream) = shared.table.load().tcp.get(&port).cloned() else {
        tracing::debug!(port, %peer, "no route for the port any more");
        return;
    };
    let mut stage = shared.lifecycle.watch();
    let joined = async {
        let counters = &upstream.counters;
        RouteCounters::add(&counters.tcp_connections, 1);
        let mut backend = None;
        for candidate in upstream.in_turn() {
            match tokio::time::timeout(shared.connect_timeout, TcpStream::connect(candidate.addr))
                .await
            {
                Ok(Ok(stream)) => {
                    backend = Some((stream, candidate.addr));
                    break;
                }
                Ok(Err(e)) => {
                    tracing::debug!(port, route = %upstream.name, backend = %candidate.addr,
                    error = %e, "connecting to a replica failed; trying the next")
                }
                Err(_) => tracing::debug!(port, route = %upstream.name, backend = %candidate.addr,
                    "connecting to a replica timed out; trying the next"),
            }
        }
        let Some((mut backend, addr)) = backend else {
            RouteCounters::add(&counters.proxy_errors, 1);
            tracing::debug!(port, route = %upstream.name, %peer, "no replica took the connection");
            return;
        };
        let _ = backend.set_nodelay(true);
        let mut client = Counted {
            inner: client,
            counters: counters.clone(),
        };
        match tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            Ok((up, down)) => tracing::debug!(port, route = %upstream.name, %peer, backend = %addr,
                up, down, "TCP connection closed"),
            Err(e) => tracing::debug!(port, route = %upstream.name, %peer, backend = %addr,
                error = %e, "TCP connection failed"),
        }
    };
    tokio::select! {
        () = joined => {}
        () = stage.closing() => {}
    }
    drop(slot);
}

/// A client's TCP stream that counts the bytes passing on its route's counters.
struct Counted {
    inner: TcpStream,
    counters: Arc<RouteCounters>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 {
            RouteCounters::add(&self.counters.tcp_bytes_from_clients, read as u64);
        }
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            RouteCounters::add(&self.counters.tcp_bytes_to_clients, written as u64);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
