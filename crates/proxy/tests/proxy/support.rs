//! What the proxy's tests share: a proxy on loopback, backends that say who they are and
//! what they saw, a TCP echo server, a test CA and clients.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, Incoming};
use hyper::header::HeaderValue;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use orc_proxy::{Certificate, Proxy, ProxyConfig, Route, Routes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

/// How long a test waits for anything before failing: a ceiling for a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A proxy listening on loopback ports of its own.
pub async fn proxy() -> Proxy {
    proxy_with(|_| {}).await
}

/// Gives `proxy` one route: `app.example.com` to `app` (as `a/app`).
pub async fn route_to_app(proxy: &Proxy, app: &Backend) {
    proxy
        .set_routes(Routes {
            http: BTreeMap::from([("app.example.com".into(), route("a/app", &[app]))]),
            ..Routes::default()
        })
        .await
        .unwrap();
}

/// A proxy listening on loopback ports of its own, its config changed by `change`.
pub async fn proxy_with(change: impl FnOnce(&mut ProxyConfig)) -> Proxy {
    let loopback = "127.0.0.1:0".parse().unwrap();
    let mut config = ProxyConfig {
        http_addr: loopback,
        https_addr: loopback,
        tcp_bind_ip: [127, 0, 0, 1].into(),
        ..ProxyConfig::default()
    };
    change(&mut config);
    Proxy::start(config).await.expect("the proxy starts")
}

/// A loopback address nothing listens on: connecting is refused.
pub async fn dead_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// A loopback port that was free a moment ago.
pub async fn free_port() -> u16 {
    dead_addr().await.port()
}

pub fn route(name: &str, backends: &[&Backend]) -> Route {
    Route::new(name, backends.iter().map(|b| b.addr))
}

type TestBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// An HTTP/1.1 backend named `name`. By path:
/// - `/echo`: streams the request body back;
/// - `/big?BYTES`: answers BYTES bytes of a pattern ([`pattern`]);
/// - `/slow`: sends `first`, then `second` once [`Backend::release`] is called;
/// - `/hang`: answers `late` once [`Backend::release`] is called;
/// - `/upgrade`: answers `101` (`Upgrade: echo`), then echoes bytes;
/// - anything else: its name as the body, and in `x-saw-*` headers the request's `Host`,
///   `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host`, `X-Real-IP` and version.
pub struct Backend {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    release: Arc<Notify>,
    task: JoinHandle<()>,
}

impl Backend {
    pub async fn start(name: &'static str) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let task = {
            let hits = hits.clone();
            let release = release.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        continue;
                    };
                    let hits = hits.clone();
                    let release = release.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |request| {
                            hits.fetch_add(1, Ordering::SeqCst);
                            backend_answer(name, release.clone(), request)
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), service)
                            .with_upgrades()
                            .await;
                    });
                }
            })
        };
        Backend {
            addr,
            hits,
            release,
            task,
        }
    }

    /// Requests this backend has received.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Lets a `/slow` answer finish.
    pub fn release(&self) {
        self.release.notify_one();
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Byte `i` of a `/big` answer.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn full(bytes: impl Into<Bytes>) -> TestBody {
    Full::new(bytes.into()).map_err(|e| match e {}).boxed()
}

async fn backend_answer(
    name: &'static str,
    release: Arc<Notify>,
    mut request: Request<Incoming>,
) -> Result<Response<TestBody>, Infallible> {
    let response = match request.uri().path() {
        "/echo" => Response::new(request.into_body().map_err(Into::into).boxed()),
        "/big" => {
            let len = request.uri().query().unwrap_or("0").parse().unwrap();
            Response::new(full(pattern(len)))
        }
        "/slow" => {
            let (tx, rx) = mpsc::channel(2);
            tx.send(Bytes::from_static(b"first")).await.unwrap();
            tokio::spawn(async move {
                release.notified().await;
                let _ = tx.send(Bytes::from_static(b"second")).await;
            });
            Response::new(ChannelBody(rx).map_err(|e| match e {}).boxed())
        }
        "/hang" => {
            release.notified().await;
            Response::new(full("late"))
        }
        "/upgrade" => {
            let upgrade = hyper::upgrade::on(&mut request);
            tokio::spawn(async move {
                let Ok(upgraded) = upgrade.await else { return };
                let (mut reader, mut writer) = tokio::io::split(TokioIo::new(upgraded));
                let _ = tokio::io::copy(&mut reader, &mut writer).await;
            });
            let mut response = Response::new(full(""));
            *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            let headers = response.headers_mut();
            headers.insert("upgrade", HeaderValue::from_static("echo"));
            headers.insert("connection", HeaderValue::from_static("upgrade"));
            response
        }
        _ => {
            let mut response = Response::new(full(name));
            let seen = request.headers();
            let mut saw = Vec::new();
            for (header, name) in [
                ("host", "x-saw-host"),
                ("x-forwarded-for", "x-saw-xff"),
                ("x-forwarded-proto", "x-saw-xfp"),
                ("x-forwarded-host", "x-saw-xfh"),
                ("x-real-ip", "x-saw-real-ip"),
            ] {
                let values: Vec<&str> = seen
                    .get_all(header)
                    .iter()
                    .map(|v| v.to_str().unwrap())
                    .collect();
                saw.push((name, values.join(" | ")));
            }
            for (name, value) in saw {
                response
                    .headers_mut()
                    .insert(name, HeaderValue::try_from(value).unwrap());
            }
            response.headers_mut().insert(
                "x-saw-version",
                HeaderValue::try_from(format!("{:?}", request.version())).unwrap(),
            );
            response
        }
    };
    Ok(response)
}

/// A body fed chunk by chunk through a channel.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// A TCP server that echoes every byte.
pub struct EchoServer {
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl EchoServer {
    pub async fn start() -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut tcp, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(async move {
                    let (mut reader, mut writer) = tcp.split();
                    let _ = tokio::io::copy(&mut reader, &mut writer).await;
                });
            }
        });
        EchoServer { addr, task }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sends `message` and reads as many bytes back.
pub async fn echo_through(tcp: &mut TcpStream, message: &[u8]) -> Vec<u8> {
    tcp.write_all(message).await.unwrap();
    let mut back = vec![0; message.len()];
    tokio::time::timeout(PATIENCE, tcp.read_exact(&mut back))
        .await
        .expect("the echo came back in time")
        .unwrap();
    back
}

/// A client that sends every request for `hosts` to `addr` and follows no redirect.
pub fn client_to(addr: SocketAddr, hosts: &[&str]) -> reqwest::Client {
    client_builder(addr, hosts).build().unwrap()
}

pub fn client_builder(addr: SocketAddr, hosts: &[&str]) -> reqwest::ClientBuilder {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(PATIENCE);
    for host in hosts {
        builder = builder.resolve(host, addr);
    }
    builder
}

/// A CA for the tests' HTTPS certificates.
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "orc proxy test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        TestCa {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names`, signed by this CA.
    pub fn certificate(&self, names: &[&str]) -> Certificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        Certificate {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A rustls client config trusting this CA only, offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// The body of `response`, whole.
pub async fn body_of(response: Response<Incoming>) -> Bytes {
    response.into_body().collect().await.unwrap().to_bytes()
}

/// Waits until `check` holds, looking every 20 ms, and fails naming `what` after
/// [`PATIENCE`].
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
