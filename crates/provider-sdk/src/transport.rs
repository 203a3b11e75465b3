//! How the runner reaches the zone: a [`Connector`] turns the provider's outbound message
//! stream into the zone's inbound stream.
//!
//! [`GrpcConnector`] dials the zone's `ProviderHub.Attach` over HTTP/2: TLS for an
//! `https://` endpoint, trusting only the zone's pinned CA, or h2c for an `http://` one
//! (a zone allows plain listeners only on loopback). The
//! test harness has an in-memory connector with the same contract, so runner timing can be
//! tested under tokio's paused clock, where real sockets would race the virtual time.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use orc_proto::pb;
use orc_proto::pb::provider_hub_client::ProviderHubClient;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::transport::Endpoint;

/// Messages from the zone, as the transport delivers them.
pub type ZoneStream = Pin<Box<dyn Stream<Item = Result<pb::ZoneMessage, Status>> + Send + 'static>>;

/// Messages to the zone, produced by the runner. A concrete type rather than a boxed
/// stream: tonic's streaming request needs a stream whose `Send` is provable for all
/// lifetimes, which a trait object does not give.
#[derive(Debug)]
pub struct ProviderStream(ReceiverStream<pb::ProviderMessage>);

impl ProviderStream {
    /// Wraps the receiving half of the runner's outbound channel.
    pub fn new(receiver: mpsc::Receiver<pb::ProviderMessage>) -> Self {
        ProviderStream(ReceiverStream::new(receiver))
    }
}

impl Stream for ProviderStream {
    type Item = pb::ProviderMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.0).poll_next(cx)
    }
}

/// Opening a stream to the zone failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No connection to the zone's address.
    #[error("cannot reach the zone")]
    Transport(#[source] tonic::transport::Error),
    /// TLS with the zone failed: a wrong CA, an expired certificate, plain text to a TLS
    /// port.
    #[error("cannot reach the zone: {0}")]
    Tls(orc_tls::TlsFailure),
    /// The zone answered the call with an error status.
    #[error("the zone refused the stream: {0}")]
    Refused(Status),
    /// The connection attempt took longer than the connect timeout.
    #[error("connecting to the zone timed out")]
    TimedOut,
}

/// Opens one stream to the zone.
pub trait Connector: Send + Sync + 'static {
    /// Starts a stream whose outbound half is `outbound` and returns its inbound half.
    fn connect(
        &self,
        outbound: ProviderStream,
    ) -> impl Future<Output = Result<ZoneStream, ConnectError>> + Send;
}

/// Dials the zone over gRPC.
#[derive(Debug, Clone)]
pub struct GrpcConnector {
    endpoint: Endpoint,
    credentials: Option<ZoneCredentials>,
}

/// What a provider shows the zone when it opens its stream: a zone API token (sent as
/// `authorization: Bearer …`) and the project it registers in (`x-orc-project`).
#[derive(Clone, PartialEq, Eq)]
pub struct ZoneCredentials {
    token: String,
    project: String,
}

impl ZoneCredentials {
    /// Credentials for `project` (`<org>/<project>`). Both must be printable ASCII, as gRPC
    /// metadata requires.
    pub fn new(token: &str, project: &str) -> Result<Self, InvalidCredentials> {
        let printable = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
        if !printable(token) {
            return Err(InvalidCredentials::Token);
        }
        if !printable(project) || !project.contains('/') {
            return Err(InvalidCredentials::Project(project.to_string()));
        }
        Ok(ZoneCredentials {
            token: token.to_string(),
            project: project.to_string(),
        })
    }

    /// The project the provider registers in.
    pub fn project(&self) -> &str {
        &self.project
    }

    fn apply<T>(&self, request: &mut tonic::Request<T>) {
        let metadata = request.metadata_mut();
        // Both values were checked to be printable ASCII, which metadata always accepts.
        if let Ok(bearer) = format!("Bearer {}", self.token).parse() {
            metadata.insert("authorization", bearer);
        }
        if let Ok(project) = self.project.parse() {
            metadata.insert("x-orc-project", project);
        }
    }
}

impl std::fmt::Debug for ZoneCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneCredentials")
            .field("token", &"<redacted>")
            .field("project", &self.project)
            .finish()
    }
}

/// Credentials that cannot travel as gRPC metadata.
#[derive(Debug, thiserror::Error)]
pub enum InvalidCredentials {
    #[error("the zone token must be non-empty printable ASCII")]
    Token,
    #[error("zone project {0:?} must be printable ASCII of the form <org>/<project>")]
    Project(String),
}

/// The zone's address could not be used.
#[derive(Debug, thiserror::Error)]
#[error("zone endpoint {endpoint:?} {reason}")]
pub struct InvalidEndpoint {
    pub endpoint: String,
    pub reason: String,
}

impl GrpcConnector {
    /// A connector for `endpoint`: `https://zone.internal:7400` with the zone's CA in `ca`,
    /// or `http://127.0.0.1:7400` for a plain zone on loopback.
    pub fn new(
        endpoint: &str,
        connect_timeout: Duration,
        ca: Option<&orc_tls::PinnedCa>,
    ) -> Result<Self, InvalidEndpoint> {
        let invalid = |reason: String| InvalidEndpoint {
            endpoint: endpoint.to_string(),
            reason,
        };
        let mut built = Endpoint::from_shared(endpoint.to_string())
            .map_err(|_| invalid("is not a valid URI".into()))?
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true);
        match (endpoint.starts_with("https://"), ca) {
            (true, Some(ca)) => {
                let tls = tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(ca.pem()));
                built = built.tls_config(tls).map_err(|e| {
                    invalid(format!("cannot use the zone's CA {}: {e}", ca.origin()))
                })?;
            }
            (true, None) => {
                return Err(invalid(
                    "speaks TLS, but no zone CA was given: set ORC_ZONE_CA_FILE (or \
                     --zone-ca-file) to the zone's ca.pem"
                        .into(),
                ));
            }
            (false, _) if endpoint.starts_with("http://") => {}
            (false, _) => return Err(invalid("must start with https:// or http://".into())),
        }
        Ok(GrpcConnector {
            endpoint: built,
            credentials: None,
        })
    }

    /// Sends `credentials` with every stream it opens.
    pub fn with_credentials(mut self, credentials: ZoneCredentials) -> Self {
        self.credentials = Some(credentials);
        self
    }
}

impl Connector for GrpcConnector {
    fn connect(
        &self,
        outbound: ProviderStream,
    ) -> impl Future<Output = Result<ZoneStream, ConnectError>> + Send {
        let endpoint = self.endpoint.clone();
        let credentials = self.credentials.clone();
        async move {
            let channel =
                endpoint
                    .connect()
                    .await
                    .map_err(|source| match orc_tls::explain(&source) {
                        Some(failure) => ConnectError::Tls(failure),
                        None => ConnectError::Transport(source),
                    })?;
            let mut client = ProviderHubClient::new(channel);
            let mut request = tonic::Request::new(outbound);
            if let Some(credentials) = &credentials {
                credentials.apply(&mut request);
            }
            let response =
                client
                    .attach(request)
                    .await
                    .map_err(|status| match orc_tls::explain(&status) {
                        Some(failure) => ConnectError::Tls(failure),
                        None => ConnectError::Refused(status),
                    })?;
            let inbound: ZoneStream = Box::pin(response.into_inner());
            Ok(inbound)
        }
    }
}

#[cfg(test)]
mod credential_tests {
    use super::*;

    #[test]
    fn credentials_travel_as_metadata_and_never_show_the_token() {
        let credentials = ZoneCredentials::new("orc_s3cret", "sys/sys").unwrap();
        let mut request = tonic::Request::new(());
        credentials.apply(&mut request);
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer orc_s3cret"
        );
        assert_eq!(request.metadata().get("x-orc-project").unwrap(), "sys/sys");
        let shown = format!("{credentials:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("sys/sys"));
    }

    #[test]
    fn credentials_that_cannot_be_metadata_are_refused_naming_the_part() {
        assert!(matches!(
            ZoneCredentials::new("", "sys/sys"),
            Err(InvalidCredentials::Token)
        ));
        assert!(matches!(
            ZoneCredentials::new("tok en", "sys/sys"),
            Err(InvalidCredentials::Token)
        ));
        let err = ZoneCredentials::new("token", "sys").unwrap_err();
        assert_eq!(
            err.to_string(),
            "zone project \"sys\" must be printable ASCII of the form <org>/<project>"
        );
    }
}
