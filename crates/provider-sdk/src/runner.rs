//! The runner: keeps one stream to the zone open for a [`Provider`] and serves the zone's
//! requests on it.
//!
//! One connection ("session") goes: dial → send `Hello` and `Catalog` → wait for the
//! zone's messages. Quotes, deploys and destroys each run in their own task and are
//! answered with the request id they came with, in whatever order they finish. The runner
//! sends a keep-alive every `keepalive_interval`; a zone that sends nothing at all for
//! `keepalive_timeout` counts as gone and the stream is dropped. Between sessions it waits
//! a capped, jittered exponential backoff, reset once a session has been welcomed.
//!
//! Re-sending is the zone's job: after a reconnect (or a failover to another replica) the
//! zone sends every request still in flight again. Requests are idempotent by node id, so
//! the provider simply answers again. Answers computed for a stream that has since gone
//! are dropped, never replayed. Work already running is not cancelled by a dropped stream,
//! and a repeated deploy or destroy of a node whose previous one is still running joins it
//! instead of starting a second one, so a re-send never races the original.
//!
//! All timing uses tokio's clock, so tests drive it with `tokio::time::pause`.

use std::collections::HashMap;
use std::future::{Future, pending};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use orc_proto::{
    DeployResult, DestroyResult, NodeId, PROTOCOL_VERSION, ProviderBody, ProviderMessage,
    ReplicaRole, RequestId, pb,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{OnceCell, mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at, sleep, timeout};
use tokio_stream::StreamExt;

use crate::provider::{ProgressSink, Provider};
use crate::session::{SessionState, Step};
use crate::transport::{
    ConnectError, Connector, GrpcConnector, InvalidEndpoint, ProviderStream, ZoneCredentials,
    ZoneStream,
};
use orc_common::Backoff;

/// Hello and catalog are queued before the stream opens; the channel must hold both.
const MIN_OUTBOUND_BUFFER: usize = 2;

/// Settings of the runner. `Default` gives the production values.
#[derive(Debug, Clone)]
pub struct RunnerOptions {
    /// How often the runner sends a keep-alive. Default 10 s.
    pub keepalive_interval: Duration,
    /// How long the zone may stay silent before the stream counts as dropped. Default 30 s.
    pub keepalive_timeout: Duration,
    /// Backoff between reconnects. Default 0.5 s doubling to 30 s.
    pub backoff: Backoff,
    /// How long one connection attempt may take. Default 10 s.
    pub connect_timeout: Duration,
    /// Interval of inventory passes while serving; the first pass runs when the replica
    /// becomes serving. `None`: no inventory. Default 60 s.
    pub inventory_interval: Option<Duration>,
    /// Interval at which the catalog is sent again (availability changes). `None`: only at
    /// connect. Default 60 s.
    pub catalog_interval: Option<Duration>,
    /// Seed of the backoff jitter; `None` picks a random one. Tests set it.
    pub jitter_seed: Option<u64>,
    /// Messages buffered towards the zone before senders wait (at least 2). Default 256.
    pub outbound_buffer: usize,
    /// Token and project sent when a stream opens; a zone that checks them refuses a stream
    /// without. Default none.
    pub credentials: Option<ZoneCredentials>,
    /// The zone's CA, which an `https://` endpoint's certificate must be signed by.
    /// Default none (only `http://` endpoints then work).
    pub zone_ca: Option<orc_tls::PinnedCa>,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions {
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
            connect_timeout: Duration::from_secs(10),
            inventory_interval: Some(Duration::from_secs(60)),
            catalog_interval: Some(Duration::from_secs(60)),
            jitter_seed: None,
            outbound_buffer: 256,
            credentials: None,
            zone_ca: None,
        }
    }
}

/// What the runner is doing, for logs, health checks and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerStatus {
    /// A stream to the zone is open.
    pub connected: bool,
    /// The role of the last welcome or role change; kept while reconnecting.
    pub role: Option<ReplicaRole>,
    /// Streams opened since start.
    pub streams_opened: u64,
    /// Connections tried since start, whether or not they opened a stream.
    pub connect_attempts: u64,
}

/// The runner could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error(transparent)]
    InvalidEndpoint(#[from] InvalidEndpoint),
}

/// Runs `provider` against the zone at `endpoint` (e.g. `https://zone.internal:7400`) until
/// the process ends, reconnecting whenever the stream drops.
pub async fn run_provider<P: Provider>(
    endpoint: &str,
    provider: Arc<P>,
    options: RunnerOptions,
) -> Result<(), RunnerError> {
    ProviderRunner::new(endpoint, provider, options)?
        .run_until(pending())
        .await;
    Ok(())
}

/// Keeps a provider connected to the zone. Build it, take [`ProviderRunner::status`] if
/// needed, then [`ProviderRunner::run_until`].
#[derive(Debug)]
pub struct ProviderRunner<P, C = GrpcConnector> {
    connector: C,
    shared: Arc<Shared<P>>,
    options: RunnerOptions,
    status: watch::Sender<RunnerStatus>,
}

/// State that outlives a session: the provider and the deploys and destroys in flight.
#[derive(Debug)]
struct Shared<P> {
    provider: Arc<P>,
    deploys: SingleFlight<NodeId, DeployResult>,
    destroys: SingleFlight<NodeId, DestroyResult>,
}

impl<P: Provider> ProviderRunner<P, GrpcConnector> {
    /// A runner dialling `endpoint` over gRPC.
    pub fn new(
        endpoint: &str,
        provider: Arc<P>,
        options: RunnerOptions,
    ) -> Result<Self, RunnerError> {
        let mut connector =
            GrpcConnector::new(endpoint, options.connect_timeout, options.zone_ca.as_ref())?;
        if let Some(credentials) = options.credentials.clone() {
            connector = connector.with_credentials(credentials);
        }
        Ok(Self::with_connector(connector, provider, options))
    }
}

impl<P: Provider, C: Connector> ProviderRunner<P, C> {
    /// A runner using another way to reach the zone (the test harness's in-memory one).
    pub fn with_connector(connector: C, provider: Arc<P>, options: RunnerOptions) -> Self {
        ProviderRunner {
            connector,
            shared: Arc::new(Shared {
                provider,
                deploys: SingleFlight::default(),
                destroys: SingleFlight::default(),
            }),
            options,
            status: watch::Sender::new(RunnerStatus::default()),
        }
    }

    /// Follows the runner's status.
    pub fn status(&self) -> watch::Receiver<RunnerStatus> {
        self.status.subscribe()
    }

    /// Runs until `shutdown` completes. Work already running finishes in the background.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let seed = self.options.jitter_seed.unwrap_or_else(rand::random);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut attempt: u32 = 0;
        loop {
            let outcome = tokio::select! {
                () = &mut shutdown => break,
                outcome = self.session() => outcome,
            };
            self.status.send_modify(|s| s.connected = false);
            if outcome.welcomed {
                attempt = 0;
            }
            let delay = self.options.backoff.delay(attempt, rng.random());
            attempt = attempt.saturating_add(1);
            tracing::warn!(
                reason = %outcome.end,
                retry_in_ms = delay.as_millis() as u64,
                "stream to the zone ended; reconnecting"
            );
            tokio::select! {
                () = &mut shutdown => break,
                () = sleep(delay) => {}
            }
        }
        self.status.send_modify(|s| s.connected = false);
        tracing::info!("provider runner stopped");
    }
}

/// Why a session ended.
#[derive(Debug)]
enum SessionEnd {
    Connect(ConnectError),
    Closed,
    Failed(tonic::Status),
    ZoneSilent(Duration),
}

impl std::fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionEnd::Connect(e) => match std::error::Error::source(e) {
                Some(source) => write!(f, "{e}: {source}"),
                None => write!(f, "{e}"),
            },
            SessionEnd::Closed => f.write_str("the zone closed the stream"),
            SessionEnd::Failed(status) => {
                write!(
                    f,
                    "the stream failed: {:?}: {}",
                    status.code(),
                    status.message()
                )
            }
            SessionEnd::ZoneSilent(after) => {
                write!(f, "the zone sent nothing for {} s", after.as_secs())
            }
        }
    }
}

#[derive(Debug)]
struct SessionOutcome {
    welcomed: bool,
    end: SessionEnd,
}

/// Ticks of an optional interval; never completes when there is none.
async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => pending().await,
    }
}

/// An interval of `period` (at least 1 ms: tokio refuses a zero period).
fn every(period: Duration, first_now: bool) -> Interval {
    let period = period.max(Duration::from_millis(1));
    let start = if first_now {
        Instant::now()
    } else {
        Instant::now() + period
    };
    let mut interval = interval_at(start, period);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

impl<P: Provider, C: Connector> ProviderRunner<P, C> {
    async fn session(&self) -> SessionOutcome {
        let provider = &self.shared.provider;
        let (out_tx, out_rx) = mpsc::channel::<pb::ProviderMessage>(
            self.options.outbound_buffer.max(MIN_OUTBOUND_BUFFER),
        );
        let info = provider.hello();
        let hello = orc_proto::Hello {
            provider: info.provider,
            resource_uri: info.resource_uri,
            replica: info.replica,
            version: info.version,
            protocol_version: PROTOCOL_VERSION,
        };
        let catalog = provider.catalog().await;
        for body in [ProviderBody::Hello(hello), ProviderBody::Catalog(catalog)] {
            // The channel is fresh and holds at least two messages.
            let _ = out_tx.try_send(wire(RequestId::UNSOLICITED, body));
        }
        let outbound = ProviderStream::new(out_rx);
        self.status.send_modify(|s| s.connect_attempts += 1);
        let connecting = timeout(
            self.options.connect_timeout,
            self.connector.connect(outbound),
        );
        let inbound = match connecting.await {
            Ok(Ok(inbound)) => inbound,
            Ok(Err(e)) => return not_welcomed(SessionEnd::Connect(e)),
            Err(_) => return not_welcomed(SessionEnd::Connect(ConnectError::TimedOut)),
        };
        self.status.send_modify(|s| {
            s.connected = true;
            s.streams_opened += 1;
        });
        tracing::info!("connected to the zone");
        self.serve(inbound, out_tx).await
    }

    async fn serve(
        &self,
        mut inbound: ZoneStream,
        out_tx: mpsc::Sender<pb::ProviderMessage>,
    ) -> SessionOutcome {
        let opts = &self.options;
        let mut state = SessionState::new(opts.inventory_interval);
        let mut keepalive = every(opts.keepalive_interval, false);
        let silence = sleep(opts.keepalive_timeout);
        tokio::pin!(silence);
        let mut inventory: Option<Interval> = None;
        let mut catalog = opts.catalog_interval.map(|p| every(p, false));
        let inventory_running = Arc::new(AtomicBool::new(false));
        loop {
            tokio::select! {
                message = inbound.next() => {
                    let message = match message {
                        None => return outcome(&state, SessionEnd::Closed),
                        Some(Err(status)) => return outcome(&state, SessionEnd::Failed(status)),
                        Some(Ok(message)) => message,
                    };
                    silence.as_mut().reset(Instant::now() + opts.keepalive_timeout);
                    match state.on_zone_message(message) {
                        Step::AdoptRole { role, inventory: period } => {
                            inventory = period.map(|p| every(p, true));
                            self.status.send_modify(|s| s.role = Some(role));
                            tracing::info!(%role, "the zone set this replica's role");
                            self.shared.provider.on_role(role);
                        }
                        Step::Nothing => {}
                        Step::Reject { error, request_id, reply } => {
                            tracing::warn!(%error, %request_id, "refusing an unreadable request from the zone");
                            let out_tx = out_tx.clone();
                            tokio::spawn(async move { send(&out_tx, request_id, reply).await });
                        }
                        Step::Drop(e) => {
                            tracing::warn!(error = %e, "dropping an unreadable message from the zone");
                        }
                        Step::Quote { request_id, quote } => {
                            tracing::debug!(%request_id, node = %quote.node_id, "quote");
                            self.spawn_quote(request_id, quote, out_tx.clone());
                        }
                        Step::Deploy { request_id, deploy } => {
                            tracing::info!(%request_id, node = %deploy.node_id, "deploy");
                            self.spawn_deploy(request_id, deploy, out_tx.clone());
                        }
                        Step::Destroy { request_id, node_id } => {
                            tracing::info!(%request_id, node = %node_id, "destroy");
                            self.spawn_destroy(request_id, node_id, out_tx.clone());
                        }
                    }
                }
                _ = keepalive.tick() => {
                    // A full buffer means messages are flowing; the keep-alive can wait.
                    let _ = out_tx.try_send(wire(RequestId::UNSOLICITED, ProviderBody::KeepAlive));
                }
                () = &mut silence => {
                    return outcome(&state, SessionEnd::ZoneSilent(opts.keepalive_timeout));
                }
                () = tick(&mut inventory) => {
                    self.spawn_inventory(&inventory_running, out_tx.clone());
                }
                () = tick(&mut catalog) => {
                    let shared = Arc::clone(&self.shared);
                    let out_tx = out_tx.clone();
                    tokio::spawn(async move {
                        let catalog = shared.provider.catalog().await;
                        send(&out_tx, RequestId::UNSOLICITED, ProviderBody::Catalog(catalog)).await;
                    });
                }
            }
        }
    }

    fn spawn_quote(
        &self,
        request_id: RequestId,
        quote: orc_proto::Quote,
        out_tx: mpsc::Sender<pb::ProviderMessage>,
    ) {
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            let node_id = quote.node_id.clone();
            let reply = shared.provider.quote(quote).await;
            send(
                &out_tx,
                request_id,
                ProviderBody::QuoteReply { node_id, reply },
            )
            .await;
        });
    }

    fn spawn_deploy(
        &self,
        request_id: RequestId,
        deploy: orc_proto::Deploy,
        out_tx: mpsc::Sender<pb::ProviderMessage>,
    ) {
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            let node_id = deploy.node_id.clone();
            let progress = ProgressSink::new(request_id, node_id.clone(), out_tx.clone());
            let result = shared
                .deploys
                .run(node_id.clone(), || shared.provider.deploy(deploy, progress))
                .await;
            send(&out_tx, request_id, result.into_body(node_id)).await;
        });
    }

    fn spawn_destroy(
        &self,
        request_id: RequestId,
        node_id: NodeId,
        out_tx: mpsc::Sender<pb::ProviderMessage>,
    ) {
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            let result = shared
                .destroys
                .run(node_id.clone(), || shared.provider.destroy(node_id.clone()))
                .await;
            send(&out_tx, request_id, result.into_body(node_id)).await;
        });
    }

    fn spawn_inventory(
        &self,
        running: &Arc<AtomicBool>,
        out_tx: mpsc::Sender<pb::ProviderMessage>,
    ) {
        if running.swap(true, Ordering::AcqRel) {
            tracing::debug!("previous inventory pass still running; skipping this one");
            return;
        }
        let running = Arc::clone(running);
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            match shared.provider.inventory().await {
                Some(inventory) => {
                    send(
                        &out_tx,
                        RequestId::UNSOLICITED,
                        ProviderBody::Inventory(inventory),
                    )
                    .await;
                }
                None => tracing::info!("inventory incomplete this pass; sending none"),
            }
            running.store(false, Ordering::Release);
        });
    }
}

/// Wraps a body in its envelope, in wire form.
pub(crate) fn wire(request_id: RequestId, body: ProviderBody) -> pb::ProviderMessage {
    ProviderMessage { request_id, body }.into()
}

fn not_welcomed(end: SessionEnd) -> SessionOutcome {
    SessionOutcome {
        welcomed: false,
        end,
    }
}

fn outcome(state: &SessionState, end: SessionEnd) -> SessionOutcome {
    SessionOutcome {
        welcomed: state.welcomed(),
        end,
    }
}

async fn send(
    out_tx: &mpsc::Sender<pb::ProviderMessage>,
    request_id: RequestId,
    body: ProviderBody,
) {
    if out_tx.send(wire(request_id, body)).await.is_err() {
        tracing::debug!(%request_id, "answer dropped: its stream is gone; the zone re-sends");
    }
}

/// Runs at most one operation per key at a time; callers arriving while it runs share its
/// result. Nothing is cached once the operation has finished.
#[derive(Debug)]
struct SingleFlight<K, R> {
    running: Mutex<HashMap<K, Arc<OnceCell<R>>>>,
}

impl<K, R> Default for SingleFlight<K, R> {
    fn default() -> Self {
        SingleFlight {
            running: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, R: Clone> SingleFlight<K, R> {
    async fn run<F, Fut>(&self, key: K, operation: F) -> R
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = R>,
    {
        let cell = {
            let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(running.entry(key.clone()).or_default())
        };
        let result = cell.get_or_init(operation).await.clone();
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            running.remove(&key);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[tokio::test(start_paused = true)]
    async fn single_flight_joins_concurrent_callers_and_forgets_after() {
        let flight: Arc<SingleFlight<u32, u32>> = Arc::new(SingleFlight::default());
        let calls = Arc::new(AtomicU32::new(0));
        let run = |flight: Arc<SingleFlight<u32, u32>>, calls: Arc<AtomicU32>| async move {
            flight
                .run(7, || async {
                    sleep(Duration::from_secs(1)).await;
                    calls.fetch_add(1, Ordering::SeqCst) + 100
                })
                .await
        };
        let a = tokio::spawn(run(Arc::clone(&flight), Arc::clone(&calls)));
        let b = tokio::spawn(run(Arc::clone(&flight), Arc::clone(&calls)));
        assert_eq!(a.await.unwrap(), 100);
        assert_eq!(b.await.unwrap(), 100);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(run(Arc::clone(&flight), Arc::clone(&calls)).await, 101);
        assert!(flight.running.lock().unwrap().is_empty());
    }
}
