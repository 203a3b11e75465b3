//! The proxy itself: its config, its listeners, the table swap and shutdown.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::crypto::CryptoProvider;
use tokio::net::TcpListener;
use tokio::sync::{Mutex, oneshot};
use tokio_rustls::TlsAcceptor;

use crate::certs::SniResolver;
use crate::error::{PartlyApplied, StartError};
use crate::forward::Forwarder;
use crate::http::{serve_http, serve_https};
use crate::lifecycle::{Lifecycle, Stage};
use crate::listen::{ClientConn, ConnectionLimit, accept_loop};
use crate::routes::Routes;
use crate::routing::Scheme;
use crate::stats::{ProxyStats, StatsRegistry};
use crate::table::{CertCache, Table, compile};
use crate::tcp::TcpPorts;

/// How the proxy listens and forwards. `Default` gives production values: HTTP on
/// `0.0.0.0:80`, HTTPS on `0.0.0.0:443`, TCP ports on `0.0.0.0`.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The plain-HTTP listener (ACME challenges, redirects, domain routes without a
    /// certificate, the catch-all). Port 0 picks a free port; see [`Proxy::http_addr`].
    pub http_addr: SocketAddr,
    /// The HTTPS listener (domain routes, by SNI and `Host`). Redirects from HTTP name no
    /// port, so clients follow them to 443 whatever this port is.
    pub https_addr: SocketAddr,
    /// The address the TCP routes' ports are opened on.
    pub tcp_bind_ip: IpAddr,
    /// Client connections open at once, over every listener, upgraded ones included.
    /// Beyond it the listeners stop accepting until one closes (clients wait in the
    /// kernel's backlog). Default 10,000; at most `u32::MAX`.
    pub max_connections: usize,
    /// How long connecting to one backend may take before the next is tried. Default 2 s.
    pub connect_timeout: Duration,
    /// How long a backend may take to send its answer's head, counted from the first
    /// attempt; then `504`. Bodies may take as long as they take. Default 60 s.
    pub response_timeout: Duration,
    /// A pooled backend connection unused this long is closed. Default 30 s.
    pub pool_idle_timeout: Duration,
    /// Idle pooled connections kept per backend at most. Default 128.
    pub pool_max_idle_per_backend: usize,
    /// From accept to a finished TLS handshake. Default 10 s.
    pub handshake_timeout: Duration,
    /// How long an HTTP/1 client may take to send a request head. Default 30 s.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per client connection. Default 256.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 keep-alive ping interval; a connection whose ping goes unanswered as long is
    /// closed. Default 20 s.
    pub http2_keep_alive_interval: Duration,
    /// Threads serving HTTP and HTTPS, each with its own runtime, its own listening
    /// sockets on the same ports (`SO_REUSEPORT`: the kernel spreads new connections over
    /// them) and its own backend connections, so a request never leaves the thread that
    /// accepted it. Default: one per core.
    pub workers: usize,
}

impl Default for ProxyConfig {
    fn default() -> ProxyConfig {
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        ProxyConfig {
            http_addr: SocketAddr::new(any, 80),
            https_addr: SocketAddr::new(any, 443),
            tcp_bind_ip: any,
            max_connections: 10_000,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(30),
            pool_max_idle_per_backend: 128,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            http2_max_concurrent_streams: 256,
            http2_keep_alive_interval: Duration::from_secs(20),
            workers: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

impl ProxyConfig {
    fn validate(&self) -> Result<(), StartError> {
        let problem = |field, problem| Err(StartError::Config { field, problem });
        if self.max_connections == 0 || u32::try_from(self.max_connections).is_err() {
            return problem("max_connections", "must be between 1 and 4294967295");
        }
        for (field, value) in [
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
            ("handshake_timeout", self.handshake_timeout),
            ("header_read_timeout", self.header_read_timeout),
            ("http2_keep_alive_interval", self.http2_keep_alive_interval),
        ] {
            if value.is_zero() {
                return problem(field, "must be longer than zero");
            }
        }
        if self.http2_max_concurrent_streams == 0 {
            return problem("http2_max_concurrent_streams", "must be at least 1");
        }
        if self.workers == 0 || self.workers > 256 {
            return problem("workers", "must be between 1 and 256");
        }
        Ok(())
    }
}

/// What every listener and connection task shares.
pub(crate) struct Shared {
    pub table: Arc<ArcSwap<Table>>,
    pub http: auto::Builder<TokioExecutor>,
    pub tls: TlsAcceptor,
    pub limit: ConnectionLimit,
    pub lifecycle: Lifecycle,
    pub registry: StatsRegistry,
    pub tcp_bind_ip: IpAddr,
    pub connect_timeout: Duration,
    pub handshake_timeout: Duration,
    provider: Arc<CryptoProvider>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("limit", &self.limit)
            .field("tcp_bind_ip", &self.tcp_bind_ip)
            .finish_non_exhaustive()
    }
}

/// What one serving thread holds: the shared state and its own backend connections.
#[derive(Debug)]
pub(crate) struct Worker {
    pub shared: Arc<Shared>,
    pub forwarder: Forwarder,
}

/// What only `set_routes` and `shutdown` touch, one call at a time.
#[derive(Debug, Default)]
struct Control {
    ports: TcpPorts,
    certificates: CertCache,
}

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Connections still open at the drain deadline, and so cut.
    pub connections_cut: usize,
}

/// The ingress proxy: its listeners run from [`Proxy::start`] until [`Proxy::shutdown`]
/// (or until it is dropped, which closes everything at once).
#[derive(Debug)]
pub struct Proxy {
    shared: Arc<Shared>,
    http_addr: SocketAddr,
    https_addr: SocketAddr,
    /// One per worker thread: told when its listeners have stopped and closed.
    listening: Vec<oneshot::Receiver<()>>,
    control: Mutex<Control>,
}

impl Proxy {
    /// Binds the HTTP and HTTPS listeners and starts serving, with an empty table: every
    /// request is a `404` and every TLS handshake fails until [`Proxy::set_routes`].
    /// HTTP and HTTPS are served by the proxy's own threads ([`ProxyConfig::workers`]); the
    /// tokio runtime this is called in runs the TCP ports.
    pub async fn start(config: ProxyConfig) -> Result<Proxy, StartError> {
        config.validate()?;
        let http_listeners = bind_all("HTTP", config.http_addr, config.workers)?;
        let https_listeners = bind_all("HTTPS", config.https_addr, config.workers)?;
        let local = |listeners: &[std::net::TcpListener], name, addr| {
            listeners[0]
                .local_addr()
                .map_err(|source| StartError::Listen {
                    listener: name,
                    addr,
                    source,
                })
        };
        let http_addr = local(&http_listeners, "HTTP", config.http_addr)?;
        let https_addr = local(&https_listeners, "HTTPS", config.https_addr)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let table = Arc::new(ArcSwap::from_pointee(Table::default()));
        let mut tls = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(StartError::Tls)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(SniResolver {
                table: table.clone(),
            }));
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

        let mut http = auto::Builder::new(TokioExecutor::new());
        http.http1()
            .timer(TokioTimer::new())
            .header_read_timeout(config.header_read_timeout);
        http.http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(config.http2_keep_alive_interval)
            .max_concurrent_streams(config.http2_max_concurrent_streams);

        let shared = Arc::new(Shared {
            table,
            http,
            tls: TlsAcceptor::from(Arc::new(tls)),
            limit: ConnectionLimit::new(config.max_connections),
            lifecycle: Lifecycle::new(),
            registry: StatsRegistry::default(),
            tcp_bind_ip: config.tcp_bind_ip,
            connect_timeout: config.connect_timeout,
            handshake_timeout: config.handshake_timeout,
            provider,
        });

        let mut listening = Vec::new();
        for (index, (http, https)) in http_listeners.into_iter().zip(https_listeners).enumerate() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(StartError::Runtime)?;
            let worker = Arc::new(Worker {
                shared: shared.clone(),
                forwarder: Forwarder::new(&config),
            });
            let (done, listened) = oneshot::channel();
            std::thread::Builder::new()
                .name(format!("orc-proxy-{index}"))
                .spawn(move || runtime.block_on(serve_worker(worker, http, https, done)))
                .map_err(StartError::Runtime)?;
            listening.push(listened);
        }

        Ok(Proxy {
            shared,
            http_addr,
            https_addr,
            listening,
            control: Mutex::new(Control::default()),
        })
    }

    /// The HTTP listener's address (with the port picked when the config said 0).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// The HTTPS listener's address.
    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    /// Replaces the route table.
    ///
    /// The new table serves every request and connection accepted from the moment it is
    /// stored; requests and connections already under way finish with the backend they
    /// have. Then TCP listeners open for the ports that are new and close for the ports
    /// that left (their established connections carry on); when this returns, a removed
    /// port no longer accepts. Counters carry over for route names that stay.
    ///
    /// What cannot be used (a certificate that does not parse, a port that cannot be
    /// bound, a key that is not a host name) is left out, logged at warn level and listed
    /// in the error; everything else is in force all the same.
    pub async fn set_routes(&self, routes: Routes) -> Result<(), PartlyApplied> {
        let mut control = self.control.lock().await;
        let (table, mut problems) = compile(
            &routes,
            &mut control.certificates,
            &self.shared.registry,
            &self.shared.provider,
        );
        let mut ports: Vec<u16> = table.tcp.keys().copied().collect();
        ports.sort_unstable();
        self.shared.table.store(Arc::new(table));
        control
            .ports
            .open(&self.shared, ports.iter().copied(), &mut problems);
        control.ports.close_others(&ports).await;
        tracing::debug!(
            http = routes.http.len(),
            catch_all = routes.catch_all.is_some(),
            tcp = routes.tcp.len(),
            certificates = routes.certificates.len(),
            challenges = routes.challenges.len(),
            "route table set"
        );
        if problems.is_empty() {
            return Ok(());
        }
        let partly = PartlyApplied { problems };
        for problem in &partly.problems {
            let cause = std::error::Error::source(problem).map(ToString::to_string);
            tracing::warn!(cause, "{problem}");
        }
        Err(partly)
    }

    /// The TCP ports listening now.
    pub async fn tcp_ports(&self) -> Vec<u16> {
        self.control.lock().await.ports.ports()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ProxyStats {
        self.shared.registry.snapshot(self.shared.limit.open())
    }

    /// Shuts the proxy down gracefully. Every listener stops accepting and closes its
    /// socket first; then, for up to `drain`, HTTP connections finish their requests in
    /// flight (and close), while TCP connections and upgraded tunnels run on; whatever is
    /// still open at the deadline is closed, and counted in the report.
    pub async fn shutdown(mut self, drain: Duration) -> ShutdownReport {
        let shared = self.shared.clone();
        shared.lifecycle.advance(Stage::Draining);
        for listened in self.listening.drain(..) {
            let _ = listened.await;
        }
        self.control.lock().await.ports.close_others(&[]).await;
        let drained = tokio::time::timeout(drain, shared.limit.all_free())
            .await
            .is_ok();
        let connections_cut = if drained { 0 } else { shared.limit.open() };
        shared.lifecycle.advance(Stage::Closing);
        if !drained {
            // Every task gives up at once on closing; this only waits for them to notice.
            let _ = tokio::time::timeout(Duration::from_secs(5), shared.limit.all_free()).await;
        }
        tracing::info!(connections_cut, "proxy stopped");
        ShutdownReport { connections_cut }
    }
}

/// Dropping the proxy closes every listener and connection without draining.
impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.lifecycle.advance(Stage::Closing);
    }
}

/// `count` listening sockets on `addr` (port 0: one free port for all), each with
/// `SO_REUSEPORT` so the kernel spreads new connections over them.
fn bind_all(
    listener: &'static str,
    addr: SocketAddr,
    count: usize,
) -> Result<Vec<std::net::TcpListener>, StartError> {
    let fail = |source| StartError::Listen {
        listener,
        addr,
        source,
    };
    let mut bound = addr;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(bound),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(fail)?;
        socket.set_reuse_address(true).map_err(fail)?;
        socket.set_reuse_port(true).map_err(fail)?;
        socket.set_nonblocking(true).map_err(fail)?;
        socket.bind(&bound.into()).map_err(fail)?;
        socket.listen(1024).map_err(fail)?;
        let std: std::net::TcpListener = socket.into();
        bound = std.local_addr().map_err(fail)?;
        out.push(std);
    }
    Ok(out)
}

/// One serving thread: accepts on its HTTP and HTTPS sockets and serves what it accepted,
/// until the proxy drains (then `done` is told) and its connections are done or the proxy
/// closes.
async fn serve_worker(
    worker: Arc<Worker>,
    http: std::net::TcpListener,
    https: std::net::TcpListener,
    done: oneshot::Sender<()>,
) {
    let accept = |listener: std::net::TcpListener, what: &'static str, scheme: Scheme| {
        let worker = worker.clone();
        async move {
            let listener = match TcpListener::from_std(listener) {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(listener = what, error = %e, "a listening socket cannot be used");
                    return;
                }
            };
            let shared = worker.shared.clone();
            accept_loop(
                listener,
                what,
                shared.limit.clone(),
                shared.lifecycle.watch(),
                move |tcp, peer, slot| {
                    let conn = ClientConn::new(peer, scheme, shared.lifecycle.watch(), slot);
                    match scheme {
                        Scheme::Http => tokio::spawn(serve_http(worker.clone(), tcp, conn)),
                        Scheme::Https => tokio::spawn(serve_https(worker.clone(), tcp, conn)),
                    };
                },
            )
            .await;
        }
    };
    tokio::join!(
        accept(http, "HTTP", Scheme::Http),
        accept(https, "HTTPS", Scheme::Https)
    );
    let _ = done.send(());
    // What this thread accepted is served here: keep going until it is all done, or the
    // proxy closes (and dropping the runtime cuts what is left).
    let shared = &worker.shared;
    let mut stage = shared.lifecycle.watch();
    tokio::select! {
        () = shared.limit.all_free() => {}
        () = stage.closing() => {}
    }
}
