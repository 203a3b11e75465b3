//! How the runner reaches the zone: a [`Connector`] turns the provider's outbound message
//! stream into the zone's inbound stream.
//!
//! [`GrpcConnector`] dials the zone's `ProviderHub.Attach` over HTTP/2 (no TLS yet). The
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
}

/// The zone's address could not be used.
#[derive(Debug, thiserror::Error)]
#[error("zone endpoint {endpoint:?} is not a valid URI")]
pub struct InvalidEndpoint {
    pub endpoint: String,
}

impl GrpcConnector {
    /// A connector for `endpoint` such as `http://127.0.0.1:7400`.
    pub fn new(endpoint: &str, connect_timeout: Duration) -> Result<Self, InvalidEndpoint> {
        let endpoint = Endpoint::from_shared(endpoint.to_string())
            .map_err(|_| InvalidEndpoint {
                endpoint: endpoint.to_string(),
            })?
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true);
        Ok(GrpcConnector { endpoint })
    }
}

impl Connector for GrpcConnector {
    fn connect(
        &self,
        outbound: ProviderStream,
    ) -> impl Future<Output = Result<ZoneStream, ConnectError>> + Send {
        let endpoint = self.endpoint.clone();
        async move {
            let channel = endpoint.connect().await.map_err(ConnectError::Transport)?;
            let mut client = ProviderHubClient::new(channel);
            let request = tonic::Request::new(outbound);
            let response = client
                .attach(request)
                .await
                .map_err(ConnectError::Refused)?;
            let inbound: ZoneStream = Box::pin(response.into_inner());
            Ok(inbound)
        }
    }
}
