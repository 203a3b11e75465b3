//! The zone's side of the provider protocol (`ProviderHub.Attach`): providers dial in, the
//! hub registers them, picks which replica serves, and carries the reconcilers' requests.
//!
//! - **Registration.** A stream is authenticated by its gRPC metadata (`authorization:
//!   Bearer <zone API token>` and `x-orc-project: <org>/<project>`; the token's user must be
//!   owner or member of that project). Its `Hello` names the resource: the provider row with
//!   that resource URI is created in the authenticated project if absent, and a provider of
//!   another project cannot be taken over.
//! - **Groups and roles.** Replicas offering one resource URI form a group. Exactly one
//!   replica of a group is serving (the first to connect while none serves); the others stand
//!   by and receive nothing but keep-alives. When the serving stream ends, or stays silent
//!   past the keep-alive timeout, the oldest standby is promoted (`RoleChange{SERVING}`) and
//!   every request still in flight is sent to it again (requests are idempotent by node id).
//! - **Requests.** Each request gets a hub-wide request id; answers are matched by it, the
//!   first final answer wins and later ones are dropped. A request waits for an answer up to
//!   its timeout, across failovers and reconnects; a request made while no replica serves
//!   fails at once with [`BackendError::NoReplica`].
//! - **Catalogs and inventory.** The last catalog of each group is kept for the API, and a
//!   catalog that differs from the previous one, or a new hello, counts as a configuration
//!   change (which releases nodes parked with `operator_fix`). Complete inventory reports
//!   from the serving replica go to [`crate::reconcile::apply_inventory`].
//!
//! Lock discipline: the hub's state sits behind one `std::sync::Mutex`, never held across an
//! `.await`; outbound channels are unbounded so sending under the lock never waits.

mod auth;
mod session;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use orc_proto::pb::provider_hub_server::ProviderHubServer;
use orc_proto::{
    Catalog, Deploy, DeployResult, DestroyResult, Hello, NodeId, ProviderBody, Quote, QuoteReply,
    ReplicaRole, RequestId, ZoneBody, ZoneMessage, pb,
};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use crate::backend::{BackendError, NodeBackend};
use crate::model::{Name, Provider, ProviderId, Timestamp};
use crate::store::Store;
use orc_common::time::{SharedClock, SystemClock};

/// Largest provider message the hub accepts (an inventory of ~100,000 nodes).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Settings of the hub. `Default` gives the production values.
#[derive(Clone)]
pub struct HubOptions {
    /// How long a quote may wait for its answer. Default 30 s.
    pub quote_timeout: Duration,
    /// How long a deploy may wait for its answer. Default 15 min.
    pub deploy_timeout: Duration,
    /// How long a destroy may wait for its answer. Default 10 min.
    pub destroy_timeout: Duration,
    /// A stream silent this long counts as ended. Default 30 s (the runner sends a keep-alive
    /// every 10 s).
    pub keepalive_timeout: Duration,
    /// How long a new stream may take to send its hello. Default 10 s.
    pub hello_timeout: Duration,
    /// A running node changed this recently is not marked lost by an inventory report (the
    /// report may have been read before the node's deploy finished). Default 2 min.
    pub lost_grace: Duration,
    /// How often an open stream's credential is checked again; a revoked token or a role
    /// taken away ends the stream within this long. Default 2 s.
    pub reauth_interval: Duration,
    /// The clock for stored times.
    pub clock: SharedClock,
    /// Told when an inventory report changed what the mesh plans from (sites, their stable
    /// addresses and prefixes, pool addresses, lost nodes); `None` tells nobody.
    pub mesh: Option<crate::mesh::MeshSignal>,
}

impl fmt::Debug for HubOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HubOptions")
            .field("quote_timeout", &self.quote_timeout)
            .field("deploy_timeout", &self.deploy_timeout)
            .field("destroy_timeout", &self.destroy_timeout)
            .field("keepalive_timeout", &self.keepalive_timeout)
            .field("hello_timeout", &self.hello_timeout)
            .field("lost_grace", &self.lost_grace)
            .finish_non_exhaustive()
    }
}

impl Default for HubOptions {
    fn default() -> Self {
        HubOptions {
            quote_timeout: Duration::from_secs(30),
            deploy_timeout: Duration::from_secs(15 * 60),
            destroy_timeout: Duration::from_secs(10 * 60),
            keepalive_timeout: Duration::from_secs(30),
            hello_timeout: Duration::from_secs(10),
            lost_grace: Duration::from_secs(120),
            reauth_interval: Duration::from_secs(2),
            clock: Arc::new(SystemClock),
            mesh: None,
        }
    }
}

/// One connected replica, as `orc providers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub provider_id: ProviderId,
    pub provider: Name,
    pub resource_uri: String,
    pub host: String,
    pub pid: u32,
    pub slot: u32,
    /// The provider's software version.
    pub version: String,
    pub role: ReplicaRole,
    pub connected_since: Timestamp,
}

/// The last catalog a provider's replicas reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogStatus {
    pub catalog: Catalog,
    pub received_at: Timestamp,
    /// The last configuration change (new hello, or a catalog differing from the previous).
    pub config_changed_at: Timestamp,
}

type Outbound = crate::streams::Outbound<pb::ZoneMessage>;

/// A replica's open stream.
struct Attached {
    stream: u64,
    /// Who its credential is (`pool:<id>` for an app pool's slot, `user:<id>`).
    principal: String,
    hello: Hello,
    since: Timestamp,
    role: ReplicaRole,
    outbound: Outbound,
}

/// A request waiting for its final answer.
struct InFlight {
    request: ZoneBody,
    reply: oneshot::Sender<Result<ProviderBody, BackendError>>,
    /// The stream it was last sent on: the only one whose answer is taken.
    sent_to: u64,
}

/// The replicas of one resource URI and their shared work.
struct Group {
    provider: Provider,
    /// In order of connection.
    replicas: Vec<Attached>,
    catalog: Option<(Catalog, Timestamp)>,
    config_changed_at: Timestamp,
    in_flight: BTreeMap<u64, InFlight>,
    /// A catalog of this group was refused and the refusal recorded as an event (once, until
    /// a catalog is taken again).
    catalog_refused: bool,
}

impl Group {
    fn serving(&self) -> Option<&Attached> {
        self.replicas
            .iter()
            .find(|r| r.role == ReplicaRole::Serving)
    }

    /// Sends every request in flight to the serving replica, which from now on is the only
    /// one whose answer is taken.
    fn resend_in_flight(&mut self) {
        let Some((stream, outbound)) = self.serving().map(|s| (s.stream, s.outbound.clone()))
        else {
            return;
        };
        for (id, in_flight) in &mut self.in_flight {
            in_flight.sent_to = stream;
            send(&outbound, RequestId(*id), in_flight.request.clone());
        }
    }
}

fn send(outbound: &Outbound, request_id: RequestId, body: ZoneBody) {
    // A closed channel means the stream is ending; its session promotes another replica and
    // re-sends what is in flight.
    let _ = outbound.send(Ok(pb::ZoneMessage::from(ZoneMessage { request_id, body })));
}

#[derive(Default)]
struct HubState {
    /// By resource URI.
    groups: BTreeMap<String, Group>,
}

struct Inner {
    store: Store,
    options: HubOptions,
    state: Mutex<HubState>,
    next_stream: AtomicU64,
    /// Set once by [`Hub::shutdown`]; every session ends when it flips.
    closing: watch::Sender<bool>,
}

/// The zone's provider hub. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A hub over `store`.
    pub fn new(store: Store, options: HubOptions) -> Hub {
        Hub {
            inner: Arc::new(Inner {
                store,
                options,
                state: Mutex::new(HubState::default()),
                next_stream: AtomicU64::new(1),
                closing: watch::Sender::new(false),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, HubState> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Timestamp {
        self.inner.options.clock.now()
    }

    /// The tonic service to mount (messages up to [`MAX_MESSAGE_BYTES`]).
    pub fn grpc_service(&self) -> ProviderHubServer<session::HubService> {
        ProviderHubServer::new(session::HubService { hub: self.clone() })
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Serves the hub alone on `listener`, in plain text with the default limits, until
    /// `shutdown` completes (tests and benchmarks).
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        self.serve_with(listener, orc_tls::ServeOptions::default(), shutdown)
            .await
    }

    /// Serves the hub on `listener` as `options` say (TLS, limits), HTTP/2 only, until
    /// `shutdown` completes.
    pub async fn serve_with(
        &self,
        listener: TcpListener,
        options: orc_tls::ServeOptions,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let routes = tonic::service::Routes::new(self.grpc_service()).prepare();
        let options = orc_tls::ServeOptions {
            what: "provider endpoint",
            http2_only: true,
            ..options
        };
        orc_tls::serve(listener, routes, options, shutdown).await
    }

    /// Every connected replica: by resource URI, the serving one first, then standbys in
    /// order of connection.
    pub fn replicas(&self) -> Vec<ReplicaStatus> {
        let state = self.state();
        state.groups.values().flat_map(replica_rows).collect()
    }

    /// The connected replicas of `provider`, serving first.
    pub fn replicas_of(&self, provider: &Provider) -> Vec<ReplicaStatus> {
        let state = self.state();
        state
            .groups
            .get(&provider.resource_uri)
            .map(replica_rows)
            .unwrap_or_default()
    }

    /// The process ids of the replicas attached with `principal`'s credential, and whether
    /// each is serving. Every attached replica has taken its role (serving or standing by).
    pub fn attached_of(&self, principal: &str) -> Vec<(u32, bool)> {
        let state = self.state();
        state
            .groups
            .values()
            .flat_map(|g| g.replicas.iter())
            .filter(|r| r.principal == principal)
            .map(|r| (r.hello.replica.pid, r.role == ReplicaRole::Serving))
            .collect()
    }

    /// The catalog `provider`'s replicas last reported.
    pub fn catalog(&self, provider: &Provider) -> Option<CatalogStatus> {
        let state = self.state();
        let group = state.groups.get(&provider.resource_uri)?;
        let (catalog, received_at) = group.catalog.clone()?;
        Some(CatalogStatus {
            catalog,
            received_at,
            config_changed_at: group.config_changed_at,
        })
    }

    /// Ends every provider stream and fails every request waiting for an answer with
    /// [`BackendError::ShuttingDown`]. Streams opened afterwards are ended at once.
    pub fn shutdown(&self) {
        self.inner.closing.send_replace(true);
        let mut state = self.state();
        for group in state.groups.values_mut() {
            for (_, in_flight) in std::mem::take(&mut group.in_flight) {
                let _ = in_flight.reply.send(Err(BackendError::ShuttingDown));
            }
        }
    }

    /// Requests waiting for an answer, over all providers.
    pub fn in_flight(&self) -> usize {
        self.state()
            .groups
            .values()
            .map(|g| g.in_flight.len())
            .sum()
    }

    /// Sends `body` to the serving replica of `provider` and waits for the final answer.
    async fn request(
        &self,
        provider: &Provider,
        body: ZoneBody,
        kind: &'static str,
        timeout: Duration,
    ) -> Result<ProviderBody, BackendError> {
        let (reply_tx, reply_rx) = oneshot::channel();
        let id = {
            let mut state = self.state();
            let no_replica = || BackendError::NoReplica {
                provider: provider.name.to_string(),
            };
            let group = state
                .groups
                .get_mut(&provider.resource_uri)
                .ok_or_else(no_replica)?;
            let serving = group.serving().ok_or_else(no_replica)?;
            // Unguessable and never zero (zero marks unsolicited messages): another replica
            // cannot answer a request it did not see by guessing its id.
            let id = loop {
                let id: u64 = rand::random();
                if id != RequestId::UNSOLICITED.0 && !group.in_flight.contains_key(&id) {
                    break id;
                }
            };
            send(&serving.outbound, RequestId(id), body.clone());
            let sent_to = serving.stream;
            group.in_flight.insert(
                id,
                InFlight {
                    request: body,
                    reply: reply_tx,
                    sent_to,
                },
            );
            id
        };
        match tokio::time::timeout(timeout, reply_rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(BackendError::Disconnected {
                provider: provider.name.to_string(),
            }),
            Err(_) => {
                if let Some(group) = self.state().groups.get_mut(&provider.resource_uri) {
                    group.in_flight.remove(&id);
                }
                Err(BackendError::Timeout {
                    provider: provider.name.to_string(),
                    request: kind,
                    timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })
            }
        }
    }
}

fn replica_rows(group: &Group) -> Vec<ReplicaStatus> {
    let mut rows: Vec<&Attached> = group.replicas.iter().collect();
    rows.sort_by_key(|r| (r.role != ReplicaRole::Serving, r.stream));
    rows.into_iter()
        .map(|r| ReplicaStatus {
            provider_id: group.provider.id.clone(),
            provider: group.provider.name.clone(),
            resource_uri: group.provider.resource_uri.clone(),
            host: r.hello.replica.host.clone(),
            pid: r.hello.replica.pid,
            slot: r.hello.replica.slot,
            version: r.hello.version.clone(),
            role: r.role,
            connected_since: r.since,
        })
        .collect()
}

fn protocol(provider: &Provider, detail: String) -> BackendError {
    BackendError::Protocol {
        provider: provider.name.to_string(),
        detail,
    }
}

fn check_node(provider: &Provider, want: &NodeId, got: &NodeId) -> Result<(), BackendError> {
    if want == got {
        Ok(())
    } else {
        Err(protocol(
            provider,
            format!("the answer for node {want} names node {got}"),
        ))
    }
}

impl NodeBackend for Hub {
    fn quote(
        &self,
        provider: &Provider,
        quote: Quote,
    ) -> impl Future<Output = Result<QuoteReply, BackendError>> + Send {
        let provider = provider.clone();
        async move {
            let node = quote.node_id.clone();
            let timeout = self.inner.options.quote_timeout;
            match self
                .request(&provider, ZoneBody::Quote(quote), "quote", timeout)
                .await?
            {
                ProviderBody::QuoteReply { node_id, reply } => {
                    check_node(&provider, &node, &node_id)?;
                    Ok(reply)
                }
                other => Err(protocol(
                    &provider,
                    format!("a quote was answered with {}", body_name(&other)),
                )),
            }
        }
    }

    fn deploy(
        &self,
        provider: &Provider,
        deploy: Deploy,
    ) -> impl Future<Output = Result<DeployResult, BackendError>> + Send {
        let provider = provider.clone();
        async move {
            let node = deploy.node_id.clone();
            let timeout = self.inner.options.deploy_timeout;
            match self
                .request(&provider, ZoneBody::Deploy(deploy), "deploy", timeout)
                .await?
            {
                ProviderBody::DeployDone(done) => {
                    check_node(&provider, &node, &done.node_id)?;
                    Ok(DeployResult::Deployed(done))
                }
                ProviderBody::DeployRefused { node_id, refusal } => {
                    check_node(&provider, &node, &node_id)?;
                    Ok(DeployResult::Refused(refusal))
                }
                other => Err(protocol(
                    &provider,
                    format!("a deploy was answered with {}", body_name(&other)),
                )),
            }
        }
    }

    fn destroy(
        &self,
        provider: &Provider,
        node: NodeId,
    ) -> impl Future<Output = Result<DestroyResult, BackendError>> + Send {
        let provider = provider.clone();
        async move {
            let timeout = self.inner.options.destroy_timeout;
            let body = ZoneBody::Destroy(orc_proto::Destroy {
                node_id: node.clone(),
            });
            match self.request(&provider, body, "destroy", timeout).await? {
                ProviderBody::DestroyDone { node_id } => {
                    check_node(&provider, &node, &node_id)?;
                    Ok(DestroyResult::Destroyed)
                }
                ProviderBody::DestroyRefused { node_id, refusal } => {
                    check_node(&provider, &node, &node_id)?;
                    Ok(DestroyResult::Refused(refusal))
                }
                other => Err(protocol(
                    &provider,
                    format!("a destroy was answered with {}", body_name(&other)),
                )),
            }
        }
    }

    fn config_changed_at(&self, provider: &Provider) -> Option<Timestamp> {
        self.state()
            .groups
            .get(&provider.resource_uri)
            .map(|g| g.config_changed_at)
    }

    fn site_gateways(&self, provider: &Provider) -> bool {
        self.catalog(provider)
            .is_some_and(|status| status.catalog.site_gateways)
    }
}

/// The message's name, for errors.
fn body_name(body: &ProviderBody) -> &'static str {
    match body {
        ProviderBody::Hello(_) => "hello",
        ProviderBody::Catalog(_) => "catalog",
        ProviderBody::QuoteReply { .. } => "a quote reply",
        ProviderBody::DeployProgress(_) => "deploy progress",
        ProviderBody::DeployDone(_) => "deploy done",
        ProviderBody::DeployRefused { .. } => "deploy refused",
        ProviderBody::DestroyDone { .. } => "destroy done",
        ProviderBody::DestroyRefused { .. } => "destroy refused",
        ProviderBody::Inventory(_) => "inventory",
        ProviderBody::KeepAlive => "keep-alive",
    }
}
