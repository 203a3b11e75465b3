//! The accept loop of the zone's listeners (the API, the access edge and the provider
//! endpoint).
//!
//! Per connection, in order:
//! 1. a slot from the connection limits ([`crate::limits`]): accepting waits while all
//!    `max_connections` are taken; a connection from a source (an IPv4 address, an IPv6 /64)
//!    that holds `max_connections_per_source` already is closed at once, before any TLS,
//!    with a warning naming the address (at most one such warning per 10 s); beyond the
//!    share of connections that have not authenticated, a connection enters the reserve on
//!    probation and is closed unless it authenticates in time;
//! 2. within the handshake timeout, the first bytes: a TLS listener that receives plain
//!    text answers it with a clear error (HTTP/1: a `400` naming `https://`; HTTP/2: a
//!    GOAWAY with `INADEQUATE_SECURITY`) and closes; then the TLS handshake;
//! 3. HTTP/1 or HTTP/2 (HTTP/2 only when asked) with a header-read timeout, HTTP/2
//!    keep-alive pings, and an idle timeout: a connection with no request in flight for
//!    that long is closed gracefully. A request counts as in flight until its response
//!    body ends, so a long-lived stream keeps its connection.
//!
//! While three quarters of the slots or more are taken the listener is under pressure: the
//! handshake timeout drops to `pressure_handshake_timeout`, and a connection that has not
//! authenticated is closed after `pressure_idle_timeout` with no request in flight. Every
//! waiting connection looks again when the pressure changes.
//!
//! Authenticated connections: the listener cannot read credentials, so the service tells
//! it. Every request carries a [`ConnectionAuth`] in its extensions; the service calls
//! [`ConnectionAuth::mark_authenticated`] once it has accepted the request's credential
//! (the zone's API does so for a valid token, the edge for a session or token, the
//! provider endpoint for a stream's token). A client certificate the TLS handshake
//! verified marks its connection at once. An authenticated connection keeps the full idle
//! timeout under pressure, and may hold the slots reserved for such connections.
//!
//! On shutdown the loop stops accepting, asks every connection to finish gracefully, and
//! waits up to the drain timeout before dropping what is left.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::limits::{
    Admission, Admitted, ConnectionState, Limits, Refused, Source, Timeouts, Verdict,
};

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
    /// Open connections from one source (an IPv4 address, an IPv6 /64) at most; more are
    /// closed at once. `None`: a quarter of `max_connections`, so one source can neither
    /// take every slot nor, alone, put the listener under pressure.
    pub max_connections_per_source: Option<usize>,
    /// Slots kept for connections that authenticate: the others hold at most
    /// `max_connections` minus these, and one admitted into the reserve is closed unless it
    /// authenticates within `reserve_probation`. `None`: a tenth of `max_connections`.
    pub reserved_for_authenticated: Option<usize>,
    /// From accept to a finished TLS handshake (or, plain, to the first byte). Default 10 s.
    pub handshake_timeout: Duration,
    /// The handshake timeout while the listener is under pressure (three quarters of its
    /// connections taken). Default 1 s.
    pub pressure_handshake_timeout: Duration,
    /// From the first byte of a request to the end of its headers (HTTP/1). Default 10 s.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight for this long is closed. Default 60 s.
    pub idle_timeout: Duration,
    /// The idle timeout, under pressure, of a connection that has not authenticated
    /// (before its first request or between two). Default 2 s.
    pub pressure_idle_timeout: Duration,
    /// How long a connection admitted into the reserve has, from accept, to authenticate.
    /// Default 3 s.
    pub reserve_probation: Duration,
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
            max_connections_per_source: None,
            reserved_for_authenticated: None,
            handshake_timeout: Duration::from_secs(10),
            pressure_handshake_timeout: Duration::from_secs(1),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            pressure_idle_timeout: Duration::from_secs(2),
            reserve_probation: Duration::from_secs(3),
            keepalive_interval: Duration::from_secs(20),
            max_concurrent_streams: 128,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

impl ServeOptions {
    /// The connection limits these options set.
    pub fn limits(&self) -> Limits {
        Limits::new(
            self.max_connections,
            self.max_connections_per_source,
            self.reserved_for_authenticated,
        )
    }

    fn timeouts(&self) -> Timeouts {
        Timeouts {
            handshake: self.handshake_timeout,
            pressure_handshake: self.pressure_handshake_timeout,
            idle: self.idle_timeout,
            pressure_idle: self.pressure_idle_timeout,
            probation: self.reserve_probation,
        }
    }
}

type BoxError = Box<dyn StdError + Send + Sync>;

/// At most one warning about refused sources per this long, per listener.
const REFUSAL_WARNING_EVERY: Duration = Duration::from_secs(10);

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
    let limits = options.limits();
    let gate = Gate::new(limits);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut warned_full = false;
    let mut refusals = RefusalWarnings::default();
    loop {
        if !gate.has_room() && !warned_full {
            warned_full = true;
            tracing::warn!(
                what = options.what,
                max = limits.max,
                "connection limit reached; new connections wait"
            );
        }
        tokio::select! {
            () = &mut shutdown => break,
            () = gate.room() => {}
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
        let slot = match Gate::admit(&gate, peer.ip()) {
            Ok(slot) => slot,
            Err(Refused::SourceFull(source)) => {
                refusals.refused(options.what, peer, source, limits.per_source);
                drop(tcp);
                continue;
            }
            Err(Refused::Full) => {
                drop(tcp);
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = service.clone();
        let options = options.clone();
        let stop = stop_rx.clone();
        connections.spawn(async move {
            serve_connection(tcp, peer, service, &options, stop, slot).await;
        });
        // Reap finished connections so the set does not grow.
        while connections.try_join_next().is_some() {}
        if gate.has_room() {
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

/// The warnings about connections refused for their source: the first, then at most one
/// per [`REFUSAL_WARNING_EVERY`], counting the refusals in between.
#[derive(Debug, Default)]
struct RefusalWarnings {
    last: Option<Instant>,
    unreported: u64,
}

impl RefusalWarnings {
    fn refused(&mut self, what: &'static str, peer: SocketAddr, source: Source, share: usize) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < REFUSAL_WARNING_EVERY)
        {
            self.unreported += 1;
            return;
        }
        tracing::warn!(
            what,
            address = %peer.ip(),
            %source,
            per_source = share,
            refused_before_unreported = self.unreported,
            "a connection was refused: its address holds its share of the connection limit already"
        );
        self.last = Some(now);
        self.unreported = 0;
    }
}

/// A listener's connection count, shared by the accept loop and its connections.
#[derive(Debug)]
struct Gate {
    admission: Mutex<Admission>,
    /// Signalled when a slot is freed.
    freed: Notify,
    /// Whether the listener is under pressure; every connection watches it.
    pressure: watch::Sender<bool>,
}

impl Gate {
    fn new(limits: Limits) -> Arc<Gate> {
        Arc::new(Gate {
            admission: Mutex::new(Admission::new(limits)),
            freed: Notify::new(),
            pressure: watch::channel(false).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Admission> {
        self.admission
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn has_room(&self) -> bool {
        self.lock().has_room()
    }

    /// Completes when a connection could be admitted.
    async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if self.has_room() {
                return;
            }
            freed.await;
        }
    }

    fn update_pressure(&self, admission: &Admission) {
        let now = admission.under_pressure();
        self.pressure.send_if_modified(|was| {
            let changed = *was != now;
            *was = now;
            changed
        });
    }

    fn admit(gate: &Arc<Gate>, ip: IpAddr) -> Result<Slot, Refused> {
        let source = Source::of(ip);
        let mut admission = gate.lock();
        let admitted = admission.admit(source)?;
        gate.update_pressure(&admission);
        drop(admission);
        Ok(Slot {
            admitted,
            auth: ConnectionAuth {
                inner: Arc::new(AuthInner {
                    gate: gate.clone(),
                    source,
                    open: AtomicBool::new(true),
                    authenticated: AtomicBool::new(false),
                }),
            },
        })
    }
}

/// One admitted connection's place in its listener's count, freed when dropped.
struct Slot {
    admitted: Admitted,
    auth: ConnectionAuth,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let inner = &self.auth.inner;
        let mut admission = inner.gate.lock();
        if inner.open.swap(false, Ordering::Relaxed) {
            admission.release(inner.source, inner.authenticated.load(Ordering::Relaxed));
            inner.gate.update_pressure(&admission);
        }
        drop(admission);
        inner.gate.freed.notify_one();
    }
}

/// The connection a request came on, in every request's extensions: the service calls
/// [`ConnectionAuth::mark_authenticated`] once it has accepted the request's credential,
/// and the connection is then held to the limits of authenticated connections (see the
/// module doc). Extensions never come from the network, so only the service can mark.
#[derive(Debug, Clone)]
pub struct ConnectionAuth {
    inner: Arc<AuthInner>,
}

#[derive(Debug)]
struct AuthInner {
    gate: Arc<Gate>,
    source: Source,
    /// Both flags change only under the gate's lock.
    open: AtomicBool,
    authenticated: AtomicBool,
}

impl ConnectionAuth {
    /// Marks the connection authenticated (again: no effect; after it closed: none).
    pub fn mark_authenticated(&self) {
        let inner = &self.inner;
        if inner.authenticated.load(Ordering::Relaxed) {
            return;
        }
        let mut admission = inner.gate.lock();
        if inner.open.load(Ordering::Relaxed) && !inner.authenticated.swap(true, Ordering::Relaxed)
        {
            admission.authenticated();
        }
    }

    /// Whether the connection has authenticated.
    pub fn is_authenticated(&self) -> bool {
        self.inner.authenticated.load(Ordering::Relaxed)
    }
}

/// Runs `future` until it completes or the handshake timeout (from `accepted`) passes; the
/// timeout follows the listener's pressure while it waits.
async fn within_handshake<F: Future>(
    future: F,
    accepted: tokio::time::Instant,
    timeouts: &Timeouts,
    admitted: Admitted,
    pressure: &mut watch::Receiver<bool>,
) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    loop {
        let under_pressure = *pressure.borrow_and_update();
        let deadline = accepted + timeouts.handshake(under_pressure, admitted);
        tokio::select! {
            output = &mut future => return Some(output),
            () = tokio::time::sleep_until(deadline) => return None,
            changed = pressure.changed() => {
                if changed.is_err() {
                    return tokio::time::timeout_at(deadline, future).await.ok();
                }
            }
        }
    }
}

async fn serve_connection<S, B>(
    tcp: TcpStream,
    peer: SocketAddr,
    service: S,
    options: &ServeOptions,
    stop: watch::Receiver<bool>,
    slot: Slot,
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
    let accepted = tokio::time::Instant::now();
    let timeouts = options.timeouts();
    let mut pressure = slot.auth.inner.gate.pressure.subscribe();
    let Some(tls) = &options.tls else {
        serve_http(tcp, peer, service, options, stop, None, accepted, slot).await;
        return;
    };
    let first = match within_handshake(
        first_byte(&tcp),
        accepted,
        &timeouts,
        slot.admitted,
        &mut pressure,
    )
    .await
    {
        Some(Ok(Some(byte))) => byte,
        Some(Ok(None)) | Some(Err(_)) => return,
        None => {
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
        let _ = within_handshake(
            refuse_plain(tcp),
            accepted,
            &timeouts,
            slot.admitted,
            &mut pressure,
        )
        .await;
        return;
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
    let stream = match within_handshake(
        acceptor.accept(tcp),
        accepted,
        &timeouts,
        slot.admitted,
        &mut pressure,
    )
    .await
    {
        Some(Ok(stream)) => stream,
        Some(Err(e)) => {
            let why = crate::client::explain(&e)
                .map(|f| f.to_string())
                .unwrap_or_else(|| e.to_string());
            tracing::warn!(what = options.what, %peer, reason = %why, "TLS handshake failed");
            return;
        }
        None => {
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
    if client.is_some() {
        // Verified against the listener's client roots during the handshake.
        slot.auth.mark_authenticated();
    }
    serve_http(stream, peer, service, options, stop, client, accepted, slot).await;
}

#[allow(clippy::too_many_arguments)]
async fn serve_http<I, S, B>(
    io: I,
    peer: SocketAddr,
    service: S,
    options: &ServeOptions,
    mut stop: watch::Receiver<bool>,
    client: Option<ClientCertificate>,
    accepted: tokio::time::Instant,
    slot: Slot,
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
    let timeouts = options.timeouts();
    let mut pressure = slot.auth.inner.gate.pressure.subscribe();
    let activity = Arc::new(Activity::new());
    let tracked = Tracked {
        inner: service,
        activity: activity.clone(),
        peer: client,
        addr: PeerAddr(peer),
        auth: slot.auth.clone(),
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
    let mut closing = false;
    let mut watching_pressure = true;
    loop {
        let mut check_again_in = timeouts.idle;
        if !closing {
            let state = ConnectionState {
                age: accepted.elapsed(),
                idle: activity.idle(),
                authenticated: slot.auth.is_authenticated(),
                admitted: slot.admitted,
            };
            match timeouts.verdict(state, *pressure.borrow_and_update()) {
                Verdict::Keep {
                    check_again_in: wait,
                } => check_again_in = wait,
                Verdict::Close(why) => {
                    tracing::debug!(what = options.what, %peer, reason = why.as_str(), "closing a connection");
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
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
            () = tokio::time::sleep(check_again_in), if !closing => {}
            changed = pressure.changed(), if !closing && watching_pressure => {
                watching_pressure = changed.is_ok();
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

    /// Since the last request ended (or since the connection was served, before the
    /// first); `None` while a request is in flight.
    fn idle(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        Some(self.since.elapsed().saturating_sub(last))
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
    auth: ConnectionAuth,
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
        request.extensions_mut().insert(self.auth.clone());
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
