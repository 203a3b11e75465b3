//! gRPC channels to the zone over the agent's own TLS config: trust by the join token's CA
//! fingerprint for the join, then the pinned CA and the node certificate for every stream.
//!
//! tonic dials through [`TlsDialer`], which makes the TCP connection and the TLS handshake
//! itself; the channel's URI is the endpoint's with `http` as its scheme, since the
//! connection it is handed already speaks TLS.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint, Uri};

/// The zone's endpoint could not be used or reached.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("the zone endpoint {0:?} must be https://HOST:PORT")]
    BadEndpoint(String),
    #[error("cannot reach the zone at {endpoint}: {detail}")]
    Unreachable { endpoint: String, detail: String },
}

/// Dials `host:port` and runs the TLS handshake with `config`, naming `server_name`.
#[derive(Clone)]
struct TlsDialer {
    config: Arc<tokio_rustls::rustls::ClientConfig>,
    server_name: tokio_rustls::rustls::pki_types::ServerName<'static>,
    address: String,
    timeout: Duration,
}

type DialFuture = Pin<
    Box<
        dyn Future<
                Output = Result<
                    TokioIo<tokio_rustls::client::TlsStream<TcpStream>>,
                    std::io::Error,
                >,
            > + Send,
    >,
>;

impl tower::Service<Uri> for TlsDialer {
    type Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = DialFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let dialer = self.clone();
        Box::pin(async move {
            let connect = async {
                let tcp = TcpStream::connect(&dialer.address).await?;
                tcp.set_nodelay(true)?;
                TlsConnector::from(dialer.config.clone())
                    .connect(dialer.server_name.clone(), tcp)
                    .await
            };
            let tls = tokio::time::timeout(dialer.timeout, connect)
                .await
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no TLS connection within {} s", dialer.timeout.as_secs()),
                    )
                })??;
            Ok(TokioIo::new(tls))
        })
    }
}

/// A channel to `endpoint` (`https://host:port`) over `config`.
pub async fn channel(
    endpoint: &str,
    config: Arc<tokio_rustls::rustls::ClientConfig>,
    timeout: Duration,
) -> Result<Channel, DialError> {
    let bad = || DialError::BadEndpoint(endpoint.to_string());
    let uri: Uri = endpoint.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("https") {
        return Err(bad());
    }
    let authority = uri.authority().ok_or_else(bad)?.clone();
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(443);
    let server_name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|_| bad())?;
    let dialer = TlsDialer {
        config,
        server_name,
        address: format!("{}:{port}", authority.host()),
        timeout,
    };
    let plain = format!("http://{authority}");
    let channel = Endpoint::from_shared(plain)
        .map_err(|_| bad())?
        .connect_timeout(timeout)
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_timeout(Duration::from_secs(20))
        .connect_with_connector(dialer)
        .await
        .map_err(|e| DialError::Unreachable {
            endpoint: endpoint.to_string(),
            detail: describe(&e),
        })?;
    Ok(channel)
}

/// An error and its sources in one line, with TLS failures in plain words.
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    if let Some(failure) = orc_tls::explain(error) {
        return failure.to_string();
    }
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}
