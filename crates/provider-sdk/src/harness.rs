//! The zone's side of the stream, for tests: accepts provider streams, sends requests and
//! awaits their answers, drops streams on demand.
//!
//! Two ways in:
//! - [`ZoneHarness::grpc`] serves the real `ProviderHub` on `127.0.0.1:0`; the provider
//!   under test dials [`ZoneHarness::endpoint`] with the real runner and transport.
//! - [`ZoneHarness::in_memory`] hands out an [`InMemoryConnector`] instead, for tests that
//!   run under tokio's paused clock (real sockets would race the virtual time).
//!
//! Either way a test gets one [`ZoneConn`] per stream, in order of arrival. A connection
//! answers each provider keep-alive with one of its own unless told not to, so a provider
//! never times out a harness that is merely idle.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use orc_proto::{
    Catalog, ConvertError, Deploy, DeployProgress, DeployResult, Destroy, DestroyResult, Hello,
    Inventory, NodeId, ProviderBody, ProviderMessage, Quote, QuoteReply, ReplicaRole, RequestId,
    ZoneBody, ZoneMessage, pb,
};
use pb::provider_hub_server::{ProviderHub, ProviderHubServer};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::transport::{ConnectError, Connector, ProviderStream, ZoneStream};

/// Something the harness could not do.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot listen on loopback")]
    Bind(#[source] std::io::Error),
    #[error("the harness stopped accepting streams")]
    Stopped,
    #[error("the stream ended before {waiting_for}")]
    Closed { waiting_for: &'static str },
    #[error("expected {expected}, the provider sent {got}")]
    Unexpected { expected: &'static str, got: String },
    #[error("the provider sent an invalid message")]
    Protocol(#[source] ConvertError),
}

/// Largest provider message the harness accepts: an inventory of ~100,000 nodes.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

type ToProvider = mpsc::Sender<Result<pb::ZoneMessage, Status>>;
type FromProvider =
    std::pin::Pin<Box<dyn Stream<Item = Result<pb::ProviderMessage, Status>> + Send>>;

/// A stream the harness has accepted but not yet handed to the test.
struct RawStream {
    inbound: FromProvider,
    outbound: ToProvider,
}

/// Accepts provider streams and hands them to the test as [`ZoneConn`]s.
#[derive(Debug)]
pub struct ZoneHarness {
    accepted: tokio::sync::Mutex<mpsc::UnboundedReceiver<RawStreamBox>>,
    address: Option<SocketAddr>,
    request_ids: Arc<AtomicU64>,
    echo_keepalives: bool,
    server: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

/// `RawStream` behind a type that can be printed.
struct RawStreamBox(RawStream);

impl std::fmt::Debug for RawStreamBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawStream")
    }
}

struct HubService {
    accepted: mpsc::UnboundedSender<RawStreamBox>,
}

#[tonic::async_trait]
impl ProviderHub for HubService {
    type AttachStream = ReceiverStream<Result<pb::ZoneMessage, Status>>;

    async fn attach(
        &self,
        request: Request<Streaming<pb::ProviderMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let (outbound, rx) = mpsc::channel(256);
        let raw = RawStream {
            inbound: Box::pin(request.into_inner()),
            outbound,
        };
        self.accepted
            .send(RawStreamBox(raw))
            .map_err(|_| Status::unavailable("the harness is shutting down"))?;
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

impl ZoneHarness {
    /// Serves `ProviderHub` on a fresh loopback port.
    pub async fn grpc() -> Result<ZoneHarness, HarnessError> {
        ZoneHarness::grpc_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Serves `ProviderHub` on `address`, e.g. the port of a harness that was dropped, to
    /// play a zone that restarts.
    pub async fn grpc_on(address: SocketAddr) -> Result<ZoneHarness, HarnessError> {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(HarnessError::Bind)?;
        let address = listener.local_addr().map_err(HarnessError::Bind)?;
        let (accepted_tx, accepted_rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let service = ProviderHubServer::new(HubService {
            accepted: accepted_tx,
        })
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
        let server = tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "harness server ended with an error");
            }
        });
        Ok(ZoneHarness {
            accepted: tokio::sync::Mutex::new(accepted_rx),
            address: Some(address),
            request_ids: Arc::new(AtomicU64::new(1)),
            echo_keepalives: true,
            server: Some((stop_tx, server)),
        })
    }

    /// A harness reached through the returned connector instead of a socket.
    pub fn in_memory() -> (ZoneHarness, InMemoryConnector) {
        let (accepted_tx, accepted_rx) = mpsc::unbounded_channel();
        let harness = ZoneHarness {
            accepted: tokio::sync::Mutex::new(accepted_rx),
            address: None,
            request_ids: Arc::new(AtomicU64::new(1)),
            echo_keepalives: true,
            server: None,
        };
        let connector = InMemoryConnector {
            accepted: accepted_tx,
            state: Arc::new(Mutex::new(ConnectorState::default())),
        };
        (harness, connector)
    }

    /// Whether new connections answer keep-alives (default true).
    pub fn echo_keepalives(mut self, echo: bool) -> Self {
        self.echo_keepalives = echo;
        self
    }

    /// The URL a provider dials, `http://127.0.0.1:<port>`. `None` for an in-memory harness.
    pub fn endpoint(&self) -> Option<String> {
        self.address.map(|a| format!("http://{a}"))
    }

    /// Waits for the next provider stream and reads its `Hello` and `Catalog`.
    pub async fn accept(&self) -> Result<ZoneConn, HarnessError> {
        let RawStreamBox(mut raw) = self
            .accepted
            .lock()
            .await
            .recv()
            .await
            .ok_or(HarnessError::Stopped)?;
        let hello = match next_message(&mut raw.inbound, "hello").await?.body {
            ProviderBody::Hello(hello) => hello,
            other => return Err(unexpected("hello", &other)),
        };
        let catalog = match next_message(&mut raw.inbound, "catalog").await?.body {
            ProviderBody::Catalog(catalog) => catalog,
            other => return Err(unexpected("catalog", &other)),
        };
        Ok(ZoneConn::start(
            hello,
            catalog,
            raw,
            Arc::clone(&self.request_ids),
            self.echo_keepalives,
        ))
    }
}

impl Drop for ZoneHarness {
    fn drop(&mut self) {
        if let Some((stop, server)) = self.server.take() {
            let _ = stop.send(());
            server.abort();
        }
    }
}

fn unexpected(expected: &'static str, got: &ProviderBody) -> HarnessError {
    HarnessError::Unexpected {
        expected,
        got: format!("{got:?}"),
    }
}

async fn next_message(
    inbound: &mut FromProvider,
    waiting_for: &'static str,
) -> Result<ProviderMessage, HarnessError> {
    match inbound.next().await {
        Some(Ok(message)) => ProviderMessage::try_from(message).map_err(HarnessError::Protocol),
        Some(Err(_)) | None => Err(HarnessError::Closed { waiting_for }),
    }
}

/// Routing state of one connection, shared by the test and the reader task.
#[derive(Default)]
struct Routes {
    pending: HashMap<RequestId, mpsc::UnboundedSender<Result<ProviderBody, ConvertError>>>,
    unsolicited_errors: Vec<String>,
}

/// One accepted provider stream, seen from the zone.
#[derive(Debug)]
pub struct ZoneConn {
    hello: Hello,
    catalog: Catalog,
    outbound: ToProvider,
    request_ids: Arc<AtomicU64>,
    routes: Arc<Mutex<RoutesBox>>,
    inventories: tokio::sync::Mutex<mpsc::UnboundedReceiver<Inventory>>,
    catalogs: tokio::sync::Mutex<mpsc::UnboundedReceiver<Catalog>>,
    keepalives: Arc<AtomicU64>,
    echo: Arc<AtomicBool>,
    closed: watch::Receiver<bool>,
    reader: JoinHandle<()>,
}

struct RoutesBox(Routes);

impl std::fmt::Debug for RoutesBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("pending", &self.0.pending.len())
            .finish()
    }
}

/// A request sent and not yet answered.
#[derive(Debug)]
pub struct PendingReply {
    request_id: RequestId,
    replies: mpsc::UnboundedReceiver<Result<ProviderBody, ConvertError>>,
}

impl PendingReply {
    /// The id the request was sent with.
    pub fn request_id(&self) -> RequestId {
        self.request_id
    }

    /// The next message for this request (a progress note or the final answer, or the
    /// error of an answer that could not be read); `None` once the stream has ended.
    pub async fn next(&mut self) -> Option<Result<ProviderBody, ConvertError>> {
        self.replies.recv().await
    }

    /// Waits for the final answer, collecting deploy progress on the way.
    pub async fn finish(mut self) -> Result<(Vec<DeployProgress>, ProviderBody), HarnessError> {
        let mut progress = Vec::new();
        loop {
            match self.replies.recv().await {
                None => {
                    return Err(HarnessError::Closed {
                        waiting_for: "the reply",
                    });
                }
                Some(Err(e)) => return Err(HarnessError::Protocol(e)),
                Some(Ok(ProviderBody::DeployProgress(p))) => progress.push(p),
                Some(Ok(body)) => return Ok((progress, body)),
            }
        }
    }
}

/// A deploy's progress notes and result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployOutcome {
    pub progress: Vec<DeployProgress>,
    pub result: DeployResult,
}

impl ZoneConn {
    fn start(
        hello: Hello,
        catalog: Catalog,
        raw: RawStream,
        request_ids: Arc<AtomicU64>,
        echo: bool,
    ) -> ZoneConn {
        let routes = Arc::new(Mutex::new(RoutesBox(Routes::default())));
        let (inventory_tx, inventory_rx) = mpsc::unbounded_channel();
        let (catalog_tx, catalog_rx) = mpsc::unbounded_channel();
        let keepalives = Arc::new(AtomicU64::new(0));
        let echo = Arc::new(AtomicBool::new(echo));
        let (closed_tx, closed_rx) = watch::channel(false);
        let reader = tokio::spawn(read_provider(
            raw.inbound,
            raw.outbound.clone(),
            Arc::clone(&routes),
            inventory_tx,
            catalog_tx,
            Arc::clone(&keepalives),
            Arc::clone(&echo),
            closed_tx,
        ));
        ZoneConn {
            hello,
            catalog,
            outbound: raw.outbound,
            request_ids,
            routes,
            inventories: tokio::sync::Mutex::new(inventory_rx),
            catalogs: tokio::sync::Mutex::new(catalog_rx),
            keepalives,
            echo,
            closed: closed_rx,
            reader,
        }
    }

    /// The provider's hello.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// The catalog sent right after hello.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Keep-alives received from the provider so far.
    pub fn keepalives_received(&self) -> u64 {
        self.keepalives.load(Ordering::SeqCst)
    }

    /// Whether to answer each provider keep-alive with one of ours.
    pub fn set_echo_keepalives(&self, echo: bool) {
        self.echo.store(echo, Ordering::SeqCst);
    }

    /// Messages that could not be routed or decoded, described.
    pub fn protocol_errors(&self) -> Vec<String> {
        self.lock_routes().0.unsolicited_errors.clone()
    }

    fn lock_routes(&self) -> std::sync::MutexGuard<'_, RoutesBox> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends a message nobody answers (welcome, role change, keep-alive).
    pub async fn send(&self, body: ZoneBody) -> Result<(), HarnessError> {
        self.send_with_id(RequestId::UNSOLICITED, body).await
    }

    async fn send_with_id(
        &self,
        request_id: RequestId,
        body: ZoneBody,
    ) -> Result<(), HarnessError> {
        let message = pb::ZoneMessage::from(ZoneMessage { request_id, body });
        self.outbound
            .send(Ok(message))
            .await
            .map_err(|_| HarnessError::Closed {
                waiting_for: "sending",
            })
    }

    /// Sends `Welcome` with `role`.
    pub async fn welcome(&self, role: ReplicaRole) -> Result<(), HarnessError> {
        self.send(ZoneBody::Welcome { role }).await
    }

    /// Sends `RoleChange` with `role`.
    pub async fn change_role(&self, role: ReplicaRole) -> Result<(), HarnessError> {
        self.send(ZoneBody::RoleChange { role }).await
    }

    /// Sends a request with a fresh request id and returns the handle to its answer.
    pub async fn request(&self, body: ZoneBody) -> Result<PendingReply, HarnessError> {
        let request_id = RequestId(self.request_ids.fetch_add(1, Ordering::SeqCst));
        let (tx, replies) = mpsc::unbounded_channel();
        self.lock_routes().0.pending.insert(request_id, tx);
        self.send_with_id(request_id, body).await?;
        Ok(PendingReply {
            request_id,
            replies,
        })
    }

    /// Sends a request in wire form as it is, valid or not, with a fresh request id.
    pub async fn request_wire(
        &self,
        body: pb::zone_message::Body,
    ) -> Result<PendingReply, HarnessError> {
        let request_id = RequestId(self.request_ids.fetch_add(1, Ordering::SeqCst));
        let (tx, replies) = mpsc::unbounded_channel();
        self.lock_routes().0.pending.insert(request_id, tx);
        let message = pb::ZoneMessage {
            request_id: request_id.0,
            body: Some(body),
        };
        self.outbound
            .send(Ok(message))
            .await
            .map_err(|_| HarnessError::Closed {
                waiting_for: "sending",
            })?;
        Ok(PendingReply {
            request_id,
            replies,
        })
    }

    /// Quotes a node and waits for the answer.
    pub async fn quote(&self, quote: Quote) -> Result<QuoteReply, HarnessError> {
        match self
            .request(ZoneBody::Quote(quote))
            .await?
            .finish()
            .await?
            .1
        {
            ProviderBody::QuoteReply { reply, .. } => Ok(reply),
            other => Err(unexpected("a quote reply", &other)),
        }
    }

    /// Deploys a node and waits for the result.
    pub async fn deploy(&self, deploy: Deploy) -> Result<DeployOutcome, HarnessError> {
        let pending = self.request(ZoneBody::Deploy(deploy)).await?;
        deploy_outcome(pending).await
    }

    /// Destroys a node and waits for the result.
    pub async fn destroy(&self, node_id: NodeId) -> Result<DestroyResult, HarnessError> {
        let pending = self.request(ZoneBody::Destroy(Destroy { node_id })).await?;
        match pending.finish().await?.1 {
            ProviderBody::DestroyDone { .. } => Ok(DestroyResult::Destroyed),
            ProviderBody::DestroyRefused { refusal, .. } => Ok(DestroyResult::Refused(refusal)),
            other => Err(unexpected("a destroy result", &other)),
        }
    }

    /// Waits for the next inventory report.
    pub async fn next_inventory(&self) -> Result<Inventory, HarnessError> {
        self.inventories
            .lock()
            .await
            .recv()
            .await
            .ok_or(HarnessError::Closed {
                waiting_for: "an inventory",
            })
    }

    /// Waits for the next catalog sent after the first one.
    pub async fn next_catalog(&self) -> Result<Catalog, HarnessError> {
        self.catalogs
            .lock()
            .await
            .recv()
            .await
            .ok_or(HarnessError::Closed {
                waiting_for: "a catalog",
            })
    }

    /// Waits until the provider's side of the stream has ended.
    pub async fn closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// Ends the stream from the zone's side, as a crashed or restarted zone would.
    /// Requests still waiting for an answer fail with [`HarnessError::Closed`].
    pub async fn drop_stream(&self) {
        let _ = self
            .outbound
            .send(Err(Status::unavailable("stream dropped by the zone")))
            .await;
        self.reader.abort();
        self.lock_routes().0.pending.clear();
    }
}

/// Waits for a deploy's outcome.
pub async fn deploy_outcome(pending: PendingReply) -> Result<DeployOutcome, HarnessError> {
    let (progress, body) = pending.finish().await?;
    let result = match body {
        ProviderBody::DeployDone(done) => DeployResult::Deployed(done),
        ProviderBody::DeployRefused { refusal, .. } => DeployResult::Refused(refusal),
        other => return Err(unexpected("a deploy result", &other)),
    };
    Ok(DeployOutcome { progress, result })
}

impl Drop for ZoneConn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

#[allow(clippy::too_many_arguments)]
async fn read_provider(
    mut inbound: FromProvider,
    outbound: ToProvider,
    routes: Arc<Mutex<RoutesBox>>,
    inventories: mpsc::UnboundedSender<Inventory>,
    catalogs: mpsc::UnboundedSender<Catalog>,
    keepalives: Arc<AtomicU64>,
    echo: Arc<AtomicBool>,
    closed: watch::Sender<bool>,
) {
    while let Some(Ok(message)) = inbound.next().await {
        let request_id = RequestId(message.request_id);
        let message = match ProviderMessage::try_from(message) {
            Ok(message) => message,
            Err(e) => {
                // An unreadable answer fails the request it answers, so a test sees why.
                let mut routes = routes.lock().unwrap_or_else(PoisonError::into_inner);
                match routes.0.pending.remove(&request_id) {
                    Some(waiter) => {
                        let _ = waiter.send(Err(e));
                    }
                    None => routes.0.unsolicited_errors.push(e.to_string()),
                }
                continue;
            }
        };
        match message.body {
            ProviderBody::KeepAlive => {
                keepalives.fetch_add(1, Ordering::SeqCst);
                if echo.load(Ordering::SeqCst) {
                    let reply = pb::ZoneMessage::from(ZoneMessage {
                        request_id: RequestId::UNSOLICITED,
                        body: ZoneBody::KeepAlive,
                    });
                    let _ = outbound.send(Ok(reply)).await;
                }
            }
            ProviderBody::Inventory(inventory) => {
                let _ = inventories.send(inventory);
            }
            ProviderBody::Catalog(catalog) => {
                let _ = catalogs.send(catalog);
            }
            body => {
                let is_final = body.is_final_reply();
                let mut routes = routes.lock().unwrap_or_else(PoisonError::into_inner);
                let routes = &mut routes.0;
                match routes.pending.get(&message.request_id) {
                    Some(waiter) => {
                        let _ = waiter.send(Ok(body));
                        if is_final {
                            routes.pending.remove(&message.request_id);
                        }
                    }
                    None => routes.unsolicited_errors.push(format!(
                        "no request {} is waiting for {body:?}",
                        message.request_id
                    )),
                }
            }
        }
    }
    routes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .0
        .pending
        .clear();
    let _ = closed.send(true);
}

/// Connection attempts seen by an [`InMemoryConnector`].
#[derive(Debug, Default)]
struct ConnectorState {
    attempts: Vec<Instant>,
    refuse_next: u32,
}

/// Reaches an in-memory [`ZoneHarness`]. Clones share their state.
#[derive(Debug, Clone)]
pub struct InMemoryConnector {
    accepted: mpsc::UnboundedSender<RawStreamBox>,
    state: Arc<Mutex<ConnectorState>>,
}

impl InMemoryConnector {
    fn state(&self) -> std::sync::MutexGuard<'_, ConnectorState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the next `count` connection attempts fail as if the zone were down.
    pub fn refuse_next(&self, count: u32) {
        self.state().refuse_next = count;
    }

    /// The tokio instants of every connection attempt so far.
    pub fn attempts(&self) -> Vec<Instant> {
        self.state().attempts.clone()
    }
}

impl Connector for InMemoryConnector {
    async fn connect(&self, outbound: ProviderStream) -> Result<ZoneStream, ConnectError> {
        {
            let mut state = self.state();
            state.attempts.push(Instant::now());
            if state.refuse_next > 0 {
                state.refuse_next -= 1;
                return Err(ConnectError::Refused(Status::unavailable("zone is down")));
            }
        }
        let (to_provider, from_zone) = mpsc::channel(256);
        let raw = RawStream {
            inbound: Box::pin(outbound.map(Ok)),
            outbound: to_provider,
        };
        self.accepted
            .send(RawStreamBox(raw))
            .map_err(|_| ConnectError::Refused(Status::unavailable("harness is gone")))?;
        let inbound: ZoneStream = Box::pin(ReceiverStream::new(from_zone));
        Ok(inbound)
    }
}
