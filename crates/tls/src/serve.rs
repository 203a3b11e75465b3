//! The accept loop of the zone's listeners (the API and the provider endpoint).
//!
//! Per connection, in order:
//! 1. a permit from the connection limit (accepting waits while all are taken);
//! 2. within the handshake timeout, the first bytes: a TLS listener that receives plain
//!    text answers it with a clear error (HTTP/1: a `400` naming `https://`; HTTP/2: a
//!    GOAWAY with `INADEQUATE_SECURITY`) and closes; then the TLS handshake;
//! 3. HTTP/1 or HTTP/2 (HTTP/2 only when asked) with a header-read timeout, HTTP/2
//!    keep-alive pings, and an idle timeout: a connection with no request in flight for
//!    that long is closed gracefully. A request counts as in flight until its response
//!    body ends, so a long-lived stream keeps its connection.
//!
//! On shutdown the loop stops accepting, asks every connection to finish gracefully, and
//! waits up to the drain timeout before dropping what is left.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// How a listener serves its connections. `Default` gives the production values.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// What the listener is, for log lines ("API", "provider endpoint").
    pub what: &'static str,
    /// TLS config; `None` serves plain text (the zone allows that only on loopback).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Only HTTP/2 (the provider endpoint's gRPC).
    pub http2_only: bool,
    /// Open connections at most; accepting waits while all are taken. Default 1024.
    pub max_connections: usize,
    /// From accept to a finished TLS handshake (or, plain, to the first byte). Default 10 s.
    pub handshake_timeout: Duration,
    /// From the first byte of a request to the end of its headers (HTTP/1). Default 10 s.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed. Default 60 s.
    pub idle_timeout: Duration,
    /// HTTP/2 keep-alive ping interval; the connection closes when a ping goes unanswered
    /// for as long. Default 20 s.
    pub keepalive_interval: Duration,
    /// Concurrent HTTP/2 streams per connection. Default 128.
    pub max_concurrent_streams: u32,
    /// How long shutdown waits for connections to finish. Default 10 s.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            what: "listener",
            tls: None,
            http2_only: false,
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            keepalive_interval: Duration::from_secs(20),
            max_concurrent_streams: 128,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

type BoxError = Box<dyn StdError + Send + Sync>;

/// Serves `service` on `listener` until `shutdown` completes, then drains.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()>
where
    S: tower::Service<http::Request<Incoming>, Response = http::Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let options = Arc::new(options);
    let limit = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut warned_full = false;
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = limit.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        if limit.available_permits() == 0 && !warned_full {
            warned_full = true;
            tracing::warn!(
                what = options.what,
                max = options.max_connections,
                "connection limit reached; new connections wait"
            );
        }
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(what = options.what, error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let service = service.clone();
        let options = options.clone();
        let stop = stop_rx.clone();
        connections.spawn(async move {
            let _permit = permit;
            serve_connection(tcp, peer, service, &options, stop).await;
        });
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
        if limit.available_permits() > 0 {
            warned_full = false;
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(options.drain_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            what = options.what,
            left = connections.len(),
            "connections still open after the drain timeout were dropped"
        );
        connections.shutdown().await;
    }
    Ok(())
}

async fn serve_connection<S, B>(
    tcp: TcpStream,
    peer: SocketAddr,
    service: S,
    options: &ServeOptions,
    stop: watch::Receiver<bool>,
) where
    S: tower::Service<http::Request<Incoming>, Response = http::Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let Some(tls) = &options.tls else {
        serve_http(tcp, peer, service, options, stop, None).await;
        return;
    };
    let first = match tokio::time::timeout(options.handshake_timeout, first_byte(&tcp)).await {
        Ok(Ok(Some(byte))) => byte,
        Ok(Ok(None)) | Ok(Err(_)) => return,
        Err(_) => {
            tracing::debug!(what = options.what, %peer, "closed: nothing sent before the handshake timeout");
            return;
        }
    };
    // Every TLS connection starts with a handshake record (content type 22).
    if first != 0x16 {
        tracing::warn!(
            what = options.what,
            %peer,
            "a client sent plain text to this TLS port; it was told to use https:// with the zone's CA"
        );
        let _ = tokio::time::timeout(options.handshake_timeout, refuse_plain(tcp)).await;
        return;
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
    let stream = match tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            let why = crate::client::explain(&e)
                .map(|f| f.to_string())
                .unwrap_or_else(|| e.to_string());
            tracing::warn!(what = options.what, %peer, reason = %why, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(what = options.what, %peer, "closed: TLS handshake not finished before the timeout");
            return;
        }
    };
    let client = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| ClientCertificate {
            fingerprint: crate::ca::fingerprint(cert.as_ref()).into(),
        });
    serve_http(stream, peer, service, options, stop, client).await;
}

async fn serve_http<I, S, B>(
    io: I,
    peer: SocketAddr,
    service: S,
    options: &ServeOptions,
    mut stop: watch::Receiver<bool>,
    client: Option<ClientCertificate>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<http::Request<Incoming>, Response = http::Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let activity = Arc::new(Activity::new());
    let tracked = Tracked {
        inner: service,
        activity: activity.clone(),
        peer: client,
        addr: PeerAddr(peer),
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(options.keepalive_interval))
        .keep_alive_timeout(options.keepalive_interval)
        .max_concurrent_streams(options.max_concurrent_streams);
    if options.http2_only {
        builder = builder.http2_only();
    }
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), tracked);
    let mut conn = std::pin::pin!(conn);
    let check = (options.idle_timeout / 4).max(Duration::from_millis(50));
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(what = options.what, %peer, error = %e, "connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if !closing => {
                let _ = changed;
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep(check), if !closing => {
                if activity.idle_for() >= options.idle_timeout {
                    tracing::debug!(what = options.what, %peer, "closing an idle connection");
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// The first byte a client sends, without consuming it; `None` when it closes first.
async fn first_byte(tcp: &TcpStream) -> std::io::Result<Option<u8>> {
    let mut byte = [0u8; 1];
    let n = tcp.peek(&mut byte).await?;
    Ok((n > 0).then_some(byte[0]))
}

/// What a TLS port tells a client that sent plain text.
const PLAIN_REFUSAL: &str = "this port speaks TLS: use https:// and pin the zone's CA (ca.pem in its data dir; `orc zone ca` prints it)";

/// Answers plain text on a TLS port in the client's own protocol, then closes.
async fn refuse_plain(mut tcp: TcpStream) -> std::io::Result<()> {
    let mut seen = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    // Read what the client sent first, so closing does not reset the connection before it
    // reads the answer: up to the end of an HTTP/1 head, or the HTTP/2 preface.
    while seen.len() < 16 * 1024 {
        let n = tcp.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&buf[..n]);
        if seen.starts_with(b"PRI * HTTP/2.0") && seen.len() >= 24 {
            break;
        }
        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    if seen.starts_with(b"PRI") {
        tcp.write_all(&h2_refusal()).await?;
    } else {
        let body = format!(
            "{{\"error\":{{\"code\":\"tls_required\",\"message\":\"{PLAIN_REFUSAL}\"}}}}\n"
        );
        let head = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(body.as_bytes()).await?;
    }
    tcp.shutdown().await?;
    // Let the client read the answer and close first.
    while tcp.read(&mut buf).await? > 0 {}
    Ok(())
}

/// An HTTP/2 server preface (empty SETTINGS) and a GOAWAY with `INADEQUATE_SECURITY` whose
/// debug data says what to do.
fn h2_refusal() -> Vec<u8> {
    let mut out = Vec::new();
    // SETTINGS: length 0, type 4, no flags, stream 0.
    out.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let debug = PLAIN_REFUSAL.as_bytes();
    let length = (8 + debug.len()) as u32;
    out.extend_from_slice(&length.to_be_bytes()[1..]);
    // GOAWAY: type 7, no flags, stream 0; last stream 0; error INADEQUATE_SECURITY (0xc).
    out.extend_from_slice(&[7, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&0xcu32.to_be_bytes());
    out.extend_from_slice(debug);
    out
}

/// Requests in flight on one connection and when the last one ended.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    since: Instant,
    /// Milliseconds after `since` of the last request start or end.
    last: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            since: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.since.elapsed().as_millis() as u64;
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(last)
    }
}

/// Counts a request in flight from its call until its response body is dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        activity.touch();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The service as hyper calls it: a clone of the tower service per request, with the
/// request counted in flight.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
    peer: Option<ClientCertificate>,
    addr: PeerAddr,
}

/// The address of the client that opened the connection, in every request's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The certificate a TLS client presented (already verified against the listener's client
/// roots), in every request's extensions. Absent when the client presented none.
#[derive(Debug, Clone)]
pub struct ClientCertificate {
    /// `sha256:<hex>` of the certificate's DER bytes.
    pub fingerprint: Arc<str>,
}

impl<S, B> hyper::service::Service<http::Request<Incoming>> for Tracked<S>
where
    S: tower::Service<http::Request<Incoming>, Response = http::Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, mut request: http::Request<Incoming>) -> Self::Future {
        let guard = InFlight::start(&self.activity);
        request.extensions_mut().insert(self.addr);
        if let Some(peer) = &self.peer {
            request.extensions_mut().insert(peer.clone());
        }
        let service = self.inner.clone();
        Box::pin(async move {
            let response = service.oneshot(request).await?;
            Ok(response.map(|body| TrackedBody {
                inner: body,
                _guard: guard,
            }))
        })
    }
}

/// A response body that keeps its request in flight until it is dropped.
struct TrackedBody<B> {
    inner: B,
    _guard: InFlight,
}

impl<B> Body for TrackedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
