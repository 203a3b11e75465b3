//! The accept loop and the CA against real sockets on loopback: a pinned client gets in,
//! a wrong CA, an expired certificate and plain text on a TLS port fail with words on both
//! sides, and idle, silent and half-sent connections are closed by their timeouts while a
//! long response keeps its connection.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use orc_tls::{ALPN_HTTP, PinnedCa, RenewingCert, ServeOptions, TlsFailure, ZoneCa};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a test's server logged (its tracing output).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

/// A service that answers `hello` to every request.
fn hello() -> impl tower::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<http::Response<String>, Infallible>>,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(|_req| std::future::ready(Ok(http::Response::new("hello".to_string()))))
}

fn quick(tls: Option<Arc<rustls::ServerConfig>>) -> ServeOptions {
    ServeOptions {
        what: "test listener",
        tls,
        handshake_timeout: Duration::from_millis(400),
        header_read_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(400),
        ..ServeOptions::default()
    }
}

async fn start<S, B>(service: S, options: ServeOptions) -> SocketAddr
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<B>,
            Error = Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(orc_tls::serve(
        listener,
        service,
        options,
        std::future::pending(),
    ));
    addr
}

fn tls_for(
    ca: &ZoneCa,
    not_before: SystemTime,
    not_after: SystemTime,
) -> Arc<rustls::ServerConfig> {
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let identity = ca
        .issue_server_valid(&names, not_before, not_after)
        .unwrap();
    orc_tls::server_config(RenewingCert::new(identity).unwrap(), ALPN_HTTP)
}

fn fresh_tls(ca: &ZoneCa) -> Arc<rustls::ServerConfig> {
    let now = SystemTime::now();
    tls_for(
        ca,
        now - Duration::from_secs(60),
        now + Duration::from_secs(3600),
    )
}

fn pinned(ca: &ZoneCa) -> PinnedCa {
    PinnedCa::from_pem(ca.cert_pem(), "test CA").unwrap()
}

/// A TLS connection to `addr` trusting `ca`; the handshake's error when it fails.
async fn tls_connect(
    addr: SocketAddr,
    ca: &PinnedCa,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
    connect_with(addr, ca.client_config(&[b"http/1.1"])).await
}

async fn get_over<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut io: S) -> String {
    io.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = io.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads until the server closes; fails the test if it keeps the connection longer than
/// `bound` (many times the timeout under test, so a slow machine does not fail it).
async fn closed_by_server<S: tokio::io::AsyncRead + Unpin>(io: &mut S, bound: Duration) -> bool {
    let mut buf = [0u8; 256];
    let result = tokio::time::timeout(bound, async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    result.is_ok()
}

#[tokio::test]
async fn a_client_pinning_the_zone_ca_is_served() {
    let ca = ZoneCa::generate().unwrap();
    let addr = start(hello(), quick(Some(fresh_tls(&ca)))).await;
    let stream = tls_connect(addr, &pinned(&ca)).await.expect("handshake");
    let answer = get_over(stream).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
}

#[tokio::test]
async fn another_ca_is_refused_with_words_on_both_sides() {
    let (logs, _guard) = capture();
    let ca = ZoneCa::generate().unwrap();
    let other = ZoneCa::generate().unwrap();
    let addr = start(hello(), quick(Some(fresh_tls(&ca)))).await;
    let err = tls_connect(addr, &pinned(&other))
        .await
        .expect_err("a certificate of another CA");
    assert_eq!(orc_tls::explain(&err), Some(TlsFailure::UnknownCa));
    assert!(
        TlsFailure::UnknownCa
            .to_string()
            .contains("not signed by the pinned CA")
    );
    until_logged(|| {
        logs.text()
            .contains("the peer does not trust our certificate")
    })
    .await;
    assert!(
        logs.text().contains("TLS handshake failed"),
        "{}",
        logs.text()
    );
}

#[tokio::test]
async fn an_expired_certificate_is_refused_with_words_on_both_sides() {
    let (logs, _guard) = capture();
    let ca = ZoneCa::generate().unwrap();
    let now = SystemTime::now();
    let expired = tls_for(
        &ca,
        now - Duration::from_secs(7200),
        now - Duration::from_secs(3600),
    );
    let addr = start(hello(), quick(Some(expired))).await;
    let err = tls_connect(addr, &pinned(&ca))
        .await
        .expect_err("an expired certificate");
    assert_eq!(orc_tls::explain(&err), Some(TlsFailure::Expired));
    assert!(TlsFailure::Expired.to_string().contains("expired"));
    until_logged(|| {
        logs.text()
            .contains("the peer found our certificate expired")
    })
    .await;
}

#[tokio::test]
async fn plain_http_on_a_tls_port_is_told_to_use_https() {
    let (logs, _guard) = capture();
    let ca = ZoneCa::generate().unwrap();
    let addr = start(hello(), quick(Some(fresh_tls(&ca)))).await;
    let answer = get_over(TcpStream::connect(addr).await.unwrap()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("\"code\":\"tls_required\""), "{answer}");
    assert!(answer.contains("use https://"), "{answer}");
    assert!(
        logs.text()
            .contains("a client sent plain text to this TLS port"),
        "{}",
        logs.text()
    );

    // An HTTP/2 client (a provider dialling http://) gets a GOAWAY it can explain.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tcp.read_to_end(&mut out).await;
    // SETTINGS (9 bytes), then a GOAWAY frame (type 7) with INADEQUATE_SECURITY (0xc).
    assert_eq!(&out[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    assert_eq!(out[9 + 3], 7, "{out:?}");
    assert_eq!(&out[9 + 13..9 + 17], &[0, 0, 0, 0xc], "{out:?}");
}

#[tokio::test]
async fn tls_to_a_plain_port_is_explained() {
    let ca = ZoneCa::generate().unwrap();
    let addr = start(hello(), quick(None)).await;
    let err = tls_connect(addr, &pinned(&ca))
        .await
        .expect_err("no TLS there");
    assert_eq!(orc_tls::explain(&err), Some(TlsFailure::PlainServer));
}

#[tokio::test]
async fn silent_idle_and_half_sent_connections_are_closed() {
    let ca = ZoneCa::generate().unwrap();
    let addr = start(hello(), quick(Some(fresh_tls(&ca)))).await;
    let bound = Duration::from_secs(10);

    // Connected, nothing sent: closed at the handshake timeout.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    // TLS done, no request: closed at the idle timeout.
    let mut idle = tls_connect(addr, &pinned(&ca)).await.unwrap();
    // Half a request head: closed at the header-read (or idle) timeout.
    let mut half = tls_connect(addr, &pinned(&ca)).await.unwrap();
    half.write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // Half a TLS handshake: closed at the handshake timeout.
    let mut half_tls = TcpStream::connect(addr).await.unwrap();
    half_tls.write_all(&[0x16, 0x03, 0x01, 0x00]).await.unwrap();

    assert!(
        closed_by_server(&mut silent, bound).await,
        "silent connection kept"
    );
    assert!(
        closed_by_server(&mut idle, bound).await,
        "idle connection kept"
    );
    assert!(
        closed_by_server(&mut half, bound).await,
        "half-sent request kept"
    );
    assert!(
        closed_by_server(&mut half_tls, bound).await,
        "half handshake kept"
    );

    // The listener still serves afterwards.
    let answer = get_over(tls_connect(addr, &pinned(&ca)).await.unwrap()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// A body that sends its one chunk only after `delay`: a long response, as a provider's
/// stream is.
struct Late {
    delay: std::pin::Pin<Box<tokio::time::Sleep>>,
    sent: bool,
}

impl http_body::Body for Late {
    type Data = bytes::Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Infallible>>> {
        if self.sent {
            return std::task::Poll::Ready(None);
        }
        match self.delay.as_mut().poll(cx) {
            std::task::Poll::Pending => std::task::Poll::Pending,
            std::task::Poll::Ready(()) => {
                self.sent = true;
                std::task::Poll::Ready(Some(Ok(http_body::Frame::data(bytes::Bytes::from_static(
                    b"late but whole",
                )))))
            }
        }
    }
}

use std::future::Future as _;

#[tokio::test]
async fn a_response_longer_than_the_idle_timeout_keeps_its_connection() {
    let ca = ZoneCa::generate().unwrap();
    let service = tower::service_fn(|_req| {
        std::future::ready(Ok::<_, Infallible>(http::Response::new(Late {
            delay: Box::pin(tokio::time::sleep(Duration::from_millis(1500))),
            sent: false,
        })))
    });
    let addr = start(service, quick(Some(fresh_tls(&ca)))).await;
    let answer = get_over(tls_connect(addr, &pinned(&ca)).await.unwrap()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("late but whole"), "{answer}");
}

#[test]
fn the_ca_survives_a_restart_and_its_key_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("ca.pem");
    let key = dir.path().join("ca-key.pem");
    let (made, is_new) = ZoneCa::load_or_create(&cert, &key).unwrap();
    assert!(is_new);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let (read, is_new) = ZoneCa::load_or_create(&cert, &key).unwrap();
    assert!(!is_new);
    assert_eq!(read.fingerprint(), made.fingerprint());
    assert!(!format!("{read:?}").contains("PRIVATE"));

    // A certificate the read-back CA signs verifies against the CA first made.
    let names = vec!["127.0.0.1".to_string()];
    let identity = read.issue_server(&names, Duration::from_secs(60)).unwrap();
    let roots = made.roots();
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots, orc_tls::provider())
            .build()
            .unwrap();
    use rustls::client::danger::ServerCertVerifier;
    verifier
        .verify_server_cert(
            &identity.chain[0],
            &identity.chain[1..],
            &rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            &[],
            rustls::pki_types::UnixTime::now(),
        )
        .expect("signed by the same CA");

    // Half a CA is refused, naming both files.
    std::fs::remove_file(&cert).unwrap();
    let err = ZoneCa::load_or_create(&cert, &key).unwrap_err();
    assert!(err.to_string().contains("ca.pem"), "{err}");
    assert!(err.to_string().contains("ca-key.pem"), "{err}");

    // Another CA's key does not fit this certificate.
    std::fs::write(&cert, made.cert_pem()).unwrap();
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (_, _) = ZoneCa::load_or_create(&other.join("ca.pem"), &other.join("ca-key.pem")).unwrap();
    std::fs::copy(other.join("ca-key.pem"), &key).unwrap();
    let err = ZoneCa::load_or_create(&cert, &key).unwrap_err();
    assert!(matches!(err, orc_tls::CaError::Mismatch { .. }), "{err}");
}

/// Waits (up to 10 s) until `condition` holds: the server logs after the client returns.
async fn until_logged(condition: impl Fn() -> bool) {
    for _ in 0..200 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server never logged what was expected");
}

/// A service that answers with the fingerprint of the client's certificate, or `none`.
fn who() -> impl tower::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<http::Response<String>, Infallible>>,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(|req: http::Request<hyper::body::Incoming>| {
        let who = req
            .extensions()
            .get::<orc_tls::ClientCertificate>()
            .map(|c| c.fingerprint.to_string())
            .unwrap_or_else(|| "none".to_string());
        std::future::ready(Ok(http::Response::new(who)))
    })
}

fn tls_with_clients(ca: &ZoneCa) -> Arc<rustls::ServerConfig> {
    let names = vec!["127.0.0.1".to_string()];
    let identity = ca.issue_server(&names, Duration::from_secs(3600)).unwrap();
    orc_tls::server_config_with_clients(RenewingCert::new(identity).unwrap(), ALPN_HTTP, ca.roots())
}

async fn connect_with(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, std::io::Error> {
    let connector = tokio_rustls::TlsConnector::from(config);
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await
}

#[tokio::test]
async fn a_node_certificate_is_known_by_its_fingerprint_and_a_foreign_one_is_refused() {
    let ca = ZoneCa::generate().unwrap();
    let addr = start(who(), quick(Some(tls_with_clients(&ca)))).await;

    let node = orc_tls::NodeIdentity::generate().unwrap();
    let cert = ca
        .issue_node(
            "n-000000000001",
            node.public_key(),
            Duration::from_secs(600),
        )
        .unwrap();
    let config = pinned(&ca)
        .client_config_with_identity(&[b"http/1.1"], &cert.chain_pem, node.private_key_der())
        .unwrap();
    let body = get_over(connect_with(addr, config).await.unwrap()).await;
    assert!(body.ends_with(&cert.fingerprint), "{body}");

    // Without a certificate the connection is served, as no one.
    let body = get_over(tls_connect(addr, &pinned(&ca)).await.unwrap()).await;
    assert!(body.ends_with("none"), "{body}");

    // A certificate signed by another CA fails the handshake.
    let other = ZoneCa::generate().unwrap();
    let foreign = other
        .issue_node(
            "n-000000000001",
            node.public_key(),
            Duration::from_secs(600),
        )
        .unwrap();
    let config = pinned(&ca)
        .client_config_with_identity(&[b"http/1.1"], &foreign.chain_pem, node.private_key_der())
        .unwrap();
    let refused = match connect_with(addr, config).await {
        Err(_) => true,
        // TLS 1.3: the client may finish first and learn of the refusal on its first read.
        Ok(stream) => !get_over(stream).await.contains("200 OK"),
    };
    assert!(refused, "a foreign node certificate was served");
}

#[test]
fn a_node_key_must_be_a_p256_point_and_survives_its_file() {
    let ca = ZoneCa::generate().unwrap();
    assert!(matches!(
        ca.issue_node("n-1", &[4u8; 10], Duration::from_secs(60)),
        Err(orc_tls::CaError::BadPublicKey)
    ));
    let node = orc_tls::NodeIdentity::generate().unwrap();
    let back = orc_tls::NodeIdentity::from_pem(&node.to_pem()).unwrap();
    assert_eq!(back.public_key(), node.public_key());
    assert!(orc_tls::NodeIdentity::from_pem("not a key").is_none());
    assert!(!format!("{node:?}").contains("PRIVATE"));
}

#[tokio::test]
async fn a_fingerprint_pin_trusts_its_zone_only_and_yields_the_ca_file() {
    let ca = ZoneCa::generate().unwrap();
    let addr = start(hello(), quick(Some(fresh_tls(&ca)))).await;

    let pin = orc_tls::FingerprintPin::new(&ca.fingerprint());
    let body = get_over(
        connect_with(addr, pin.client_config(&[b"http/1.1"]))
            .await
            .unwrap(),
    )
    .await;
    assert!(body.ends_with("hello"), "{body}");
    let pem = pin.matched_pem().unwrap();
    assert_eq!(
        PinnedCa::from_pem(&pem, "matched").unwrap().fingerprint(),
        ca.fingerprint()
    );

    let wrong = orc_tls::FingerprintPin::new(&ZoneCa::generate().unwrap().fingerprint());
    let error = connect_with(addr, wrong.client_config(&[b"http/1.1"]))
        .await
        .unwrap_err();
    assert_eq!(
        orc_tls::explain(&error),
        Some(TlsFailure::UnknownCa),
        "{error}"
    );
    assert!(wrong.matched_pem().is_none());
}

/// Loopback addresses the connection-limit tests connect from.
const ATTACKERS: [[u8; 4]; 4] = [
    [127, 0, 0, 2],
    [127, 0, 0, 3],
    [127, 0, 0, 4],
    [127, 0, 0, 5],
];
const BYSTANDER: [u8; 4] = [127, 0, 0, 6];
const LATECOMER: [u8; 4] = [127, 0, 0, 7];

/// Small limits (40 connections, 10 per source) and timeouts long enough that only the
/// rule a test is about closes a connection within its bounds.
fn small_and_patient(tls: Option<Arc<rustls::ServerConfig>>) -> ServeOptions {
    ServeOptions {
        what: "test listener",
        tls,
        max_connections: 40,
        max_connections_per_source: Some(10),
        handshake_timeout: Duration::from_secs(600),
        pressure_handshake_timeout: Duration::from_secs(600),
        header_read_timeout: Duration::from_secs(600),
        idle_timeout: Duration::from_secs(600),
        pressure_idle_timeout: Duration::from_secs(600),
        reserve_probation: Duration::from_secs(600),
        ..ServeOptions::default()
    }
}

/// A TCP connection to `addr` from the loopback address `source`.
async fn tcp_from(source: [u8; 4], addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(addr).await
}

/// A TLS connection to `addr` from `source`, trusting `ca`.
async fn tls_from(
    source: [u8; 4],
    addr: SocketAddr,
    ca: &PinnedCa,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = tcp_from(source, addr).await?;
    let connector = tokio_rustls::TlsConnector::from(ca.client_config(&[b"http/1.1"]));
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await
}

/// Sends one keep-alive `GET /` (with `authorization` when given) and reads its answer:
/// the status line and the body, or `None` when the connection ends first.
async fn request_over<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    io: &mut S,
    authorization: Option<&str>,
) -> Option<String> {
    let auth = authorization
        .map(|a| format!("authorization: {a}\r\n"))
        .unwrap_or_default();
    let head = format!("GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n{auth}\r\n");
    io.write_all(head.as_bytes()).await.ok()?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = io.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_string)
            })
            .and_then(|v| v.trim().parse().ok())?;
        if body.len() >= length {
            let status = head.lines().next().unwrap_or("").to_string();
            return Some(format!("{status}\n{body}"));
        }
    }
}

/// Checks `probe` until it answers, for up to `limit`; panics naming `what`.
async fn eventually_some<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The answer to a `GET /` from `source`, retried (each try bounded) until one comes.
async fn answered_from(
    source: [u8; 4],
    addr: SocketAddr,
    ca: &PinnedCa,
    authorization: Option<&str>,
) -> String {
    eventually_some(
        &format!("an answer to {source:?}"),
        Duration::from_secs(30),
        || async {
            tokio::time::timeout(Duration::from_secs(5), async {
                let mut tls = tls_from(source, addr, ca).await.ok()?;
                request_over(&mut tls, authorization).await
            })
            .await
            .ok()
            .flatten()
        },
    )
    .await
}

/// Counts `io` into `closed` once the server ends it; holds it open until then.
fn count_when_closed<S>(mut io: S, closed: &Arc<std::sync::atomic::AtomicUsize>)
where
    S: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let closed = closed.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 256];
        while let Ok(n) = io.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        closed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
}

fn count(closed: &Arc<std::sync::atomic::AtomicUsize>) -> usize {
    closed.load(std::sync::atomic::Ordering::SeqCst)
}

/// Attack: one address opens idle TLS connections until the listener is full. It gets its
/// share (10 of 40); the rest are closed before any TLS, the refusal is logged naming the
/// address (not once per connection), and another address is answered.
#[tokio::test]
async fn one_address_holding_all_it_can_cannot_keep_another_from_being_answered() {
    let (logs, _guard) = capture();
    let ca = ZoneCa::generate().unwrap();
    let pin = pinned(&ca);
    let addr = start(hello(), small_and_patient(Some(fresh_tls(&ca)))).await;

    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..40 {
        match tls_from(ATTACKERS[0], addr, &pin).await {
            Ok(stream) => held.push(stream),
            Err(_) => refused += 1,
        }
    }
    assert_eq!(held.len(), 10, "connections one address holds");
    assert_eq!(refused, 30);

    let answer = answered_from(ATTACKERS[1], addr, &pin, None).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");

    // The held connections are still served: the limit refuses, it does not evict.
    let answer = request_over(&mut held[0], None).await;
    assert!(answer.is_some_and(|a| a.ends_with("hello")));

    const REFUSAL: &str = "its address holds its share of the connection limit";
    until_logged(|| logs.text().contains(REFUSAL)).await;
    let text = logs.text();
    let warning = text.lines().find(|l| l.contains(REFUSAL)).unwrap();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("127.0.0.2"), "{warning}");
    let warnings = text.matches(REFUSAL).count();
    assert!(
        warnings < refused,
        "{warnings} warnings for {refused} refusals"
    );
}

/// Attack: four addresses fill the listener with handshakes they never finish. Under
/// pressure (three quarters taken) the handshake timeout drops from 600 s to 300 ms, so
/// stalled handshakes are closed until the listener is below the line, and another
/// address is answered.
#[tokio::test]
async fn unfinished_handshakes_are_closed_sooner_under_pressure() {
    let ca = ZoneCa::generate().unwrap();
    let pin = pinned(&ca);
    let addr = start(
        hello(),
        ServeOptions {
            reserved_for_authenticated: Some(0),
            pressure_handshake_timeout: Duration::from_millis(300),
            ..small_and_patient(Some(fresh_tls(&ca)))
        },
    )
    .await;
    let closed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for source in ATTACKERS {
        for _ in 0..10 {
            let mut tcp = tcp_from(source, addr).await.unwrap();
            tcp.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
            count_when_closed(tcp, &closed);
        }
    }
    // 40 open, the line at 30: at least 11 go.
    eventually_some(
        "stalled handshakes closed below the pressure line",
        Duration::from_secs(30),
        || async { (count(&closed) >= 11).then_some(()) },
    )
    .await;
    let answer = answered_from(BYSTANDER, addr, &pin, None).await;
    assert!(answer.ends_with("hello"), "{answer}");
}

/// Attack: four addresses fill the listener with finished handshakes and never send a
/// request. Under pressure such connections are closed after 300 ms instead of 600 s, and
/// another address is answered.
#[tokio::test]
async fn connections_without_a_request_are_closed_sooner_under_pressure() {
    let ca = ZoneCa::generate().unwrap();
    let pin = pinned(&ca);
    let addr = start(
        hello(),
        ServeOptions {
            reserved_for_authenticated: Some(0),
            pressure_idle_timeout: Duration::from_millis(300),
            ..small_and_patient(Some(fresh_tls(&ca)))
        },
    )
    .await;
    let closed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for source in ATTACKERS {
        for _ in 0..10 {
            match tls_from(source, addr, &pin).await {
                Ok(tls) => count_when_closed(tls, &closed),
                Err(_) => {
                    closed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
    }
    eventually_some(
        "idle connections closed below the pressure line",
        Duration::from_secs(30),
        || async { (count(&closed) >= 11).then_some(()) },
    )
    .await;
    let answer = answered_from(BYSTANDER, addr, &pin, None).await;
    assert!(answer.ends_with("hello"), "{answer}");
}

/// A service that marks the connection authenticated when the request carries the right
/// credential, and says whether it did.
fn gatekeeper() -> impl tower::Service<
    http::Request<hyper::body::Incoming>,
    Response = http::Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<http::Response<String>, Infallible>>,
> + Clone
+ Send
+ Sync
+ 'static {
    tower::service_fn(|req: http::Request<hyper::body::Incoming>| {
        let good = req
            .headers()
            .get("authorization")
            .is_some_and(|v| v == "Bearer good");
        if good && let Some(auth) = req.extensions().get::<orc_tls::ConnectionAuth>() {
            auth.mark_authenticated();
        }
        let body = if good { "authenticated" } else { "anonymous" };
        std::future::ready(Ok(http::Response::new(body.to_string())))
    })
}

/// Attack: four addresses open every connection they may and sit on them. They hold 36 of
/// 40; the 4 they take beyond that are in the reserve and closed for not authenticating.
/// A client that authenticates then gets a reserved slot, and keeps it past the probation
/// that closes an anonymous latecomer's.
#[tokio::test]
async fn an_authenticated_connection_gets_a_slot_when_anonymous_ones_took_all_they_may() {
    let ca = ZoneCa::generate().unwrap();
    let pin = pinned(&ca);
    let addr = start(
        gatekeeper(),
        ServeOptions {
            reserved_for_authenticated: Some(4),
            reserve_probation: Duration::from_secs(3),
            ..small_and_patient(Some(fresh_tls(&ca)))
        },
    )
    .await;
    let closed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for source in ATTACKERS {
        for _ in 0..10 {
            match tls_from(source, addr, &pin).await {
                Ok(tls) => count_when_closed(tls, &closed),
                Err(_) => {
                    closed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
    }
    eventually_some(
        "the anonymous connections in the reserve closed",
        Duration::from_secs(30),
        || async { (count(&closed) >= 4).then_some(()) },
    )
    .await;

    let mut member = eventually_some(
        "an authenticated answer",
        Duration::from_secs(30),
        || async {
            tokio::time::timeout(Duration::from_secs(5), async {
                let mut tls = tls_from(BYSTANDER, addr, &pin).await.ok()?;
                let answer = request_over(&mut tls, Some("Bearer good")).await?;
                answer.ends_with("authenticated").then_some(tls)
            })
            .await
            .ok()
            .flatten()
        },
    )
    .await;

    // An anonymous latecomer enters the reserve too and is closed when its probation ends
    // (after its answer, or before on a slow machine), after the member's, which began
    // earlier, has.
    let latecomer_closed = match tls_from(LATECOMER, addr, &pin).await {
        Err(_) => true,
        Ok(mut latecomer) => match request_over(&mut latecomer, None).await {
            None => true,
            Some(answer) => {
                assert!(answer.ends_with("anonymous"), "{answer}");
                closed_by_server(&mut latecomer, Duration::from_secs(30)).await
            }
        },
    };
    assert!(
        latecomer_closed,
        "an anonymous connection kept a reserved slot"
    );
    let answer = request_over(&mut member, Some("Bearer good")).await;
    assert!(
        answer.is_some_and(|a| a.ends_with("authenticated")),
        "the authenticated connection lost its slot"
    );
}
