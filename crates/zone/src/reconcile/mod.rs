//! Reconcilers: move pools and nodes from what the store says they are toward what they
//! should be, one step at a time, kube style.
//!
//! A pass reads the due nodes (`store.nodes_due`), decides each one's next step purely
//! ([`nodes::plan`]), writes the claims of all of them in one batched compare-and-set, then
//! sends the claimed requests to the node's backend concurrently. Answers come back through
//! a channel and are written in batches, again by compare-and-set on the version the claim
//! wrote; a node that moved on meanwhile (a resize, an inventory) is left to its new state.
//! There is no retry loop anywhere: every outcome ends with the node's next due time, and
//! the next pass that finds it due is the retry.
//!
//! Invariants:
//! - a request goes out only after its claim is stored, and the claim's lease
//!   (`next_attempt_at`) outlasts the backend's timeout, so no node is asked twice at once
//!   by one zone; after a restart the leases of nodes in `quoting`/`deploying`/`destroying`
//!   are released, so their requests are sent again at once (deploy carries the node id
//!   and the provider finds its earlier work: a restart repeats no create);
//! - a destroy is never sent while this zone has a request of the same node in flight;
//! - the markup is copied onto a node when it is admitted (its first quote) and never
//!   changed afterwards;
//! - time comes from the injected [`Clock`] only.
//!
//! Pools: the store creates and releases nodes when a pool is created, resized or marked
//! deleting; the pool pass refills slots whose node ended without a resize (a replaced lost
//! node) and deletes pools marked deleting once their nodes have ended.

pub mod gateways;
mod inventory;
pub mod nodes;
mod usage;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use orc_proto::{
    Bootstrap, Deploy, DeployResult, DestroyResult, Purpose, Quote, QuoteReply, QuoteToken,
    SiteName,
};
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

pub use inventory::{Inventoried, apply_inventory};
use orc_common::time::SharedClock;
pub use usage::accrue_usage;

use crate::agents::AgentBootstrap;
use crate::backend::{BackendError, Backends, NodeBackend};
use crate::model::{
    EventScope, Expected, Node, NodeId, NodeState, NodeStatus, Org, Pool, PoolId, Project,
    ProjectId, Provider, ProviderId, Timestamp,
};
use crate::pricing::{is_gateway, markup_at_admission};
use crate::store::{StatusWrite, Store, StoreError, StoreResult};
use nodes::{Step, plan};
use orc_zone_apps::CORE_PROVIDER;
use orc_zone_model::gateway::{gateway_pool_site, is_gateway_pool_of};

/// Settings of the reconcilers. `Default` gives the production values.
#[derive(Debug, Clone)]
pub struct ReconcileOptions {
    /// Most nodes read per pass. Default 10,000.
    pub batch: u32,
    /// Backend requests in flight at once. Default 512.
    pub concurrency: usize,
    /// How often to look for due nodes when nothing wakes the loop. Default 1 s.
    pub poll_interval: Duration,
    /// How often the pool pass runs. Default 10 s.
    pub pool_interval: Duration,
    /// `counting` refusals are asked again after this. Default 5 s.
    pub counting_retry: Duration,
    /// `no_capacity` parks the node this long before asking again. Default 60 s.
    pub no_capacity_retry: Duration,
    /// Nodes parked with `operator_fix` check this often whether the provider's configuration
    /// changed (no request is sent unless it did). Default 30 s.
    pub operator_fix_recheck: Duration,
    /// First retry delay of `transient`, `failed` and unreachable providers. Default 2 s.
    pub backoff_initial: Duration,
    /// Cap of that backoff. Default 5 min.
    pub backoff_max: Duration,
    /// Leases: how long a claimed step may go unanswered before it is sent again. They must
    /// exceed the hub's timeouts. Defaults 60 s, 20 min, 15 min.
    pub quote_lease: Duration,
    pub deploy_lease: Duration,
    pub destroy_lease: Duration,
    /// How often a priced running node's usage is written. Default 1 h.
    pub usage_interval: Duration,
    /// How long a lost node waits to be reported again before the zone destroys it (to
    /// remove whatever may be left of it) and its slot gets a new node. Default 5 min.
    pub lost_replace_after: Duration,
    /// A node running this long without its agent having joined is destroyed and its slot
    /// gets a new node, as a lost one. Only nodes deployed with a join token count, and
    /// only when the zone's nodes really boot their bootstrap (real clouds, materialised
    /// emulators); `None` never replaces a node for that (the emulators' record-only mode,
    /// where nothing boots). `orc zone serve` sets 10 min.
    pub join_grace: Option<Duration>,
    /// What a deploy's bootstrap carries so the node's agent joins (a join token minted
    /// per deploy); `None` deploys with an empty bootstrap (a zone without a CA, tests).
    pub bootstrap: Option<Arc<AgentBootstrap>>,
    /// Told when answers changed nodes' states (a node runs, a node ended), so the mesh
    /// pass runs at once instead of at its next interval; `None` tells nobody.
    pub mesh_wake: Option<crate::mesh::MeshSignal>,
}

impl Default for ReconcileOptions {
    fn default() -> Self {
        ReconcileOptions {
            batch: 10_000,
            concurrency: 512,
            poll_interval: Duration::from_secs(1),
            pool_interval: Duration::from_secs(10),
            counting_retry: Duration::from_secs(5),
            no_capacity_retry: Duration::from_secs(60),
            operator_fix_recheck: Duration::from_secs(30),
            backoff_initial: Duration::from_secs(2),
            backoff_max: Duration::from_secs(300),
            quote_lease: Duration::from_secs(60),
            deploy_lease: Duration::from_secs(20 * 60),
            destroy_lease: Duration::from_secs(15 * 60),
            usage_interval: Duration::from_secs(3600),
            lost_replace_after: Duration::from_secs(5 * 60),
            join_grace: None,
            bootstrap: None,
            mesh_wake: None,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Nodes read as due.
    pub due: usize,
    /// Requests sent to backends.
    pub requests: usize,
    /// Claims refused because the node moved on.
    pub conflicts: usize,
    /// Nodes whose usage was written.
    pub accrued: usize,
}

/// Mints `node`'s join token (revoking any earlier one, so a deploy sent again carries the
/// only live token) and renders its bootstrap.
async fn mint_bootstrap(
    store: &Store,
    agent: &AgentBootstrap,
    node: &NodeId,
    now: Timestamp,
) -> Result<String, String> {
    let new = orc_zone_store::NewJoinToken {
        ca_fingerprint: &agent.ca_fingerprint,
        created_by: "zone",
        ttl: agent.ttl,
        product_uuid: None,
    };
    let (_, secret) = store
        .create_join_token(node, &new, now)
        .await
        .map_err(|e| format!("no join token could be minted: {e}"))?;
    agent
        .script(node, &secret)
        .ok_or_else(|| "a bootstrap value would break the script".to_string())
}

/// Why a pass could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the store failed during a reconcile pass")]
    Store(#[from] StoreError),
}

/// Where a node's pool sits, for quotes and billing.
#[derive(Debug, Clone)]
struct PoolContext {
    pool: Pool,
    provider: Provider,
    org: Org,
    project: Project,
    /// The only site its nodes may go to: a gateway's site, or a public pool's (the site
    /// of its address, else of its oldest member).
    pin: Option<String>,
}

impl PoolContext {
    /// Whether the pool is its provider's gateway pool at a site; only then is a node quoted
    /// with purpose `gateway` (see [`orc_zone_model::gateway`]).
    fn is_gateway(&self) -> bool {
        is_gateway_pool_of(&self.pool, &self.provider)
    }

    /// Whether the pool's nodes are never billed (a `gw-*` pool of org `sys`: wider than
    /// [`PoolContext::is_gateway`], so nothing that looks like a gateway is billed).
    fn unbilled(&self) -> bool {
        is_gateway(&self.org.id, self.pool.name.as_str())
    }

    fn billable(&self, status: &NodeStatus) -> bool {
        !self.unbilled()
            && status
                .price
                .as_ref()
                .is_some_and(|p| crate::pricing::hourly_rate(p).is_some())
    }

    /// `<org>/<project>/<pool>`, the pool id providers see.
    fn path(&self) -> String {
        format!("{}/{}/{}", self.org.name, self.project.name, self.pool.name)
    }
}

/// A request sent, waiting for its answer.
#[derive(Debug)]
enum Call {
    Quote(StoreResultOf<QuoteReply>),
    Deploy(StoreResultOf<DeployResult>),
    Destroy(StoreResultOf<DestroyResult>),
}

type StoreResultOf<T> = Result<T, BackendError>;

/// An answered request, with the node as its claim left it.
#[derive(Debug)]
struct Answer {
    node: Node,
    context: Arc<PoolContext>,
    call: Call,
}

struct Shared {
    store: Store,
    backends: Backends,
    clock: SharedClock,
    options: ReconcileOptions,
    semaphore: Arc<Semaphore>,
    answers_tx: mpsc::UnboundedSender<Answer>,
    answers_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Answer>>,
    /// Requests sent and not yet written back.
    outstanding: AtomicUsize,
    /// Nodes with a request in flight from this zone.
    busy: Mutex<BTreeSet<NodeId>>,
    wake: Notify,
}

/// The reconcilers over one store. Drive passes yourself ([`Reconciler::pass`],
/// [`Reconciler::settle`]) or run them in the background with [`Reconcilers::spawn`].
#[derive(Clone)]
pub struct Reconciler {
    shared: Arc<Shared>,
}

impl fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconciler")
            .field("options", &self.shared.options)
            .field(
                "outstanding",
                &self.shared.outstanding.load(Ordering::SeqCst),
            )
            .finish_non_exhaustive()
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Reconciler {
    /// Reconcilers over `store`, sending work to `backends`, reading time from `clock`.
    pub fn new(
        store: Store,
        backends: Backends,
        clock: SharedClock,
        options: ReconcileOptions,
    ) -> Reconciler {
        let (answers_tx, answers_rx) = mpsc::unbounded_channel();
        Reconciler {
            shared: Arc::new(Shared {
                store,
                backends,
                clock,
                semaphore: Arc::new(Semaphore::new(options.concurrency.max(1))),
                options,
                answers_tx,
                answers_rx: tokio::sync::Mutex::new(answers_rx),
                outstanding: AtomicUsize::new(0),
                busy: Mutex::new(BTreeSet::new()),
                wake: Notify::new(),
            }),
        }
    }

    fn now(&self) -> Timestamp {
        self.shared.clock.now()
    }

    fn store(&self) -> &Store {
        &self.shared.store
    }

    fn busy(&self) -> std::sync::MutexGuard<'_, BTreeSet<NodeId>> {
        self.shared
            .busy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Releases the leases of nodes whose request was in flight when the zone stopped, so
    /// those requests are sent again at once. Run once at start.
    pub async fn recover(&self) -> Result<usize, ReconcileError> {
        let now = self.now();
        let mut writes = Vec::new();
        for pool in self.store().list_all_pools().await? {
            for node in self.store().list_nodes_by_pool(&pool.id, false).await? {
                let in_flight = matches!(
                    node.status.state,
                    NodeState::Quoting | NodeState::Deploying | NodeState::Destroying
                );
                if in_flight && node.status.next_attempt_at.is_none_or(|at| at > now) {
                    let mut status = node.status.clone();
                    status.next_attempt_at = Some(now);
                    writes.push(StatusWrite {
                        id: node.id.clone(),
                        expected: Expected::Version(node.version),
                        status,
                    });
                }
            }
        }
        if writes.is_empty() {
            return Ok(0);
        }
        let outcome = self.store().update_node_states(&writes, now).await?;
        Ok(outcome.updated.len())
    }

    /// Loads the pools, providers, orgs and projects the due nodes need.
    async fn contexts(&self, due: &[Node]) -> StoreResult<BTreeMap<PoolId, Arc<PoolContext>>> {
        let wanted: BTreeSet<&PoolId> = due.iter().map(|n| &n.pool_id).collect();
        let providers: BTreeMap<ProviderId, Provider> = self
            .store()
            .list_providers()
            .await?
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
        let mut projects: BTreeMap<ProjectId, (Org, Project)> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for pool in self.store().list_all_pools().await? {
            if !wanted.contains(&pool.id) {
                continue;
            }
            let Some(provider) = providers.get(&pool.spec.provider_id) else {
                continue;
            };
            if !projects.contains_key(&pool.project_id) {
                let project = self.store().get_project(&pool.project_id).await?;
                let org = self.store().get_org(&project.org_id).await?;
                projects.insert(pool.project_id.clone(), (org, project));
            }
            let (org, project) = projects[&pool.project_id].clone();
            let pin = if is_gateway_pool_of(&pool, provider) {
                gateway_pool_site(&pool).map(str::to_string)
            } else if pool.spec.public {
                match self.store().pool_address(&pool.id).await? {
                    Some(address) => Some(address.site),
                    None => self.store().oldest_member_site(&pool.id).await?,
                }
            } else {
                None
            };
            out.insert(
                pool.id.clone(),
                Arc::new(PoolContext {
                    pool,
                    provider: provider.clone(),
                    org,
                    project,
                    pin,
                }),
            );
        }
        Ok(out)
    }

    /// One pass: claims every due node's next step and sends the requests (without waiting
    /// for their answers; see [`Reconciler::settle`]).
    pub async fn pass(&self) -> Result<PassReport, ReconcileError> {
        let now = self.now();
        let options = &self.shared.options;
        let due = self.store().nodes_due(now, options.batch).await?;
        let mut report = PassReport {
            due: due.len(),
            ..PassReport::default()
        };
        if due.is_empty() {
            return Ok(report);
        }
        let contexts = self.contexts(&due).await?;
        let mut writes = Vec::with_capacity(due.len());
        let mut steps = BTreeMap::new();
        {
            let busy = self.busy();
            for node in &due {
                let Some(context) = contexts.get(&node.pool_id) else {
                    continue;
                };
                if busy.contains(&node.id) {
                    let mut status = node.status.clone();
                    status.next_attempt_at = Some(now.plus_millis(millis(options.poll_interval)));
                    writes.push(StatusWrite {
                        id: node.id.clone(),
                        expected: Expected::Version(node.version),
                        status,
                    });
                    continue;
                }
                let markup = markup_at_admission(context.provider.pricing);
                let changed = self.shared.backends.config_changed_at(&context.provider);
                let step = plan(
                    node,
                    options,
                    markup,
                    changed,
                    context.billable(&node.status),
                    now,
                );
                let claim = match &step {
                    Step::Quote(s)
                    | Step::Deploy { claim: s, .. }
                    | Step::Destroy(s)
                    | Step::Accrue(s)
                    | Step::Requeue(s) => s.clone(),
                };
                writes.push(StatusWrite {
                    id: node.id.clone(),
                    expected: Expected::Version(node.version),
                    status: claim,
                });
                steps.insert(node.id.clone(), step);
            }
        }
        let outcome = self.store().update_node_states(&writes, now).await?;
        report.conflicts = outcome.refused.len();
        for node in outcome.updated {
            let Some(step) = steps.remove(&node.id) else {
                continue;
            };
            let Some(context) = contexts.get(&node.pool_id) else {
                continue;
            };
            match step {
                Step::Quote(_) => {
                    report.requests += 1;
                    self.send_quote(node, Arc::clone(context));
                }
                Step::Deploy { quote_token, .. } => {
                    report.requests += 1;
                    self.send_deploy(node, Arc::clone(context), quote_token);
                }
                Step::Destroy(_) => {
                    report.requests += 1;
                    self.send_destroy(node, Arc::clone(context));
                }
                Step::Accrue(_) => {
                    let Some(subject) = context_subject(context, &node) else {
                        continue;
                    };
                    match accrue_usage(self.store(), &subject, now).await {
                        Ok(()) => report.accrued += 1,
                        Err(e) => tracing::warn!(node = %node.id, error = %e, "usage not accrued"),
                    }
                }
                Step::Requeue(_) => {}
            }
        }
        Ok(report)
    }

    fn spawn_call(
        &self,
        node: Node,
        context: Arc<PoolContext>,
        call: impl Future<Output = Call> + Send + 'static,
    ) {
        self.shared.outstanding.fetch_add(1, Ordering::SeqCst);
        self.busy().insert(node.id.clone());
        let shared = Arc::clone(&self.shared);
        tokio::spawn(async move {
            let permit = Arc::clone(&shared.semaphore).acquire_owned().await;
            let call = call.await;
            drop(permit);
            let _ = shared.answers_tx.send(Answer {
                node,
                context,
                call,
            });
            shared.wake.notify_one();
        });
    }

    fn send_quote(&self, node: Node, context: Arc<PoolContext>) {
        let quote = match build_quote(&context, &node) {
            Ok(q) => q,
            Err(detail) => {
                self.shared.outstanding.fetch_add(1, Ordering::SeqCst);
                self.busy().insert(node.id.clone());
                let provider = context.provider.name.to_string();
                let _ = self.shared.answers_tx.send(Answer {
                    node,
                    context,
                    call: Call::Quote(Err(BackendError::Protocol { provider, detail })),
                });
                return;
            }
        };
        let (backends, provider) = (self.shared.backends.clone(), context.provider.clone());
        self.spawn_call(node, context, async move {
            Call::Quote(backends.quote(&provider, quote).await)
        });
    }

    fn send_deploy(&self, node: Node, context: Arc<PoolContext>, quote_token: String) {
        let Ok(quote_token) = QuoteToken::new(quote_token) else {
            // An offer whose token is empty cannot be accepted: ask for another.
            tracing::warn!(node = %node.id, "the provider's offer carried no quote token; quoting again");
            self.send_quote(node, context);
            return;
        };
        let mut deploy = Deploy {
            node_id: node.id.clone(),
            quote_token,
            os: context.pool.spec.os.clone(),
            ssh_keys: context.pool.spec.ssh_keys.clone(),
            bootstrap: Bootstrap::default(),
        };
        let (backends, provider) = (self.shared.backends.clone(), context.provider.clone());
        // App slots of `core` run on this host and need no agent.
        let agent = self
            .shared
            .options
            .bootstrap
            .clone()
            .filter(|_| !provider.is_core());
        let (store, now) = (self.store().clone(), self.shared.clock.now());
        self.spawn_call(node, context, async move {
            if let Some(agent) = agent {
                match mint_bootstrap(&store, &agent, &deploy.node_id, now).await {
                    Ok(script) => deploy.bootstrap = Bootstrap(script.into_bytes()),
                    Err(detail) => return Call::Deploy(Err(BackendError::Bootstrap { detail })),
                }
            }
            Call::Deploy(backends.deploy(&provider, deploy).await)
        });
    }

    fn send_destroy(&self, node: Node, context: Arc<PoolContext>) {
        let node_id = node.id.clone();
        let (backends, provider) = (self.shared.backends.clone(), context.provider.clone());
        self.spawn_call(node, context, async move {
            Call::Destroy(backends.destroy(&provider, node_id).await)
        });
    }

    /// Writes the answers that have arrived, in batches. With `wait`, keeps going until no
    /// request of this reconciler is outstanding.
    pub async fn write_answers(&self, wait: bool) -> Result<usize, ReconcileError> {
        let mut written = 0;
        let mut rx = self.shared.answers_rx.lock().await;
        loop {
            let mut batch = Vec::new();
            while let Ok(answer) = rx.try_recv() {
                batch.push(answer);
                if batch.len() >= 2_000 {
                    break;
                }
            }
            if batch.is_empty() {
                if !wait || self.shared.outstanding.load(Ordering::SeqCst) == 0 {
                    break;
                }
                match rx.recv().await {
                    Some(answer) => batch.push(answer),
                    None => break,
                }
            }
            written += batch.len();
            self.apply_answers(batch).await?;
            if let Some(mesh) = &self.shared.options.mesh_wake {
                mesh.changed(crate::mesh::MeshChange::Everything);
            }
        }
        Ok(written)
    }

    /// Waits until every request sent so far is answered and written.
    pub async fn settle(&self) -> Result<(), ReconcileError> {
        self.write_answers(true).await.map(|_| ())
    }

    fn done(&self, ids: impl IntoIterator<Item = NodeId>) {
        let mut busy = self.busy();
        let mut count = 0;
        for id in ids {
            busy.remove(&id);
            count += 1;
        }
        drop(busy);
        self.shared.outstanding.fetch_sub(count, Ordering::SeqCst);
    }

    async fn apply_answers(&self, answers: Vec<Answer>) -> Result<(), ReconcileError> {
        let now = self.now();
        let options = &self.shared.options;
        let ids: Vec<NodeId> = answers.iter().map(|a| a.node.id.clone()).collect();
        let mut writes = Vec::new();
        let mut opened = Vec::new();
        let mut destroyed = Vec::new();
        let mut deploy_answers = BTreeSet::new();
        let mut events = Vec::new();
        for Answer {
            node,
            context,
            call,
        } in answers
        {
            let claimed = &node.status;
            let status = match call {
                Call::Quote(Ok(QuoteReply::Offer(offer))) => {
                    nodes::after_offer(claimed, &offer, now)
                }
                Call::Quote(Ok(QuoteReply::Refused(refusal)))
                | Call::Deploy(Ok(DeployResult::Refused(refusal))) => {
                    nodes::after_refusal(claimed, &refusal, false, options, now)
                }
                Call::Deploy(Ok(DeployResult::Deployed(deployed))) => {
                    deploy_answers.insert(node.id.to_string());
                    events.push((
                        node.id.clone(),
                        event_scope(&context, &node.id),
                        "node.running",
                        format!("running at site {}", deployed.site),
                    ));
                    let mut status = nodes::after_deployed(claimed, &deployed, false, options, now);
                    let billable = context.billable(&status);
                    if billable {
                        status.next_attempt_at =
                            Some(now.plus_millis(millis(options.usage_interval)));
                        opened.push((node.clone(), Arc::clone(&context)));
                    }
                    status
                }
                Call::Destroy(Ok(DestroyResult::Destroyed)) => {
                    destroyed.push((node, context));
                    continue;
                }
                Call::Destroy(Ok(DestroyResult::Refused(refusal))) => {
                    nodes::after_refusal(claimed, &refusal, true, options, now)
                }
                Call::Quote(Err(e)) | Call::Deploy(Err(e)) | Call::Destroy(Err(e)) => {
                    tracing::info!(node = %node.id, error = %e, "request not answered; retrying later");
                    nodes::after_backend_error(claimed, options, now)
                }
            };
            if let (Some(refusal), Some(words)) = (status.refusal, &status.state_words)
                && status.attempts > claimed.attempts
            {
                let kind = match status.state {
                    NodeState::Parked => "node.parked",
                    NodeState::Pending
                    | NodeState::Quoting
                    | NodeState::Deploying
                    | NodeState::Running
                    | NodeState::Destroying
                    | NodeState::Ended
                    | NodeState::Lost => "node.refused",
                };
                events.push((
                    node.id.clone(),
                    event_scope(&context, &node.id),
                    kind,
                    format!("{words} ({refusal})"),
                ));
            }
            writes.push(StatusWrite {
                id: node.id.clone(),
                expected: Expected::Version(node.version),
                status,
            });
        }
        let outcome = self.store().update_node_states(&writes, now).await;
        self.done(ids);
        let outcome = outcome?;
        for refused in &outcome.refused {
            if let StoreError::Conflict { id, .. } = refused {
                self.after_conflict(id, deploy_answers.contains(id), now)
                    .await;
            }
        }
        let written: BTreeSet<&NodeId> = outcome.updated.iter().map(|n| &n.id).collect();
        for (id, scope, kind, words) in events {
            if written.contains(&id)
                && let Err(e) = self
                    .store()
                    .record_node_event(&scope, kind, &words, now)
                    .await
            {
                tracing::warn!(node = %id, error = %e, "event not recorded");
            }
        }
        for (node, context) in opened {
            if written.contains(&node.id) {
                let subject = context_subject(&context, &node);
                if let Some(subject) = subject
                    && let Err(e) = usage::open_usage(self.store(), &subject, now).await
                {
                    tracing::warn!(node = %node.id, error = %e, "usage line not opened");
                }
            }
        }
        for (node, context) in destroyed {
            // A lost node's billing stopped when it went missing.
            if node.status.lost_at.is_none()
                && let Some(subject) = context_subject(&context, &node)
                && let Err(e) = accrue_usage(self.store(), &subject, now).await
            {
                tracing::warn!(node = %node.id, error = %e, "final usage not written");
                continue;
            }
            match self
                .store()
                .end_node(&node.id, Expected::Version(node.version), None, now)
                .await
            {
                Ok(_) => {
                    let scope = event_scope(&context, &node.id);
                    let words = "ended: its machine is gone and billing stopped";
                    if let Err(e) = self
                        .store()
                        .record_event(&scope, "node.ended", words, now)
                        .await
                    {
                        tracing::warn!(node = %node.id, error = %e, "event not recorded");
                    }
                }
                Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.shared.wake.notify_one();
        Ok(())
    }

    /// A node moved on while its request was out. A deploy that finished for a node that is
    /// now being destroyed (or already ended) must not leave an instance behind: the destroy
    /// is sent again after it.
    async fn after_conflict(&self, id: &str, was_deployed: bool, now: Timestamp) {
        if !was_deployed {
            return;
        }
        let Ok(node_id) = NodeId::parse_minted(id) else {
            return;
        };
        let Ok(node) = self.store().get_node(&node_id).await else {
            return;
        };
        if node.status.state == NodeState::Destroying || node.status.state == NodeState::Ended {
            let mut status = node.status.clone();
            if node.status.state == NodeState::Ended {
                let Ok(contexts) = self.contexts(std::slice::from_ref(&node)).await else {
                    return;
                };
                if let Some(context) = contexts.get(&node.pool_id) {
                    self.send_destroy(node, Arc::clone(context));
                }
                return;
            }
            status.next_attempt_at = Some(now);
            let _ = self
                .store()
                .update_node_state(&node.id, Expected::Version(node.version), &status, now)
                .await;
        }
    }

    /// Destroys running nodes whose agent did not join within `grace`; once each has ended,
    /// the pool pass gives its slot a new node.
    async fn replace_unjoined(&self, grace: Duration) -> Result<usize, ReconcileError> {
        let now = self.now();
        let before = Timestamp::from_unix_millis(
            now.millis()
                .saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX)),
        );
        let overdue = self
            .store()
            .running_nodes_without_agent(before, CORE_PROVIDER)
            .await?;
        let minutes = grace.as_secs().div_ceil(60);
        let words = format!(
            "its agent did not join within {minutes} min of the node running; the node is \
             replaced (its console log tells why the bootstrap failed)"
        );
        let mut replaced = 0;
        for node in overdue {
            let mut status = node.status.clone();
            status.state = NodeState::Destroying;
            status.state_words = Some(words.clone());
            status.next_attempt_at = Some(now);
            match self
                .store()
                .update_node_state(&node.id, Expected::Version(node.version), &status, now)
                .await
            {
                Ok(_) => {
                    replaced += 1;
                    tracing::warn!(node = %node.id, minutes, "no agent joined; replacing the node");
                    let scope = EventScope {
                        pool_id: Some(node.pool_id.clone()),
                        node_id: Some(node.id.clone()),
                        ..EventScope::default()
                    };
                    if let Err(e) = self
                        .store()
                        .record_event(&scope, "node.unjoined", &words, now)
                        .await
                    {
                        tracing::warn!(node = %node.id, error = %e, "event not recorded");
                    }
                }
                // Moved on meanwhile (an agent joined, the pool shrank): nothing to do.
                Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if replaced > 0 {
            self.shared.wake.notify_one();
        }
        Ok(replaced)
    }

    /// The pool pass: gives free slots of pools new nodes (after a lost node was
    /// replaced), and deletes pools marked deleting whose nodes have all ended. Returns how
    /// many pools it deleted.
    pub async fn pool_pass(&self) -> Result<usize, ReconcileError> {
        if let Some(grace) = self.shared.options.join_grace {
            self.replace_unjoined(grace).await?;
        }
        let gateways =
            gateways::gateway_pass(self.store(), &self.shared.backends, self.now()).await?;
        if !gateways.opened.is_empty() || !gateways.closed.is_empty() {
            self.shared.wake.notify_one();
        }
        for id in self.store().pools_with_free_slots().await? {
            let created = self.store().refill_pool(&id, self.now()).await?;
            if !created.is_empty() {
                tracing::info!(pool = %id, nodes = created.len(), "free slots get new nodes");
                self.shared.wake.notify_one();
            }
        }
        let mut deleted = 0;
        for pool in self.store().list_all_pools().await? {
            if !pool.deleting {
                continue;
            }
            if self
                .store()
                .list_nodes_by_pool(&pool.id, false)
                .await?
                .is_empty()
            {
                match self.store().delete_pool(&pool.id).await {
                    Ok(()) => deleted += 1,
                    Err(StoreError::NotFound { .. } | StoreError::Invalid { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(deleted)
    }

    /// Wakes the background loop (something changed: a pool was created or resized).
    pub fn wake(&self) {
        self.shared.wake.notify_one();
    }
}

/// Which objects an event about `node` of this pool concerns.
fn event_scope(context: &PoolContext, node: &NodeId) -> EventScope {
    EventScope {
        org_id: Some(context.org.id.clone()),
        project_id: Some(context.project.id.clone()),
        provider_id: Some(context.provider.id.clone()),
        pool_id: Some(context.pool.id.clone()),
        node_id: Some(node.clone()),
    }
}

/// The billing subject of `node` read from the store: `None` when the node is not billed
/// (unpriced, a gateway, a one-off price, or its pool is gone).
pub(crate) async fn billing_subject_for(
    store: &Store,
    node: &Node,
) -> StoreResult<Option<crate::pricing::BillingSubject>> {
    let pool = match store.get_pool(&node.pool_id).await {
        Ok(p) => p,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let provider = store.get_provider(&pool.spec.provider_id).await?;
    let project = store.get_project(&pool.project_id).await?;
    let org = store.get_org(&project.org_id).await?;
    let context = PoolContext {
        pool,
        provider,
        org,
        project,
        pin: None,
    };
    Ok(context_subject(&context, node))
}

fn context_subject(context: &PoolContext, node: &Node) -> Option<crate::pricing::BillingSubject> {
    if context.unbilled() {
        return None;
    }
    let rate = crate::pricing::hourly_rate(node.status.price.as_ref()?)?;
    Some(crate::pricing::BillingSubject {
        project_id: context.pool.project_id.clone(),
        pool_id: context.pool.id.clone(),
        node_id: node.id.clone(),
        description: crate::pricing::price_line(
            &context.pool.spec.shape,
            context.pool.spec.region_class.as_str(),
        ),
        rate,
        public_ipv4: context.pool.spec.public,
    })
}

fn build_quote(context: &PoolContext, node: &Node) -> Result<Quote, String> {
    let spec = &context.pool.spec;
    Ok(Quote {
        pool: orc_proto::PoolPath::new(context.path()).map_err(|e| e.to_string())?,
        node_id: node.id.clone(),
        purpose: if context.is_gateway() {
            Purpose::Gateway
        } else {
            Purpose::Tenant
        },
        shape: spec.shape.clone(),
        class: spec.region_class.clone(),
        os: spec.os.clone(),
        pinned_site: context
            .pin
            .as_deref()
            .map(SiteName::new)
            .transpose()
            .map_err(|e| format!("pool {}: pinned site: {e}", context.pool.id))?,
        public: spec.public,
        placement: spec.placement.clone(),
        preview: false,
    })
}

/// Handle on reconcilers running in the background.
#[derive(Debug)]
pub struct ReconcilerHandle {
    reconciler: Reconciler,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl ReconcilerHandle {
    /// Asks for a pass now (after a pool change).
    pub fn wake(&self) {
        self.reconciler.wake();
    }

    /// The reconciler the loop drives.
    pub fn reconciler(&self) -> &Reconciler {
        &self.reconciler
    }

    /// Stops the loop and waits for it; requests still out finish in the background and
    /// their nodes are sent again after the next start (their leases are released then).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.reconciler.wake();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ReconcilerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts the reconcilers in the background.
#[derive(Debug)]
pub struct Reconcilers;

impl Reconcilers {
    /// Recovers leases left by a previous run, then runs passes whenever woken, when answers
    /// arrive, and at least every `poll_interval`; pool passes every `pool_interval`.
    pub fn spawn(
        store: Store,
        backends: Backends,
        clock: SharedClock,
        options: ReconcileOptions,
    ) -> ReconcilerHandle {
        let reconciler = Reconciler::new(store, backends, clock, options);
        let (stop, mut stopped) = watch::channel(false);
        let looped = reconciler.clone();
        let task = tokio::spawn(async move {
            if let Err(e) = looped.recover().await {
                tracing::warn!(error = %e, "lease recovery failed");
            }
            let poll = looped.shared.options.poll_interval;
            let pool_every = looped.shared.options.pool_interval;
            let mut last_pool_pass: Option<tokio::time::Instant> = None;
            loop {
                if *stopped.borrow() {
                    break;
                }
                if let Err(e) = looped.write_answers(false).await {
                    tracing::warn!(error = %e, "answers not written");
                }
                if let Err(e) = looped.pass().await {
                    tracing::warn!(error = %e, "reconcile pass failed");
                }
                if last_pool_pass.is_none_or(|at| at.elapsed() >= pool_every) {
                    if let Err(e) = looped.pool_pass().await {
                        tracing::warn!(error = %e, "pool pass failed");
                    }
                    last_pool_pass = Some(tokio::time::Instant::now());
                }
                tokio::select! {
                    () = looped.shared.wake.notified() => {}
                    () = tokio::time::sleep(poll) => {}
                    _ = stopped.changed() => {}
                }
            }
        });
        ReconcilerHandle {
            reconciler,
            stop,
            task: Some(task),
        }
    }
}
